//! Typed records: the recorder's records decoded, interned names resolved.

use std::collections::BTreeMap;

use blackbox::codec::{
    self, ArchivedAccountingRecord, ArchivedDictionaryRecord, ArchivedIncidentRecord,
    ArchivedRecoveryRecord, ArchivedSummaryRecord, Encoding, WrittenTier,
};
use blackbox::{Counters, DictionaryFold, LogRecord, WorkingDelta};

use crate::error::{Error, Result};

/// The recorder's record types, as `--type` names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RecordType {
    /// An event (type tag 1).
    Event,
    /// A summary window of one kind (2).
    Summary,
    /// Per-kind running totals (3).
    Accounting,
    /// A working-memory checkpoint (4).
    Checkpoint,
    /// A knowledge-base commit (5).
    Kb,
    /// An incident marker (6).
    Incident,
    /// Interned names (7): how the other records' ids read.
    Dictionary,
    /// A torn tail the log cut when the recorder opened it (8).
    Recovery,
    /// Working-memory changes at one time (9).
    Working,
    /// The retention policy in force from here on (10), as TOML.
    Policy,
    /// The knowledge base as of one version (11): written by the knowledge base and
    /// repeated in every segment's preamble.
    KbSnapshot,
    /// A copy of a commit written after the last snapshot, in a segment's preamble
    /// (12).
    KbCarried,
    /// The log's own record of a pruning under its disk budget (0xFFFF): which seqs
    /// and bytes went, why, and the chain link at the cut.
    Prune,
}

impl RecordType {
    /// Every type, in tag order.
    pub const ALL: [RecordType; 13] = [
        RecordType::Event,
        RecordType::Summary,
        RecordType::Accounting,
        RecordType::Checkpoint,
        RecordType::Kb,
        RecordType::Incident,
        RecordType::Dictionary,
        RecordType::Recovery,
        RecordType::Working,
        RecordType::Policy,
        RecordType::KbSnapshot,
        RecordType::KbCarried,
        RecordType::Prune,
    ];

    /// The name in JSON output and on the command line (`event`, `summary`, ...).
    pub fn name(self) -> &'static str {
        match self {
            RecordType::Event => "event",
            RecordType::Summary => "summary",
            RecordType::Accounting => "accounting",
            RecordType::Checkpoint => "checkpoint",
            RecordType::Kb => "kb",
            RecordType::Incident => "incident",
            RecordType::Dictionary => "dictionary",
            RecordType::Recovery => "recovery",
            RecordType::Working => "working",
            RecordType::Policy => "policy",
            RecordType::KbSnapshot => "kb-snapshot",
            RecordType::KbCarried => "kb-carried",
            RecordType::Prune => "prune",
        }
    }

    /// Whether a query selects this type only when asked for it by type: the
    /// dictionary and the policy say how the other records read and were kept, and the
    /// knowledge base's snapshots and carried commits repeat what its commits say (in
    /// every segment's preamble): they are not content.
    pub fn hidden_by_default(self) -> bool {
        matches!(
            self,
            RecordType::Dictionary
                | RecordType::Policy
                | RecordType::KbSnapshot
                | RecordType::KbCarried
        )
    }

    /// The log's type tag.
    pub fn tag(self) -> blackbox::log::RecordType {
        match self {
            RecordType::Event => codec::EVENT,
            RecordType::Summary => codec::SUMMARY,
            RecordType::Accounting => codec::ACCOUNTING,
            RecordType::Checkpoint => codec::CHECKPOINT,
            RecordType::Kb => codec::KB,
            RecordType::Incident => codec::INCIDENT,
            RecordType::Dictionary => codec::DICTIONARY,
            RecordType::Recovery => codec::RECOVERY,
            RecordType::Working => codec::WORKING,
            RecordType::Policy => codec::POLICY,
            RecordType::KbSnapshot => codec::KB_SNAPSHOT,
            RecordType::KbCarried => codec::KB_CARRIED,
            RecordType::Prune => blackbox::log::retention::PRUNE_RECORD_TYPE,
        }
    }

    /// The type of a log type tag, `None` for a tag the recorder does not write.
    pub fn from_tag(tag: blackbox::log::RecordType) -> Option<RecordType> {
        RecordType::ALL.into_iter().find(|t| t.tag() == tag)
    }

    /// Parses a name as [`RecordType::name`] gives it.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidRecordType`] for any other text.
    pub fn parse(name: &str) -> Result<RecordType> {
        RecordType::ALL
            .into_iter()
            .find(|t| t.name() == name)
            .ok_or_else(|| Error::InvalidRecordType {
                input: name.to_owned(),
            })
    }
}

