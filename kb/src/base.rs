//! The knowledge base: adjudicated writes, appended to the log as commits, read from the
//! fjall view.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use blackbox_log::ChainKey;
use parking_lot::Mutex;
use serde_json::Value;

use crate::adjudicate::{self, Adjudicated, Claim};
use crate::error::{Error, Result};
use crate::model::{
    AsOf, Change, Commit, CommitRecord, Committed, Conditions, Difference, Fact, Op, Outcome,
    Provenance, Rejection, Rival, Version,
};
use crate::view::View;

/// Where a commit landed in the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Appended {
    /// The commit record's seq.
    pub seq: u64,
    /// The commit record's timestamp, ns since the epoch.
    pub time_ns: u64,
}

/// Why the log did not take a commit.
#[derive(Debug)]
pub enum SinkError {
    /// A cited seq is not in the log before the commit.
    EvidenceNotInLog {
        /// The seq cited.
        seq: u64,
        /// The seq the commit would have taken.
        next_seq: u64,
    },
    /// The commit record is larger than the log's record limit: nothing was appended.
    TooLarge {
        /// Bytes of the commit record.
        size_bytes: usize,
        /// The log's record limit.
        limit_bytes: usize,
    },
    /// The recorder failed or is closed.
    Failed(Box<dyn std::error::Error + Send + Sync>),
}

/// The log's side of the knowledge base: appends commit records. The recorder
/// implements it with its writer thread, so commits take their place among the events.
pub trait Sink: Send + Sync + std::fmt::Debug {
    /// Appends `payload` as a knowledge-base record once every seq of `evidence` is
    /// checked to be in the log before it, and returns where it landed. The record must
    /// be written to the operating system (not only buffered in the process) before
    /// this returns.
    ///
    /// # Errors
    ///
    /// [`SinkError`].
    fn append(&self, payload: Vec<u8>, evidence: &[u64]) -> Result<Appended, SinkError>;

    /// Appends `payload` as a snapshot record ([`crate::KB_SNAPSHOT_RECORD`]): the
    /// knowledge base as of its latest version. The knowledge base calls it under its
    /// write lock, so no commit falls between the state it read and the record. As
    /// `append`, written to the operating system before it returns.
    ///
    /// # Errors
    ///
    /// [`SinkError`].
    fn append_snapshot(&self, payload: Vec<u8>) -> Result<Appended, SinkError>;

    /// Whether the log wants a fresh snapshot (it has none, or the commits after its
    /// last one passed its bound): the knowledge base writes one after its next commit,
    /// and when it opens.
    fn snapshot_due(&self) -> bool {
        false
    }

    /// The clock adjudication weighs recency with, ns since the epoch.
    fn now_ns(&self) -> u64;
}

/// Settings of the knowledge base.
#[derive(Debug, Clone)]
pub struct Options {
    /// Half-life of a fact's confidence when weighed against a conflicting claim (0: no
    /// decay). Default: [`adjudicate::DEFAULT_HALF_LIFE_NS`].
    pub half_life_ns: u64,
    /// The log's chain key, when the log is keyed (to verify what catch-up reads).
    pub log_key: Option<ChainKey>,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            half_life_ns: adjudicate::DEFAULT_HALF_LIFE_NS,
            log_key: None,
        }
    }
}

/// The knowledge base: versioned facts with provenance. Writes are adjudicated, appended
/// to the log through the [`Sink`], then applied to the view; reads go to the view.
#[derive(Debug)]
pub struct KnowledgeBase {
    view: View,
    sink: Box<dyn Sink>,
    log_dir: PathBuf,
    options: Options,
    /// Serializes writes: versions are dense and each is adjudicated against the last.
    /// Holds the last version this process committed to the log.
    write: Mutex<Version>,
}

/// The maximal length of a key, in bytes.
pub const KEY_BYTES_MAX: usize = 256;

