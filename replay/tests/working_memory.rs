//! Working memory at every instant (DESIGN §7): `state_at` returns exactly the memory the
//! host had at any time, not only at checkpoints.
//!
//! Guards a past bug: working-memory changes reached the log only inside checkpoints, so
//! `state --at` a time between two checkpoints showed the older one (in the GUIDE's
//! Python example, ten `set` operations ran and `state --at` in the middle of them found
//! nothing).
//!
//! The oracle is a model the test keeps: every `set` and `del` it made, with the time of
//! the change, folded into a `BTreeMap` up to the time asked. "The memory at T" is the
//! memory after every change stamped at or before T (ARCHITECTURE.md, "Working memory at
//! every instant"). The checks run at every operation's time and one nanosecond before
//! it, with random checkpoints (asked for and timed) and events among the changes.
//!
//! A third property does the same through the real binary: a `record` stream of the
//! same operations, each followed by an acknowledged probe event, and `blackbox state
//! --at` every probe's time.
//!
//! CI runs a few cases; the long mode is
//! `PROPTEST_CASES=1000 cargo test -p blackbox-replay --release --test working_memory`.

#![expect(clippy::unwrap_used, reason = "tests fail loudly on any error")]

mod common;

use std::cell::Cell;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier};

use blackbox::{Clock, Config, Event, ManualClock, Recorder};
use proptest::prelude::*;
use serde_json::{Value, json};

/// Where the test clocks start: far from 0, so "one nanosecond before" is a time too.
const T0: u64 = 1_000_000_000_000;

/// One operation of the host.
#[derive(Debug, Clone)]
enum Op {
    Set(u8, Value),
    Del(u8),
    Checkpoint,
    Event,
}

fn value() -> impl Strategy<Value = Value> {
    prop_oneof![
        (0..4i64).prop_map(|n| json!(n)),
        "[a-c]{0,3}".prop_map(|s| json!(s)),
        (0..3i64).prop_map(|n| json!({"step": n, "plan": ["reach", "grasp"]})),
        Just(Value::Null),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => (0..5u8, value()).prop_map(|(k, v)| Op::Set(k, v)),
        2 => (0..5u8).prop_map(Op::Del),
        1 => Just(Op::Checkpoint),
        2 => Just(Op::Event),
    ]
}

fn key(k: u8) -> String {
    format!("k{k}")
}

/// A change the host made, and when.
#[derive(Debug, Clone)]
struct Change {
    /// The order in which changes were applied to the memory.
    order: u64,
    ts_ns: u64,
    key: String,
    value: Option<Value>,
}

/// The memory after every change stamped at or before `at_ns`, applied in their order.
fn model_at(changes: &[Change], at_ns: u64) -> BTreeMap<String, Value> {
    let mut sorted: Vec<&Change> = changes.iter().filter(|c| c.ts_ns <= at_ns).collect();
    sorted.sort_by_key(|c| c.order);
    let mut memory = BTreeMap::new();
    for c in sorted {
        match &c.value {
            Some(v) => memory.insert(c.key.clone(), v.clone()),
            None => memory.remove(&c.key),
        };
    }
    memory
}

/// Checks `state_at` at every time given, and one nanosecond before each, against the
/// model.
fn check_state_at(dir: &Path, changes: &[Change], times: &[u64]) -> Result<(), TestCaseError> {
    let mut checked = std::collections::BTreeSet::new();
    for &t in times {
        for at in [t - 1, t] {
            if !checked.insert(at) {
                continue;
            }
            let state = blackbox_replay::state_at(dir, at, None).unwrap();
            let got: BTreeMap<String, Value> = state.working.into_iter().collect();
            prop_assert_eq!(
                got,
                model_at(changes, at),
                "the working memory at {} ({} ns after the start)",
                at,
                at - T0
            );
        }
    }
    Ok(())
}

/// Runs `ops` on one thread with a manual clock that moves by `steps[i]` before op `i`
/// (often 0: several changes share a nanosecond), so every operation's time is the
/// clock's reading when it ran.
fn one_thread(ops: &[(u64, Op)], checkpoint_every_ns: u64) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let recorder = Recorder::open(
        dir.path(),
        Config::new()
            .clock(Arc::new(clock.clone()))
            .checkpoint_interval_ns(Some(checkpoint_every_ns)),
    )
    .unwrap();
    let mut now = T0;
    let mut changes = Vec::new();
    let mut times = Vec::new();
    for (i, (step, op)) in ops.iter().enumerate() {
        now += step;
        clock.set_ns(now);
        times.push(now);
        let order = u64::try_from(i).unwrap();
        match op {
            Op::Set(k, v) => {
                recorder.working().set(key(*k), v.clone()).unwrap();
                changes.push(Change {
                    order,
                    ts_ns: now,
                    key: key(*k),
                    value: Some(v.clone()),
                });
            }
            Op::Del(k) => {
                if recorder.working().remove(&key(*k)).is_some() {
                    changes.push(Change {
                        order,
                        ts_ns: now,
                        key: key(*k),
                        value: None,
                    });
                }
            }
            Op::Checkpoint => {
                recorder.checkpoint().unwrap();
            }
            Op::Event => recorder.record(&Event::new("test.op")).unwrap(),
        }
    }
    let at_close = recorder.working().snapshot();
    recorder.close().unwrap();
    prop_assert_eq!(&model_at(&changes, u64::MAX), &at_close);
    check_state_at(dir.path(), &changes, &times)
}

