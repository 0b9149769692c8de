//! Point-in-time reads that start from what the log indexes (a checkpoint, an
//! accounting snapshot, the recorder's knowledge-base view) against a fold of the whole
//! log, on logs of many segments, sessions, checkpoints, deltas and commits.

#![expect(clippy::unwrap_used, reason = "tests fail loudly on any error")]

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use blackbox::kb::{AsOf, View};
use blackbox::{Conditions, Config, Event, LogOptions, ManualClock, Provenance, Recorder};
use blackbox_replay::{Body, Query, RecordType, Replay, State, kb_view, start_seq, state_at};
use proptest::prelude::*;
use serde_json::{Map, json};

const START_NS: u64 = 1_767_225_600_000_000_000;

/// Writes a log of `sessions` recorder sessions driven by `seed`, in segments of a few
/// KiB; returns every record's timestamp.
fn write_log(dir: &Path, seed: u64, sessions: u32, steps: u32) -> Vec<u64> {
    let clock = ManualClock::new(START_NS);
    let mut x = seed | 1;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for session in 0..sessions {
        let config = Config::new()
            .clock(Arc::new(clock.clone()))
            .accounting_interval_ns(3_000_000_000)
            .checkpoint_interval_ns(Some(20_000_000_000))
            .log_options(LogOptions::new().segment_bytes_max(6 << 10));
        let recorder = Recorder::open(dir, config).unwrap();
        let kb = recorder.kb().unwrap();
        for i in 0..steps {
            let r = next();
            let kind = ["a", "b", "c"][usize::try_from(r % 3).unwrap()];
            let payload = [u8::try_from(i % 256).unwrap(); 64];
            match (r >> 8) % 10 {
                0 => {
                    let seq = recorder
                        .record_evidence(&Event::new(kind).raw(&payload))
                        .unwrap();
                    kb.assert(
                        &format!("k{}", (r >> 16) % 4),
                        json!((r >> 20) % 5),
                        0.3 + f64::from(u32::try_from((r >> 24) % 6).unwrap()) / 10.0,
                        &Conditions::new(),
                        Provenance::new([seq]),
                    )
                    .unwrap();
                }
                1 | 2 => {
                    recorder
                        .working()
                        .set(format!("w{}", (r >> 16) % 5), json!(i))
                        .unwrap();
                }
                3 => {
                    recorder.working().remove(&format!("w{}", (r >> 16) % 5));
                }
                4 if (r >> 16) % 8 == 0 => {
                    recorder.checkpoint().unwrap();
                }
                _ => recorder.record(&Event::new(kind).raw(&payload)).unwrap(),
            }
            // Several records may share a time.
            if (r >> 32) % 3 != 0 {
                clock.advance_ns(((r >> 40) % 2_000) * 1_000_000);
            }
        }
        recorder.close().unwrap();
        clock.advance_ns(u64::from(session) * 7_000_000_000);
    }
    let mut times = Vec::new();
    for r in Replay::open(dir, &Query::new().types(RecordType::ALL)).unwrap() {
        times.push(r.unwrap().ts_ns);
    }
    times
}

/// The state at `at_ns` folded from seq 0: every checkpoint, delta and accounting
/// record at or before it in log order, and the knowledge base of `view` (rebuilt from
/// every commit of the log) as of the last commit at or before it.
fn state_by_full_scan(dir: &Path, view: &View, at_ns: u64) -> State {
    let query = Query::new().until(at_ns).types([
        RecordType::Checkpoint,
        RecordType::Working,
        RecordType::Accounting,
    ]);
    let mut state = State {
        at_ns,
        working: Map::new(),
        checkpoint_seq: None,
        working_seq: None,
        kb: BTreeMap::new(),
        kb_version: 0,
        kinds: BTreeMap::new(),
        accounting_seq: None,
    };
    for record in Replay::open(dir, &query).unwrap() {
        let record = record.unwrap();
        match record.body {
            Body::Checkpoint(c) => {
                state.working = c.working;
                state.checkpoint_seq = Some(record.seq);
                state.working_seq = Some(record.seq);
            }
            Body::Working(delta) => {
                delta.apply(&mut state.working);
                state.working_seq = Some(record.seq);
            }
            Body::Accounting(a) => {
                a.fold_into(&mut state.kinds);
                state.accounting_seq = Some(record.seq);
            }
            _ => {}
        }
    }
    state.kb_version = view.resolve(AsOf::Time(at_ns)).unwrap();
    if state.kb_version > 0 {
        state.kb = view.snapshot(AsOf::Version(state.kb_version)).unwrap();
    }
    state
}

/// A fresh view rebuilt from every commit of the log, in `temp`.
fn rebuilt(dir: &Path, temp: &Path) -> View {
    let view = View::open(temp).unwrap();
    view.catch_up(dir, None, None).unwrap();
    view
}

fn rebuilt_dump(dir: &Path) -> Vec<blackbox::kb::DumpEntry> {
    let temp = tempfile::tempdir().unwrap();
    rebuilt(dir, temp.path()).dump().unwrap()
}

fn segments(dir: &Path) -> usize {
    blackbox::log::list_segments(dir).unwrap().len()
}

