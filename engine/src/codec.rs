//! The recorder's records in the log: their type tags and their encodings.
//!
//! An event has a lean layout of its own, read in place by [`decode_event`]; every
//! other payload is an rkyv archive, read back in place ([`access`]) from the log's
//! 8-aligned payloads after rkyv's validation. Names (kinds, sources, value names) are
//! interned: records carry `u32` ids, and dictionary records map ids to names. The
//! dictionary in force at a seq is the fold of the dictionary records from the start
//! of that seq's segment up to it; every segment opens with the full dictionary (the
//! log's segment preamble), so a segment can be read alone.

use std::collections::BTreeMap;

use blackbox_log::RecordType;
use rkyv::rancor;

/// An event (full, sampled, pre-roll or post-roll).
pub const EVENT: RecordType = RecordType(1);
/// One summary window of one kind.
pub const SUMMARY: RecordType = RecordType(2);
/// Per-kind counters: running totals since the log was created.
pub const ACCOUNTING: RecordType = RecordType(3);
/// A snapshot of the working memory (JSON object).
pub const CHECKPOINT: RecordType = RecordType(4);
/// A knowledge-base commit (JSON object, see `blackbox_kb::CommitRecord`).
pub const KB: RecordType = blackbox_kb::KB_RECORD;
/// An incident marker.
pub const INCIDENT: RecordType = RecordType(6);
/// Dictionary entries: interned name ids.
pub const DICTIONARY: RecordType = RecordType(7);
/// What opening the log cut: a torn tail left by a crash.
pub const RECOVERY: RecordType = RecordType(8);
/// Working-memory changes at one time (JSON object, see
/// [`WorkingDelta`](crate::WorkingDelta)).
pub const WORKING: RecordType = RecordType(9);
/// The retention policy in force from this record on (UTF-8 TOML text, as
/// [`Policy::to_toml`](crate::Policy::to_toml) writes it): written when a session opens
/// and in every segment's preamble.
pub const POLICY: RecordType = RecordType(10);

/// Why an event was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum WrittenTier {
    /// Its kind's tier is `full`.
    Full = 0,
    /// Kept by sampling; `weight` says how many events it stands for.
    Sample = 1,
    /// Held in the pre-roll ring and written because an incident was triggered.
    Preroll = 2,
    /// Written in full because it arrived inside an incident's post-roll window.
    Postroll = 3,
}

impl WrittenTier {
    /// The tier's name as replay shows it.
    pub fn name(self) -> &'static str {
        match self {
            WrittenTier::Full => "full",
            WrittenTier::Sample => "sample",
            WrittenTier::Preroll => "preroll",
            WrittenTier::Postroll => "postroll",
        }
    }

    /// Decodes a stored tier byte.
    pub fn from_u8(b: u8) -> Option<WrittenTier> {
        match b {
            0 => Some(WrittenTier::Full),
            1 => Some(WrittenTier::Sample),
            2 => Some(WrittenTier::Preroll),
            3 => Some(WrittenTier::Postroll),
            _ => None,
        }
    }
}

/// How an event's payload bytes are to be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Encoding {
    /// No payload.
    None = 0,
    /// UTF-8 JSON text.
    Json = 1,
    /// Opaque bytes.
    Raw = 2,
}

impl Encoding {
    /// Decodes a stored encoding byte.
    pub fn from_u8(b: u8) -> Option<Encoding> {
        match b {
            0 => Some(Encoding::None),
            1 => Some(Encoding::Json),
            2 => Some(Encoding::Raw),
            _ => None,
        }
    }
}

/// Payload bytes on their way into an event record: up to 128 bytes without a heap
/// allocation. Archived exactly as a `Vec<u8>`.
pub type Payload = smallvec::SmallVec<[u8; PAYLOAD_INLINE_BYTES]>;

/// The bytes a [`Payload`] holds without a heap allocation.
pub const PAYLOAD_INLINE_BYTES: usize = 128;