impl std::fmt::Display for RecordType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A decoded record: what every record has, and its typed content.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    /// The record's seq.
    pub seq: u64,
    /// The log's timestamp (ns since the epoch): when the record was written. Never
    /// decreasing in log order. For when an event happened, see
    /// [`Record::happened_ns`].
    pub ts_ns: u64,
    /// The record's content hash ([`record_hash`]).
    pub hash: [u8; 32],
    /// The typed content.
    pub body: Body,
}

impl Record {
    /// The record's type; `None` for a type tag the recorder does not write.
    pub fn record_type(&self) -> Option<RecordType> {
        match &self.body {
            Body::Event(_) => Some(RecordType::Event),
            Body::Summary(_) => Some(RecordType::Summary),
            Body::Accounting(_) => Some(RecordType::Accounting),
            Body::Checkpoint(_) => Some(RecordType::Checkpoint),
            Body::Kb(_) => Some(RecordType::Kb),
            Body::Incident(_) => Some(RecordType::Incident),
            Body::Dictionary(_) => Some(RecordType::Dictionary),
            Body::Recovery(_) => Some(RecordType::Recovery),
            Body::Working(_) => Some(RecordType::Working),
            Body::Policy(_) => Some(RecordType::Policy),
            Body::KbSnapshot(_) => Some(RecordType::KbSnapshot),
            Body::KbCarried(_) => Some(RecordType::KbCarried),
            Body::Prune(_) => Some(RecordType::Prune),
            Body::Unknown { .. } => None,
        }
    }

    /// When what the record describes happened (ns since the epoch): an event's
    /// recording time (`recorded_ns`), which for a pre-roll event is earlier than when it
    /// was written; the log's timestamp for every other record.
    pub fn happened_ns(&self) -> u64 {
        match &self.body {
            Body::Event(e) => e.recorded_ns,
            _ => self.ts_ns,
        }
    }

    /// The kind the record is about: an event's or a summary's kind, an incident's
    /// trigger kind; `None` for the other types.
    pub fn kind(&self) -> Option<&str> {
        match &self.body {
            Body::Event(e) => Some(&e.kind),
            Body::Summary(s) => Some(&s.kind),
            Body::Incident(i) => Some(&i.trigger_kind),
            _ => None,
        }
    }
}

/// A record's typed content.
#[derive(Debug, Clone, PartialEq)]
pub enum Body {
    /// An event.
    Event(Event),
    /// One summary window of one kind.
    Summary(Summary),
    /// Per-kind running totals.
    Accounting(Accounting),
    /// A working-memory checkpoint.
    Checkpoint(Checkpoint),
    /// A knowledge-base commit.
    Kb(KbCommit),
    /// An incident marker.
    Incident(Incident),
    /// Interned names.
    Dictionary(Dictionary),
    /// A torn tail cut when the log was opened.
    Recovery(Recovery),
    /// Working-memory changes at one time: the keys set (to their new values) and the
    /// keys removed. The memory at a time is the last checkpoint at or before it with
    /// every delta after it, at or before that time, applied in log order.
    Working(WorkingDelta),
    /// The retention policy in force from this record on: its TOML text, as the
    /// recorder wrote it ([`blackbox::Policy::to_toml`]).
    Policy(String),
    /// The knowledge base as of one version.
    KbSnapshot(KbSnapshot),
    /// A copy of a commit, carried in a segment's preamble (with its seq and time).
    KbCarried(KbCommit),
    /// A pruning: the log's own prune record.
    Prune(blackbox::log::PruneRecord),
    /// A type tag the recorder does not write (a newer writer's, or another layer's):
    /// kept, not interpreted.
    Unknown {
        /// The type tag.
        record_type: u16,
        /// The payload bytes.
        payload: Vec<u8>,
    },
}

