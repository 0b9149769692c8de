//! Adjudication: how a claim or a refutation changes a key's fact.
//!
//! Pure functions of the key's current fact, the operation, the new version and the
//! fact's age. `docs/ARCHITECTURE.md` ("Adjudication") states the rule, its constants
//! and why independent operations give the same facts in any order: every value of a
//! key keeps sets and multisets (its claims, its evidence, its refutations), and the
//! fact follows from them. The commit stores what was decided, so changing these
//! constants never changes a recorded history.

use std::cmp::Ordering;

use serde::Serialize;
use serde_json::Value;

use crate::model::{Conditions, Fact, Outcome, Rival, Status, Version};

/// Confidence at or above which a fact without open contradictions is `confirmed`.
pub const CONFIRMED_AT: f64 = 0.8;

/// Confidence under which a fact is `rejected`.
pub const REJECTED_BELOW: f64 = 0.2;

/// What each refutation multiplies a value's confidence by. It is below
/// `REJECTED_BELOW`, so one counterexample rejects a value whatever its support, and
/// keeps it rejected: claims raise the support, never above 1.
pub const REFUTATION_FACTOR: f64 = 0.1;

// One counterexample rejects any value, for good: the rule depends on it.
const _: () = assert!(REFUTATION_FACTOR * 1.0 < REJECTED_BELOW);

/// Default half-life of every claim's confidence: one day.
pub const DEFAULT_HALF_LIFE_NS: u64 = 24 * 3600 * 1_000_000_000;

/// How many evidence seqs a value keeps for it, and how many against it: the highest.
/// Once a value holds this many, a cited seq below all of them counts as held (it may
/// be one that was let go), so an observation never counts twice. Every commit keeps
/// its own evidence in full.
pub const PROVENANCE_KEPT: usize = 32;

/// How many claim confidences a value keeps: the strongest. Its support is the
/// noisy-OR of those; a weaker claim beyond them adds its evidence, not its confidence.
pub const CLAIMS_KEPT: usize = 32;

/// How many rivals a fact keeps: the strongest. A rival pushed out stays in the key's
/// history and in its commit; this keeps a much-contested fact, and every history entry
/// of it, small.
pub const RIVALS_KEPT: usize = 8;

/// How many refuted values a fact keeps: the strongest. One pushed out is let go by the
/// fact, not forgotten: the commit carries it ([`Adjudicated::let_go`]), the view
/// remembers it, and a later claim or refutation of it starts from that state
/// ([`assert`]'s and [`refute`]'s `remembered`), so it stays refuted and listed by
/// [`crate::KnowledgeBase::rejected`].
pub const REFUTED_KEPT: usize = 16;

/// A key's new state after a write that changed it.
#[derive(Debug, Clone, PartialEq)]
pub struct Adjudicated {
    /// The key's new fact.
    pub fact: Fact,
    /// The refuted values the fact no longer holds since this write (past
    /// [`REFUTED_KEPT`]), each as it was then: they are remembered, not forgotten.
    pub let_go: Vec<Rival>,
}

/// A claim being adjudicated.
#[derive(Debug, Clone, PartialEq)]
pub struct Claim<'a> {
    /// The key claimed.
    pub key: &'a str,
    /// The claimed value.
    pub value: &'a Value,
    /// The claim's confidence, in `[0, 1]`.
    pub confidence: f64,
    /// Where the claim holds.
    pub conditions: &'a Conditions,
    /// The seqs behind it.
    pub evidence: &'a [u64],
}

/// `confidence` decayed by `age_ns`: times `0.5^(age / half-life)` (half-life 0: no
/// decay).
pub fn effective(confidence: f64, age_ns: u64, half_life_ns: u64) -> f64 {
    if half_life_ns == 0 || age_ns == 0 {
        return confidence;
    }
    confidence * 0.5f64.powf(age_ns as f64 / half_life_ns as f64)
}

