//! Export for training data: JSONL, one event a line with its export weight, and a
//! manifest beside it that proves what the file holds and where it came from.

use std::collections::BTreeMap;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use blackbox::LogReader;
use blackbox::log::ReaderOptions;
use serde_json::Value;

use blackbox::codec::WrittenTier;

use crate::decode::{Body, BodyRef, Payload, PayloadRef, Record, RecordRef, RecordType};
use crate::error::{Error, Result};
use crate::inputs::open_log_dir;
use crate::json::to_json;
use crate::manifest::{CheckReport, Excluded, ExportManifest, KindRows, manifest_path};
use crate::output::AtomicFile;
use crate::query::{Order, Query};
use crate::replay::Replay;
use crate::salvage::Salvaged;
use crate::weights::Weights;

/// How to export, beyond what the [`Query`] selects.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExportOptions {
    /// Also export the events of kinds whose events were summarized or dropped (the
    /// log holds only those written around incidents), each at weight 1. Left out by
    /// default: they are not a sample of their stream, and the manifest says so.
    pub include_unweighted: bool,
    /// Read around damage ([`salvage`](crate::salvage())): every intact event, and the
    /// manifest lists each stretch lost (and has no log digest: a damaged log proves no
    /// prefix).
    pub salvage: bool,
    /// The file format.
    pub format: ExportFormat,
}

/// An export's file format.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ExportFormat {
    /// JSON lines, one event a line.
    #[default]
    Jsonl,
    /// MCAP (Foxglove, ROS 2): events, summaries, incidents, knowledge-base commits and
    /// accounting on channels of their own, in compressed chunks
    /// ([`export_mcap`](crate::export_mcap) says the layout).
    Mcap(McapCompression),
}

impl ExportFormat {
    /// The name in the manifest's `format` field and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            ExportFormat::Jsonl => "jsonl",
            ExportFormat::Mcap(_) => "mcap",
        }
    }
}

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

/// Where an export's rows go: one format's writer. The rows come from one source for
/// every format (the query, a salvage, the weights, the cut-off at the log's digest);
/// a sink writes what it is given, and says which records besides events it carries.
pub(crate) trait ExportSink {
    /// The record types besides events the format carries, in log order among them.
    fn extra_types(&self) -> &'static [RecordType] {
        &[]
    }

    /// One exported event at its export weight; `hash` is its record's content hash.
    fn event(&mut self, row: &Row<'_>, hash: [u8; 32], weight: f64) -> Result<()>;

    /// One record of a type [`ExportSink::extra_types`] lists.
    fn record(&mut self, _row: &Row<'_>) -> Result<()> {
        Ok(())
    }

    /// The query and the log's digest, before the first row (for a format that records
    /// them in the file).
    fn start(&mut self, _manifest: &ExportManifest) -> Result<()> {
        Ok(())
    }

    /// Ends the file: the bytes written and their blake3.
    fn finish(&mut self) -> Result<(u64, [u8; 32])>;
}

/// The JSONL sink: one event a line as [`to_json`] renders it, with its weight.
struct JsonlSink<'a> {
    w: Hashing<'a>,
}

impl ExportSink for JsonlSink<'_> {
    fn event(&mut self, row: &Row<'_>, hash: [u8; 32], weight: f64) -> Result<()> {
        let target = Path::new("export file");
        let mut row = row.json(hash);
        if let Value::Object(o) = &mut row {
            o.insert("weight".into(), weight.into());
        }
        serde_json::to_writer(&mut self.w, &row).map_err(|e| io("write", target, e.into()))?;
        self.w.write_all(b"\n").map_err(|e| io("write", target, e))
    }

    fn finish(&mut self) -> Result<(u64, [u8; 32])> {
        Ok((self.w.bytes, *self.w.hasher.finalize().as_bytes()))
    }
}

