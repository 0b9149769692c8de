//! The post-roll race, forced deterministically: a trigger is held inside its clock
//! reading (stamped, not yet sent) while another thread records events stamped after
//! it, so those events reach the writer before the trigger does. Each must be written
//! as its stamp says.

#![expect(clippy::unwrap_used, reason = "tests fail loudly on any error")]

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use blackbox::policy::{IncidentPolicy, Policy, Tier};
use blackbox::{Config, Event, Recorder};
use common::{Rec, StallingClock};

const MS: u64 = 1_000_000;
const SEC: u64 = 1_000_000_000;
const T0: u64 = 1_700_000_000 * SEC;
/// The name of the thread that records the trigger, held in its clock reading.
const TRIGGER_THREAD: &str = "trigger";

fn open(dir: &std::path::Path, clock: &StallingClock, postroll_ns: u64) -> Recorder {
    let policy = Policy::builder()
        .rule("debug.*", Tier::Drop)
        .rule(
            "sensor.*",
            Tier::Summary {
                window_ns: 60 * SEC,
            },
        )
        .drop_rule_with_preroll("log.*")
        .incident(IncidentPolicy {
            triggers: vec!["failure.*".to_owned()],
            preroll_ns: SEC,
            postroll_ns,
            preroll_bytes_max: 1 << 20,
        })
        .build()
        .unwrap();
    let config = Config::new()
        .clock(Arc::new(clock.clone()))
        .policy(policy)
        .accounting_interval_ns(u64::MAX)
        .checkpoint_interval_ns(None);
    Recorder::open(dir, config).unwrap()
}

/// Records a trigger at `T0` on its own thread, holding that thread inside the clock
/// reading that stamps it (after the trigger is published, before it is sent), and runs
/// `meanwhile` on this thread during the hold: whatever `meanwhile` records reaches the
/// writer's channel before the trigger.
fn trigger_held_while(rec: &Recorder, clock: &StallingClock, meanwhile: impl FnOnce()) {
    clock.time.set_ns(T0);
    clock.hold(TRIGGER_THREAD, true);
    std::thread::scope(|s| {
        // Inside the scope: a failure in `meanwhile` lets the trigger go before the scope
        // waits for its thread.
        let _release = Release(clock);
        let trigger = std::thread::Builder::new()
            .name(TRIGGER_THREAD.to_owned())
            .spawn_scoped(s, || {
                rec.record(&Event::new("failure.slip").raw(b"trigger"))
            })
            .unwrap();
        clock.wait_held();
        meanwhile();
        clock.release();
        trigger.join().unwrap().unwrap();
    });
}

/// Releases the held thread when dropped, on success or failure.
struct Release<'a>(&'a StallingClock);

impl Drop for Release<'_> {
    fn drop(&mut self) {
        self.0.release();
    }
}

/// Each event's written tier and stamp, by payload.
fn written(recs: &[Rec]) -> BTreeMap<String, (&'static str, u64)> {
    let mut out = BTreeMap::new();
    for r in common::events(recs) {
        if let Rec::Event {
            tier, recorded_ns, ..
        } = r
        {
            let payload = r.payload_str().unwrap().to_owned();
            assert!(
                out.insert(payload.clone(), (*tier, *recorded_ns)).is_none(),
                "{payload} written twice"
            );
        }
    }
    out
}