/// An event record, owned: what the recorder encodes with [`EventRecord::encode`] and
/// what [`EventView::to_record`] gives back. Not an rkyv archive: events have a lean
/// layout of their own ([`decode_event`], docs/FORMAT.md "Event records").
#[derive(Debug, Clone, PartialEq)]
pub struct EventRecord {
    /// The recorder's time when the event was recorded (ns since the epoch). Stored
    /// only when it differs from the log record's timestamp (pre-roll events, which are
    /// written when their incident is triggered).
    pub recorded_ns: u64,
    /// How many events this record stands for (1 unless sampled); stored only when not 1.
    pub weight: f64,
    /// The caller's own time for the event, if it gave one (ns since the epoch).
    pub event_time_ns: Option<u64>,
    /// The payload bytes (held inline when small).
    pub payload: Payload,
    /// Numeric values: (interned name, value); at most [`EVENT_VALUES_MAX`].
    pub values: Vec<(u32, f64)>,
    /// Interned kind.
    pub kind: u32,
    /// Interned source; 0 when the event has none.
    pub source: u32,
    /// A [`WrittenTier`] as `u8`.
    pub tier: u8,
    /// An [`Encoding`] as `u8`.
    pub encoding: u8,
}

/// Length of an event record's fixed header.
pub const EVENT_HEADER_LEN: usize = 8;
/// The most values an event record holds.
pub const EVENT_VALUES_MAX: usize = crate::VALUES_PER_EVENT_MAX;
/// The largest interned id.
const ID_MAX: u32 = crate::NAMES_PER_LOG_MAX;
/// Bytes of one value: name id u32, value f64.
const VALUE_LEN: usize = 12;

const HAS_SOURCE: u8 = 1 << 4;
const HAS_EVENT_TIME: u8 = 1 << 5;
const HAS_RECORDED: u8 = 1 << 6;
const HAS_WEIGHT: u8 = 1 << 7;

impl EventRecord {
    /// Appends the record's bytes to `out`, for a log record stamped `log_ts_ns`: the
    /// recorded time is stored only when it differs from that stamp.
    ///
    /// Layout (little endian): kind u32, flags u8 (bits 0-1 tier, 2-3 encoding, 4
    /// source, 5 event time, 6 recorded time, 7 weight), a zero byte, value count u16;
    /// then the fields the flags name, in that order (source u32, event time u64,
    /// recorded time u64, weight f64), then the values (name u32, value f64 each), then
    /// the payload to the end of the record.
    ///
    /// # Panics
    ///
    /// More than [`EVENT_VALUES_MAX`] values, or a tier or encoding byte out of range:
    /// the recorder never builds such a record.
    pub fn encode(&self, log_ts_ns: u64, out: &mut Vec<u8>) {
        out.reserve(EVENT_HEADER_LEN + 28 + self.values.len() * VALUE_LEN + self.payload.len());
        self.encode_with(log_ts_ns, |b| out.extend_from_slice(b));
    }

    /// [`EventRecord::encode`], handing the bytes to `put` in order.
    ///
    /// # Panics
    ///
    /// As [`EventRecord::encode`].
    pub fn encode_with(&self, log_ts_ns: u64, mut put: impl FnMut(&[u8])) {
        assert!(self.values.len() <= EVENT_VALUES_MAX, "too many values");
        assert!(
            self.tier < 4 && self.encoding < 4,
            "tier or encoding out of range"
        );
        let head = EventHead {
            kind: self.kind,
            tier: self.tier,
            encoding: self.encoding,
            source: self.source,
            event_time_ns: self.event_time_ns,
            recorded_ns: (self.recorded_ns != log_ts_ns).then_some(self.recorded_ns),
            weight: (self.weight.to_bits() != 1.0f64.to_bits()).then_some(self.weight),
            value_count: self.values.len(),
        };
        put(head.encode().as_slice());
        for &(name, value) in &self.values {
            put(&value_bytes(name, value));
        }
        put(&self.payload);
    }

    /// The record's bytes in a vector of their own (see [`EventRecord::encode`]).
    pub fn to_bytes(&self, log_ts_ns: u64) -> Vec<u8> {
        let mut out = Vec::new();
        self.encode(log_ts_ns, &mut out);
        out
    }
}

/// An event record's header and the optional fields its flags announce: the one place
/// they are laid out (see [`EventRecord::encode`]).
struct EventHead {
    kind: u32,
    tier: u8,
    encoding: u8,
    source: u32,
    event_time_ns: Option<u64>,
    recorded_ns: Option<u64>,
    weight: Option<f64>,
    value_count: usize,
}

/// Encoded header bytes: at most 8 + 4 + 8 + 8 + 8.
struct HeadBytes {
    bytes: [u8; EVENT_HEADER_LEN + 28],
    len: usize,
}

