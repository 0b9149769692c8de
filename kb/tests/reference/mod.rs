//! A reference model of the knowledge base's adjudication, written from the rule as
//! `docs/ARCHITECTURE.md` ("Adjudication") states it, and from nothing else: it calls no
//! adjudication code of the crate and shares none of its structure. A key is a map from
//! each value's JSON text to what the rule says the key keeps for that value; the fact
//! is derived from that map from scratch whenever it is read.
//!
//! The including test crate names the knowledge-base crate `kb` at its root (`use
//! blackbox_kb as kb;` or `use blackbox::kb;`): only its data types are used here, to
//! compare with what the implementation returns.

#![allow(dead_code, reason = "each including test uses a part of the model")]

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::kb::{Conditions, Fact, Outcome, Rival, Status};

// The constants, as the document's table gives them.
const CONFIRMED_AT: f64 = 0.8;
const REJECTED_BELOW: f64 = 0.2;
const REFUTATION_FACTOR: f64 = 0.1;
const EVIDENCE_KEPT: usize = 32;
const CLAIMS_KEPT: usize = 32;
const RIVALS_KEPT: usize = 8;
const REFUTED_KEPT: usize = 16;

/// Compact JSON text: what ties are broken by. serde_json's map keeps object keys
/// sorted, as the rule requires.
pub fn text(value: &impl serde::Serialize) -> String {
    serde_json::to_string(value).expect("JSON values serialize")
}

/// What the key keeps for one value.
#[derive(Debug, Clone, PartialEq)]
struct Held {
    value: Value,
    /// Confidences of the claims that counted (the kept ones, any order).
    claims: Vec<f64>,
    /// Seqs the claims cited.
    evidence: BTreeSet<u64>,
    /// Claims that counted.
    counted: u64,
    /// Refutations that counted.
    refutations: u64,
    /// Seqs the refutations cited.
    counter: BTreeSet<u64>,
    conditions: Conditions,
}

impl Held {
    fn new(value: &Value) -> Held {
        Held {
            value: value.clone(),
            claims: Vec::new(),
            evidence: BTreeSet::new(),
            counted: 0,
            refutations: 0,
            counter: BTreeSet::new(),
            conditions: Conditions::new(),
        }
    }

    /// Noisy-OR, `s ← min(1, max(s + k − s·k, s, k))` over the claims strongest first,
    /// from 0.
    fn support(&self) -> f64 {
        let mut claims = self.claims.clone();
        claims.sort_by(|a, b| b.partial_cmp(a).expect("claims are numbers"));
        let mut s: f64 = 0.0;
        for k in claims {
            s = f64::min(1.0, (s + k - s * k).max(s).max(k));
        }
        s
    }

    /// `s · 0.1^r`.
    fn confidence(&self) -> f64 {
        self.support() * REFUTATION_FACTOR.powi(i32::try_from(self.refutations).unwrap_or(i32::MAX))
    }

    fn refuted(&self) -> bool {
        self.refutations > 0
    }

    fn strongest_claims(&self) -> Vec<f64> {
        let mut claims = self.claims.clone();
        claims.sort_by(|a, b| b.partial_cmp(a).expect("claims are numbers"));
        claims
    }

    fn as_rival(&self) -> Rival {
        Rival {
            value: self.value.clone(),
            confidence: self.confidence(),
            claims: self.strongest_claims(),
            evidence_count: self.counted,
            conditions: self.conditions.clone(),
            provenance: self.evidence.iter().copied().collect(),
            refutations: self.refutations,
            counter_evidence: self.counter.iter().copied().collect(),
        }
    }
}

/// Whether `cited` brings a seq that `held` does not hold: once `held` holds 32, a seq
/// below all of them counts as held.
fn brings_new(held: &BTreeSet<u64>, cited: &[u64]) -> bool {
    let full = held.len() >= EVIDENCE_KEPT;
    let lowest = held.iter().next().copied();
    cited.iter().any(|s| {
        if held.contains(s) {
            return false;
        }
        !(full && lowest.is_some_and(|low| *s < low))
    })
}