/// A clock whose every reading is one tick later than the one before it (a tick lasting
/// `reads_per_ns` readings), and which remembers, per thread, the last reading it gave:
/// its index among all readings and its time.
#[derive(Debug)]
struct CountingClock {
    readings: AtomicU64,
    reads_per_ns: u64,
}

thread_local! {
    static LAST_READING: Cell<Option<(u64, u64)>> = const { Cell::new(None) };
}

impl Clock for CountingClock {
    fn now_ns(&self) -> u64 {
        let n = self.readings.fetch_add(1, Ordering::SeqCst);
        let t = T0 + n / self.reads_per_ns;
        LAST_READING.with(|l| l.set(Some((n, t))));
        t
    }
}

/// Runs one op list per thread, all at once, on a clock every operation reads; an
/// operation's time is the reading it took on its own thread. A change's order is its
/// reading's index: the recorder reads the clock for a change while it holds the
/// memory's lock, and the final memory is checked against that order.
fn threads(
    per_thread: &[Vec<Op>],
    reads_per_ns: u64,
    checkpoint_every_ns: u64,
) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(CountingClock {
        readings: AtomicU64::new(0),
        reads_per_ns,
    });
    let recorder = Recorder::open(
        dir.path(),
        Config::new()
            .clock(clock)
            .checkpoint_interval_ns(Some(checkpoint_every_ns)),
    )
    .unwrap();
    let start = Barrier::new(per_thread.len());
    let done: Vec<(Vec<Change>, Vec<u64>)> = std::thread::scope(|s| {
        let handles: Vec<_> = per_thread
            .iter()
            .map(|ops| {
                let recorder = &recorder;
                let start = &start;
                s.spawn(move || {
                    start.wait();
                    let mut changes = Vec::new();
                    let mut times = Vec::new();
                    for op in ops {
                        LAST_READING.with(|l| l.set(None));
                        let changed = match op {
                            Op::Set(k, v) => {
                                recorder.working().set(key(*k), v.clone()).unwrap();
                                Some((key(*k), Some(v.clone())))
                            }
                            Op::Del(k) => {
                                recorder.working().remove(&key(*k)).map(|_| (key(*k), None))
                            }
                            Op::Checkpoint => {
                                recorder.checkpoint().unwrap();
                                None
                            }
                            Op::Event => {
                                recorder.record(&Event::new("test.op")).unwrap();
                                None
                            }
                        };
                        let reading = LAST_READING.with(Cell::get);
                        if let Some((key, value)) = changed {
                            let (order, ts_ns) =
                                reading.expect("a change is stamped by the recorder's clock");
                            times.push(ts_ns);
                            changes.push(Change {
                                order,
                                ts_ns,
                                key,
                                value,
                            });
                        } else if let Some((_, ts_ns)) = reading {
                            times.push(ts_ns);
                        }
                    }
                    (changes, times)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let at_close = recorder.working().snapshot();
    recorder.close().unwrap();
    let changes: Vec<Change> = done.iter().flat_map(|(c, _)| c.clone()).collect();
    let mut times: Vec<u64> = done.iter().flat_map(|(_, t)| t.clone()).collect();
    times.sort_unstable();
    prop_assert_eq!(&model_at(&changes, u64::MAX), &at_close);
    check_state_at(dir.path(), &changes, &times)
}

fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: cases(24),
        ..ProptestConfig::default()
    })]

    /// One thread: `state_at` at every operation's time (and 1 ns before) is the
    /// model's memory at that time, changes sharing a nanosecond included.
    #[test]
    fn state_at_every_operation_time_is_the_memory_then(
        ops in prop::collection::vec((0..3u64, op()), 1..40),
        checkpoint_every_ns in 3..40u64,
    ) {
        one_thread(&ops, checkpoint_every_ns)?;
    }

    /// Several threads changing the same keys at once: the same, at every operation's
    /// time.
    #[test]
    fn state_at_every_operation_time_is_the_memory_then_from_several_threads(
        per_thread in prop::collection::vec(prop::collection::vec(op(), 1..16), 2..4),
        reads_per_ns in 1..4u64,
        checkpoint_every_ns in 5..60u64,
    ) {
        threads(&per_thread, reads_per_ns, checkpoint_every_ns)?;
    }
}

/// Feeds `ops` to the real `blackbox record`, each followed by an event sent with
/// `"ack": true` (a probe: its seq comes back, and `replay` gives its time), then checks
/// `blackbox state --at` every probe's time against the model's memory after the ops
/// before it. Each op is applied before its probe is recorded, and the next op after
/// the probe is written (acknowledged), so the probe's time falls between the two.
fn through_the_binary(ops: &[Op]) -> Result<(), TestCaseError> {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    let mut input = String::new();
    let mut model: BTreeMap<String, Value> = BTreeMap::new();
    let mut after = Vec::new();
    for op in ops {
        let line = match op {
            Op::Set(k, v) => {
                model.insert(key(*k), v.clone());
                json!({"op": "set", "key": key(*k), "value": v})
            }
            Op::Del(k) => {
                model.remove(&key(*k));
                json!({"op": "del", "key": key(*k)})
            }
            Op::Checkpoint => json!({"op": "checkpoint"}),
            Op::Event => json!({"kind": "test.op"}),
        };
        input.push_str(&format!(
            "{line}\n{}\n",
            json!({"kind": "test.probe", "ack": true})
        ));
        after.push(model.clone());
    }
    let out = common::ok(&common::record(&dir, &input, &[]));
    let replies = common::json_lines(&out);
    prop_assert_eq!(
        replies.len(),
        ops.len() + 1,
        "a reply per probe and the summary"
    );
    let records = common::replay_json(&dir, &["--type", "event"]);
    for (i, (reply, memory)) in replies.iter().zip(&after).enumerate() {
        prop_assert_eq!(reply["line"].as_u64(), Some(2 * i as u64 + 2));
        let probe = records.iter().find(|r| r["seq"] == reply["seq"]).unwrap();
        let at = probe["ts_ns"].as_u64().unwrap().to_string();
        let state: Value = serde_json::from_str(&common::ok(&common::blackbox(&[
            "state",
            "--dir",
            common::s(&dir),
            "--at",
            &at,
            "--json",
        ])))
        .unwrap();
        prop_assert_eq!(
            &state["working"],
            &json!(memory),
            "state --at the probe after op {} ({:?})",
            i,
            &ops[i]
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: cases(6),
        ..ProptestConfig::default()
    })]

    /// Through the real binary: `state --at` the time right after every operation of a
    /// `record` stream is the model's memory then.
    #[test]
    fn state_at_through_the_binary_is_the_memory_after_every_operation(
        ops in prop::collection::vec(op(), 1..24),
    ) {
        through_the_binary(&ops)?;
    }
}

