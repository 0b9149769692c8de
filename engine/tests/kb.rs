#![expect(clippy::unwrap_used, reason = "tests fail loudly on any error")]
//! The knowledge base through the recorder, as a user relies on it:
//!
//! - a model-based property test: random asserts, refutes, retracts and reverts on a
//!   manual clock, checked against an in-memory model whose adjudication is the
//!   reference model of `kb/tests/reference` (written from docs/ARCHITECTURE.md, not
//!   from the crate), at every version, by version and by time, before and after a
//!   reopen;
//! - independent claims and refutations made at the same clock reading give the same
//!   facts in any order, through the recorder;
//! - the view is only a cache: its dump is identical after `rebuild()` and after its
//!   directory is deleted;
//! - SIGKILL at random moments loses no acknowledged commit, leaves a view equal to its
//!   rebuild and a log that verifies;
//! - adjudication cases with hand-computed numbers;
//! - refused input: the right error, naming the field, nothing committed;
//! - evidence is kept whatever the policy tier of its kind.
//!
//! Long runs:
//!
//! ```text
//! PROPTEST_CASES=1000 cargo test -p blackbox --release --test kb
//! cargo test -p blackbox --release --test kb -- --ignored kill_loop_long
//! ```

#![allow(
    clippy::cast_possible_truncation,
    reason = "test indices and versions are small"
)]

mod common;
#[path = "../../kb/tests/reference/mod.rs"]
mod reference;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use blackbox::kb;
use blackbox::kb::adjudicate;
use blackbox::kb::{
    Change, CommitRecord, Committed, Error as KbError, KB_RECORD, KnowledgeBase, Op as KbOp,
    Version, decode_commit,
};
use blackbox::policy::{Policy, Tier};
use blackbox::{
    AsOf, Clock, Conditions, Config, Durability, Event, Fact, LogReader, ManualClock, Outcome,
    Provenance, Recorder, Seq, Status,
};
use proptest::prelude::*;
use serde_json::{Value, json};

const MS: u64 = 1_000_000;
const SEC: u64 = 1_000_000_000;
/// A realistic recorder time to start manual clocks at (2023-11-14, in ns).
const T0: u64 = 1_700_000_000 * SEC;
/// The half-life of the property tests: small, so that random clock steps decay facts
/// from barely to almost entirely.
const HALF_LIFE_NS: u64 = 10 * MS;

/// A config on a manual clock with the given half-life, and no timed accounting records
/// or checkpoints, so the log holds exactly what the test provokes.
fn manual(clock: &ManualClock, half_life_ns: u64) -> Config {
    Config::new()
        .clock(Arc::new(clock.clone()))
        .kb_half_life_ns(half_life_ns)
        .accounting_interval_ns(u64::MAX)
        .checkpoint_interval_ns(None)
}

fn obs(rec: &Recorder) -> Seq {
    rec.record_evidence(&Event::new("obs.camera").json(r#"{"seen":true}"#))
        .unwrap()
}

fn conds(pairs: &[(&str, Value)]) -> Conditions {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), v.clone()))
        .collect()
}

fn close_to(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-12
}

// ---------------------------------------------------------------------------------------
// The model
// ---------------------------------------------------------------------------------------

const KEYS: [&str; 3] = ["door", "lamp", "cup.pos"];

fn value_of(i: usize) -> Value {
    match i {
        0 => json!("open"),
        1 => json!("closed"),
        2 => json!({"x": 1.5}),
        n => json!(format!("v{n:02}")),
    }
}

fn conditions_of(i: usize) -> Conditions {
    match i {
        0 => Conditions::new(),
        1 => conds(&[("level", json!(1))]),
        2 => conds(&[("level", json!(2))]),
        _ => conds(&[("level", json!(1)), ("mode", json!("fast"))]),
    }
}

/// The contexts `matching` is checked with.
fn contexts() -> Vec<Conditions> {
    vec![
        Conditions::new(),
        conds(&[("level", json!(1))]),
        conds(&[("level", json!(2)), ("mode", json!("fast"))]),
        conds(&[
            ("level", json!(1)),
            ("mode", json!("fast")),
            ("x", json!(0)),
        ]),
    ]
}

/// One random operation.
#[derive(Debug, Clone)]
enum Action {
    Assert {
        key: usize,
        value: usize,
        confidence: f64,
        conditions: usize,
    },
    Refute {
        key: usize,
        value: usize,
    },
    Retract {
        key: usize,
    },
    /// Maps to a target version when run: mostly an existing one, sometimes 0 or one
    /// past the latest.
    Revert {
        pick: u64,
    },
}

/// What a step cites. Every step records a fresh observation first.
#[derive(Debug, Clone, Copy)]
enum Cites {
    /// The fresh observation.
    Fresh,
    /// The fresh observation and the run's first one.
    FreshAndFirst,
    /// Only an earlier observation (picked by index): a claim or refutation that may
    /// hold nothing new.
    Earlier(usize),
}

#[derive(Debug, Clone)]
struct Step {
    advance_ns: u64,
    action: Action,
    cites: Cites,
}

fn confidence() -> impl Strategy<Value = f64> {
    prop_oneof![
        Just(0.0),
        Just(1.0),
        Just(adjudicate::CONFIRMED_AT),
        Just(adjudicate::REJECTED_BELOW),
        0.0..=1.0f64,
    ]
}

/// An action on one of the first `keys` keys, with one of `values` values; refutations
/// weigh `refute` against 5 for claims.
fn action(keys: usize, values: usize, refute: u32) -> impl Strategy<Value = Action> {
    prop_oneof![
        5 => (0..keys, 0..values, confidence(), 0..4usize).prop_map(
            |(key, value, confidence, conditions)| Action::Assert {
                key,
                value,
                confidence,
                conditions
            }
        ),
        refute => (0..keys, 0..values).prop_map(|(key, value)| Action::Refute { key, value }),
        1 => (0..keys).prop_map(|key| Action::Retract { key }),
        1 => (0..100u64).prop_map(|pick| Action::Revert { pick }),
    ]
}

fn cites() -> impl Strategy<Value = Cites> {
    prop_oneof![
        3 => Just(Cites::Fresh),
        1 => Just(Cites::FreshAndFirst),
        1 => any::<usize>().prop_map(Cites::Earlier),
    ]
}

fn step() -> impl Strategy<Value = Step> {
    step_of(action(KEYS.len(), 3, 2))
}

fn step_of(action: impl Strategy<Value = Action>) -> impl Strategy<Value = Step> {
    (
        prop_oneof![2 => Just(0u64), 3 => 0..4 * HALF_LIFE_NS],
        action,
        cites(),
    )
        .prop_map(|(advance_ns, action, cites)| Step {
            advance_ns,
            action,
            cites,
        })
}

/// What the model expects of an operation that is refused.
#[derive(Debug, Clone, PartialEq)]
enum Refusal {
    NotFound { key: String },
    UnknownVersion { version: Version, latest: Version },
}

impl Refusal {
    fn matches(&self, e: &KbError) -> bool {
        match (self, e) {
            (Refusal::NotFound { key }, KbError::NotFound { key: k }) => key == k,
            (
                Refusal::UnknownVersion { version, latest },
                KbError::UnknownVersion {
                    version: v,
                    latest: l,
                },
            ) => version == v && latest == l,
            _ => false,
        }
    }
}

/// The knowledge base as plain data: every version's keys as the reference model holds
/// them, commit time and changed keys. Adjudication comes from `reference` (written from
/// docs/ARCHITECTURE.md, not from the crate); reverts, retracts and refusals are modelled
/// here.
#[derive(Debug)]
struct Model {
    /// `states[v]`: every key after version v (`states[0]` is empty).
    states: Vec<BTreeMap<String, reference::Key>>,
    /// `times[v]`: the commit time of version v (`times[0]` unused).
    times: Vec<u64>,
    /// `changed[v]`: the keys version v changed.
    changed: Vec<BTreeSet<String>>,
    /// Every evidence seq recorded, oldest first.
    evidence: Vec<u64>,
}

impl Model {
    fn new() -> Model {
        Model {
            states: vec![BTreeMap::new()],
            times: vec![0],
            changed: vec![BTreeSet::new()],
            evidence: Vec::new(),
        }
    }

    fn latest(&self) -> Version {
        (self.states.len() - 1) as Version
    }

    fn current(&self) -> &BTreeMap<String, reference::Key> {
        self.states.last().unwrap()
    }

    /// Every key's fact after version `v`.
    fn facts(&self, v: Version) -> BTreeMap<String, Fact> {
        self.states[v as usize]
            .iter()
            .map(|(k, key)| (k.clone(), key.fact()))
            .collect()
    }

    /// The version current at time `t`: the last commit at or before it.
    fn version_at(&self, t: u64) -> Version {
        (1..self.times.len())
            .rev()
            .find(|&v| self.times[v] <= t)
            .unwrap_or(0) as Version
    }

    /// Commits a version at `time_ns` that gives each key of `changes` its new state
    /// (`None`: no fact).
    fn push(&mut self, time_ns: u64, changes: BTreeMap<String, Option<reference::Key>>) {
        let mut state = self.current().clone();
        let mut keys = BTreeSet::new();
        for (key, new) in changes {
            match new {
                Some(k) => state.insert(key.clone(), k),
                None => state.remove(&key),
            };
            keys.insert(key);
        }
        self.states.push(state);
        self.times.push(time_ns);
        self.changed.push(keys);
    }

    /// The keys `revert_to(target)` changes at `version`: each key whose fact differs
    /// from its fact at `target` gets that state back (changed by `version`), or loses
    /// its fact if it had none then.
    fn revert_changes(
        &self,
        target: Version,
        version: Version,
        now: u64,
    ) -> BTreeMap<String, Option<reference::Key>> {
        let then = &self.states[target as usize];
        let now_keys = self.current();
        let names: BTreeSet<&String> = then.keys().chain(now_keys.keys()).collect();
        let mut changes = BTreeMap::new();
        for name in names {
            match (then.get(name), now_keys.get(name)) {
                (Some(a), Some(b)) if a.fact() == b.fact() => {}
                (Some(a), _) => {
                    changes.insert(name.clone(), Some(a.restored(version, now)));
                }
                (None, _) => {
                    changes.insert(name.clone(), None);
                }
            }
        }
        changes
    }

    /// Every value ever rejected, as the rule defines it: per key in key order, each
    /// version that changed the key and left a value rejected that its state before did
    /// not.
    fn rejections(&self) -> Vec<(String, Value, Version, f64, u64)> {
        let mut names: Vec<&str> = KEYS.to_vec();
        names.sort_unstable();
        let mut out = Vec::new();
        for name in names {
            let mut before = BTreeMap::new();
            for v in 1..=self.latest() {
                if !self.changed[v as usize].contains(name) {
                    continue;
                }
                let now = self.states[v as usize]
                    .get(name)
                    .map(reference::Key::rejected)
                    .unwrap_or_default();
                for (text, (value, confidence, refutations)) in &now {
                    if !before.contains_key(text) {
                        out.push((name.to_owned(), value.clone(), v, *confidence, *refutations));
                    }
                }
                before = now;
            }
        }
        out
    }
}

/// Asserts that `got` is `want` up to rounding in the confidences.
fn assert_fact(got: Option<&Fact>, want: Option<&Fact>, what: &str) {
    assert_eq!(got.cloned(), reference::like_opt(got, want), "{what}");
}

/// Asserts that two lists of facts are the same up to rounding.
fn assert_facts<'a>(
    got: impl IntoIterator<Item = &'a Fact>,
    want: impl IntoIterator<Item = &'a Fact>,
    what: &str,
) {
    let (got, want): (Vec<&Fact>, Vec<&Fact>) =
        (got.into_iter().collect(), want.into_iter().collect());
    assert_eq!(
        got.iter().map(|f| &f.key).collect::<Vec<_>>(),
        want.iter().map(|f| &f.key).collect::<Vec<_>>(),
        "{what}: the keys"
    );
    for (g, w) in got.iter().zip(&want) {
        assert_fact(Some(g), Some(w), &format!("{what}: {}", w.key));
    }
}

