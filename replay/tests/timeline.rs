//! Records by when they happened: pre-roll events are written when their incident is
//! triggered, seconds after they happened, and an event may reach the writer behind
//! later ones; yet a time range finds them, the output is in time order, the write time
//! stays visible, and a read bounded by `until` stops soon after it, at a watermark.

#![expect(clippy::unwrap_used, reason = "tests fail loudly on any error")]

mod common;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::Arc;

use blackbox::log::LogOptions;
use blackbox::{Config, Event, IncidentPolicy, ManualClock, Policy, Recorder, Tier};
use common::{blackbox, json_lines, ok, replay_json, s};
use serde_json::Value;

const MS: u64 = 1_000_000;
const SEC: u64 = 1_000 * MS;

fn u(v: &Value, field: &str) -> u64 {
    v[field]
        .as_u64()
        .unwrap_or_else(|| panic!("{field} in {v}"))
}

/// The demo's log (seed 7) and its incident marker.
fn demo_log(dir: &Path) -> Value {
    ok(&blackbox(&["demo", "--dir", s(dir), "--seed", "7"]));
    let incidents = replay_json(dir, &["--type", "incident"]);
    assert_eq!(incidents.len(), 1);
    incidents.into_iter().next().unwrap()
}

#[test]
fn a_time_range_before_a_trigger_finds_the_pre_roll_events_that_happened_in_it() {
    // A second of 200 Hz IMU data before the trigger once replayed as 1 record, not
    // 201: the range was matched against when records were written, and pre-roll events
    // are written at the trigger.
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("demo");
    let inc = demo_log(&dir);
    let trigger = u(&inc, "trigger_ts_ns");
    // The demo records sensor.imu at every 5 ms tick, summarized (so in the log only
    // around the incident), and the trigger falls on a tick: [T - 1.5 s, T - 0.5 s]
    // holds 201 ticks, bounds included.
    let (since, until) = (trigger - 1_500 * MS, trigger - 500 * MS);
    let range = [
        "--since",
        &since.to_string(),
        "--until",
        &until.to_string(),
        "--kind",
        "sensor.imu",
        "--type",
        "event",
    ];
    let events = replay_json(&dir, &range);
    assert_eq!(events.len(), 201);
    for (i, e) in events.iter().enumerate() {
        assert_eq!(e["tier"], "preroll", "{e}");
        assert_eq!(u(e, "ts_ns"), since + i as u64 * 5 * MS, "{e}");
        assert_eq!(u(e, "ts_ns"), u(e, "recorded_ns"));
        assert_eq!(
            blackbox_replay::parse_time(e["ts"].as_str().unwrap()).unwrap(),
            u(e, "ts_ns")
        );
        // Written at the trigger, later than it happened, and that stays visible.
        assert!(u(e, "written_ns") > u(e, "ts_ns"), "{e}");
        assert!(u(e, "written_ns") <= trigger, "{e}");
        assert_eq!(
            blackbox_replay::parse_time(e["written"].as_str().unwrap()).unwrap(),
            u(e, "written_ns")
        );
    }
    // The text view: 201 lines, each at its own time, in order, with the write delay.
    let mut args = vec!["replay", "--dir", s(&dir)];
    args.extend_from_slice(&range);
    let text = ok(&blackbox(&args));
    let times: Vec<&str> = text
        .lines()
        .map(|l| l.split_whitespace().nth(1).unwrap())
        .collect();
    assert_eq!(times.len(), 201, "{text}");
    let parsed: Vec<u64> = times
        .iter()
        .map(|t| blackbox_replay::parse_time(t).unwrap())
        .collect();
    assert!(parsed.windows(2).all(|w| w[0] + 5 * MS == w[1]), "{text}");
    assert!(text.lines().all(|l| l.contains("written +")), "{text}");
    // The export finds the same events. sensor.imu is summarized, so its events are
    // left out unless asked for (they are not a sample of the stream), and the manifest
    // says how many.
    let out = tmp.path().join("imu.jsonl");
    let mut args = vec!["export", "--dir", s(&dir), "--out", s(&out)];
    args.extend_from_slice(&range[..6]);
    ok(&blackbox(&args));
    assert_eq!(fs::read_to_string(&out).unwrap(), "");
    let manifest: Value = serde_json::from_str(
        &fs::read_to_string(tmp.path().join("imu.jsonl.manifest.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        manifest["excluded"]["sensor.imu"]["rows"], 201,
        "{manifest}"
    );
    args.push("--include-unweighted");
    ok(&blackbox(&args));
    let rows = json_lines(&fs::read_to_string(&out).unwrap());
    assert_eq!(rows.len(), 201);
    assert!(rows.iter().all(|r| r["weight"] == 1.0));
}

#[test]
fn a_window_around_an_incident_comes_back_in_the_order_things_happened() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("demo");
    let inc = demo_log(&dir);
    let trigger = u(&inc, "trigger_ts_ns");
    let (from, to) = (u(&inc, "preroll_start_ns"), u(&inc, "postroll_end_ns"));
    let window = ["--since", &from.to_string(), "--until", &to.to_string()];
    let sorted = replay_json(&dir, &window);
    let mut args = window.to_vec();
    args.push("--log-order");
    let logged = replay_json(&dir, &args);
    // The same records, once by time and once by seq.
    let key = |r: &Value| (u(r, "ts_ns"), u(r, "seq"));
    let mut by_time = logged.clone();
    by_time.sort_by_key(key);
    assert_eq!(sorted, by_time);
    assert!(
        logged.windows(2).all(|w| u(&w[0], "seq") < u(&w[1], "seq")),
        "--log-order is by seq"
    );
    assert_ne!(
        sorted, logged,
        "the pre-roll is out of time order in the log"
    );
    for r in &sorted {
        assert!((from..=to).contains(&u(r, "ts_ns")), "{r}");
    }
    // Every IMU tick of the window is there: 401 from T - 2 s to T (the pre-roll, both
    // ends included) and 199 after T and before T + 1 s (the post-roll).
    let imu: Vec<&Value> = sorted
        .iter()
        .filter(|r| r["type"] == "event" && r["kind"] == "sensor.imu")
        .collect();
    let pre = imu.iter().filter(|r| r["tier"] == "preroll").count();
    let post = imu.iter().filter(|r| r["tier"] == "postroll").count();
    assert_eq!((pre, post, imu.len()), (401, 199, 600));
    let ticks: Vec<u64> = imu.iter().map(|r| u(r, "ts_ns")).collect();
    let expected: Vec<u64> = (0..600).map(|i| trigger - 2 * SEC + i * 5 * MS).collect();
    assert_eq!(ticks, expected);
}

/// A log of two incidents on a manual clock, in small segments: events of `sensor.x`
/// (summarized, so written only around incidents) every 10 ms for 20 s, triggers at
/// 5 s and 15 s, 1 s of pre-roll and 100 ms of post-roll.
fn two_incidents(dir: &Path) -> u64 {
    let t0 = 1_767_323_045 * SEC;
    let clock = ManualClock::new(t0);
    let policy = Policy::builder()
        .rule("sensor.*", Tier::Summary { window_ns: SEC })
        .incident(IncidentPolicy {
            preroll_ns: SEC,
            postroll_ns: 100 * MS,
            ..IncidentPolicy::new(&["failure.*"])
        })
        .build()
        .unwrap();
    let recorder = Recorder::open(
        dir,
        Config::new()
            .policy(policy)
            .clock(Arc::new(clock.clone()))
            .log_options(LogOptions::new().segment_bytes_max(4096))
            .checkpoint_interval_ns(None),
    )
    .unwrap();
    for i in 0..2_000u64 {
        clock.set_ns(t0 + i * 10 * MS);
        recorder
            .record(&Event::new("sensor.x").values(&[("i", i as f64)]))
            .unwrap();
        if i == 500 || i == 1_500 {
            recorder.record(&Event::new("failure.a")).unwrap();
        }
        if i % 50 == 0 {
            recorder.sync().unwrap();
        }
    }
    recorder.close().unwrap();
    t0
}

#[test]
fn a_read_bounded_by_until_stops_once_a_watermark_passed_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    let t0 = two_incidents(&dir);
    let incidents = replay_json(&dir, &["--type", "incident"]);
    assert_eq!(incidents.len(), 2);
    let until = t0 + 4_800 * MS;
    // Where the read must stop: at the first record written after `until` once an
    // accounting record said every event that happened by `until` is written.
    let watermark_seq = replay_json(&dir, &["--type", "accounting"])
        .iter()
        .find(|a| a["watermark_ns"].as_u64().is_some_and(|w| w > until))
        .map(|a| u(a, "seq"))
        .unwrap();
    let reader = blackbox::LogReader::open(&dir).unwrap();
    let stop = reader
        .records(blackbox::Seq(watermark_seq)..)
        .unwrap()
        .map(|r| r.unwrap())
        .find(|r| r.ts_ns() > until)
        .unwrap()
        .seq()
        .0;
    // Damage a segment after that point and before the second incident: a read that
    // goes on past it fails on it.
    let segments = blackbox_log::list_segments(&dir).unwrap();
    let victim = segments
        .iter()
        .find(|seg| seg.first_seq > stop + 1)
        .unwrap();
    assert!(victim.first_seq < u(&incidents[1], "trigger_seq"));
    fs::set_permissions(&victim.path, fs::Permissions::from_mode(0o600)).unwrap();
    let mut bytes = fs::read(&victim.path).unwrap();
    let at = bytes.len() / 2;
    bytes[at] ^= 0x5a;
    fs::write(&victim.path, &bytes).unwrap();

    // 4.5 s .. 4.8 s: before the first trigger (5 s), inside its pre-roll. The events
    // are written at the trigger, past `until`; the read stops after the watermark,
    // before the damage.
    let since = t0 + 4_500 * MS;
    let events = replay_json(
        &dir,
        &[
            "--since",
            &since.to_string(),
            "--until",
            &until.to_string(),
            "--type",
            "event",
        ],
    );
    let times: Vec<u64> = events.iter().map(|r| u(r, "ts_ns")).collect();
    let expected: Vec<u64> = (450..=480).map(|i| t0 + i * 10 * MS).collect();
    assert_eq!(times, expected);
    assert!(events.iter().all(|r| r["tier"] == "preroll"));
    // A read of the same range that goes on to the log's end meets the damage.
    let err = common::fails(&blackbox(&[
        "replay",
        "--dir",
        s(&dir),
        "--since",
        &since.to_string(),
    ]));
    assert!(err.contains("corrupt"), "{err}");
}

