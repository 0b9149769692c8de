//! How `blackbox replay --json` prints a summary whose sum left the `f64` range.

#![expect(clippy::unwrap_used, reason = "tests fail loudly on any error")]

mod common;

use std::sync::Arc;

use blackbox::{Config, Event, ManualClock, Policy, Recorder, Tier};
use common::replay_json;
use serde_json::{Value, json};

const SEC: u64 = 1_000_000_000;
const T0: u64 = 1_700_000_000 * SEC;

/// Guards the summary's overflowed sum in replay's JSON (issue 9, point 20): a sum of
/// finite values past `f64::MAX` is infinite, which JSON cannot hold, so it printed as a
/// bare `null`, indistinguishable from a sum of infinite values. It is `null` with
/// `"sum_overflow": true`, and its mean is still given; a sum that fits, or one that is
/// infinite because a value was, carries no such flag.
#[test]
fn a_summary_sum_past_f64_max_prints_as_null_with_sum_overflow() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("flight");
    let clock = ManualClock::new(T0);
    let policy = Policy::builder()
        .rule("sensor.*", Tier::Summary { window_ns: SEC })
        .build()
        .unwrap();
    let config = Config::new().clock(Arc::new(clock.clone())).policy(policy);
    let rec = Recorder::open(&dir, config).unwrap();
    for (up, down, small, wild) in [
        (f64::MAX, -f64::MAX, 1.0, 1.0),
        (f64::MAX, -f64::MAX, 2.0, f64::INFINITY),
    ] {
        rec.record(&Event::new("sensor.big").values(&[
            ("up", up),
            ("down", down),
            ("small", small),
            ("wild", wild),
        ]))
        .unwrap();
    }
    rec.close().unwrap();

    let summaries = replay_json(&dir, &["--type", "summary"]);
    assert_eq!(summaries.len(), 1, "{summaries:?}");
    let values = &summaries[0]["values"];
    let value = |name: &str| values[name].as_object().unwrap().clone();
    // By hand: MAX + MAX is past the range; the mean of two MAX is MAX.
    let up = value("up");
    assert_eq!(up["sum"], Value::Null, "{up:?}");
    assert_eq!(up.get("sum_overflow"), Some(&json!(true)), "{up:?}");
    assert_eq!(up["mean"], json!(f64::MAX), "{up:?}");
    let down = value("down");
    assert_eq!(down["sum"], Value::Null, "{down:?}");
    assert_eq!(down.get("sum_overflow"), Some(&json!(true)), "{down:?}");
    assert_eq!(down["mean"], json!(-f64::MAX), "{down:?}");
    let small = value("small");
    assert_eq!((&small["sum"], &small["mean"]), (&json!(3.0), &json!(1.5)));
    assert!(!small.contains_key("sum_overflow"), "{small:?}");
    // Infinite because a value was: not an overflow.
    let wild = value("wild");
    assert_eq!(wild["sum"], Value::Null, "{wild:?}");
    assert!(!wild.contains_key("sum_overflow"), "{wild:?}");
}
