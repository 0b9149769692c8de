//! A writer that fails part-way through a batch, and the stamps of the records the
//! writer adds on its own timers.

#![expect(clippy::unwrap_used, reason = "tests fail loudly on any error")]

mod common;

use std::sync::Arc;
use std::time::Duration;

use blackbox::log::storage::{Fault, FaultyStorage};
use blackbox::{Config, Counters, Durability, Error, Event, LogOptions, ManualClock, Recorder};
use common::{GatedStorage, Rec, StallingClock};

const SEC: u64 = 1_000_000_000;
const T0: u64 = 1_700_000_000 * SEC;

/// Guards the writer's failure path: a write that failed at the end of a batch used to
/// return before the recorder was marked failed, so callers waiting in that batch were
/// answered `Closed` instead of the cause, and the batch's events vanished from the
/// counts. Every waiting caller now gets the cause, and every accepted event is
/// accounted (`lost` for those that never reached the log), so the counts balance.
#[test]
fn a_write_failure_mid_batch_gives_every_waiting_caller_the_cause_and_the_counts_balance() {
    let dir = tempfile::tempdir().unwrap();
    let storage = FaultyStorage::new();
    let clock = StallingClock::new(T0);
    let config = Config::new()
        .clock(Arc::new(clock.clone()))
        .durability(Durability::Flush)
        .accounting_interval_ns(u64::MAX)
        .checkpoint_interval_ns(None)
        // A write buffer this small writes every append to the file at once.
        .log_options(
            LogOptions::new()
                .storage(Arc::new(storage.clone()))
                .write_buffer_bytes(1),
        );
    let rec = Recorder::open(dir.path(), config).unwrap();
    // Holds the writer between two batches (in its timers' clock reading), so that the
    // next batch holds every message below.
    clock.hold("blackbox-writer", true);
    rec.stats().unwrap();
    clock.wait_held();
    for i in 0..5 {
        rec.record(&Event::new("cmd.move").json(&i.to_string()))
            .unwrap();
    }
    let (tid_tx, tid_rx) = crossbeam_channel::unbounded();
    std::thread::scope(|s| {
        let waiters: Vec<_> = (0..3)
            .map(|_| {
                let (rec, tid_tx) = (&rec, tid_tx.clone());
                s.spawn(move || {
                    tid_tx.send(common::current_thread_id()).unwrap();
                    rec.sync()
                })
            })
            .collect();
        for _ in 0..3 {
            let tid = tid_rx.recv().unwrap();
            common::wait_until(
                "a caller to wait for its sync",
                Duration::from_secs(60),
                || common::thread_sleeping(&tid),
            );
        }
        storage.arm(Fault::ShortWriteThenNoSpace { written_bytes: 0 }, 0);
        clock.release();
        for w in waiters {
            match w.join().unwrap() {
                Err(e @ (Error::Writer(_) | Error::Log(_))) => {
                    let message = e.to_string();
                    // ENOSPC: the log says the disk is full.
                    assert!(message.contains("is full"), "the cause: {message}");
                }
                other => panic!("a waiting caller got {other:?} instead of the cause"),
            }
        }
    });
    assert!(storage.fired());
    // Accepted, never written: counted lost, and the counts balance.
    let stats = rec.stats().unwrap();
    let c = stats["cmd.move"];
    assert_eq!((c.seen, c.kept, c.lost), (5, 0, 5), "{c:?}");
    assert!(c.balanced());
    assert!(matches!(
        rec.record(&Event::new("cmd.move")),
        Err(Error::Writer(_))
    ));
    assert!(matches!(rec.close(), Err(Error::Writer(_))));
}

/// Guards the writer's own stamps: a record it writes on a timer (accounting, a timed
/// checkpoint) used to take the clock's time, and every event still queued behind it
/// was lifted to that time (by the whole queue's lag under a burst). Timer records now
/// take the last stamp written, and every event keeps its recording time.
#[test]
fn records_on_the_writers_timers_never_move_queued_events() {
    let clock = ManualClock::new(T0);
    let dir = tempfile::tempdir().unwrap();
    let gate = GatedStorage::new();
    let config = Config::new()
        .clock(Arc::new(clock.clone()))
        .accounting_interval_ns(SEC)
        .checkpoint_interval_ns(Some(SEC))
        .channel_capacity(1 << 14)
        .log_options(LogOptions::new().storage(Arc::new(gate.clone())));
    let rec = Recorder::open(dir.path(), config).unwrap();
    gate.gate().close();
    rec.record(&Event::new("cmd.stall")).unwrap();
    gate.gate().wait_for_waiters(1);
    // A burst of 10 000 events over one second queues up behind the stalled writer
    // (more than two of its batches), then the clock runs 5 s ahead: at the end of
    // each batch an accounting record and a checkpoint are due.
    for i in 0..10_000u64 {
        clock.set_ns(T0 + i * 100_000);
        rec.record(&Event::new("cmd.move").raw(i.to_string().as_bytes()))
            .unwrap();
    }
    clock.advance_ns(5 * SEC);
    gate.gate().open();
    rec.close().unwrap();

    let recs = common::read_log(dir.path());
    let mut events = 0;
    for r in common::events(&recs) {
        if let Rec::Event {
            ts_ns, recorded_ns, ..
        } = r
        {
            assert_eq!(ts_ns, recorded_ns, "an event was moved: {r:?}");
            events += 1;
        }
    }
    assert_eq!(events, 10_001);
    let timer_records = recs
        .iter()
        .filter(|r| matches!(r, Rec::Accounting { .. } | Rec::Checkpoint { .. }))
        .count();
    assert!(
        timer_records >= 2,
        "the timers fired: {timer_records} records"
    );
    let stats = common::last_accounting(&recs);
    assert!(stats.values().all(Counters::balanced));
    assert!(recs.windows(2).all(|w| w[0].ts_ns() <= w[1].ts_ns()));
}