impl HeadBytes {
    fn as_slice(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

impl EventHead {
    fn encode(&self) -> HeadBytes {
        let mut head = HeadBytes {
            bytes: [0u8; EVENT_HEADER_LEN + 28],
            len: EVENT_HEADER_LEN,
        };
        let mut flags = self.tier | (self.encoding << 2);
        let field = |bytes: &[u8], head: &mut HeadBytes| {
            head.bytes[head.len..head.len + bytes.len()].copy_from_slice(bytes);
            head.len += bytes.len();
        };
        if self.source != 0 {
            flags |= HAS_SOURCE;
            field(&self.source.to_le_bytes(), &mut head);
        }
        if let Some(t) = self.event_time_ns {
            flags |= HAS_EVENT_TIME;
            field(&t.to_le_bytes(), &mut head);
        }
        if let Some(t) = self.recorded_ns {
            flags |= HAS_RECORDED;
            field(&t.to_le_bytes(), &mut head);
        }
        if let Some(w) = self.weight {
            flags |= HAS_WEIGHT;
            field(&w.to_le_bytes(), &mut head);
        }
        let count = u16::try_from(self.value_count).unwrap_or(u16::MAX);
        head.bytes[0..4].copy_from_slice(&self.kind.to_le_bytes());
        head.bytes[4] = flags;
        head.bytes[5] = 0;
        head.bytes[6..8].copy_from_slice(&count.to_le_bytes());
        head
    }
}

fn value_bytes(name: u32, value: f64) -> [u8; VALUE_LEN] {
    let mut v = [0u8; VALUE_LEN];
    v[..4].copy_from_slice(&name.to_le_bytes());
    v[4..].copy_from_slice(&value.to_le_bytes());
    v
}

/// An event record as a producer encodes it, before the writer decides its tier and
/// stamp: written as a `full` event of weight 1 whose recorded time is its stamp
/// (neither stored). The writer appends these bytes with [`PendingEvent::restamp`],
/// which writes only the header anew. Built by [`PendingEvent::start`], one value at a time
/// ([`PendingEvent::push_value`]), then the payload ([`PendingEvent::finish`]).
#[derive(Debug)]
pub(crate) struct PendingEvent {
    /// The record's bytes.
    pub(crate) bytes: Payload,
    /// The largest interned id the record names (kind, source, value names).
    pub(crate) names_upto: u32,
}

impl PendingEvent {
    /// Starts a record of `kind` with room for its values and a payload of
    /// `payload_len` bytes.
    ///
    /// # Panics
    ///
    /// More than [`EVENT_VALUES_MAX`] values: the recorder refuses such an event first.
    pub(crate) fn start(
        kind: u32,
        source: u32,
        event_time_ns: Option<u64>,
        encoding: Encoding,
        value_count: usize,
        payload_len: usize,
    ) -> PendingEvent {
        assert!(value_count <= EVENT_VALUES_MAX, "too many values");
        let head = EventHead {
            kind,
            tier: WrittenTier::Full as u8,
            encoding: encoding as u8,
            source,
            event_time_ns,
            recorded_ns: None,
            weight: None,
            value_count,
        }
        .encode();
        let len = head.len + value_count * VALUE_LEN + payload_len;
        let bytes = if len <= PAYLOAD_INLINE_BYTES {
            Payload::from_slice(head.as_slice())
        } else {
            let mut bytes = Payload::with_capacity(len);
            bytes.extend_from_slice(head.as_slice());
            bytes
        };
        PendingEvent {
            bytes,
            names_upto: kind.max(source),
        }
    }

    /// Appends one value; values follow in the order pushed.
    pub(crate) fn push_value(&mut self, name: u32, value: f64) {
        self.bytes.extend_from_slice(&value_bytes(name, value));
        self.names_upto = self.names_upto.max(name);
    }

    /// Appends the payload.
    pub(crate) fn finish(&mut self, payload: &[u8]) {
        self.bytes.extend_from_slice(payload);
    }

    /// Its source, its event time, and where its values start.
    fn optional_fields(&self) -> (u32, Option<u64>, usize) {
        let b = &self.bytes;
        let flags = b[4];
        let mut at = EVENT_HEADER_LEN;
        let source = if flags & HAS_SOURCE != 0 {
            at += 4;
            le_u32(&b[at - 4..at])
        } else {
            0
        };
        let event_time_ns = if flags & HAS_EVENT_TIME != 0 {
            at += 8;
            Some(le_u64(&b[at - 8..at]))
        } else {
            None
        };
        (source, event_time_ns, at)
    }

    fn value_count(&self) -> usize {
        usize::from(u16::from_le_bytes([self.bytes[6], self.bytes[7]]))
    }

    /// Its values, read back (for summary windows).
    pub(crate) fn values(&self) -> Values<'_> {
        let (_, _, at) = self.optional_fields();
        Values(&self.bytes[at..at + self.value_count() * VALUE_LEN])
    }

    /// Hands `put` the record's bytes as the writer stores them: with `tier`, in a log
    /// record stamped `log_ts_ns` when the producer stamped it `recorded_ns` (the
    /// recorded time stored only when they differ), and `weight` (stored only when not
    /// 1). Only the header is written anew; the values and the payload are handed on
    /// as they are.
    pub(crate) fn restamp(
        &self,
        tier: WrittenTier,
        recorded_ns: u64,
        weight: f64,
        log_ts_ns: u64,
        mut put: impl FnMut(&[u8]),
    ) {
        let flags = self.bytes[4];
        debug_assert_eq!(
            flags & (HAS_RECORDED | HAS_WEIGHT | 3),
            0,
            "not as `start` wrote it"
        );
        if recorded_ns == log_ts_ns && weight.to_bits() == 1.0f64.to_bits() {
            // The header keeps its length: only the tier changes (a full event's bytes
            // are handed on whole).
            if tier == WrittenTier::Full {
                put(&self.bytes);
            } else {
                let mut head = [0u8; EVENT_HEADER_LEN];
                head.copy_from_slice(&self.bytes[..EVENT_HEADER_LEN]);
                head[4] |= tier as u8;
                put(&head);
                put(&self.bytes[EVENT_HEADER_LEN..]);
            }
            return;
        }
        let (source, event_time_ns, at) = self.optional_fields();
        let head = EventHead {
            kind: le_u32(&self.bytes),
            tier: tier as u8,
            encoding: (flags >> 2) & 3,
            source,
            event_time_ns,
            recorded_ns: (recorded_ns != log_ts_ns).then_some(recorded_ns),
            weight: (weight.to_bits() != 1.0f64.to_bits()).then_some(weight),
            value_count: self.value_count(),
        };
        put(head.encode().as_slice());
        put(&self.bytes[at..]);
    }
}

/// An event record read in place: every field checked, nothing copied.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EventView<'a> {
    /// Interned kind (1 to 65 536).
    pub kind: u32,
    /// Interned source (1 to 65 536); 0 when the event has none.
    pub source: u32,
    /// Why the event was written.
    pub tier: WrittenTier,
    /// How its payload is to be read.
    pub encoding: Encoding,
    /// The caller's own time for the event, if it gave one.
    pub event_time_ns: Option<u64>,
    /// When the event was recorded: the log record's timestamp unless the record says
    /// otherwise (pre-roll).
    pub recorded_ns: u64,
    /// How many events the record stands for.
    pub weight: f64,
    /// The numeric values, read as they are iterated.
    pub values: Values<'a>,
    /// The payload bytes.
    pub payload: &'a [u8],
}