/// An event's payload.
#[derive(Debug, Clone, PartialEq)]
pub enum Payload {
    /// The event has none.
    None,
    /// A JSON payload.
    Json(serde_json::Value),
    /// Opaque bytes, or a payload marked JSON whose text is not valid JSON (the
    /// recorder stores JSON text as given, unparsed).
    Raw(Vec<u8>),
}

/// An event record.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// The kind (a dotted name).
    pub kind: String,
    /// Who emitted it, if it said.
    pub source: Option<String>,
    /// Why it was written: `full`, `sample`, `preroll` or `postroll`.
    pub tier: WrittenTier,
    /// How many events it stands for (1 unless sampled).
    pub weight: f64,
    /// The recorder's time when it was recorded (ns). Equals the record's timestamp
    /// except for pre-roll events, written when their incident was triggered.
    pub recorded_ns: u64,
    /// The caller's own time for the event (ns), if it gave one.
    pub event_time_ns: Option<u64>,
    /// The payload.
    pub payload: Payload,
    /// Numeric values by name, in the order recorded.
    pub values: Vec<(String, f64)>,
}

/// The aggregates of one value over a summary window.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ValueSummary {
    /// Events of the window that carried the value.
    pub count: u64,
    /// Smallest value.
    pub min: f64,
    /// Largest value.
    pub max: f64,
    /// The mean, finite whenever the values are (even when `sum` overflowed).
    pub mean: f64,
    /// Sum of the values; ±infinity when the sum of finite values is beyond the `f64`
    /// range ([`ValueSummary::sum_overflowed`]).
    pub sum: f64,
    /// The last value of the window.
    pub last: f64,
}

impl ValueSummary {
    /// Whether `sum` is infinite only because the sum of finite values left the `f64`
    /// range (then `mean` is still the mean).
    pub fn sum_overflowed(&self) -> bool {
        self.sum.is_infinite() && self.min.is_finite() && self.max.is_finite()
    }
}

/// A summary record: one window `[window_start_ns, window_end_ns)` of one kind. A late
/// event may add a second record for the same window: readers add them together.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    /// The kind.
    pub kind: String,
    /// Window start (ns, inclusive).
    pub window_start_ns: u64,
    /// Window end (ns, exclusive).
    pub window_end_ns: u64,
    /// Events summarized.
    pub count: u64,
    /// Per-value aggregates by value name.
    pub values: BTreeMap<String, ValueSummary>,
}

/// An accounting record: per-kind running totals since the log was created, of every
/// kind (a snapshot) or of the kinds whose totals changed since the log's previous
/// accounting record (a kind it does not list keeps its totals). Fold them with
/// [`Accounting::fold_into`]: [`stats`](crate::stats), [`state_at`](crate::state_at)
/// and export weights do.
#[derive(Debug, Clone, PartialEq)]
pub struct Accounting {
    /// Whether it holds every kind's totals (the fold of the accounting records before
    /// it, or of the one right after it when that record starts the segment).
    pub snapshot: bool,
    /// Its watermark (0: none): every event that happened before it is in the log
    /// before this record.
    pub watermark_ns: u64,
    /// Counters by kind.
    pub kinds: BTreeMap<String, Counters>,
}

impl Accounting {
    /// Folds this record into running totals by kind ([`blackbox::codec::fold_accounting`]:
    /// a snapshot replaces them, another record updates the kinds it lists).
    pub fn fold_into(self, totals: &mut BTreeMap<String, Counters>) {
        codec::fold_accounting(totals, self.snapshot, self.kinds);
    }
}

/// A working-memory checkpoint.
#[derive(Debug, Clone, PartialEq)]
pub struct Checkpoint {
    /// The working memory: key → value.
    pub working: serde_json::Map<String, serde_json::Value>,
}

/// A knowledge-base commit (type 5): a JSON object, as the knowledge base writes it.
#[derive(Debug, Clone, PartialEq)]
pub struct KbCommit {
    /// The commit.
    pub commit: serde_json::Value,
}

/// A knowledge-base snapshot (type 11): a JSON object, as the knowledge base writes it
/// (`blackbox::kb::SnapshotRecord`).
#[derive(Debug, Clone, PartialEq)]
pub struct KbSnapshot {
    /// The snapshot.
    pub snapshot: serde_json::Value,
}

