//! Accounting snapshots come often enough that a fold of the totals up to any time
//! starts at most about a minute before it, and each holds exactly the fold of the
//! accounting records before it.

#![expect(clippy::unwrap_used, reason = "tests fail loudly on any error")]

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use blackbox::{Config, Event, ManualClock, Recorder, codec};
use blackbox_log::{LogReader, Seq};
use common::{Rec, read_log};

#[test]
fn an_accounting_snapshot_is_written_about_every_minute_and_equals_the_fold_before_it() {
    let tmp = tempfile::tempdir().unwrap();
    let start = 1_767_225_600_000_000_000u64;
    let clock = ManualClock::new(start);
    let recorder =
        Recorder::open(tmp.path(), Config::new().clock(Arc::new(clock.clone()))).unwrap();
    // Ten minutes of clock, an event every 100 ms, in two kinds.
    for i in 0..6_000u32 {
        let kind = if i % 2 == 0 {
            "arm.state"
        } else {
            "camera.meta"
        };
        recorder.record(&Event::new(kind).json("{}")).unwrap();
        clock.advance_ns(100_000_000);
    }
    recorder.close().unwrap();

    // Accounting records in log order: (seq, ts, snapshot).
    let reader = LogReader::open(tmp.path()).unwrap();
    let mut accounting = Vec::new();
    for r in reader.records(Seq(0)..).unwrap() {
        let r = r.unwrap();
        if r.record_type() == codec::ACCOUNTING {
            let snapshot = codec::is_accounting_snapshot(r.payload()).unwrap();
            accounting.push((r.seq().0, r.ts_ns(), snapshot));
        }
    }
    // The first accounting record a minute or more after the last snapshot is followed
    // at once by a snapshot.
    let snapshots: Vec<(u64, u64)> = accounting
        .iter()
        .filter(|a| a.2)
        .map(|&(seq, ts, _)| (seq, ts))
        .collect();
    let mut last_snapshot = start;
    for (i, &(seq, ts, snapshot)) in accounting.iter().enumerate() {
        if snapshot {
            last_snapshot = ts;
        } else if ts - last_snapshot >= 60_000_000_000 {
            let next = accounting.get(i + 1).copied();
            assert_eq!(
                next,
                Some((seq + 1, ts, true)),
                "a snapshot right after the accounting record at seq {seq}, {} s after the last",
                (ts - last_snapshot) / 1_000_000_000
            );
        }
    }
    assert!(
        snapshots.len() >= 2,
        "{} snapshots in ten minutes",
        snapshots.len()
    );

    // Each snapshot lists every kind's totals as the records before it fold to: a kind's
    // totals are those of the last record that lists it.
    let recs = read_log(tmp.path());
    for &(seq, _) in &snapshots {
        let mut folded = BTreeMap::new();
        let mut listed = None;
        for r in &recs {
            if let Rec::Accounting { seq: s, kinds, .. } = r {
                if *s < seq {
                    for (k, c) in kinds {
                        folded.insert(k.clone(), *c);
                    }
                } else if *s == seq {
                    listed = Some(kinds.clone());
                }
            }
        }
        if !folded.is_empty() {
            assert_eq!(listed.unwrap(), folded, "the snapshot at seq {seq}");
        }
    }
}
