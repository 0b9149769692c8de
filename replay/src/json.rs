//! Records as JSON: what `blackbox replay --json` prints, one object a line.

use serde_json::{Map, Value, json};

use crate::decode::{
    Accounting, Body, BodyRef, Dictionary, Incident, Payload, PayloadRef, Record, RecordRef,
    RecordType, Recovery, Summary,
};
use crate::time::format_time;

/// Lowercase hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(char::from(HEX[usize::from(b >> 4)]));
        s.push(char::from(HEX[usize::from(b & 0xf)]));
    }
    s
}

/// A record as a JSON object (DESIGN §8).
///
/// Every record has `seq`, `ts` (RFC 3339, UTC, nanoseconds) and `ts_ns`: when it
/// happened ([`Record::happened_ns`]: an event's recording time, for a pre-roll event
/// earlier than when it was written); `written` and `written_ns`: when the log wrote it
/// (the log's timestamp); `type` and `hash` (the record's content hash in hex,
/// [`record_hash`](crate::record_hash), over the log's timestamp). Then, by type:
///
/// - event: `kind`, `tier` (`full`, `sample`, `preroll`, `postroll`), `weight`,
///   `source` (or null), `payload`, `encoding` (`json`, `raw`, `none`), `values`
///   (`{name: number}`), `recorded_ns`, `event_time` and `event_time_ns` (or null). A
///   JSON payload is the JSON value itself; a raw payload is a string of lowercase hex
///   digits; no payload is null. A non-finite value is null.
/// - summary: `kind`, `window_start`, `window_end` (RFC 3339), `window_start_ns`,
///   `window_end_ns`, `count`, `values: {name: {min, max, mean, sum, last, count}}`;
///   a sum of finite values beyond the `f64` range is null with `"sum_overflow": true`
///   (its mean is still given).
/// - accounting: `kinds: {kind: {seen, kept, sampled_out, summarized, dropped,
///   overflow, preroll, lost}}`, the kinds whose running totals changed since the
///   previous accounting record.
/// - checkpoint: `working: {key: value}`.
/// - working (working-memory changes at one time): `set: {key: value}` (the keys set
///   and their new values) and `del: [key]` (the keys removed), each possibly empty.
/// - kb: `commit` (the commit object).
/// - incident: `kind` and `trigger_kind` (the trigger's kind), `trigger_seq`,
///   `trigger_ts`, `trigger_ts_ns`, `preroll_start`, `preroll_start_ns`,
///   `postroll_end`, `postroll_end_ns`, `preroll_events`.
/// - dictionary: `entries: {id: name}`.
/// - recovery (a torn tail cut when the log was opened after a crash):
///   `first_lost_seq` (records from it on, if the torn write held any, are lost),
///   `torn_bytes`, `segment` (the file's name) and `detail`.
/// - a type the recorder does not write: `type` is `"unknown"`, with `record_type`
///   (the tag) and `payload` in hex.
pub fn to_json(record: &Record) -> Value {
    let mut o = header(
        record.seq,
        record.happened_ns(),
        record.ts_ns,
        record.record_type(),
    );
    match &record.body {
        Body::Event(e) => event_fields(
            &mut o,
            EventFields {
                kind: &e.kind,
                tier: e.tier,
                weight: e.weight,
                source: e.source.as_deref(),
                payload: payload_json(&e.payload),
                values: e.values.iter().map(|(n, v)| (n.as_str(), *v)),
                recorded_ns: e.recorded_ns,
                event_time_ns: e.event_time_ns,
            },
        ),
        Body::Summary(s) => summary_fields(&mut o, s),
        Body::Accounting(a) => accounting_fields(&mut o, a),
        Body::Checkpoint(c) => {
            o.insert("working".into(), Value::Object(c.working.clone()));
        }
        Body::Policy(toml) => {
            o.insert("toml".into(), toml.as_str().into());
        }
        Body::Working(d) => working_fields(&mut o, d),
        Body::Kb(k) | Body::KbCarried(k) => {
            o.insert("commit".into(), k.commit.clone());
        }
        Body::KbSnapshot(k) => {
            o.insert("snapshot".into(), k.snapshot.clone());
        }
        Body::Incident(i) => incident_fields(&mut o, i),
        Body::Dictionary(d) => dictionary_fields(&mut o, d),
        Body::Recovery(r) => recovery_fields(&mut o, r),
        Body::Prune(p) => prune_fields(&mut o, p),
        Body::Unknown {
            record_type,
            payload,
        } => unknown_fields(&mut o, *record_type, payload),
    }
    o.insert("hash".into(), hex(&record.hash).into());
    Value::Object(o)
}

