//! A query by record type reads through the log's tag index, where every record but an
//! event carries its type's tag: a query of incidents skips the sealed blocks that hold
//! only events and working-memory changes, and returns exactly the incidents a model of
//! what was recorded says it should.
#![expect(clippy::unwrap_used, reason = "tests fail loudly on any error")]

use std::sync::Arc;

use blackbox::log::LogOptions;
use blackbox::{Clock, Config, Event, IncidentPolicy, ManualClock, Policy, Recorder};
use blackbox_replay::{Body, Query, RecordType, Replay};
use serde_json::json;

const T0: u64 = 1_700_000_000_000_000_000;
const MS: u64 = 1_000_000;

/// Records 6 000 events 1 ms apart, a working-memory change every 10 and a trigger
/// (`failure.a`) at events 1 000, 3 000 and 5 000; returns the triggers' times.
fn record(dir: &std::path::Path) -> Vec<u64> {
    let clock = ManualClock::new(T0);
    let policy = Policy::builder()
        .incident(IncidentPolicy {
            preroll_ns: 5 * MS,
            postroll_ns: 5 * MS,
            ..IncidentPolicy::new(&["failure.*"])
        })
        .build()
        .unwrap();
    let rec = Recorder::open(
        dir,
        Config::new()
            .policy(policy)
            .clock(Arc::new(clock.clone()))
            .log_options(
                LogOptions::new()
                    .segment_bytes_max(32 * 1024)
                    .block_bytes_max(1024),
            )
            .checkpoint_interval_ns(None),
    )
    .unwrap();
    let mut triggers = Vec::new();
    for i in 0..6_000u64 {
        clock.advance_ns(MS);
        rec.record(&Event::new("sensor.x").raw(&i.to_le_bytes()))
            .unwrap();
        if i % 10 == 0 {
            rec.working().set("i", json!(i)).unwrap();
        }
        if i % 2_000 == 1_000 {
            rec.record(&Event::new("failure.a")).unwrap();
            triggers.push(clock.now_ns());
        }
        if i % 100 == 0 {
            rec.sync().unwrap();
        }
    }
    rec.close().unwrap();
    triggers
}

/// The trigger times of the incidents a query returns, and the records it read.
fn incidents(dir: &std::path::Path, q: &Query) -> (Vec<u64>, u64) {
    let mut replay = Replay::open(dir, q).unwrap();
    let mut out = Vec::new();
    for r in replay.by_ref() {
        if let Body::Incident(i) = r.unwrap().body {
            out.push(i.trigger_ts_ns);
        }
    }
    (out, replay.records_read())
}

#[test]
fn a_query_of_incidents_skips_the_blocks_without_one_and_misses_none() {
    let dir = tempfile::tempdir().unwrap();
    let triggers = record(dir.path());
    let (got, read_incidents) = incidents(dir.path(), &Query::new().types([RecordType::Incident]));
    assert_eq!(got, triggers);
    // Working-memory changes are in most blocks: a query of them reads most of the
    // log; one of the three incidents reads their blocks, the segments' preambles
    // (names and policy) and the active segment.
    let (_, read_working) = incidents(dir.path(), &Query::new().types([RecordType::Working]));
    assert!(
        read_incidents * 4 < read_working,
        "{read_incidents} records read for the incidents, {read_working} for the working memory"
    );
    // Every incident between two times, the range starting mid-log.
    let since = triggers[0] + MS;
    let q = Query::new().types([RecordType::Incident]).since(since);
    assert_eq!(incidents(dir.path(), &q).0, triggers[1..]);
}

#[test]
fn stats_counts_to_the_last_record_when_the_last_segment_is_sealed() {
    // A crash between a seal and the next segment's creation leaves a sealed segment
    // last; stats' query of accounting records passes over most of its blocks, and
    // still says where the log ends (read here record by record).
    let dir = tempfile::tempdir().unwrap();
    record(dir.path());
    let segments = blackbox::log::list_segments(dir.path()).unwrap();
    std::fs::remove_file(&segments.last().unwrap().path).unwrap();
    let _ = std::fs::remove_file(dir.path().join(blackbox::log::LOCK_FILE_NAME));
    let reader = blackbox::LogReader::open(dir.path()).unwrap();
    let (mut records, mut last) = (0u64, None);
    for r in reader.records(..).unwrap() {
        let r = r.unwrap();
        records += 1;
        last = Some((r.seq().0, r.ts_ns()));
    }
    let stats = blackbox_replay::stats(dir.path(), None).unwrap();
    assert_eq!(stats.records, records);
    assert_eq!(stats.last_seq, last.map(|l| l.0));
    assert_eq!(stats.last_ts_ns, last.map(|l| l.1));
}
