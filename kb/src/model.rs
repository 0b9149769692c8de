//! What the knowledge base holds: facts, the claims that contradict them, and commits.
//!
//! Every type here is what a commit record carries in the log (as JSON, see
//! `docs/FORMAT.md`) and what the fjall view stores.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A knowledge-base version: dense, from 1. Version 0 is the empty base before any commit.
pub type Version = u64;

/// Where a fact holds: `{"level": 1}`. A fact holds in a context when every one of its
/// conditions is in the context with an equal value; a fact without conditions holds
/// everywhere.
pub type Conditions = BTreeMap<String, Value>;

/// How far a fact is believed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Believed, below the confirmation threshold.
    Hypothesis,
    /// Believed at or above the confirmation threshold, with no open contradiction.
    Confirmed,
    /// Believed, with at least one open contradiction (a rival claim that did not win).
    Contested,
    /// Refuted or worn below the rejection threshold: kept, so an agent does not retry it.
    Rejected,
}

impl Status {
    /// The status's name as written in records and printed by the command.
    pub fn name(self) -> &'static str {
        match self {
            Status::Hypothesis => "hypothesis",
            Status::Confirmed => "confirmed",
            Status::Contested => "contested",
            Status::Rejected => "rejected",
        }
    }
}

/// A value of a key other than its fact's: an open rival (never refuted) or a refuted
/// value (see [`Fact::refuted`]). It holds what adjudication weighs a value by, as of
/// the fact's `updated` version; `docs/ARCHITECTURE.md` ("Adjudication") gives the rule.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rival {
    /// The value.
    pub value: Value,
    /// Its confidence: the noisy-OR of its claims, times
    /// [`crate::adjudicate::REFUTATION_FACTOR`] per refutation.
    pub confidence: f64,
    /// The confidences of the claims that counted for it, decayed to the fact's
    /// `updated` version, strongest first (the strongest
    /// [`crate::adjudicate::CLAIMS_KEPT`]; claims at 0 are not kept).
    pub claims: Vec<f64>,
    /// How many claims counted for it (a claim citing only evidence it already held
    /// does not count).
    pub evidence_count: u64,
    /// The conditions of its strongest claim.
    pub conditions: Conditions,
    /// The distinct seqs of the log records its claims cited, ascending (the highest
    /// [`crate::adjudicate::PROVENANCE_KEPT`]).
    pub provenance: Vec<u64>,
    /// How many refutations counted against it.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub refutations: u64,
    /// The distinct seqs its refutations cited, ascending (the highest
    /// [`crate::adjudicate::PROVENANCE_KEPT`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub counter_evidence: Vec<u64>,
}

// serde's `skip_serializing_if` takes a reference.
#[expect(
    clippy::trivially_copy_pass_by_ref,
    reason = "serde passes a reference"
)]
fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// A fact: what the agent believes about a key, how strongly, and why. Its value is the
/// key's value of highest confidence; every other value claimed or refuted for the key
/// is kept beside it, as a rival or as a refuted value, until the key is retracted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fact {
    /// The key (see [`crate::validate_key`] for the rule).
    pub key: String,
    /// The believed value.
    pub value: Value,
    /// Confidence in `[0, 1]` as of the version that last changed the fact: the
    /// noisy-OR of the value's claims, times
    /// [`crate::adjudicate::REFUTATION_FACTOR`] per refutation.
    pub confidence: f64,
    /// The confidences of the claims that counted for the value, as of `updated`,
    /// strongest first (as [`Rival::claims`]).
    pub claims: Vec<f64>,
    /// How many claims counted for the value.
    pub evidence_count: u64,
    /// Hypothesis, confirmed, contested or rejected.
    pub status: Status,
    /// Where the fact holds: the conditions of the value's strongest claim.
    pub conditions: Conditions,
    /// The distinct seqs of the log records the value's claims cited, ascending (as
    /// [`Rival::provenance`]).
    pub provenance: Vec<u64>,
    /// How many refutations counted against the value.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub refutations: u64,
    /// The distinct seqs its refutations cited, ascending.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub counter_evidence: Vec<u64>,
    /// The version that created the key's fact (kept across supersessions).
    pub created: Version,
    /// The version that last changed it.
    pub updated: Version,
    /// The key's other values that were never refuted, strongest first: open
    /// contradictions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rivals: Vec<Rival>,
    /// The key's other values that were refuted, strongest first: remembered, so that
    /// claiming one again starts from its refuted confidence.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refuted: Vec<Rival>,
}

