//! What a sync barrier costs the disk: one fdatasync, and none after it until something
//! new is written. The writer is stepped batch by batch through its clock readings.

#![expect(clippy::unwrap_used, reason = "tests fail loudly on any error")]

mod common;

use std::sync::Arc;
use std::time::Duration;

use blackbox::log::storage::FaultyStorage;
use blackbox::{Clock, Config, Durability, Event, LogOptions, ManualClock, Recorder};
use parking_lot::{Condvar, Mutex};

const SEC: u64 = 1_000_000_000;
const T0: u64 = 1_700_000_000 * SEC;
const WRITER: &str = "blackbox-writer";

/// A manual clock that, while stepping, stops the writer thread at every reading (once
/// per batch, when its timers run) until the test lets it through: the test then knows
/// where each batch begins and ends.
#[derive(Debug, Clone)]
struct SteppingClock {
    time: ManualClock,
    state: Arc<(Mutex<Steps>, Condvar)>,
}

#[derive(Debug, Default)]
struct Steps {
    stepping: bool,
    /// Readings the writer reached while stepping.
    arrivals: u64,
    /// Readings it may pass.
    permits: u64,
}

impl SteppingClock {
    fn new(start_ns: u64) -> SteppingClock {
        SteppingClock {
            time: ManualClock::new(start_ns),
            state: Arc::default(),
        }
    }

    fn start(&self) {
        let mut s = self.state.0.lock();
        s.stepping = true;
        s.arrivals = 0;
        s.permits = 0;
    }

    fn stop(&self) {
        self.state.0.lock().stepping = false;
        self.state.1.notify_all();
    }

    /// Waits until the writer has reached its `n`-th reading since `start`.
    fn wait_arrivals(&self, n: u64) {
        common::wait_until(
            "the writer to reach its clock reading",
            Duration::from_secs(60),
            || self.state.0.lock().arrivals >= n,
        );
    }

    /// Lets the writer through one more reading.
    fn step(&self) {
        self.state.0.lock().permits += 1;
        self.state.1.notify_all();
    }
}

/// Lets the writer run freely when dropped, on success or failure.
struct StopStepping<'a>(&'a SteppingClock);

impl Drop for StopStepping<'_> {
    fn drop(&mut self) {
        self.0.stop();
    }
}

impl Clock for SteppingClock {
    fn now_ns(&self) -> u64 {
        if std::thread::current().name() == Some(WRITER) {
            let (lock, cvar) = &*self.state;
            let mut s = lock.lock();
            if s.stepping {
                s.arrivals += 1;
                let mine = s.arrivals;
                while s.stepping && s.permits < mine {
                    cvar.wait(&mut s);
                }
            }
        }
        self.time.now_ns()
    }
}

/// Guards the sync barrier's dirty flag (commit 50599a8): a barrier fdatasynced but left
/// the batch marked dirty, so in `Sync` mode the next batch, with nothing new to write,
/// fdatasynced again (and, with a fault armed after the barrier, failed the writer
/// before the next record). A barrier costs one fdatasync; an empty batch after it
/// costs none.
#[test]
fn an_empty_batch_after_a_sync_barrier_does_not_fdatasync_again() {
    let dir = tempfile::tempdir().unwrap();
    let storage = FaultyStorage::new();
    let clock = SteppingClock::new(T0);
    let config = Config::new()
        .clock(Arc::new(clock.clone()))
        .durability(Durability::Sync)
        .accounting_interval_ns(u64::MAX)
        .checkpoint_interval_ns(None)
        .log_options(LogOptions::new().storage(Arc::new(storage.clone())));
    let rec = Recorder::open(dir.path(), config).unwrap();
    let syncs = || storage.op_counts().1;

    clock.start();
    // Batch 0: whatever the writer was doing; the event and the barrier queue behind it.
    clock.wait_arrivals(1);
    rec.record(&Event::new("cmd.move")).unwrap();
    let (tid_tx, tid_rx) = crossbeam_channel::bounded(1);
    std::thread::scope(|s| {
        // Inside the scope: a failed assertion lets the writer go before the scope waits
        // for the barrier's thread.
        let _stop = StopStepping(&clock);
        let barrier = s.spawn(|| {
            tid_tx.send(common::current_thread_id()).unwrap();
            rec.sync()
        });
        let tid = tid_rx.recv().unwrap();
        common::wait_until(
            "the barrier to wait for the writer",
            Duration::from_secs(60),
            || common::thread_sleeping(&tid),
        );
        clock.step();
        // Batch 1 holds the event and the barrier.
        clock.wait_arrivals(2);
        let before = syncs();
        clock.step();
        // Batch 2: nothing new.
        clock.wait_arrivals(3);
        // Answered in batch 1 (a failure here, not a hang, if it was not in it).
        common::wait_until(
            "the barrier to be answered",
            Duration::from_secs(60),
            || barrier.is_finished(),
        );
        let synced = barrier.join().unwrap().unwrap();
        assert!(synced.is_some());
        let after_barrier = syncs();
        assert_eq!(after_barrier - before, 1, "the barrier fdatasyncs once");
        clock.step();
        // Batch 3: batch 2 has ended.
        clock.wait_arrivals(4);
        assert_eq!(
            syncs(),
            after_barrier,
            "a batch with nothing new to write fdatasynced after the barrier"
        );
    });
    rec.close().unwrap();
}
