//! Incident capture under concurrent producers: which events a trigger's pre-roll and
//! post-roll hold, whatever the threads' interleaving, and drop rules that keep their
//! events for the pre-roll.

#![expect(clippy::unwrap_used, reason = "tests fail loudly on any error")]
#![allow(
    clippy::cast_possible_truncation,
    reason = "test indices and counts are small"
)]

mod common;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use blackbox::policy::{IncidentPolicy, Policy, Sampling, Tier};
use blackbox::{Clock, Config, Event, ManualClock, Recorder};
use common::Rec;
use proptest::prelude::*;

/// A clock that moves one tick at every reading: no two readings are equal, and a
/// reading taken after another (by any thread) is larger. The producers' stamps can
/// then be bracketed by readings the test takes itself.
#[derive(Debug)]
struct TickClock {
    now: AtomicU64,
}

impl Default for TickClock {
    fn default() -> TickClock {
        TickClock {
            now: AtomicU64::new(1_000_000),
        }
    }
}

impl Clock for TickClock {
    fn now_ns(&self) -> u64 {
        self.now.fetch_add(1, Ordering::SeqCst)
    }
}

const PREROLL_TICKS: u64 = 300;
const POSTROLL_TICKS: u64 = 400;
/// Kinds by tier; the last one is the trigger.
const KINDS: [&str; 6] = [
    "cmd.move",   // full
    "traj.pose",  // sample 1 in 3
    "sensor.imu", // summary
    "debug.tick", // drop
    "log.trace",  // drop, kept for the pre-roll
    "failure.slip",
];

fn race_policy() -> Policy {
    Policy::builder()
        .rule("traj.*", Tier::Sample(Sampling::Every(3)))
        .rule(
            "sensor.*",
            Tier::Summary {
                window_ns: u64::MAX / 4,
            },
        )
        .rule("debug.*", Tier::Drop)
        .drop_rule_with_preroll("log.*")
        .incident(IncidentPolicy {
            triggers: vec!["failure.*".to_owned()],
            preroll_ns: PREROLL_TICKS,
            postroll_ns: POSTROLL_TICKS,
            preroll_bytes_max: 64 << 20,
        })
        .build()
        .unwrap()
}

/// One recorded event: its kind and the clock readings just before and just after the
/// `record` call (its stamp lies strictly between).
#[derive(Debug, Clone)]
struct Recorded {
    kind: usize,
    before: u64,
    after: u64,
}

fn threads() -> impl Strategy<Value = (Vec<Vec<usize>>, usize, usize)> {
    (
        prop::collection::vec(prop::collection::vec(0..5usize, 100..300), 3..=4),
        any::<prop::sample::Index>(),
        any::<prop::sample::Index>(),
    )
        .prop_map(|(threads, t, i)| {
            let thread = t.index(threads.len());
            let at = i.index(threads[thread].len());
            (threads, thread, at)
        })
}

