//! The MCAP export's writer: events, summaries, incidents, knowledge-base commits and
//! accounting as JSON messages on channels of their own, in compressed chunks with a
//! summary section and indexes, as Foxglove and the `mcap` readers open them. The rows
//! come from the export's one row source ([`crate::export`]); this file writes them.
//!
//! The layout (GUIDE.md, "Opening an export in Foxglove"):
//!
//! - one channel per event kind, topic `/KIND`; one per summarized kind, topic
//!   `/KIND/summary`; `/blackbox/incidents`, `/blackbox/kb` and `/blackbox/accounting`.
//!   Every channel's message encoding is `json`, with a JSON Schema (schema encoding
//!   `jsonschema`) per record type: `blackbox.Event`, `blackbox.Summary`,
//!   `blackbox.Incident`, `blackbox.KbCommit`, `blackbox.Accounting`. Each channel's
//!   metadata says `blackbox.type` (`event`, `summary`, `incident`, `kb`, `accounting`)
//!   and, for an event or summary channel, `blackbox.kind`.
//! - `log_time` is when what the message tells happened (an event's recording time, a
//!   summary window's start, an incident's trigger); `publish_time` is when the log
//!   wrote the record.
//! - one metadata record `blackbox`: the log's digest and the export's query.

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::Path;

use mcap::records::MessageHeader;
use mcap::write::NoSeek;
use serde_json::{Value, json};

use super::{Hashing, Row, RowPayload, RowSink};
use crate::decode::{Accounting, Body, BodyRef, Incident, KbCommit, RecordType, Summary};
use crate::error::{Error, Result};
use crate::json::{counters_json, hex};
use crate::manifest::{ExportManifest, FileSummary, KindRows};

/// How an MCAP export compresses its chunks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum McapCompression {
    /// zstd (the default).
    #[default]
    Zstd,
    /// lz4: faster, larger.
    Lz4,
    /// None.
    None,
}

impl McapCompression {
    /// The name in the manifest and on the command line: `zstd`, `lz4`, `none`.
    pub fn name(self) -> &'static str {
        match self {
            McapCompression::Zstd => "zstd",
            McapCompression::Lz4 => "lz4",
            McapCompression::None => "none",
        }
    }

    /// The compression [`McapCompression::name`] names.
    pub fn parse(name: &str) -> Option<McapCompression> {
        [
            McapCompression::Zstd,
            McapCompression::Lz4,
            McapCompression::None,
        ]
        .into_iter()
        .find(|c| c.name() == name)
    }
}

/// The record types an MCAP export carries besides events.
pub(crate) const EXTRA_TYPES: &[RecordType] = &[
    RecordType::Summary,
    RecordType::Incident,
    RecordType::Kb,
    RecordType::Accounting,
];

/// The topics of the records that are not about one kind.
pub const INCIDENTS_TOPIC: &str = "/blackbox/incidents";
/// See [`INCIDENTS_TOPIC`].
pub const KB_TOPIC: &str = "/blackbox/kb";
/// See [`INCIDENTS_TOPIC`].
pub const ACCOUNTING_TOPIC: &str = "/blackbox/accounting";

/// The channel metadata key that says what a channel carries.
const TYPE_KEY: &str = "blackbox.type";
/// The channel metadata key that names an event or summary channel's kind.
const KIND_KEY: &str = "blackbox.kind";

/// The record types with a schema of their own, in schema-slot order.
#[derive(Clone, Copy)]
enum Slot {
    Event = 0,
    Summary = 1,
    Incident = 2,
    Kb = 3,
    Accounting = 4,
}