/// The support of a value with these claims: their noisy-OR, `1 − Π(1 − k)`, folded as
/// `s ← s + k − s·k` over the claims strongest first from `s = 0`, each step kept
/// within `[max(s, k), 1]` (where it is exactly; rounding alone could leave it below:
/// `1e-17 + 1 − 1e-17` is `0.9999999999999999`). The fold's every step is symmetric and
/// its order is fixed by sorting, so the result is a function of the multiset of
/// claims, bit for bit; one claim alone gives exactly its confidence.
pub fn support(claims: &[f64]) -> f64 {
    let mut sorted = claims.to_vec();
    sorted.sort_by(|a, b| b.total_cmp(a));
    sorted
        .iter()
        .fold(0.0, |s, &k| (s + k - s * k).max(s.max(k)).min(1.0))
}

/// A value's confidence: its support times [`REFUTATION_FACTOR`] per refutation.
pub fn confidence(claims: &[f64], refutations: u64) -> f64 {
    let r = i32::try_from(refutations).unwrap_or(i32::MAX);
    support(claims) * REFUTATION_FACTOR.powi(r)
}

/// The status a fact of this confidence and these rivals has.
pub fn status(confidence: f64, rivals: &[Rival]) -> Status {
    if confidence < REJECTED_BELOW {
        Status::Rejected
    } else if !rivals.is_empty() {
        Status::Contested
    } else if confidence >= CONFIRMED_AT {
        Status::Confirmed
    } else {
        Status::Hypothesis
    }
}

/// The order values and conditions are told apart by when their confidences tie: their
/// compact JSON text (object keys are sorted, as serde_json's map keeps them).
fn json_text(value: &impl Serialize) -> String {
    serde_json::to_string(value).unwrap_or_default()
}

/// Adds the seqs of `cited` that `held` does not hold yet; false when there is none, so
/// what cites them adds nothing. Once `held` is full, a seq below all it holds counts as
/// held: it may be one that was let go.
fn merge_evidence(held: &mut Vec<u64>, cited: &[u64]) -> bool {
    let floor = if held.len() >= PROVENANCE_KEPT {
        held.iter().copied().min()
    } else {
        None
    };
    let before = held.len();
    for &seq in cited {
        if !held.contains(&seq) && floor.is_none_or(|f| seq > f) {
            held.push(seq);
        }
    }
    if held.len() == before {
        return false;
    }
    held.sort_unstable();
    if held.len() > PROVENANCE_KEPT {
        held.drain(..held.len() - PROVENANCE_KEPT);
    }
    true
}

/// A value the key has not held: no claim, no refutation.
fn unheard(value: &Value) -> Rival {
    Rival {
        value: value.clone(),
        confidence: 0.0,
        claims: Vec::new(),
        evidence_count: 0,
        conditions: Conditions::new(),
        provenance: Vec::new(),
        refutations: 0,
        counter_evidence: Vec::new(),
    }
}

/// Every value the key holds, its fact's first, then `remembered` if the fact does not
/// hold its value, each decayed by `age_ns`.
fn values_of(
    fact: Option<&Fact>,
    remembered: Option<&Rival>,
    age_ns: u64,
    half_life_ns: u64,
) -> Vec<Rival> {
    let Some(fact) = fact else {
        return Vec::new();
    };
    let mut values = Vec::with_capacity(2 + fact.rivals.len() + fact.refuted.len());
    values.push(Rival {
        value: fact.value.clone(),
        confidence: fact.confidence,
        claims: fact.claims.clone(),
        evidence_count: fact.evidence_count,
        conditions: fact.conditions.clone(),
        provenance: fact.provenance.clone(),
        refutations: fact.refutations,
        counter_evidence: fact.counter_evidence.clone(),
    });
    values.extend(fact.rivals.iter().cloned());
    values.extend(fact.refuted.iter().cloned());
    if let Some(r) = remembered
        && !values.iter().any(|v| v.value == r.value)
    {
        values.push(r.clone());
    }
    for v in &mut values {
        for k in &mut v.claims {
            *k = effective(*k, age_ns, half_life_ns);
        }
        v.claims.retain(|&k| k > 0.0);
    }
    values
}

/// The index of `value` in `values`, added as an unheard value if absent.
fn index_of(values: &mut Vec<Rival>, value: &Value) -> usize {
    match values.iter().position(|v| v.value == *value) {
        Some(i) => i,
        None => {
            values.push(unheard(value));
            values.len() - 1
        }
    }
}

