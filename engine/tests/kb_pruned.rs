//! The knowledge base survives pruning: a recorder under a small disk budget commits,
//! then records a long stretch of events without a commit that prunes every segment
//! holding a commit record. The oracle is the same workload run without a budget: its
//! whole log holds every commit, and a view rebuilt from it is what the knowledge base
//! learned. The evidence every commit cites is recorded before anything is pruned, so
//! the facts (which cite it) are the same in both runs.

#![expect(clippy::unwrap_used, reason = "tests fail loudly on any error")]

use std::path::Path;
use std::sync::Arc;

use blackbox::kb::{Error as KbError, KB_RECORD, Rejection, View};
use blackbox::policy::Policy;
use blackbox::{
    AsOf, Config, Event, Fact, LogOptions, LogReader, ManualClock, Provenance, Recorder, Seq,
};
use blackbox_log::Retention;
use serde_json::{Value, json};

const START_NS: u64 = 1_767_225_600_000_000_000;
const SEC: u64 = 1_000_000_000;
const SEGMENT: u64 = 16 << 10;
/// The cup's values: each claimed then refuted, more than the 16 refuted values a fact
/// keeps, so the fact lets some go.
const CUP_VALUES: i64 = 18;

fn open(dir: &Path, clock: &ManualClock, bounded: bool) -> Recorder {
    let mut policy = Policy::builder();
    if bounded {
        policy = policy.retention(Retention {
            max_bytes: Some(128 << 10),
            max_age_ns: None,
            pinned_max_bytes: 0,
        });
    }
    let config = Config::new()
        .clock(Arc::new(clock.clone()))
        .policy(policy.build().unwrap())
        .log_options(LogOptions::new().segment_bytes_max(SEGMENT));
    Recorder::open(dir, config).unwrap()
}

fn cite(seq: Seq) -> Provenance {
    Provenance::new([seq]).author("test")
}

/// Session 1: evidence, commits (a snapshot written by hand after version 40), then
/// 2 500 events of 200 bytes without a commit. Returns the evidence seqs.
fn session_one(dir: &Path, clock: &ManualClock, bounded: bool) -> Vec<Seq> {
    let recorder = open(dir, clock, bounded);
    let mut e = Vec::new();
    for i in 0..64_u64 {
        e.push(
            recorder
                .record_evidence(&Event::new("seen.thing").values(&[("i", i as f64)]))
                .unwrap(),
        );
        clock.advance_ns(SEC / 10);
    }
    let kb = recorder.kb().unwrap();
    let none = Default::default();
    let step = || clock.advance_ns(SEC);
    kb.assert("door", json!("open"), 0.6, &none, cite(e[0]))
        .unwrap();
    step();
    kb.assert("door", json!("closed"), 0.9, &none, cite(e[1]))
        .unwrap();
    step();
    kb.assert("lamp", json!("on"), 0.05, &none, cite(e[2]))
        .unwrap();
    step();
    kb.retract("lamp", cite(e[3])).unwrap();
    step();
    for i in 0..CUP_VALUES {
        let i_ = usize::try_from(i).unwrap();
        kb.assert("cup", json!(i), 0.5, &none, cite(e[4 + i_]))
            .unwrap();
        step();
        kb.refute("cup", &json!(i), cite(e[4 + 18 + i_])).unwrap();
        step();
    }
    assert_eq!(kb.version().unwrap(), 40);
    kb.write_snapshot().unwrap();
    kb.assert("door", json!("ajar"), 0.3, &none, cite(e[40]))
        .unwrap();
    step();
    for i in 0..4 {
        kb.assert("cup", json!(100 + i), 0.4, &none, cite(e[41 + i]))
            .unwrap();
        step();
    }
    assert_eq!(kb.version().unwrap(), 45);
    events(&recorder, clock);
    recorder.close().unwrap();
    e
}

/// 2 500 events of 200 bytes, 1 ms apart: about 40 segments.
fn events(recorder: &Recorder, clock: &ManualClock) {
    for i in 0..2500_u64 {
        let mut payload = i.to_le_bytes().to_vec();
        payload.resize(200, 0);
        recorder.record(&Event::new("a.x").raw(&payload)).unwrap();
        clock.advance_ns(SEC / 1000);
        if i % 100 == 0 {
            recorder.sync().unwrap();
        }
    }
}