/// An incident marker: the trigger and the window captured around it.
#[derive(Debug, Clone, PartialEq)]
pub struct Incident {
    /// Seq of the trigger event.
    pub trigger_seq: u64,
    /// The trigger's kind.
    pub trigger_kind: String,
    /// Recorder time of the trigger (ns).
    pub trigger_ts_ns: u64,
    /// Start of the pre-roll window (ns).
    pub preroll_start_ns: u64,
    /// End of the post-roll window (ns, exclusive); a later trigger may extend it.
    pub postroll_end_ns: u64,
    /// Events written from the pre-roll ring.
    pub preroll_events: u64,
}

/// A torn tail the log cut when the recorder opened it after a crash.
#[derive(Debug, Clone, PartialEq)]
pub struct Recovery {
    /// The seq the first record of the cut bytes would have had: records from it on,
    /// if the torn write held any, are lost.
    pub first_lost_seq: u64,
    /// Bytes cut.
    pub torn_bytes: u64,
    /// The segment file's name.
    pub segment: String,
    /// Where the cut began and why.
    pub detail: String,
}

/// A dictionary record: interned ids and their names.
#[derive(Debug, Clone, PartialEq)]
pub struct Dictionary {
    /// (id, name) pairs.
    pub entries: Vec<(u32, String)>,
}

/// A record's content hash: unkeyed blake3 over `seq (u64 LE) ‖ ts_ns (u64 LE) ‖ record
/// type (u16 LE) ‖ payload`. It identifies one record (an exported row can be traced
/// back to it); it is not a chain link (see `docs/FORMAT.md`).
pub fn record_hash(seq: u64, ts_ns: u64, record_type: u16, payload: &[u8]) -> [u8; 32] {
    let mut h = blake3::Hasher::new();
    h.update(&seq.to_le_bytes());
    h.update(&ts_ns.to_le_bytes());
    h.update(&record_type.to_le_bytes());
    h.update(payload);
    *h.finalize().as_bytes()
}

/// A record decoded in place ([`Decoder::view`], [`Replay::next_view`]): what every
/// record has, and its content borrowed from the log's block buffer and the decoder's
/// names. An event's kind, source and payload are borrowed and its values read as they
/// are iterated; the rarer types (summaries, accounting, checkpoints, ...) are decoded
/// into their owned form. [`RecordRef::into_owned`] gives the [`Record`].
///
/// [`Replay::next_view`]: crate::Replay::next_view
#[derive(Debug, Clone, PartialEq)]
pub struct RecordRef<'a> {
    /// The record's seq.
    pub seq: u64,
    /// The log's timestamp (ns since the epoch): when the record was written.
    pub ts_ns: u64,
    tag: u16,
    payload: &'a [u8],
    /// The typed content.
    pub body: BodyRef<'a>,
}

impl<'a> RecordRef<'a> {
    /// The record's type; `None` for a type tag the recorder does not write.
    pub fn record_type(&self) -> Option<RecordType> {
        RecordType::from_tag(blackbox::log::RecordType(self.tag))
    }

    /// When what the record describes happened, as [`Record::happened_ns`].
    pub fn happened_ns(&self) -> u64 {
        match &self.body {
            BodyRef::Event(e) => e.recorded_ns,
            _ => self.ts_ns,
        }
    }

    /// The kind the record is about, as [`Record::kind`].
    pub fn kind(&self) -> Option<&str> {
        match &self.body {
            BodyRef::Event(e) => Some(e.kind),
            BodyRef::Summary(s) => Some(&s.kind),
            BodyRef::Incident(i) => Some(&i.trigger_kind),
            _ => None,
        }
    }

    /// The record's content hash ([`record_hash`]), computed when asked for.
    pub fn hash(&self) -> [u8; 32] {
        record_hash(self.seq, self.ts_ns, self.tag, self.payload)
    }

