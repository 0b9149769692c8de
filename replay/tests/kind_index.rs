//! A query by kind reads through the log's tag index: it skips the sealed blocks that
//! hold only other kinds' events, and returns exactly the events a model of what was
//! recorded says it should.
#![expect(clippy::unwrap_used, reason = "tests fail loudly on any error")]

use std::sync::Arc;

use blackbox::log::LogOptions;
use blackbox::{Clock, Config, Event, ManualClock, Recorder};
use blackbox_replay::{Body, Payload, Query, RecordType, Replay};
use proptest::prelude::*;

const T0: u64 = 1_700_000_000_000_000_000;

/// Records `runs` (kind index, events, ns between them) into `dir`; returns the model:
/// (time, kind, the event's number) of every event.
fn record(dir: &std::path::Path, runs: &[(usize, usize, u64)]) -> Vec<(u64, String, u64)> {
    let clock = ManualClock::new(T0);
    let rec = Recorder::open(
        dir,
        Config::new()
            .clock(Arc::new(clock.clone()))
            .log_options(
                LogOptions::new()
                    .segment_bytes_max(16 * 1024)
                    .block_bytes_max(512),
            )
            .checkpoint_interval_ns(None),
    )
    .unwrap();
    let mut model = Vec::new();
    for &(kind, n, step) in runs {
        let kind = format!("k.{kind}");
        for _ in 0..n {
            clock.advance_ns(step);
            let i = model.len() as u64;
            let payload = i.to_le_bytes();
            rec.record(&Event::new(&kind).raw(&payload)).unwrap();
            model.push((clock.now_ns(), kind.clone(), i));
        }
    }
    rec.close().unwrap();
    model
}

/// (kind, the event's number) of every event the query returns, and the records read.
fn query(dir: &std::path::Path, q: &Query) -> (Vec<(String, u64)>, u64) {
    let mut replay = Replay::open(dir, q).unwrap();
    let mut out = Vec::new();
    for r in replay.by_ref() {
        if let Body::Event(e) = r.unwrap().body {
            let Payload::Raw(p) = e.payload else {
                panic!("a raw payload")
            };
            out.push((e.kind, u64::from_le_bytes(p.try_into().unwrap())));
        }
    }
    (out, replay.records_read())
}

fn expected(model: &[(u64, String, u64)], kind: &str, lo: u64, hi: u64) -> Vec<(String, u64)> {
    model
        .iter()
        .filter(|(t, k, _)| k == kind && (lo..=hi).contains(t))
        .map(|(_, k, i)| (k.clone(), *i))
        .collect()
}

#[test]
fn a_query_by_kind_reads_fewer_records_and_misses_none() {
    let dir = tempfile::tempdir().unwrap();
    // Runs of 100 events of one kind, a block holding about 14: most blocks hold one
    // kind. The active segment (no footer, read whole) holds a tenth of the log or less.
    let runs: Vec<(usize, usize, u64)> = (0..60).map(|r| (r % 4, 100, 1_000)).collect();
    let model = record(dir.path(), &runs);
    let events = Query::new().types([RecordType::Event]);
    let (all, read_all) = query(dir.path(), &events);
    assert_eq!(all.len(), model.len());
    let (got, read_kind) = query(dir.path(), &events.clone().kind("k.2").unwrap());
    assert_eq!(got, expected(&model, "k.2", 0, u64::MAX));
    // Most blocks hold one kind only: a query of one kind in four reads far fewer.
    assert!(
        read_kind * 2 < read_all,
        "{read_kind} records read for one kind, {read_all} for all"
    );
}

#[test]
fn a_query_by_kind_over_interleaved_kinds_returns_exactly_its_events() {
    // Every block holds every kind: nothing is skipped by the index, and the events of
    // other kinds are passed over one by one.
    let dir = tempfile::tempdir().unwrap();
    let runs: Vec<(usize, usize, u64)> = (0..800).map(|r| (r * 7 % 4, 1, 500)).collect();
    let model = record(dir.path(), &runs);
    for kind in ["k.0", "k.3"] {
        let q = Query::new()
            .types([RecordType::Event])
            .kind(kind)
            .unwrap()
            .since(T0 + 100_000)
            .until(T0 + 300_000);
        assert_eq!(
            query(dir.path(), &q).0,
            expected(&model, kind, T0 + 100_000, T0 + 300_000)
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(16))]

    #[test]
    fn a_query_by_kind_and_time_returns_what_the_model_says(
        runs in prop::collection::vec((0usize..4, 1usize..40, 1u64..5_000), 1..40),
        kind in 0usize..4,
        a in 0u64..1_000_000,
        len in 0u64..1_000_000,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let model = record(dir.path(), &runs);
        let kind = format!("k.{kind}");
        let (lo, hi) = (T0 + a, T0 + a + len);
        let q = Query::new()
            .types([RecordType::Event])
            .kind(&kind)
            .unwrap()
            .since(lo)
            .until(hi);
        let (got, _) = query(dir.path(), &q);
        prop_assert_eq!(got, expected(&model, &kind, lo, hi));
    }
}