proptest! {
    // 16 cases in CI; `PROPTEST_CASES=500 cargo test -p blackbox --release --test
    // incidents` for a long run.
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(16),
        ..ProptestConfig::default()
    })]

    /// Guards the post-roll race: the producer used to open the post-roll before the
    /// trigger reached the writer, so an event another thread stamped after the
    /// trigger, and that reached the writer first, was counted `dropped` or went to the
    /// ring, and the trigger then wrote the whole ring, events stamped after it
    /// included, as `preroll`. Every event's written tier must follow from the stamps:
    /// stamped inside the post-roll → `postroll`; a ring event stamped inside the
    /// pre-roll → `preroll`; nothing stamped after the trigger is pre-roll.
    #[test]
    fn every_event_is_written_as_its_stamp_says_whatever_the_interleaving(
        (threads, trigger_thread, trigger_at) in threads()
    ) {
        let clock = Arc::new(TickClock::default());
        let dir = tempfile::tempdir().unwrap();
        let config = Config::new()
            .clock(clock.clone())
            .policy(race_policy())
            .accounting_interval_ns(u64::MAX)
            .checkpoint_interval_ns(None);
        let rec = Recorder::open(dir.path(), config).unwrap();
        let barrier = std::sync::Barrier::new(threads.len());
        let recorded: Vec<HashMap<String, Recorded>> = std::thread::scope(|s| {
            let handles: Vec<_> = threads
                .iter()
                .enumerate()
                .map(|(t, kinds)| {
                    let (rec, clock, barrier) = (&rec, &clock, &barrier);
                    s.spawn(move || {
                        let mut out = HashMap::new();
                        barrier.wait();
                        for (i, &k) in kinds.iter().enumerate() {
                            let kind = if t == trigger_thread && i == trigger_at { 5 } else { k };
                            let payload = format!("{t}:{i}");
                            let before = clock.now_ns();
                            rec.record(&Event::new(KINDS[kind]).raw(payload.as_bytes())).unwrap();
                            let after = clock.now_ns();
                            out.insert(payload, Recorded { kind, before, after });
                        }
                        out
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        rec.close().unwrap();
        let recorded: HashMap<String, Recorded> = recorded.into_iter().flatten().collect();

        let recs = common::read_log(dir.path());
        let trigger = recs
            .iter()
            .find_map(|r| match r {
                Rec::Incident { trigger_ts_ns, .. } => Some(*trigger_ts_ns),
                _ => None,
            })
            .unwrap();
        let postroll = |t: u64| t > trigger && t < trigger + POSTROLL_TICKS;
        let preroll = |t: u64| t < trigger && t >= trigger - PREROLL_TICKS;
        let mut written: HashMap<String, (&'static str, u64)> = HashMap::new();
        for r in common::events(&recs) {
            if let Rec::Event { tier, recorded_ns, .. } = r {
                let payload = r.payload_str().unwrap().to_owned();
                prop_assert!(written.insert(payload.clone(), (*tier, *recorded_ns)).is_none(),
                    "{payload} written twice");
            }
        }
        for (payload, e) in &recorded {
            let kind = KINDS[e.kind];
            match written.get(payload) {
                Some(&(tier, stamp)) => {
                    prop_assert!(e.before < stamp && stamp < e.after,
                        "{payload} stamped {stamp} outside its call [{}, {}]", e.before, e.after);
                    let expected: &[&str] = match e.kind {
                        0 | 5 if postroll(stamp) => &["postroll", "full"],
                        0 | 5 => &["full"],
                        _ if postroll(stamp) => &["postroll"],
                        1 if preroll(stamp) => &["sample", "preroll"],
                        1 => &["sample"],
                        2 | 4 if preroll(stamp) => &["preroll"],
                        _ => &[],
                    };
                    prop_assert!(expected.contains(&tier),
                        "{payload} ({kind}) stamped {stamp}, trigger at {trigger}: written as {tier}, expected one of {expected:?}");
                }
                None => {
                    prop_assert!(e.kind != 0 && e.kind != 5, "{payload} ({kind}) not written");
                    // Stamped (if at all) inside the call: a call wholly inside the
                    // post-roll must have been written.
                    prop_assert!(!(e.before > trigger && e.after < trigger + POSTROLL_TICKS),
                        "{payload} ({kind}) recorded inside the post-roll [{}, {}] and not written",
                        e.before, e.after);
                    if matches!(e.kind, 1 | 2 | 4) {
                        prop_assert!(!(e.before >= trigger - PREROLL_TICKS && e.after < trigger),
                            "{payload} ({kind}) recorded inside the pre-roll and not written");
                    }
                }
            }
        }
    }
}

/// Guards DESIGN §5's `preroll = true` on a drop rule: such events cost a counter until
/// a trigger, then the ring's last seconds of them are written as `preroll`; without a
/// trigger none reach the disk, and all count as `dropped`.
#[test]
fn a_preroll_drop_rule_writes_its_last_seconds_only_when_triggered() {
    const SEC: u64 = 1_000_000_000;
    let t0 = 1_700_000_000 * SEC;
    let policy = || {
        Policy::builder()
            .drop_rule_with_preroll("log.*")
            .rule("debug.*", Tier::Drop)
            .incident(IncidentPolicy {
                triggers: vec!["failure.*".to_owned()],
                preroll_ns: 2 * SEC,
                postroll_ns: 0,
                preroll_bytes_max: 1 << 20,
            })
            .build()
            .unwrap()
    };
    let clock = ManualClock::new(t0);
    let config = || {
        Config::new()
            .clock(Arc::new(clock.clone()))
            .policy(policy())
            .accounting_interval_ns(u64::MAX)
            .checkpoint_interval_ns(None)
    };

    // Without a trigger: nothing written, everything dropped.
    let quiet = tempfile::tempdir().unwrap();
    let rec = Recorder::open(quiet.path(), config()).unwrap();
    for i in 0..50u64 {
        clock.set_ns(t0 + i * 100_000_000);
        rec.record(&Event::new("log.trace").raw(i.to_string().as_bytes()))
            .unwrap();
        rec.record(&Event::new("debug.tick")).unwrap();
    }
    let stats = rec.stats().unwrap();
    rec.close().unwrap();
    assert!(common::events(&common::read_log(quiet.path())).is_empty());
    let c = stats["log.trace"];
    assert_eq!((c.seen, c.dropped, c.kept, c.preroll), (50, 50, 0, 0));
    assert!(c.balanced());

    // With a trigger at 4.9 s: the events of [2.9 s, 4.9 s] are written as pre-roll.
    // The clock starts again at t0 before this recorder reads it: one that went back
    // after it read 4.9 s would stamp at that floor (never below a watermark).
    clock.set_ns(t0);
    let loud = tempfile::tempdir().unwrap();
    let rec = Recorder::open(loud.path(), config()).unwrap();
    for i in 0..50u64 {
        clock.set_ns(t0 + i * 100_000_000);
        rec.record(&Event::new("log.trace").raw(i.to_string().as_bytes()))
            .unwrap();
        rec.record(&Event::new("debug.tick")).unwrap();
    }
    rec.record(&Event::new("failure.slip")).unwrap();
    let stats = rec.stats().unwrap();
    rec.close().unwrap();
    let recs = common::read_log(loud.path());
    let preroll: Vec<u64> = common::events(&recs)
        .into_iter()
        .filter(|r| {
            matches!(
                r,
                Rec::Event {
                    tier: "preroll",
                    ..
                }
            )
        })
        .map(|r| r.payload_str().unwrap().parse().unwrap())
        .collect();
    // By hand: the trigger is at 4.9 s, the pre-roll from 2.9 s: events 29 to 49.
    assert_eq!(preroll, (29..50).collect::<Vec<u64>>());
    let c = stats["log.trace"];
    assert_eq!((c.seen, c.dropped, c.kept, c.preroll), (50, 50, 0, 21));
    assert!(c.balanced());
    // A plain drop rule keeps nothing, even then.
    assert_eq!(common::count_events(&recs, "debug.tick", "preroll"), 0);
}
