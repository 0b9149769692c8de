//! The recorder's records through the decoders `Replay` uses: any type tag, any
//! payload, any log timestamp into `Decoder::decode`, then `to_json` as `blackbox
//! replay --json` prints it; and structured records written by the crates' own
//! encoders, which must decode to what was encoded.
//!
//! The first byte picks the mode:
//!
//! - below `0xF0`: the record type tag (every type the recorder writes, and unknown
//!   ones); `0xF0`: the tag is the next two bytes (little endian), any `u16`. Then a
//!   log timestamp (8 bytes, little endian) and the payload (the rest). The decoder has
//!   learned a dictionary naming ids 1 to 4 first, so that events, summaries and
//!   incidents can name them.
//! - `0xF1`: events. A dictionary of arbitrary names and events of arbitrary fields,
//!   encoded by `codec::EventRecord::encode`, must decode to exactly those fields.
//! - `0xF2`: working-memory deltas. An arbitrary delta encoded by `WorkingDelta::encode`
//!   (under an arbitrary record limit) must decode, record by record, to its sets and
//!   removals in order.
//! - `0xF3`: summaries, accounting, incidents and recoveries (rkyv archives), encoded
//!   with rkyv from arbitrary values, must decode to those values, with their ids
//!   named; a value name or a kind given twice is refused, by name.
//!
//! Every record decoded: its seq, timestamp, hash and type are the log record's; its
//! JSON is valid JSON that reads back the same; decoding it in place
//! (`Decoder::view`) gives the same record and the same JSON; and it re-encodes to a
//! record that decodes the same (a prune record to the very same bytes). Every record
//! refused: a `Decode` error naming its seq and type tag, with a reason.

use std::collections::{BTreeMap, BTreeSet};

use arbitrary::{Result as ArbResult, Unstructured};
use blackbox::codec::{
    self, AccountingRecord, ArchivedAccountingRecord, ArchivedIncidentRecord,
    ArchivedRecoveryRecord, ArchivedSummaryRecord, Counters, DictionaryRecord, Encoding,
    EventRecord, IncidentRecord, RecoveryRecord, SummaryRecord, ValueStats, WrittenTier,
};
use blackbox::log::{RecordType as Tag, Seq};
use blackbox::{LogRecord, NAMES_PER_LOG_MAX, WorkingDelta};
use blackbox_replay::{Body, Decoder, Error, Payload, Record, RecordType, record_hash, to_json};
use rkyv::rancor;
use serde_json::Value;

use crate::arb;

/// The seq every record of an input is decoded at (after the dictionary's).
const SEQ: u64 = 1_000;

/// The names the decoder knows before a raw record: ids 1 to 4.
const NAMES: [(u32, &str); 4] = [
    (1, "action.grasp"),
    (2, "arm.left"),
    (3, "force"),
    (4, "sensor.temperature"),
];

/// The target: see the module's documentation.
pub fn recorder_records(data: &[u8]) {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    match pick {
        0xF0 => {
            let Some((tag, rest)) = rest.split_first_chunk::<2>() else {
                return;
            };
            raw(u16::from_le_bytes(*tag), rest);
        }
        // Running out of bytes while building a structured input ends the input.
        0xF1 => drop(events(&mut Unstructured::new(rest))),
        0xF2 => drop(deltas(&mut Unstructured::new(rest))),
        0xF3 => drop(archived(&mut Unstructured::new(rest))),
        0xF4..=0xFF => {}
        tag => raw(u16::from(tag), rest),
    }
}

/// A record of type `tag`: a timestamp, then the payload.
fn raw(tag: u16, data: &[u8]) {
    let (ts_ns, payload) = match data.split_first_chunk::<8>() {
        Some((ts, payload)) => (u64::from_le_bytes(*ts), payload),
        None => (0, data),
    };
    let mut decoder = Decoder::new();
    learn_dictionary(&mut decoder, &NAMES.map(|(id, n)| (id, n.to_owned())));
    let record = LogRecord::from_parts(Seq(SEQ), ts_ns, Tag(tag), payload);
    match decoder.decode(&record) {
        Ok(decoded) => check_decoded(&decoder, &record, &decoded),
        Err(err) => check_refused(&err, tag),
    }
}

