//! The library: typed records from any point of the log, folds, knowledge-base and
//! unknown records, and decode errors that are errors, never panics.

#![expect(clippy::unwrap_used, reason = "tests fail loudly on any error")]

mod common;

use std::sync::Arc;

use blackbox::codec::{self, DictionaryRecord, EventRecord, WrittenTier};
use blackbox::log::{Log, LogOptions, Record as LogRec, RecordType as Tag};
use blackbox::{Config, Event, LogReader, ManualClock, Recorder, Seq};
use blackbox_replay::{
    Body, Decoder, Error, Payload, Query, RecordType, Replay, fold, record_hash, to_json,
};
use common::{blackbox, ok, s};
use serde_json::json;

const T0: u64 = 1_700_000_000_000_000_000;
const MS: u64 = 1_000_000;

/// A recorder log over several small segments, on a manual clock: 300 events of 6
/// kinds, 3 sources and 4 value names, a checkpoint every 100.
fn recorded_log(dir: &std::path::Path) {
    let clock = ManualClock::new(T0);
    let recorder = Recorder::open(
        dir,
        Config::new()
            .clock(Arc::new(clock.clone()))
            .log_options(LogOptions::new().segment_bytes_max(4096))
            .checkpoint_interval_ns(None),
    )
    .unwrap();
    for i in 0..300u32 {
        clock.set_ns(T0 + u64::from(i) * MS);
        let kind = format!("robot.k{}", i % 6);
        let source = format!("src{}", i % 3);
        let name = format!("v{}", i % 4);
        let values = [(name.as_str(), f64::from(i))];
        let payload = format!("{{\"i\":{i}}}");
        recorder
            .record(
                &Event::new(&kind)
                    .source(&source)
                    .values(&values)
                    .json(&payload),
            )
            .unwrap();
        if i % 100 == 99 {
            recorder.working().set("i", json!(i)).unwrap();
            recorder.checkpoint().unwrap();
        }
        if i % 10 == 0 {
            recorder.sync().unwrap();
        }
    }
    recorder.close().unwrap();
}

#[test]
fn a_replay_from_any_seq_is_the_suffix_of_the_whole_replay() {
    let tmp = tempfile::tempdir().unwrap();
    recorded_log(tmp.path());
    let segments = blackbox_log::list_segments(tmp.path()).unwrap();
    assert!(segments.len() > 4, "{} segments", segments.len());
    let everything = Query::new().types(RecordType::ALL);
    let all: Vec<_> = Replay::open(tmp.path(), &everything)
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let last = all.last().unwrap().seq;
    assert_eq!(all.len() as u64, last + 1, "every record, dense seqs");
    for from in (0..=last).step_by(7) {
        let part: Vec<_> = Replay::open(tmp.path(), &everything.clone().from_seq(from))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        let expected: Vec<_> = all.iter().filter(|r| r.seq >= from).cloned().collect();
        assert_eq!(part, expected, "from seq {from}");
    }
    // Each segment after the first opens with the whole dictionary.
    for seg in segments.iter().skip(1) {
        let first = all.iter().find(|r| r.seq == seg.first_seq).unwrap();
        assert_eq!(first.record_type(), Some(RecordType::Dictionary));
    }
}