/// The key's fact from all its values: the value of highest confidence (of equal ones,
/// the first by JSON text), its rivals and its refuted values, strongest first, each
/// list cut to its bound (the refuted values cut are let go, to be remembered).
fn assemble(key: &str, values: Vec<Rival>, created: Version, updated: Version) -> Adjudicated {
    let mut ranked: Vec<(String, Rival)> = values
        .into_iter()
        .map(|mut v| {
            v.claims.sort_by(|a, b| b.total_cmp(a));
            v.claims.truncate(CLAIMS_KEPT);
            v.confidence = confidence(&v.claims, v.refutations);
            (json_text(&v.value), v)
        })
        .collect();
    ranked.sort_by(|(ta, a), (tb, b)| {
        b.confidence
            .total_cmp(&a.confidence)
            .then_with(|| ta.cmp(tb))
    });
    let mut rest = ranked.into_iter().map(|(_, v)| v);
    let Some(held) = rest.next() else {
        unreachable!("a key being adjudicated holds at least the value it concerns");
    };
    let (mut refuted, mut rivals): (Vec<Rival>, Vec<Rival>) = rest.partition(|v| v.refutations > 0);
    rivals.truncate(RIVALS_KEPT);
    let let_go = refuted.split_off(refuted.len().min(REFUTED_KEPT));
    let fact = Fact {
        key: key.to_owned(),
        status: status(held.confidence, &rivals),
        value: held.value,
        confidence: held.confidence,
        claims: held.claims,
        evidence_count: held.evidence_count,
        conditions: held.conditions,
        provenance: held.provenance,
        refutations: held.refutations,
        counter_evidence: held.counter_evidence,
        created,
        updated,
        rivals,
        refuted,
    };
    Adjudicated { fact, let_go }
}

/// Adjudicates `claim` at `version` against the key's current fact, whose confidences
/// are `age_ns` old, and `remembered`: the claimed value's state when the fact let it
/// go, aged to the fact's `updated` version, if the fact let it go (ignored when the
/// fact holds the value). Returns what happened and the key's new state, or `None`
/// when the claim changes nothing (outcome [`Outcome::Duplicate`]: every seq it cites
/// is already counted for its value).
pub fn assert(
    current: Option<&Fact>,
    remembered: Option<&Rival>,
    age_ns: u64,
    half_life_ns: u64,
    claim: &Claim<'_>,
    version: Version,
) -> (Outcome, Option<Adjudicated>) {
    let mut values = values_of(current, remembered, age_ns, half_life_ns);
    let i = index_of(&mut values, claim.value);
    let target = &mut values[i];
    if !merge_evidence(&mut target.provenance, claim.evidence) {
        return (Outcome::Duplicate, None);
    }
    // The value's conditions are those of its strongest claim; of equal ones, the
    // first by JSON text. A value without a claim yet takes the claim's.
    let k = claim.confidence;
    let strongest = match target.claims.iter().copied().reduce(f64::max) {
        Some(s) => Some(s),
        None if target.evidence_count > 0 => Some(0.0),
        None => None,
    };
    let takes_conditions = match strongest {
        None => true,
        Some(s) => match k.partial_cmp(&s) {
            Some(Ordering::Greater) => true,
            Some(Ordering::Equal) => json_text(claim.conditions) < json_text(&target.conditions),
            _ => false,
        },
    };
    if takes_conditions {
        target.conditions = claim.conditions.clone();
    }
    if k > 0.0 {
        target.claims.push(k);
    }
    target.evidence_count = target.evidence_count.saturating_add(1);
    let refuted = target.refutations > 0;
    let created = current.map_or(version, |f| f.created);
    let fact = assemble(claim.key, values, created, version);
    let outcome = match current {
        None => Outcome::Created,
        Some(_) if refuted => Outcome::Rejected,
        Some(before) if fact.fact.value == *claim.value => {
            if before.value == *claim.value {
                Outcome::Corroborated
            } else {
                Outcome::Superseded
            }
        }
        Some(_) => Outcome::Contested,
    };
    (outcome, Some(fact))
}