/// Decodes a dictionary record of `entries` at seq 0: it must be taken, and read back
/// as written.
fn learn_dictionary(decoder: &mut Decoder, entries: &[(u32, String)]) {
    let bytes = archive(&DictionaryRecord {
        entries: entries.to_vec(),
    });
    let record = LogRecord::from_parts(Seq(0), 0, codec::DICTIONARY, &bytes);
    let decoded = decoder
        .decode(&record)
        .unwrap_or_else(|e| panic!("a dictionary of valid entries is refused: {e}"));
    let Body::Dictionary(d) = &decoded.body else {
        panic!("a dictionary record decodes to {:?}", decoded.body);
    };
    assert_eq!(d.entries, entries, "the dictionary read back differs");
    check_decoded(decoder, &record, &decoded);
}

/// A value as rkyv archives it: what the recorder's writer puts in a record.
fn archive<T>(value: &T) -> Vec<u8>
where
    T: for<'a> rkyv::Serialize<
            rkyv::api::high::HighSerializer<
                rkyv::util::AlignedVec,
                rkyv::ser::allocator::ArenaHandle<'a>,
                rancor::Error,
            >,
        >,
{
    match rkyv::to_bytes::<rancor::Error>(value) {
        Ok(bytes) => bytes.to_vec(),
        Err(e) => panic!("archiving an in-memory record failed: {e}"),
    }
}

/// A refused record: the error is a decode error naming the record's seq and tag.
fn check_refused(err: &Error, tag: u16) {
    let text = err.to_string();
    match err {
        Error::Decode {
            seq,
            record_type,
            reason,
        } => {
            assert_eq!(*seq, SEQ, "the error names another seq: {text}");
            assert_eq!(*record_type, tag, "the error names another type: {text}");
            assert!(
                !reason.trim().is_empty(),
                "the error gives no reason: {text}"
            );
            assert!(
                text.contains(&format!("seq {SEQ}")) && text.contains(&format!("type {tag}")),
                "the error does not say where: {text}"
            );
        }
        other => panic!("a record's bytes gave an error that is not a decode error: {other}"),
    }
}

/// The properties of a record decoded (see the module's documentation).
fn check_decoded(decoder: &Decoder, record: &LogRecord, decoded: &Record) {
    let tag = record.record_type().0;
    let payload = record.payload();
    assert_eq!(decoded.seq, record.seq().0, "seq");
    assert_eq!(decoded.ts_ns, record.ts_ns(), "timestamp");
    assert_eq!(
        decoded.hash,
        record_hash(record.seq().0, record.ts_ns(), tag, payload),
        "hash"
    );
    assert_eq!(
        decoded.record_type(),
        RecordType::from_tag(Tag(tag)),
        "the record decoded as another type"
    );
    // The JSON `replay --json` prints: valid JSON that reads back the same.
    let json = to_json(decoded);
    let text = json.to_string();
    let back: Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("a record's JSON does not read back: {e}\n{text}"));
    assert_eq!(back, json, "a record's JSON reads back different");
    assert_eq!(json["seq"], Value::from(decoded.seq), "the JSON's seq");
    // In place, the same record and the same JSON.
    let view = decoder
        .view(record)
        .unwrap_or_else(|e| panic!("a record decoded whole is refused in place: {e}"));
    assert_eq!(view.to_json(), json, "in place, the JSON differs");
    assert_eq!(
        format!("{:?}", view.into_owned()),
        format!("{decoded:?}"),
        "in place, the record differs"
    );
    reencoded(record, decoded);
}

