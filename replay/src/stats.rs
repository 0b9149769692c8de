//! The log's totals: records, segments, bytes, time span and per-kind counters.

use std::collections::BTreeMap;
use std::path::Path;

use blackbox::log::ReaderOptions;
use blackbox::{ChainKey, Counters, LogReader, Seq, codec};
use serde_json::{Map, Value, json};

use crate::decode::{Body, RecordType};
use crate::error::{Error, Result};
use crate::inputs::open_log_dir;
use crate::json::counters_json;
use crate::query::Query;
use crate::replay::Replay;
use crate::time::format_time;

/// What [`stats`] found.
#[derive(Debug, Clone, PartialEq)]
pub struct LogStats {
    /// Records in the log (seqs are dense from its first: the last seq + 1 minus the
    /// first seq).
    pub records: u64,
    /// The first record's seq: 0, or past it in a log pruned at its front.
    pub first_seq: Option<u64>,
    /// In a log pruned at its front (a disk budget), the last seq pruned: the log
    /// starts right after it. Its running totals still count every event since the log
    /// was created (the accounting snapshots are cumulative).
    pub pruned_up_to_seq: Option<u64>,
    /// Segment files.
    pub segments: usize,
    /// Bytes of segment files.
    pub bytes: u64,
    /// Timestamp of the first record (ns).
    pub first_ts_ns: Option<u64>,
    /// Timestamp of the last record (ns).
    pub last_ts_ns: Option<u64>,
    /// The last record's seq.
    pub last_seq: Option<u64>,
    /// Seq of the last accounting record, whose totals `kinds` holds.
    pub accounting_seq: Option<u64>,
    /// Per-kind running totals since the log was created, folded from the accounting
    /// records (each lists the kinds that changed since the one before; the recorder
    /// writes one every few seconds and on close; after a crash, events of at most one
    /// interval are not counted yet).
    pub kinds: BTreeMap<String, Counters>,
}

impl LogStats {
    /// As `blackbox stats --json` prints it: `{"records", "segments", "bytes",
    /// "first_ts", "last_ts", "kinds": {kind: counters}}`, plus `first_ts_ns`,
    /// `last_ts_ns`, `last_seq` and `accounting_seq`.
    pub fn to_json(&self) -> Value {
        let kinds: Map<String, Value> = self
            .kinds
            .iter()
            .map(|(k, c)| (k.clone(), counters_json(c)))
            .collect();
        json!({
            "records": self.records,
            "segments": self.segments,
            "bytes": self.bytes,
            "first_ts": self.first_ts_ns.map(format_time),
            "last_ts": self.last_ts_ns.map(format_time),
            "first_ts_ns": self.first_ts_ns,
            "last_ts_ns": self.last_ts_ns,
            "last_seq": self.last_seq,
            "first_seq": self.first_seq,
            "pruned_up_to_seq": self.pruned_up_to_seq,
            "accounting_seq": self.accounting_seq,
            "kinds": kinds,
        })
    }
}

/// Reads the log's totals without a full scan: the segment files' sizes, the first
/// record, and the accounting records from the start of the last segment that opens
/// with an accounting snapshot (usually only the last segment).
///
/// # Errors
///
/// [`Error::NoSuchDir`], not a log, a damaged structure (a missing, foreign, empty or
/// unreadable segment: [`LogReader::structure`]), damage met in the segments read, a
/// record that does not decode.
pub fn stats(dir: impl AsRef<Path>, key: Option<ChainKey>) -> Result<LogStats> {
    let dir = dir.as_ref();
    let segments = open_log_dir(dir)?;
    let remote = blackbox_log::source::is_url(dir);
    let mut bytes = 0;
    // A shipped log's sizes come from its structure below, not from files.
    for s in segments.iter().filter(|_| !remote) {
        bytes += std::fs::metadata(&s.path)
            .map_err(|e| Error::Io {
                op: "inspect segment",
                path: s.path.clone(),
                source: e,
            })?
            .len();
    }
    let reader = LogReader::open_with(dir, ReaderOptions { key: key.clone() })?;
    // Every segment present, readable, continuing the one before and sealed (but the
    // last): a log with a hole has no totals to give.
    // A log pruned at its front starts at its first segment (the structure check
    // proved that cut by its prune record).
    let structure = reader.structure()?;
    if remote {
        bytes = structure
            .iter()
            .fold(0u64, |sum, s| sum.saturating_add(s.len_bytes));
    }
    let start_seq = structure.first().map_or(0, |s| s.first_seq);
    let first_ts_ns = match reader.records(Seq(start_seq)..=Seq(start_seq))?.next() {
        Some(r) => Some(r?.ts_ns()),
        None => None,
    };
    let mut out = LogStats {
        records: 0,
        segments: segments.len(),
        bytes,
        first_seq: first_ts_ns.map(|_| start_seq),
        pruned_up_to_seq: start_seq.checked_sub(1),
        first_ts_ns,
        last_ts_ns: None,
        last_seq: None,
        accounting_seq: None,
        kinds: BTreeMap::new(),
    };
    // The totals are the fold of the accounting records from the start of the last
    // segment whose preamble holds an accounting snapshot (the dictionary, then the
    // totals of every kind, flagged as a snapshot), or from the first segment. The fold
    // restarts at every snapshot, wherever it is.
    let mut start = 0;
    for s in segments.iter().rev() {
        let mut preamble = reader.records(Seq(s.first_seq)..=Seq(s.first_seq.saturating_add(2)))?;
        let mut snapshot = false;
        for r in preamble.by_ref() {
            let r = r?;
            if r.record_type() == RecordType::Accounting.tag() {
                snapshot = codec::is_accounting_snapshot(r.payload()) == Some(true);
                break;
            }
        }
        if snapshot {
            start = s.first_seq;
            break;
        }
    }
    let query = Query::new()
        .from_seq(start)
        .types([RecordType::Accounting])
        .key(key.clone());
    let mut replay = Replay::open(dir, &query)?;
    for r in replay.by_ref() {
        let r = r?;
        if let Body::Accounting(a) = r.body {
            out.accounting_seq = Some(r.seq);
            a.fold_into(&mut out.kinds);
        }
    }
    // The last record: the active segment is read whole, but a query by type passes
    // over the blocks of sealed ones that hold none of its records, so when the last
    // segment is sealed (a crash between a seal and the next segment) its footer says.
    let sealed_last = structure
        .iter()
        .rev()
        .find_map(|s| s.sealed.map(|f| (f.last.seq, f.last_ts_ns)));
    let last = match (replay.last_read(), sealed_last) {
        (Some(read), Some(sealed)) => Some(read.max(sealed)),
        (read, sealed) => read.or(sealed),
    };
    if let Some((seq, ts)) = last {
        out.last_seq = Some(seq);
        out.last_ts_ns = Some(ts);
        out.records = seq + 1 - start_seq;
    }
    Ok(out)
}