    /// The record's payload bytes as the log holds them.
    pub fn raw_payload(&self) -> &'a [u8] {
        self.payload
    }

    /// The owned form: names and bytes copied, a JSON payload parsed, the content hash
    /// computed.
    pub fn into_owned(self) -> Record {
        let hash = self.hash();
        let body = match self.body {
            BodyRef::Event(e) => Body::Event(e.to_owned_event()),
            BodyRef::Summary(s) => Body::Summary(s),
            BodyRef::Accounting(a) => Body::Accounting(a),
            BodyRef::Checkpoint(c) => Body::Checkpoint(c),
            BodyRef::Kb(k) => Body::Kb(k),
            BodyRef::Incident(i) => Body::Incident(i),
            BodyRef::Dictionary(d) => Body::Dictionary(d),
            BodyRef::Recovery(r) => Body::Recovery(r),
            BodyRef::Prune(p) => Body::Prune(p),
            BodyRef::Working(w) => Body::Working(w),
            BodyRef::Policy(text) => Body::Policy(text.to_owned()),
            BodyRef::KbSnapshot(k) => Body::KbSnapshot(k),
            BodyRef::KbCarried(k) => Body::KbCarried(k),
            BodyRef::Unknown {
                record_type,
                payload,
            } => Body::Unknown {
                record_type,
                payload: payload.to_vec(),
            },
        };
        Record {
            seq: self.seq,
            ts_ns: self.ts_ns,
            hash,
            body,
        }
    }
}

/// A record's typed content, decoded in place ([`RecordRef`]).
#[derive(Debug, Clone, PartialEq)]
pub enum BodyRef<'a> {
    /// An event, borrowed.
    Event(EventRef<'a>),
    /// One summary window of one kind.
    Summary(Summary),
    /// Per-kind running totals.
    Accounting(Accounting),
    /// A working-memory checkpoint.
    Checkpoint(Checkpoint),
    /// A knowledge-base commit.
    Kb(KbCommit),
    /// An incident marker.
    Incident(Incident),
    /// Interned names.
    Dictionary(Dictionary),
    /// A torn tail cut when the log was opened.
    Recovery(Recovery),
    /// Segments the disk budget removed.
    Prune(blackbox::log::PruneRecord),
    /// Working-memory changes at one time.
    Working(WorkingDelta),
    /// The retention policy in force from this record on (TOML text), borrowed.
    Policy(&'a str),
    /// The knowledge base as of one version.
    KbSnapshot(KbSnapshot),
    /// A copy of a commit, carried in a segment's preamble.
    KbCarried(KbCommit),
    /// A type tag the recorder does not write, its payload borrowed.
    Unknown {
        /// The type tag.
        record_type: u16,
        /// The payload bytes.
        payload: &'a [u8],
    },
}

/// An event's payload, borrowed and unparsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PayloadRef<'a> {
    /// The event has none.
    None,
    /// Text recorded as JSON, as stored (the recorder does not parse it, so it may not
    /// be valid JSON: [`PayloadRef::to_payload`] says).
    Json(&'a [u8]),
    /// Opaque bytes.
    Raw(&'a [u8]),
}

impl<'a> PayloadRef<'a> {
    /// The payload's bytes (empty for none).
    pub fn bytes(&self) -> &'a [u8] {
        match *self {
            PayloadRef::None => &[],
            PayloadRef::Json(b) | PayloadRef::Raw(b) => b,
        }
    }

    /// The owned form: JSON text parsed into a [`serde_json::Value`], or kept as raw
    /// bytes when it is not valid JSON.
    pub fn to_payload(&self) -> Payload {
        match *self {
            PayloadRef::None => Payload::None,
            PayloadRef::Raw(b) => Payload::Raw(b.to_vec()),
            PayloadRef::Json(b) => match serde_json::from_slice(b) {
                Ok(v) => Payload::Json(v),
                Err(_) => Payload::Raw(b.to_vec()),
            },
        }
    }
}

/// An event's numeric values in place: (name, value) pairs in the order recorded, each
/// name resolved as it is iterated (every one was checked when the event was decoded).
#[derive(Clone, Copy)]
pub struct ValuesRef<'a> {
    values: codec::Values<'a>,
    names: &'a DictionaryFold,
}

impl<'a> ValuesRef<'a> {
    /// How many values.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// The (name, value) pairs in the order recorded.
    pub fn iter(&self) -> impl Iterator<Item = (&'a str, f64)> + 'a {
        let names = self.names;
        // `Decoder::view` refused an event with a value name no dictionary names, and
        // names never leave a dictionary: none is passed over here.
        self.values
            .iter()
            .filter_map(move |(id, v)| names.name(id).map(|n| (n, v)))
    }
}

impl std::fmt::Debug for ValuesRef<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl PartialEq for ValuesRef<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.iter().eq(other.iter())
    }
}

