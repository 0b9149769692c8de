//! The knowledge base as plain data: every version's keys as the adjudication rule
//! (`adjudication`, written from docs/ARCHITECTURE.md) holds them, with the time and
//! seq of its commit; retracts and reverts as the document says them.

use std::collections::BTreeMap;

use blackbox::kb::{Fact, Outcome, Version};

use super::adjudication::Key;

/// Every version of the knowledge base, from 0 (empty).
#[derive(Debug)]
pub struct KbModel {
    /// `states[v]`: every key after version v.
    pub states: Vec<BTreeMap<String, Key>>,
    /// `times[v]`, `seqs[v]`: the commit time and log seq of version v (unused at 0).
    pub times: Vec<u64>,
    pub seqs: Vec<u64>,
}

/// What a write is expected to do: commit with an outcome and key changes, or be
/// refused.
#[derive(Debug)]
pub enum Expected {
    Commit(Outcome, BTreeMap<String, Option<Key>>),
    NotFound,
    UnknownVersion { version: Version, latest: Version },
}

impl KbModel {
    pub fn new() -> KbModel {
        KbModel {
            states: vec![BTreeMap::new()],
            times: vec![0],
            seqs: vec![0],
        }
    }

    pub fn latest(&self) -> Version {
        (self.states.len() - 1) as Version
    }

    pub fn current(&self) -> &BTreeMap<String, Key> {
        &self.states[self.states.len() - 1]
    }

    /// Every key's fact after version `v`.
    pub fn facts(&self, v: Version) -> BTreeMap<String, Fact> {
        self.states[usize::try_from(v).unwrap_or(usize::MAX)]
            .iter()
            .map(|(k, key)| (k.clone(), key.fact()))
            .collect()
    }

    /// The version current at time `t`: the last commit at or before it.
    pub fn version_at(&self, t: u64) -> Version {
        (1..self.times.len())
            .rev()
            .find(|&v| self.times[v] <= t)
            .unwrap_or(0) as Version
    }

    /// A claim.
    #[expect(clippy::too_many_arguments, reason = "a claim has that many parts")]
    pub fn claim(
        &self,
        key: &str,
        now: u64,
        half_life: u64,
        value: &serde_json::Value,
        confidence: f64,
        conditions: &blackbox::Conditions,
        evidence: &[u64],
    ) -> Expected {
        let version = self.latest() + 1;
        let (outcome, state) = Key::claim(
            self.current().get(key),
            key,
            now,
            half_life,
            version,
            value,
            confidence,
            conditions,
            evidence,
        );
        Expected::Commit(outcome, one(key, state))
    }

    /// A refutation.
    pub fn refute(
        &self,
        key: &str,
        now: u64,
        half_life: u64,
        value: &serde_json::Value,
        evidence: &[u64],
    ) -> Expected {
        let version = self.latest() + 1;
        let (outcome, state) = Key::refute(
            self.current().get(key),
            key,
            now,
            half_life,
            version,
            value,
            evidence,
        );
        Expected::Commit(outcome, one(key, state))
    }

    /// A retraction: the key loses its fact, or the write is refused if it has none.
    pub fn retract(&self, key: &str) -> Expected {
        if self.current().contains_key(key) {
            Expected::Commit(Outcome::Retracted, BTreeMap::from([(key.to_owned(), None)]))
        } else {
            Expected::NotFound
        }
    }

    /// A revert to `target`: each key whose fact differs from its fact then gets that
    /// state back (changed by the revert), or loses its fact if it had none.
    pub fn revert(&self, target: Version, now: u64) -> Expected {
        let latest = self.latest();
        if target == 0 || target > latest {
            return Expected::UnknownVersion {
                version: target,
                latest,
            };
        }
        let version = latest + 1;
        let then = &self.states[usize::try_from(target).unwrap_or(usize::MAX)];
        let now_keys = self.current();
        let mut changes = BTreeMap::new();
        for name in then.keys().chain(now_keys.keys()) {
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
        Expected::Commit(Outcome::Reverted, changes)
    }

    /// Commits a version at `time_ns`, record `seq`.
    pub fn push(&mut self, time_ns: u64, seq: u64, changes: BTreeMap<String, Option<Key>>) {
        let mut state = self.current().clone();
        for (key, new) in changes {
            match new {
                Some(k) => state.insert(key, k),
                None => state.remove(&key),
            };
        }
        self.states.push(state);
        self.times.push(time_ns);
        self.seqs.push(seq);
    }

    /// A crash kept the log up to `last_seq`: the versions whose commits went are gone.
    pub fn keep_up_to(&mut self, last_seq: Option<u64>) {
        let keep = (1..self.seqs.len())
            .take_while(|&v| Some(self.seqs[v]) <= last_seq)
            .count()
            + 1;
        self.states.truncate(keep);
        self.times.truncate(keep);
        self.seqs.truncate(keep);
    }
}

fn one(key: &str, state: Option<Key>) -> BTreeMap<String, Option<Key>> {
    state
        .map(|s| BTreeMap::from([(key.to_owned(), Some(s))]))
        .unwrap_or_default()
}
