//! The recorder under a disk budget: the log prunes its oldest segments after seals,
//! incident windows stay whole while pinned, and the running totals equal those of the
//! same run without a budget. The oracles are what the test recorded and the same run
//! written without a budget.

#![expect(clippy::unwrap_used, reason = "tests fail loudly on any error")]

mod common;

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;
use std::sync::Arc;

use blackbox::policy::{IncidentPolicy, Policy};
use blackbox::{Config, Counters, Event, LogOptions, ManualClock, Recorder, Seq};
use blackbox_log::{Retention, verify};
use common::Rec;
use serde_json::{Value, json};

const START_NS: u64 = 1_767_225_600_000_000_000;
const SEGMENT: u64 = 8 << 10;
const STEP_NS: u64 = 1_000_000;
const PREROLL_NS: u64 = 50 * STEP_NS;
const POSTROLL_NS: u64 = 80 * STEP_NS;

fn bytes_on_disk(dir: &Path) -> u64 {
    blackbox_log::list_segments(dir)
        .unwrap()
        .iter()
        .map(|s| fs::metadata(&s.path).unwrap().len())
        .sum()
}

/// Records `n` events of kind `a.x` (payload: the index, then zeros to 200 bytes), one
/// step apart, with a trigger after event `trigger_at` (none past `n`); returns the trigger's seq and the most bytes seen
/// on disk at a sync.
fn run(
    dir: &Path,
    retention: Option<Retention>,
    n: u64,
    trigger_at: u64,
    release: bool,
) -> (Seq, u64) {
    let clock = ManualClock::new(START_NS);
    let mut policy = Policy::builder().incident(IncidentPolicy {
        preroll_ns: PREROLL_NS,
        postroll_ns: POSTROLL_NS,
        ..IncidentPolicy::new(&["fail.*"])
    });
    if let Some(r) = retention {
        policy = policy.retention(r);
    }
    let config = Config::new()
        .clock(Arc::new(clock.clone()))
        .accounting_interval_ns(20 * STEP_NS)
        .policy(policy.build().unwrap())
        .log_options(LogOptions::new().segment_bytes_max(SEGMENT));
    let recorder = Recorder::open(dir, config).unwrap();
    let mut trigger = Seq(0);
    let mut most = 0;
    for i in 0..n {
        let mut payload = i.to_le_bytes().to_vec();
        payload.resize(200, 0);
        recorder.record(&Event::new("a.x").raw(&payload)).unwrap();
        if i == trigger_at {
            clock.advance_ns(STEP_NS / 2);
            trigger = recorder.record_evidence(&Event::new("fail.now")).unwrap();
        }
        clock.advance_ns(STEP_NS);
        if i % 50 == 0 {
            recorder.sync().unwrap();
            most = most.max(bytes_on_disk(dir));
        }
        if release && i == trigger_at + 400 {
            assert!(recorder.release(trigger).unwrap());
        }
    }
    recorder.close().unwrap();
    (trigger, most.max(bytes_on_disk(dir)))
}

/// The indexes of the `a.x` events in the log, by their recorded time.
fn events(dir: &Path) -> BTreeMap<u64, u64> {
    common::read_log(dir)
        .iter()
        .filter_map(|r| match r {
            Rec::Event {
                kind,
                recorded_ns,
                payload,
                ..
            } if kind == "a.x" => Some((
                *recorded_ns,
                u64::from_le_bytes(payload[..8].try_into().unwrap()),
            )),
            _ => None,
        })
        .collect()
}

fn budget() -> Retention {
    Retention {
        max_bytes: Some(48 << 10),
        max_age_ns: None,
        pinned_max_bytes: 256 << 10,
    }
}

#[test]
fn a_bounded_recorder_keeps_its_budget_and_every_pinned_incident_window() {
    let (n, trigger_at) = (1500, 500);
    let tmp = tempfile::tempdir().unwrap();
    let whole = tmp.path().join("whole");
    let bounded = tmp.path().join("bounded");
    let (trigger, _) = run(&whole, None, n, trigger_at, false);
    let (bounded_trigger, most) = run(&bounded, Some(budget()), n, trigger_at, false);
    let r = budget();
    // The disk never held more than the budget, the pinned cap and a segment (with
    // its preamble and footer: one segment file is at most twice the limit here).
    assert!(
        most <= r.max_bytes.unwrap() + r.pinned_max_bytes + 2 * SEGMENT,
        "{most} bytes"
    );
    let report = verify(&bounded, None, None).unwrap();
    assert!(report.pruned.is_some(), "nothing was pruned");
    // Every event the unbounded run has in the incident's window is in the bounded
    // log, the same: pre-roll, trigger and post-roll.
    let trigger_ns = START_NS + trigger_at * STEP_NS + STEP_NS / 2;
    let window = trigger_ns - PREROLL_NS..=trigger_ns + POSTROLL_NS;
    let want: Vec<(u64, u64)> = events(&whole)
        .range(window.clone())
        .map(|(t, i)| (*t, *i))
        .collect();
    assert!(want.len() > 100, "{} events in the window", want.len());
    let have: Vec<(u64, u64)> = events(&bounded)
        .range(window)
        .map(|(t, i)| (*t, *i))
        .collect();
    assert_eq!(have, want);
    assert!(trigger.0 > 0 && bounded_trigger.0 > 0);
    // And what was kept before the window was pruned: the log starts after event 0.
    assert!(events(&bounded).values().next().unwrap() > &0);
}

