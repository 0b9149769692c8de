//! Reports as JSON, shared by the command's `--json` output and the Python package:
//! `blackbox verify`'s report, a knowledge-base history entry and a rejected claim.

use blackbox::Digest;
use blackbox::kb::{Fact, Rejection, Version, View};
use blackbox_log::VerifyReport;
use serde_json::{Value, json};

use crate::error::Result;
use crate::{fact_json, format_time};

/// `blackbox verify --json`'s report of an intact log: `{"intact": true, "segments",
/// "records", "blocks", "bytes", "keyed", "last", "digest", "digest_matched",
/// "digest_pruned", "torn_tail", "pruned"}`.
pub fn verify_json(report: &VerifyReport, keyed: bool, digest: Option<&Digest>) -> Value {
    let torn = report.torn_tail.as_ref().map(|(path, offset, len)| {
        json!({"segment": path.display().to_string(), "offset": offset, "bytes": len})
    });
    json!({
        "intact": true,
        "segments": report.segments,
        "records": report.records,
        "blocks": report.blocks,
        "bytes": report.bytes,
        "keyed": keyed,
        "last": report.last.map(|d| d.to_string()),
        "digest": digest.map(|d| d.to_string()),
        "digest_matched": digest.is_some().then_some(report.digest_matched),
        "digest_pruned": digest.is_some().then_some(report.digest_pruned),
        "torn_tail": torn,
        "pruned": report.pruned.as_ref().map(|p| json!({
            "up_to_seq": p.up_to_seq,
            "at_ns": p.at_ns,
            "at": format_time(p.at_ns),
            "record_seq": p.record_seq,
            "bytes": p.record.bytes,
            "last_pruned_ts_ns": p.record.last_ts_ns,
        })),
    })
}

/// One entry of a key's history as `blackbox kb history --json` prints it:
/// `{"version", "time", "time_ns", "op", "outcome", "fact"}` (the key's fact after
/// that version, or null), and `history_from` when the history starts at a snapshot
/// of a pruned log (`from`, as [`View::history_from`] gives it).
///
/// # Errors
///
/// The view's, when it cannot be read.
pub fn history_entry(
    view: &View,
    from: Version,
    version: Version,
    fact: Option<&Fact>,
) -> Result<Value> {
    let commit = view.commit(version)?;
    let snapshot = commit.is_none() && version == from;
    let time = match &commit {
        Some(c) => Some(c.time_ns),
        None => view.commit_time(version)?,
    };
    let outcome = match &commit {
        Some(c) => Some(c.record.outcome.name()),
        None if snapshot => Some("the knowledge base as of its snapshot"),
        None => None,
    };
    // What the commit did (a refutation names the value it refuted).
    let op = match &commit {
        Some(c) => Some(c.record.op.to_string()),
        None if snapshot => Some("snapshot".to_owned()),
        None => None,
    };
    let mut entry = json!({
        "version": version,
        "time": time.map(format_time),
        "time_ns": time,
        "op": op,
        "outcome": outcome,
        "fact": fact.map(fact_json),
    });
    if from > 0
        && let Some(obj) = entry.as_object_mut()
    {
        obj.insert("history_from".to_owned(), from.into());
    }
    Ok(entry)
}

/// A rejected claim as `blackbox kb rejected --json` prints it: `{"key", "value",
/// "version", "time", "time_ns", "confidence", "refutations"}`.
///
/// # Errors
///
/// The view's, when it cannot be read.
pub fn rejection_json(view: &View, r: &Rejection) -> Result<Value> {
    let time = view.commit_time(r.version)?;
    Ok(json!({
        "key": r.key,
        "value": r.value,
        "version": r.version,
        "time": time.map(format_time),
        "time_ns": time,
        "confidence": r.confidence,
        "refutations": r.refutations,
    }))
}