/// Checks a key against the rule: 1 to 256 bytes of UTF-8 without control characters
/// (U+0000 to U+001F and U+007F to U+009F).
///
/// # Errors
///
/// [`Error::InvalidKey`] naming the rule broken.
pub fn validate_key(key: &str) -> Result<()> {
    let reason = if key.is_empty() {
        "it is empty"
    } else if key.len() > KEY_BYTES_MAX {
        "it is longer than 256 bytes"
    } else if key.chars().any(char::is_control) {
        "it holds a control character"
    } else {
        return Ok(());
    };
    Err(Error::InvalidKey {
        key: key.to_owned(),
        reason,
    })
}

/// Checks a confidence: a number in `[0, 1]`.
///
/// # Errors
///
/// [`Error::InvalidConfidence`].
pub fn validate_confidence(confidence: f64) -> Result<()> {
    if confidence.is_finite() && (0.0..=1.0).contains(&confidence) {
        Ok(())
    } else {
        Err(Error::InvalidConfidence { confidence })
    }
}

impl KnowledgeBase {
    /// Opens the view in `view_dir` and brings it up to date with the log in `log_dir`;
    /// later commits go through `sink`.
    ///
    /// # Errors
    ///
    /// [`Error::View`], [`Error::Log`], [`Error::BadRecord`].
    pub fn open(
        view_dir: impl AsRef<Path>,
        log_dir: impl AsRef<Path>,
        sink: Box<dyn Sink>,
        options: Options,
    ) -> Result<KnowledgeBase> {
        let view = View::open(view_dir)?;
        let log_dir = log_dir.as_ref().to_owned();
        view.catch_up(&log_dir, options.log_key.clone(), None)?;
        let kb = KnowledgeBase {
            view,
            sink,
            log_dir,
            options,
            write: Mutex::new(0),
        };
        if kb.sink.snapshot_due() {
            // A log written before snapshots existed gets its first one here. One that
            // fails (larger than a record, say) leaves the knowledge base usable; it is
            // tried again after the next commit.
            let write = kb.write.lock();
            let _ = kb.snapshot_locked(*write);
        }
        Ok(kb)
    }

    /// Appends a snapshot of the knowledge base as of its latest version to the log
    /// (nothing before the first commit): the log's records before it may then be
    /// pruned without losing what the knowledge base holds. The knowledge base writes
    /// one by itself when the log asks ([`Sink::snapshot_due`]).
    ///
    /// # Errors
    ///
    /// [`Error::CommitTooLarge`] when the snapshot does not fit a log record;
    /// [`Error::Recorder`], [`Error::View`], [`Error::Log`].
    pub fn write_snapshot(&self) -> Result<Option<Appended>> {
        let write = self.write.lock();
        self.snapshot_locked(*write)
    }

    /// Writes a snapshot; the caller holds the write lock, which holds `committed`.
    fn snapshot_locked(&self, committed: Version) -> Result<Option<Appended>> {
        if self.view.version()? < committed {
            self.view
                .catch_up(&self.log_dir, self.options.log_key.clone(), None)?;
        }
        let Some(record) = self.view.snapshot_record()? else {
            return Ok(None);
        };
        let payload = serde_json::to_vec(&record).map_err(|e| Error::InvalidJson {
            field: "value",
            reason: e.to_string(),
        })?;
        self.sink
            .append_snapshot(payload)
            .map(Some)
            .map_err(sink_error)
    }

    /// The view, for every read.
    pub fn view(&self) -> &View {
        &self.view
    }