/// Cases of the property: `PROPTEST_CASES`, or 5.
fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    #[test]
    fn state_at_any_time_equals_the_fold_of_the_whole_log(seed in any::<u64>()) {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("log");
        let times = write_log(&log, seed, 4, 300);
        prop_assert!(segments(&log) >= 4, "{} segments", segments(&log));
        let first = times[0];
        let last = *times.last().unwrap();
        let temp = tempfile::tempdir().unwrap();
        let view = rebuilt(&log, temp.path());
        // Before the log, at and around the times of records spread over it, and after
        // the log.
        let mut at: Vec<u64> = vec![first - 1, last, last + 1_000_000_000_000];
        let step = (times.len() / 12).max(1);
        for (i, &t) in times.iter().enumerate().step_by(step) {
            at.push([t.saturating_sub(1), t, t + 1][i % 3]);
        }
        let mut mid_log = 0;
        for &t in &at {
            mid_log += usize::from(start_seq(&log, t, None).unwrap() > 0);
        }
        // Most reads start after seq 0, so the comparison covers the short path.
        prop_assert!(mid_log * 2 > at.len(), "{mid_log} of {} start mid-log", at.len());
        for t in at {
            let fast = state_at(&log, t, None).unwrap();
            let full = state_by_full_scan(&log, &view, t);
            prop_assert_eq!(fast, full, "at {}", t);
        }
    }
}

#[test]
fn kb_view_equals_a_rebuild_whether_the_recorder_view_is_current_behind_foreign_or_garbage() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    let other = dir.path().join("other");
    let behind = dir.path().join("behind");
    write_log(&log, 7, 1, 400);
    // A copy of the recorder's view after the first session: behind the log later.
    std::fs::create_dir(&behind).unwrap();
    for entry in walk(&log.join(blackbox::KB_DIR)) {
        let rel = entry.strip_prefix(log.join(blackbox::KB_DIR)).unwrap();
        let to = behind.join(rel);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(&entry, &to).unwrap();
    }
    write_log(&log, 8, 2, 300);
    write_log(&other, 9, 1, 300);
    let expected = rebuilt_dump(&log);
    assert!(expected.len() > 20, "{} entries", expected.len());
    let kb = log.join(blackbox::KB_DIR);

    // Current.
    assert_eq!(kb_view(&log, None).unwrap().dump().unwrap(), expected);
    // Behind: caught up from where it stopped.
    std::fs::remove_dir_all(&kb).unwrap();
    std::fs::rename(&behind, &kb).unwrap();
    assert_eq!(kb_view(&log, None).unwrap().dump().unwrap(), expected);
    // Another log's view: its last commit is not in this log.
    std::fs::remove_dir_all(&kb).unwrap();
    std::fs::rename(other.join(blackbox::KB_DIR), &kb).unwrap();
    assert_eq!(kb_view(&log, None).unwrap().dump().unwrap(), expected);
    // Not a view at all.
    std::fs::remove_dir_all(&kb).unwrap();
    std::fs::create_dir(&kb).unwrap();
    std::fs::write(kb.join("version"), b"garbage").unwrap();
    std::fs::write(kb.join("0.jnl"), vec![0x5a; 4096]).unwrap();
    assert_eq!(kb_view(&log, None).unwrap().dump().unwrap(), expected);
    // None.
    std::fs::remove_dir_all(&kb).unwrap();
    assert_eq!(kb_view(&log, None).unwrap().dump().unwrap(), expected);
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_dir() {
            out.extend(walk(&entry.path()));
        } else {
            out.push(entry.path());
        }
    }
    out
}

/// The reads start where the log says they may: damage in the first segment, far
/// before the last checkpoint, snapshot and commit, is never read by a read at the
/// log's end (`verify` is what reads every byte).
#[test]
fn reads_at_the_end_never_read_the_start_of_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    let times = write_log(&log, 11, 3, 400);
    assert!(segments(&log) >= 4, "{} segments", segments(&log));
    let end = *times.last().unwrap();
    let temp = tempfile::tempdir().unwrap();
    let expected_state = state_by_full_scan(&log, &rebuilt(&log, temp.path()), end);
    let expected_kb = rebuilt_dump(&log);
    // Flip a byte in the middle of the first segment's records.
    let first = &blackbox::log::list_segments(&log).unwrap()[0].path;
    let mut bytes = std::fs::read(first).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x40;
    let mut perms = std::fs::metadata(first).unwrap().permissions();
    #[expect(
        clippy::permissions_set_readonly_false,
        reason = "a test that damages a sealed segment"
    )]
    perms.set_readonly(false);
    std::fs::set_permissions(first, perms).unwrap();
    std::fs::write(first, &bytes).unwrap();
    assert!(
        Replay::open(&log, &Query::new().types(RecordType::ALL))
            .unwrap()
            .any(|r| r.is_err()),
        "the damage is in records a full read meets"
    );

    assert_eq!(state_at(&log, end, None).unwrap(), expected_state);
    assert_eq!(kb_view(&log, None).unwrap().dump().unwrap(), expected_kb);
}
