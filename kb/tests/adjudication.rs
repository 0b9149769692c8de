//! Property tests of adjudication (`blackbox_kb::adjudicate`), on its pure functions:
//!
//! - `the_implementation_agrees_with_the_reference_model`: random claims and refutations
//!   on one key, with evidence drawn from a small pool (so duplicates and partly known
//!   evidence are common) or a wide one (so a value outgrows its 32 kept seqs), many
//!   values (so the rival and refuted bounds are reached) or few (so a value outgrows
//!   its 32 kept claims), a moving clock and a
//!   half-life of 0 or 10 ns: every outcome and every fact equals the reference model's
//!   (`tests/reference`), written from `docs/ARCHITECTURE.md` alone;
//! - `many_refutations_agree_with_the_model_and_none_is_forgotten`: mostly refutations
//!   of 40 values, so the refuted bound is passed and values let go come back: what
//!   each step lets go agrees with the model too, and every value refuted is rejected
//!   when claimed again;
//! - `independent_operations_at_the_same_time_give_the_same_facts_in_any_order`: from a
//!   random state, a batch of claims and refutations citing no seq in common, made at
//!   one clock reading (or at any times without decay), gives the same fact bit for bit
//!   in two orders;
//! - `a_claim_raises_only_its_own_value_and_never_below_the_claim`, and
//!   `a_refutation_lowers_only_its_own_value`: one operation against a random state;
//! - `more_evidence_for_a_value_never_lowers_it`: a run with one more independent claim
//!   ends with that value at least as strong, and every other value the same.
//!
//! Long mode: `PROPTEST_CASES=1000 cargo test -p blackbox-kb --release --test adjudication`.

use std::collections::{BTreeMap, BTreeSet};

use blackbox_kb as kb;
use kb::adjudicate::{self, Claim};
use kb::{Conditions, Fact, Outcome};
use proptest::prelude::*;
use serde_json::{Value, json};

mod reference;

const KEY: &str = "door";
/// Where fresh evidence starts: above every seq the pools draw from.
const FRESH: u64 = 1_000_000;

fn value_of(i: usize) -> Value {
    match i {
        0 => json!("open"),
        1 => json!("closed"),
        2 => json!({"x": 1.5, "a": [1, "b"]}),
        3 => json!(7),
        4 => Value::Null,
        n => json!(format!("v{n}")),
    }
}

fn conditions_of(i: usize) -> Conditions {
    let pairs: &[(&str, Value)] = match i {
        0 => &[],
        1 => &[("level", json!(1))],
        2 => &[("level", json!(2))],
        _ => &[("level", json!(1)), ("mode", json!("fast"))],
    };
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), v.clone()))
        .collect()
}

fn confidence() -> impl Strategy<Value = f64> {
    prop_oneof![
        Just(0.0),
        Just(1.0),
        Just(0.8),
        Just(0.2),
        Just(0.5),
        0.0..=1.0f64,
    ]
}

#[derive(Debug, Clone)]
enum Op {
    Claim {
        value: usize,
        confidence: f64,
        conditions: usize,
        evidence: Vec<u64>,
    },
    Refute {
        value: usize,
        evidence: Vec<u64>,
    },
}

impl Op {
    fn evidence(&self) -> &[u64] {
        match self {
            Op::Claim { evidence, .. } | Op::Refute { evidence, .. } => evidence,
        }
    }

    fn with_evidence(mut self, seqs: Vec<u64>) -> Op {
        match &mut self {
            Op::Claim { evidence, .. } | Op::Refute { evidence, .. } => *evidence = seqs,
        }
        self
    }
}

fn evidence(pool: u64) -> impl Strategy<Value = Vec<u64>> {
    prop::collection::vec(1..=pool, 1..=3)
}

/// An operation on one of `values` values, citing seqs from `1..=pool`.
fn op(values: usize, pool: u64) -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..values, confidence(), 0..4usize, evidence(pool)).prop_map(
            |(value, confidence, conditions, evidence)| Op::Claim {
                value,
                confidence,
                conditions,
                evidence,
            }
        ),
        1 => (0..values, evidence(pool)).prop_map(|(value, evidence)| Op::Refute { value, evidence }),
    ]
}

#[derive(Debug, Clone)]
struct Step {
    advance_ns: u64,
    op: Op,
}

