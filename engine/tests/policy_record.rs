//! The retention policy in force is in the log: every session writes it when it opens,
//! and every segment opens with it, so the records of any segment say which policy kept
//! them. Read back here through the library, record by record.

#![expect(clippy::unwrap_used, reason = "tests fail loudly on any error")]

mod common;

use std::sync::Arc;

use blackbox::log::LogOptions;
use blackbox::{Config, Event, IncidentPolicy, ManualClock, Policy, Recorder, Sampling, Tier};
use common::Rec;

const SEC: u64 = 1_000_000_000;
const T0: u64 = 1_700_000_000 * SEC;

fn config(clock: &ManualClock, policy: Policy) -> Config {
    Config::new()
        .clock(Arc::new(clock.clone()))
        .policy(policy)
        .log_options(LogOptions::new().segment_bytes_max(4096))
}

/// Two sessions under two policies, each rolling over several small segments: every
/// event's segment holds, before it, a policy record, and the last one before the event
/// reads back (through `Policy::from_toml_str`) as the policy the event's session was
/// opened with.
#[test]
fn every_event_is_preceded_in_its_segment_by_the_policy_that_kept_it() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let first = Policy::builder()
        .rule("debug.*", Tier::Drop)
        .rule("imu.*", Tier::Sample(Sampling::Every(3)))
        .build()
        .unwrap();
    let second = Policy::builder()
        .default_tier(Tier::Full)
        .rule("imu.*", Tier::Summary { window_ns: SEC })
        .incident(IncidentPolicy::new(&["fault.*"]))
        .build()
        .unwrap();
    // Session 0 writes events 0..400, session 1 events 400..800.
    for (session, policy) in [&first, &second].into_iter().enumerate() {
        let rec = Recorder::open(dir.path(), config(&clock, policy.clone())).unwrap();
        for i in 0..400u64 {
            clock.set_ns(T0 + (session as u64 * 1000 + i) * SEC / 10);
            let n = session as u64 * 400 + i;
            rec.record(
                &Event::new("cmd.move")
                    .json(&format!("{{\"n\":{n},\"pad\":\"{}\"}}", "x".repeat(40))),
            )
            .unwrap();
        }
        rec.close().unwrap();
    }

    let segments = blackbox::log::list_segments(dir.path()).unwrap();
    assert!(segments.len() >= 6, "{} segments", segments.len());
    let starts: Vec<u64> = segments.iter().map(|s| s.first_seq).collect();
    let recs = common::read_log(dir.path());
    let mut in_force: Option<Policy> = None;
    let mut events = 0;
    for r in &recs {
        if starts.contains(&r.seq()) {
            // A new segment: what came before it does not count.
            in_force = None;
        }
        match r {
            Rec::Policy { toml, .. } => in_force = Some(Policy::from_toml_str(toml).unwrap()),
            Rec::Event { payload, .. } => {
                let n: u64 = serde_json::from_slice::<serde_json::Value>(payload).unwrap()["n"]
                    .as_u64()
                    .unwrap();
                let expected = if n < 400 { &first } else { &second };
                assert_eq!(
                    in_force.as_ref(),
                    Some(expected),
                    "event {n} at seq {}",
                    r.seq()
                );
                events += 1;
            }
            _ => {}
        }
    }
    assert_eq!(events, 800);
}

/// A policy too large for one record is refused when the recorder opens, with a sentence
/// naming both sizes; nothing is written.
#[test]
fn a_policy_larger_than_a_record_is_refused_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let mut builder = Policy::builder();
    for i in 0..2000 {
        builder = builder.rule(&format!("kind{i}.{}", "x".repeat(60)), Tier::Drop);
    }
    let policy = builder.build().unwrap();
    let clock = ManualClock::new(T0);
    let config = config(&clock, policy).log_options(
        LogOptions::new()
            .segment_bytes_max(4096)
            .record_bytes_max(64 * 1024),
    );
    let config = config.event_bytes_max(1024);
    let err = Recorder::open(dir.path(), config).unwrap_err().to_string();
    assert!(
        err.contains("the policy is ") && err.contains("record_bytes_max 65536"),
        "{err}"
    );
    assert!(common::read_log(dir.path()).is_empty());
}