/// The record encoded anew from what was decoded decodes the same.
fn reencoded(record: &LogRecord, decoded: &Record) {
    let ts = record.ts_ns();
    let payload = record.payload();
    match &decoded.body {
        Body::Event(_) => {
            let first = codec::decode_event(payload, ts)
                .unwrap_or_else(|e| panic!("an event decoded is refused by codec: {e}"))
                .to_record();
            let bytes = first.to_bytes(ts);
            let again = codec::decode_event(&bytes, ts)
                .unwrap_or_else(|e| panic!("an event re-encoded is refused: {e}"))
                .to_record();
            assert_eq!(
                format!("{again:?}"),
                format!("{first:?}"),
                "an event re-encoded decodes differently"
            );
        }
        Body::Working(delta) => {
            let records = delta.encode(usize::MAX);
            assert_eq!(records.len(), 1, "a delta without a limit takes one record");
            let again = WorkingDelta::decode(&records[0])
                .unwrap_or_else(|e| panic!("a delta re-encoded is refused: {e}"));
            assert_eq!(&again, delta, "a delta re-encoded decodes differently");
        }
        Body::Prune(p) => assert_eq!(p.encode(), payload, "a prune record re-encoded"),
        Body::Policy(text) => assert_eq!(text.as_bytes(), payload, "a policy's text"),
        Body::Unknown {
            record_type,
            payload: bytes,
        } => {
            assert_eq!(
                *record_type,
                record.record_type().0,
                "an unknown type's tag"
            );
            assert_eq!(bytes, payload, "an unknown type's payload");
        }
        Body::Summary(_) => rearchived::<SummaryRecord>(payload, |b| {
            codec::access::<ArchivedSummaryRecord>(b).map(deserialize)
        }),
        Body::Accounting(_) => rearchived::<AccountingRecord>(payload, |b| {
            codec::access::<ArchivedAccountingRecord>(b).map(deserialize)
        }),
        Body::Incident(_) => rearchived::<IncidentRecord>(payload, |b| {
            codec::access::<ArchivedIncidentRecord>(b).map(deserialize)
        }),
        Body::Recovery(_) => rearchived::<RecoveryRecord>(payload, |b| {
            codec::access::<ArchivedRecoveryRecord>(b).map(deserialize)
        }),
        Body::Checkpoint(_)
        | Body::Dictionary(_)
        | Body::Kb(_)
        | Body::KbSnapshot(_)
        | Body::KbCarried(_) => {}
    }
}

fn deserialize<T, A>(archived: &A) -> T
where
    A: rkyv::Deserialize<T, rkyv::api::high::HighDeserializer<rancor::Error>>,
{
    rkyv::deserialize::<T, rancor::Error>(archived)
        .unwrap_or_else(|e| panic!("an archive checked cannot be deserialized: {e}"))
}

/// An rkyv record taken by the decoder, deserialized and archived anew, reads back the
/// same.
fn rearchived<T>(payload: &[u8], read: impl Fn(&[u8]) -> Result<T, rancor::Error>)
where
    T: std::fmt::Debug
        + for<'a> rkyv::Serialize<
            rkyv::api::high::HighSerializer<
                rkyv::util::AlignedVec,
                rkyv::ser::allocator::ArenaHandle<'a>,
                rancor::Error,
            >,
        >,
{
    // The payload is 8-byte aligned as `LogRecord` holds it.
    let aligned = LogRecord::from_parts(Seq(0), 0, Tag(0), payload);
    let first = read(aligned.payload())
        .unwrap_or_else(|e| panic!("an archive the decoder took is refused by rkyv: {e}"));
    let bytes = archive(&first);
    let again = read(&bytes).unwrap_or_else(|e| panic!("an archive re-encoded is refused: {e}"));
    assert_eq!(
        format!("{again:?}"),
        format!("{first:?}"),
        "an archive re-encoded reads differently"
    );
}

/// Up to eight dictionary entries of arbitrary names, as the recorder's rules allow
/// them (ids 1 to 65 536 and names of 1 to 256 bytes, neither given twice); `None` when
/// the bytes give fewer than one valid entry.
fn dictionary(u: &mut Unstructured<'_>) -> ArbResult<Vec<(u32, String)>> {
    let n = u.int_in_range(1..=8)?;
    let mut entries = Vec::with_capacity(n);
    let (mut ids, mut names) = (BTreeSet::new(), BTreeSet::new());
    for i in 0..n {
        let id = if u.arbitrary()? {
            u.int_in_range(1..=NAMES_PER_LOG_MAX)?
        } else {
            u32::try_from(i + 1).unwrap_or(1)
        };
        let name: String = u.arbitrary()?;
        if name.is_empty() || name.len() > 256 || !ids.insert(id) || !names.insert(name.clone()) {
            continue;
        }
        entries.push((id, name));
    }
    if entries.is_empty() {
        entries.push((1, "kind".to_owned()));
    }
    Ok(entries)
}

fn pick_id(u: &mut Unstructured<'_>, entries: &[(u32, String)]) -> ArbResult<usize> {
    u.choose_index(entries.len())
}