/// A manual clock that can hold one named thread inside `now_ns`, after it read the
/// time: that thread's event is stamped, then held back from the writer until
/// `release`.
#[derive(Debug, Clone)]
struct HoldingClock {
    time: ManualClock,
    state: Arc<(std::sync::Mutex<Hold>, std::sync::Condvar)>,
}

#[derive(Debug, Default)]
struct Hold {
    thread: Option<String>,
    waiting: bool,
}

impl HoldingClock {
    fn new(start_ns: u64) -> HoldingClock {
        HoldingClock {
            time: ManualClock::new(start_ns),
            state: Arc::default(),
        }
    }

    /// Holds the thread named `name` at its next clock reading.
    fn hold(&self, name: &str) {
        self.state.0.lock().unwrap().thread = Some(name.to_owned());
    }

    /// Waits until the held thread is inside `now_ns`.
    fn wait_held(&self) {
        let (lock, cvar) = &*self.state;
        let mut s = lock.lock().unwrap();
        while !s.waiting {
            let (next, timeout) = cvar
                .wait_timeout(s, std::time::Duration::from_secs(10))
                .unwrap();
            assert!(!timeout.timed_out(), "the thread never reached the clock");
            s = next;
        }
    }

    fn release(&self) {
        let (lock, cvar) = &*self.state;
        lock.lock().unwrap().thread = None;
        cvar.notify_all();
    }
}

