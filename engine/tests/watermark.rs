//! The watermark the writer puts in every accounting record: every event stamped before
//! it is in the log before that record. Checked here against the log itself, under load
//! that never pauses and with a pre-roll ring that time leaves behind.

#![expect(clippy::unwrap_used, reason = "tests fail loudly on any error")]

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use blackbox::{
    Config, Event, IncidentPolicy, LogReader, ManualClock, Policy, Recorder, Seq, Tier,
};
use common::Rec;

const MS: u64 = 1_000_000;
const SEC: u64 = 1_000 * MS;
const T0: u64 = 1_700_000_000 * SEC;

/// The watermark of every accounting record, by seq, read from the raw log.
fn watermarks(dir: &std::path::Path) -> BTreeMap<u64, u64> {
    LogReader::open(dir)
        .unwrap()
        .records(Seq(0)..)
        .unwrap()
        .map(|r| r.unwrap())
        .filter(|r| r.record_type() == blackbox::codec::ACCOUNTING)
        .map(|r| {
            let w = blackbox::codec::accounting_watermark_ns(r.payload()).unwrap();
            (r.seq().0, w)
        })
        .collect()
}

/// Guards the watermark under steady load: it used to move only when, at a batch's end,
/// the writer had received exactly as many events as producers had counted, which never
/// holds while producers keep recording; it stayed where it was and readers read to the
/// end. Three threads record without a pause, one of them moving the clock 1 ms an
/// event: every accounting record written meanwhile has a watermark, and the clock's
/// events (the main thread's) written before it but stamped at or after its watermark
/// (its lag, in milliseconds of the clock) are a bounded number, whatever the length of
/// the run. The helpers' events are not counted: while the main thread waits for a
/// core, they record any number of events at one clock reading, which says nothing of
/// the watermark.
#[test]
fn the_watermark_advances_while_producers_never_pause() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let rec = Arc::new(
        Recorder::open(
            dir.path(),
            Config::new()
                .clock(Arc::new(clock.clone()))
                .channel_capacity(16)
                .accounting_interval_ns(20 * MS)
                .checkpoint_interval_ns(None),
        )
        .unwrap(),
    );
    const EVENTS: u64 = 30_000;
    let done = Arc::new(AtomicBool::new(false));
    let helpers: Vec<_> = (0..2)
        .map(|_| {
            let rec = Arc::clone(&rec);
            let done = Arc::clone(&done);
            std::thread::spawn(move || {
                while !done.load(Ordering::SeqCst) {
                    rec.record(&Event::new("robot.helper")).unwrap();
                }
            })
        })
        .collect();
    for _ in 0..EVENTS {
        clock.advance_ns(MS);
        rec.record(&Event::new("robot.main")).unwrap();
    }
    // Written while the helpers still record.
    rec.sync().unwrap();
    done.store(true, Ordering::SeqCst);
    for h in helpers {
        h.join().unwrap();
    }
    let during = watermarks(dir.path());
    rec.close().unwrap();

    // Each accounting record written while producers ran: the main thread's events
    // before it stamped at or after its watermark, counted by hand from the log.
    let recs = common::read_log(dir.path());
    let lag_max = 3 * 4096 + 16 * 3;
    let mut checked = 0;
    for (&seq, &w) in &during {
        let lag = recs
            .iter()
            .take_while(|r| r.seq() < seq)
            .filter(|r| {
                matches!(r, Rec::Event { kind, recorded_ns, .. }
                    if kind == "robot.main" && *recorded_ns >= w)
            })
            .count();
        assert!(
            lag <= lag_max,
            "accounting at seq {seq}: watermark {w}, {lag} of the clock's events written before it stamped at or after it"
        );
        checked += 1;
    }
    // The run's last watermark is past its first half (the clock's end is T0 + 30 s).
    let last = during.values().copied().max().unwrap_or(0);
    assert!(last > T0 + EVENTS / 2 * MS, "last watermark {last}");
    let events = common::events(&recs).len();
    assert!(events as u64 > EVENTS, "{events}");
    assert!(checked > 10, "only {checked} accounting records");
}

/// Guards the watermark against a pre-roll ring that time left behind: the ring holds
/// events for a possible incident's pre-roll and the watermark stays below the oldest
/// of them, but the ring was cut by size, and by time only when a later event arrived:
/// with no more events, entries older than any incident could still write held the
/// watermark back for good (and, the counts unchanged, no accounting record was even
/// written). Now the writer drops what no pre-roll can reach any more, and an
/// accounting record is due when the watermark moved.
#[test]
fn the_watermark_moves_past_ring_events_older_than_the_pre_roll() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let policy = Policy::builder()
        .rule("sensor.*", Tier::Summary { window_ns: SEC })
        .incident(IncidentPolicy {
            preroll_ns: 2 * SEC,
            postroll_ns: 100 * MS,
            ..IncidentPolicy::new(&["failure.*"])
        })
        .build()
        .unwrap();
    let rec = Recorder::open(
        dir.path(),
        Config::new()
            .clock(Arc::new(clock.clone()))
            .policy(policy)
            .accounting_interval_ns(SEC)
            .checkpoint_interval_ns(None),
    )
    .unwrap();
    // A second of summarized events, each held in the ring for a pre-roll.
    let last_event = T0 + 990 * MS;
    for ms in (0..1_000).step_by(10) {
        clock.set_ns(T0 + ms * MS);
        rec.record(&Event::new("sensor.x")).unwrap();
    }
    rec.sync().unwrap();
    // Time moves on, past every pre-roll that could hold them; nothing is recorded.
    clock.set_ns(T0 + 10 * SEC);
    rec.sync().unwrap();
    let seen = watermarks(dir.path());
    let w = seen.values().copied().max().unwrap_or(0);
    assert!(
        w > last_event,
        "watermark {w}, the last ring event at {last_event}: {seen:?}"
    );
    // A trigger now finds no pre-roll: they were outside its window anyway.
    rec.record(&Event::new("failure.x")).unwrap();
    rec.close().unwrap();
    let recs = common::read_log(dir.path());
    assert_eq!(common::count_events(&recs, "sensor.x", "preroll"), 0);
    let summarized: u64 = recs
        .iter()
        .filter_map(|r| match r {
            Rec::Summary { kind, count, .. } if kind == "sensor.x" => Some(*count),
            _ => None,
        })
        .sum();
    assert_eq!(summarized, 100);
}

/// An idle recorder writes no accounting record for a watermark alone: the watermark
/// moves with the clock, but a reader that reaches a record after nothing else was
/// written is at the log's end anyway. Ten idle intervals after one event add at most
/// the one record that carries the watermark past that event.
#[test]
fn an_idle_recorder_writes_no_accounting_record_for_the_watermark_alone() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let rec = Recorder::open(
        dir.path(),
        Config::new()
            .clock(Arc::new(clock.clone()))
            .accounting_interval_ns(SEC)
            .checkpoint_interval_ns(None),
    )
    .unwrap();
    rec.record(&Event::new("cmd.x")).unwrap();
    rec.sync().unwrap();
    let before = common::accountings(&common::read_log(dir.path())).len();
    for i in 1..=10 {
        clock.set_ns(T0 + i * 5 * SEC);
        rec.sync().unwrap();
    }
    let idle = common::accountings(&common::read_log(dir.path())).len() - before;
    assert!(idle <= 1, "{idle} accounting records in ten idle intervals");
    rec.close().unwrap();
}