/// The sink of `format` writing into `w`.
pub(crate) fn sink_for<'a>(
    format: ExportFormat,
    w: &'a mut dyn Write,
) -> Result<Box<dyn ExportSink + 'a>> {
    Ok(match format {
        ExportFormat::Jsonl => Box::new(JsonlSink { w: Hashing::new(w) }),
        ExportFormat::Mcap(c) => Box::new(crate::export_mcap::McapSink::new(Hashing::new(w), c)?),
    })
}

/// Exports the events `query` selects (whatever its record types) from the log in
/// `dir` to `out` as JSONL, one event a line as [`to_json`] renders it, with `weight`
/// its export weight (ARCHITECTURE.md "Export weights"), and writes the manifest beside
/// it as `FILE.manifest.json`.
///
/// The log's digest is taken first and the export reads no record past it, so the
/// manifest's digest covers every row, also while a writer appends. `out` may not lie
/// inside a log directory nor name anything but a regular file
/// ([`check_output`](crate::check_output)); each file is written under a temporary
/// name and renamed into place when complete, so a failed export leaves no partial
/// file. `progress` is called with the seq of each event read.
///
/// # Errors
///
/// [`Error::UnsafeOutput`]; as [`Replay::open`]; damage or a record that does not
/// decode; I/O errors writing either file.
pub fn export_jsonl(
    dir: impl AsRef<Path>,
    query: &Query,
    out: &Path,
    options: &ExportOptions,
    progress: &mut dyn FnMut(u64),
) -> Result<ExportManifest> {
    let options = ExportOptions {
        format: ExportFormat::Jsonl,
        ..options.clone()
    };
    export(dir, query, out, &options, progress)
}

/// Exports as [`export_jsonl`] does, in the format `options` names.
///
/// # Errors
///
/// As [`export_jsonl`].
pub fn export(
    dir: impl AsRef<Path>,
    query: &Query,
    out: &Path,
    options: &ExportOptions,
    progress: &mut dyn FnMut(u64),
) -> Result<ExportManifest> {
    let manifest_out = manifest_path(out);
    let mut data = AtomicFile::create(out)?;
    let mut manifest_file = AtomicFile::create(&manifest_out)?;
    let mut manifest = export_rows(dir.as_ref(), query, options, data.writer(), progress)?;
    manifest.file = data.path().to_owned();
    manifest.manifest_file = manifest_file.path().to_owned();
    let mut text = serde_json::to_vec_pretty(&manifest.to_json())
        .map_err(|e| io("write manifest", &manifest.manifest_file, e.into()))?;
    text.push(b'\n');
    manifest_file
        .writer()
        .write_all(&text)
        .map_err(|e| io("write manifest", &manifest.manifest_file, e))?;
    // The data first: between the two renames, the new data sits beside the old
    // manifest, which no longer checks: a mismatch is seen, never a silent one.
    data.commit()?;
    manifest_file.commit()?;
    Ok(manifest)
}

/// Exports as [`export_jsonl`] does, into `out` (stdout, a pipe), without a manifest
/// file: the manifest is returned, with `file` and `manifest_file` empty.
///
/// # Errors
///
/// As [`export_jsonl`], and the errors of `out`.
pub fn export_jsonl_to(
    dir: impl AsRef<Path>,
    query: &Query,
    options: &ExportOptions,
    out: &mut dyn Write,
    progress: &mut dyn FnMut(u64),
) -> Result<ExportManifest> {
    let options = ExportOptions {
        format: ExportFormat::Jsonl,
        ..options.clone()
    };
    export_to(dir, query, &options, out, progress)
}

/// Exports as [`export_to`] does, in the format `options` names.
///
/// # Errors
///
/// As [`export_jsonl`], and the errors of `out`.
pub fn export_to(
    dir: impl AsRef<Path>,
    query: &Query,
    options: &ExportOptions,
    out: &mut dyn Write,
    progress: &mut dyn FnMut(u64),
) -> Result<ExportManifest> {
    let mut w = BufWriter::new(out);
    let manifest = export_rows(dir.as_ref(), query, options, &mut w, progress)?;
    w.flush()
        .map_err(|e| io("write export to", Path::new("-"), e))?;
    Ok(manifest)
}

