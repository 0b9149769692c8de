//! The recorder on a full disk, played through the log's file layer (`SmallDisk`: a
//! write past its size writes what fits and fails with `ENOSPC`; a removed file gives
//! its bytes back). Without a budget, `sync` answers the log's `DiskFull`, every later
//! call too, and the log reopens with every event a `sync` acknowledged. With a budget
//! larger than the disk, the recorder records on: the log frees room by pruning, on
//! the record. The oracles are the events the test recorded and what `sync` answered.

#![expect(clippy::unwrap_used, reason = "tests fail loudly on any error")]

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use blackbox::log::storage::SmallDisk;
use blackbox::{Config, Error, Event, LogOptions, ManualClock, Recorder};
use blackbox_log::{Retention, verify};
use common::Rec;

const START_NS: u64 = 1_767_225_600_000_000_000;
const STEP_NS: u64 = 1_000_000;

fn config(clock: &ManualClock, disk: &SmallDisk, retention: Option<Retention>) -> Config {
    let mut config = Config::new().clock(Arc::new(clock.clone())).log_options(
        LogOptions::new()
            .segment_bytes_max(8 << 10)
            .disk_reserve_bytes(16 << 10)
            .storage(Arc::new(disk.clone())),
    );
    if let Some(r) = retention {
        config = config.retention(r);
    }
    config
}

fn event_payload(i: u64) -> Vec<u8> {
    let mut payload = i.to_le_bytes().to_vec();
    payload.resize(200, 0);
    payload
}

/// The indexes of the `a.x` events in the log, in log order.
fn events(dir: &Path) -> Vec<u64> {
    common::read_log(dir)
        .iter()
        .filter_map(|r| match r {
            Rec::Event { kind, payload, .. } if kind == "a.x" => {
                Some(u64::from_le_bytes(payload[..8].try_into().unwrap()))
            }
            _ => None,
        })
        .collect()
}

/// The log's error inside a recorder error, if it is one.
fn log_error(e: &Error) -> Option<&blackbox_log::Error> {
    match e {
        Error::Log(e) | Error::Writer(e) => Some(e),
        _ => None,
    }
}

#[test]
fn a_full_disk_without_a_budget_reaches_sync_and_every_later_call_and_loses_no_synced_event() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(START_NS);
    let disk = SmallDisk::new(96 << 10);
    let recorder = Recorder::open(dir.path(), config(&clock, &disk, None)).unwrap();
    let mut synced = 0;
    let mut i = 0;
    let err = loop {
        recorder
            .record(&Event::new("a.x").raw(&event_payload(i)))
            .unwrap_or_else(|e| panic!("record {i} refused before a sync failed: {e}"));
        i += 1;
        clock.advance_ns(STEP_NS);
        if i % 10 == 0 {
            match recorder.sync() {
                Ok(_) => synced = i,
                Err(e) => break e,
            }
        }
        assert!(i < 100_000, "the disk never filled");
    };
    match log_error(&err) {
        Some(blackbox_log::Error::DiskFull { dir: d, .. }) => assert_eq!(d, dir.path()),
        _ => panic!("sync answered {err:?}, not the full disk"),
    }
    let message = err.to_string();
    assert!(
        message.contains(&format!(
            "the disk holding {} is full",
            dir.path().display()
        )) && message.ends_with("nothing acknowledged is lost"),
        "{message}"
    );
    // `record` never waits for the writer: it answers the failure from now on, as
    // `sync` and `close` do, with the same cause.
    for answer in [
        recorder.record(&Event::new("a.x").raw(&event_payload(i))),
        recorder.sync().map(|_| ()),
        recorder.close().map(|_| ()),
    ] {
        let e = answer.unwrap_err();
        assert!(e.to_string().contains("is full"), "{e}");
    }
    drop(recorder);

    // Reopened on a normal disk: every synced event, in order; the log verifies.
    let reopened = Recorder::open(dir.path(), Config::new()).unwrap();
    reopened.close().unwrap();
    let found = events(dir.path());
    assert!(found.len() as u64 >= synced, "{} < {synced}", found.len());
    assert_eq!(found, (0..found.len() as u64).collect::<Vec<_>>());
    verify(dir.path(), None, None).unwrap();
}

#[test]
fn a_full_disk_under_a_budget_prunes_and_the_recorder_records_on() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(START_NS);
    let disk = SmallDisk::new(128 << 10);
    let budget = Retention {
        max_bytes: Some(1 << 40),
        max_age_ns: None,
        pinned_max_bytes: 0,
    };
    let recorder = Recorder::open(dir.path(), config(&clock, &disk, Some(budget))).unwrap();
    let n = 3000;
    for i in 0..n {
        recorder
            .record(&Event::new("a.x").raw(&event_payload(i)))
            .unwrap();
        clock.advance_ns(STEP_NS);
        if i % 100 == 99 {
            recorder.sync().unwrap();
        }
    }
    recorder.close().unwrap();
    assert!(disk.refused() > 0, "the disk never filled");
    let report = verify(dir.path(), None, None).unwrap();
    assert!(report.pruned.is_some(), "the log was pruned");
    // The events kept are the newest ones, to the last, without a gap.
    let found = events(dir.path());
    let first = *found.first().unwrap();
    assert!(first > 0);
    assert_eq!(found, (first..n).collect::<Vec<_>>());
    // Every pruning said why: the full disk (reason bit 8), and nothing else.
    let mut reasons = BTreeMap::<u16, usize>::new();
    for r in blackbox_log::LogReader::open(dir.path())
        .unwrap()
        .records(blackbox_log::Seq(0)..)
        .unwrap()
    {
        let r = r.unwrap();
        if r.record_type() == blackbox_log::retention::PRUNE_RECORD_TYPE {
            let p = blackbox_log::PruneRecord::decode(r.payload()).unwrap();
            *reasons.entry(p.reasons).or_default() += 1;
        }
    }
    assert_eq!(reasons.keys().copied().collect::<Vec<_>>(), [8]);
}