fn step(values: usize, pool: u64) -> impl Strategy<Value = Step> {
    (prop_oneof![Just(0u64), 0..40u64], op(values, pool))
        .prop_map(|(advance_ns, op)| Step { advance_ns, op })
}

/// A run: a half-life and its steps. Small pools make duplicates, wide ones overflow a
/// value's kept evidence (and, on few values, its kept claims); many values overflow the
/// rival and refuted bounds.
fn run() -> impl Strategy<Value = (u64, Vec<Step>)> {
    let shape = prop_oneof![
        (Just(3usize), Just(12u64)),
        (Just(2usize), Just(400u64)),
        (Just(6usize), Just(400u64)),
        (Just(30usize), Just(60u64)),
        (Just(40usize), Just(2000u64)),
    ];
    (prop_oneof![Just(0u64), Just(10u64)], shape).prop_flat_map(|(half_life, (values, pool))| {
        (
            Just(half_life),
            prop::collection::vec(step(values, pool), 1..120),
        )
    })
}

/// A run of mostly refutations of many values: the refuted bound is passed and values
/// let go are claimed and refuted again.
fn refuting_run() -> impl Strategy<Value = (u64, Vec<Step>)> {
    let many = |pool| {
        prop_oneof![
            1 => op(40, pool),
            3 => (0..40usize, evidence(pool)).prop_map(|(value, evidence)| Op::Refute { value, evidence }),
        ]
    };
    (
        prop_oneof![Just(0u64), Just(10u64)],
        prop_oneof![Just(30u64), Just(3000u64)],
    )
        .prop_flat_map(move |(half_life, pool)| {
            let step = (prop_oneof![Just(0u64), 0..40u64], many(pool))
                .prop_map(|(advance_ns, op)| Step { advance_ns, op });
            (Just(half_life), prop::collection::vec(step, 20..150))
        })
}

/// The implementation's side: the key's fact, when it last changed, and the refuted
/// values it let go, with when (as the knowledge base's view remembers them).
#[derive(Debug, Clone, Default)]
struct Impl {
    fact: Option<Fact>,
    updated_ns: u64,
    let_go: BTreeMap<String, (u64, kb::Rival)>,
    /// The values the last operation let go.
    last_let_go: Vec<kb::Rival>,
}

impl Impl {
    /// The state of `value` when the fact let it go, aged to the fact's last change,
    /// when the fact does not hold it.
    fn remembered(&self, value: &Value, half_life_ns: u64) -> Option<kb::Rival> {
        let fact = self.fact.as_ref()?;
        let held = fact.value == *value
            || fact
                .rivals
                .iter()
                .chain(&fact.refuted)
                .any(|r| r.value == *value);
        if held {
            return None;
        }
        let (then_ns, rival) = self.let_go.get(&reference::text(value))?;
        let mut rival = rival.clone();
        for k in &mut rival.claims {
            *k = adjudicate::effective(*k, self.updated_ns - then_ns, half_life_ns);
        }
        Some(rival)
    }

    fn apply(&mut self, op: &Op, now_ns: u64, half_life_ns: u64, version: u64) -> Outcome {
        let age = if self.fact.is_some() {
            now_ns - self.updated_ns
        } else {
            0
        };
        let (outcome, state) = match op {
            Op::Claim {
                value,
                confidence,
                conditions,
                evidence,
            } => {
                let value = value_of(*value);
                let conditions = conditions_of(*conditions);
                let claim = Claim {
                    key: KEY,
                    value: &value,
                    confidence: *confidence,
                    conditions: &conditions,
                    evidence,
                };
                let remembered = self.remembered(&value, half_life_ns);
                adjudicate::assert(
                    self.fact.as_ref(),
                    remembered.as_ref(),
                    age,
                    half_life_ns,
                    &claim,
                    version,
                )
            }
            Op::Refute { value, evidence } => {
                let value = value_of(*value);
                let remembered = self.remembered(&value, half_life_ns);
                adjudicate::refute(
                    self.fact.as_ref(),
                    remembered.as_ref(),
                    age,
                    half_life_ns,
                    KEY,
                    &value,
                    evidence,
                    version,
                )
            }
        };
        self.last_let_go.clear();
        if let Some(state) = state {
            self.last_let_go.clone_from(&state.let_go);
            for r in state.let_go {
                self.let_go.insert(reference::text(&r.value), (now_ns, r));
            }
            self.fact = Some(state.fact);
            self.updated_ns = now_ns;
        }
        outcome
    }
}

