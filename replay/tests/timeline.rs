//! Records by when they happened: pre-roll events are written when their incident is
//! triggered, seconds after they happened, yet a time range finds them, the output is
//! in time order, and the write time stays visible.

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
fn a_read_bounded_by_until_stops_at_the_first_incident_after_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    let t0 = two_incidents(&dir);
    let incidents = replay_json(&dir, &["--type", "incident"]);
    assert_eq!(incidents.len(), 2);
    let first_marker = u(&incidents[0], "seq");
    // Damage a segment after the first incident's marker and before the second's: a
    // read that goes on past the first marker fails on it.
    let segments = blackbox_log::list_segments(&dir).unwrap();
    let victim = segments
        .iter()
        .find(|seg| seg.first_seq > first_marker + 10)
        .unwrap();
    assert!(victim.first_seq < u(&incidents[1], "trigger_seq"));
    fs::set_permissions(&victim.path, fs::Permissions::from_mode(0o600)).unwrap();
    let mut bytes = fs::read(&victim.path).unwrap();
    let at = bytes.len() / 2;
    bytes[at] ^= 0x5a;
    fs::write(&victim.path, &bytes).unwrap();

    // 4.5 s .. 4.8 s: before the first trigger (5 s), inside its pre-roll. The events
    // are written at the trigger, past `until`; the read stops at its marker, before
    // the damage.
    let (since, until) = (t0 + 4_500 * MS, t0 + 4_800 * MS);
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