/// Checks an export as [`check_export`](crate::check_export) does, then derives it
/// again from the log in `dir`: the log must still hold the prefix of the manifest's
/// digest (every checksum and the chain verified), and exporting the manifest's query
/// up to that digest must give the same bytes. This catches a file whose manifest was
/// edited along with it.
///
/// # Errors
///
/// As [`check_export`](crate::check_export); [`Error::ExportChanged`] when the log
/// gives other bytes; the log's errors (damage, a digest it no longer holds).
pub fn check_export_against_log(
    path: &Path,
    dir: &Path,
    key: Option<blackbox::ChainKey>,
) -> Result<CheckReport> {
    let report = crate::manifest::check_export(path)?;
    let (_, manifest_file, m) = crate::manifest::resolve_check_paths(path)?;
    let bad = |reason: &str| Error::Manifest {
        path: manifest_file.clone(),
        reason: reason.to_owned(),
    };
    let digest: Option<blackbox::Digest> = match m["log"]["digest"].as_str() {
        Some(text) => Some(
            text.parse()
                .map_err(|_| bad("its log digest is not SEQ:HASH"))?,
        ),
        None => None,
    };
    let options = ExportOptions {
        include_unweighted: m["query"]["include_unweighted"].as_bool().unwrap_or(false),
        salvage: m["query"]["salvage"].as_bool().unwrap_or(false),
        format: crate::manifest::format_of(&m).map_err(|r| bad(&r))?,
    };
    if !options.salvage {
        open_log_dir(dir)?;
        blackbox_log::verify(dir, key.as_ref(), digest.as_ref())?;
    }
    let q = &m["query"];
    let mut query = Query::new().key(key);
    if let Some(t) = q["since_ns"].as_u64() {
        query = query.since(t);
    }
    if let Some(t) = q["until_ns"].as_u64() {
        query = query.until(t);
    }
    if let Some(s) = q["from_seq"].as_u64() {
        query = query.from_seq(s);
    }
    if let Some(s) = q["to_seq"].as_u64() {
        query = query.to_seq(s);
    }
    for g in q["kinds"].as_array().into_iter().flatten() {
        query = query.kind(g.as_str().ok_or_else(|| bad("a kind glob is not text"))?)?;
    }
    let mut out = std::io::sink();
    let mut sink = sink_for(options.format, &mut out)?;
    let again = export_upto(dir, &query, &options, sink.as_mut(), &mut |_| {}, digest)?;
    if again.blake3 != report.blake3 || again.rows != report.rows {
        return Err(Error::ExportChanged {
            file: report.file.clone(),
            what: format!(
                "exporting its query from {} up to its digest again gives {} rows with blake3 {}, not the file's {} rows with blake3 {}",
                dir.display(),
                again.rows,
                crate::hex(&again.blake3),
                report.rows,
                crate::hex(&report.blake3)
            ),
        });
    }
    Ok(report)
}

fn export_rows(
    dir: &Path,
    query: &Query,
    options: &ExportOptions,
    w: &mut dyn Write,
    progress: &mut dyn FnMut(u64),
) -> Result<ExportManifest> {
    let mut sink = sink_for(options.format, w)?;
    if !options.salvage {
        open_log_dir(dir)?;
    }
    let reader = LogReader::open_with(
        dir,
        ReaderOptions {
            key: query.chain_key().cloned(),
        },
    )?;
    // A damaged log has no digest to prove a prefix with: a salvage reads it all and
    // lists what it lost instead.
    let digest = if options.salvage {
        None
    } else {
        reader.digest()?
    };
    export_upto(dir, query, options, sink.as_mut(), progress, digest)
}