/// The model's side.
#[derive(Debug, Clone, Default)]
struct Model {
    key: Option<reference::Key>,
}

impl Model {
    fn apply(&mut self, op: &Op, now_ns: u64, half_life_ns: u64, version: u64) -> Outcome {
        let (outcome, key) = match op {
            Op::Claim {
                value,
                confidence,
                conditions,
                evidence,
            } => reference::Key::claim(
                self.key.as_ref(),
                KEY,
                now_ns,
                half_life_ns,
                version,
                &value_of(*value),
                *confidence,
                &conditions_of(*conditions),
                evidence,
            ),
            Op::Refute { value, evidence } => reference::Key::refute(
                self.key.as_ref(),
                KEY,
                now_ns,
                half_life_ns,
                version,
                &value_of(*value),
                evidence,
            ),
        };
        if key.is_some() {
            self.key = key;
        }
        outcome
    }
}

/// Runs `steps` from `start` (clock at `now_ns`, next version `version`) on the
/// implementation; returns the outcomes.
fn drive(
    state: &mut Impl,
    steps: &[Step],
    now_ns: &mut u64,
    half_life_ns: u64,
    version: &mut u64,
) -> Vec<Outcome> {
    steps
        .iter()
        .map(|s| {
            *now_ns += s.advance_ns;
            *version += 1;
            state.apply(&s.op, *now_ns, half_life_ns, *version)
        })
        .collect()
}

/// The fact with its version fields cleared: what order-independence compares.
fn unversioned(fact: Option<Fact>) -> Option<Fact> {
    fact.map(|mut f| {
        f.created = 0;
        f.updated = 0;
        f
    })
}

/// Every value the fact holds: JSON text → (confidence, refuted).
fn strengths(fact: Option<&Fact>) -> BTreeMap<String, (f64, bool)> {
    let Some(f) = fact else {
        return BTreeMap::new();
    };
    let mut out = BTreeMap::new();
    out.insert(reference::text(&f.value), (f.confidence, f.refutations > 0));
    for r in f.rivals.iter().chain(&f.refuted) {
        out.insert(reference::text(&r.value), (r.confidence, r.refutations > 0));
    }
    out
}

/// Gives each operation of `ops` fresh seqs of its own (as many as it cited), above
/// every seq used elsewhere: the operations become pairwise independent.
fn independent(ops: Vec<Op>, from: u64) -> Vec<Op> {
    let mut next = from;
    ops.into_iter()
        .map(|op| {
            let n = op.evidence().len() as u64;
            let seqs = (next..next + n).collect();
            next += n;
            op.with_evidence(seqs)
        })
        .collect()
}

fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: cases(256),
        ..ProptestConfig::default()
    })]

    /// Guards "the implementation follows the documented rule": the model is a separate
    /// implementation written from docs/ARCHITECTURE.md, and both must give the same
    /// outcome and the same fact after every step.
    #[test]
    fn the_implementation_agrees_with_the_reference_model((half_life, steps) in run()) {
        agrees(half_life, &steps)?;
    }

    /// Guards a past bug: a refuted value past the 16 a fact keeps was forgotten in the
    /// commit that refuted it. With many refutations of many values, what each step
    /// lets go, every outcome and every fact equal the model's, and every value ever
    /// refuted is rejected when claimed again with certainty.
    #[test]
    fn many_refutations_agree_with_the_model_and_none_is_forgotten(
        (half_life, steps) in refuting_run()
    ) {
        agrees(half_life, &steps)?;
        let mut actual = Impl::default();
        let mut now = 1_000u64;
        let mut refuted = BTreeSet::new();
        for (i, s) in steps.iter().enumerate() {
            now += s.advance_ns;
            actual.apply(&s.op, now, half_life, i as u64 + 1);
            if let Op::Refute { value, .. } = s.op {
                refuted.insert(value);
            }
        }
        let mut version = steps.len() as u64;
        for value in refuted {
            version += 1;
            let claim = Op::Claim { value, confidence: 1.0, conditions: 0, evidence: vec![FRESH + version] };
            let mut again = actual.clone();
            prop_assert_eq!(again.apply(&claim, now, half_life, version), Outcome::Rejected, "{}", value);
        }
    }
}