/// Runs one step on the recorder and the model, and checks the outcome, the commit
/// record and (for a refusal) that nothing was written.
fn run_step(rec: &Recorder, clock: &ManualClock, model: &mut Model, step: &Step, i: usize) {
    clock.advance_ns(step.advance_ns);
    let now = clock.now_ns();
    let seq = obs(rec).0;
    let evidence = match step.cites {
        Cites::Fresh => vec![seq],
        Cites::FreshAndFirst if model.evidence.is_empty() => vec![seq],
        Cites::FreshAndFirst => vec![model.evidence[0], seq],
        Cites::Earlier(_) if model.evidence.is_empty() => vec![seq],
        Cites::Earlier(pick) => vec![model.evidence[pick % model.evidence.len()]],
    };
    model.evidence.push(seq);
    let provenance = Provenance {
        evidence: evidence.clone(),
        author: "model".to_owned(),
        message: format!("step {i}"),
    };
    let kb = rec.kb().unwrap();
    let latest = model.latest();
    let version = latest + 1;
    let hl = HALF_LIFE_NS;

    type Changes = BTreeMap<String, Option<reference::Key>>;
    type Expected = Result<(KbOp, Outcome, Changes), Refusal>;
    let one = |key: &str, state: Option<reference::Key>| -> Changes {
        state
            .map(|s| BTreeMap::from([(key.to_owned(), Some(s))]))
            .unwrap_or_default()
    };
    let (expected, got): (Expected, _) = match step.action {
        Action::Assert {
            key,
            value,
            confidence,
            conditions,
        } => {
            let (key, value, conditions) = (KEYS[key], value_of(value), conditions_of(conditions));
            let (outcome, state) = reference::Key::claim(
                model.current().get(key),
                key,
                now,
                hl,
                version,
                &value,
                confidence,
                &conditions,
                &evidence,
            );
            let op = KbOp::Assert {
                key: key.to_owned(),
                value: value.clone(),
                confidence,
                conditions: conditions.clone(),
            };
            let got = kb.assert(key, value, confidence, &conditions, provenance);
            (Ok((op, outcome, one(key, state))), got)
        }
        Action::Refute { key, value } => {
            let (key, value) = (KEYS[key], value_of(value));
            let (outcome, state) = reference::Key::refute(
                model.current().get(key),
                key,
                now,
                hl,
                version,
                &value,
                &evidence,
            );
            let op = KbOp::Refute {
                key: key.to_owned(),
                value: value.clone(),
            };
            (
                Ok((op, outcome, one(key, state))),
                kb.refute(key, &value, provenance),
            )
        }
        Action::Retract { key } => {
            let key = KEYS[key];
            let expected = if model.current().contains_key(key) {
                let op = KbOp::Retract {
                    key: key.to_owned(),
                };
                Ok((
                    op,
                    Outcome::Retracted,
                    BTreeMap::from([(key.to_owned(), None)]),
                ))
            } else {
                Err(Refusal::NotFound {
                    key: key.to_owned(),
                })
            };
            (expected, kb.retract(key, provenance))
        }
        Action::Revert { pick } => {
            let target = match pick {
                0..8 => 0,
                8..16 => latest + 1 + (pick - 8),
                _ if latest == 0 => 0,
                _ => 1 + pick % latest,
            };
            let expected = if target == 0 || target > latest {
                Err(Refusal::UnknownVersion {
                    version: target,
                    latest,
                })
            } else {
                let op = KbOp::Revert { version: target };
                Ok((
                    op,
                    Outcome::Reverted,
                    model.revert_changes(target, version, now),
                ))
            };
            (expected, kb.revert_to(target, provenance))
        }
    };
    match expected {
        Ok((op, outcome, changes)) => {
            let c = got.unwrap_or_else(|e| panic!("step {i}: {step:?} refused: {e}"));
            assert_eq!(
                (c.version, c.outcome),
                (version, outcome),
                "step {i}: {step:?}"
            );
            let commit = kb.log(version..=version).unwrap().pop().unwrap();
            assert_eq!(commit.seq, c.seq, "step {i}: the commit's seq");
            assert_eq!(commit.time_ns, now, "step {i}: the commit's time");
            let want = CommitRecord {
                version,
                author: "model".to_owned(),
                message: format!("step {i}"),
                provenance: evidence,
                op,
                outcome,
                changes: changes
                    .iter()
                    .map(|(key, state)| Change {
                        key: key.clone(),
                        fact: state.as_ref().map(reference::Key::fact),
                        let_go: state
                            .as_ref()
                            .map(reference::Key::let_go_now)
                            .unwrap_or_default(),
                        remembered: None,
                    })
                    .collect(),
            };
            let mut like = want.clone();
            for ((w, g), (_, state)) in like
                .changes
                .iter_mut()
                .zip(&commit.record.changes)
                .zip(&changes)
            {
                w.fact = reference::like_opt(g.fact.as_ref(), w.fact.as_ref());
                reference::like_rivals(&g.let_go, &mut w.let_go);
                // A revert that leaves the key a fact carries what the key remembers
                // again: the model's remembered values (the versions that let them go,
                // which the model does not keep, as written). A value the restored fact
                // holds again (as its value, a rival or a refuted value) is read from
                // the fact, never from what was let go: the model forgets it, the
                // record may carry it.
                let reverted = matches!(want.op, KbOp::Revert { .. });
                match (state, &g.remembered) {
                    (Some(state), Some(got)) if reverted => {
                        let held = |v: &Value| {
                            g.fact.as_ref().is_some_and(|f| {
                                f.value == *v
                                    || f.rivals.iter().chain(&f.refuted).any(|r| r.value == *v)
                            })
                        };
                        let got: Vec<_> = got
                            .iter()
                            .filter(|l| !held(&l.state.value))
                            .map(|l| l.state.clone())
                            .collect();
                        let mut model_remembered = state.remembered();
                        reference::like_rivals(&got, &mut model_remembered);
                        assert_eq!(got, model_remembered, "step {i}: remembered");
                    }
                    (None, None) => {}
                    (Some(_), None) if !reverted => {}
                    (_, got) => panic!("step {i}: remembered {got:?}"),
                }
                w.remembered = g.remembered.clone();
            }
            assert_eq!(commit.record, like, "step {i}: {step:?}");
            model.push(now, changes);
        }
        Err(refusal) => {
            let e = match got {
                Ok(c) => panic!("step {i}: {step:?} committed {c:?}, expected {refusal:?}"),
                Err(e) => e,
            };
            assert!(refusal.matches(&e), "step {i}: {e:?}, expected {refusal:?}");
            assert_eq!(
                kb.version().unwrap(),
                latest,
                "step {i}: a refusal moved the version"
            );
            assert_eq!(
                rec.sync().unwrap(),
                Some(Seq(seq)),
                "step {i}: a refusal wrote to the log"
            );
        }
    }
}

/// Every read of the knowledge base agrees with the model: at every version, by version
/// and by time, per key and as a snapshot; histories, the commit log, the current
/// derived queries and every rejection ever.
fn check_model(kb: &KnowledgeBase, model: &Model) {
    let latest = model.latest();
    assert_eq!(kb.version().unwrap(), latest);
    let snapshots: Vec<BTreeMap<String, Fact>> = (0..=latest).map(|v| model.facts(v)).collect();
    for v in 0..=latest {
        let want = &snapshots[v as usize];
        let got = kb.snapshot(AsOf::Version(v)).unwrap();
        assert_facts(
            got.values(),
            want.values(),
            &format!("snapshot at version {v}"),
        );
        for key in KEYS {
            assert_fact(
                kb.get_as_of(key, AsOf::Version(v)).unwrap().as_ref(),
                want.get(key),
                &format!("{key} as of version {v}"),
            );
        }
    }
    assert!(matches!(
        kb.snapshot(AsOf::Version(latest + 1)),
        Err(KbError::UnknownVersion { version, latest: l }) if version == latest + 1 && l == latest
    ));
    for v in 1..=latest {
        let t = model.times[v as usize];
        for probe in [t - 1, t, t + 1] {
            let at = model.version_at(probe);
            let want = &snapshots[at as usize];
            let got = kb.snapshot(AsOf::Time(probe)).unwrap();
            assert_facts(
                got.values(),
                want.values(),
                &format!("snapshot at time {probe} (version {at})"),
            );
            for key in KEYS {
                assert_fact(
                    kb.get_as_of(key, AsOf::Time(probe)).unwrap().as_ref(),
                    want.get(key),
                    &format!("{key} at time {probe} (version {at})"),
                );
            }
        }
    }
    let current = &snapshots[latest as usize];
    for key in KEYS {
        let want: Vec<(Version, Option<&Fact>)> = (1..=latest)
            .filter(|&v| model.changed[v as usize].contains(key))
            .map(|v| (v, snapshots[v as usize].get(key)))
            .collect();
        let got = kb.history(key).unwrap();
        assert_eq!(
            got.iter().map(|(v, _)| *v).collect::<Vec<_>>(),
            want.iter().map(|(v, _)| *v).collect::<Vec<_>>(),
            "the versions in the history of {key}"
        );
        for ((v, g), (_, w)) in got.iter().zip(&want) {
            assert_fact(g.as_ref(), *w, &format!("{key} in its history at {v}"));
        }
        assert_fact(kb.get(key).unwrap().as_ref(), current.get(key), key);
    }
    let log = kb.log(..).unwrap();
    assert_eq!(
        log.iter()
            .map(|c| (c.record.version, c.time_ns))
            .collect::<Vec<_>>(),
        (1..=latest)
            .map(|v| (v, model.times[v as usize]))
            .collect::<Vec<_>>(),
        "the commit log"
    );
    assert_facts(
        &kb.contradictions().unwrap(),
        current.values().filter(|f| !f.rivals.is_empty()),
        "contradictions",
    );
    for ctx in contexts() {
        assert_facts(
            &kb.matching(&ctx).unwrap(),
            current
                .values()
                .filter(|f| f.status != Status::Rejected && f.holds_in(&ctx)),
            &format!("matching {ctx:?}"),
        );
    }
    let rejected: Vec<(String, Value, Version, u64)> = kb
        .rejected()
        .unwrap()
        .into_iter()
        .map(|r| {
            let want = model
                .rejections()
                .into_iter()
                .find(|w| w.0 == r.key && w.1 == r.value && w.2 == r.version);
            if let Some(w) = want {
                assert!(
                    (w.3 - r.confidence).abs() <= reference::TOLERANCE,
                    "{r:?}, expected {w:?}"
                );
            }
            (r.key, r.value, r.version, r.refutations)
        })
        .collect();
    assert_eq!(
        rejected,
        model
            .rejections()
            .into_iter()
            .map(|(k, v, version, _, r)| (k, v, version, r))
            .collect::<Vec<_>>(),
        "every rejection"
    );
}

fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

proptest! {
    // 12 cases in CI; `PROPTEST_CASES=1000 cargo test -p blackbox --release --test kb`
    // for a long run.
    #![proptest_config(ProptestConfig {
        cases: cases(12),
        ..ProptestConfig::default()
    })]

    /// Guards "adjudication follows the documented rule, and history is never erased":
    /// after any sequence of asserts, refutes, retracts and reverts on a moving clock,
    /// citing fresh, shared or only earlier evidence, every commit and every read at
    /// every version and every commit time is what the reference model (written from
    /// docs/ARCHITECTURE.md, independent of the crate's code) and the revert rule give,
    /// refusals commit nothing, and all of it survives a reopen (the second half of the
    /// steps runs on the reopened recorder).
    #[test]
    fn kb_matches_the_model(steps in prop::collection::vec(step(), 1..40)) {
        run_model(&steps);
    }

    /// Guards a past bug: a refuted value past the 16 a fact keeps was forgotten in the
    /// commit that refuted it, so it could become the fact again. Many refutations of
    /// many values on one key: every commit (with the values it let go), every read and
    /// `rejected()` are what the reference model gives, where a value let go stays
    /// refuted until its key loses its fact or a revert restores a version before.
    #[test]
    fn kb_matches_the_model_past_the_refuted_bound(
        steps in prop::collection::vec(step_of(action(1, 30, 30)), 30..100)
    ) {
        run_model(&steps);
    }
}

