//! The working memory in the log: every change reaches it as a delta record (type 9,
//! FORMAT.md), stamped with the time of the change and in its place among the events,
//! and a recorder that opens a log restores the memory the log holds: the last
//! checkpoint with every delta after it.
//!
//! Guards a past bug: changes reached the log only inside checkpoints, so a crash lost
//! every change since the last one, and no reader could tell the memory between two
//! checkpoints. The oracles are hand-written: records written with the log's own API
//! as FORMAT.md describes them, and the memory those records must fold to, by hand.

#![expect(clippy::unwrap_used, reason = "tests fail loudly on any error")]

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use blackbox::log::{Log, LogOptions, Record, RecordType};
use blackbox::{Config, Error, Event, IncidentPolicy, ManualClock, Policy, Recorder};
use common::Rec;
use serde_json::{Value, json};

const CHECKPOINT: RecordType = RecordType(4);
const WORKING: RecordType = RecordType(9);

fn memory(v: Value) -> BTreeMap<String, Value> {
    serde_json::from_value(v).unwrap()
}

/// Writes `records` (type, time, JSON text) into a new log in `dir` with the log's own
/// API, as a recorder that crashed after writing them would have left them.
fn write_log(dir: &Path, records: &[(RecordType, u64, &str)]) {
    let (mut log, _) = Log::open(dir, LogOptions::new()).unwrap();
    for (t, ts, payload) in records {
        log.append(Record::new(*t, *ts, payload.as_bytes()))
            .unwrap();
    }
    log.close().unwrap();
}

fn reopened_memory(dir: &Path) -> BTreeMap<String, Value> {
    let recorder = Recorder::open(dir, Config::new()).unwrap();
    let memory = recorder.working().snapshot();
    recorder.close().unwrap();
    memory
}