/// The GUIDE's case, by hand: ten sets between two checkpoints, and the memory in the
/// middle of them is the memory then.
#[test]
fn the_memory_between_two_checkpoints_is_the_memory_then() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let recorder = Recorder::open(
        dir.path(),
        Config::new()
            .clock(Arc::new(clock.clone()))
            .checkpoint_interval_ns(None),
    )
    .unwrap();
    recorder.checkpoint().unwrap();
    for step in 0..10u64 {
        clock.set_ns(T0 + 100 * (step + 1));
        recorder.working().set("step", json!(step)).unwrap();
    }
    clock.set_ns(T0 + 5_000);
    recorder.close().unwrap();
    for step in 0..10u64 {
        let at = T0 + 100 * (step + 1) + 50;
        let state = blackbox_replay::state_at(dir.path(), at, None).unwrap();
        assert_eq!(state.working.get("step"), Some(&json!(step)), "at {at}");
    }
    let before = blackbox_replay::state_at(dir.path(), T0 + 99, None).unwrap();
    assert!(before.working.is_empty(), "{:?}", before.working);
}

/// Guards a past bug: a recorder killed after changes it had written, but before its
/// next checkpoint, lost them: the next session restored the last checkpoint only.
/// Here `record` is SIGKILLed after a sync acknowledged every change; the next session's
/// memory (its first checkpoint) is the memory the changes made, by hand.
#[test]
fn the_memory_after_a_crash_is_every_change_written_before_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    let mut rec = common::Recording::start(&dir, &[]);
    rec.send(&[
        r#"{"op":"set","key":"a","value":1}"#.to_owned(),
        r#"{"op":"set","key":"b","value":{"x":[1,2]}}"#.to_owned(),
        r#"{"op":"checkpoint"}"#.to_owned(),
        r#"{"op":"set","key":"c","value":"three"}"#.to_owned(),
        r#"{"op":"del","key":"a"}"#.to_owned(),
    ]);
    rec.sync();
    rec.kill();
    common::ok(&common::record(&dir, "{\"op\":\"checkpoint\"}\n", &[]));
    let checkpoints = common::replay_json(&dir, &["--type", "checkpoint"]);
    let after_crash = checkpoints
        .iter()
        .rev()
        .nth(1)
        .expect("the new session's own checkpoint, then its close's");
    assert_eq!(
        after_crash["working"],
        json!({"b": {"x": [1, 2]}, "c": "three"}),
        "{checkpoints:?}"
    );
}