#[test]
fn queries_filter_by_time_kind_and_type_and_fold_rebuilds_state() {
    let tmp = tempfile::tempdir().unwrap();
    recorded_log(tmp.path());
    // Events 100..=149 by time (the manual clock stamps event i at T0 + i ms).
    let q = Query::new()
        .since(T0 + 100 * MS)
        .until(T0 + 149 * MS)
        .types([RecordType::Event])
        .kind("robot.k{1,2}")
        .unwrap();
    let got: Vec<u64> = Replay::open(tmp.path(), &q)
        .unwrap()
        .map(|r| match r.unwrap().body {
            Body::Event(e) => {
                assert!(e.kind == "robot.k1" || e.kind == "robot.k2");
                assert!(e.source.as_deref().unwrap().starts_with("src"));
                assert_eq!(e.tier, WrittenTier::Full);
                match e.payload {
                    Payload::Json(v) => v["i"].as_u64().unwrap(),
                    other => panic!("a JSON payload, not {other:?}"),
                }
            }
            other => panic!("only events: {other:?}"),
        })
        .collect();
    let expected: Vec<u64> = (100..150).filter(|i| i % 6 == 1 || i % 6 == 2).collect();
    assert_eq!(got, expected);

    // A fold: the sum of v0 over the whole run, and the last checkpoint's memory.
    let (sum, memory) = fold(
        tmp.path(),
        &Query::new(),
        (0.0, serde_json::Map::new()),
        |(sum, memory), r| match r.body {
            Body::Event(e) => {
                let add: f64 = e
                    .values
                    .iter()
                    .filter(|(n, _)| n == "v0")
                    .map(|(_, v)| v)
                    .sum();
                (sum + add, memory)
            }
            Body::Checkpoint(c) => (sum, c.working),
            _ => (sum, memory),
        },
    )
    .unwrap();
    assert_eq!(
        sum,
        (0..300).filter(|i| i % 4 == 0).map(f64::from).sum::<f64>()
    );
    assert_eq!(memory.get("i"), Some(&json!(299)));

    // Accounting: running totals, the last one counting every event.
    let totals = fold(
        tmp.path(),
        &Query::new().types([RecordType::Accounting]),
        None,
        |_, r| match r.body {
            Body::Accounting(a) => Some(a.kinds),
            _ => None,
        },
    )
    .unwrap()
    .unwrap();
    assert_eq!(totals.len(), 6);
    assert!(
        totals
            .values()
            .all(|c| c.seen == 50 && c.kept == 50 && c.balanced())
    );
    let stats = blackbox_replay::stats(tmp.path(), None).unwrap();
    assert_eq!(stats.kinds, totals);
}

/// Appends records straight to a log, as the knowledge base (type 5) or a future
/// layer would.
fn raw_log(dir: &std::path::Path, records: &[(u16, Vec<u8>)]) {
    let (mut log, _) = Log::open(dir, LogOptions::new()).unwrap();
    for (i, (t, payload)) in records.iter().enumerate() {
        log.append(LogRec::new(Tag(*t), T0 + i as u64, payload))
            .unwrap();
    }
    log.close().unwrap();
}

fn archive<T>(value: &T) -> Vec<u8>
where
    T: for<'a> rkyv::Serialize<
            rkyv::api::high::HighSerializer<
                rkyv::util::AlignedVec,
                rkyv::ser::allocator::ArenaHandle<'a>,
                rkyv::rancor::Error,
            >,
        >,
{
    rkyv::to_bytes::<rkyv::rancor::Error>(value)
        .unwrap()
        .to_vec()
}

fn event(kind: u32) -> Vec<u8> {
    EventRecord {
        recorded_ns: T0,
        weight: 1.0,
        event_time_ns: None,
        payload: codec::Payload::from_slice(&[0xde, 0xad]),
        values: vec![],
        kind,
        source: 0,
        tier: 0,
        encoding: 2,
    }
    .to_bytes(T0)
}

#[test]
fn kb_commits_unknown_types_and_raw_payloads_decode_and_render() {
    let tmp = tempfile::tempdir().unwrap();
    let dict = archive(&DictionaryRecord {
        entries: vec![(1, "kb.fact".to_owned())],
    });
    let commit = json!({"version": 3, "key": "cup.grip", "value": 0.7, "provenance": [1]});
    raw_log(
        tmp.path(),
        &[
            (codec::DICTIONARY.0, dict),
            (codec::EVENT.0, event(1)),
            (codec::KB.0, serde_json::to_vec(&commit).unwrap()),
            (42, b"future".to_vec()),
        ],
    );
    let records: Vec<_> = Replay::open(tmp.path(), &Query::new())
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(records.len(), 3, "dictionary hidden by default");
    match &records[0].body {
        Body::Event(e) => assert_eq!(e.payload, Payload::Raw(vec![0xde, 0xad])),
        other => panic!("{other:?}"),
    }
    let j = to_json(&records[0]);
    assert_eq!(j["payload"], "dead", "raw payloads are lowercase hex");
    assert_eq!(j["encoding"], "raw");
    match &records[1].body {
        Body::Kb(k) => assert_eq!(k.commit, commit),
        other => panic!("{other:?}"),
    }
    let j = to_json(&records[1]);
    assert_eq!(j["type"], "kb");
    assert_eq!(j["commit"], commit);
    assert_eq!(
        j["hash"].as_str().unwrap(),
        blackbox_replay::hex(&record_hash(
            2,
            T0 + 2,
            5,
            &serde_json::to_vec(&commit).unwrap()
        ))
    );
    assert_eq!(records[2].record_type(), None);
    let j = to_json(&records[2]);
    assert_eq!(j["type"], "unknown");
    assert_eq!(j["record_type"], 42);
    assert_eq!(j["payload"], blackbox_replay::hex(b"future"));

    // Only kb commits, through the command.
    let out = ok(&blackbox(&[
        "replay",
        "--dir",
        s(tmp.path()),
        "--type",
        "kb",
        "--json",
    ]));
    let line: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(line["commit"], commit);
}