impl Fact {
    /// Whether the fact holds in `context`: each of its conditions is in the context
    /// with an equal value.
    pub fn holds_in(&self, context: &Conditions) -> bool {
        self.conditions
            .iter()
            .all(|(name, value)| context.get(name) == Some(value))
    }
}

/// What a write did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// The key had no fact: the claim became one.
    Created,
    /// The claim strengthened the fact's value, which stays the fact.
    Corroborated,
    /// The claim's value became the fact, displacing the one before (now a rival).
    Superseded,
    /// The claim's value is a rival that did not win.
    Contested,
    /// The claim or refutation cited only evidence already counted for it (for a
    /// claim, by the value; for a refutation, against it): it changed nothing.
    Duplicate,
    /// A refutation of a rival, or of a value already refuted: the value is refuted.
    Refuted,
    /// A refutation rejected the fact's value, or recorded a value never claimed as a
    /// failed hypothesis; or a claim of a refuted value, which stays rejected.
    Rejected,
    /// The key's fact was withdrawn.
    Retracted,
    /// Every key was restored to an earlier version's state.
    Reverted,
}

impl Outcome {
    /// The outcome's name as written in records and printed by the command.
    pub fn name(self) -> &'static str {
        match self {
            Outcome::Created => "created",
            Outcome::Corroborated => "corroborated",
            Outcome::Superseded => "superseded",
            Outcome::Contested => "contested",
            Outcome::Duplicate => "duplicate",
            Outcome::Refuted => "refuted",
            Outcome::Rejected => "rejected",
            Outcome::Retracted => "retracted",
            Outcome::Reverted => "reverted",
        }
    }
}

/// Which operation made a commit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "lowercase")]
pub enum Op {
    /// A claim that `key` is `value`.
    Assert {
        /// The key claimed.
        key: String,
        /// The claimed value.
        value: Value,
        /// The claim's confidence.
        confidence: f64,
        /// The conditions it was claimed under.
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        conditions: Conditions,
    },
    /// A counterexample: `key` is not `value`.
    Refute {
        /// The key refuted.
        key: String,
        /// The refuted value.
        value: Value,
    },
    /// The key's fact is withdrawn.
    Retract {
        /// The key withdrawn.
        key: String,
    },
    /// Every key goes back to its state at `version`.
    Revert {
        /// The version restored. Written as `target`: the op is flattened into the
        /// commit record, whose own `version` field is the commit's.
        #[serde(rename = "target")]
        version: Version,
    },
}

/// The operation in a line for people: `assert door = "open" (0.7)`, `refute door =
/// "open"`, `retract door`, `revert to v3`.
impl std::fmt::Display for Op {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Op::Assert {
                key,
                value,
                confidence,
                ..
            } => write!(f, "assert {key} = {value} ({confidence})"),
            Op::Refute { key, value } => write!(f, "refute {key} = {value}"),
            Op::Retract { key } => write!(f, "retract {key}"),
            Op::Revert { version } => write!(f, "revert to v{version}"),
        }
    }
}

/// One key's new state in a commit: `fact: None` means the key has no fact any more.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Change {
    /// The key changed.
    pub key: String,
    /// Its state after the commit.
    pub fact: Option<Fact>,
    /// The refuted values its fact let go in this commit (past
    /// [`crate::adjudicate::REFUTED_KEPT`]), as they were then: the knowledge base
    /// remembers them, so they stay refuted and listed by `rejected()`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub let_go: Vec<Rival>,
    /// For a revert that leaves the key a fact: the refuted values the key remembers
    /// again, as it remembered them at the version restored (each with the version
    /// that let it go). A view applies the revert from this alone, so it needs no
    /// history before the commit (a view started from a snapshot lacks it). `None` in
    /// commits written before it existed: the view then reads the key's history.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remembered: Option<Vec<LetGo>>,
}

/// A refuted value a key's fact let go and the key remembers: the version that let it
/// go, and the value's state then.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LetGo {
    /// The commit that let it go.
    pub version: Version,
    /// The value's state then.
    pub state: Rival,
}

