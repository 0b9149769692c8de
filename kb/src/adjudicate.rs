//! Adjudication: how a claim or a refutation changes a key's fact.
//!
//! Pure functions of the current fact, the claim, the new version and the fact's age;
//! `docs/ARCHITECTURE.md` states the rule and the constants. The commit stores what
//! they decided, so changing these constants never changes a recorded history.

use serde_json::Value;

use crate::model::{Conditions, Fact, Outcome, Rival, Status, Version};

/// Confidence at or above which a fact without open contradictions is `confirmed`.
pub const CONFIRMED_AT: f64 = 0.8;

/// Confidence under which a fact is `rejected`.
pub const REJECTED_BELOW: f64 = 0.2;

/// How much of the remaining doubt a corroborating claim removes, times the claim's own
/// confidence: `c' = c + (1 - c) * CORROBORATION_GAIN * claim`. Each corroboration
/// helps less than the one before (diminishing returns), and confidence never reaches 1.
pub const CORROBORATION_GAIN: f64 = 0.5;

/// What a refutation multiplies the fact's confidence by. It is below
/// `REJECTED_BELOW`, so one counterexample rejects even a fact at confidence 1: ten
/// confirmations cannot outweigh it.
pub const REFUTATION_FACTOR: f64 = 0.1;

// One counterexample rejects any fact: the rule depends on it.
const _: () = assert!(REFUTATION_FACTOR * 1.0 < REJECTED_BELOW);

/// Default half-life of a fact's confidence when weighed against a conflicting claim:
/// one day.
pub const DEFAULT_HALF_LIFE_NS: u64 = 24 * 3600 * 1_000_000_000;

/// How many evidence seqs a fact keeps (the latest). Every commit keeps its own
/// evidence in full, so nothing is lost; this keeps a fact corroborated a million
/// times small.
pub const PROVENANCE_KEPT: usize = 32;

/// How many rivals a fact keeps: the strongest. A rival pushed out stays in the key's
/// history and in its commit; this keeps a much-contested fact, and every history entry
/// of it, small.
pub const RIVALS_KEPT: usize = 8;

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

/// `confidence` decayed by `age_ns` with the given half-life (0: no decay).
pub fn effective(confidence: f64, age_ns: u64, half_life_ns: u64) -> f64 {
    if half_life_ns == 0 || age_ns == 0 {
        return confidence;
    }
    confidence * (-(age_ns as f64) / half_life_ns as f64 * std::f64::consts::LN_2).exp()
}