/// Events of arbitrary fields encoded by the codec must decode to those fields.
fn events(u: &mut Unstructured<'_>) -> ArbResult<()> {
    let entries = dictionary(u)?;
    let mut decoder = Decoder::new();
    learn_dictionary(&mut decoder, &entries);
    for i in 0..u.int_in_range(1..=4)? {
        let ts: u64 = u.arbitrary()?;
        let kind = pick_id(u, &entries)?;
        let source = if u.arbitrary()? {
            Some(pick_id(u, &entries)?)
        } else {
            None
        };
        let tier: u8 = u.int_in_range(0..=3)?;
        let encoding: u8 = u.int_in_range(0..=2)?;
        let mut values = Vec::new();
        for _ in 0..u.int_in_range(0..=6)? {
            values.push((pick_id(u, &entries)?, f64::from_bits(u.arbitrary()?)));
        }
        let payload: Vec<u8> = match encoding {
            0 => Vec::new(),
            1 if u.arbitrary()? => serde_json::to_vec(&arb::json(u)?).unwrap_or_default(),
            _ => u.arbitrary()?,
        };
        let record = EventRecord {
            recorded_ns: if u.arbitrary()? { ts } else { u.arbitrary()? },
            weight: if u.arbitrary()? {
                1.0
            } else {
                f64::from_bits(u.arbitrary()?)
            },
            event_time_ns: u.arbitrary()?,
            payload: codec::Payload::from_slice(&payload),
            values: values.iter().map(|&(i, v)| (entries[i].0, v)).collect(),
            kind: entries[kind].0,
            source: source.map_or(0, |s| entries[s].0),
            tier,
            encoding,
        };
        let bytes = record.to_bytes(ts);
        let seq = SEQ + i as u64;
        let log_record = LogRecord::from_parts(Seq(seq), ts, codec::EVENT, &bytes);
        let decoded = decoder
            .decode(&log_record)
            .unwrap_or_else(|e| panic!("an event the codec encoded is refused: {e}"));
        let Body::Event(e) = &decoded.body else {
            panic!("an event record decodes to {:?}", decoded.body);
        };
        // What went in, by the names the dictionary gave the ids.
        assert_eq!(e.kind, entries[kind].1, "kind");
        assert_eq!(e.source, source.map(|s| entries[s].1.clone()), "source");
        assert_eq!(Some(e.tier), WrittenTier::from_u8(tier), "tier");
        assert_eq!(e.weight.to_bits(), record.weight.to_bits(), "weight");
        assert_eq!(e.recorded_ns, record.recorded_ns, "recorded time");
        assert_eq!(e.event_time_ns, record.event_time_ns, "event time");
        let want_values: Vec<(&str, u64)> = values
            .iter()
            .map(|&(i, v)| (entries[i].1.as_str(), v.to_bits()))
            .collect();
        let got_values: Vec<(&str, u64)> = e
            .values
            .iter()
            .map(|(n, v)| (n.as_str(), v.to_bits()))
            .collect();
        assert_eq!(got_values, want_values, "values");
        let want_payload = match Encoding::from_u8(encoding) {
            Some(Encoding::None) => Payload::None,
            Some(Encoding::Json) => match serde_json::from_slice(&payload) {
                Ok(v) => Payload::Json(v),
                Err(_) => Payload::Raw(payload.clone()),
            },
            _ => Payload::Raw(payload.clone()),
        };
        assert_eq!(e.payload, want_payload, "payload");
        check_decoded(&decoder, &log_record, &decoded);
    }
    Ok(())
}

/// A delta of arbitrary keys and values, encoded under an arbitrary record limit, must
/// decode record by record to its sets and removals, in order, each record within the
/// limit.
fn deltas(u: &mut Unstructured<'_>) -> ArbResult<()> {
    let set = arb::object(u)?;
    let mut del = Vec::new();
    for _ in 0..u.int_in_range(0..=6)? {
        let key: String = u.arbitrary()?;
        if !set.contains_key(&key) && !del.contains(&key) {
            del.push(key);
        }
    }
    let delta = WorkingDelta { set, del };
    // The largest single entry's record must fit: the writer's limit always holds one.
    let one_entry_max =
        delta
            .set
            .iter()
            .map(|(k, v)| {
                serde_json::to_vec(&serde_json::json!({"set": {k: v}})).map_or(0, |b| b.len())
            })
            .chain(delta.del.iter().map(|k| {
                serde_json::to_vec(&serde_json::json!({"del": [k]})).map_or(0, |b| b.len())
            }))
            .max()
            .unwrap_or(0);
    let limit = one_entry_max + u.int_in_range(0..=200)?;
    let records = delta.encode(limit);
    if delta.set.is_empty() && delta.del.is_empty() {
        assert!(
            records.is_empty(),
            "a delta that changes nothing was encoded"
        );
        return Ok(());
    }
    let mut set = serde_json::Map::new();
    let mut del = Vec::new();
    let mut decoder = Decoder::new();
    let ts: u64 = u.arbitrary()?;
    for (i, bytes) in records.iter().enumerate() {
        assert!(
            bytes.len() <= limit,
            "a delta record of {} bytes is over its limit of {limit}",
            bytes.len()
        );
        let record = LogRecord::from_parts(Seq(SEQ + i as u64), ts, codec::WORKING, bytes);
        let decoded = decoder
            .decode(&record)
            .unwrap_or_else(|e| panic!("a delta record encoded is refused: {e}"));
        let Body::Working(d) = &decoded.body else {
            panic!("a delta record decodes to {:?}", decoded.body);
        };
        set.extend(d.set.clone());
        del.extend(d.del.iter().cloned());
        check_decoded(&decoder, &record, &decoded);
    }
    assert_eq!(set, delta.set, "the keys set, read back");
    assert_eq!(del, delta.del, "the keys removed, read back");
    Ok(())
}