/// `held` ∪ `cited`, keeping the 32 highest.
fn add_seqs(held: &mut BTreeSet<u64>, cited: &[u64]) {
    held.extend(cited.iter().copied());
    while held.len() > EVIDENCE_KEPT {
        let lowest = *held.iter().next().expect("not empty");
        held.remove(&lowest);
    }
}

/// A key as the rule describes it: every value it holds, and when it last changed.
#[derive(Debug, Clone, PartialEq)]
pub struct Key {
    name: String,
    /// By JSON text.
    values: BTreeMap<String, Held>,
    /// The refuted values cut from the fact's list (past its bound), by JSON text: the
    /// key no longer ranks them, but remembers them; a claim or a refutation of one
    /// takes it back.
    let_go: BTreeMap<String, Held>,
    /// The JSON texts of the values the last change let go, in the rule's order.
    just_let_go: Vec<String>,
    created: u64,
    updated: u64,
    /// The recorder time of the commit that last changed the key.
    updated_ns: u64,
}

/// The values of a key in the rule's order: confidence, highest first, then JSON text.
fn ranked(values: &BTreeMap<String, Held>) -> Vec<&Held> {
    let mut all: Vec<(&String, &Held)> = values.iter().collect();
    all.sort_by(|(ta, a), (tb, b)| {
        b.confidence()
            .partial_cmp(&a.confidence())
            .expect("confidences are numbers")
            .then_with(|| ta.cmp(tb))
    });
    all.into_iter().map(|(_, h)| h).collect()
}

impl Key {
    fn empty(name: &str, version: u64, now_ns: u64) -> Key {
        Key {
            name: name.to_owned(),
            values: BTreeMap::new(),
            let_go: BTreeMap::new(),
            just_let_go: Vec::new(),
            created: version,
            updated: version,
            updated_ns: now_ns,
        }
    }

    /// The fact's value (the first ranked).
    fn fact_value(&self) -> Option<&Value> {
        ranked(&self.values).first().map(|h| &h.value)
    }

    /// Everything ages by `0.5^(age / half-life)`; claims that reach 0 go.
    fn age_to(&mut self, now_ns: u64, half_life_ns: u64) {
        let age = now_ns - self.updated_ns;
        if half_life_ns == 0 || age == 0 {
            return;
        }
        let factor = 0.5f64.powf(age as f64 / half_life_ns as f64);
        for held in self.values.values_mut().chain(self.let_go.values_mut()) {
            held.claims = held
                .claims
                .iter()
                .map(|k| k * factor)
                .filter(|k| *k != 0.0)
                .collect();
        }
    }

    /// Cuts the lists to their bounds: a rival cut, the key no longer holds; a refuted
    /// value cut, it lets go and remembers.
    fn cut(&mut self) {
        self.just_let_go.clear();
        let order: Vec<(String, bool)> = ranked(&self.values)
            .iter()
            .map(|h| (text(&h.value), h.refuted()))
            .collect();
        let (mut rivals, mut refuted) = (0, 0);
        for (i, (t, is_refuted)) in order.iter().enumerate() {
            if i == 0 {
                continue;
            }
            let (count, bound) = if *is_refuted {
                (&mut refuted, REFUTED_KEPT)
            } else {
                (&mut rivals, RIVALS_KEPT)
            };
            *count += 1;
            if *count > bound
                && let Some(held) = self.values.remove(t)
                && *is_refuted
            {
                self.let_go.insert(t.clone(), held);
                self.just_let_go.push(t.clone());
            }
        }
    }

    /// What the key keeps for the value of JSON text `t`, ranked or let go.
    fn held(&self, t: &str) -> Option<&Held> {
        self.values.get(t).or_else(|| self.let_go.get(t))
    }