impl EventView<'_> {
    /// The owned form.
    pub fn to_record(&self) -> EventRecord {
        EventRecord {
            recorded_ns: self.recorded_ns,
            weight: self.weight,
            event_time_ns: self.event_time_ns,
            payload: Payload::from_slice(self.payload),
            values: self.values.iter().collect(),
            kind: self.kind,
            source: self.source,
            tier: self.tier as u8,
            encoding: self.encoding as u8,
        }
    }
}

/// An event's values in place: (interned name, value) pairs, 12 bytes each, names
/// checked by [`decode_event`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Values<'a>(&'a [u8]);

impl<'a> Values<'a> {
    /// How many values.
    pub fn len(&self) -> usize {
        self.0.len() / VALUE_LEN
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The values in their stored order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (u32, f64)> + 'a {
        self.0.chunks_exact(VALUE_LEN).map(|c| {
            let (name, value) = c.split_at(4);
            (le_u32(name), f64::from_bits(le_u64(value)))
        })
    }
}

fn le_u32(b: &[u8]) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[..4]);
    u32::from_le_bytes(a)
}

fn le_u64(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    u64::from_le_bytes(a)
}

/// Splits `n` bytes off the front of `rest`, or says which field the record is too
/// short for.
fn take<'a>(rest: &mut &'a [u8], n: usize, what: &str) -> Result<&'a [u8], String> {
    if rest.len() < n {
        return Err(format!(
            "the record ends inside its {what} ({} of {n} bytes)",
            rest.len()
        ));
    }
    let (head, tail) = rest.split_at(n);
    *rest = tail;
    Ok(head)
}