impl Slot {
    fn type_name(self) -> &'static str {
        match self {
            Slot::Event => "event",
            Slot::Summary => "summary",
            Slot::Incident => "incident",
            Slot::Kb => "kb",
            Slot::Accounting => "accounting",
        }
    }

    fn schema_name(self) -> &'static str {
        match self {
            Slot::Event => "blackbox.Event",
            Slot::Summary => "blackbox.Summary",
            Slot::Incident => "blackbox.Incident",
            Slot::Kb => "blackbox.KbCommit",
            Slot::Accounting => "blackbox.Accounting",
        }
    }

    /// The JSON Schema of the messages of this type.
    fn schema(self) -> Value {
        let int = json!({"type": "integer"});
        let num_or_null = json!({"type": ["number", "null"]});
        let (title, properties) = match self {
            Slot::Event => (
                "A Blackbox event",
                json!({
                    "seq": int,
                    "kind": {"type": "string"},
                    "tier": {"type": "string", "enum": ["full", "sample", "preroll", "postroll"]},
                    "weight": {"type": "number"},
                    "source": {"type": ["string", "null"]},
                    "recorded_ns": int,
                    "written_ns": int,
                    "event_time_ns": {"type": ["integer", "null"]},
                    "values": {"type": "object", "additionalProperties": num_or_null},
                    "encoding": {"type": "string", "enum": ["json", "raw", "none"]},
                    "payload": {"description": "the JSON payload; null for a raw payload or none"},
                    "payload_base64": {"type": "string", "contentEncoding": "base64",
                        "description": "a raw payload's bytes (only for encoding raw)"},
                    "hash": {"type": "string", "description": "the record's content hash (hex)"},
                }),
            ),
            Slot::Summary => (
                "A Blackbox summary window of one kind",
                json!({
                    "kind": {"type": "string"},
                    "window_start_ns": int,
                    "window_end_ns": int,
                    "count": int,
                    "values": {"type": "object", "additionalProperties": {
                        "type": "object",
                        "properties": {
                            "count": int, "min": num_or_null, "max": num_or_null,
                            "mean": num_or_null, "sum": num_or_null, "last": num_or_null,
                        },
                    }},
                    "seq": int,
                }),
            ),
            Slot::Incident => (
                "A Blackbox incident",
                json!({
                    "trigger_kind": {"type": "string"},
                    "trigger_seq": int,
                    "trigger_ts_ns": int,
                    "preroll_start_ns": int,
                    "postroll_end_ns": int,
                    "preroll_events": int,
                    "seq": int,
                }),
            ),
            Slot::Kb => (
                "A Blackbox knowledge-base commit",
                json!({"commit": {"type": "object"}, "seq": int}),
            ),
            Slot::Accounting => (
                "Blackbox per-kind counters",
                json!({
                    "snapshot": {"type": "boolean"},
                    "watermark_ns": {"type": ["integer", "null"]},
                    "kinds": {"type": "object", "additionalProperties": {"type": "object"}},
                    "seq": int,
                }),
            ),
        };
        json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "title": title,
            "type": "object",
            "properties": properties,
        })
    }
}

/// A channel written to: its id and the next message's sequence number.
#[derive(Clone, Copy)]
struct Channel {
    id: u16,
    sequence: u32,
}

/// The MCAP sink: a [`RowSink`] writing through the `mcap` crate, without seeking
/// (the bytes are hashed as they go out, and stdout works too).
pub(crate) struct McapSink<'a> {
    writer: Option<mcap::Writer<NoSeek<Hashing<&'a mut dyn Write>>>>,
    schemas: [Option<u16>; 5],
    events: HashMap<String, Channel>,
    summaries: HashMap<String, Channel>,
    fixed: [Option<Channel>; 5],
    buf: Vec<u8>,
}