/// An event record decoded in place: its kind, source and payload borrowed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EventRef<'a> {
    /// The kind (a dotted name).
    pub kind: &'a str,
    /// Who emitted it, if it said.
    pub source: Option<&'a str>,
    /// Why it was written: `full`, `sample`, `preroll` or `postroll`.
    pub tier: WrittenTier,
    /// How many events it stands for (1 unless sampled).
    pub weight: f64,
    /// The recorder's time when it was recorded (ns), as [`Event::recorded_ns`].
    pub recorded_ns: u64,
    /// The caller's own time for the event (ns), if it gave one.
    pub event_time_ns: Option<u64>,
    /// The payload, unparsed.
    pub payload: PayloadRef<'a>,
    /// Numeric values by name, in the order recorded.
    pub values: ValuesRef<'a>,
}

impl EventRef<'_> {
    /// The owned form ([`Event`]): names and bytes copied, a JSON payload parsed.
    pub fn to_owned_event(&self) -> Event {
        Event {
            kind: self.kind.to_owned(),
            source: self.source.map(str::to_owned),
            tier: self.tier,
            weight: self.weight,
            recorded_ns: self.recorded_ns,
            event_time_ns: self.event_time_ns,
            payload: self.payload.to_payload(),
            values: self
                .values
                .iter()
                .map(|(name, v)| (name.to_owned(), v))
                .collect(),
        }
    }
}

/// Decodes log records into typed [`Record`]s, folding the dictionary records it meets
/// so that interned ids resolve to names.
///
/// A decoder must see the dictionary in force before the first record it decodes: feed
/// it ([`Decoder::learn`]) every dictionary record from the start of a segment that
/// opens with one (the recorder's segment preamble holds the whole dictionary), or from
/// seq 0. [`Replay`] does this for any range.
///
/// [`Replay`]: crate::Replay
#[derive(Debug, Default, Clone)]
pub struct Decoder {
    names: DictionaryFold,
    /// The last policy record met (decoded or learned): its seq and text.
    policy: Option<(u64, String)>,
}

impl Decoder {
    /// A decoder that knows no names yet.
    pub fn new() -> Decoder {
        Decoder::default()
    }

    /// Decodes one record into its owned form. Dictionary records also extend the names
    /// the decoder knows, policy records the policy it reports.
    ///
    /// # Errors
    ///
    /// [`Error::Decode`] when the payload is not a valid record of its type, or names an
    /// id that no dictionary record seen so far names, or a dictionary record gives a
    /// known id another name.
    pub fn decode(&mut self, record: &LogRecord) -> Result<Record> {
        self.learn(record)?;
        Ok(self.view(record)?.into_owned())
    }

    /// Decodes one record in place: the returned view borrows the record's payload and
    /// this decoder's names, and allocates nothing for an event or a policy. It does not
    /// learn from the record: feed it to [`Decoder::learn`] first (a dictionary record
    /// names ids that later records, and its own view, use).
    ///
    /// # Errors
    ///
    /// As [`Decoder::decode`], but a dictionary record is only checked to be readable.
    pub fn view<'a>(&'a self, record: &'a LogRecord) -> Result<RecordRef<'a>> {
        let seq = record.seq().0;
        let ts_ns = record.ts_ns();
        let tag = record.record_type();
        let payload = record.payload();
        let body = match RecordType::from_tag(tag) {
            Some(t) => self.view_body(t, seq, ts_ns, payload)?,
            None => BodyRef::Unknown {
                record_type: tag.0,
                payload,
            },
        };
        Ok(RecordRef {
            seq,
            ts_ns,
            tag: tag.0,
            payload,
            body,
        })
    }