#[test]
fn a_released_incident_window_is_pruned() {
    let (n, trigger_at) = (1500, 500);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("bounded");
    run(&dir, Some(budget()), n, trigger_at, true);
    let trigger_ns = START_NS + trigger_at * STEP_NS + STEP_NS / 2;
    // Released, the window was no longer kept: the log starts well after it.
    let first = *events(&dir).keys().next().unwrap();
    assert!(
        first > trigger_ns + POSTROLL_NS,
        "the window is still there"
    );
    verify(&dir, None, None).unwrap();
}

#[test]
fn running_totals_after_pruning_equal_an_unbounded_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let whole = tmp.path().join("whole");
    let bounded = tmp.path().join("bounded");
    run(&whole, None, 1500, u64::MAX, false);
    run(&bounded, Some(budget()), 1500, u64::MAX, false);
    let totals = |dir: &Path| -> BTreeMap<String, Counters> {
        let r = Recorder::open(dir, Config::new()).unwrap();
        let stats = r.stats().unwrap();
        r.close().unwrap();
        stats
    };
    let (a, b) = (totals(&whole), totals(&bounded));
    assert_eq!(a["a.x"].seen, 1500);
    assert_eq!(b, a);
    assert!(verify(&bounded, None, None).unwrap().pruned.is_some());
}

/// The working-memory workload: sets, a checkpoint, changes after it, 300 changes of
/// one key (one delta each, more than the writer carries before it checkpoints by
/// itself), then 1500 events of 200 bytes and no change at all. Returns the recorder,
/// synced and still open, and the memory its host holds.
fn memory_run(dir: &Path, retention: Option<Retention>) -> (Recorder, BTreeMap<String, Value>) {
    let clock = ManualClock::new(START_NS);
    let mut policy = Policy::builder();
    if let Some(r) = retention {
        policy = policy.retention(r);
    }
    let config = Config::new()
        .clock(Arc::new(clock.clone()))
        .accounting_interval_ns(20 * STEP_NS)
        .checkpoint_interval_ns(None)
        .policy(policy.build().unwrap())
        .log_options(LogOptions::new().segment_bytes_max(SEGMENT));
    let recorder = Recorder::open(dir, config).unwrap();
    let event = |i: u64| {
        let mut payload = i.to_le_bytes().to_vec();
        payload.resize(200, 0);
        recorder.record(&Event::new("a.x").raw(&payload)).unwrap();
        clock.advance_ns(STEP_NS);
    };
    let w = recorder.working();
    w.set("a", json!(1)).unwrap();
    w.set("b", json!({"x": [1, 2]})).unwrap();
    w.set("c", json!("s")).unwrap();
    event(0);
    recorder.checkpoint().unwrap();
    event(1);
    w.set("a", json!(2)).unwrap();
    w.remove("c");
    w.set("d", Value::Null).unwrap();
    event(2);
    for i in 0..300 {
        w.set("n", json!(i)).unwrap();
        event(3 + i);
    }
    for i in 0..1500 {
        event(1000 + i);
        if i % 50 == 0 {
            recorder.sync().unwrap();
        }
    }
    recorder.sync().unwrap();
    let memory = w.snapshot();
    (recorder, memory)
}