/// Runs `steps` on a recorder and on the model, checking every commit and every read,
/// before and after reopens.
fn run_model(steps: &[Step]) {
    {
        let dir = tempfile::tempdir().unwrap();
        let clock = ManualClock::new(T0);
        let mut model = Model::new();
        let half = steps.len() / 2;
        let rec = Recorder::open(dir.path(), manual(&clock, HALF_LIFE_NS)).unwrap();
        for (i, s) in steps[..half].iter().enumerate() {
            run_step(&rec, &clock, &mut model, s, i);
        }
        check_model(rec.kb().unwrap(), &model);
        rec.close().unwrap();
        drop(rec);

        clock.advance_ns(HALF_LIFE_NS / 3);
        let rec = Recorder::open(dir.path(), manual(&clock, HALF_LIFE_NS)).unwrap();
        check_model(rec.kb().unwrap(), &model);
        for (i, s) in steps.iter().enumerate().skip(half) {
            run_step(&rec, &clock, &mut model, s, i);
        }
        check_model(rec.kb().unwrap(), &model);
        rec.close().unwrap();
        drop(rec);

        let rec = Recorder::open(dir.path(), manual(&clock, HALF_LIFE_NS)).unwrap();
        check_model(rec.kb().unwrap(), &model);
    }
}

/// A claim or a refutation on one key, for the order-independence test.
#[derive(Debug, Clone)]
enum KeyWrite {
    Claim {
        value: usize,
        confidence: f64,
        conditions: usize,
    },
    Refute {
        value: usize,
    },
}

fn key_write() -> impl Strategy<Value = KeyWrite> {
    prop_oneof![
        3 => (0..3usize, confidence(), 0..4usize).prop_map(|(value, confidence, conditions)| {
            KeyWrite::Claim { value, confidence, conditions }
        }),
        1 => (0..3usize).prop_map(|value| KeyWrite::Refute { value }),
    ]
}

fn apply_write(kb: &KnowledgeBase, key: &str, w: &KeyWrite, evidence: Seq) -> Outcome {
    let provenance = Provenance::new([evidence]);
    match w {
        KeyWrite::Claim {
            value,
            confidence,
            conditions,
        } => kb.assert(
            key,
            value_of(*value),
            *confidence,
            &conditions_of(*conditions),
            provenance,
        ),
        KeyWrite::Refute { value } => kb.refute(key, &value_of(*value), provenance),
    }
    .unwrap()
    .outcome
}

proptest! {
    // 6 cases in CI (two recorders each); the properties of `kb/tests/adjudication.rs`
    // run the same on the pure functions, by the thousand.
    #![proptest_config(ProptestConfig {
        cases: cases(6),
        ..ProptestConfig::default()
    })]

    /// Guards "the order of independent claims and refutations made at the same time
    /// does not change the outcome", through the recorder: two knowledge bases get the
    /// same earlier writes at the same times, then the same batch of writes, each citing
    /// its own observation, at one clock reading but in two orders; every key ends with
    /// the same fact, bit for bit, but for its version fields.
    #[test]
    fn independent_writes_at_one_time_give_the_same_facts_in_any_order(
        prior in prop::collection::vec((0..KEYS.len(), key_write(), 0..2 * HALF_LIFE_NS), 0..8),
        advance in 0..2 * HALF_LIFE_NS,
        (batch, order) in prop::collection::vec((0..KEYS.len(), key_write()), 1..7).prop_flat_map(|b| {
            let n = b.len();
            (Just(b), Just((0..n).collect::<Vec<_>>()).prop_shuffle())
        }),
    ) {
        let run = |order: &[usize]| {
            let dir = tempfile::tempdir().unwrap();
            let clock = ManualClock::new(T0);
            let rec = Recorder::open(dir.path(), manual(&clock, HALF_LIFE_NS)).unwrap();
            let kb = rec.kb().unwrap();
            for (key, w, step) in &prior {
                clock.advance_ns(*step);
                apply_write(kb, KEYS[*key], w, obs(&rec));
            }
            clock.advance_ns(advance);
            // The observations first, in one order: each write cites its own.
            let seen: Vec<Seq> = batch.iter().map(|_| obs(&rec)).collect();
            for &i in order {
                let (key, w) = &batch[i];
                let outcome = apply_write(kb, KEYS[*key], w, seen[i]);
                assert_ne!(outcome, Outcome::Duplicate);
            }
            let facts: BTreeMap<String, Fact> = kb
                .snapshot(AsOf::Version(kb.version().unwrap()))
                .unwrap()
                .into_iter()
                .map(|(k, mut f)| {
                    f.created = 0;
                    f.updated = 0;
                    (k, f)
                })
                .collect();
            rec.close().unwrap();
            facts
        };
        let given: Vec<usize> = (0..batch.len()).collect();
        let a = run(&given);
        let b = run(&order);
        prop_assert_eq!(&a, &b, "order {:?}", order);
        for (k, f) in &a {
            prop_assert_eq!(f.confidence.to_bits(), b[k].confidence.to_bits());
        }
    }
}

// ---------------------------------------------------------------------------------------
// The view is a cache of the log
// ---------------------------------------------------------------------------------------

proptest! {
    #![proptest_config(ProptestConfig {
        cases: cases(6),
        ..ProptestConfig::default()
    })]

    /// Guards "losing the fjall directory loses nothing": after any workload, the view's
    /// every entry is identical after `rebuild()`, and after its directory is deleted
    /// while the recorder is closed.
    #[test]
    fn rebuild_gives_an_identical_view(steps in prop::collection::vec(step(), 1..30)) {
        let dir = tempfile::tempdir().unwrap();
        let clock = ManualClock::new(T0);
        let mut model = Model::new();
        let rec = Recorder::open(dir.path(), manual(&clock, HALF_LIFE_NS)).unwrap();
        let first = Step {
            advance_ns: 0,
            action: Action::Assert { key: 0, value: 0, confidence: 0.5, conditions: 1 },
            cites: Cites::Fresh,
        };
        run_step(&rec, &clock, &mut model, &first, 0);
        for (i, s) in steps.iter().enumerate() {
            run_step(&rec, &clock, &mut model, s, i + 1);
        }
        let kb = rec.kb().unwrap();
        let before = kb.view().dump().unwrap();
        let commits = usize::try_from(model.latest()).unwrap();
        prop_assert!(before.iter().filter(|e| e.0 == "commits").count() == commits);
        prop_assert_eq!(kb.rebuild().unwrap(), commits);
        prop_assert!(kb.view().dump().unwrap() == before, "the view differs after rebuild()");
        check_model(kb, &model);
        rec.close().unwrap();
        drop(rec);

        std::fs::remove_dir_all(dir.path().join("kb")).unwrap();
        let rec = Recorder::open(dir.path(), manual(&clock, HALF_LIFE_NS)).unwrap();
        let kb = rec.kb().unwrap();
        prop_assert!(
            kb.view().dump().unwrap() == before,
            "the view rebuilt from the log after its directory was deleted differs"
        );
        check_model(kb, &model);
    }
}

// ---------------------------------------------------------------------------------------
// SIGKILL
// ---------------------------------------------------------------------------------------

/// Set in the child's environment: the recorder directory.
const CHILD_DIR_ENV: &str = "BLACKBOX_KB_KILL_CHILD_DIR";
/// Set in the child's environment: the seed of its operations.
const CHILD_SEED_ENV: &str = "BLACKBOX_KB_KILL_CHILD_SEED";
/// Set in the child's environment: `sync` for `Durability::Sync`.
const CHILD_DURABILITY_ENV: &str = "BLACKBOX_KB_KILL_CHILD_DURABILITY";
/// Set in the child's environment: exit right after this many acknowledgements.
const CHILD_EXIT_ENV: &str = "BLACKBOX_KB_KILL_CHILD_EXIT_AFTER";
/// The child's exit code when it ends itself after an acknowledgement.
const EXIT_AFTER_ACK: i32 = 42;
const ITERATIONS_ENV: &str = "BLACKBOX_KB_KILL_ITERATIONS";
const SEED_ENV: &str = "BLACKBOX_KB_KILL_SEED";
const DEFAULT_ITERATIONS: u64 = 5;
const LONG_ITERATIONS: u64 = 60;
const DEFAULT_SEED: u64 = 0x00C0_FFEE_0B1A_CB0C;
const SIGKILL: i32 = 9;
/// The child gives up if it has not been killed by then.
const CHILD_DEADLINE: Duration = Duration::from_secs(60);

struct SplitMix64(u64);

impl SplitMix64 {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
}

/// The child: commits forever until SIGKILL, printing `ACK <version> <seq>` after each
/// acknowledged commit. Ignored: only `kill_loop` runs it, in a child process.
#[test]
#[ignore = "the child process of kill_loop, run by it"]
fn kill_child() {
    let Some(dir) = std::env::var_os(CHILD_DIR_ENV) else {
        return;
    };
    let seed: u64 = std::env::var(CHILD_SEED_ENV).unwrap().parse().unwrap();
    let sync = std::env::var(CHILD_DURABILITY_ENV).is_ok_and(|d| d == "sync");
    let exit_after: Option<u64> = std::env::var(CHILD_EXIT_ENV)
        .ok()
        .map(|n| n.parse().unwrap());
    let mut acked = 0;
    let mut rng = SplitMix64(seed);
    let started = Instant::now();
    let config = if sync {
        Config::new().durability(Durability::Sync)
    } else {
        Config::new()
    };
    let mut out = std::io::stdout().lock();
    let mut say = |line: String| {
        // A closed pipe means the parent is gone: stop rather than commit forever.
        if writeln!(out, "{line}").and_then(|()| out.flush()).is_err() {
            std::process::exit(3);
        }
    };
    let rec = Recorder::open(&dir, config).unwrap();
    let kb = rec.kb().unwrap();
    say(format!("START {}", kb.version().unwrap()));
    loop {
        assert!(
            started.elapsed() < CHILD_DEADLINE,
            "the child was never killed"
        );
        let seq = obs(&rec);
        let key = KEYS[rng.below(KEYS.len() as u64) as usize];
        let value = value_of(rng.below(3) as usize);
        let latest = kb.version().unwrap();
        let provenance = Provenance::new([seq]).author("kill child");
        let c = match rng.below(10) {
            7 | 8 if kb.get(key).unwrap().is_some() => {
                let current = kb.get(key).unwrap().unwrap().value;
                kb.refute(key, &current, provenance.message("refuted"))
            }
            9 if latest > 0 => {
                let target = 1 + rng.below(latest);
                kb.revert_to(target, provenance.message("back"))
            }
            _ => {
                let confidence = rng.below(1001) as f64 / 1000.0;
                let conditions = conditions_of(rng.below(4) as usize);
                kb.assert(key, value, confidence, &conditions, provenance)
            }
        }
        .unwrap();
        say(format!("ACK {} {}", c.version, c.seq));
        acked += 1;
        if exit_after == Some(acked) {
            // Ends at once, as a kill would: no destructor runs, nothing the process
            // still holds in memory is written.
            std::process::exit(EXIT_AFTER_ACK);
        }
    }
}

/// Kills the child if the parent fails while it runs.
struct ChildGuard(Option<Child>);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if let Some(child) = self.0.as_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// On a failure, says where and keeps the directory for inspection.
struct FailureContext {
    dir: Option<tempfile::TempDir>,
    what: String,
}

impl Drop for FailureContext {
    fn drop(&mut self) {
        if thread::panicking() {
            let kept = self.dir.take().map(tempfile::TempDir::keep);
            eprintln!(
                "kill test failed at {}; directory kept at {kept:?}",
                self.what
            );
        }
    }
}

/// Forwards the child's stdout lines, as they come, and collects them.
fn read_lines(
    pipe: impl Read + Send + 'static,
) -> (mpsc::Receiver<String>, thread::JoinHandle<Vec<String>>) {
    let (tx, rx) = mpsc::channel();
    let handle = thread::spawn(move || {
        let mut lines = Vec::new();
        for line in BufReader::new(pipe)
            .lines()
            .map_while(std::result::Result::ok)
        {
            let _ = tx.send(line.clone());
            lines.push(line);
        }
        lines
    });
    (rx, handle)
}