    /// Folds a dictionary record into the names and notes a policy record, without
    /// decoding anything else; other records are ignored. For skipping the records
    /// before a range's start, and before [`Decoder::view`].
    ///
    /// # Errors
    ///
    /// As [`Decoder::decode`], for dictionary and policy records.
    pub fn learn(&mut self, record: &LogRecord) -> Result<()> {
        let t = record.record_type();
        let seq = record.seq().0;
        let fail = |reason: String| Error::Decode {
            seq,
            record_type: t.0,
            reason,
        };
        if t == codec::DICTIONARY {
            let d = codec::access::<ArchivedDictionaryRecord>(record.payload())
                .map_err(|e| fail(format!("not a valid dictionary record: {e}")))?;
            // The recorder's own rules for a dictionary (ids from 1 within the limit,
            // no id or name given twice), as it applies them when it reopens a log.
            for e in d.entries.iter() {
                self.names
                    .add(e.0.to_native(), e.1.as_str())
                    .map_err(&fail)?;
            }
        } else if t == codec::POLICY {
            let text = policy_text(record.payload()).map_err(fail)?;
            self.note_policy(seq, text);
        }
        Ok(())
    }

    /// The names known so far: every dictionary entry decoded or learned.
    pub fn names(&self) -> &DictionaryFold {
        &self.names
    }

    /// The last policy record this decoder has met, decoded or learned: (seq, TOML
    /// text). Fed from a segment's start, as a decoder must be, it is the policy in
    /// force at the last record fed (every segment opens with it, and every session
    /// writes it when it opens).
    pub fn policy(&self) -> Option<(u64, &str)> {
        self.policy
            .as_ref()
            .map(|(seq, text)| (*seq, text.as_str()))
    }

    /// The name of an interned id, if a dictionary record seen so far names it.
    pub fn name(&self, id: u32) -> Option<&str> {
        self.names.name(id)
    }