impl blackbox::Clock for HoldingClock {
    fn now_ns(&self) -> u64 {
        let t = self.time.now_ns();
        let (lock, cvar) = &*self.state;
        let mut s = lock.lock().unwrap();
        if s.thread.is_some() && s.thread.as_deref() == std::thread::current().name() {
            s.waiting = true;
            cvar.notify_all();
            while s.thread.is_some() {
                s = cvar.wait(s).unwrap();
            }
            s.waiting = false;
        }
        t
    }
}

/// Records `kind` at every 10 ms step of `[from_ms, to_ms)` after `t0`, syncing every
/// 50 events.
fn record_steps(
    recorder: &Recorder,
    clock: &HoldingClock,
    t0: u64,
    kind: &str,
    from_ms: u64,
    to_ms: u64,
) {
    for ms in (from_ms..to_ms).step_by(10) {
        clock.time.set_ns(t0 + ms * MS);
        recorder.record(&Event::new(kind)).unwrap();
        if ms % 500 == 0 {
            recorder.sync().unwrap();
        }
    }
}

/// The times the events `query` selects happened at, in the read's order, and how many
/// records the read took from the log.
fn happened(dir: &Path, query: &blackbox_replay::Query) -> (Vec<u64>, u64) {
    let mut replay = blackbox_replay::Replay::open(dir, query).unwrap();
    let times = replay.by_ref().map(|r| r.unwrap().happened_ns()).collect();
    (times, replay.records_read())
}