fn check_id(id: u32, what: &str) -> Result<u32, String> {
    if id == 0 || id > ID_MAX {
        return Err(format!("its {what} id {id} is outside 1 to {ID_MAX}"));
    }
    Ok(id)
}

/// Reads an event record in place, for a log record stamped `log_ts_ns`. Every length
/// and id is checked against the record's bytes and the format's limits; nothing is
/// allocated.
///
/// # Errors
///
/// A sentence saying what is wrong: a record too short for what its header announces,
/// an unknown tier or encoding, a nonzero reserved byte, an id outside 1 to 65 536,
/// more than [`EVENT_VALUES_MAX`] values, or a payload on an event without one.
pub fn decode_event(bytes: &[u8], log_ts_ns: u64) -> Result<EventView<'_>, String> {
    let mut rest = bytes;
    let head = take(&mut rest, EVENT_HEADER_LEN, "header")?;
    let kind = check_id(le_u32(head), "kind")?;
    let flags = head[4];
    if head[5] != 0 {
        return Err(format!("its reserved header byte is {}, not 0", head[5]));
    }
    let count = usize::from(u16::from_le_bytes([head[6], head[7]]));
    if count > EVENT_VALUES_MAX {
        return Err(format!(
            "its header announces {count} values, more than {EVENT_VALUES_MAX}"
        ));
    }
    let tier = WrittenTier::from_u8(flags & 3).unwrap_or(WrittenTier::Full);
    let encoding = Encoding::from_u8((flags >> 2) & 3)
        .ok_or_else(|| format!("unknown payload encoding {}", (flags >> 2) & 3))?;
    let source = if flags & HAS_SOURCE != 0 {
        check_id(le_u32(take(&mut rest, 4, "source")?), "source")?
    } else {
        0
    };
    let event_time_ns = if flags & HAS_EVENT_TIME != 0 {
        Some(le_u64(take(&mut rest, 8, "event time")?))
    } else {
        None
    };
    let recorded_ns = if flags & HAS_RECORDED != 0 {
        le_u64(take(&mut rest, 8, "recorded time")?)
    } else {
        log_ts_ns
    };
    let weight = if flags & HAS_WEIGHT != 0 {
        f64::from_bits(le_u64(take(&mut rest, 8, "weight")?))
    } else {
        1.0
    };
    let values = take(&mut rest, count * VALUE_LEN, "values")?;
    for c in values.chunks_exact(VALUE_LEN) {
        check_id(le_u32(c), "value name")?;
    }
    if encoding == Encoding::None && !rest.is_empty() {
        return Err(format!(
            "it says it has no payload but {} payload bytes follow",
            rest.len()
        ));
    }
    Ok(EventView {
        kind,
        source,
        tier,
        encoding,
        event_time_ns,
        recorded_ns,
        weight,
        values: Values(values),
        payload: rest,
    })
}

/// Aggregates of one value over a summary window.
#[derive(Debug, Clone, Copy, PartialEq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub struct ValueStats {
    /// Interned value name.
    pub name: u32,
    /// Events in the window that carried this value.
    pub count: u64,
    /// Smallest value.
    pub min: f64,
    /// Largest value.
    pub max: f64,
    /// Sum of the values, compensated (Neumaier). When the values are finite but their
    /// sum is beyond the `f64` range, it is ±infinity: [`ValueStats::sum_overflowed`].
    pub sum: f64,
    /// The value of the last event in the window that carried it.
    pub last: f64,
    /// The mean of the values, finite whenever they all are (computed from a sum that
    /// cannot overflow, so it is right even when `sum` did).
    pub mean: f64,
}

impl ValueStats {
    /// Whether `sum` is infinite only because the sum of finite values left the `f64`
    /// range (then `mean` is still the mean).
    pub fn sum_overflowed(&self) -> bool {
        self.sum.is_infinite() && self.min.is_finite() && self.max.is_finite()
    }
}

/// One summary window of one kind: `[window_start_ns, window_end_ns)`.
#[derive(Debug, Clone, PartialEq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub struct SummaryRecord {
    /// Interned kind.
    pub kind: u32,
    /// Window start (ns, inclusive).
    pub window_start_ns: u64,
    /// Window end (ns, exclusive).
    pub window_end_ns: u64,
    /// Events summarized in the window.
    pub count: u64,
    /// Per-value aggregates, sorted by name id.
    pub values: Vec<ValueStats>,
}