    /// Takes a value let go back among the ranked ones, as it was remembered.
    fn take_back(&mut self, t: &str) {
        if let Some(held) = self.let_go.remove(t) {
            self.values.insert(t.to_owned(), held);
        }
    }

    /// The refuted values the last change let go, as a commit carries them.
    /// Every value the key remembers having let go, by JSON text.
    pub fn remembered(&self) -> Vec<Rival> {
        self.let_go.values().map(Held::as_rival).collect()
    }

    pub fn let_go_now(&self) -> Vec<Rival> {
        self.just_let_go
            .iter()
            .filter_map(|t| self.let_go.get(t))
            .map(Held::as_rival)
            .collect()
    }

    fn changed(mut self, version: u64, now_ns: u64) -> Key {
        self.updated = version;
        self.updated_ns = now_ns;
        self.cut();
        self
    }

    /// A claim at time `now_ns`, committed as `version`. `None`: it changed nothing.
    #[expect(clippy::too_many_arguments, reason = "a claim has that many parts")]
    pub fn claim(
        before: Option<&Key>,
        name: &str,
        now_ns: u64,
        half_life_ns: u64,
        version: u64,
        value: &Value,
        k: f64,
        conditions: &Conditions,
        evidence: &[u64],
    ) -> (Outcome, Option<Key>) {
        let t = text(value);
        if let Some(held) = before.and_then(|b| b.held(&t))
            && !brings_new(&held.evidence, evidence)
        {
            return (Outcome::Duplicate, None);
        }
        let mut key = before
            .cloned()
            .unwrap_or_else(|| Key::empty(name, version, now_ns));
        key.age_to(now_ns, half_life_ns);
        key.take_back(&t);
        let held = key.values.entry(t).or_insert_with(|| Held::new(value));
        // Conditions: compared before the claim joins.
        let strongest = held.claims.iter().copied().fold(0.0, f64::max);
        if held.counted == 0
            || k > strongest
            || (k == strongest && text(conditions) < text(&held.conditions))
        {
            held.conditions = conditions.clone();
        }
        if k != 0.0 {
            held.claims.push(k);
            held.claims
                .sort_by(|a, b| b.partial_cmp(a).expect("claims are numbers"));
            held.claims.truncate(CLAIMS_KEPT);
        }
        add_seqs(&mut held.evidence, evidence);
        held.counted += 1;
        let refuted = held.refuted();
        let key = key.changed(version, now_ns);
        let outcome = match before {
            None => Outcome::Created,
            Some(_) if refuted => Outcome::Rejected,
            Some(b) if key.fact_value() == Some(value) => {
                if b.fact_value() == Some(value) {
                    Outcome::Corroborated
                } else {
                    Outcome::Superseded
                }
            }
            Some(_) => Outcome::Contested,
        };
        (outcome, Some(key))
    }

    /// A refutation at time `now_ns`, committed as `version`. `None`: it changed
    /// nothing.
    pub fn refute(
        before: Option<&Key>,
        name: &str,
        now_ns: u64,
        half_life_ns: u64,
        version: u64,
        value: &Value,
        evidence: &[u64],
    ) -> (Outcome, Option<Key>) {
        let t = text(value);
        let held_before = before.and_then(|b| b.held(&t));
        if let Some(held) = held_before
            && !brings_new(&held.counter, evidence)
        {
            return (Outcome::Duplicate, None);
        }
        let was_fact = before.and_then(Key::fact_value) == Some(value);
        let never_held = held_before.is_none();
        let mut key = before
            .cloned()
            .unwrap_or_else(|| Key::empty(name, version, now_ns));
        key.age_to(now_ns, half_life_ns);
        key.take_back(&t);
        let held = key.values.entry(t).or_insert_with(|| Held::new(value));
        held.refutations += 1;
        add_seqs(&mut held.counter, evidence);
        let key = key.changed(version, now_ns);
        let outcome = if was_fact || never_held {
            Outcome::Rejected
        } else {
            Outcome::Refuted
        };
        (outcome, Some(key))
    }

