//! An event recorded with `record_evidence` is answered with its seq only once it is as
//! durable as the recorder's durability mode promises: written to the operating system
//! in `Flush` mode, fdatasynced in `Sync` mode. A host cites that seq at once; a crash
//! right after the answer must not lose the record.
//!
//! Guards a past bug: the seq was answered as soon as the writer had numbered the
//! record, before the batch was written (or synced), so a crash could lose a record the
//! host had already cited. The writer is held at the file layer (the write, or the
//! fdatasync) and the answer must not come while it is held.

#![expect(clippy::unwrap_used, reason = "tests fail loudly on any error")]

mod common;

use std::sync::Arc;
use std::sync::mpsc;
use std::time::Duration;

use blackbox::log::LogOptions;
use blackbox::{Config, Durability, Event, ManualClock, Recorder};
use common::{GatedStorage, Rec};

fn held_until_durable(durability: Durability, hold_syncs: bool) {
    let dir = tempfile::tempdir().unwrap();
    let storage = GatedStorage::new();
    let config = Config::new()
        .durability(durability)
        .clock(Arc::new(ManualClock::new(1_000)))
        .log_options(LogOptions::new().storage(Arc::new(storage.clone())));
    let recorder = Arc::new(Recorder::open(dir.path(), config).unwrap());
    let gate = if hold_syncs {
        storage.sync_gate()
    } else {
        storage.gate()
    };
    gate.close();
    let (tx, rx) = mpsc::channel();
    let (tid_tx, tid_rx) = mpsc::channel();
    let producer = {
        let recorder = Arc::clone(&recorder);
        std::thread::spawn(move || {
            tid_tx.send(common::current_thread_id()).unwrap();
            let seq = recorder
                .record_evidence(&Event::new("observation.load").values(&[("kg", 0.31)]))
                .unwrap();
            tx.send(seq).unwrap();
        })
    };
    // The writer is inside the write (or the fdatasync) of the batch holding the event.
    let producer_tid = tid_rx.recv().unwrap();
    gate.wait_for_waiters(1);
    // Answered before the writer reached the file, the producer passes its seq on; not
    // answered, it waits for the answer, asleep.
    let mut early = None;
    common::wait_until(
        "the producer to be answered or to wait",
        Duration::from_secs(10),
        || {
            if let Ok(seq) = rx.try_recv() {
                early = Some(seq);
                return true;
            }
            common::thread_sleeping(&producer_tid)
        },
    );
    // Opened before any assertion, so that a failure does not leave the writer held.
    gate.open();
    assert_eq!(
        early,
        None,
        "answered while its record was not yet {}",
        if hold_syncs { "synced" } else { "written" }
    );
    let seq = rx.recv().unwrap();
    producer.join().unwrap();
    // What the files hold now, before anything else is written: the record is there.
    let recs = common::read_log(dir.path());
    assert!(
        recs.iter()
            .any(|r| matches!(r, Rec::Event { seq: s, kind, .. } if *s == seq.0 && kind == "observation.load")),
        "seq {} not in the files when answered: {recs:?}",
        seq.0
    );
    recorder.close().unwrap();
}

#[test]
fn in_flush_mode_the_seq_is_answered_once_the_record_is_written() {
    held_until_durable(Durability::Flush, false);
}

#[test]
fn in_sync_mode_the_seq_is_answered_once_the_record_is_synced() {
    held_until_durable(Durability::Sync, true);
}