/// Per-kind counters: running totals since the log was created.
///
/// `seen` is counted by the producers, where `record` accepts an event; the outcomes
/// (`kept`, `sampled_out`, `summarized`, `dropped`, `overflow`, `lost`) where they are
/// decided, most of them by the writer. So `seen` equals the sum of the outcomes only
/// once every accepted event has reached the writer ([`Counters::balanced`]): in the
/// accounting record written at close, and in [`Recorder::stats`](crate::Recorder::stats)
/// when no producer is recording. An accounting record written while events were still
/// queued shows `seen` ahead by those events; a later record accounts them.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Default,
    rkyv::Archive,
    rkyv::Serialize,
    rkyv::Deserialize,
    serde::Serialize,
    serde::Deserialize,
)]
pub struct Counters {
    /// Events recorded (accepted by `record` or `record_evidence`).
    pub seen: u64,
    /// Events written (full, sampled in, or post-roll).
    pub kept: u64,
    /// Sample-tier events not kept.
    pub sampled_out: u64,
    /// Summary-tier events folded into a summary.
    pub summarized: u64,
    /// Drop-tier events.
    pub dropped: u64,
    /// Events lost because the writer could not keep up (overflow policy `drop`).
    pub overflow: u64,
    /// Sampled-out, summarized or pre-roll drop-tier events that were also written in
    /// full from the pre-roll ring when an incident was triggered (not an outcome of
    /// its own: not part of the sum).
    pub preroll: u64,
    /// Events accepted that the writer could not write or fold because it had failed
    /// (the log's error stopped it), counted instead of discarded.
    pub lost: u64,
}

impl Counters {
    /// Adds `other` field by field.
    pub fn add(&mut self, other: &Counters) {
        self.seen += other.seen;
        self.kept += other.kept;
        self.sampled_out += other.sampled_out;
        self.summarized += other.summarized;
        self.dropped += other.dropped;
        self.overflow += other.overflow;
        self.preroll += other.preroll;
        self.lost += other.lost;
    }

    /// The events whose outcome is counted: kept, sampled out, summarized, dropped,
    /// overflow and lost.
    pub fn outcomes(&self) -> u64 {
        self.kept + self.sampled_out + self.summarized + self.dropped + self.overflow + self.lost
    }

    /// Whether `seen` equals the sum of the six outcomes: every event recorded has one.
    pub fn balanced(&self) -> bool {
        self.seen == self.outcomes()
    }
}

impl ArchivedCounters {
    /// The counters, read in place out of an accounting record: the one decoding every
    /// reader of the totals uses (the recorder's restore, replay's decoder).
    pub fn to_counters(&self) -> Counters {
        Counters {
            seen: self.seen.to_native(),
            kept: self.kept.to_native(),
            sampled_out: self.sampled_out.to_native(),
            summarized: self.summarized.to_native(),
            dropped: self.dropped.to_native(),
            overflow: self.overflow.to_native(),
            preroll: self.preroll.to_native(),
            lost: self.lost.to_native(),
        }
    }
}

/// Per-kind running totals. An ordinary accounting record lists the kinds whose totals
/// changed since the log's previous accounting record (a kind it does not list keeps its
/// totals); a snapshot (`snapshot` set: a segment preamble's, the one a session
/// writes into a segment that holds no record yet, or the one that follows an
/// accounting record about every minute) lists every kind's: the fold of the
/// accounting records before it, or of those up to the one right after it when that
/// one started its segment (folding on from the snapshot gives the same totals either
/// way). Readers fold them with [`fold_accounting`], never by position.
#[derive(Debug, Clone, PartialEq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub struct AccountingRecord {
    /// Whether this record holds the totals of every kind (a snapshot), not only those
    /// that changed.
    pub snapshot: bool,
    /// The watermark (ns, recorder time; 0: none): every event that happened (was
    /// stamped) before it is in the log before this record. A reader bounded by when
    /// events happened stops at the first record whose watermark is past its bound.
    pub watermark_ns: u64,
    /// (interned kind, counters), sorted by kind id.
    pub kinds: Vec<(u32, Counters)>,
}