/// Records an event of `kind` from a thread of its own, held by `clock` right after it
/// read the time `at_ns`; returns once it is held.
fn held_event(
    clock: &HoldingClock,
    recorder: &Arc<Recorder>,
    kind: &'static str,
    at_ns: u64,
) -> std::thread::JoinHandle<()> {
    clock.time.set_ns(at_ns);
    clock.hold("late");
    let rec = Arc::clone(recorder);
    let handle = std::thread::Builder::new()
        .name("late".to_owned())
        .spawn(move || rec.record(&Event::new(kind)).unwrap())
        .unwrap();
    clock.wait_held();
    handle
}

/// A recorder on `clock` writing an accounting record (and so a watermark) every
/// `accounting_ms` of it.
fn holding_recorder(
    dir: &Path,
    clock: &HoldingClock,
    policy: Policy,
    accounting_ms: u64,
) -> Arc<Recorder> {
    Arc::new(
        Recorder::open(
            dir,
            Config::new()
                .policy(policy)
                .accounting_interval_ns(accounting_ms * MS)
                .clock(Arc::new(clock.clone()))
                .log_options(LogOptions::new().segment_bytes_max(64 << 10))
                .checkpoint_interval_ns(None),
        )
        .unwrap(),
    )
}

#[test]
fn until_finds_a_pre_roll_event_that_reached_the_writer_after_its_trigger() {
    // Guards a past bug: a read bounded by `until` stopped at the first incident marker
    // after it, but an event stamped inside the trigger's pre-roll that reaches the
    // writer after the trigger is written after the marker (as pre-roll): it was missed.
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    let t0 = 1_767_323_045 * SEC;
    let clock = HoldingClock::new(t0);
    let policy = Policy::builder()
        .rule("sensor.*", Tier::Summary { window_ns: SEC })
        .incident(IncidentPolicy {
            preroll_ns: 2 * SEC,
            postroll_ns: 100 * MS,
            ..IncidentPolicy::new(&["failure.*"])
        })
        .build()
        .unwrap();
    // Accounting records every 1 s: those written before the trigger come while the
    // pre-roll ring holds what the trigger will write, and their watermarks stay below it.
    let recorder = holding_recorder(&dir, &clock, policy, 1_000);
    record_steps(&recorder, &clock, t0, "sensor.x", 1_000, 3_010);
    // Stamped at 3.005 s, held back from the writer until well after the trigger.
    let late = held_event(&clock, &recorder, "sensor.x", t0 + 3_005 * MS);
    record_steps(&recorder, &clock, t0, "sensor.x", 3_010, 4_000);
    clock.time.set_ns(t0 + 4_000 * MS);
    recorder.record(&Event::new("failure.a")).unwrap();
    record_steps(&recorder, &clock, t0, "sensor.x", 4_010, 20_000);
    clock.release();
    late.join().unwrap();
    record_steps(&recorder, &clock, t0, "sensor.x", 20_000, 30_000);
    recorder.close().unwrap();

    // By hand: the pre-roll holds the events of [2 s, 4 s); up to 3.5 s, those of the
    // steps from 2 s to 3.5 s, and the late one.
    let query = blackbox_replay::Query::new()
        .types([blackbox_replay::RecordType::Event])
        .until(t0 + 3_500 * MS);
    let (mut times, _) = happened(&dir, &query);
    times.sort_unstable();
    let mut want: Vec<u64> = (2_000..=3_500).step_by(10).map(|ms| t0 + ms * MS).collect();
    want.push(t0 + 3_005 * MS);
    want.sort_unstable();
    assert_eq!(times, want);
}