/// Runs `steps` on the implementation and on the model: every outcome, every fact and
/// what each step lets go must agree.
fn agrees(half_life: u64, steps: &[Step]) -> Result<(), TestCaseError> {
    {
        let mut actual = Impl::default();
        let mut model = Model::default();
        let mut now = 1_000u64;
        for (i, s) in steps.iter().enumerate() {
            now += s.advance_ns;
            let version = i as u64 + 1;
            let got = actual.apply(&s.op, now, half_life, version);
            let want = model.apply(&s.op, now, half_life, version);
            prop_assert_eq!(got, want, "step {}: {:?}", i, s);
            if got != Outcome::Duplicate {
                let mut want_let_go = model
                    .key
                    .as_ref()
                    .map(reference::Key::let_go_now)
                    .unwrap_or_default();
                reference::like_rivals(&actual.last_let_go, &mut want_let_go);
                prop_assert_eq!(&actual.last_let_go, &want_let_go, "step {}: {:?}", i, s);
            }
            let want_fact = model.key.as_ref().map(reference::Key::fact);
            prop_assert_eq!(
                actual.fact.clone(),
                reference::like_opt(actual.fact.as_ref(), want_fact.as_ref()),
                "step {}: {:?}",
                i,
                s
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: cases(256),
        ..ProptestConfig::default()
    })]

    /// Guards "the order of independent claims and refutations made at the same time
    /// does not change the outcome": from any state, the same batch of pairwise
    /// independent operations at one clock reading (or, without decay, at any times)
    /// gives the same fact in two orders, bit for bit; only the version fields differ.
    #[test]
    fn independent_operations_at_the_same_time_give_the_same_facts_in_any_order(
        half_life in prop_oneof![Just(0u64), Just(10u64)],
        prior in prop::collection::vec(step(5, 12), 0..12),
        advance in 0..40u64,
        (batch, order) in prop::collection::vec((op(5, 12), 0..20u64), 1..8).prop_flat_map(|b| {
            let n = b.len();
            (Just(b), Just((0..n).collect::<Vec<_>>()).prop_shuffle())
        }),
    ) {
        let mut start = Impl::default();
        let (mut now, mut version) = (1_000u64, 0u64);
        drive(&mut start, &prior, &mut now, half_life, &mut version);
        let (ops, gaps): (Vec<Op>, Vec<u64>) = batch.into_iter().unzip();
        let ops = independent(ops, FRESH);
        let run_in = |order: &[usize]| {
            let mut state = start.clone();
            let mut t = now + advance;
            let mut v = version;
            for (n, &i) in order.iter().enumerate() {
                // Without decay, times do not matter: each operation may come later.
                if half_life == 0 && n > 0 {
                    t += gaps[i];
                }
                v += 1;
                let outcome = state.apply(&ops[i], t, half_life, v);
                assert_ne!(outcome, Outcome::Duplicate, "fresh evidence counts");
            }
            unversioned(state.fact)
        };
        let given: Vec<usize> = (0..ops.len()).collect();
        let a = run_in(&given);
        let b = run_in(&order);
        prop_assert_eq!(&a, &b, "order {:?} of {:?}", order, ops);
        let bits = |f: &Option<Fact>| f.as_ref().map(|f| f.confidence.to_bits());
        prop_assert_eq!(bits(&a), bits(&b));
    }

    /// Guards "support is monotone and a claim never leaves an unrefuted value weaker
    /// than the claim alone": a claim with new evidence, at the state's own time, leaves
    /// every other value exactly as it was and its own value at least as strong, at
    /// least the claim's confidence if never refuted, and still the fact if it was.
    #[test]
    fn a_claim_raises_only_its_own_value_and_never_below_the_claim(
        half_life in prop_oneof![Just(0u64), Just(10u64)],
        prior in prop::collection::vec(step(5, 12), 0..16),
        value in 0..5usize,
        k in confidence(),
        conditions in 0..4usize,
    ) {
        let mut state = Impl::default();
        let (mut now, mut version) = (1_000u64, 0u64);
        drive(&mut state, &prior, &mut now, half_life, &mut version);
        let before = strengths(state.fact.as_ref());
        let was_fact = state.fact.as_ref().map(|f| f.value.clone());
        // At the key's own time: nothing ages, only the claim acts.
        let t = if state.fact.is_some() { state.updated_ns } else { now };
        let claim = Op::Claim { value, confidence: k, conditions, evidence: vec![FRESH] };
        let outcome = state.apply(&claim, t, half_life, version + 1);
        prop_assert_ne!(outcome, Outcome::Duplicate);
        let after = strengths(state.fact.as_ref());
        let v = reference::text(&value_of(value));
        for (t, (c, refuted)) in &before {
            if *t != v {
                prop_assert_eq!(after.get(t), Some(&(*c, *refuted)), "{} changed", t);
            }
        }
        let (c, refuted) = after[&v];
        prop_assert!(c >= before.get(&v).map_or(0.0, |b| b.0), "{} fell", v);
        if !refuted {
            prop_assert!(c >= k, "{} at {} after a claim at {}", v, c, k);
        }
        if was_fact == Some(value_of(value)) {
            prop_assert_eq!(state.fact.as_ref().map(|f| f.value.clone()), Some(value_of(value)));
        }
    }

    /// Guards "a refutation counts against its own value only": every other value stays
    /// as it was, the refuted one is rejected, below `REJECTED_BELOW`.
    #[test]
    fn a_refutation_lowers_only_its_own_value(
        half_life in prop_oneof![Just(0u64), Just(10u64)],
        prior in prop::collection::vec(step(5, 12), 0..16),
        value in 0..5usize,
    ) {
        let mut state = Impl::default();
        let (mut now, mut version) = (1_000u64, 0u64);
        drive(&mut state, &prior, &mut now, half_life, &mut version);
        let before = strengths(state.fact.as_ref());
        let t = if state.fact.is_some() { state.updated_ns } else { now };
        let refutation = Op::Refute { value, evidence: vec![FRESH] };
        prop_assert_ne!(state.apply(&refutation, t, half_life, version + 1), Outcome::Duplicate);
        let after = strengths(state.fact.as_ref());
        let v = reference::text(&value_of(value));
        for (t, (c, refuted)) in &before {
            if *t != v {
                prop_assert_eq!(after.get(t), Some(&(*c, *refuted)), "{} changed", t);
            }
        }
        let (c, refuted) = after[&v];
        prop_assert!(refuted);
        prop_assert!(c < adjudicate::REJECTED_BELOW);
        prop_assert!(c <= before.get(&v).map_or(0.0, |b| b.0));
    }

    /// Guards "more evidence for a value never lowers it": the same run with one more
    /// independent claim for a value, made at the time of the step before it, ends with
    /// that value at least as strong and every other value the same (to rounding: the
    /// extra commit may split one ageing in two, `0.5^a · 0.5^b` for `0.5^(a+b)`).
    #[test]
    fn more_evidence_for_a_value_never_lowers_it(
        half_life in prop_oneof![Just(0u64), Just(10u64)],
        steps in prop::collection::vec(step(5, 12), 1..20),
        at in any::<prop::sample::Index>(),
        value in 0..5usize,
        k in confidence(),
        conditions in 0..4usize,
    ) {
        let at = at.index(steps.len() + 1);
        let extra = Step {
            advance_ns: 0,
            op: Op::Claim { value, confidence: k, conditions, evidence: vec![FRESH] },
        };
        let mut with = steps.clone();
        with.insert(at, extra);
        // Both runs end with the same commit at the same time (a refutation of a value
        // nothing else names), so both are read aged to that time.
        let probe = Step {
            advance_ns: 0,
            op: Op::Refute { value: 99, evidence: vec![FRESH + 1] },
        };
        let mut without = steps.clone();
        without.push(probe.clone());
        with.push(probe);
        let end = |steps: &[Step]| {
            let mut state = Impl::default();
            let (mut now, mut version) = (1_000u64, 0u64);
            drive(&mut state, steps, &mut now, half_life, &mut version);
            strengths(state.fact.as_ref())
        };
        let (without, with) = (end(&without), end(&with));
        let v = reference::text(&value_of(value));
        let keys: BTreeSet<&String> = without.keys().chain(with.keys()).collect();
        let tolerance = reference::TOLERANCE;
        for t in keys {
            let (a, b) = (without.get(t), with.get(t));
            if *t == v {
                let (b, _) = b.copied().unwrap_or_default();
                prop_assert!(
                    b >= a.map_or(0.0, |a| a.0) - tolerance,
                    "{}: {:?} without, {} with", t, a, b
                );
            } else {
                let same = match (a, b) {
                    (Some(a), Some(b)) => a.1 == b.1 && (a.0 - b.0).abs() <= tolerance,
                    _ => false,
                };
                prop_assert!(same, "{}: {:?} without, {:?} with", t, a, b);
            }
        }
    }
}