/// Copies the files of the log in `from` (not its lock) into `to`: what a crash right
/// now would leave on disk, once the recorder has synced.
fn crash_image(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for e in fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_file() && e.file_name() != blackbox_log::LOCK_FILE_NAME {
            fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

#[test]
fn the_working_memory_survives_pruning_every_segment_that_held_it() {
    let tmp = tempfile::tempdir().unwrap();
    let mut restored = Vec::new();
    let retention = Retention {
        max_bytes: Some(48 << 10),
        max_age_ns: None,
        pinned_max_bytes: 0,
    };
    for (name, retention) in [("whole", None), ("bounded", Some(retention))] {
        let dir = tmp.path().join(name);
        let (recorder, memory) = memory_run(&dir, retention);
        // The host's memory, by hand.
        let want = BTreeMap::from([
            ("a".to_owned(), json!(2)),
            ("b".to_owned(), json!({"x": [1, 2]})),
            ("d".to_owned(), Value::Null),
            ("n".to_owned(), json!(299)),
        ]);
        assert_eq!(memory, want);
        // A crash now: the close's checkpoint is not in the image.
        let image = tmp.path().join(format!("{name}-crashed"));
        crash_image(&dir, &image);
        recorder.close().unwrap();
        if retention.is_some() {
            // Every segment that held a change or a checkpoint is gone: the log
            // starts in the stretch without changes.
            let first = *events(&image).values().next().unwrap();
            assert!(first > 1010, "the log starts at event {first}");
            assert!(verify(&image, None, None).unwrap().pruned.is_some());
        }
        let r = Recorder::open(&image, Config::new()).unwrap();
        restored.push(r.working().snapshot());
        r.close().unwrap();
        assert_eq!(restored.last().unwrap(), &want, "{name}");
    }
    assert_eq!(restored[0], restored[1]);
}

#[test]
fn a_budget_smaller_than_a_segment_sizes_the_segments_from_it() {
    // The default segment size (64 MiB) and a budget of 2 MiB, from the policy file:
    // segments of an eighth of the budget, so the log prunes as it goes.
    let dir = tempfile::tempdir().unwrap();
    let budget: u64 = 2 << 20;
    let policy = Policy::from_toml_str("[retention]\nmax_bytes = \"2MiB\"\n").unwrap();
    let clock = ManualClock::new(START_NS);
    let config = Config::new()
        .clock(Arc::new(clock.clone()))
        .accounting_interval_ns(20 * STEP_NS)
        .policy(policy);
    let recorder = Recorder::open(dir.path(), config).unwrap();
    let mut most = 0;
    let mut written = 0u64;
    let mut i = 0u64;
    while written < 20 << 20 {
        let mut payload = i.to_le_bytes().to_vec();
        payload.resize(200, 0);
        recorder.record(&Event::new("a.x").raw(&payload)).unwrap();
        written += 200;
        i += 1;
        clock.advance_ns(STEP_NS);
        if i.is_multiple_of(1000) {
            recorder.sync().unwrap();
            most = most.max(bytes_on_disk(dir.path()));
        }
    }
    recorder.close().unwrap();
    most = most.max(bytes_on_disk(dir.path()));
    // Within the budget and one segment of an eighth of it (with its preamble and
    // footer, a few KiB here); no pins.
    let bound = budget + budget / 8 + (16 << 10);
    assert!(most <= bound, "{most} bytes on disk, over {bound}");
    let report = verify(dir.path(), None, None).unwrap();
    assert!(report.pruned.is_some(), "nothing was pruned");
    // Segments of about an eighth of the budget: several of them are within it.
    let segments = blackbox_log::list_segments(dir.path()).unwrap();
    assert!(segments.len() >= 6, "{} segments", segments.len());
}

#[test]
fn a_reopened_recorder_carries_the_memory_it_restored() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("bounded");
    let clock = ManualClock::new(START_NS);
    let config = || {
        Config::new()
            .clock(Arc::new(clock.clone()))
            .accounting_interval_ns(20 * STEP_NS)
            .checkpoint_interval_ns(None)
            .policy(Policy::builder().retention(budget()).build().unwrap())
            .log_options(LogOptions::new().segment_bytes_max(SEGMENT))
    };
    // The first session sets the memory and closes (a checkpoint).
    let recorder = Recorder::open(&dir, config()).unwrap();
    recorder.working().set("a", json!(1)).unwrap();
    recorder.working().set("b", json!([1, 2])).unwrap();
    clock.advance_ns(STEP_NS);
    let first_session_end = recorder.sync().unwrap().unwrap();
    recorder.close().unwrap();
    // The second restores it and changes nothing: 1500 events under the budget prune
    // every record of the first.
    let recorder = Recorder::open(&dir, config()).unwrap();
    for i in 0..1500u64 {
        let mut payload = i.to_le_bytes().to_vec();
        payload.resize(200, 0);
        recorder.record(&Event::new("a.x").raw(&payload)).unwrap();
        clock.advance_ns(STEP_NS);
        if i.is_multiple_of(50) {
            recorder.sync().unwrap();
        }
    }
    recorder.sync().unwrap();
    let image = tmp.path().join("crashed");
    crash_image(&dir, &image);
    recorder.close().unwrap();
    let first = blackbox_log::LogReader::open(&image)
        .unwrap()
        .structure()
        .unwrap()[0]
        .first_seq;
    assert!(
        first > first_session_end.0 + 10,
        "the log starts at seq {first}"
    );
    let r = Recorder::open(&image, Config::new()).unwrap();
    let memory = r.working().snapshot();
    r.close().unwrap();
    // By hand: what the first session set.
    assert_eq!(
        memory,
        BTreeMap::from([("a".to_owned(), json!(1)), ("b".to_owned(), json!([1, 2]))])
    );
}