/// `confidence` after a corroborating claim of confidence `claim`.
pub fn corroborate(confidence: f64, claim: f64) -> f64 {
    (confidence + (1.0 - confidence) * CORROBORATION_GAIN * claim).clamp(0.0, 1.0)
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

pub(crate) fn extend_provenance(provenance: &mut Vec<u64>, evidence: &[u64]) {
    provenance.extend_from_slice(evidence);
    if provenance.len() > PROVENANCE_KEPT {
        provenance.drain(..provenance.len() - PROVENANCE_KEPT);
    }
}

fn kept(evidence: &[u64]) -> Vec<u64> {
    let mut p = Vec::new();
    extend_provenance(&mut p, evidence);
    p
}

/// Adjudicates `claim` at `version` against the key's current fact, whose confidence is
/// `age_ns` old. Returns what happened and the key's new fact.
pub fn assert(
    current: Option<&Fact>,
    age_ns: u64,
    half_life_ns: u64,
    claim: &Claim<'_>,
    version: Version,
) -> (Outcome, Fact) {
    let Some(current) = current else {
        let fact = Fact {
            key: claim.key.to_owned(),
            value: claim.value.clone(),
            confidence: claim.confidence,
            evidence_count: 1,
            status: status(claim.confidence, &[]),
            conditions: claim.conditions.clone(),
            provenance: kept(claim.evidence),
            created: version,
            updated: version,
            rivals: Vec::new(),
        };
        return (Outcome::Created, fact);
    };
    let held = effective(current.confidence, age_ns, half_life_ns);
    let mut fact = current.clone();
    fact.updated = version;
    if current.value == *claim.value {
        fact.confidence = corroborate(held, claim.confidence);
        fact.evidence_count += 1;
        extend_provenance(&mut fact.provenance, claim.evidence);
        fact.status = status(fact.confidence, &fact.rivals);
        return (Outcome::Corroborated, fact);
    }
    // A different value. It may already be a rival: then the claim corroborates the
    // rival, which displaces the fact once it outweighs it.
    let (confidence, evidence_count, conditions, provenance, rival_at) =
        match fact.rivals.iter().position(|r| r.value == *claim.value) {
            Some(i) => {
                let r = &fact.rivals[i];
                let mut provenance = r.provenance.clone();
                extend_provenance(&mut provenance, claim.evidence);
                (
                    corroborate(r.confidence, claim.confidence),
                    r.evidence_count + 1,
                    r.conditions.clone(),
                    provenance,
                    Some(i),
                )
            }
            None => (
                claim.confidence,
                1,
                claim.conditions.clone(),
                kept(claim.evidence),
                None,
            ),
        };
    if let Some(i) = rival_at {
        fact.rivals.remove(i);
    }
    if confidence > held {
        fact.value = claim.value.clone();
        fact.confidence = confidence;
        fact.evidence_count = evidence_count;
        fact.conditions = conditions;
        fact.provenance = provenance;
        fact.status = status(confidence, &fact.rivals);
        return (Outcome::Superseded, fact);
    }
    fact.confidence = held;
    fact.rivals.push(Rival {
        value: claim.value.clone(),
        confidence,
        evidence_count,
        conditions,
        provenance,
        updated: version,
    });
    if fact.rivals.len() > RIVALS_KEPT {
        // The weakest goes; of equals, the oldest.
        let weakest = fact
            .rivals
            .iter()
            .enumerate()
            .min_by(|(_, a), (_, b)| {
                a.confidence
                    .total_cmp(&b.confidence)
                    .then(a.updated.cmp(&b.updated))
            })
            .map_or(0, |(i, _)| i);
        fact.rivals.remove(weakest);
    }
    fact.status = status(held, &fact.rivals);
    (Outcome::Contested, fact)
}

/// Adjudicates a refutation of `value` for `key` at `version`. `None` when the key holds
/// a fact that neither has this value nor a rival with it: there is nothing to refute.
pub fn refute(
    current: Option<&Fact>,
    age_ns: u64,
    half_life_ns: u64,
    key: &str,
    value: &Value,
    evidence: &[u64],
    version: Version,
) -> Option<(Outcome, Fact)> {
    let Some(current) = current else {
        // A failed hypothesis, remembered so that it is not tried again.
        let fact = Fact {
            key: key.to_owned(),
            value: value.clone(),
            confidence: 0.0,
            evidence_count: 0,
            status: Status::Rejected,
            conditions: Conditions::new(),
            provenance: kept(evidence),
            created: version,
            updated: version,
            rivals: Vec::new(),
        };
        return Some((Outcome::Rejected, fact));
    };
    let mut fact = current.clone();
    fact.updated = version;
    fact.confidence = effective(current.confidence, age_ns, half_life_ns);
    if current.value == *value {
        fact.confidence *= REFUTATION_FACTOR;
        extend_provenance(&mut fact.provenance, evidence);
        // A rival that now outweighs the refuted value takes its place; the refuted
        // value stays in the key's history.
        let strongest = fact
            .rivals
            .iter()
            .enumerate()
            .max_by(|(_, a), (_, b)| a.confidence.total_cmp(&b.confidence))
            .map(|(i, r)| (i, r.confidence));
        if let Some((i, c)) = strongest
            && c > fact.confidence
        {
            let r = fact.rivals.remove(i);
            fact.value = r.value;
            fact.confidence = r.confidence;
            fact.evidence_count = r.evidence_count;
            fact.conditions = r.conditions;
            fact.provenance = r.provenance;
            fact.status = status(fact.confidence, &fact.rivals);
            return Some((Outcome::Rejected, fact));
        }
        fact.status = status(fact.confidence, &fact.rivals);
        let outcome = if fact.status == Status::Rejected {
            Outcome::Rejected
        } else {
            Outcome::Refuted
        };
        return Some((outcome, fact));
    }
    let i = fact.rivals.iter().position(|r| r.value == *value)?;
    fact.rivals.remove(i);
    fact.status = status(fact.confidence, &fact.rivals);
    Some((Outcome::Refuted, fact))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decay_halves_at_the_half_life() {
        assert!((effective(0.8, 10, 10) - 0.4).abs() < 1e-12);
        assert!((effective(0.8, 20, 10) - 0.2).abs() < 1e-12);
        assert!((effective(0.8, 20, 0) - 0.8).abs() < 1e-12);
    }

    #[test]
    fn corroboration_has_diminishing_returns() {
        let mut c = 0.5;
        let mut last_gain = 1.0;
        for _ in 0..20 {
            let next = corroborate(c, 0.9);
            let gain = next - c;
            assert!(
                gain > 0.0 && gain < last_gain,
                "gain {gain} after {last_gain}"
            );
            last_gain = gain;
            c = next;
        }
        assert!(c < 1.0);
    }

    #[test]
    fn one_refutation_rejects_a_fact_at_any_confidence() {
        assert_eq!(status(1.0 * REFUTATION_FACTOR, &[]), Status::Rejected);
    }
}