/// The export of `query` from the records up to `digest`.
fn export_upto(
    dir: &Path,
    query: &Query,
    options: &ExportOptions,
    sink: &mut dyn ExportSink,
    progress: &mut dyn FnMut(u64),
    digest: Option<blackbox::Digest>,
) -> Result<ExportManifest> {
    let mut manifest = ExportManifest {
        file: PathBuf::new(),
        manifest_file: PathBuf::new(),
        log_dir: dir.to_owned(),
        since_ns: query.since_bound(),
        until_ns: query.until_bound(),
        from_seq: query.from_seq_bound(),
        to_seq: query.to_seq_bound(),
        kinds: query.kind_globs().to_vec(),
        include_unweighted: options.include_unweighted,
        format: options.format,
        rows: 0,
        records: 0,
        bytes: 0,
        blake3: [0; 32],
        first_seq: None,
        last_seq: None,
        first_hash: None,
        last_hash: None,
        per_kind: BTreeMap::new(),
        excluded: BTreeMap::new(),
        accounting: Default::default(),
        unreconciled: Vec::new(),
        last_accounting_seq: None,
        unrepresented: BTreeMap::new(),
        policies: Vec::new(),
        lost: Vec::new(),
        undecodable: Vec::new(),
        salvage: options.salvage,
        log_digest: digest,
        chain_verified: true,
        created_ns: now_ns(),
    };
    sink.start(&manifest)?;
    let types: Vec<RecordType> = std::iter::once(RecordType::Event)
        .chain(sink.extra_types().iter().copied())
        .collect();
    // What the rows come from: a range read up to the digest, or a salvage around
    // damage (whose losses the manifest lists).
    let (weights, mut source) = if options.salvage {
        let weights = Weights::compute_salvaged(dir, query.chain_key().cloned(), query)?;
        let q = query.clone().types(types.iter().copied());
        let s = crate::salvage::salvage(dir, &q)?;
        manifest.chain_verified = s.chain_verified();
        (weights, Rows::Salvage(Box::new(s)))
    } else if let Some(digest) = digest {
        let weights = Weights::compute(dir, query.chain_key().cloned(), digest.seq, query)?;
        let bound = query
            .to_seq_bound()
            .map_or(digest.seq, |s| s.min(digest.seq));
        let q = query
            .clone()
            .types(types.iter().copied())
            .to_seq(bound)
            .order(Order::Log);
        let replay = Replay::open(dir, &q)?;
        manifest.chain_verified = replay.chain_verified();
        (weights, Rows::Replay(Box::new(replay)))
    } else {
        (Weights::default(), Rows::None)
    };
    loop {
        // A range read's rows are decoded in place; a salvage's are owned.
        let owned;
        let r = match &mut source {
            Rows::Replay(replay) => match replay.next_view() {
                Some(r) => Row::View(r?),
                None => break,
            },
            Rows::Salvage(salvage) => match salvage.next() {
                Some(Salvaged::Record(r)) => {
                    owned = r;
                    Row::Owned(&owned)
                }
                Some(Salvaged::Lost(loss)) => {
                    manifest.lost.push(loss);
                    continue;
                }
                Some(Salvaged::Undecodable { seq, reason }) => {
                    manifest.undecodable.push((seq, reason));
                    continue;
                }
                None => break,
            },
            Rows::None => break,
        };
        let seq = r.seq();
        progress(seq);
        let Some((kind, tier, recorded_weight)) = r.event() else {
            sink.record(&r)?;
            manifest.records += 1;
            continue;
        };
        let weight = match weights.weight(seq, kind, tier, recorded_weight) {
            Some(w) => w,
            None if options.include_unweighted => 1.0,
            None => {
                match manifest.excluded.get_mut(kind) {
                    Some(x) => x.rows += 1,
                    None => {
                        let reason = unweighted_reason(weights.unweighted().get(kind));
                        manifest
                            .excluded
                            .insert(kind.to_owned(), Excluded { rows: 1, reason });
                    }
                }
                continue;
            }
        };
        let hash = r.hash();
        sink.event(&r, hash, weight)?;
        manifest.rows += 1;
        if manifest.first_seq.is_none() {
            manifest.first_seq = Some(seq);
            manifest.first_hash = Some(hash);
        }
        manifest.last_seq = Some(seq);
        manifest.last_hash = Some(hash);
        match manifest.per_kind.get_mut(kind) {
            Some(k) => {
                k.rows += 1;
                k.weight_sum += weight;
            }
            None => {
                manifest.per_kind.insert(
                    kind.to_owned(),
                    KindRows {
                        rows: 1,
                        weight_sum: weight,
                    },
                );
            }
        }
        // Each segment repeats the policy in its preamble: a new entry only when the
        // text changes.
        if let Some((seq, toml)) = source.policy()
            && manifest.policies.last().is_none_or(|(_, t)| t != toml)
        {
            manifest.policies.push((seq, toml.to_owned()));
        }
    }
    manifest.accounting = weights.range_accounting().clone();
    manifest.unreconciled = weights.unreconciled().to_vec();
    manifest.last_accounting_seq = weights.last_accounting_seq();
    manifest.unrepresented = weights.unrepresented();
    (manifest.bytes, manifest.blake3) = sink.finish()?;
    Ok(manifest)
}