#[test]
fn until_finds_an_event_held_back_behind_later_events_of_other_threads() {
    // An event stamped at 3.005 s by one thread reaches the writer after the events
    // other threads stamped up to 20 s: a read until 3.5 s still returns it, and every
    // event that happened by then, whatever the watermarks written meanwhile.
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    let t0 = 1_767_323_045 * SEC;
    let clock = HoldingClock::new(t0);
    let recorder = holding_recorder(&dir, &clock, Policy::builder().build().unwrap(), 5_000);
    record_steps(&recorder, &clock, t0, "robot.a", 0, 3_000);
    let late = held_event(&clock, &recorder, "robot.late", t0 + 3_005 * MS);
    let others: Vec<_> = (0..2u64)
        .map(|i| {
            let rec = Arc::clone(&recorder);
            let clock = clock.clone();
            std::thread::spawn(move || {
                for ms in (3_010..20_000).step_by(10) {
                    if i == 0 {
                        clock.time.set_ns(t0 + ms * MS);
                    }
                    rec.record(&Event::new("robot.b")).unwrap();
                    if ms % 500 == 0 {
                        rec.sync().unwrap();
                    }
                }
            })
        })
        .collect();
    for t in others {
        t.join().unwrap();
    }
    clock.release();
    late.join().unwrap();
    record_steps(&recorder, &clock, t0, "robot.a", 20_000, 30_000);
    recorder.close().unwrap();

    let until = t0 + 3_500 * MS;
    let query = blackbox_replay::Query::new()
        .types([blackbox_replay::RecordType::Event])
        .until(until);
    let (times, _) = happened(&dir, &query);
    assert!(
        times.contains(&(t0 + 3_005 * MS)),
        "the held event is missing"
    );
    // Every event that happened by `until`, as a read of the whole log finds them.
    let everything = blackbox_replay::Query::new().types([blackbox_replay::RecordType::Event]);
    let (all, _) = happened(&dir, &everything);
    let mut by_hand: Vec<u64> = all.into_iter().filter(|&t| t <= until).collect();
    by_hand.sort_unstable();
    let mut times = times;
    times.sort_unstable();
    assert_eq!(times, by_hand);
}

#[test]
fn a_read_until_a_time_stops_at_the_first_watermark_past_it() {
    // Guards a past bug's fix staying cheap: a read bounded by `until` reads on past it
    // only to the first accounting record whose watermark is past `until` (written
    // every 5 s by the recorder's clock), not to the end of a long log.
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    let t0 = 1_767_323_045 * SEC;
    let clock = HoldingClock::new(t0);
    let recorder = holding_recorder(&dir, &clock, Policy::builder().build().unwrap(), 5_000);
    record_steps(&recorder, &clock, t0, "robot.a", 0, 120_000);
    recorder.close().unwrap();

    let until = t0 + 3_500 * MS;
    let query = blackbox_replay::Query::new()
        .types([blackbox_replay::RecordType::Event])
        .until(until);
    let (times, read) = happened(&dir, &query);
    let want: Vec<u64> = (0..=3_500).step_by(10).map(|ms| t0 + ms * MS).collect();
    assert_eq!(times, want);
    // The log's own stamps: the read ends within the records stamped up to 3.5 s plus
    // two accounting intervals (10 s), far from its 12 000 events.
    let reader = blackbox::LogReader::open(&dir).unwrap();
    let total = reader.records(blackbox::Seq(0)..).unwrap().count() as u64;
    let bound = reader
        .records(blackbox::Seq(0)..)
        .unwrap()
        .take_while(|r| r.as_ref().unwrap().ts_ns() <= until + 10 * SEC)
        .count() as u64;
    assert!(total > 12_000, "{total}");
    assert!(
        read <= bound,
        "read {read} records, bound {bound} of {total}"
    );
}