/// Folds one accounting record into running `totals`: a snapshot replaces them all (it
/// holds the fold of the records before it, see [`AccountingRecord`]), any other record
/// updates the kinds it lists. The one rule every reader of the totals uses (the
/// recorder's restore, `stats`, `state`; export weights, which reconcile rows between
/// ordinary records, pass snapshots over).
pub fn fold_accounting<K: Ord>(
    totals: &mut BTreeMap<K, Counters>,
    snapshot: bool,
    kinds: impl IntoIterator<Item = (K, Counters)>,
) {
    if snapshot {
        totals.clear();
    }
    totals.extend(kinds);
}

/// An accounting record's watermark (0: none); `None` when the payload is not a valid
/// accounting record.
pub fn accounting_watermark_ns(payload: &[u8]) -> Option<u64> {
    access::<ArchivedAccountingRecord>(payload)
        .ok()
        .map(|a| a.watermark_ns.to_native())
}

/// Whether an accounting record's payload is a snapshot; `None` when it is not a valid
/// accounting record.
pub fn is_accounting_snapshot(payload: &[u8]) -> Option<bool> {
    access::<ArchivedAccountingRecord>(payload)
        .ok()
        .map(|a| a.snapshot)
}

/// An incident: a trigger event and the window captured around it.
#[derive(Debug, Clone, PartialEq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub struct IncidentRecord {
    /// Seq of the trigger event.
    pub trigger_seq: u64,
    /// Interned kind of the trigger.
    pub trigger_kind: u32,
    /// Recorder time of the trigger (ns).
    pub trigger_ts_ns: u64,
    /// Start of the pre-roll window (ns).
    pub preroll_start_ns: u64,
    /// End of the post-roll window (ns); later triggers may extend it.
    pub postroll_end_ns: u64,
    /// Events written from the pre-roll ring.
    pub preroll_events: u64,
}

/// Dictionary entries: (id, name).
#[derive(Debug, Clone, PartialEq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub struct DictionaryRecord {
    /// The entries.
    pub entries: Vec<(u32, String)>,
}

/// A torn tail the log cut when the recorder opened it (a crash mid-write): written
/// first in the session that found it, so a later reviewer sees what was lost.
#[derive(Debug, Clone, PartialEq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub struct RecoveryRecord {
    /// The seq the first record of the cut bytes would have had: records from it on,
    /// if the torn write held any, are lost (how many is not known).
    pub first_lost_seq: u64,
    /// Bytes cut.
    pub torn_bytes: u64,
    /// The segment file they were cut from (its name).
    pub segment: String,
    /// Where the cut began and why those bytes were not an intact block.
    pub detail: String,
}

/// A record the recorder can encode with rkyv.
pub(crate) trait Encode:
    for<'a> rkyv::Serialize<
        rkyv::api::high::HighSerializer<
            rkyv::util::AlignedVec,
            rkyv::ser::allocator::ArenaHandle<'a>,
            rancor::Error,
        >,
    >
{
}

impl<T> Encode for T where
    T: for<'a> rkyv::Serialize<
            rkyv::api::high::HighSerializer<
                rkyv::util::AlignedVec,
                rkyv::ser::allocator::ArenaHandle<'a>,
                rancor::Error,
            >,
        >
{
}

/// Encodes `value` into a vector of its own.
pub(crate) fn encode_to_vec<T: Encode>(value: &T) -> Vec<u8> {
    let mut buf = rkyv::util::AlignedVec::new();
    let range = encode_append(value, &mut buf);
    buf[range].to_vec()
}

/// Encodes `value` with rkyv at the end of `arena`, starting at a 16-aligned offset so
/// the archive's alignment holds wherever it is copied (the log keeps payloads
/// 8-aligned), and returns where it lies.
pub(crate) fn encode_append<T: Encode>(
    value: &T,
    arena: &mut rkyv::util::AlignedVec,
) -> std::ops::Range<usize> {
    let pad = arena.len().next_multiple_of(16) - arena.len();
    arena.extend_from_slice(&[0u8; 16][..pad]);
    let start = arena.len();
    let buf = std::mem::take(arena);
    *arena = rkyv::api::high::to_bytes_in(value, buf)
        .expect("serializing an in-memory record cannot fail");
    start..arena.len()
}

/// Reads an archived record in place after validating it.
///
/// # Errors
///
/// The bytes are not a valid archive of `T` (damage, or a record of another type).
pub fn access<T>(bytes: &[u8]) -> Result<&T, rancor::Error>
where
    T: rkyv::Portable
        + for<'a> rkyv::bytecheck::CheckBytes<rkyv::api::high::HighValidator<'a, rancor::Error>>,
{
    rkyv::access::<T, rancor::Error>(bytes)
}