    fn view_body<'a>(
        &'a self,
        t: RecordType,
        seq: u64,
        ts_ns: u64,
        payload: &'a [u8],
    ) -> Result<BodyRef<'a>> {
        let fail = |reason: String| Error::Decode {
            seq,
            record_type: t.tag().0,
            reason,
        };
        let body = match t {
            RecordType::Event => {
                let e = codec::decode_event(payload, ts_ns)
                    .map_err(|why| fail(format!("not a valid event record: {why}")))?;
                let payload = match e.encoding {
                    Encoding::None => PayloadRef::None,
                    Encoding::Raw => PayloadRef::Raw(e.payload),
                    Encoding::Json => PayloadRef::Json(e.payload),
                };
                // Every value's name is checked here, so iterating them finds each one.
                for (name, _) in e.values.iter() {
                    self.name_of(name, "value name", seq, t)?;
                }
                BodyRef::Event(EventRef {
                    kind: self.name_of(e.kind, "kind", seq, t)?,
                    source: match e.source {
                        0 => None,
                        id => Some(self.name_of(id, "source", seq, t)?),
                    },
                    tier: e.tier,
                    weight: e.weight,
                    recorded_ns: e.recorded_ns,
                    event_time_ns: e.event_time_ns,
                    payload,
                    values: ValuesRef {
                        values: e.values,
                        names: &self.names,
                    },
                })
            }
            RecordType::Summary => {
                let s = codec::access::<ArchivedSummaryRecord>(payload)
                    .map_err(|e| fail(format!("not a valid summary record: {e}")))?;
                let mut values = BTreeMap::new();
                for v in s.values.iter() {
                    let name = self
                        .name_of(v.name.to_native(), "value name", seq, t)?
                        .to_owned();
                    let count = v.count.to_native();
                    let summary = ValueSummary {
                        count,
                        min: v.min.to_native(),
                        max: v.max.to_native(),
                        mean: v.mean.to_native(),
                        sum: v.sum.to_native(),
                        last: v.last.to_native(),
                    };
                    if values.insert(name.clone(), summary).is_some() {
                        return Err(fail(format!("value {name:?} appears twice")));
                    }
                }
                BodyRef::Summary(Summary {
                    kind: self.name_of(s.kind.to_native(), "kind", seq, t)?.to_owned(),
                    window_start_ns: s.window_start_ns.to_native(),
                    window_end_ns: s.window_end_ns.to_native(),
                    count: s.count.to_native(),
                    values,
                })
            }
            RecordType::Accounting => {
                let a = codec::access::<ArchivedAccountingRecord>(payload)
                    .map_err(|e| fail(format!("not a valid accounting record: {e}")))?;
                let mut kinds = BTreeMap::new();
                for e in a.kinds.iter() {
                    let name = self.name_of(e.0.to_native(), "kind", seq, t)?.to_owned();
                    let counters = e.1.to_counters();
                    if kinds.insert(name.clone(), counters).is_some() {
                        return Err(fail(format!("kind {name:?} appears twice")));
                    }
                }
                BodyRef::Accounting(Accounting {
                    snapshot: a.snapshot,
                    watermark_ns: a.watermark_ns.to_native(),
                    kinds,
                })
            }
            RecordType::Checkpoint => {
                let working = serde_json::from_slice(payload)
                    .map_err(|e| fail(format!("a checkpoint is a JSON object: {e}")))?;
                BodyRef::Checkpoint(Checkpoint { working })
            }
            RecordType::Working => BodyRef::Working(WorkingDelta::decode(payload).map_err(fail)?),
            RecordType::Policy => BodyRef::Policy(policy_text(payload).map_err(fail)?),
            RecordType::Kb | RecordType::KbCarried | RecordType::KbSnapshot => {
                let what = match t {
                    RecordType::Kb => "a knowledge-base commit",
                    RecordType::KbCarried => "a carried knowledge-base commit",
                    _ => "a knowledge-base snapshot",
                };
                let value: serde_json::Value = serde_json::from_slice(payload)
                    .map_err(|e| fail(format!("{what} is a JSON object: {e}")))?;
                if !value.is_object() {
                    return Err(fail(format!(
                        "{what} is a JSON object, not another JSON value"
                    )));
                }
                match t {
                    RecordType::Kb => BodyRef::Kb(KbCommit { commit: value }),
                    RecordType::KbCarried => BodyRef::KbCarried(KbCommit { commit: value }),
                    _ => BodyRef::KbSnapshot(KbSnapshot { snapshot: value }),
                }
            }
            RecordType::Incident => {
                let i = codec::access::<ArchivedIncidentRecord>(payload)
                    .map_err(|e| fail(format!("not a valid incident record: {e}")))?;
                BodyRef::Incident(Incident {
                    trigger_seq: i.trigger_seq.to_native(),
                    trigger_kind: self
                        .name_of(i.trigger_kind.to_native(), "kind", seq, t)?
                        .to_owned(),
                    trigger_ts_ns: i.trigger_ts_ns.to_native(),
                    preroll_start_ns: i.preroll_start_ns.to_native(),
                    postroll_end_ns: i.postroll_end_ns.to_native(),
                    preroll_events: i.preroll_events.to_native(),
                })
            }
            RecordType::Prune => BodyRef::Prune(
                blackbox::log::PruneRecord::decode(payload)
                    .map_err(|e| fail(format!("not a valid prune record: {e}")))?,
            ),
            RecordType::Recovery => {
                let r = codec::access::<ArchivedRecoveryRecord>(payload)
                    .map_err(|e| fail(format!("not a valid recovery record: {e}")))?;
                BodyRef::Recovery(Recovery {
                    first_lost_seq: r.first_lost_seq.to_native(),
                    torn_bytes: r.torn_bytes.to_native(),
                    segment: r.segment.as_str().to_owned(),
                    detail: r.detail.as_str().to_owned(),
                })
            }
            RecordType::Dictionary => {
                let d = codec::access::<ArchivedDictionaryRecord>(payload)
                    .map_err(|e| fail(format!("not a valid dictionary record: {e}")))?;
                let entries: Vec<(u32, String)> = d
                    .entries
                    .iter()
                    .map(|e| (e.0.to_native(), e.1.as_str().to_owned()))
                    .collect();
                BodyRef::Dictionary(Dictionary { entries })
            }
        };
        Ok(body)
    }

    fn note_policy(&mut self, seq: u64, text: &str) {
        if self.policy.as_ref().is_none_or(|(s, _)| *s != seq) {
            self.policy = Some((seq, text.to_owned()));
        }
    }

    fn name_of(&self, id: u32, what: &str, seq: u64, t: RecordType) -> Result<&str> {
        self.names.name(id).ok_or_else(|| Error::Decode {
            seq,
            record_type: t.tag().0,
            reason: format!("its {what} id {id} is named by no dictionary record before it"),
        })
    }
}

/// A policy record's text: UTF-8 TOML.
fn policy_text(payload: &[u8]) -> std::result::Result<&str, String> {
    std::str::from_utf8(payload)
        .map_err(|e| format!("not a valid policy record: its text is not UTF-8 ({e})"))
}