#[test]
fn until_finds_pre_roll_events_the_ring_held_when_a_watermark_was_written() {
    // Events the pre-roll ring holds are written only if a trigger comes: a watermark
    // written meanwhile stays below the oldest of them, so a read until 3.5 s goes on
    // past the accounting records of 4 s to the trigger's pre-roll, written at 4.5 s.
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    let t0 = 1_767_323_045 * SEC;
    let clock = HoldingClock::new(t0);
    let policy = Policy::builder()
        .rule("sensor.*", Tier::Summary { window_ns: SEC })
        .incident(IncidentPolicy {
            preroll_ns: 2 * SEC,
            postroll_ns: 100 * MS,
            ..IncidentPolicy::new(&["failure.*"])
        })
        .build()
        .unwrap();
    let recorder = holding_recorder(&dir, &clock, policy, 1_000);
    record_steps(&recorder, &clock, t0, "sensor.x", 0, 4_500);
    clock.time.set_ns(t0 + 4_500 * MS);
    recorder.record(&Event::new("failure.a")).unwrap();
    record_steps(&recorder, &clock, t0, "sensor.x", 4_510, 20_000);
    recorder.close().unwrap();

    // Accounting records with a watermark were written before the trigger.
    let before_trigger = replay_json(&dir, &["--type", "accounting"])
        .into_iter()
        .filter(|a| u(a, "ts_ns") < t0 + 4_500 * MS && a["watermark_ns"].is_u64())
        .count();
    assert!(before_trigger >= 2, "{before_trigger}");
    // By hand: the pre-roll holds the steps of [2.5 s, 4.5 s); up to 3.5 s, 101 of them.
    let query = blackbox_replay::Query::new()
        .types([blackbox_replay::RecordType::Event])
        .until(t0 + 3_500 * MS);
    let (times, _) = happened(&dir, &query);
    let want: Vec<u64> = (2_500..=3_500).step_by(10).map(|ms| t0 + ms * MS).collect();
    assert_eq!(times, want);
}

#[test]
fn reading_in_time_order_holds_a_bounded_number_of_records_however_many_came_late() {
    // Guards a past bug: the first pass of a read in time order kept every record that
    // reached the log out of time order, decoded (92 MB for 100 incidents of 2000
    // pre-roll events). Now it keeps 16 bytes per such record and reads them again.
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    let t0 = 1_767_323_045 * SEC;
    let clock = ManualClock::new(t0);
    let policy = Policy::builder()
        .rule("sensor.*", Tier::Summary { window_ns: SEC })
        .incident(IncidentPolicy {
            preroll_ns: 500 * MS,
            postroll_ns: 10 * MS,
            ..IncidentPolicy::new(&["failure.*"])
        })
        .build()
        .unwrap();
    let recorder = Recorder::open(
        &dir,
        Config::new()
            .policy(policy)
            .clock(Arc::new(clock.clone()))
            .log_options(LogOptions::new().segment_bytes_max(256 << 10))
            .checkpoint_interval_ns(None),
    )
    .unwrap();
    // 20 incidents, one every 2 s, each with 500 ms of pre-roll at 1 kHz, written
    // behind the ticks of that half second.
    for ms in 0..40_000u64 {
        clock.set_ns(t0 + ms * MS);
        recorder
            .record(&Event::new("sensor.x").values(&[("ms", ms as f64)]))
            .unwrap();
        // Written as it happens: the pre-roll written at a trigger comes after it.
        if ms % 5 == 0 {
            recorder.record(&Event::new("robot.tick")).unwrap();
        }
        if ms % 2_000 == 1_999 {
            recorder.record(&Event::new("failure.a")).unwrap();
        }
    }
    recorder.close().unwrap();

    // By hand: the log order sorted by (happened, seq).
    let log_order = blackbox_replay::Query::new().order(blackbox_replay::Order::Log);
    let mut want: Vec<(u64, u64)> = blackbox_replay::Replay::open(&dir, &log_order)
        .unwrap()
        .map(|r| {
            let r = r.unwrap();
            (r.happened_ns(), r.seq)
        })
        .collect();
    want.sort_unstable();
    // The command's default order.
    let happened = blackbox_replay::Query::new().order(blackbox_replay::Order::Happened);
    let mut replay = blackbox_replay::Replay::open(&dir, &happened).unwrap();
    let got: Vec<(u64, u64)> = replay
        .by_ref()
        .map(|r| {
            let r = r.unwrap();
            (r.happened_ns(), r.seq)
        })
        .collect();
    assert_eq!(got, want);
    let late = want.windows(2).filter(|w| w[1].1 < w[0].1).count();
    assert!(late >= 20, "{late} runs out of log order");
    let records = want.len();
    assert!(records > 15_000, "{records} records");
    assert!(
        replay.records_held_max() <= 2,
        "held {} decoded records at once",
        replay.records_held_max()
    );
}