#[test]
fn the_memory_restored_on_open_is_the_last_checkpoint_with_the_deltas_after_it() {
    let dir = tempfile::tempdir().unwrap();
    write_log(
        dir.path(),
        &[
            (WORKING, 10, r#"{"set":{"old":true}}"#),
            (CHECKPOINT, 20, r#"{"a":1,"b":2}"#),
            (WORKING, 30, r#"{"set":{"c":3},"del":["a"]}"#),
            (WORKING, 40, r#"{"set":{"b":{"x":[1,2]}}}"#),
            (WORKING, 40, r#"{"del":["c"]}"#),
            (WORKING, 50, r#"{"set":{"d":null}}"#),
        ],
    );
    // By hand: {a:1, b:2} → a removed, c set → b replaced → c removed → d set.
    assert_eq!(
        reopened_memory(dir.path()),
        memory(json!({"b": {"x": [1, 2]}, "d": null}))
    );
}

#[test]
fn a_log_without_checkpoints_restores_the_fold_of_every_delta() {
    let dir = tempfile::tempdir().unwrap();
    write_log(
        dir.path(),
        &[
            (WORKING, 10, r#"{"set":{"goal":"cup","step":1}}"#),
            (WORKING, 20, r#"{"set":{"step":2}}"#),
            (WORKING, 30, r#"{"del":["goal"]}"#),
        ],
    );
    assert_eq!(reopened_memory(dir.path()), memory(json!({"step": 2})));
}

#[test]
fn a_delta_that_does_not_decode_is_refused_on_open_naming_its_seq() {
    let dir = tempfile::tempdir().unwrap();
    write_log(
        dir.path(),
        &[
            (CHECKPOINT, 10, r#"{"a":1}"#),
            (WORKING, 20, r#"{"set":{"b":2},"del":["b"]}"#),
        ],
    );
    let err = Recorder::open(dir.path(), Config::new()).unwrap_err();
    assert!(
        matches!(&err, Error::Restore { seq: 1, .. }),
        "{err:?}: {err}"
    );
    assert!(err.to_string().contains("working-memory delta"), "{err}");
}

/// Each change is written with the time the recorder's clock gave it, before the events
/// recorded after it on the same thread and after those recorded before it; several
/// changes at one nanosecond are each in the log, in the order made.
#[test]
fn each_change_is_written_at_its_time_in_its_place_among_the_events() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(1_000);
    let recorder = Recorder::open(
        dir.path(),
        Config::new()
            .clock(Arc::new(clock.clone()))
            .checkpoint_interval_ns(None),
    )
    .unwrap();
    let wm = recorder.working();
    recorder.record(&Event::new("step.one")).unwrap();
    clock.set_ns(2_000);
    wm.set("a", json!(1)).unwrap();
    recorder.record(&Event::new("step.two")).unwrap();
    clock.set_ns(3_000);
    wm.set("b", json!("x")).unwrap();
    wm.remove("a");
    wm.remove("never-set");
    wm.set("b", json!("x")).unwrap();
    clock.set_ns(4_000);
    recorder.record(&Event::new("step.three")).unwrap();
    clock.set_ns(5_000);
    recorder.close().unwrap();

    let recs = common::read_log(dir.path());
    let seen: Vec<(u64, String)> = recs
        .iter()
        .filter_map(|r| match r {
            Rec::Event { ts_ns, kind, .. } => Some((*ts_ns, kind.clone())),
            Rec::Working {
                ts_ns, set, del, ..
            } => Some((*ts_ns, format!("set {} del {}", json!(set), json!(del)))),
            _ => None,
        })
        .collect();
    // Removing a key that is not there changes nothing; setting "b" to the value it
    // holds changes nothing either: neither is written.
    assert_eq!(
        seen,
        [
            (1_000, "step.one".to_owned()),
            (2_000, r#"set {"a":1} del []"#.to_owned()),
            (2_000, "step.two".to_owned()),
            (3_000, r#"set {"b":"x"} del []"#.to_owned()),
            (3_000, r#"set {} del ["a"]"#.to_owned()),
            (4_000, "step.three".to_owned()),
        ]
    );
    // The close checkpoint is the memory at close, and the fold of the deltas.
    let last = recs
        .iter()
        .rev()
        .find_map(|r| match r {
            Rec::Checkpoint { memory, .. } => Some(memory.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(last, memory(json!({"b": "x"})));
}

/// A recorder told not to restore the memory starts empty although the log holds one:
/// it says so with an empty checkpoint when it opens, so the log's fold is the new
/// session's memory and not the old one with the new changes.
#[test]
fn a_recorder_that_does_not_restore_writes_the_empty_memory_it_starts_from() {
    let dir = tempfile::tempdir().unwrap();
    let recorder = Recorder::open(dir.path(), Config::new()).unwrap();
    recorder.working().set("old", json!(1)).unwrap();
    recorder.close().unwrap();
    let recorder = Recorder::open(dir.path(), Config::new().restore_working_memory(false)).unwrap();
    assert!(recorder.working().is_empty());
    recorder.working().set("new", json!(2)).unwrap();
    recorder.sync().unwrap();
    // Read while the recorder runs: no close checkpoint yet.
    let mut fold: BTreeMap<String, Value> = BTreeMap::new();
    for r in common::read_log(dir.path()) {
        match r {
            Rec::Checkpoint { memory, .. } => fold = memory,
            Rec::Working { set, del, .. } => {
                for k in del {
                    fold.remove(&k);
                }
                fold.extend(set);
            }
            _ => {}
        }
    }
    assert_eq!(fold, memory(json!({"new": 2})));
    recorder.close().unwrap();
}

/// The checkpoint an incident writes is the memory when its trigger was recorded: a
/// change made at the trigger's nanosecond but after it follows the checkpoint.
#[test]
fn the_incident_checkpoint_is_the_memory_when_the_trigger_was_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(1_000);
    let policy = Policy::builder()
        .incident(IncidentPolicy::new(&["failure.*"]))
        .build()
        .unwrap();
    let recorder = Recorder::open(
        dir.path(),
        Config::new()
            .policy(policy)
            .clock(Arc::new(clock.clone()))
            .checkpoint_interval_ns(None),
    )
    .unwrap();
    recorder.working().set("grip", json!("closed")).unwrap();
    clock.set_ns(2_000);
    recorder.record(&Event::new("failure.slip")).unwrap();
    recorder.working().set("grip", json!("open")).unwrap();
    clock.set_ns(3_000);
    recorder.close().unwrap();

    let recs = common::read_log(dir.path());
    let marker = recs
        .iter()
        .position(|r| matches!(r, Rec::Incident { .. }))
        .unwrap();
    let Rec::Checkpoint {
        memory: at_trigger,
        ts_ns,
        ..
    } = &recs[marker + 1]
    else {
        panic!("a checkpoint follows the marker: {:?}", recs[marker + 1]);
    };
    assert_eq!(
        (at_trigger, *ts_ns),
        (&memory(json!({"grip": "closed"})), 2_000)
    );
    let after: Vec<&Rec> = recs[marker + 2..]
        .iter()
        .filter(|r| matches!(r, Rec::Working { .. }))
        .collect();
    assert!(
        matches!(after.as_slice(), [Rec::Working { ts_ns: 2_000, set, .. }] if set["grip"] == json!("open")),
        "{after:?}"
    );
}

/// Times per thread, and a gate: a thread that holds a gate stops inside its next clock
/// reading until the test lets it go.
#[derive(Debug)]
struct GatedClock {
    /// The time of threads without a time of their own (the writer's).
    now_ns: std::sync::atomic::AtomicU64,
}

#[derive(Debug)]
struct Gate {
    inside: std::sync::mpsc::Sender<()>,
    go: std::sync::mpsc::Receiver<()>,
}

thread_local! {
    static THREAD_NS: std::cell::Cell<Option<u64>> = const { std::cell::Cell::new(None) };
    static THREAD_GATE: std::cell::RefCell<Option<Gate>> = const { std::cell::RefCell::new(None) };
}

impl blackbox::Clock for GatedClock {
    fn now_ns(&self) -> u64 {
        if let Some(g) = THREAD_GATE.with(|g| g.borrow_mut().take()) {
            g.inside.send(()).unwrap();
            g.go.recv().unwrap();
        }
        THREAD_NS
            .with(std::cell::Cell::get)
            .unwrap_or_else(|| self.now_ns.load(std::sync::atomic::Ordering::SeqCst))
    }
}

/// Guards a past bug: a change made on one thread whose message reached the writer after
/// an event recorded later on another thread was written after that event and stamped
/// with its later time, so `state --at` the change's time did not show it. Here the
/// change reads the clock (time 10) and stops there, inside the memory's lock, while
/// another thread records an event at time 20: the event's message is in the channel
/// before the change's. The writer must write the change first, at time 10.
#[test]
fn a_change_announced_after_a_later_event_of_another_thread_keeps_its_time() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(GatedClock {
        now_ns: std::sync::atomic::AtomicU64::new(5),
    });
    let recorder = Recorder::open(
        dir.path(),
        Config::new()
            .clock(Arc::clone(&clock) as Arc<dyn blackbox::Clock>)
            .checkpoint_interval_ns(None),
    )
    .unwrap();
    let (inside_tx, inside) = std::sync::mpsc::channel();
    let (go, go_rx) = std::sync::mpsc::channel();
    std::thread::scope(|s| {
        let setter = s.spawn(|| {
            THREAD_NS.with(|t| t.set(Some(10)));
            THREAD_GATE.with(|g| {
                *g.borrow_mut() = Some(Gate {
                    inside: inside_tx,
                    go: go_rx,
                });
            });
            recorder.working().set("grip", json!("closed")).unwrap();
        });
        // The setter is inside its clock reading, under the memory's lock.
        inside.recv().unwrap();
        THREAD_NS.with(|t| t.set(Some(20)));
        recorder.record(&Event::new("step.later")).unwrap();
        go.send(()).unwrap();
        setter.join().unwrap();
    });
    THREAD_NS.with(|t| t.set(None));
    clock.now_ns.store(30, std::sync::atomic::Ordering::SeqCst);
    recorder.close().unwrap();
    let seen: Vec<(u64, String)> = common::read_log(dir.path())
        .into_iter()
        .filter_map(|r| match r {
            Rec::Event { ts_ns, kind, .. } => Some((ts_ns, kind)),
            Rec::Working { ts_ns, set, .. } => Some((ts_ns, format!("set {}", json!(set)))),
            _ => None,
        })
        .collect();
    assert_eq!(
        seen,
        [
            (10, r#"set {"grip":"closed"}"#.to_owned()),
            (20, "step.later".to_owned()),
        ]
    );
}

/// A clock that moves one nanosecond forward at every reading: any two readings differ.
#[derive(Debug)]
struct TickingClock(std::sync::atomic::AtomicU64);

impl blackbox::Clock for TickingClock {
    fn now_ns(&self) -> u64 {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst)
    }
}

/// Guards a past bug: `replace` read the clock once per key it changed, so one
/// operation reached the log as one delta record per key, each at its own time, and a
/// reader could see the memory half replaced. One operation is one time: with a clock
/// whose every reading differs, its changes still share one stamp and one record.
#[test]
fn a_replace_is_one_change_at_one_time_whatever_the_clock_does() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(TickingClock(std::sync::atomic::AtomicU64::new(1_000)));
    let recorder = Recorder::open(dir.path(), Config::new().clock(clock)).unwrap();
    let memory = recorder.working();
    memory.set("a", json!(1)).unwrap();
    memory.set("b", json!(2)).unwrap();
    memory.set("gone", json!(3)).unwrap();
    recorder.sync().unwrap();
    memory
        .replace(memory_of(json!({"a": 10, "b": 2, "c": 30, "d": 40})))
        .unwrap();
    recorder.close().unwrap();
    let workings: Vec<(u64, BTreeMap<String, Value>, Vec<String>)> = common::read_log(dir.path())
        .into_iter()
        .filter_map(|r| match r {
            Rec::Working {
                ts_ns, set, del, ..
            } => Some((ts_ns, set, del)),
            _ => None,
        })
        .collect();
    // Three sets, then the replace: by hand, it sets a, c, d and removes "gone"; b is
    // unchanged.
    assert_eq!(workings.len(), 4, "{workings:?}");
    let (_, set, del) = &workings[3];
    assert_eq!(set, &memory_of(json!({"a": 10, "c": 30, "d": 40})));
    assert_eq!(del, &["gone".to_owned()]);
}

fn memory_of(v: Value) -> BTreeMap<String, Value> {
    memory(v)
}

/// Guards a past bug: a session that does not restore the working memory writes an
/// empty checkpoint at open, and it was stamped with the log's last stamp, the time of
/// the last session's close, so a reader asking for the memory at that instant found
/// it empty. It is stamped with the time of the open, or the last stamp when the clock
/// is behind it.
#[test]
fn the_reset_checkpoint_at_open_is_stamped_with_the_time_of_the_open() {
    for (reopen_ns, expected_ns) in [(9_000, 9_000), (500, 5_000)] {
        let dir = tempfile::tempdir().unwrap();
        let clock = ManualClock::new(5_000);
        let config = || Config::new().clock(Arc::new(clock.clone()));
        let recorder = Recorder::open(dir.path(), config()).unwrap();
        recorder.working().set("goal", json!("cup")).unwrap();
        recorder.close().unwrap();
        drop(recorder);
        let before = common::read_log(dir.path()).len();
        clock.set_ns(reopen_ns);
        let recorder = Recorder::open(dir.path(), config().restore_working_memory(false)).unwrap();
        recorder.close().unwrap();
        drop(recorder);
        let recs = common::read_log(dir.path());
        let reset = recs[before..]
            .iter()
            .find_map(|r| match r {
                Rec::Checkpoint { ts_ns, memory, .. } => Some((*ts_ns, memory.clone())),
                _ => None,
            })
            .unwrap();
        assert_eq!(
            reset,
            (expected_ns, BTreeMap::new()),
            "reopened at {reopen_ns}"
        );
    }
}

#[test]
fn the_writer_checkpoints_by_itself_only_once_the_deltas_weigh_as_much_as_a_checkpoint() {
    // Every segment's preamble repeats the last checkpoint and the deltas since, and
    // the writer writes a checkpoint once 256 deltas follow the last one; but not
    // before the deltas weigh what a checkpoint of the memory weighs, or a large
    // memory changed a little at a time would be written whole every 256 changes.
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(1_000);
    let config = Config::new()
        .clock(Arc::new(clock.clone()))
        .checkpoint_interval_ns(None);
    let recorder = Recorder::open(dir.path(), config).unwrap();
    let w = recorder.working();
    // Small: 300 changes of one key, about 20 bytes each, pass 256 deltas.
    for i in 0..300 {
        w.set("n", json!(i)).unwrap();
        clock.advance_ns(1);
        recorder.record(&Event::new("a.x")).unwrap();
    }
    recorder.sync().unwrap();
    let checkpoints = |dir: &Path| {
        common::read_log(dir)
            .iter()
            .filter(|r| matches!(r, Rec::Checkpoint { .. }))
            .count()
    };
    assert_eq!(checkpoints(dir.path()), 1);
    // Large: a 200 KiB value (its delta alone passes 64 KiB and outweighs the last
    // checkpoint: one checkpoint), then 1000 changes of about 20 bytes (some 20 KB of
    // deltas, well under 200 KiB): no other checkpoint of the 200 KiB memory.
    w.set("big", json!("x".repeat(200 << 10))).unwrap();
    for i in 0..1000 {
        w.set("n", json!(i)).unwrap();
        clock.advance_ns(1);
        recorder.record(&Event::new("a.x")).unwrap();
    }
    recorder.sync().unwrap();
    assert_eq!(checkpoints(dir.path()), 2);
    recorder.close().unwrap();
    // The close's.
    assert_eq!(checkpoints(dir.path()), 3);
}