fn read_all(mut pipe: impl Read + Send + 'static) -> thread::JoinHandle<String> {
    thread::spawn(move || {
        let mut text = String::new();
        let _ = pipe.read_to_string(&mut text);
        text
    })
}

/// `(start version, [(version, seq)])` from what the child printed.
fn parse_child(lines: &[String]) -> (Option<u64>, Vec<(u64, u64)>) {
    let mut start = None;
    let mut acks = Vec::new();
    for line in lines {
        // The harness may print `test kill_child ... ` before the first line.
        let mut words = line.split_whitespace();
        while let Some(word) = words.next() {
            match word {
                "START" => start = Some(words.next().unwrap().parse().unwrap()),
                "ACK" => {
                    let v = words.next().unwrap().parse().unwrap();
                    let s = words.next().unwrap().parse().unwrap();
                    acks.push((v, s));
                }
                _ => {}
            }
        }
    }
    (start, acks)
}

/// The knowledge-base commits the log holds, in log order: (version, seq).
fn log_commits(dir: &Path) -> Vec<(u64, u64)> {
    let reader = LogReader::open(dir).unwrap();
    let mut out = Vec::new();
    for r in reader.records(Seq(0)..).unwrap() {
        let r = r.unwrap();
        if r.record_type() == KB_RECORD {
            let c = decode_commit(r.seq(), r.ts_ns(), r.payload()).unwrap();
            out.push((c.record.version, c.seq));
        }
    }
    out
}