    /// Claims that `key` is `value` with `confidence`, where `conditions` hold. The
    /// claim is adjudicated with every value the key holds (see `docs/ARCHITECTURE.md`,
    /// "Adjudication"); one citing only evidence the value already holds changes nothing
    /// and is committed with [`Outcome::Duplicate`].
    ///
    /// # Errors
    ///
    /// [`Error::InvalidKey`], [`Error::InvalidConfidence`], [`Error::NoEvidence`],
    /// [`Error::EvidenceNotInLog`] (nothing committed); [`Error::Recorder`],
    /// [`Error::View`].
    pub fn assert(
        &self,
        key: &str,
        value: Value,
        confidence: f64,
        conditions: &Conditions,
        provenance: Provenance,
    ) -> Result<Committed> {
        validate_key(key)?;
        validate_confidence(confidence)?;
        self.commit(provenance, |kb, version, now, evidence| {
            let current = kb.view.get(key)?;
            let age = kb.age(current.as_ref(), now)?;
            let remembered = kb.remembered(current.as_ref(), &value)?;
            let claim = Claim {
                key,
                value: &value,
                confidence,
                conditions,
                evidence,
            };
            let (outcome, fact) = adjudicate::assert(
                current.as_ref(),
                remembered.as_ref(),
                age,
                kb.options.half_life_ns,
                &claim,
                version,
            );
            let op = Op::Assert {
                key: key.to_owned(),
                value: value.clone(),
                confidence,
                conditions: conditions.clone(),
            };
            Ok((op, outcome, changed(key, fact)))
        })
    }

    /// Records a counterexample: `key` is not `value`. The value is rejected whatever
    /// its support, and stays so when claimed again; if it was the fact's value, the
    /// strongest other value may take its place. A value the key never held is
    /// remembered as a failed hypothesis. A refutation citing only evidence already
    /// counted against the value changes nothing ([`Outcome::Duplicate`]).
    ///
    /// # Errors
    ///
    /// As [`KnowledgeBase::assert`].
    pub fn refute(&self, key: &str, value: &Value, provenance: Provenance) -> Result<Committed> {
        validate_key(key)?;
        self.commit(provenance, |kb, version, now, evidence| {
            let current = kb.view.get(key)?;
            let age = kb.age(current.as_ref(), now)?;
            let remembered = kb.remembered(current.as_ref(), value)?;
            let (outcome, fact) = adjudicate::refute(
                current.as_ref(),
                remembered.as_ref(),
                age,
                kb.options.half_life_ns,
                key,
                value,
                evidence,
                version,
            );
            let op = Op::Refute {
                key: key.to_owned(),
                value: value.clone(),
            };
            Ok((op, outcome, changed(key, fact)))
        })
    }