#[cfg(test)]
mod tests {
    #![expect(clippy::unwrap_used, reason = "tests fail loudly on any error")]

    use super::*;

    #[test]
    fn a_producers_record_restamped_reads_back_as_written() {
        // Every optional field present and absent, every tier, a stamp equal to and
        // later than the producer's, a weight of 1 and not: the reader (an independent
        // decoder) must find what went in, and the bytes must be those of the owned
        // record's encoding.
        let values: &[(u32, f64)] = &[(3, 1.5), (70_000 - 4_465, -0.0)];
        for source in [0u32, 9] {
            for event_time_ns in [None, Some(77u64)] {
                for nvalues in [0, 1, 2] {
                    for (encoding, payload) in [
                        (Encoding::None, &b""[..]),
                        (Encoding::Raw, &b"\x00\xffab"[..]),
                    ] {
                        for tier in [
                            WrittenTier::Full,
                            WrittenTier::Sample,
                            WrittenTier::Preroll,
                            WrittenTier::Postroll,
                        ] {
                            for (stamped, log_ts) in [(1_000u64, 1_000u64), (1_000, 1_005)] {
                                for weight in [1.0, 10.0] {
                                    let mut pending = PendingEvent::start(
                                        5,
                                        source,
                                        event_time_ns,
                                        encoding,
                                        nvalues,
                                        payload.len(),
                                    );
                                    for &(n, v) in &values[..nvalues] {
                                        pending.push_value(n, v);
                                    }
                                    pending.finish(payload);
                                    let want_upto = values[..nvalues]
                                        .iter()
                                        .map(|v| v.0)
                                        .chain([5, source])
                                        .max()
                                        .unwrap();
                                    assert_eq!(pending.names_upto, want_upto);
                                    let got_values: Vec<(u32, f64)> =
                                        pending.values().iter().collect();
                                    assert_eq!(got_values, values[..nvalues].to_vec());
                                    let mut bytes = Vec::new();
                                    pending.restamp(tier, stamped, weight, log_ts, |b| {
                                        bytes.extend_from_slice(b)
                                    });
                                    let view = decode_event(&bytes, log_ts).unwrap();
                                    assert_eq!(view.kind, 5);
                                    assert_eq!(view.source, source);
                                    assert_eq!(view.tier, tier);
                                    assert_eq!(view.encoding, encoding);
                                    assert_eq!(view.event_time_ns, event_time_ns);
                                    assert_eq!(view.recorded_ns, stamped);
                                    assert_eq!(view.weight.to_bits(), weight.to_bits());
                                    let read: Vec<(u32, f64)> = view.values.iter().collect();
                                    assert_eq!(read.len(), nvalues);
                                    for (r, w) in read.iter().zip(values) {
                                        assert_eq!((r.0, r.1.to_bits()), (w.0, w.1.to_bits()));
                                    }
                                    assert_eq!(view.payload, payload);
                                    let owned = EventRecord {
                                        recorded_ns: stamped,
                                        weight,
                                        event_time_ns,
                                        payload: Payload::from_slice(payload),
                                        values: values[..nvalues].to_vec(),
                                        kind: 5,
                                        source,
                                        tier: tier as u8,
                                        encoding: encoding as u8,
                                    };
                                    assert_eq!(bytes, owned.to_bytes(log_ts));
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn counters_read_in_place_keep_every_field_in_its_place() {
        // Each field a different value, so a field read into another's place shows.
        let written = Counters {
            seen: 1,
            kept: 2,
            sampled_out: 3,
            summarized: 4,
            dropped: 5,
            overflow: 6,
            preroll: 7,
            lost: u64::MAX,
        };
        let record = AccountingRecord {
            snapshot: false,
            watermark_ns: 9,
            kinds: vec![(11, written)],
        };
        let bytes = encode_to_vec(&record);
        let a = access::<ArchivedAccountingRecord>(&bytes).unwrap();
        let read = a.kinds[0].1.to_counters();
        assert_eq!(read.seen, 1);
        assert_eq!(read.kept, 2);
        assert_eq!(read.sampled_out, 3);
        assert_eq!(read.summarized, 4);
        assert_eq!(read.dropped, 5);
        assert_eq!(read.overflow, 6);
        assert_eq!(read.preroll, 7);
        assert_eq!(read.lost, u64::MAX);
    }
}