#[test]
fn until_finds_every_event_the_log_holds_in_range_when_the_clock_goes_back() {
    // Guards a past bug: when the clock stepped back, an event was stamped below a
    // watermark already written, and a read bounded by `until` stopped before it. The
    // recorder's stamps never go below a watermark it wrote, within a session and
    // across a restart whose clock is behind: every event the log holds up to `until`
    // is found, as the whole log read in seq order says.
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    let t0 = 1_767_323_045 * SEC;
    let clock = ManualClock::new(t0);
    let open = || {
        Recorder::open(
            &dir,
            Config::new()
                .accounting_interval_ns(SEC)
                .clock(Arc::new(clock.clone()))
                .checkpoint_interval_ns(None),
        )
        .unwrap()
    };
    let steps = |recorder: &Recorder, kind: &str, from_ms: u64, to_ms: u64| {
        for ms in (from_ms..to_ms).step_by(10) {
            clock.set_ns(t0 + ms * MS);
            recorder.record(&Event::new(kind)).unwrap();
            if ms % 500 == 0 {
                recorder.sync().unwrap();
            }
        }
        recorder.sync().unwrap();
    };
    let recorder = open();
    steps(&recorder, "robot.a", 0, 10_000);
    // The clock steps back 8 s, then goes on.
    steps(&recorder, "robot.back", 2_000, 6_000);
    recorder.close().unwrap();
    // A restart with the clock behind the log's end.
    let recorder = open();
    steps(&recorder, "robot.restart", 1_000, 12_000);
    recorder.close().unwrap();

    let events = || blackbox_replay::Query::new().types([blackbox_replay::RecordType::Event]);
    // The whole log in seq order, its events that happened by `until`, by hand.
    let whole = events().order(blackbox_replay::Order::Log);
    let (all, _) = happened(&dir, &whole);
    for until_ms in [1_500, 3_500, 7_000, 9_995, 11_000] {
        let until = t0 + until_ms * MS;
        let mut want: Vec<u64> = all.iter().copied().filter(|&t| t <= until).collect();
        want.sort_unstable();
        let (mut times, _) = happened(&dir, &events().until(until));
        times.sort_unstable();
        assert_eq!(times, want, "until {until_ms} ms");
        // And `blackbox replay --until`, the same read from the command line.
        let mut cli: Vec<u64> =
            replay_json(&dir, &["--until", &until.to_string(), "--type", "event"])
                .iter()
                .map(|e| u(e, "recorded_ns"))
                .collect();
        cli.sort_unstable();
        assert_eq!(cli, want, "replay --until {until_ms} ms");
    }
    assert!(all.len() > 2_000, "{}", all.len());
}
