//! What `close` does with the messages the writer finds behind its `Close` in the same
//! batch: they were accepted before the recorder closed, so each is handled, not
//! dropped.

#![expect(clippy::unwrap_used, reason = "tests fail loudly on any error")]

mod common;

use std::sync::Arc;
use std::time::Duration;

use blackbox::{
    Clock, Conditions, Config, Counters, Error, Event, LogOptions, ManualClock, Provenance,
    Recorder,
};
use common::{Gate, GatedStorage, Rec};
use parking_lot::Mutex;
use serde_json::json;

const SEC: u64 = 1_000_000_000;
const T0: u64 = 1_700_000_000 * SEC;
/// The thread that makes the knowledge-base commit.
const KB_THREAD: &str = "kb-commit";

/// A manual clock that holds one named thread at its `n`-th reading from now on, until
/// released: to stop a caller between two points of its path that read the clock.
#[derive(Debug, Clone)]
struct NthReadingClock {
    time: ManualClock,
    gate: Arc<Gate>,
    /// The thread to hold, and how many of its readings to let through first.
    target: Arc<Mutex<Option<(String, u32)>>>,
}

impl NthReadingClock {
    fn new(start_ns: u64) -> NthReadingClock {
        NthReadingClock {
            time: ManualClock::new(start_ns),
            gate: Arc::new(Gate::default()),
            target: Arc::new(Mutex::new(None)),
        }
    }

    fn hold_at(&self, thread: &str, n: u32) {
        self.gate.close();
        *self.target.lock() = Some((thread.to_owned(), n - 1));
    }

    fn release(&self) {
        self.gate.open();
    }
}

impl Clock for NthReadingClock {
    fn now_ns(&self) -> u64 {
        let hold = {
            let mut target = self.target.lock();
            match target.as_mut() {
                Some((name, left)) if std::thread::current().name() == Some(name.as_str()) => {
                    if *left == 0 {
                        *target = None;
                        true
                    } else {
                        *left -= 1;
                        false
                    }
                }
                _ => false,
            }
        };
        if hold {
            self.gate.pass();
        }
        self.time.now_ns()
    }
}

/// Opens the clock's hold and the disk's gate when dropped, on success or failure.
struct ReleaseAll<'a>(&'a NthReadingClock, &'a GatedStorage);

impl Drop for ReleaseAll<'_> {
    fn drop(&mut self) {
        self.0.release();
        self.1.gate().open();
    }
}

/// Waits until the thread `tid` sleeps (blocked on a reply, a lock or a condition).
fn wait_sleeping(what: &str, tid: &str) {
    common::wait_until(what, Duration::from_secs(60), || {
        common::thread_sleeping(tid)
    });
}

/// Guards the writer's batch drain (issue 9, point 6): on a `Close` the writer used to
/// `break` out of `batch.drain(..)`, and whatever the batch held behind the Close was
/// dropped unanswered: here a knowledge-base commit that passed its check before
/// `close()` and was queued right behind the Close got "closed" instead of being
/// written. Everything accepted before the close is handled, and the counts balance.
#[test]
fn a_commit_queued_behind_a_close_in_the_same_batch_is_written_not_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let clock = NthReadingClock::new(T0);
    let storage = GatedStorage::new();
    let config = Config::new()
        .clock(Arc::new(clock.clone()))
        .accounting_interval_ns(u64::MAX)
        .checkpoint_interval_ns(None)
        .log_options(LogOptions::new().storage(Arc::new(storage.clone())));
    let rec = Recorder::open(dir.path(), config).unwrap();
    let evidence = rec
        .record_evidence(&Event::new("obs.weight").values(&[("kg", 0.31)]))
        .unwrap();
    let kb = rec.kb().unwrap();

    // The writer stalls on the disk with one batch; what follows queues up behind it.
    storage.gate().close();
    rec.record(&Event::new("cmd.stall")).unwrap();
    storage.gate().wait_for_waiters(1);
    for i in 0..3 {
        rec.record(&Event::new("cmd.move").json(&i.to_string()))
            .unwrap();
    }
    let (tid_tx, tid_rx) = crossbeam_channel::unbounded();
    std::thread::scope(|s| {
        // Inside the scope: a failed assertion lets every held thread go before the
        // scope waits for them.
        let _release = ReleaseAll(&clock, &storage);
        // A commit reads the clock twice: for its decision, then in the recorder, after
        // checking that the recorder is open and before queuing the commit. It is held
        // at the second reading.
        clock.hold_at(KB_THREAD, 2);
        let committer = std::thread::Builder::new()
            .name(KB_THREAD.to_owned())
            .spawn_scoped(s, {
                let tid_tx = tid_tx.clone();
                move || {
                    tid_tx.send(common::current_thread_id()).unwrap();
                    kb.assert(
                        "cup.mass_kg",
                        json!(0.31),
                        0.9,
                        &Conditions::default(),
                        Provenance::new([evidence]),
                    )
                }
            })
            .unwrap();
        let kb_tid = tid_rx.recv().unwrap();
        clock.gate.wait_for_waiters(1);

        let closer = s.spawn(|| {
            tid_tx.send(common::current_thread_id()).unwrap();
            rec.close()
        });
        let close_tid = tid_rx.recv().unwrap();
        wait_sleeping("close() to wait for the writer", &close_tid);
        // Closed: nothing more is accepted.
        assert!(matches!(
            rec.record(&Event::new("cmd.move")),
            Err(Error::Closed)
        ));

        // The commit goes in behind the Close, then its caller waits for the answer.
        clock.release();
        clock.gate.wait_for_waiters(0);
        wait_sleeping("the commit to wait for the writer", &kb_tid);

        storage.gate().open();
        let committed = committer.join().unwrap();
        let closed = closer.join().unwrap();
        let committed = committed.unwrap_or_else(|e| panic!("the commit was dropped: {e}"));
        let last = closed.unwrap().unwrap();
        assert!(committed.seq < last.0);
    });

    let recs = common::read_log(dir.path());
    let kinds: Vec<String> = common::events(&recs)
        .into_iter()
        .filter_map(|r| match r {
            Rec::Event { kind, .. } => Some(kind.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "obs.weight",
            "cmd.stall",
            "cmd.move",
            "cmd.move",
            "cmd.move"
        ]
    );
    let commits: Vec<&serde_json::Value> = recs
        .iter()
        .filter_map(|r| match r {
            Rec::Kb { commit, .. } => Some(commit),
            _ => None,
        })
        .collect();
    assert_eq!(commits.len(), 1, "{commits:?}");
    let totals = common::last_accounting(&recs);
    let moves = totals["cmd.move"];
    assert_eq!((moves.seen, moves.kept), (3, 3), "{moves:?}");
    assert!(totals.values().all(Counters::balanced), "{totals:?}");

    // The commit is the knowledge base's, after a reopen too (the view is released
    // when the recorder is dropped).
    drop(rec);
    let rec = Recorder::open(dir.path(), Config::new()).unwrap();
    let fact = rec.kb().unwrap().get("cup.mass_kg").unwrap().unwrap();
    assert_eq!(fact.value, json!(0.31));
    rec.close().unwrap();
}