/// Where an export's rows come from: a range read, a salvage, or nothing (an empty log).
enum Rows {
    Replay(Box<Replay>),
    Salvage(Box<crate::salvage::Salvage>),
    None,
}

impl Rows {
    /// The policy in force at the last row read.
    fn policy(&self) -> Option<(u64, &str)> {
        match self {
            Rows::Replay(r) => r.policy(),
            Rows::Salvage(s) => s.policy(),
            Rows::None => None,
        }
    }
}

/// One record an export reads: decoded in place by a range read, owned from a salvage.
pub(crate) enum Row<'a> {
    View(RecordRef<'a>),
    Owned(&'a Record),
}

impl Row<'_> {
    pub(crate) fn seq(&self) -> u64 {
        match self {
            Row::View(r) => r.seq,
            Row::Owned(r) => r.seq,
        }
    }

    /// An event's kind, tier and recorded weight; `None` for another record.
    fn event(&self) -> Option<(&str, WrittenTier, f64)> {
        match self {
            Row::View(r) => match &r.body {
                BodyRef::Event(e) => Some((e.kind, e.tier, e.weight)),
                _ => None,
            },
            Row::Owned(r) => match &r.body {
                Body::Event(e) => Some((e.kind.as_str(), e.tier, e.weight)),
                _ => None,
            },
        }
    }

    /// When the log wrote the record (its timestamp).
    pub(crate) fn written_ns(&self) -> u64 {
        match self {
            Row::View(r) => r.ts_ns,
            Row::Owned(r) => r.ts_ns,
        }
    }

    /// An event's fields, borrowed from either form; call only for an event row
    /// ([`Row::event`] is `Some`).
    pub(crate) fn event_fields(&self) -> EventView<'_> {
        let (seq, ts_ns) = (self.seq(), self.written_ns());
        match self {
            Row::View(RecordRef {
                body: BodyRef::Event(e),
                ..
            }) => EventView {
                seq,
                kind: e.kind,
                tier: e.tier.name(),
                source: e.source,
                recorded_ns: e.recorded_ns,
                written_ns: ts_ns,
                event_time_ns: e.event_time_ns,
                payload: match e.payload {
                    PayloadRef::None => PayloadView::None,
                    PayloadRef::Json(b) => PayloadView::JsonText(b),
                    PayloadRef::Raw(b) => PayloadView::Raw(b),
                },
                values: ValuesView::Ref(e.values),
            },
            Row::Owned(Record {
                body: Body::Event(e),
                ..
            }) => EventView {
                seq,
                kind: &e.kind,
                tier: e.tier.name(),
                source: e.source.as_deref(),
                recorded_ns: e.recorded_ns,
                written_ns: ts_ns,
                event_time_ns: e.event_time_ns,
                payload: match &e.payload {
                    Payload::None => PayloadView::None,
                    Payload::Json(v) => PayloadView::JsonValue(v),
                    Payload::Raw(b) => PayloadView::Raw(b),
                },
                values: ValuesView::Owned(&e.values),
            },
            // Not an event: nothing to give.
            _ => EventView {
                seq,
                kind: "",
                tier: "",
                source: None,
                recorded_ns: ts_ns,
                written_ns: ts_ns,
                event_time_ns: None,
                payload: PayloadView::None,
                values: ValuesView::Owned(&[]),
            },
        }
    }

    /// The record's content hash.
    pub(crate) fn hash(&self) -> [u8; 32] {
        match self {
            Row::View(r) => r.hash(),
            Row::Owned(r) => r.hash,
        }
    }

    /// The row as [`to_json`] renders it, given its content hash.
    pub(crate) fn json(&self, hash: [u8; 32]) -> Value {
        match self {
            Row::View(r) => r.to_json_with_hash(hash),
            Row::Owned(r) => to_json(r),
        }
    }
}

