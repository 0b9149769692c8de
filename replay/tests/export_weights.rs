//! Export weights: over a whole-log export, per kind, the weights add up to the events
//! the recorder saw, whatever the policy, the incidents and the sessions; kinds whose
//! events were summarized or dropped are left out by default and the manifest says so.
//!
//! Long mode: `PROPTEST_CASES=500 cargo test -p blackbox-replay --release --test
//! export_weights`.

#![expect(clippy::unwrap_used, reason = "tests fail loudly on any error")]

mod common;

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;
use std::sync::Arc;

use blackbox::log::LogOptions;
use blackbox::{Config, Event, IncidentPolicy, ManualClock, Policy, Recorder, Sampling, Tier};
use blackbox_replay::{ExportOptions, Query};
use common::{blackbox, json_lines, ok, s};
use proptest::prelude::*;
use serde_json::Value;

const T0: u64 = 1_767_323_045_000_000_000;
const MS: u64 = 1_000_000;

fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Per kind, the rows and the sum of the weights of an export file (of weighted kinds
/// only, unless `unweighted`).
fn sums(path: &Path, unweighted: bool) -> BTreeMap<String, (u64, f64)> {
    let mut out: BTreeMap<String, (u64, f64)> = BTreeMap::new();
    for row in json_lines(&fs::read_to_string(path).unwrap()) {
        let w = row["weight"].as_f64().unwrap();
        assert!(w >= 0.0, "{row}");
        if row["tier"] == "preroll" && !unweighted {
            assert_eq!(w, 0.0, "a pre-roll copy of a sampled-out event: {row}");
        }
        let e = out
            .entry(row["kind"].as_str().unwrap().to_owned())
            .or_default();
        e.0 += 1;
        e.1 += w;
    }
    out
}

#[test]
fn the_demos_export_weights_add_up_to_what_each_kind_saw() {
    // The demo's export once gave trajectory.arm (sampled 1 in 10) 8.8 % more weight
    // than it saw: inside the pre-roll, both its samples (weight 10) and the recovered
    // sampled-out events (weight 1) counted. And sensor.imu and debug.tick appeared
    // only inside the incident, at weight 1.
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("demo");
    ok(&blackbox(&["demo", "--dir", s(&dir), "--seed", "7"]));
    let out = tmp.path().join("all.jsonl");
    let said = ok(&blackbox(&["export", "--dir", s(&dir), "--out", s(&out)]));
    assert!(said.contains("left out"), "{said}");
    let stats: Value =
        serde_json::from_str(&ok(&blackbox(&["stats", "--dir", s(&dir), "--json"]))).unwrap();
    let got = sums(&out, false);
    let manifest: Value = serde_json::from_str(
        &fs::read_to_string(tmp.path().join("all.jsonl.manifest.json")).unwrap(),
    )
    .unwrap();
    for (kind, c) in stats["kinds"].as_object().unwrap() {
        let seen = c["seen"].as_u64().unwrap();
        if c["summarized"].as_u64().unwrap() > 0 || c["dropped"].as_u64().unwrap() > 0 {
            assert!(!got.contains_key(kind), "{kind} is left out");
            assert!(
                manifest["excluded"][kind]["reason"]
                    .as_str()
                    .unwrap()
                    .contains("summarized or dropped")
                    || manifest["excluded"][kind]["reason"]
                        .as_str()
                        .unwrap()
                        .contains("around incidents"),
                "{kind}: {manifest}"
            );
            continue;
        }
        let (rows, sum) = got.get(kind).copied().unwrap_or_default();
        assert_eq!(sum, seen as f64, "{kind}: {rows} rows");
        assert_eq!(manifest["kinds"][kind]["weight_sum"], sum, "{kind}");
        assert_eq!(manifest["kinds"][kind]["rows"], rows, "{kind}");
    }
    assert!(got.contains_key("trajectory.arm"));
    for kind in ["sensor.imu", "debug.tick"] {
        assert!(
            manifest["excluded"][kind]["rows"].as_u64().unwrap() > 0,
            "{kind}"
        );
    }
    // Asked for, they come with weight 1.
    ok(&blackbox(&[
        "export",
        "--dir",
        s(&dir),
        "--out",
        s(&out),
        "--include-unweighted",
    ]));
    let all = sums(&out, true);
    assert_eq!(
        all["sensor.imu"].1, all["sensor.imu"].0 as f64,
        "weight 1 each"
    );
}

/// A kind's tier in a generated policy.
#[derive(Debug, Clone, Copy)]
enum Spec {
    Full,
    Every(u64),
    Rate(f64),
    Summary(u64),
    Drop,
}

impl Spec {
    fn tier(self) -> Tier {
        match self {
            Spec::Full => Tier::Full,
            Spec::Every(n) => Tier::Sample(Sampling::Every(n)),
            Spec::Rate(p) => Tier::Sample(Sampling::Rate(p)),
            Spec::Summary(ms) => Tier::Summary { window_ns: ms * MS },
            Spec::Drop => Tier::Drop,
        }
    }
}

fn spec() -> impl Strategy<Value = Spec> {
    prop_oneof![
        Just(Spec::Full),
        (1u64..12).prop_map(Spec::Every),
        prop::sample::select(vec![0.1, 0.25, 0.3, 0.5, 0.75]).prop_map(Spec::Rate),
        (100u64..2_000).prop_map(Spec::Summary),
        Just(Spec::Drop),
    ]
}

/// One generated recording: the kinds' tiers, the incident policy, the events (a kind
/// index, or the trigger, and the milliseconds since the previous one), where sessions
/// end, and the accounting interval.
#[derive(Debug, Clone)]
struct Case {
    specs: Vec<Spec>,
    incident: Option<(u64, u64)>,
    events: Vec<(Option<usize>, u64)>,
    breaks: Vec<usize>,
    accounting_ms: u64,
    /// Small segments: many segment preambles (dictionary and accounting snapshot).
    small_segments: bool,
}

fn case() -> impl Strategy<Value = Case> {
    (
        prop::collection::vec(spec(), 1..6),
        prop::option::of((50u64..3_000, 0u64..2_000)),
        prop::collection::vec((0usize..100, 0u64..30), 20..500),
        prop::collection::vec(0usize..500, 0..3),
        50u64..3_000,
        any::<bool>(),
    )
        .prop_map(
            |(specs, incident, raw, breaks, accounting_ms, small_segments)| {
                let n = specs.len();
                let events = raw
                    .into_iter()
                    .map(|(k, gap)| (if k == 0 { None } else { Some(k % n) }, gap))
                    .collect();
                Case {
                    specs,
                    incident,
                    events,
                    breaks,
                    accounting_ms,
                    small_segments,
                }
            },
        )
}

fn kind(i: usize) -> String {
    format!("k{i}.e")
}

fn open(dir: &Path, c: &Case, clock: &ManualClock) -> Recorder {
    let mut policy = Policy::builder();
    for (i, spec) in c.specs.iter().enumerate() {
        policy = policy.rule(&kind(i), spec.tier());
    }
    if let Some((pre, post)) = c.incident {
        policy = policy.incident(IncidentPolicy {
            preroll_ns: pre * MS,
            postroll_ns: post * MS,
            ..IncidentPolicy::new(&["failure.*"])
        });
    }
    Recorder::open(
        dir,
        Config::new()
            .policy(policy.build().unwrap())
            .clock(Arc::new(clock.clone()))
            .accounting_interval_ns(c.accounting_ms * MS)
            .checkpoint_interval_ns(None)
            .log_options(LogOptions::new().segment_bytes_max(if c.small_segments {
                4096
            } else {
                64 << 20
            })),
    )
    .unwrap()
}

proptest! {
    // 16 cases by default; the long mode sets PROPTEST_CASES.
    #![proptest_config(ProptestConfig {
        cases: cases(16),
        ..ProptestConfig::default()
    })]

    /// Guards the export's weights: per kind, over a whole-log export, they add up to
    /// `seen` of the recorder's own accounting, and to the events this test recorded
    /// (a model independent of both), for every full or sampled kind; kinds whose
    /// events were summarized or dropped are left out and listed in the manifest.
    #[test]
    fn whole_log_export_weights_add_up_to_what_was_seen(c in case()) {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("log");
        let clock = ManualClock::new(T0);
        let mut recorder = open(&dir, &c, &clock);
        let mut recorded: BTreeMap<String, u64> = BTreeMap::new();
        let mut now = T0;
        for (i, (k, gap)) in c.events.iter().enumerate() {
            if c.breaks.contains(&i) {
                recorder.close().unwrap();
                drop(recorder);
                recorder = open(&dir, &c, &clock);
            }
            now += gap * MS;
            clock.set_ns(now);
            let name = k.map_or_else(|| "failure.x".to_owned(), kind);
            recorder.record(&Event::new(&name)).unwrap();
            *recorded.entry(name).or_default() += 1;
            if i % 64 == 0 {
                // Let the writer's timers see the clock move (accounting records).
                recorder.sync().unwrap();
            }
        }
        recorder.close().unwrap();
        drop(recorder);

        let out = tmp.path().join("all.jsonl");
        let manifest = blackbox_replay::export_jsonl(
            &dir,
            &Query::new(),
            &out,
            &ExportOptions::default(),
            &mut |_| {},
        )
        .unwrap();
        let stats = blackbox_replay::stats(&dir, None).unwrap();
        let got = sums(&out, false);
        prop_assert!(manifest.unreconciled.is_empty(), "{:?}", manifest.unreconciled);
        for (name, &n) in &recorded {
            let acc = stats.kinds.get(name).copied().unwrap_or_default();
            prop_assert_eq!(acc.seen, n, "{} seen", name);
            let spec = name
                .strip_prefix('k')
                .and_then(|r| r.strip_suffix(".e"))
                .and_then(|i| i.parse::<usize>().ok())
                .map_or(Spec::Full, |i| c.specs[i]);
            let unweighted = acc.summarized > 0 || acc.dropped > 0;
            if unweighted {
                prop_assert!(matches!(spec, Spec::Summary(_) | Spec::Drop), "{} {:?}", name, spec);
                prop_assert!(!got.contains_key(name), "{} left out", name);
                continue;
            }
            let (rows, sum) = got.get(name).copied().unwrap_or_default();
            // Sampled-out events with no sample row after them: nothing can stand for
            // them, and the manifest says how many.
            let missing = manifest.unrepresented.get(name).copied().unwrap_or(0);
            prop_assert!(missing == 0 || matches!(spec, Spec::Rate(_)), "{} {:?}", name, spec);
            let listed = manifest.per_kind.get(name).copied().unwrap_or_default();
            prop_assert_eq!(listed.rows, rows);
            prop_assert_eq!(listed.weight_sum, sum);
            let total = sum + missing as f64;
            match spec {
                Spec::Rate(_) => prop_assert!(
                    (total - n as f64).abs() <= 1e-9 * n as f64,
                    "{}: weights {} and {} unrepresented for {} events ({} rows)",
                    name, sum, missing, n, rows
                ),
                _ => prop_assert_eq!(total, n as f64, "{}: {} rows", name, rows),
            }
        }
        for (name, x) in &manifest.excluded {
            prop_assert!(x.rows > 0, "{}", name);
            prop_assert!(!got.contains_key(name));
        }
    }
}