impl<'a> McapSink<'a> {
    /// A sink writing an MCAP file into `w`.
    pub(crate) fn new(
        w: Hashing<&'a mut dyn Write>,
        compression: McapCompression,
    ) -> Result<McapSink<'a>> {
        let compression = match compression {
            McapCompression::Zstd => Some(mcap::Compression::Zstd),
            McapCompression::Lz4 => Some(mcap::Compression::Lz4),
            McapCompression::None => None,
        };
        let writer = mcap::WriteOptions::new()
            .compression(compression)
            .library(concat!("blackbox ", env!("CARGO_PKG_VERSION")))
            .disable_seeking(true)
            // One thread: the same bytes on every machine, so that `export --check
            // --dir` derives the file again.
            .compression_threads(0)
            .create(NoSeek::new(w))
            .map_err(write_error)?;
        Ok(McapSink {
            writer: Some(writer),
            schemas: [None; 5],
            events: HashMap::new(),
            summaries: HashMap::new(),
            fixed: [None; 5],
            buf: Vec::with_capacity(1024),
        })
    }

    /// Ends the file: the bytes written and their blake3.
    pub(crate) fn finish(&mut self) -> Result<(u64, [u8; 32])> {
        let Some(mut writer) = self.writer.take() else {
            return Err(write_error(mcap::McapError::UnexpectedEof));
        };
        writer.finish().map_err(write_error)?;
        Ok(writer.into_inner().into_inner().digest())
    }

    fn writer(&mut self) -> Result<&mut mcap::Writer<NoSeek<Hashing<&'a mut dyn Write>>>> {
        self.writer
            .as_mut()
            .ok_or_else(|| write_error(mcap::McapError::UnexpectedEof))
    }

    /// The channel of `topic` carrying `slot`'s records, added on first use.
    fn add_channel(&mut self, slot: Slot, topic: &str, kind: Option<&str>) -> Result<Channel> {
        let schema = match self.schemas[slot as usize] {
            Some(id) => id,
            None => {
                let text = serde_json::to_vec(&slot.schema())
                    .map_err(|e| write_error(mcap::McapError::Io(std::io::Error::other(e))))?;
                let id = self
                    .writer()?
                    .add_schema(slot.schema_name(), "jsonschema", &text)
                    .map_err(write_error)?;
                self.schemas[slot as usize] = Some(id);
                id
            }
        };
        let mut metadata = BTreeMap::new();
        metadata.insert(TYPE_KEY.to_owned(), slot.type_name().to_owned());
        if let Some(kind) = kind {
            metadata.insert(KIND_KEY.to_owned(), kind.to_owned());
        }
        let id = self
            .writer()?
            .add_channel(schema, topic, "json", &metadata)
            .map_err(write_error)?;
        Ok(Channel { id, sequence: 0 })
    }

    /// Writes `self.buf` as the next message of `channel`.
    fn write(&mut self, channel: &mut Channel, log_time: u64, publish_time: u64) -> Result<()> {
        let header = MessageHeader {
            channel_id: channel.id,
            sequence: channel.sequence,
            log_time,
            publish_time,
        };
        channel.sequence = channel.sequence.wrapping_add(1);
        let writer = self
            .writer
            .as_mut()
            .ok_or_else(|| write_error(mcap::McapError::UnexpectedEof))?;
        writer
            .write_to_known_channel(&header, &self.buf)
            .map_err(write_error)
    }

    /// A record of a fixed channel (`slot` is incident, kb or accounting).
    fn write_fixed(
        &mut self,
        slot: Slot,
        message: &Value,
        log_time: u64,
        written: u64,
    ) -> Result<()> {
        let mut channel = match self.fixed[slot as usize] {
            Some(c) => c,
            None => {
                let topic = match slot {
                    Slot::Incident => INCIDENTS_TOPIC,
                    Slot::Kb => KB_TOPIC,
                    _ => ACCOUNTING_TOPIC,
                };
                self.add_channel(slot, topic, None)?
            }
        };
        self.buf.clear();
        serde_json::to_writer(&mut self.buf, message)
            .map_err(|e| write_error(mcap::McapError::Io(std::io::Error::other(e))))?;
        self.write(&mut channel, log_time, written)?;
        self.fixed[slot as usize] = Some(channel);
        Ok(())
    }
}