/// A value a key remembers, with its key: an entry of [`SnapshotRecord::let_go`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KeyLetGo {
    /// The key.
    pub key: String,
    /// The commit that let the value go.
    pub version: Version,
    /// The value's state then.
    pub state: Rival,
}

/// The knowledge base as of one version, as its snapshot record carries it (type
/// [`crate::KB_SNAPSHOT_RECORD`]): everything a view needs to go on applying the
/// commits after that version, so the log's records before it may be pruned.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SnapshotRecord {
    /// The version it is as of (at least 1).
    pub version: Version,
    /// The time of that version's commit, ns since the epoch.
    pub time_ns: u64,
    /// The seq of that version's commit record.
    pub seq: u64,
    /// Every current fact, in key order.
    pub facts: Vec<Fact>,
    /// Every refuted value a fact let go that its key remembers, in key order.
    pub let_go: Vec<KeyLetGo>,
    /// The commit times of the versions the facts, the values let go and the
    /// rejections name (`updated`, and the versions that let go or rejected): what
    /// adjudication ages confidences by.
    pub times: BTreeMap<Version, u64>,
    /// Every value ever rejected up to the version (as
    /// [`crate::KnowledgeBase::rejected`] lists them).
    pub rejected: Vec<Rejection>,
}

/// A commit, as its log record carries it. Its time and seq are the record's.
///
/// A commit stores the states it produced, not only the operation: replaying the log
/// re-applies them as they were adjudicated, whatever the adjudication settings are
/// when the log is read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CommitRecord {
    /// The commit's version.
    pub version: Version,
    /// Who made it.
    pub author: String,
    /// Why (for a refutation, retraction or revert: the reason).
    pub message: String,
    /// The seqs of the log records that justify it (at least one).
    pub provenance: Vec<u64>,
    /// The operation.
    #[serde(flatten)]
    pub op: Op,
    /// What the operation did.
    pub outcome: Outcome,
    /// Every key it changed, with the key's new state.
    pub changes: Vec<Change>,
}

/// A commit with where and when the log holds it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Commit {
    /// The seq of its log record.
    pub seq: u64,
    /// Its log record's timestamp, ns since the epoch.
    pub time_ns: u64,
    /// The commit itself.
    #[serde(flatten)]
    pub record: CommitRecord,
}

/// What a successful write returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Committed {
    /// The new version.
    pub version: Version,
    /// What the write did.
    pub outcome: Outcome,
    /// The seq of the commit's log record.
    pub seq: u64,
}

/// A point in the knowledge base's history.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AsOf {
    /// The state right after this version (0: before any commit).
    Version(Version),
    /// The state of the last commit whose time is at or before this one (ns since the
    /// epoch).
    Time(u64),
}

/// Who makes a write and why: the log records that justify it, the author and the
/// message (the reason, for a refutation, a retraction or a revert).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Provenance {
    /// The seqs of the log records behind the write; at least one, each already in the
    /// log.
    pub evidence: Vec<u64>,
    /// Who makes the write.
    pub author: String,
    /// Why.
    pub message: String,
}

impl Provenance {
    /// Provenance citing `evidence` (seqs of log records).
    pub fn new(evidence: impl IntoIterator<Item = blackbox_log::Seq>) -> Provenance {
        Provenance {
            evidence: evidence.into_iter().map(|s| s.0).collect(),
            ..Provenance::default()
        }
    }

    /// Sets the author.
    #[must_use]
    pub fn author(mut self, author: impl Into<String>) -> Self {
        self.author = author.into();
        self
    }

    /// Sets the message (the reason).
    #[must_use]
    pub fn message(mut self, message: impl Into<String>) -> Self {
        self.message = message.into();
        self
    }
}

/// A value of a key that a commit left rejected (see [`crate::KnowledgeBase::rejected`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rejection {
    /// The key.
    pub key: String,
    /// The value rejected.
    pub value: Value,
    /// The commit that rejected it.
    pub version: Version,
    /// Its confidence right after that commit.
    pub confidence: f64,
    /// How many refutations it had then (0: rejected for a confidence under
    /// [`crate::adjudicate::REJECTED_BELOW`] alone, without a counterexample).
    pub refutations: u64,
}

/// One key's difference between two versions.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Difference {
    /// The key.
    pub key: String,
    /// Its fact at the first version.
    pub before: Option<Fact>,
    /// Its fact at the second version.
    pub after: Option<Fact>,
}