/// An event's fields, borrowed from a [`Row`] of either form.
pub(crate) struct EventView<'r> {
    pub(crate) seq: u64,
    pub(crate) kind: &'r str,
    pub(crate) tier: &'static str,
    pub(crate) source: Option<&'r str>,
    pub(crate) recorded_ns: u64,
    pub(crate) written_ns: u64,
    pub(crate) event_time_ns: Option<u64>,
    pub(crate) payload: PayloadView<'r>,
    pub(crate) values: ValuesView<'r>,
}

/// An event's payload: unparsed JSON text from a range read, parsed from a salvage.
pub(crate) enum PayloadView<'r> {
    None,
    JsonText(&'r [u8]),
    JsonValue(&'r Value),
    Raw(&'r [u8]),
}

/// An event's values, in place or owned.
pub(crate) enum ValuesView<'r> {
    Ref(crate::decode::ValuesRef<'r>),
    Owned(&'r [(String, f64)]),
}

impl ValuesView<'_> {
    /// Calls `f` with each (name, value), in the order recorded.
    pub(crate) fn each(&self, mut f: impl FnMut(&str, f64)) {
        match self {
            ValuesView::Ref(v) => v.iter().for_each(|(n, x)| f(n, x)),
            ValuesView::Owned(v) => v.iter().for_each(|(n, x)| f(n, *x)),
        }
    }
}

/// Why an unweighted kind's rows are left out.
fn unweighted_reason(c: Option<&blackbox::Counters>) -> String {
    let Some(c) = c else {
        return "its events were summarized or dropped".to_owned();
    };
    let mut what = Vec::new();
    if c.summarized > 0 {
        what.push(format!("{} summarized", c.summarized));
    }
    if c.dropped > 0 {
        what.push(format!("{} dropped", c.dropped));
    }
    format!(
        "of its {} events, {}: the log holds only those written around incidents, which are not a sample of the stream (--include-unweighted exports them at weight 1)",
        c.seen,
        what.join(" and ")
    )
}

/// A writer that counts and hashes what passes through it.
pub(crate) struct Hashing<'a> {
    inner: &'a mut dyn Write,
    pub(crate) hasher: blake3::Hasher,
    pub(crate) bytes: u64,
}

impl<'a> Hashing<'a> {
    pub(crate) fn new(inner: &'a mut dyn Write) -> Hashing<'a> {
        Hashing {
            inner,
            hasher: blake3::Hasher::new(),
            bytes: 0,
        }
    }
}

impl Write for Hashing<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        self.bytes += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

pub(crate) fn io(op: &'static str, path: &Path, source: std::io::Error) -> Error {
    Error::Io {
        op,
        path: path.to_owned(),
        source,
    }
}

pub(crate) fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}