/// A write failure: the output's own I/O error when there is one (so that a closed
/// stdout reads as a broken pipe), else the `mcap` crate's.
fn write_error(e: mcap::McapError) -> Error {
    let source = match e {
        mcap::McapError::Io(e) => e,
        e => std::io::Error::other(e.to_string()),
    };
    super::io("write", Path::new("MCAP export"), source)
}

/// One record besides an event, borrowed from either form of [`Row`].
enum Other<'r> {
    Summary(&'r Summary),
    Incident(&'r Incident),
    Kb(&'r KbCommit),
    Accounting(&'r Accounting),
}

fn other<'r>(row: &'r Row<'_>) -> Option<(u64, u64, Other<'r>)> {
    let (seq, ts) = (row.seq(), row.written_ns());
    let o = match row {
        Row::View(r) => match &r.body {
            BodyRef::Summary(s) => Other::Summary(s),
            BodyRef::Incident(i) => Other::Incident(i),
            BodyRef::Kb(k) => Other::Kb(k),
            BodyRef::Accounting(a) => Other::Accounting(a),
            _ => return None,
        },
        Row::Owned(r) => match &r.body {
            Body::Summary(s) => Other::Summary(s),
            Body::Incident(i) => Other::Incident(i),
            Body::Kb(k) => Other::Kb(k),
            Body::Accounting(a) => Other::Accounting(a),
            _ => return None,
        },
    };
    Some((seq, ts, o))
}

impl RowSink for McapSink<'_> {
    fn extra_types(&self) -> &'static [RecordType] {
        EXTRA_TYPES
    }

    fn describe(&mut self, m: &ExportManifest) -> Result<()> {
        let query = json!({
            "since_ns": m.since_ns,
            "until_ns": m.until_ns,
            "from_seq": m.from_seq,
            "to_seq": m.to_seq,
            "kinds": m.kinds,
            "include_unweighted": m.include_unweighted,
            "salvage": m.salvage,
        });
        let mut metadata = BTreeMap::new();
        metadata.insert(
            "log_digest".to_owned(),
            m.log_digest
                .map_or_else(|| "none".to_owned(), |d| d.to_string()),
        );
        metadata.insert("query".to_owned(), query.to_string());
        metadata.insert(
            "tool".to_owned(),
            concat!("blackbox ", env!("CARGO_PKG_VERSION")).to_owned(),
        );
        self.writer()?
            .write_metadata(&mcap::records::Metadata {
                name: "blackbox".to_owned(),
                metadata,
            })
            .map_err(write_error)
    }

    fn row(&mut self, row: &Row<'_>, weight: f64, hash: [u8; 32]) -> Result<()> {
        let Some((kind, tier, _)) = row.event() else {
            return Ok(());
        };
        let (recorded_ns, written_ns) = (row.happened_ns(), row.written_ns());
        let mut channel = match self.events.get(kind) {
            Some(c) => *c,
            None => self.add_channel(Slot::Event, &format!("/{kind}"), Some(kind))?,
        };
        let b = &mut self.buf;
        b.clear();
        b.extend_from_slice(b"{\"seq\":");
        push_u64(b, row.seq());
        b.extend_from_slice(b",\"kind\":");
        push_str(b, kind);
        b.extend_from_slice(b",\"tier\":\"");
        b.extend_from_slice(tier.name().as_bytes());
        b.extend_from_slice(b"\",\"weight\":");
        push_f64(b, weight);
        b.extend_from_slice(b",\"source\":");
        match row.source() {
            Some(s) => push_str(b, s),
            None => b.extend_from_slice(b"null"),
        }
        b.extend_from_slice(b",\"recorded_ns\":");
        push_u64(b, recorded_ns);
        b.extend_from_slice(b",\"written_ns\":");
        push_u64(b, written_ns);
        b.extend_from_slice(b",\"event_time_ns\":");
        match row.event_time_ns() {
            Some(t) => push_u64(b, t),
            None => b.extend_from_slice(b"null"),
        }
        b.extend_from_slice(b",\"values\":{");
        let mut first = true;
        row.for_each_value(|name, v| {
            if !first {
                b.push(b',');
            }
            first = false;
            push_str(b, name);
            b.push(b':');
            push_f64(b, v);
        });
        b.extend_from_slice(b"},");
        match row.payload() {
            RowPayload::None => b.extend_from_slice(b"\"encoding\":\"none\",\"payload\":null"),
            RowPayload::Json(text) => {
                b.extend_from_slice(b"\"encoding\":\"json\",\"payload\":");
                b.extend_from_slice(text.as_bytes());
            }
            // A raw payload, or text recorded as JSON that is not.
            RowPayload::Raw(bytes) => {
                b.extend_from_slice(b"\"encoding\":\"raw\",\"payload\":null,\"payload_base64\":\"");
                push_base64(b, bytes);
                b.push(b'"');
            }
        }
        b.extend_from_slice(b",\"hash\":\"");
        b.extend_from_slice(hex(&hash).as_bytes());
        b.extend_from_slice(b"\"}");
        self.write(&mut channel, recorded_ns, written_ns)?;
        match self.events.get_mut(kind) {
            Some(c) => *c = channel,
            None => {
                self.events.insert(kind.to_owned(), channel);
            }
        }
        Ok(())
    }

    fn record(&mut self, row: &Row<'_>) -> Result<()> {
        let Some((seq, written, o)) = other(row) else {
            return Ok(());
        };
        match o {
            Other::Summary(s) => {
                let mut channel = match self.summaries.get(&s.kind) {
                    Some(c) => *c,
                    None => self.add_channel(
                        Slot::Summary,
                        &format!("/{}/summary", s.kind),
                        Some(&s.kind),
                    )?,
                };
                let values: serde_json::Map<String, Value> = s
                    .values
                    .iter()
                    .map(|(name, v)| {
                        (
                            name.clone(),
                            json!({
                                "count": v.count, "min": v.min, "max": v.max,
                                "mean": v.mean, "sum": v.sum, "last": v.last,
                            }),
                        )
                    })
                    .collect();
                let message = json!({
                    "kind": s.kind,
                    "window_start_ns": s.window_start_ns,
                    "window_end_ns": s.window_end_ns,
                    "count": s.count,
                    "values": values,
                    "seq": seq,
                });
                self.buf.clear();
                serde_json::to_writer(&mut self.buf, &message)
                    .map_err(|e| write_error(mcap::McapError::Io(std::io::Error::other(e))))?;
                self.write(&mut channel, s.window_start_ns, written)?;
                self.summaries.insert(s.kind.clone(), channel);
                Ok(())
            }
            Other::Incident(i) => {
                let message = json!({
                    "trigger_kind": i.trigger_kind,
                    "trigger_seq": i.trigger_seq,
                    "trigger_ts_ns": i.trigger_ts_ns,
                    "preroll_start_ns": i.preroll_start_ns,
                    "postroll_end_ns": i.postroll_end_ns,
                    "preroll_events": i.preroll_events,
                    "seq": seq,
                });
                self.write_fixed(Slot::Incident, &message, i.trigger_ts_ns, written)
            }
            Other::Kb(k) => {
                let message = json!({"commit": k.commit, "seq": seq});
                self.write_fixed(Slot::Kb, &message, written, written)
            }
            Other::Accounting(a) => {
                let kinds: serde_json::Map<String, Value> = a
                    .kinds
                    .iter()
                    .map(|(k, c)| (k.clone(), counters_json(c)))
                    .collect();
                let message = json!({
                    "snapshot": a.snapshot,
                    "watermark_ns": (a.watermark_ns != 0).then_some(a.watermark_ns),
                    "kinds": kinds,
                    "seq": seq,
                });
                self.write_fixed(Slot::Accounting, &message, written, written)
            }
        }
    }
}