    /// The key's state given back by a revert committed as `version` at `now_ns`.
    pub fn restored(&self, version: u64, now_ns: u64) -> Key {
        let mut key = self.clone();
        key.updated = version;
        key.updated_ns = now_ns;
        key.just_let_go.clear();
        key
    }

    /// The key's fact, as the implementation's types carry it.
    pub fn fact(&self) -> Fact {
        let order = ranked(&self.values);
        let (first, rest) = order.split_first().expect("a key holds a value");
        let rivals: Vec<Rival> = rest
            .iter()
            .filter(|h| !h.refuted())
            .map(|h| h.as_rival())
            .collect();
        let refuted: Vec<Rival> = rest
            .iter()
            .filter(|h| h.refuted())
            .map(|h| h.as_rival())
            .collect();
        let confidence = first.confidence();
        let status = if confidence < REJECTED_BELOW {
            Status::Rejected
        } else if !rivals.is_empty() {
            Status::Contested
        } else if confidence >= CONFIRMED_AT {
            Status::Confirmed
        } else {
            Status::Hypothesis
        };
        let own = first.as_rival();
        Fact {
            key: self.name.clone(),
            value: own.value,
            confidence,
            claims: own.claims,
            evidence_count: own.evidence_count,
            status,
            conditions: own.conditions,
            provenance: own.provenance,
            refutations: own.refutations,
            counter_evidence: own.counter_evidence,
            created: self.created,
            updated: self.updated,
            rivals,
            refuted,
        }
    }

    /// The values this key's state holds rejected: the fact's value when its status is
    /// `rejected`, every refuted value, and every value let go; by JSON text.
    pub fn rejected(&self) -> BTreeMap<String, (Value, f64, u64)> {
        let fact = self.fact();
        let mut out = BTreeMap::new();
        for h in self.let_go.values() {
            out.insert(
                text(&h.value),
                (h.value.clone(), h.confidence(), h.refutations),
            );
        }
        if fact.status == Status::Rejected {
            out.insert(
                text(&fact.value),
                (fact.value.clone(), fact.confidence, fact.refutations),
            );
        }
        for r in &fact.refuted {
            out.insert(
                text(&r.value),
                (r.value.clone(), r.confidence, r.refutations),
            );
        }
        out
    }
}

/// How close two confidences must be to count as equal: the model and the
/// implementation may round differently in their last bits.
pub const TOLERANCE: f64 = 1e-12;

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= TOLERANCE
}

fn close_all(a: &[f64], b: &[f64]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| close(*x, *y))
}

/// `want` with each number replaced by `got`'s where the two are within
/// [`TOLERANCE`], so that `assert_eq!(got, like(got, want))` shows every difference
/// that is not rounding.
pub fn like(got: &Fact, want: &Fact) -> Fact {
    let mut want = want.clone();
    if close(got.confidence, want.confidence) {
        want.confidence = got.confidence;
    }
    if close_all(&got.claims, &want.claims) {
        want.claims.clone_from(&got.claims);
    }
    like_rivals(&got.rivals, &mut want.rivals);
    like_rivals(&got.refuted, &mut want.refuted);
    want
}

/// As [`like`], for lists of values: each number of `want` within [`TOLERANCE`] of
/// `got`'s is replaced by it.
pub fn like_rivals(got: &[Rival], want: &mut [Rival]) {
    for (g, w) in got.iter().zip(want.iter_mut()) {
        if close(g.confidence, w.confidence) {
            w.confidence = g.confidence;
        }
        if close_all(&g.claims, &w.claims) {
            w.claims.clone_from(&g.claims);
        }
    }
}

/// As [`like`], for an optional fact.
pub fn like_opt(got: Option<&Fact>, want: Option<&Fact>) -> Option<Fact> {
    match (got, want) {
        (Some(g), Some(w)) => Some(like(g, w)),
        (_, w) => w.cloned(),
    }
}
