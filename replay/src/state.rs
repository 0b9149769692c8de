//! Time travel: the state of every layer at a point in time, rebuilt from the log.

use std::collections::BTreeMap;
use std::path::Path;

use blackbox::Counters;
use blackbox::kb::{AsOf, Fact, Version, View};
use blackbox_log::ChainKey;
use serde_json::{Map, Value};

use crate::decode::{Body, RecordType};
use crate::error::Result;
use crate::inputs::open_log_dir;
use crate::query::Query;
use crate::replay::Replay;

/// The state at a point in time: what `blackbox state --at T` prints.
#[derive(Debug, Clone, PartialEq)]
pub struct State {
    /// The point in time, ns since the epoch.
    pub at_ns: u64,
    /// The working memory at `at_ns`: the last checkpoint at or before it, with every
    /// working-memory delta after that checkpoint and at or before `at_ns` applied in
    /// log order (empty before the first change).
    pub working: Map<String, Value>,
    /// The seq of that checkpoint.
    pub checkpoint_seq: Option<u64>,
    /// The seq of the last record folded into `working` (the checkpoint, or a delta
    /// after it).
    pub working_seq: Option<u64>,
    /// The knowledge base as of `at_ns`: every key's fact after the last commit at or
    /// before it.
    pub kb: BTreeMap<String, Fact>,
    /// The knowledge-base version as of `at_ns` (0: before any commit).
    pub kb_version: Version,
    /// Per-kind running totals up to `at_ns`: the accounting records at or before it,
    /// folded.
    pub kinds: BTreeMap<String, Counters>,
    /// The seq of that accounting record.
    pub accounting_seq: Option<u64>,
}

/// A knowledge-base view rebuilt from a log's commit records in a private temporary
/// directory (`$TMPDIR/blackbox-UID/view-PID-…`, mode 0700), removed when dropped; one
/// a killed process left behind is removed by the next reader. Readers use it so that they never touch the view a running
/// recorder owns (`DIR/kb/`), and need no writer lock.
#[derive(Debug)]
pub struct TempView {
    view: View,
    _dir: tempfile::TempDir,
}

impl std::ops::Deref for TempView {
    type Target = View;

    fn deref(&self) -> &View {
        &self.view
    }
}

/// Rebuilds the knowledge base of the log in `dir` into a temporary view.
///
/// # Errors
///
/// [`Error::NoSuchDir`](crate::Error::NoSuchDir), [`Error::Log`](crate::Error::Log)
/// (not a log, damage), [`Error::Kb`](crate::Error::Kb) (a commit record that does not
/// decode), [`Error::Io`](crate::Error::Io) (no private temporary directory).
pub fn kb_view(dir: &Path, key: Option<ChainKey>) -> Result<TempView> {
    open_log_dir(dir)?;
    let temp = crate::private_temp::view_dir()?;
    let view = View::open(temp.path())?;
    view.catch_up(dir, key, None)?;
    Ok(TempView { view, _dir: temp })
}

/// The state of the log in `dir` at `at_ns`: the working memory the host had then
/// (the last checkpoint at or before it and the working-memory deltas since, at or
/// before it: a change stamped at `at_ns` is in it), the knowledge base as of it, and
/// the accounting totals up to it.
///
/// One pass over the log's records up to `at_ns`, decoding only checkpoints, deltas,
/// accounting records and commits; the knowledge base is then rebuilt from the log in a
/// temporary view, unless no commit precedes `at_ns`.
///
/// # Errors
///
/// As [`kb_view`] and [`Replay::open`].
pub fn state_at(dir: &Path, at_ns: u64, key: Option<ChainKey>) -> Result<State> {
    let query = Query::new()
        .until(at_ns)
        .types([
            RecordType::Checkpoint,
            RecordType::Working,
            RecordType::Accounting,
            RecordType::Kb,
        ])
        .key(key.clone());
    let mut state = State {
        at_ns,
        working: Map::new(),
        checkpoint_seq: None,
        working_seq: None,
        kb: BTreeMap::new(),
        kb_version: 0,
        kinds: BTreeMap::new(),
        accounting_seq: None,
    };
    let mut commits = false;
    for record in Replay::open(dir, &query)? {
        let record = record?;
        match record.body {
            Body::Checkpoint(c) => {
                state.working = c.working;
                state.checkpoint_seq = Some(record.seq);
                state.working_seq = Some(record.seq);
            }
            Body::Working(delta) => {
                delta.apply(&mut state.working);
                state.working_seq = Some(record.seq);
            }
            Body::Accounting(a) => {
                // A record lists every kind (a snapshot) or those that changed.
                a.fold_into(&mut state.kinds);
                state.accounting_seq = Some(record.seq);
            }
            Body::Kb(_) => commits = true,
            _ => {}
        }
    }
    if commits {
        let view = kb_view(dir, key)?;
        state.kb_version = view.resolve(AsOf::Time(at_ns))?;
        state.kb = view.snapshot(AsOf::Version(state.kb_version))?;
    }
    Ok(state)
}

impl State {
    /// The state as `blackbox state --json` prints it: `{"at", "working", "kb",
    /// "kinds"}`, plus the seqs and version it was taken from.
    pub fn to_json(&self) -> Value {
        let kinds: Map<String, Value> = self
            .kinds
            .iter()
            .map(|(k, c)| (k.clone(), crate::json::counters_json(c)))
            .collect();
        let kb: Map<String, Value> = self
            .kb
            .iter()
            .map(|(k, f)| (k.clone(), fact_json(f)))
            .collect();
        serde_json::json!({
            "at": crate::format_time(self.at_ns),
            "at_ns": self.at_ns,
            "working": self.working,
            "checkpoint_seq": self.checkpoint_seq,
            "working_seq": self.working_seq,
            "kb": kb,
            "kb_version": self.kb_version,
            "kinds": kinds,
            "accounting_seq": self.accounting_seq,
        })
    }
}

/// A fact as the command prints it: `{"key", "value", "confidence", "claims",
/// "evidence_count", "status", "conditions", "provenance", "refutations",
/// "counter_evidence", "version", "created", "rivals", "refuted"}`, where `version` is
/// the version that last changed it.
pub fn fact_json(fact: &Fact) -> Value {
    serde_json::json!({
        "key": fact.key,
        "value": fact.value,
        "confidence": fact.confidence,
        "claims": fact.claims,
        "evidence_count": fact.evidence_count,
        "status": fact.status.name(),
        "conditions": fact.conditions,
        "provenance": fact.provenance,
        "refutations": fact.refutations,
        "counter_evidence": fact.counter_evidence,
        "version": fact.updated,
        "created": fact.created,
        "rivals": fact.rivals,
        "refuted": fact.refuted,
    })
}