/// How many commit records (type 5) the log in `dir` holds.
fn commit_records(dir: &Path) -> usize {
    LogReader::open(dir)
        .unwrap()
        .records(..)
        .unwrap()
        .filter(|r| r.as_ref().unwrap().record_type() == KB_RECORD)
        .count()
}

/// What a view holds that the knowledge base learned: its version, its facts, every
/// rejection, and every value of the cup it remembers having let go.
#[derive(Debug, PartialEq)]
struct Learned {
    version: u64,
    facts: Vec<Fact>,
    rejected: Vec<Rejection>,
    let_go: Vec<(Value, u64, f64)>,
}

fn learned(view: &View) -> Learned {
    let mut let_go = Vec::new();
    for i in (0..CUP_VALUES).chain(100..104) {
        if let Some((v, state)) = view.let_go("cup", &json!(i)).unwrap() {
            let_go.push((json!(i), v, state.confidence));
        }
    }
    Learned {
        version: view.version().unwrap(),
        facts: view.facts().unwrap(),
        rejected: view.rejected().unwrap(),
        let_go,
    }
}

/// A view rebuilt from the log in `dir` alone.
fn fresh(dir: &Path) -> (tempfile::TempDir, View) {
    let temp = tempfile::tempdir().unwrap();
    let view = View::open(temp.path()).unwrap();
    view.catch_up(dir, None, None).unwrap();
    (temp, view)
}