impl RecordRef<'_> {
    /// The record as the JSON object [`to_json`] gives for its owned form, built from
    /// the borrowed record (a JSON payload is parsed here, into the output).
    pub fn to_json(&self) -> Value {
        self.to_json_with_hash(self.hash())
    }

    /// As [`RecordRef::to_json`], with the record's content hash already computed.
    pub(crate) fn to_json_with_hash(&self, hash: [u8; 32]) -> Value {
        let mut o = header(self.seq, self.happened_ns(), self.ts_ns, self.record_type());
        match &self.body {
            BodyRef::Event(e) => event_fields(
                &mut o,
                EventFields {
                    kind: e.kind,
                    tier: e.tier,
                    weight: e.weight,
                    source: e.source,
                    payload: payload_ref_json(e.payload),
                    values: e.values.iter(),
                    recorded_ns: e.recorded_ns,
                    event_time_ns: e.event_time_ns,
                },
            ),
            BodyRef::Summary(s) => summary_fields(&mut o, s),
            BodyRef::Accounting(a) => accounting_fields(&mut o, a),
            BodyRef::Checkpoint(c) => {
                o.insert("working".into(), Value::Object(c.working.clone()));
            }
            BodyRef::Policy(toml) => {
                o.insert("toml".into(), (*toml).into());
            }
            BodyRef::Working(d) => working_fields(&mut o, d),
            BodyRef::Kb(k) | BodyRef::KbCarried(k) => {
                o.insert("commit".into(), k.commit.clone());
            }
            BodyRef::KbSnapshot(k) => {
                o.insert("snapshot".into(), k.snapshot.clone());
            }
            BodyRef::Incident(i) => incident_fields(&mut o, i),
            BodyRef::Dictionary(d) => dictionary_fields(&mut o, d),
            BodyRef::Recovery(r) => recovery_fields(&mut o, r),
            BodyRef::Prune(p) => prune_fields(&mut o, p),
            BodyRef::Unknown {
                record_type,
                payload,
            } => unknown_fields(&mut o, *record_type, payload),
        }
        o.insert("hash".into(), hex(&hash).into());
        Value::Object(o)
    }
}

/// The fields every record has, but its hash.
fn header(seq: u64, happened: u64, ts_ns: u64, t: Option<RecordType>) -> Map<String, Value> {
    let mut o = Map::new();
    o.insert("seq".into(), seq.into());
    o.insert("ts".into(), format_time(happened).into());
    o.insert("ts_ns".into(), happened.into());
    o.insert("written".into(), format_time(ts_ns).into());
    o.insert("written_ns".into(), ts_ns.into());
    let type_name = t.map_or("unknown", |t| t.name());
    o.insert("type".into(), type_name.into());
    o
}

fn summary_fields(o: &mut Map<String, Value>, s: &Summary) {
    o.insert("kind".into(), s.kind.clone().into());
    o.insert("window_start".into(), format_time(s.window_start_ns).into());
    o.insert("window_end".into(), format_time(s.window_end_ns).into());
    o.insert("window_start_ns".into(), s.window_start_ns.into());
    o.insert("window_end_ns".into(), s.window_end_ns.into());
    o.insert("count".into(), s.count.into());
    let values: Map<String, Value> = s
        .values
        .iter()
        .map(|(name, v)| {
            let mut value = json!({
                "min": v.min,
                "max": v.max,
                "mean": v.mean,
                "sum": v.sum,
                "last": v.last,
                "count": v.count,
            });
            if v.sum_overflowed() {
                // JSON has no infinity: `sum` is null, and this says why.
                value["sum_overflow"] = true.into();
            }
            (name.clone(), value)
        })
        .collect();
    o.insert("values".into(), Value::Object(values));
}

fn accounting_fields(o: &mut Map<String, Value>, a: &Accounting) {
    let kinds: Map<String, Value> = a
        .kinds
        .iter()
        .map(|(kind, c)| (kind.clone(), counters_json(c)))
        .collect();
    o.insert("snapshot".into(), Value::Bool(a.snapshot));
    o.insert(
        "watermark_ns".into(),
        if a.watermark_ns == 0 {
            Value::Null
        } else {
            Value::from(a.watermark_ns)
        },
    );
    o.insert("kinds".into(), Value::Object(kinds));
}

fn working_fields(o: &mut Map<String, Value>, d: &blackbox::WorkingDelta) {
    o.insert("set".into(), Value::Object(d.set.clone()));
    o.insert(
        "del".into(),
        Value::Array(d.del.iter().cloned().map(Value::from).collect()),
    );
}

fn incident_fields(o: &mut Map<String, Value>, i: &Incident) {
    o.insert("kind".into(), i.trigger_kind.clone().into());
    o.insert("trigger_kind".into(), i.trigger_kind.clone().into());
    o.insert("trigger_seq".into(), i.trigger_seq.into());
    o.insert("trigger_ts".into(), format_time(i.trigger_ts_ns).into());
    o.insert("trigger_ts_ns".into(), i.trigger_ts_ns.into());
    o.insert(
        "preroll_start".into(),
        format_time(i.preroll_start_ns).into(),
    );
    o.insert("preroll_start_ns".into(), i.preroll_start_ns.into());
    o.insert("postroll_end".into(), format_time(i.postroll_end_ns).into());
    o.insert("postroll_end_ns".into(), i.postroll_end_ns.into());
    o.insert("preroll_events".into(), i.preroll_events.into());
}