fn push_u64(b: &mut Vec<u8>, n: u64) {
    // Cannot fail: writing into a vector.
    let _ = write!(b, "{n}");
}

fn push_f64(b: &mut Vec<u8>, v: f64) {
    // JSON has no infinity nor NaN: serde_json writes null for them.
    let _ = serde_json::to_writer(&mut *b, &v);
}

fn push_str(b: &mut Vec<u8>, s: &str) {
    let _ = serde_json::to_writer(&mut *b, s);
}

/// Standard base64 with padding (RFC 4648 §4).
pub(crate) fn push_base64(b: &mut Vec<u8>, bytes: &[u8]) {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut chunks = bytes.chunks_exact(3);
    for c in &mut chunks {
        let n = u32::from(c[0]) << 16 | u32::from(c[1]) << 8 | u32::from(c[2]);
        for shift in [18, 12, 6, 0] {
            b.push(ALPHABET[((n >> shift) & 63) as usize]);
        }
    }
    match *chunks.remainder() {
        [x] => {
            let n = u32::from(x) << 16;
            b.push(ALPHABET[((n >> 18) & 63) as usize]);
            b.push(ALPHABET[((n >> 12) & 63) as usize]);
            b.extend_from_slice(b"==");
        }
        [x, y] => {
            let n = u32::from(x) << 16 | u32::from(y) << 8;
            b.push(ALPHABET[((n >> 18) & 63) as usize]);
            b.push(ALPHABET[((n >> 12) & 63) as usize]);
            b.push(ALPHABET[((n >> 6) & 63) as usize]);
            b.push(b'=');
        }
        _ => {}
    }
}