/// Adjudicates a refutation of `value` for `key` at `version`, citing `evidence`.
/// `remembered` is as for [`assert`]. Returns what happened and the key's new state, or
/// `None` when the refutation changes nothing (outcome [`Outcome::Duplicate`]: every
/// seq it cites is already counted against the value). A value the key never held is
/// remembered as a failed hypothesis.
#[expect(
    clippy::too_many_arguments,
    reason = "a refutation has that many parts"
)]
pub fn refute(
    current: Option<&Fact>,
    remembered: Option<&Rival>,
    age_ns: u64,
    half_life_ns: u64,
    key: &str,
    value: &Value,
    evidence: &[u64],
    version: Version,
) -> (Outcome, Option<Adjudicated>) {
    let mut values = values_of(current, remembered, age_ns, half_life_ns);
    let known = values.iter().any(|v| v.value == *value);
    let was_fact = current.is_some_and(|f| f.value == *value);
    let i = index_of(&mut values, value);
    let target = &mut values[i];
    if !merge_evidence(&mut target.counter_evidence, evidence) {
        return (Outcome::Duplicate, None);
    }
    target.refutations = target.refutations.saturating_add(1);
    let created = current.map_or(version, |f| f.created);
    let fact = assemble(key, values, created, version);
    let outcome = if was_fact || !known {
        Outcome::Rejected
    } else {
        Outcome::Refuted
    };
    (outcome, Some(fact))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decay_halves_at_the_half_life() {
        assert_eq!(effective(0.8, 10, 10), 0.4);
        assert_eq!(effective(0.8, 20, 10), 0.2);
        assert_eq!(effective(0.8, 20, 0), 0.8);
        assert_eq!(effective(0.8, 0, 10), 0.8);
    }

    #[test]
    fn one_claim_alone_gives_exactly_its_confidence() {
        for k in [0.0, 0.1, 0.2, 0.3, 0.7, 0.8, 0.99, 1.0] {
            assert_eq!(support(&[k]), k);
            assert_eq!(confidence(&[k], 0), k);
        }
    }

    #[test]
    fn support_is_the_noisy_or_whatever_the_order_of_the_claims() {
        // 1 − 0.5 · 0.4 · 0.9 = 0.82
        let orders = [
            [0.5, 0.6, 0.1],
            [0.6, 0.5, 0.1],
            [0.1, 0.6, 0.5],
            [0.1, 0.5, 0.6],
        ];
        let first = support(&orders[0]);
        assert!((first - 0.82).abs() < 1e-15, "{first}");
        for claims in orders {
            assert_eq!(support(&claims).to_bits(), first.to_bits());
        }
        assert_eq!(support(&[]), 0.0);
        assert_eq!(support(&[1.0, 0.3]), 1.0);
        // Rounding never leaves the support below a claim.
        assert_eq!(support(&[1.0, 1e-17]), 1.0);
    }

    #[test]
    fn one_refutation_rejects_a_value_at_any_support() {
        assert!(confidence(&[1.0], 1) < REJECTED_BELOW);
        assert_eq!(status(confidence(&[1.0, 1.0], 1), &[]), Status::Rejected);
        assert_eq!(confidence(&[1.0], u64::MAX), 0.0);
    }

    #[test]
    fn values_are_told_apart_by_their_json_text_with_sorted_keys() {
        // Ties go to the first by text: that needs one text per value, whatever order
        // its object's keys were written in.
        let a: Value = serde_json::from_str(r#"{"b":1,"a":[2,{"d":3,"c":4}]}"#).unwrap_or_default();
        assert_eq!(json_text(&a), r#"{"a":[2,{"c":4,"d":3}],"b":1}"#);
    }

    #[test]
    fn evidence_counts_once_and_a_full_set_presumes_older_seqs_held() {
        let mut held = Vec::new();
        assert!(merge_evidence(&mut held, &[5, 3, 5]));
        assert_eq!(held, [3, 5]);
        assert!(!merge_evidence(&mut held, &[5, 3]));
        assert!(merge_evidence(&mut held, &[3, 4]));
        assert_eq!(held, [3, 4, 5]);
        let mut full: Vec<u64> = (100..100 + PROVENANCE_KEPT as u64).collect();
        assert!(!merge_evidence(&mut full, &[7, 99]), "below all it holds");
        assert!(merge_evidence(&mut full, &[7, 1000]));
        assert_eq!(full.len(), PROVENANCE_KEPT);
        assert_eq!(full.first(), Some(&101));
        assert_eq!(full.last(), Some(&1000));
        assert!(
            !merge_evidence(&mut full, &[100]),
            "let go, so presumed held"
        );
    }
}