fn run_kill_loop(iterations: u64) {
    let base_seed = std::env::var(SEED_ENV).map_or(DEFAULT_SEED, |s| s.parse().unwrap());
    let exe = std::env::current_exe().unwrap();
    let tmp = tempfile::Builder::new()
        .prefix("blackbox-kb-kill")
        .tempdir()
        .unwrap();
    let dir = tmp.path().join("rec");
    let mut ctx = FailureContext {
        dir: Some(tmp),
        what: String::new(),
    };
    let started = Instant::now();
    let mut versions = 0u64;
    let mut acks_total = 0u64;
    let mut behind_runs = 0u64;
    let mut prev_digest = None;
    for i in 0..iterations {
        let seed = SplitMix64(base_seed ^ i.wrapping_mul(0xA076_1D64_78BD_642F)).next_u64();
        ctx.what = format!(
            "iteration {i} (seed {seed:#018x}; rerun with {SEED_ENV}={base_seed}), dir {}",
            dir.display()
        );
        let mut rng = SplitMix64(seed);
        let sync = i % 2 == 0;
        // A third of the deaths land anywhere from the start (in the child's open and
        // catch-up too), a third once the child is committing, a third right after an
        // acknowledgement (the child ends itself: what was acknowledged must already be
        // out of the process).
        let mode = i % 3;
        let delay = Duration::from_millis(match mode {
            0 => 5 + rng.below(400),
            _ => rng.below(80),
        });
        let exit_after = 1 + rng.below(30);
        let mut command = Command::new(&exe);
        command
            .args([
                "kill_child",
                "--exact",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_DIR_ENV, &dir)
            .env(CHILD_SEED_ENV, rng.next_u64().to_string())
            .env(CHILD_DURABILITY_ENV, if sync { "sync" } else { "flush" })
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if mode == 2 {
            command.env(CHILD_EXIT_ENV, exit_after.to_string());
        }
        let mut child = command.spawn().unwrap();
        let (live, stdout) = read_lines(child.stdout.take().unwrap());
        let stderr = read_all(child.stderr.take().unwrap());
        let mut guard = ChildGuard(Some(child));
        if mode == 1 {
            let deadline = Instant::now() + Duration::from_secs(30);
            while let Ok(line) =
                live.recv_timeout(deadline.saturating_duration_since(Instant::now()))
            {
                if line.contains("START") {
                    break;
                }
            }
        }
        let mut child = guard.0.take().unwrap();
        if mode != 2 {
            thread::sleep(delay);
            child.kill().unwrap();
        }
        let status = child.wait().unwrap();
        let lines = stdout.join().unwrap();
        let errors = stderr.join().unwrap();
        let (want, died) = if mode == 2 {
            (
                status.code() == Some(EXIT_AFTER_ACK),
                "ended itself after an acknowledgement",
            )
        } else {
            (status.signal() == Some(SIGKILL), "was killed")
        };
        assert!(
            want,
            "the child did not die as planned (it should have {died}; {status}); stdout:\n{}\nstderr:\n{errors}",
            lines.join("\n")
        );
        let (start, acks) = parse_child(&lines);
        if let Some(start) = start {
            assert_eq!(
                start, versions,
                "the child's knowledge base did not start where the last one ended"
            );
        }
        // The child is the only writer: its acknowledged versions follow each other.
        for (n, &(v, _)) in acks.iter().enumerate() {
            assert_eq!(
                v,
                versions + 1 + n as u64,
                "acknowledged versions are not dense"
            );
        }
        acks_total += acks.len() as u64;

        // How far behind the log the killed view was (it catches up on open).
        let view_version = {
            let view = blackbox::kb::View::open(dir.join("kb")).unwrap();
            view.version().unwrap()
        };

        let rec = Recorder::open(&dir, Config::new())
            .unwrap_or_else(|e| panic!("reopen after SIGKILL failed: {e}"));
        let kb = rec.kb().unwrap();
        let n = kb.version().unwrap();
        assert!(n >= versions, "versions lost: {n} after {versions}");
        if let Some(&(last, _)) = acks.last() {
            assert!(
                n >= last,
                "acknowledged version {last} lost: the knowledge base ends at {n}"
            );
        }
        assert!(view_version <= n, "the view was ahead of the log");
        if view_version < n {
            behind_runs += 1;
        }
        let log = kb.log(..).unwrap();
        assert_eq!(
            log.iter().map(|c| c.record.version).collect::<Vec<_>>(),
            (1..=n).collect::<Vec<_>>(),
            "the view's versions are not dense"
        );
        for &(v, seq) in &acks {
            assert_eq!(
                log[(v - 1) as usize].seq,
                seq,
                "acknowledged version {v} is not the commit at seq {seq}"
            );
        }
        assert_eq!(
            log_commits(&dir),
            log.iter()
                .map(|c| (c.record.version, c.seq))
                .collect::<Vec<_>>(),
            "the log's commit records are not versions 1..={n} with the view's seqs"
        );
        let dump = kb.view().dump().unwrap();
        assert_eq!(kb.rebuild().unwrap(), usize::try_from(n).unwrap());
        assert!(
            kb.view().dump().unwrap() == dump,
            "the caught-up view differs from its rebuild"
        );
        rec.close().unwrap();
        drop(rec);
        let report = blackbox::log::verify(&dir, None, prev_digest.as_ref())
            .unwrap_or_else(|e| panic!("verify after SIGKILL failed: {e}"));
        assert_eq!(report.torn_tail, None);
        assert_eq!(report.digest_matched, prev_digest.is_some());
        prev_digest = report.last;
        versions = n;
    }
    println!(
        "{iterations} deaths (2 in 3 by SIGKILL, 1 in 3 by exit right after an \
         acknowledgement) in {:.1?}: {versions} versions, {acks_total} acknowledged; the \
         view was behind the log in {behind_runs} runs",
        started.elapsed()
    );
    assert!(
        acks_total > 0,
        "no child ever acknowledged a commit: the test checked nothing"
    );
    drop(ctx);
}

/// Guards "every acknowledged commit survives a crash, and the view is only a cache":
/// a child process commits in a loop (`Sync` and default durability, alternately) and
/// is killed with SIGKILL at a random moment (or ends itself with `exit`, which writes
/// nothing either, right after a random acknowledgement); after each death the reopened
/// knowledge base holds every acknowledged version at its seq, versions 1..=n are dense
/// in the view and in the log, the view equals its rebuild, and the log verifies (and
/// still holds the prefix the previous iteration verified).
#[test]
fn kill_loop() {
    let iterations =
        std::env::var(ITERATIONS_ENV).map_or(DEFAULT_ITERATIONS, |s| s.parse().unwrap());
    run_kill_loop(iterations);
}

/// The long run: `cargo test -p blackbox --release --test kb -- --ignored kill_loop_long`.
#[test]
#[ignore = "long: 60 deaths, run by hand in release"]
fn kill_loop_long() {
    run_kill_loop(LONG_ITERATIONS);
}

// ---------------------------------------------------------------------------------------
// Adjudication, case by case, with hand-computed numbers
// ---------------------------------------------------------------------------------------

/// A recorder on a manual clock at `T0` with the given half-life (0: no decay).
fn open_manual(half_life_ns: u64) -> (tempfile::TempDir, ManualClock, Recorder) {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let rec = Recorder::open(dir.path(), manual(&clock, half_life_ns)).unwrap();
    (dir, clock, rec)
}

/// Asserts `value` for `key` on fresh evidence, without conditions.
fn claim(rec: &Recorder, key: &str, value: Value, confidence: f64) -> (Committed, u64) {
    let s = obs(rec);
    let c = rec
        .kb()
        .unwrap()
        .assert(
            key,
            value,
            confidence,
            &Conditions::new(),
            Provenance::new([s]),
        )
        .unwrap();
    (c, s.0)
}

fn fact(kb: &KnowledgeBase, key: &str) -> Fact {
    kb.get(key).unwrap().unwrap()
}

fn keys(facts: &[Fact]) -> Vec<&str> {
    facts.iter().map(|f| f.key.as_str()).collect()
}

#[test]
fn a_new_claim_creates_a_hypothesis_or_a_confirmed_fact() {
    let (_dir, _clock, rec) = open_manual(0);
    let kb = rec.kb().unwrap();
    let level = conds(&[("level", json!(1))]);
    for (key, confidence, status) in [
        ("a", 0.6, Status::Hypothesis),
        ("b", 0.9, Status::Confirmed),
        // The thresholds: confirmed at 0.8, rejected below 0.2.
        ("c", 0.8, Status::Confirmed),
        ("d", 0.2, Status::Hypothesis),
        ("e", 0.19, Status::Rejected),
    ] {
        let s = obs(&rec);
        let c = kb
            .assert(key, json!(key), confidence, &level, Provenance::new([s]))
            .unwrap();
        assert_eq!(c.outcome, Outcome::Created);
        let want = Fact {
            key: key.to_owned(),
            value: json!(key),
            confidence,
            claims: vec![confidence],
            evidence_count: 1,
            status,
            conditions: level.clone(),
            provenance: vec![s.0],
            refutations: 0,
            counter_evidence: Vec::new(),
            created: c.version,
            updated: c.version,
            rivals: Vec::new(),
            refuted: Vec::new(),
        };
        assert_eq!(fact(kb, key), want);
    }
    assert_eq!(kb.version().unwrap(), 5);
}

#[test]
fn an_equal_claim_corroborates_with_diminishing_returns() {
    let (_dir, _clock, rec) = open_manual(0);
    let kb = rec.kb().unwrap();
    let (c1, s1) = claim(&rec, "cup.pos", json!("table"), 0.5);
    // A corroborating claim under other conditions strengthens the fact; of two equal
    // claims, the conditions whose JSON text sorts first hold: `{"room":"kitchen"}`
    // before `{}` ('"' before '}').
    let kitchen = conds(&[("room", json!("kitchen"))]);
    let s2 = obs(&rec);
    let c2 = kb
        .assert(
            "cup.pos",
            json!("table"),
            0.5,
            &kitchen,
            Provenance::new([s2]),
        )
        .unwrap();
    assert_eq!(c2.outcome, Outcome::Corroborated);
    // Noisy-OR: 1 − 0.5 · 0.5 = 0.75.
    let f = fact(kb, "cup.pos");
    assert_eq!(f.confidence, 0.75);
    assert_eq!(f.claims, [0.5, 0.5]);
    assert_eq!(
        (f.evidence_count, f.status, f.created, f.updated),
        (2, Status::Hypothesis, c1.version, c2.version)
    );
    assert_eq!(f.conditions, kitchen);
    // 1 − 0.5³ = 0.875: confirmed. The gains shrink: 0.25, then 0.125. An equal claim
    // without conditions leaves them.
    let (c3, s3) = claim(&rec, "cup.pos", json!("table"), 0.5);
    assert_eq!(c3.outcome, Outcome::Corroborated);
    let f = fact(kb, "cup.pos");
    assert_eq!(f.confidence, 0.875);
    assert_eq!((f.evidence_count, f.status), (3, Status::Confirmed));
    assert_eq!(f.provenance, vec![s1, s2.0, s3]);
    assert_eq!(f.conditions, kitchen);
    // A stronger claim brings its conditions, whatever their text: 1 − 0.5³ · 0.1 =
    // 0.9875.
    let level = conds(&[("level", json!(2))]);
    let s4 = obs(&rec);
    kb.assert(
        "cup.pos",
        json!("table"),
        0.9,
        &level,
        Provenance::new([s4]),
    )
    .unwrap();
    let f = fact(kb, "cup.pos");
    assert!(close_to(f.confidence, 0.9875), "{}", f.confidence);
    assert_eq!(f.claims, [0.9, 0.5, 0.5, 0.5]);
    assert_eq!(f.conditions, level);
}

#[test]
fn a_stronger_claim_supersedes_and_a_tie_goes_to_the_first_value_by_json_text() {
    let (_dir, _clock, rec) = open_manual(0);
    let kb = rec.kb().unwrap();
    let (c1, s1) = claim(&rec, "door", json!("open"), 0.5);
    let (c2, s2) = claim(&rec, "door", json!("closed"), 0.7);
    assert_eq!(c2.outcome, Outcome::Superseded);
    // The displaced value stays as a rival: an open contradiction.
    let want = Fact {
        key: "door".to_owned(),
        value: json!("closed"),
        confidence: 0.7,
        claims: vec![0.7],
        evidence_count: 1,
        status: Status::Contested,
        conditions: Conditions::new(),
        provenance: vec![s2],
        refutations: 0,
        counter_evidence: Vec::new(),
        created: c1.version,
        updated: c2.version,
        rivals: vec![blackbox::kb::Rival {
            value: json!("open"),
            confidence: 0.5,
            claims: vec![0.5],
            evidence_count: 1,
            conditions: Conditions::new(),
            provenance: vec![s1],
            refutations: 0,
            counter_evidence: Vec::new(),
        }],
        refuted: Vec::new(),
    };
    assert_eq!(fact(kb, "door"), want);
    // Equal confidences: the value whose JSON text sorts first holds the key, whichever
    // came first. "\"zebra\"" sorts after "\"closed\"", "\"ajar\"" before it.
    let (c3, _) = claim(&rec, "door", json!("zebra"), 0.7);
    assert_eq!(c3.outcome, Outcome::Contested);
    assert_eq!(fact(kb, "door").value, json!("closed"));
    let (c4, _) = claim(&rec, "door", json!("ajar"), 0.7);
    assert_eq!(c4.outcome, Outcome::Superseded);
    let f = fact(kb, "door");
    assert_eq!(f.value, json!("ajar"));
    let rivals: Vec<(Value, f64)> = f
        .rivals
        .iter()
        .map(|r| (r.value.clone(), r.confidence))
        .collect();
    assert_eq!(
        rivals,
        [
            (json!("closed"), 0.7),
            (json!("zebra"), 0.7),
            (json!("open"), 0.5)
        ],
        "strongest first, then by JSON text"
    );
}

#[test]
fn recency_lets_a_fresher_weaker_claim_win_over_a_decayed_fact() {
    let run = |half_life_ns: u64| {
        let (dir, clock, rec) = open_manual(half_life_ns);
        claim(&rec, "door", json!("open"), 0.9);
        claim(&rec, "lamp", json!("on"), 0.9);
        clock.advance_ns(SEC / 2);
        let (lamp, _) = claim(&rec, "lamp", json!("off"), 0.5);
        clock.advance_ns(SEC * 3 / 2);
        let (door, _) = claim(&rec, "door", json!("closed"), 0.5);
        let kb = rec.kb().unwrap();
        let facts = (fact(kb, "door"), fact(kb, "lamp"));
        drop(rec);
        drop(dir);
        (lamp.outcome, door.outcome, facts)
    };
    // Half-life 1 s. Half a half-life later, 0.9 * 2^-0.5 = 0.6364 still beats 0.5:
    // contested, and the fact keeps its decayed confidence. Two half-lives later,
    // 0.9 / 4 = 0.225 loses to 0.5: superseded.
    let (lamp, door, (door_fact, lamp_fact)) = run(SEC);
    assert_eq!((lamp, door), (Outcome::Contested, Outcome::Superseded));
    assert_eq!(lamp_fact.value, json!("on"));
    assert!(close_to(lamp_fact.confidence, 0.9 * 0.5f64.sqrt()));
    assert_eq!(lamp_fact.rivals.len(), 1);
    assert_eq!(lamp_fact.rivals[0].value, json!("off"));
    assert_eq!(door_fact.value, json!("closed"));
    assert!(close_to(door_fact.confidence, 0.5));
    // Without decay the same claims lose both times.
    let (lamp, door, (door_fact, _)) = run(0);
    assert_eq!((lamp, door), (Outcome::Contested, Outcome::Contested));
    assert_eq!(door_fact.value, json!("open"));
    assert!(close_to(door_fact.confidence, 0.9));
}

#[test]
fn a_weaker_claim_is_kept_as_a_rival_until_refuted() {
    let (_dir, _clock, rec) = open_manual(0);
    let kb = rec.kb().unwrap();
    let (_, s1) = claim(&rec, "door", json!("open"), 0.9);
    assert_eq!(fact(kb, "door").status, Status::Confirmed);
    assert!(kb.contradictions().unwrap().is_empty());
    let s2 = obs(&rec);
    let level = conds(&[("level", json!(3))]);
    let c2 = kb
        .assert("door", json!("closed"), 0.5, &level, Provenance::new([s2]))
        .unwrap();
    assert_eq!(c2.outcome, Outcome::Contested);
    let f = fact(kb, "door");
    assert_eq!(
        (&f.value, f.confidence, f.evidence_count, f.status),
        (&json!("open"), 0.9, 1, Status::Contested)
    );
    assert_eq!(f.provenance, vec![s1]);
    assert_eq!(
        f.rivals,
        vec![blackbox::kb::Rival {
            value: json!("closed"),
            confidence: 0.5,
            claims: vec![0.5],
            evidence_count: 1,
            conditions: level,
            provenance: vec![s2.0],
            refutations: 0,
            counter_evidence: Vec::new(),
        }]
    );
    assert_eq!(kb.contradictions().unwrap(), vec![f.clone()]);
    // A contested fact is still believed.
    assert_eq!(keys(&kb.matching(&Conditions::new()).unwrap()), ["door"]);

    // Refuting the rival closes the contradiction: the fact is confirmed again.
    let s3 = obs(&rec);
    let c3 = kb
        .refute("door", &json!("closed"), Provenance::new([s3]))
        .unwrap();
    assert_eq!(c3.outcome, Outcome::Refuted);
    let g = fact(kb, "door");
    assert!(g.rivals.is_empty());
    assert_eq!(
        (&g.value, g.confidence, g.status, g.updated),
        (&json!("open"), 0.9, Status::Confirmed, c3.version)
    );
    assert!(kb.contradictions().unwrap().is_empty());
    // The refuted rival is remembered: 0.5 × 0.1, with the refutation's evidence.
    assert_eq!(g.refuted.len(), 1);
    let r = &g.refuted[0];
    assert_eq!((&r.value, r.refutations), (&json!("closed"), 1));
    assert!(close_to(r.confidence, 0.05), "{r:?}");
    assert_eq!(r.counter_evidence, vec![s3.0]);
}

#[test]
fn a_corroborated_rival_displaces_the_fact() {
    let (_dir, _clock, rec) = open_manual(0);
    let kb = rec.kb().unwrap();
    let (c1, s1) = claim(&rec, "door", json!("open"), 0.9);
    let mut seqs = Vec::new();
    // The rival's noisy-OR: 0.5, then 1 − 0.5 · 0.6 = 0.7, then 1 − 0.5 · 0.6 · 0.8 =
    // 0.76.
    for (claimed, rival, outcome) in [
        (0.5, 0.5, Outcome::Contested),
        (0.4, 0.7, Outcome::Contested),
        (0.2, 0.76, Outcome::Contested),
    ] {
        let (c, s) = claim(&rec, "door", json!("closed"), claimed);
        seqs.push(s);
        assert_eq!(c.outcome, outcome);
        let f = fact(kb, "door");
        assert_eq!((&f.value, f.confidence), (&json!("open"), 0.9));
        assert_eq!(f.rivals.len(), 1);
        assert!(
            close_to(f.rivals[0].confidence, rival),
            "{}",
            f.rivals[0].confidence
        );
        assert_eq!(f.rivals[0].evidence_count, seqs.len() as u64);
    }
    // 1 − 0.5 · 0.6 · 0.8 · 0.5 = 0.88 < 0.9, then · 0.5 again: 0.94 > 0.9: the rival
    // wins, with its evidence; the value it displaced stays as a rival.
    let (c, s) = claim(&rec, "door", json!("closed"), 0.5);
    seqs.push(s);
    assert_eq!(c.outcome, Outcome::Contested);
    assert!(close_to(fact(kb, "door").rivals[0].confidence, 0.88));
    let (c, s) = claim(&rec, "door", json!("closed"), 0.5);
    seqs.push(s);
    assert_eq!(c.outcome, Outcome::Superseded);
    let f = fact(kb, "door");
    assert_eq!(f.value, json!("closed"));
    assert!(close_to(f.confidence, 0.94), "{}", f.confidence);
    assert_eq!(
        (f.evidence_count, f.status, f.created, f.updated),
        (5, Status::Contested, c1.version, c.version)
    );
    assert_eq!(f.provenance, seqs);
    assert_eq!(f.claims, [0.5, 0.5, 0.5, 0.4, 0.2]);
    assert_eq!(f.rivals.len(), 1);
    assert_eq!(
        (
            &f.rivals[0].value,
            f.rivals[0].confidence,
            &f.rivals[0].provenance
        ),
        (&json!("open"), 0.9, &vec![s1])
    );
    assert_eq!(keys(&kb.contradictions().unwrap()), ["door"]);
}

#[test]
fn one_refutation_rejects_what_ten_corroborations_built() {
    let (_dir, _clock, rec) = open_manual(0);
    let kb = rec.kb().unwrap();
    claim(&rec, "grasp.works", json!(true), 0.9);
    for _ in 0..10 {
        let (c, _) = claim(&rec, "grasp.works", json!(true), 0.9);
        assert_eq!(c.outcome, Outcome::Corroborated);
    }
    // Noisy-OR of eleven claims at 0.9: 1 − 0.1¹¹.
    let built = 1.0 - 0.1f64.powi(11);
    let f = fact(kb, "grasp.works");
    assert!(close_to(f.confidence, built), "{}", f.confidence);
    assert_eq!((f.evidence_count, f.status), (11, Status::Confirmed));
    let s = obs(&rec);
    let c = kb
        .refute(
            "grasp.works",
            &json!(true),
            Provenance::new([s]).message("slipped"),
        )
        .unwrap();
    assert_eq!(c.outcome, Outcome::Rejected);
    let f = fact(kb, "grasp.works");
    assert!(close_to(f.confidence, built * 0.1), "{}", f.confidence);
    assert_eq!((f.evidence_count, f.status), (11, Status::Rejected));
    assert_eq!((f.refutations, &f.counter_evidence), (1, &vec![s.0]));
    assert!(
        !f.provenance.contains(&s.0),
        "counter-evidence is kept apart"
    );
    assert_eq!(
        kb.rejected().unwrap(),
        vec![blackbox::kb::Rejection {
            key: "grasp.works".to_owned(),
            value: json!(true),
            version: c.version,
            confidence: f.confidence,
            refutations: 1,
        }]
    );
    // Rejected: not believed any more, but remembered, with its history.
    assert!(kb.matching(&Conditions::new()).unwrap().is_empty());
    assert_eq!(kb.history("grasp.works").unwrap().len(), 12);
}

#[test]
fn refuting_a_value_never_claimed_remembers_a_failed_hypothesis() {
    let (_dir, _clock, rec) = open_manual(0);
    let kb = rec.kb().unwrap();
    let s = obs(&rec);
    let c = kb
        .refute("stove.safe", &json!(true), Provenance::new([s]))
        .unwrap();
    assert_eq!((c.version, c.outcome), (1, Outcome::Rejected));
    let want = Fact {
        key: "stove.safe".to_owned(),
        value: json!(true),
        confidence: 0.0,
        claims: Vec::new(),
        evidence_count: 0,
        status: Status::Rejected,
        conditions: Conditions::new(),
        provenance: Vec::new(),
        refutations: 1,
        counter_evidence: vec![s.0],
        created: 1,
        updated: 1,
        rivals: Vec::new(),
        refuted: Vec::new(),
    };
    assert_eq!(fact(kb, "stove.safe"), want);
    let rejection = |value: Value, version: Version| blackbox::kb::Rejection {
        key: "stove.safe".to_owned(),
        value,
        version,
        confidence: 0.0,
        refutations: 1,
    };
    assert_eq!(kb.rejected().unwrap(), vec![rejection(json!(true), 1)]);
    assert!(kb.matching(&Conditions::new()).unwrap().is_empty());
    // Another value never claimed, on a key that has a fact: remembered too (refusing
    // it would make the outcome depend on whether a claim of it came first). Both at 0,
    // "false" sorts before "true".
    let s2 = obs(&rec);
    let c = kb
        .refute("stove.safe", &json!(false), Provenance::new([s2]))
        .unwrap();
    assert_eq!((c.version, c.outcome), (2, Outcome::Rejected));
    let f = fact(kb, "stove.safe");
    assert_eq!(
        (f.value.clone(), f.status),
        (json!(false), Status::Rejected)
    );
    assert_eq!(f.refuted.len(), 1);
    assert_eq!(f.refuted[0].value, json!(true));
    assert_eq!(
        kb.rejected().unwrap(),
        vec![rejection(json!(true), 1), rejection(json!(false), 2)]
    );
}

#[test]
fn a_refuted_value_past_the_bound_is_remembered_and_stays_rejected() {
    // Guards a past bug: the fact keeps 16 refuted values besides its own, and the
    // 17th (confidence 0, last by JSON text) was cut in the very commit that refuted
    // it: `rejected()` never listed it, and claimed again it became the fact,
    // superseded and believed.
    let (_dir, _clock, rec) = open_manual(0);
    let kb = rec.kb().unwrap();
    let value = |i: u64| json!(format!("v{i:02}"));
    for i in 1..=18u64 {
        let s = obs(&rec);
        let c = kb.refute("k", &value(i), Provenance::new([s])).unwrap();
        assert_eq!((c.version, c.outcome), (i, Outcome::Rejected));
    }
    let f = fact(kb, "k");
    assert_eq!(f.value, value(1));
    assert_eq!(f.refuted.len(), adjudicate::REFUTED_KEPT);
    assert!(f.refuted.iter().all(|r| r.value != value(18)));
    let listed: Vec<(Value, Version, u64)> = kb
        .rejected()
        .unwrap()
        .into_iter()
        .map(|r| (r.value, r.version, r.refutations))
        .collect();
    let want: Vec<(Value, Version, u64)> = (1..=18).map(|i| (value(i), i, 1)).collect();
    assert_eq!(listed, want);

    // Claimed again at 0.9, v18 is still refuted: 0.9 × 0.1 = 0.09, the strongest value
    // of the key now, but rejected, and listed no second time.
    let s = obs(&rec);
    let c = kb
        .assert(
            "k",
            value(18),
            0.9,
            &Conditions::new(),
            Provenance::new([s]),
        )
        .unwrap();
    assert_eq!(c.outcome, Outcome::Rejected);
    let f = fact(kb, "k");
    assert_eq!((f.value.clone(), f.status), (value(18), Status::Rejected));
    assert_eq!((f.refutations, f.evidence_count), (1, 1));
    assert!(close_to(f.confidence, 0.09), "{}", f.confidence);
    assert_eq!(kb.rejected().unwrap().len(), 18);
    // A second refutation of a value the fact let go counts against it, once.
    let s = obs(&rec);
    let c = kb.refute("k", &value(17), Provenance::new([s])).unwrap();
    assert_eq!(c.outcome, Outcome::Refuted);
    let c = kb.refute("k", &value(17), Provenance::new([s])).unwrap();
    assert_eq!(c.outcome, Outcome::Duplicate);
}

/// Guards a past bug: a retract makes a key forget its refuted values (as it forgets
/// its rivals), and a revert to a version before the retract must give back what the key
/// remembered there, the value the fact let go past the bound of 16 included. Before
/// the fix the let-go value came back forgotten: claimed again it was believed.
#[test]
fn a_revert_past_a_retract_gives_back_every_refuted_value_it_remembered() {
    let (_dir, _clock, rec) = open_manual(0);
    let kb = rec.kb().unwrap();
    let value = |i: u64| json!(format!("v{i:02}"));
    for i in 1..=18u64 {
        let s = obs(&rec);
        kb.refute("k", &value(i), Provenance::new([s])).unwrap();
    }
    // Version 18 remembers all 18, v18 let go past the bound (see the test above).
    let s = obs(&rec);
    let c = kb.retract("k", Provenance::new([s])).unwrap();
    assert_eq!(c.version, 19);
    assert!(kb.get("k").unwrap().is_none());
    // Claimed while retracted, a value starts afresh (the key forgot it): 0.9.
    let (c, _) = claim(&rec, "k", value(18), 0.9);
    assert_eq!((c.version, c.outcome), (20, Outcome::Created));
    // Back to version 18: the key remembers every refuted value again.
    let s = obs(&rec);
    let c = kb.revert_to(18, Provenance::new([s])).unwrap();
    assert_eq!(c.version, 21);
    let f = fact(kb, "k");
    assert_eq!((f.value.clone(), f.status), (value(1), Status::Rejected));
    for i in [2, 17, 18] {
        let s = obs(&rec);
        let c = kb
            .assert("k", value(i), 0.9, &Conditions::new(), Provenance::new([s]))
            .unwrap();
        assert_eq!(
            c.outcome,
            Outcome::Rejected,
            "v{i:02} claimed again after the revert"
        );
    }
    // By hand: each value claimed at 0.9 carries its one refutation, 0.9 × 0.1.
    let f = fact(kb, "k");
    assert_eq!(f.status, Status::Rejected, "{f:?}");
    assert!(close_to(f.confidence, 0.09), "{f:?}");
}

#[test]
fn matching_returns_exactly_the_facts_whose_conditions_hold() {
    let (_dir, _clock, rec) = open_manual(0);
    let kb = rec.kb().unwrap();
    let put = |key: &str, conditions: Conditions| {
        let s = obs(&rec);
        kb.assert(key, json!(key), 0.9, &conditions, Provenance::new([s]))
            .unwrap();
    };
    put("everywhere", Conditions::new());
    put("level1", conds(&[("level", json!(1))]));
    put(
        "level1.fast",
        conds(&[("level", json!(1)), ("mode", json!("fast"))]),
    );
    put("level1.rejected", conds(&[("level", json!(1))]));
    put("level2", conds(&[("level", json!(2))]));
    let s = obs(&rec);
    kb.refute(
        "level1.rejected",
        &json!("level1.rejected"),
        Provenance::new([s]),
    )
    .unwrap();
    let cases: [(Conditions, &[&str]); 6] = [
        (Conditions::new(), &["everywhere"]),
        (conds(&[("level", json!(1))]), &["everywhere", "level1"]),
        (
            conds(&[("level", json!(1)), ("mode", json!("fast"))]),
            &["everywhere", "level1", "level1.fast"],
        ),
        (
            conds(&[("level", json!(2)), ("mode", json!("fast"))]),
            &["everywhere", "level2"],
        ),
        // Values compare as JSON: the string "1" is not the number 1.
        (conds(&[("level", json!("1"))]), &["everywhere"]),
        (conds(&[("mode", json!("fast"))]), &["everywhere"]),
    ];
    for (context, want) in cases {
        assert_eq!(keys(&kb.matching(&context).unwrap()), want, "{context:?}");
    }
}

#[test]
fn revert_restores_an_earlier_state_in_one_new_commit_and_diff_shows_changes() {
    let (_dir, _clock, rec) = open_manual(0);
    let kb = rec.kb().unwrap();
    claim(&rec, "a", json!(1), 0.6); // v1
    claim(&rec, "b", json!(2), 0.6); // v2
    claim(&rec, "a", json!(1), 0.6); // v3: corroborated to 1 − 0.4² = 0.84
    let s = obs(&rec);
    kb.retract("b", Provenance::new([s])).unwrap(); // v4
    claim(&rec, "c", json!(3), 0.6); // v5
    let snap = |v| kb.snapshot(AsOf::Version(v)).unwrap();
    let (s2, s5) = (snap(2), snap(5));
    assert_eq!(s5.keys().collect::<Vec<_>>(), ["a", "c"]);

    let s = obs(&rec);
    let c = kb
        .revert_to(
            2,
            Provenance::new([s])
                .author("operator")
                .message("bad calibration"),
        )
        .unwrap();
    assert_eq!((c.version, c.outcome), (6, Outcome::Reverted));
    let restored = |key: &str| {
        let mut f = s2[key].clone();
        f.updated = 6;
        f
    };
    let now = kb.snapshot(AsOf::Version(6)).unwrap();
    assert_eq!(
        now,
        BTreeMap::from([
            ("a".to_owned(), restored("a")),
            ("b".to_owned(), restored("b"))
        ])
    );
    assert_eq!(fact(kb, "a").confidence, 0.6);
    // Nothing erased: the reverted versions read as they were.
    assert_eq!(snap(5), s5);
    assert_eq!(snap(2), s2);
    let versions = |key: &str| {
        kb.history(key)
            .unwrap()
            .into_iter()
            .map(|(v, f)| (v, f.is_some()))
            .collect::<Vec<_>>()
    };
    assert_eq!(versions("a"), [(1, true), (3, true), (6, true)]);
    assert_eq!(versions("b"), [(2, true), (4, false), (6, true)]);
    assert_eq!(versions("c"), [(5, true), (6, false)]);
    let commit = kb.log(6..).unwrap().pop().unwrap();
    assert_eq!(commit.record.op, KbOp::Revert { version: 2 });
    assert_eq!(
        (
            commit.record.author.as_str(),
            commit.record.message.as_str(),
            &commit.record.provenance
        ),
        ("operator", "bad calibration", &vec![s.0])
    );
    assert_eq!(
        commit
            .record
            .changes
            .iter()
            .map(|c| c.key.as_str())
            .collect::<Vec<_>>(),
        ["a", "b", "c"]
    );
    // Adjudication goes on from the restored state: 0.6 corroborated is 0.84 again.
    let (c7, _) = claim(&rec, "a", json!(1), 0.6);
    assert_eq!(c7.outcome, Outcome::Corroborated);
    assert!(close_to(fact(kb, "a").confidence, 0.84));

    // diff(2, 5): a corroborated, b retracted, c created.
    let d = kb.diff(2, 5).unwrap();
    let summary: Vec<_> = d
        .iter()
        .map(|d| (d.key.as_str(), d.before.clone(), d.after.clone()))
        .collect();
    assert_eq!(
        summary,
        [
            ("a", Some(s2["a"].clone()), Some(s5["a"].clone())),
            ("b", Some(s2["b"].clone()), None),
            ("c", None, Some(s5["c"].clone())),
        ]
    );
    assert!(kb.diff(5, 5).unwrap().is_empty());
    let back = kb.diff(5, 2).unwrap();
    assert_eq!(
        back.iter()
            .map(|d| (d.key.as_str(), d.before.is_some(), d.after.is_some()))
            .collect::<Vec<_>>(),
        [("a", true, true), ("b", false, true), ("c", true, false)]
    );
    assert!(matches!(
        kb.diff(1, 8),
        Err(KbError::UnknownVersion {
            version: 8,
            latest: 7
        })
    ));
}

// ---------------------------------------------------------------------------------------
// Refused input
// ---------------------------------------------------------------------------------------

/// Checks that `result` is a refusal accepted by `is`, whose message starts with
/// `names` (the field, as in `confidence:`), and that nothing was committed or written;
/// then that the recorder and the knowledge base still work.
fn refused(
    rec: &Recorder,
    result: blackbox::kb::Result<Committed>,
    is: impl Fn(&KbError) -> bool,
    names: &str,
) {
    let kb = rec.kb().unwrap();
    let e = match result {
        Ok(c) => panic!("committed {c:?}, expected a refusal naming {names}"),
        Err(e) => e,
    };
    assert!(is(&e), "unexpected error: {e:?}");
    let message = e.to_string();
    assert!(
        message.starts_with(names),
        "the message does not start with {names:?}: {message}"
    );
    let latest = kb.version().unwrap();
    let last_seq = rec.sync().unwrap();
    assert_eq!(
        kb.log(..).unwrap().last().map(|c| c.record.version),
        (latest > 0).then_some(latest)
    );
    // Still working: an event, then a commit citing it.
    let (c, s) = claim(rec, "still.working", json!(true), 0.5);
    assert_eq!(c.version, latest + 1);
    assert!(Some(Seq(s)) > last_seq, "a refusal wrote to the log");
}

#[test]
fn bad_input_is_refused_naming_the_field_and_commits_nothing() {
    let (_dir, _clock, rec) = open_manual(0);
    let kb = rec.kb().unwrap();
    let (_, s) = claim(&rec, "door", json!("open"), 0.6);
    let none = Conditions::new();
    let ok = || Provenance::new([Seq(s)]);
    let at_version = |rec: &Recorder, f: &dyn Fn() -> blackbox::kb::Result<Committed>| {
        let before = rec.kb().unwrap().version().unwrap();
        let r = f();
        assert_eq!(
            rec.kb().unwrap().version().unwrap(),
            before,
            "the version moved: {r:?}"
        );
        r
    };

    // Evidence: none, and a seq not yet in the log (the very seq the commit would take,
    // and a later one; alone or beside a valid one).
    refused(
        &rec,
        at_version(&rec, &|| {
            kb.assert("door", json!("x"), 0.5, &none, Provenance::default())
        }),
        |e| matches!(e, KbError::NoEvidence),
        "evidence:",
    );
    let without: [&dyn Fn() -> blackbox::kb::Result<Committed>; 3] = [
        &|| kb.retract("door", Provenance::default()),
        &|| kb.refute("door", &json!("open"), Provenance::default()),
        &|| kb.revert_to(1, Provenance::default()),
    ];
    for r in without {
        refused(
            &rec,
            at_version(&rec, r),
            |e| matches!(e, KbError::NoEvidence),
            "evidence:",
        );
    }
    for (later, with_valid) in [(0, false), (1, true), (1000, false)] {
        let next = rec.sync().unwrap().unwrap().0 + 1;
        let seq = next + later;
        let mut evidence = vec![Seq(seq)];
        if with_valid {
            evidence.insert(0, Seq(s));
        }
        let provenance = Provenance::new(evidence);
        refused(
            &rec,
            at_version(&rec, &|| {
                kb.assert("door", json!("x"), 0.5, &none, provenance.clone())
            }),
            |e| matches!(e, KbError::EvidenceNotInLog { seq: s, next_seq } if *s == seq && *next_seq == next),
            "evidence:",
        );
    }

    // Confidence outside [0, 1].
    for bad in [-0.1, 1.5, f64::NAN, f64::INFINITY, -f64::INFINITY] {
        refused(
            &rec,
            at_version(&rec, &|| kb.assert("door", json!("x"), bad, &none, ok())),
            |e| matches!(e, KbError::InvalidConfidence { confidence } if confidence.to_bits() == bad.to_bits()),
            "confidence:",
        );
    }

    // Keys: empty, over 256 bytes (counted in bytes, not characters), control characters.
    let long = "k".repeat(257);
    let long_chars = "é".repeat(129);
    for (key, rule) in [
        ("", "empty"),
        (long.as_str(), "longer than 256 bytes"),
        (long_chars.as_str(), "longer than 256 bytes"),
        ("door\nopen", "control character"),
        ("door\u{0}", "control character"),
        ("door\u{7f}", "control character"),
        ("door\u{85}", "control character"),
    ] {
        let is = |e: &KbError| matches!(e, KbError::InvalidKey { key: k, reason } if k == key && reason.contains(rule));
        refused(
            &rec,
            at_version(&rec, &|| kb.assert(key, json!(1), 0.5, &none, ok())),
            is,
            "key:",
        );
        refused(
            &rec,
            at_version(&rec, &|| kb.refute(key, &json!(1), ok())),
            is,
            "key:",
        );
        refused(
            &rec,
            at_version(&rec, &|| kb.retract(key, ok())),
            is,
            "key:",
        );
    }
    // The limits themselves are valid keys.
    for key in ["k".repeat(256), "é".repeat(128), "ünïcode key".to_owned()] {
        let c = kb.assert(&key, json!(1), 0.5, &none, ok()).unwrap();
        assert_eq!(c.outcome, Outcome::Created);
    }

    // Versions: 0 and past the latest.
    for v in [None, Some(1), Some(u64::MAX)] {
        // One past the latest version (each refusal above is followed by a commit).
        let v = v.map_or(0, |past| kb.version().unwrap().saturating_add(past));
        refused(
            &rec,
            at_version(&rec, &|| kb.revert_to(v, ok())),
            |e| matches!(e, KbError::UnknownVersion { version, .. } if *version == v),
            "version:",
        );
    }

    // Retracting a key without a fact.
    refused(
        &rec,
        at_version(&rec, &|| kb.retract("no.such.key", ok())),
        |e| matches!(e, KbError::NotFound { key } if key == "no.such.key"),
        "not found: the key \"no.such.key\"",
    );

    // The recorder's own work went on throughout.
    rec.record(&Event::new("action.move")).unwrap();
    assert_eq!(rec.stats().unwrap()["action.move"].kept, 1);
    assert_eq!(fact(kb, "door").value, json!("open"));
}

// ---------------------------------------------------------------------------------------
// Evidence and the retention policy
// ---------------------------------------------------------------------------------------

#[test]
fn evidence_of_a_drop_tier_kind_is_written_and_counted_as_kept() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let policy = Policy::builder()
        .rule("debug.*", Tier::Drop)
        .build()
        .unwrap();
    let rec = Recorder::open(dir.path(), manual(&clock, 0).policy(policy)).unwrap();
    // The policy drops the kind...
    rec.record(&Event::new("debug.probe").json(r#"{"n":1}"#))
        .unwrap();
    // ...but not as evidence.
    let seq = rec
        .record_evidence(&Event::new("debug.probe").json(r#"{"n":2}"#))
        .unwrap();
    let stats = rec.stats().unwrap();
    let c = &stats["debug.probe"];
    assert_eq!((c.seen, c.kept, c.dropped), (2, 1, 1));
    rec.close().unwrap();
    drop(rec);

    let recs = common::read_log(dir.path());
    let events = common::events(&recs);
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0].seq(), seq.0);
    assert_eq!(events[0].payload_str(), Some(r#"{"n":2}"#));
    assert!(
        matches!(events[0], common::Rec::Event { kind, tier: "full", .. } if kind == "debug.probe")
    );
    let totals = common::last_accounting(&recs);
    assert_eq!(
        (totals["debug.probe"].kept, totals["debug.probe"].dropped),
        (1, 1)
    );

    // And it can be cited.
    let rec = Recorder::open(dir.path(), manual(&clock, 0)).unwrap();
    let c = rec
        .kb()
        .unwrap()
        .assert(
            "probe.ok",
            json!(true),
            0.9,
            &Conditions::new(),
            Provenance::new([seq]),
        )
        .unwrap();
    assert_eq!(c.outcome, Outcome::Created);
}

// ---------------------------------------------------------------------------------------
// Refutation with rivals, the rivals' bound, evidence that triggers, a damaged view
// ---------------------------------------------------------------------------------------

#[test]
fn refuting_the_value_promotes_a_rival_that_now_outweighs_it() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let rec = Recorder::open(dir.path(), manual(&clock, 0)).unwrap();
    let kb = rec.kb().unwrap();
    let none = Conditions::new();
    kb.assert(
        "door",
        json!("left"),
        0.9,
        &none,
        Provenance::new([obs(&rec)]),
    )
    .unwrap();
    let c = kb
        .assert(
            "door",
            json!("right"),
            0.85,
            &none,
            Provenance::new([obs(&rec)]),
        )
        .unwrap();
    assert_eq!(c.outcome, Outcome::Contested);
    let r = kb
        .refute("door", &json!("left"), Provenance::new([obs(&rec)]))
        .unwrap();
    assert_eq!(r.outcome, Outcome::Rejected);
    // 0.9 × 0.1 = 0.09 < 0.85: the rival takes the fact's place, with its own numbers;
    // the refuted value is remembered beside it, not as a rival.
    let f = kb.get("door").unwrap().unwrap();
    assert_eq!(f.value, json!("right"));
    assert!(close_to(f.confidence, 0.85), "{}", f.confidence);
    assert_eq!(f.status, Status::Confirmed);
    assert!(f.rivals.is_empty());
    assert_eq!(f.refuted.len(), 1);
    assert_eq!(f.refuted[0].value, json!("left"));
    assert!(close_to(f.refuted[0].confidence, 0.09));
    // The refuted value stays in the history.
    let history = kb.history("door").unwrap();
    assert_eq!(history.len(), 3);
    assert_eq!(history[1].1.as_ref().unwrap().value, json!("left"));
    rec.close().unwrap();
}

#[test]
fn a_fact_keeps_only_its_strongest_rivals() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let rec = Recorder::open(dir.path(), manual(&clock, 0)).unwrap();
    let kb = rec.kb().unwrap();
    let none = Conditions::new();
    kb.assert("door", json!(0), 0.95, &none, Provenance::new([obs(&rec)]))
        .unwrap();
    // 20 weaker claims, confidences 0.01 .. 0.20 in a scrambled order.
    for i in 0..20u32 {
        let c = f64::from((i * 7) % 20 + 1) / 100.0;
        let out = kb
            .assert("door", json!(i + 1), c, &none, Provenance::new([obs(&rec)]))
            .unwrap();
        assert_eq!(out.outcome, Outcome::Contested);
    }
    let f = kb.get("door").unwrap().unwrap();
    assert_eq!(f.rivals.len(), adjudicate::RIVALS_KEPT);
    let mut kept: Vec<f64> = f.rivals.iter().map(|r| r.confidence).collect();
    kept.sort_by(f64::total_cmp);
    let expected: Vec<f64> = (13..=20).map(|n| f64::from(n) / 100.0).collect();
    assert_eq!(kept, expected, "the 8 strongest rivals");
    rec.close().unwrap();
}

#[test]
fn evidence_of_a_trigger_kind_captures_the_incident() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let policy = Policy::builder()
        .rule("sensor.*", Tier::Summary { window_ns: SEC })
        .incident(blackbox::IncidentPolicy::new(&["failure.*"]))
        .build()
        .unwrap();
    let rec = Recorder::open(dir.path(), manual(&clock, 0).policy(policy)).unwrap();
    for i in 0..10u64 {
        clock.set_ns(T0 + i * MS);
        rec.record(&Event::new("sensor.imu").values(&[("ax", 0.1)]))
            .unwrap();
    }
    clock.set_ns(T0 + 20 * MS);
    let seq = rec
        .record_evidence(&Event::new("failure.slip").json(r#"{"force":3}"#))
        .unwrap();
    rec.close().unwrap();
    let recs = common::read_log(dir.path());
    let marker = recs
        .iter()
        .find_map(|r| match r {
            common::Rec::Incident { trigger_seq, .. } => Some(*trigger_seq),
            _ => None,
        })
        .expect("an incident marker");
    assert_eq!(
        marker, seq.0,
        "the marker names the evidence event as the trigger"
    );
    let preroll = recs
        .iter()
        .filter(|r| {
            matches!(
                r,
                common::Rec::Event {
                    tier: "preroll",
                    ..
                }
            )
        })
        .count();
    assert_eq!(preroll, 10, "the ring's events are written as pre-roll");
}

#[test]
fn a_view_fjall_cannot_open_is_rebuilt_from_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let rec = Recorder::open(dir.path(), manual(&clock, 0)).unwrap();
    let kb = rec.kb().unwrap();
    kb.assert(
        "door",
        json!("open"),
        0.7,
        &Conditions::new(),
        Provenance::new([obs(&rec)]),
    )
    .unwrap();
    let before = kb.view().dump().unwrap();
    rec.close().unwrap();
    drop(rec);
    // Damage the view: fjall's version marker becomes garbage.
    let marker = dir.path().join(blackbox::KB_DIR).join("version");
    assert!(
        marker.exists(),
        "fjall keeps a version marker at {}",
        marker.display()
    );
    std::fs::write(&marker, b"garbage").unwrap();
    let rec = Recorder::open(dir.path(), manual(&clock, 0)).unwrap();
    let kb = rec.kb().unwrap();
    assert_eq!(kb.view().dump().unwrap(), before);
    assert_eq!(kb.get("door").unwrap().unwrap().value, json!("open"));
    rec.close().unwrap();
}

#[test]
fn a_view_another_knowledge_base_holds_is_refused_not_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let first = Recorder::open(dir.path(), manual(&clock, 0)).unwrap();
    first
        .kb()
        .unwrap()
        .assert(
            "door",
            json!("open"),
            0.7,
            &Conditions::new(),
            Provenance::new([obs(&first)]),
        )
        .unwrap();
    // Closed, not dropped: its knowledge base still holds the view.
    first.close().unwrap();
    let second = Recorder::open(dir.path(), manual(&clock, 0)).unwrap();
    let err = second.kb().unwrap_err();
    assert!(
        err.to_string()
            .contains("another open knowledge base holds it"),
        "{err}"
    );
    drop(first);
    // Nothing was removed: once the first is dropped, the view opens as it was.
    let kb = second.kb().unwrap();
    assert_eq!(kb.version().unwrap(), 1);
    assert_eq!(kb.get("door").unwrap().unwrap().value, json!("open"));
    second.close().unwrap();
}

// ---------------------------------------------------------------------------------------
// Sound adjudication: a claim never weakens, rivals age, one observation counts once,
// refutations are remembered
// ---------------------------------------------------------------------------------------

/// Asserts `value` for `key` citing exactly `evidence`, without conditions.
fn claim_citing(
    rec: &Recorder,
    key: &str,
    value: Value,
    confidence: f64,
    evidence: &[Seq],
) -> Committed {
    rec.kb()
        .unwrap()
        .assert(
            key,
            value,
            confidence,
            &Conditions::new(),
            Provenance::new(evidence.iter().copied()),
        )
        .unwrap()
}

/// The confidence of `value` in `fact`: the fact's own, or a rival's.
fn confidence_of(fact: &Fact, value: &Value) -> Option<f64> {
    if fact.value == *value {
        return Some(fact.confidence);
    }
    fact.rivals
        .iter()
        .find(|r| r.value == *value)
        .map(|r| r.confidence)
}

#[test]
fn a_claim_never_leaves_an_unrefuted_value_weaker_than_the_claim_alone() {
    // Guards a past bug: corroboration was `c + (1 − c) · 0.5 · k`, so corroborate(0.1,
    // 0.99) = 0.5455: a fact at 0.6 survived "closed at 0.1, then closed at 0.99" but
    // fell to "closed at 0.99" alone.
    let (_dir, _clock, rec) = open_manual(0);
    let kb = rec.kb().unwrap();
    for key in ["weak.first", "strong.first", "alone"] {
        claim(&rec, key, json!("open"), 0.6);
    }
    claim(&rec, "weak.first", json!("closed"), 0.1);
    let (c, _) = claim(&rec, "weak.first", json!("closed"), 0.99);
    assert_eq!(c.outcome, Outcome::Superseded);
    claim(&rec, "strong.first", json!("closed"), 0.99);
    claim(&rec, "strong.first", json!("closed"), 0.1);
    claim(&rec, "alone", json!("closed"), 0.99);
    // Noisy-OR, strongest claim first: 0.99 + 0.1 − 0.99 · 0.1 = 0.991.
    let weak_first = fact(kb, "weak.first");
    let strong_first = fact(kb, "strong.first");
    let alone = fact(kb, "alone");
    for f in [&weak_first, &strong_first, &alone] {
        assert_eq!(f.value, json!("closed"), "{f:?}");
        assert!(f.confidence >= 0.99, "weaker than the claim alone: {f:?}");
        // The displaced value stays as an open contradiction, unweakened.
        assert_eq!(confidence_of(f, &json!("open")), Some(0.6), "{f:?}");
        assert_eq!(f.status, Status::Contested);
    }
    assert!(close_to(weak_first.confidence, 0.991), "{weak_first:?}");
    assert!(close_to(alone.confidence, 0.99), "{alone:?}");
    // The same two claims in the other order: the very same confidence, bit for bit.
    assert_eq!(
        weak_first.confidence.to_bits(),
        strong_first.confidence.to_bits()
    );
    assert_eq!(weak_first.claims, strong_first.claims);
}

#[test]
fn rivals_age_like_the_fact_they_challenge() {
    // Guards a past bug: only the held fact decayed; a rival kept its confidence of
    // long ago and could displace a fact fresher than itself.
    let (_dir, clock, rec) = open_manual(SEC);
    let kb = rec.kb().unwrap();
    claim(&rec, "door", json!("open"), 0.9);
    claim(&rec, "door", json!("closed"), 0.85);
    claim(&rec, "lamp", json!("on"), 0.9);
    claim(&rec, "lamp", json!("off"), 0.5);
    clock.advance_ns(SEC);
    // One half-life later everything the key holds is worth half: open 0.45, closed
    // 0.425; a weak claim for closed adds 0.425 + 0.1 − 0.0425 = 0.4825 > 0.45.
    let (c, _) = claim(&rec, "door", json!("closed"), 0.1);
    assert_eq!(c.outcome, Outcome::Superseded);
    let door = fact(kb, "door");
    assert!(close_to(door.confidence, 0.4825), "{door:?}");
    let open = confidence_of(&door, &json!("open")).unwrap();
    assert!(
        close_to(open, 0.45),
        "the displaced value aged too: {door:?}"
    );
    // A third value on the other key: every value there is worth half of what it was.
    let (c, _) = claim(&rec, "lamp", json!("flickering"), 0.3);
    assert_eq!(c.outcome, Outcome::Contested);
    let lamp = fact(kb, "lamp");
    assert_eq!(lamp.value, json!("on"));
    assert!(close_to(lamp.confidence, 0.45), "{lamp:?}");
    let off = confidence_of(&lamp, &json!("off")).unwrap();
    assert!(
        close_to(off, 0.25),
        "the rival aged like the fact: {lamp:?}"
    );
    assert_eq!(confidence_of(&lamp, &json!("flickering")), Some(0.3));
}

#[test]
fn a_claim_citing_only_evidence_the_value_holds_adds_no_confidence() {
    // Guards a past bug: the same observation cited twice counted twice, so `kb put`
    // twice with `--evidence 308` turned a hypothesis at 0.7 into a confirmed fact.
    let (_dir, _clock, rec) = open_manual(0);
    let kb = rec.kb().unwrap();
    let (e1, e2, e3) = (obs(&rec), obs(&rec), obs(&rec));
    let first = claim_citing(&rec, "door", json!("open"), 0.7, &[e1]);
    assert_eq!(first.outcome, Outcome::Created);
    let before = fact(kb, "door");
    for confidence in [0.7, 0.95] {
        let again = claim_citing(&rec, "door", json!("open"), confidence, &[e1]);
        assert_eq!(again.outcome.name(), "duplicate");
        assert_eq!(fact(kb, "door"), before, "a duplicate changed the fact");
    }
    let f = fact(kb, "door");
    assert_eq!((f.confidence, f.status), (0.7, Status::Hypothesis));
    assert_eq!(f.evidence_count, 1);
    // Partly new evidence counts in full: 0.7 + 0.7 − 0.49 = 0.91.
    let c = claim_citing(&rec, "door", json!("open"), 0.7, &[e1, e2]);
    assert_eq!(c.outcome, Outcome::Corroborated);
    let f = fact(kb, "door");
    assert!(close_to(f.confidence, 0.91), "{f:?}");
    assert_eq!((f.evidence_count, f.status), (2, Status::Confirmed));
    assert_eq!(f.provenance, vec![e1.0, e2.0]);
    let c = claim_citing(&rec, "door", json!("open"), 0.99, &[e2, e1]);
    assert_eq!(c.outcome.name(), "duplicate");
    assert!(close_to(fact(kb, "door").confidence, 0.91));
    // What one value holds does not count for another: the same observation read
    // another way is evidence for that value.
    let c = claim_citing(&rec, "door", json!("closed"), 0.3, &[e1]);
    assert_eq!(c.outcome, Outcome::Contested);
    // A counterexample counts once too.
    let r = kb
        .refute("door", &json!("closed"), Provenance::new([e3]))
        .unwrap();
    assert_eq!(r.outcome, Outcome::Refuted);
    let after = fact(kb, "door");
    let again = kb
        .refute("door", &json!("closed"), Provenance::new([e3]))
        .unwrap();
    assert_eq!(again.outcome.name(), "duplicate");
    assert_eq!(fact(kb, "door"), after);
}

#[test]
fn a_refuted_value_keeps_its_refutation_when_replaced_and_when_claimed_again() {
    // Guards a past bug: a refuted value that a rival replaced, or a refuted rival,
    // was forgotten, so claiming it again started afresh as if it had never failed.
    let (_dir, _clock, rec) = open_manual(0);
    let kb = rec.kb().unwrap();
    claim(&rec, "door", json!("open"), 0.9);
    claim(&rec, "door", json!("closed"), 0.5);
    let r = kb
        .refute("door", &json!("open"), Provenance::new([obs(&rec)]))
        .unwrap();
    assert_eq!(r.outcome, Outcome::Rejected);
    let f = fact(kb, "door");
    assert_eq!((f.value.clone(), f.confidence), (json!("closed"), 0.5));
    // Claimed again, the refuted value starts from its refuted confidence: its support
    // becomes 0.9 + 0.9 − 0.81 = 0.99, times 0.1 for the refutation: 0.099.
    let (c, _) = claim(&rec, "door", json!("open"), 0.9);
    assert_eq!(
        c.outcome,
        Outcome::Rejected,
        "the outcome says it stays rejected"
    );
    let f = fact(kb, "door");
    assert_eq!(f.value, json!("closed"), "{f:?}");
    assert_eq!(
        f.status,
        Status::Hypothesis,
        "a refuted value is no rival: {f:?}"
    );

    claim(&rec, "lamp", json!("on"), 0.8);
    claim(&rec, "lamp", json!("off"), 0.3);
    let r = kb
        .refute("lamp", &json!("off"), Provenance::new([obs(&rec)]))
        .unwrap();
    assert_eq!(r.outcome, Outcome::Refuted);
    assert_eq!(fact(kb, "lamp").status, Status::Confirmed);
    let (c, _) = claim(&rec, "lamp", json!("off"), 0.95);
    assert_eq!(c.outcome, Outcome::Rejected);
    let f = fact(kb, "lamp");
    assert_eq!((f.value.clone(), f.confidence), (json!("on"), 0.8));
    assert_eq!(f.status, Status::Confirmed, "{f:?}");
}