#[test]
fn records_that_do_not_decode_are_errors_naming_the_seq() {
    for (name, records, seq) in [
        ("unnamed kind", vec![(codec::EVENT.0, event(9))], 0),
        ("bad kb json", vec![(codec::KB.0, b"{not json".to_vec())], 0),
        ("kb not an object", vec![(codec::KB.0, b"[1]".to_vec())], 0),
        (
            "garbage event",
            vec![
                (codec::CHECKPOINT.0, b"{}".to_vec()),
                (codec::EVENT.0, vec![1, 2, 3]),
            ],
            1,
        ),
        (
            "renamed id",
            vec![
                (
                    codec::DICTIONARY.0,
                    archive(&DictionaryRecord {
                        entries: vec![(1, "a.b".to_owned())],
                    }),
                ),
                (
                    codec::DICTIONARY.0,
                    archive(&DictionaryRecord {
                        entries: vec![(1, "c.d".to_owned())],
                    }),
                ),
            ],
            1,
        ),
        // The recorder's own rules (`blackbox::DictionaryFold`), as it applies them when
        // it reopens a log: this decoder used to accept these.
        (
            "id 0",
            vec![(
                codec::DICTIONARY.0,
                archive(&DictionaryRecord {
                    entries: vec![(0, "a.b".to_owned())],
                }),
            )],
            0,
        ),
        (
            "id past the limit",
            vec![(
                codec::DICTIONARY.0,
                archive(&DictionaryRecord {
                    entries: vec![(4_000_000_000, "a.b".to_owned())],
                }),
            )],
            0,
        ),
        (
            "name given two ids",
            vec![(
                codec::DICTIONARY.0,
                archive(&DictionaryRecord {
                    entries: vec![(1, "a.b".to_owned()), (2, "a.b".to_owned())],
                }),
            )],
            0,
        ),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        raw_log(tmp.path(), &records);
        let result: Result<Vec<_>, _> =
            Replay::open(tmp.path(), &Query::new().types(RecordType::ALL))
                .unwrap()
                .collect();
        match result {
            Err(Error::Decode { seq: s, .. }) => assert_eq!(s, seq, "{name}"),
            other => panic!("{name}: expected a decode error, got {other:?}"),
        }
        let out = blackbox(&[
            "replay",
            "--dir",
            s(tmp.path()),
            "--type",
            "event",
            "--type",
            "kb",
            "--type",
            "dictionary",
        ]);
        let err = common::fails(&out);
        assert!(err.contains(&format!("seq {seq}")), "{name}: {err}");
    }
}

#[test]
fn the_decoder_reads_what_a_host_reads_itself() {
    let tmp = tempfile::tempdir().unwrap();
    recorded_log(tmp.path());
    let reader = LogReader::open(tmp.path()).unwrap();
    let mut decoder = Decoder::new();
    let mut events = 0;
    for r in reader.records(Seq(0)..).unwrap() {
        let r = r.unwrap();
        let rec = decoder.decode(&r).unwrap();
        assert_eq!(
            rec.hash,
            record_hash(r.seq().0, r.ts_ns(), r.record_type().0, r.payload())
        );
        if let Body::Event(_) = rec.body {
            events += 1;
        }
    }
    assert_eq!(events, 300);
    assert!(decoder.name(1).is_some());
}

/// A recorder on `clock` with 4 KiB segments; kinds `d.*` are dropped.
fn small_segment_recorder(dir: &std::path::Path, clock: &ManualClock) -> Recorder {
    let policy = blackbox::Policy::builder()
        .rule("d.*", blackbox::Tier::Drop)
        .build()
        .unwrap();
    Recorder::open(
        dir,
        Config::new()
            .policy(policy)
            .clock(Arc::new(clock.clone()))
            .log_options(LogOptions::new().segment_bytes_max(4096))
            .checkpoint_interval_ns(None),
    )
    .unwrap()
}