    /// Withdraws the key's fact. Its history stays.
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`]; otherwise as [`KnowledgeBase::assert`].
    pub fn retract(&self, key: &str, provenance: Provenance) -> Result<Committed> {
        validate_key(key)?;
        self.commit(provenance, |kb, _, _, _| {
            if kb.view.get(key)?.is_none() {
                return Err(Error::NotFound {
                    key: key.to_owned(),
                });
            }
            let op = Op::Retract {
                key: key.to_owned(),
            };
            Ok((op, Outcome::Retracted, vec![change(key, None)]))
        })
    }

    /// Appends one commit that restores every key to its state at `version`: keys
    /// created since lose their fact, changed keys get their old fact back (with this
    /// commit as their `updated` version). Nothing is erased: the reverted versions stay
    /// in the history.
    ///
    /// # Errors
    ///
    /// [`Error::UnknownVersion`] for 0 or a version above the latest; otherwise as
    /// [`KnowledgeBase::assert`].
    pub fn revert_to(&self, target: Version, provenance: Provenance) -> Result<Committed> {
        self.commit(provenance, |kb, version, _, _| {
            let latest = version - 1;
            if target == 0 || target > latest {
                return Err(Error::UnknownVersion {
                    version: target,
                    latest,
                });
            }
            let mut then = kb.view.snapshot(AsOf::Version(target))?;
            let now = kb.view.snapshot(AsOf::Version(latest))?;
            let mut changes = Vec::new();
            // A key that gets its old fact back remembers again what it remembered
            // then: the commit carries it, so applying it needs no history.
            let restore = |key: &str, mut old: Fact| -> Result<Change> {
                old.updated = version;
                let mut c = change(key, Some(old));
                c.remembered = Some(kb.view.remembered_at(key, target)?);
                Ok(c)
            };
            for (key, fact) in now {
                match then.remove(&key) {
                    Some(old) if old == fact => {}
                    Some(old) => changes.push(restore(&key, old)?),
                    None => changes.push(change(&key, None)),
                }
            }
            for (key, old) in then {
                changes.push(restore(&key, old)?);
            }
            changes.sort_by(|a, b| a.key.cmp(&b.key));
            Ok((Op::Revert { version: target }, Outcome::Reverted, changes))
        })
    }

    /// Drops the view and rebuilds it from the log's commit records.
    ///
    /// # Errors
    ///
    /// [`Error::View`], [`Error::Log`], [`Error::BadRecord`].
    pub fn rebuild(&self) -> Result<usize> {
        let _write = self.write.lock();
        self.view.clear()?;
        self.view
            .catch_up(&self.log_dir, self.options.log_key.clone(), None)
    }

    /// The key's current fact.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidKey`]; [`Error::View`].
    pub fn get(&self, key: &str) -> Result<Option<Fact>> {
        self.view.get(key)
    }

    /// The key's fact as of a version or a time, in O(log n) of its history.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidKey`], [`Error::UnknownVersion`], [`Error::View`].
    pub fn get_as_of(&self, key: &str, at: AsOf) -> Result<Option<Fact>> {
        self.view.get_as_of(key, at)
    }

    /// Every version that changed the key, with its fact after it.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidKey`]; [`Error::View`].
    pub fn history(&self, key: &str) -> Result<Vec<(Version, Option<Fact>)>> {
        self.view.history(key)
    }

    /// The commits in a range of versions.
    ///
    /// # Errors
    ///
    /// [`Error::View`].
    pub fn log(&self, range: impl std::ops::RangeBounds<Version>) -> Result<Vec<Commit>> {
        self.view.log(range)
    }

    /// The facts that differ between two versions.
    ///
    /// # Errors
    ///
    /// [`Error::UnknownVersion`], [`Error::View`].
    pub fn diff(&self, v1: Version, v2: Version) -> Result<Vec<Difference>> {
        self.view.diff(v1, v2)
    }

    /// Current facts (not rejected) whose conditions hold in `context`.
    ///
    /// # Errors
    ///
    /// [`Error::View`].
    pub fn matching(&self, context: &Conditions) -> Result<Vec<Fact>> {
        self.view.matching(context)
    }

    /// Current facts with open contradictions.
    ///
    /// # Errors
    ///
    /// [`Error::View`].
    pub fn contradictions(&self) -> Result<Vec<Fact>> {
        self.view.contradictions()
    }

    /// Every value ever rejected, per key, with the commit that rejected it: each time a
    /// commit left a value refuted, or made it the fact with status `rejected`, when
    /// the key's state before did not. Read from the keys' histories, so a value stays
    /// listed after its key moved on (another value won, the key was retracted or
    /// reverted).
    ///
    /// # Errors
    ///
    /// [`Error::View`].
    pub fn rejected(&self) -> Result<Vec<Rejection>> {
        self.view.rejected()
    }

    /// Every key's fact as of a version or a time.
    ///
    /// # Errors
    ///
    /// [`Error::UnknownVersion`], [`Error::View`].
    pub fn snapshot(&self, at: AsOf) -> Result<BTreeMap<String, Fact>> {
        self.view.snapshot(at)
    }

    /// The latest version.
    ///
    /// # Errors
    ///
    /// [`Error::View`].
    pub fn version(&self) -> Result<Version> {
        self.view.version()
    }

    /// The state of `value` when the key's fact let it go (a refuted value past
    /// [`adjudicate::REFUTED_KEPT`]), aged to the fact's `updated` version; `None` when
    /// the fact holds the value or never let it go.
    fn remembered(&self, fact: Option<&Fact>, value: &Value) -> Result<Option<Rival>> {
        let Some(fact) = fact else { return Ok(None) };
        let held = fact.value == *value
            || fact
                .rivals
                .iter()
                .chain(&fact.refuted)
                .any(|r| r.value == *value);
        if held {
            return Ok(None);
        }
        let Some((let_go, mut rival)) = self.view.let_go(&fact.key, value)? else {
            return Ok(None);
        };
        let then = self.view.commit_time(let_go)?;
        let updated = self.view.commit_time(fact.updated)?;
        if let (Some(then), Some(updated)) = (then, updated) {
            let age = updated.saturating_sub(then);
            for k in &mut rival.claims {
                *k = adjudicate::effective(*k, age, self.options.half_life_ns);
            }
        }
        Ok(Some(rival))
    }

    /// How old the fact's confidence is at `now`: since its last change's commit.
    fn age(&self, fact: Option<&Fact>, now: u64) -> Result<u64> {
        let Some(fact) = fact else { return Ok(0) };
        let then = self.view.commit_time(fact.updated)?.unwrap_or(now);
        Ok(now.saturating_sub(then))
    }

    /// Runs one write: under the write lock, `decide` computes the operation, its
    /// outcome and its changes for the next version; the commit is appended to the log,
    /// then applied to the view.
    fn commit(
        &self,
        provenance: Provenance,
        decide: impl FnOnce(&Self, Version, u64, &[u64]) -> Result<(Op, Outcome, Vec<Change>)>,
    ) -> Result<Committed> {
        if provenance.evidence.is_empty() {
            return Err(Error::NoEvidence);
        }
        let mut committed = self.write.lock();
        // A commit the log took but the view did not (its write failed) is caught up
        // first, so a version is never issued twice.
        if self.view.version()? < *committed {
            self.view
                .catch_up(&self.log_dir, self.options.log_key.clone(), None)?;
        }
        let version = self.view.version()? + 1;
        let now = self.sink.now_ns();
        let (op, outcome, changes) = decide(self, version, now, &provenance.evidence)?;
        let record = CommitRecord {
            version,
            author: provenance.author,
            message: provenance.message,
            provenance: provenance.evidence,
            op,
            outcome,
            changes,
        };
        let payload = serde_json::to_vec(&record).map_err(|e| Error::InvalidJson {
            field: "value",
            reason: e.to_string(),
        })?;
        let appended = self
            .sink
            .append(payload, &record.provenance)
            .map_err(sink_error)?;
        *committed = version;
        let commit = Commit {
            seq: appended.seq,
            time_ns: appended.time_ns,
            record,
        };
        self.view.apply(&commit).map_err(|e| Error::ViewBehind {
            version,
            seq: appended.seq,
            source: Box::new(e),
        })?;
        if self.sink.snapshot_due() {
            // The commit is done whatever this does: a snapshot that fails (larger than
            // a record, say) is tried again after the next commit, and the log keeps
            // carrying the commits since the last one meanwhile.
            let _ = self.snapshot_locked(version);
        }
        Ok(Committed {
            version,
            outcome,
            seq: appended.seq,
        })
    }
}

fn sink_error(e: SinkError) -> Error {
    match e {
        SinkError::EvidenceNotInLog { seq, next_seq } => Error::EvidenceNotInLog { seq, next_seq },
        SinkError::TooLarge {
            size_bytes,
            limit_bytes,
        } => Error::CommitTooLarge {
            size_bytes,
            limit_bytes,
        },
        SinkError::Failed(e) => Error::Recorder(e),
    }
}

/// The changes of an adjudicated write: the key's new fact with the refuted values it
/// let go, or none when the write changed nothing.
fn changed(key: &str, state: Option<Adjudicated>) -> Vec<Change> {
    state
        .map(|s| {
            vec![Change {
                key: key.to_owned(),
                fact: Some(s.fact),
                let_go: s.let_go,
                remembered: None,
            }]
        })
        .unwrap_or_default()
}

fn change(key: &str, fact: Option<Fact>) -> Change {
    Change {
        key: key.to_owned(),
        fact,
        let_go: Vec::new(),
        remembered: None,
    }
}