fn dictionary_fields(o: &mut Map<String, Value>, d: &Dictionary) {
    let entries: Map<String, Value> = d
        .entries
        .iter()
        .map(|(id, name)| (id.to_string(), name.clone().into()))
        .collect();
    o.insert("entries".into(), Value::Object(entries));
}

fn recovery_fields(o: &mut Map<String, Value>, r: &Recovery) {
    o.insert("first_lost_seq".into(), r.first_lost_seq.into());
    o.insert("torn_bytes".into(), r.torn_bytes.into());
    o.insert("segment".into(), r.segment.clone().into());
    o.insert("detail".into(), r.detail.clone().into());
}

fn prune_fields(o: &mut Map<String, Value>, p: &blackbox::log::PruneRecord) {
    o.insert("pruned_first_seq".into(), p.first_seq.into());
    o.insert("pruned_last_seq".into(), p.last_seq.into());
    o.insert("pruned_bytes".into(), p.bytes.into());
    o.insert("pruned_first_ts_ns".into(), p.first_ts_ns.into());
    o.insert("pruned_last_ts_ns".into(), p.last_ts_ns.into());
    let mut why = Vec::new();
    if p.reasons & blackbox::log::retention::REASON_BYTES != 0 {
        why.push("max_bytes");
    }
    if p.reasons & blackbox::log::retention::REASON_AGE != 0 {
        why.push("max_age");
    }
    if p.reasons & blackbox::log::retention::REASON_PINNED_CAP != 0 {
        why.push("pinned_max_bytes");
    }
    if p.reasons & blackbox::log::retention::REASON_DISK_FULL != 0 {
        why.push("disk_full");
    }
    o.insert("reasons".into(), why.into());
    // Under a shipping hold: whether everything removed had been shipped.
    if p.reasons & blackbox::log::retention::REASON_SHIPPED != 0 {
        o.insert("shipped".into(), true.into());
    } else if p.reasons & blackbox::log::retention::REASON_UNSHIPPED != 0 {
        o.insert("shipped".into(), false.into());
    }
    o.insert("cut_link".into(), hex(&p.cut_link).into());
    o.insert("segments".into(), p.segments.len().into());
    o.insert("evicted_pins".into(), p.evicted_pins.clone().into());
}

fn unknown_fields(o: &mut Map<String, Value>, record_type: u16, payload: &[u8]) {
    o.insert("record_type".into(), record_type.into());
    o.insert("payload".into(), hex(payload).into());
}

/// A set of counters as `{seen, kept, sampled_out, summarized, dropped, overflow,
/// preroll, lost}`.
pub fn counters_json(c: &blackbox::Counters) -> Value {
    json!({
        "seen": c.seen,
        "kept": c.kept,
        "sampled_out": c.sampled_out,
        "summarized": c.summarized,
        "dropped": c.dropped,
        "overflow": c.overflow,
        "preroll": c.preroll,
        "lost": c.lost,
    })
}

/// An event's payload as JSON: the value itself, hex for raw bytes, null for none.
pub(crate) fn payload_json(p: &Payload) -> (Value, &'static str) {
    match p {
        Payload::None => (Value::Null, "none"),
        Payload::Json(v) => (v.clone(), "json"),
        Payload::Raw(b) => (hex(b).into(), "raw"),
    }
}

/// A borrowed payload as JSON, as [`payload_json`] gives its owned form: JSON text
/// parsed (raw hex when it is not valid JSON).
pub(crate) fn payload_ref_json(p: PayloadRef<'_>) -> (Value, &'static str) {
    match p {
        PayloadRef::None => (Value::Null, "none"),
        PayloadRef::Json(b) => match serde_json::from_slice(b) {
            Ok(v) => (v, "json"),
            Err(_) => (hex(b).into(), "raw"),
        },
        PayloadRef::Raw(b) => (hex(b).into(), "raw"),
    }
}

/// An event's fields, owned or borrowed.
struct EventFields<'a, V> {
    kind: &'a str,
    tier: blackbox::codec::WrittenTier,
    weight: f64,
    source: Option<&'a str>,
    payload: (Value, &'static str),
    values: V,
    recorded_ns: u64,
    event_time_ns: Option<u64>,
}

fn event_fields<'a>(
    o: &mut Map<String, Value>,
    e: EventFields<'a, impl Iterator<Item = (&'a str, f64)>>,
) {
    o.insert("kind".into(), e.kind.into());
    o.insert("tier".into(), e.tier.name().into());
    o.insert("weight".into(), e.weight.into());
    o.insert("source".into(), e.source.map_or(Value::Null, Value::from));
    let (payload, encoding) = e.payload;
    o.insert("payload".into(), payload);
    o.insert("encoding".into(), encoding.into());
    let values: Map<String, Value> = e
        .values
        .map(|(name, v)| (name.to_owned(), Value::from(v)))
        .collect();
    o.insert("values".into(), Value::Object(values));
    o.insert("recorded_ns".into(), e.recorded_ns.into());
    o.insert(
        "event_time".into(),
        e.event_time_ns
            .map_or(Value::Null, |t| format_time(t).into()),
    );
    o.insert(
        "event_time_ns".into(),
        e.event_time_ns.map_or(Value::Null, Value::from),
    );
}