fn counters(u: &mut Unstructured<'_>) -> ArbResult<Counters> {
    Ok(Counters {
        seen: u.arbitrary()?,
        kept: u.arbitrary()?,
        sampled_out: u.arbitrary()?,
        summarized: u.arbitrary()?,
        dropped: u.arbitrary()?,
        overflow: u.arbitrary()?,
        preroll: u.arbitrary()?,
        lost: u.arbitrary()?,
    })
}

/// Summaries, accounting, incidents and recoveries archived from arbitrary values must
/// decode to those values; a name given twice in one record is refused by name.
fn archived(u: &mut Unstructured<'_>) -> ArbResult<()> {
    let entries = dictionary(u)?;
    let name = |id: u32| {
        entries
            .iter()
            .find(|e| e.0 == id)
            .map(|e| e.1.clone())
            .unwrap_or_default()
    };
    let mut decoder = Decoder::new();
    learn_dictionary(&mut decoder, &entries);
    let ts: u64 = u.arbitrary()?;
    let decode = |tag: Tag, bytes: &[u8]| {
        let record = LogRecord::from_parts(Seq(SEQ), ts, tag, bytes);
        let got = decoder.clone().decode(&record);
        (record, got)
    };
    match u.int_in_range(0..=3)? {
        0 => {
            let mut values = Vec::new();
            for _ in 0..u.int_in_range(0..=5)? {
                values.push(ValueStats {
                    name: entries[pick_id(u, &entries)?].0,
                    count: u.arbitrary()?,
                    min: f64::from_bits(u.arbitrary()?),
                    max: f64::from_bits(u.arbitrary()?),
                    sum: f64::from_bits(u.arbitrary()?),
                    last: f64::from_bits(u.arbitrary()?),
                    mean: f64::from_bits(u.arbitrary()?),
                });
            }
            let summary = SummaryRecord {
                kind: entries[pick_id(u, &entries)?].0,
                window_start_ns: u.arbitrary()?,
                window_end_ns: u.arbitrary()?,
                count: u.arbitrary()?,
                values,
            };
            let (record, got) = decode(codec::SUMMARY, &archive(&summary));
            let mut seen = BTreeSet::new();
            let twice = summary.values.iter().find(|v| !seen.insert(v.name));
            match (got, twice) {
                (Err(e), Some(v)) => {
                    let text = e.to_string();
                    assert!(
                        text.contains(&format!("{:?}", name(v.name))) && text.contains("twice"),
                        "a value given twice is refused without its name: {text}"
                    );
                }
                (Ok(d), None) => {
                    let Body::Summary(s) = &d.body else {
                        panic!("a summary decodes to {:?}", d.body);
                    };
                    assert_eq!(s.kind, name(summary.kind), "summary kind");
                    assert_eq!(
                        (s.window_start_ns, s.window_end_ns, s.count),
                        (
                            summary.window_start_ns,
                            summary.window_end_ns,
                            summary.count
                        ),
                        "summary window and count"
                    );
                    let want: BTreeMap<String, [u64; 6]> = summary
                        .values
                        .iter()
                        .map(|v| {
                            let bits = [v.min, v.max, v.mean, v.sum, v.last].map(f64::to_bits);
                            (
                                name(v.name),
                                [v.count, bits[0], bits[1], bits[2], bits[3], bits[4]],
                            )
                        })
                        .collect();
                    let got: BTreeMap<String, [u64; 6]> = s
                        .values
                        .iter()
                        .map(|(n, v)| {
                            let bits = [v.min, v.max, v.mean, v.sum, v.last].map(f64::to_bits);
                            (
                                n.clone(),
                                [v.count, bits[0], bits[1], bits[2], bits[3], bits[4]],
                            )
                        })
                        .collect();
                    assert_eq!(got, want, "summary values");
                    check_decoded(&decoder, &record, &d);
                }
                (got, twice) => panic!(
                    "a summary whose value given twice is {twice:?} decodes to {:?}",
                    got.map(|d| d.body)
                ),
            }
        }
        1 => {
            let mut kinds = Vec::new();
            for _ in 0..u.int_in_range(0..=5)? {
                kinds.push((entries[pick_id(u, &entries)?].0, counters(u)?));
            }
            let accounting = AccountingRecord {
                snapshot: u.arbitrary()?,
                watermark_ns: u.arbitrary()?,
                kinds,
            };
            let (record, got) = decode(codec::ACCOUNTING, &archive(&accounting));
            let mut seen = BTreeSet::new();
            let twice = accounting.kinds.iter().find(|k| !seen.insert(k.0));
            match (got, twice) {
                (Err(e), Some(k)) => {
                    let text = e.to_string();
                    assert!(
                        text.contains(&format!("{:?}", name(k.0))) && text.contains("twice"),
                        "a kind given twice is refused without its name: {text}"
                    );
                }
                (Ok(d), None) => {
                    let Body::Accounting(a) = &d.body else {
                        panic!("an accounting record decodes to {:?}", d.body);
                    };
                    assert_eq!(
                        (a.snapshot, a.watermark_ns),
                        (accounting.snapshot, accounting.watermark_ns),
                        "accounting header"
                    );
                    let want: BTreeMap<String, Counters> = accounting
                        .kinds
                        .iter()
                        .map(|(id, c)| (name(*id), *c))
                        .collect();
                    assert_eq!(a.kinds, want, "accounting counters");
                    check_decoded(&decoder, &record, &d);
                }
                (got, twice) => panic!(
                    "accounting whose kind given twice is {twice:?} decodes to {:?}",
                    got.map(|d| d.body)
                ),
            }
        }
        2 => {
            let incident = IncidentRecord {
                trigger_seq: u.arbitrary()?,
                trigger_kind: entries[pick_id(u, &entries)?].0,
                trigger_ts_ns: u.arbitrary()?,
                preroll_start_ns: u.arbitrary()?,
                postroll_end_ns: u.arbitrary()?,
                preroll_events: u.arbitrary()?,
            };
            let (record, got) = decode(codec::INCIDENT, &archive(&incident));
            let d = got.unwrap_or_else(|e| panic!("an incident archived is refused: {e}"));
            let Body::Incident(i) = &d.body else {
                panic!("an incident decodes to {:?}", d.body);
            };
            assert_eq!(i.trigger_kind, name(incident.trigger_kind), "trigger kind");
            assert_eq!(
                [
                    i.trigger_seq,
                    i.trigger_ts_ns,
                    i.preroll_start_ns,
                    i.postroll_end_ns,
                    i.preroll_events
                ],
                [
                    incident.trigger_seq,
                    incident.trigger_ts_ns,
                    incident.preroll_start_ns,
                    incident.postroll_end_ns,
                    incident.preroll_events
                ],
                "incident fields"
            );
            check_decoded(&decoder, &record, &d);
        }
        _ => {
            let recovery = RecoveryRecord {
                first_lost_seq: u.arbitrary()?,
                torn_bytes: u.arbitrary()?,
                segment: u.arbitrary()?,
                detail: u.arbitrary()?,
            };
            let (record, got) = decode(codec::RECOVERY, &archive(&recovery));
            let d = got.unwrap_or_else(|e| panic!("a recovery record archived is refused: {e}"));
            let Body::Recovery(r) = &d.body else {
                panic!("a recovery record decodes to {:?}", d.body);
            };
            assert_eq!(
                (r.first_lost_seq, r.torn_bytes, &r.segment, &r.detail),
                (
                    recovery.first_lost_seq,
                    recovery.torn_bytes,
                    &recovery.segment,
                    &recovery.detail
                ),
                "recovery fields"
            );
            check_decoded(&decoder, &record, &d);
        }
    }
    Ok(())
}