/// Guards the post-roll race (issue 9, point 5): a drop-tier event another thread
/// stamped after a trigger, reaching the writer before that trigger, was counted
/// `dropped` (the writer knew nothing of a trigger it had not received), and a
/// summary-tier one went to the ring instead of the post-roll. Both must be written as
/// `postroll`.
#[test]
fn events_stamped_after_a_trigger_that_reach_the_writer_first_are_postroll() {
    let dir = tempfile::tempdir().unwrap();
    let clock = StallingClock::new(T0 - 500 * MS);
    let rec = open(dir.path(), &clock, SEC);
    rec.record(&Event::new("sensor.imu").raw(b"before"))
        .unwrap();
    trigger_held_while(&rec, &clock, || {
        clock.time.set_ns(T0 + MS);
        rec.record(&Event::new("debug.tick").raw(b"drop after"))
            .unwrap();
        rec.record(&Event::new("sensor.imu").raw(b"summary after"))
            .unwrap();
    });
    let stats = rec.stats().unwrap();
    rec.close().unwrap();

    let recs = common::read_log(dir.path());
    let incident = recs
        .iter()
        .find_map(|r| match r {
            Rec::Incident {
                trigger_ts_ns,
                trigger_seq,
                ..
            } => Some((*trigger_ts_ns, *trigger_seq)),
            _ => None,
        })
        .unwrap();
    assert_eq!(incident.0, T0, "the trigger is stamped when it was held");
    let written = written(&recs);
    let expected: BTreeMap<String, (&'static str, u64)> = [
        ("before", ("preroll", T0 - 500 * MS)),
        ("trigger", ("full", T0)),
        ("drop after", ("postroll", T0 + MS)),
        ("summary after", ("postroll", T0 + MS)),
    ]
    .into_iter()
    .map(|(p, w)| (p.to_owned(), w))
    .collect();
    assert_eq!(written, expected);
    // The events stamped after the trigger did reach the writer before it: they sit
    // before the trigger in the log.
    let seq_of = |payload: &str| {
        common::events(&recs)
            .into_iter()
            .find(|r| r.payload_str() == Some(payload))
            .map(Rec::seq)
            .unwrap()
    };
    assert!(seq_of("drop after") < incident.1);
    assert!(seq_of("summary after") < incident.1);
    let drop = stats["debug.tick"];
    assert_eq!((drop.seen, drop.kept, drop.dropped), (1, 1, 0), "{drop:?}");
    assert!(
        stats.values().all(blackbox::Counters::balanced),
        "{stats:?}"
    );
}

/// Guards the other half of the post-roll race (issue 9, point 5): a trigger used to
/// write the whole ring as its pre-roll, so a ring event stamped after the trigger (here
/// after its short post-roll too) that reached the writer first was written as
/// `preroll`. Nothing stamped after a trigger is its pre-roll.
#[test]
fn an_event_stamped_after_a_trigger_that_reaches_the_writer_first_is_never_preroll() {
    let dir = tempfile::tempdir().unwrap();
    let clock = StallingClock::new(T0 - 500 * MS);
    let rec = open(dir.path(), &clock, MS);
    rec.record(&Event::new("sensor.imu").raw(b"before"))
        .unwrap();
    rec.record(&Event::new("log.trace").raw(b"log before"))
        .unwrap();
    trigger_held_while(&rec, &clock, || {
        // Past the trigger's 1 ms post-roll: summarized or dropped, not written.
        clock.time.set_ns(T0 + 5 * MS);
        rec.record(&Event::new("sensor.imu").raw(b"after")).unwrap();
        rec.record(&Event::new("log.trace").raw(b"log after"))
            .unwrap();
    });
    let stats = rec.stats().unwrap();
    rec.close().unwrap();

    let written = written(&common::read_log(dir.path()));
    let expected: BTreeMap<String, (&'static str, u64)> = [
        ("before", ("preroll", T0 - 500 * MS)),
        ("log before", ("preroll", T0 - 500 * MS)),
        ("trigger", ("full", T0)),
    ]
    .into_iter()
    .map(|(p, w)| (p.to_owned(), w))
    .collect();
    assert_eq!(written, expected);
    let log = stats["log.trace"];
    assert_eq!((log.seen, log.dropped, log.preroll), (2, 2, 1), "{log:?}");
    assert!(log.balanced());
    let imu = stats["sensor.imu"];
    assert_eq!(
        (imu.seen, imu.summarized, imu.preroll),
        (2, 2, 1),
        "{imu:?}"
    );
    assert!(imu.balanced());
}