fn record_n(recorder: &Recorder, clock: &ManualClock, kind: &str, n: u64) {
    for _ in 0..n {
        clock.advance_ns(MS);
        recorder.record(&Event::new(kind).json("{}")).unwrap();
    }
}

#[test]
fn totals_survive_a_crash_between_a_seal_and_the_next_segment() {
    // Guards a past bug: a segment that recovery creates (after a crash between a
    // segment's seal and the next segment's creation) got only the dictionary; the
    // session's next accounting record (the kinds that changed) was then taken for the
    // preamble's snapshot by position, and every other kind's totals were lost, for
    // good once the recorder restored and wrote them back.
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let clock = ManualClock::new(T0);
    let rec = small_segment_recorder(dir, &clock);
    record_n(&rec, &clock, "a.x", 5);
    rec.close().unwrap();
    drop(rec);
    let rec = small_segment_recorder(dir, &clock);
    record_n(&rec, &clock, "b.y", 600);
    rec.close().unwrap();
    drop(rec);
    // The crash: the newest segment never came to be, the one before it is sealed.
    let segments = blackbox::log::list_segments(dir).unwrap();
    assert!(segments.len() > 2, "{} segments", segments.len());
    std::fs::remove_file(&segments.last().unwrap().path).unwrap();
    let sealed_last = segments[segments.len() - 2].first_seq;

    // A session that records nothing, then one that records b.y only: a.x keeps its
    // 5 events in the recorder, in stats, in state and in a third session.
    let rec = small_segment_recorder(dir, &clock);
    assert!(rec.recovery().last_seq.is_some_and(|s| s.0 >= sealed_last));
    rec.close().unwrap();
    drop(rec);
    let rec = small_segment_recorder(dir, &clock);
    record_n(&rec, &clock, "b.y", 3);
    let totals = rec.stats().unwrap();
    assert_eq!(
        (totals["a.x"].seen, totals["a.x"].kept),
        (5, 5),
        "{totals:?}"
    );
    rec.close().unwrap();
    drop(rec);
    let stats = blackbox_replay::stats(dir, None).unwrap();
    assert_eq!(
        (stats.kinds["a.x"].seen, stats.kinds["a.x"].kept),
        (5, 5),
        "{:?}",
        stats.kinds
    );
    let state = blackbox_replay::state_at(dir, u64::MAX, None).unwrap();
    assert_eq!(state.kinds, stats.kinds);
    let rec = small_segment_recorder(dir, &clock);
    assert_eq!(rec.stats().unwrap()["a.x"].seen, 5);
    rec.close().unwrap();
}

#[test]
fn a_new_logs_first_accounting_record_is_not_taken_for_a_snapshot() {
    // Guards a past bug: a log whose first records were a dictionary and an accounting
    // record (its first events all dropped) had that record taken for a segment
    // preamble's snapshot by position: export weights skipped it, and the kind whose
    // events no row stands for went unreported.
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let clock = ManualClock::new(T0);
    let rec = small_segment_recorder(dir, &clock);
    record_n(&rec, &clock, "d.x", 3);
    rec.close().unwrap();
    drop(rec);
    let reader = LogReader::open(dir).unwrap();
    let first: Vec<Tag> = reader
        .records(Seq(0)..)
        .unwrap()
        .map(|r| r.unwrap().record_type())
        .filter(|t| *t != codec::POLICY)
        .take(2)
        .collect();
    assert_eq!(first, [codec::DICTIONARY, codec::ACCOUNTING]);
    let rec = small_segment_recorder(dir, &clock);
    record_n(&rec, &clock, "f.z", 4);
    let last = rec.close().unwrap().unwrap();
    drop(rec);
    let weights = blackbox_replay::Weights::compute(dir, None, last.0, &Query::new()).unwrap();
    // 3 events of d.x dropped, 4 of f.z kept: by hand.
    let dropped: Vec<(&str, u64, u64)> = weights
        .unweighted()
        .iter()
        .map(|(k, c)| (k.as_str(), c.seen, c.dropped))
        .collect();
    assert_eq!(dropped, [("d.x", 3, 3)]);
    let totals: Vec<(&str, u64, u64)> = weights
        .totals()
        .iter()
        .map(|(k, c)| (k.as_str(), c.seen, c.kept))
        .collect();
    assert_eq!(totals, [("d.x", 3, 0), ("f.z", 4, 4)]);
}