#[test]
fn the_knowledge_base_is_rebuilt_from_the_retained_log_after_every_commit_was_pruned() {
    let unbounded = tempfile::tempdir().unwrap();
    let bounded = tempfile::tempdir().unwrap();
    let (u, b) = (unbounded.path(), bounded.path());
    let (uclock, bclock) = (ManualClock::new(START_NS), ManualClock::new(START_NS));
    let e = session_one(u, &uclock, false);
    assert_eq!(session_one(b, &bclock, true), e);

    // Every commit record was pruned from the bounded log.
    let first = blackbox_log::list_segments(b).unwrap()[0].first_seq;
    assert!(first > 0, "the bounded log was not pruned");
    assert_eq!(
        commit_records(b),
        0,
        "a commit record is still in the bounded log"
    );
    assert_eq!(commit_records(u), 45);

    // A view rebuilt from the retained log alone knows what the whole log knows.
    let (_t, oracle) = fresh(u);
    let (_t2, rebuilt) = fresh(b);
    assert_eq!(oracle.version().unwrap(), 45);
    assert_eq!(learned(&rebuilt), learned(&oracle));
    assert!(
        !learned(&oracle).let_go.is_empty(),
        "the cup let nothing go"
    );
    // Its history is complete from the snapshot written at version 40, and says so.
    assert_eq!(oracle.history_from().unwrap(), 0);
    assert_eq!(rebuilt.history_from().unwrap(), 40);
    let before = rebuilt.get_as_of("door", AsOf::Version(2)).unwrap_err();
    assert!(
        matches!(
            before,
            KbError::BeforeHistory {
                history_from: 40,
                ..
            }
        ),
        "{before}"
    );
    assert_eq!(
        rebuilt.get_as_of("door", AsOf::Version(41)).unwrap(),
        oracle.get_as_of("door", AsOf::Version(41)).unwrap()
    );
    let at_40 = oracle.commit_time(40).unwrap().unwrap();
    assert_eq!(
        rebuilt.get_as_of("cup", AsOf::Time(at_40)).unwrap(),
        oracle.get_as_of("cup", AsOf::Time(at_40)).unwrap()
    );
    assert!(matches!(
        rebuilt.get_as_of("cup", AsOf::Time(at_40 - 1)),
        Err(KbError::BeforeHistory { .. })
    ));

    // Session 2: the recorder's own view (complete history) reverts to versions before
    // the snapshot; then commits that weigh remembered values by their age.
    let none = Default::default();
    for (dir, clock) in [(u, &uclock), (b, &bclock)] {
        let recorder = open(dir, clock, dir == b);
        let kb = recorder.kb().unwrap();
        assert_eq!(kb.view().history_from().unwrap(), 0);
        // The record of its last version was pruned: its catch-up went on from the
        // log's start and now starts after a copy of that version, not there again.
        let first = blackbox_log::list_segments(dir).unwrap()[0].first_seq;
        let (version, seq) = kb.view().applied().unwrap();
        assert_eq!(version, 45);
        assert!(seq.unwrap() >= first, "{seq:?} before {first}");
        kb.revert_to(3, cite(e[50])).unwrap();
        clock.advance_ns(SEC);
        kb.revert_to(38, cite(e[51])).unwrap();
        clock.advance_ns(SEC);
        for i in 0..3 {
            kb.assert("cup", json!(i), 0.7, &none, cite(e[52 + i]))
                .unwrap();
            clock.advance_ns(SEC);
        }
        // The segments this session starts carry what the last one left (restored at
        // the open) and this session's commits: they are pruned in turn.
        events(&recorder, clock);
        recorder.close().unwrap();
    }
    assert_eq!(
        commit_records(b),
        0,
        "a commit record is still in the bounded log"
    );
    let (_t, oracle) = fresh(u);
    let (_t2, rebuilt) = fresh(b);
    assert_eq!(oracle.version().unwrap(), 50);
    assert_eq!(learned(&rebuilt), learned(&oracle));
    // Still from the snapshot the first session wrote: the reopened recorder carried
    // it on rather than writing another.
    assert_eq!(rebuilt.history_from().unwrap(), 40);

    // Session 3: `kb rebuild` leaves the bounded recorder's view with the retained
    // history only: a revert before it is refused, one after it is the same.
    let urec = open(u, &uclock, false);
    let brec = open(b, &bclock, true);
    let (ukb, bkb) = (urec.kb().unwrap(), brec.kb().unwrap());
    bkb.rebuild().unwrap();
    assert_eq!(bkb.view().history_from().unwrap(), 40);
    assert_eq!(learned(bkb.view()), learned(ukb.view()));
    let refused = bkb.revert_to(3, cite(e[60])).unwrap_err();
    assert!(
        matches!(refused, KbError::BeforeHistory { .. }),
        "{refused}"
    );
    assert_eq!(bkb.version().unwrap(), 50, "the refused revert committed");
    for (kb, clock) in [(ukb, &uclock), (bkb, &bclock)] {
        kb.revert_to(44, cite(e[60])).unwrap();
        clock.advance_ns(SEC);
        kb.assert("cup", json!(0), 0.9, &none, cite(e[61])).unwrap();
    }
    assert_eq!(learned(bkb.view()), learned(ukb.view()));
    urec.close().unwrap();
    brec.close().unwrap();
    drop((urec, brec));
    let (_t, oracle) = fresh(u);
    let (_t2, rebuilt) = fresh(b);
    assert_eq!(oracle.version().unwrap(), 52);
    assert_eq!(learned(&rebuilt), learned(&oracle));
}

#[test]
fn a_snapshot_follows_the_first_commit_and_each_256_commits_carried_after_one() {
    let tmp = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(START_NS);
    let recorder =
        Recorder::open(tmp.path(), Config::new().clock(Arc::new(clock.clone()))).unwrap();
    let seen = recorder.record_evidence(&Event::new("seen.thing")).unwrap();
    let kb = recorder.kb().unwrap();
    for i in 0..600 {
        kb.assert(
            &format!("k{i}"),
            json!(i),
            0.5,
            &Default::default(),
            cite(seen),
        )
        .unwrap();
        clock.advance_ns(SEC);
    }
    recorder.close().unwrap();
    let versions: Vec<u64> = LogReader::open(tmp.path())
        .unwrap()
        .records(..)
        .unwrap()
        .map(Result::unwrap)
        .filter(|r| r.record_type() == blackbox::kb::KB_SNAPSHOT_RECORD)
        .map(|r| {
            let v: Value = serde_json::from_slice(r.payload()).unwrap();
            v["version"].as_u64().unwrap()
        })
        .collect();
    // After version 1 (the log had none), then once versions 2..=257 are carried, then
    // 258..=513.
    assert_eq!(versions, [1, 257, 513]);
}