/// Reads an MCAP export back as [`check_export`](crate::check_export) compares it with
/// its manifest: bytes, blake3, and the messages of its event channels as rows (seq,
/// hash, kind and weight read from each).
pub(crate) fn summarize_mcap(path: &Path) -> Result<FileSummary> {
    let mut s = FileSummary::default();
    let mut event_channels: HashMap<u16, String> = HashMap::new();
    let (bytes, blake3) = crate::mcap_read::read_mcap(path, &mut |record, _offset| {
        match record {
            mcap::records::Record::Channel(c) => {
                if c.metadata.get(TYPE_KEY).map(String::as_str) == Some("event")
                    && let Some(kind) = c.metadata.get(KIND_KEY)
                {
                    event_channels.insert(c.id, kind.clone());
                }
            }
            mcap::records::Record::Message { header, data } => {
                let Some(kind) = event_channels.get(&header.channel_id) else {
                    return Ok(());
                };
                s.rows += 1;
                let row: Option<Value> = serde_json::from_slice(&data).ok();
                let parsed = row.as_ref().and_then(|v| {
                    Some((
                        v["seq"].as_u64()?,
                        v["hash"].as_str()?.to_owned(),
                        v["weight"].as_f64()?,
                    ))
                });
                match parsed {
                    Some((seq, hash, weight)) => {
                        if s.first.is_none() {
                            s.first = Some((seq, hash.clone()));
                        }
                        s.last = Some((seq, hash));
                        let k: &mut KindRows = s.per_kind.entry(kind.clone()).or_default();
                        k.rows += 1;
                        k.weight_sum += weight;
                    }
                    None => {
                        s.bad_row.get_or_insert((
                            s.rows,
                            "it is not an exported event (JSON with seq, hash and weight)"
                                .to_owned(),
                        ));
                    }
                }
            }
            _ => {}
        }
        Ok(())
    })?;
    s.bytes = bytes;
    s.blake3 = blake3;
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The encoder agrees with RFC 4648's test vectors (§10).
    #[test]
    fn base64_is_rfc_4648() {
        let cases: [(&str, &str); 7] = [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ];
        for (input, expected) in cases {
            let mut out = Vec::new();
            push_base64(&mut out, input.as_bytes());
            assert_eq!(String::from_utf8_lossy(&out), expected, "{input:?}");
        }
    }
}
