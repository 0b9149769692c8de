//! Time travel: the state of every layer at a point in time, rebuilt from the log.

use std::collections::BTreeMap;
use std::path::Path;

use blackbox::Counters;
use blackbox::codec;
use blackbox::kb::{AsOf, Fact, Version, View};
use blackbox::log::{LogReader, ReaderOptions, SegmentSummary, Seq};
use blackbox_log::ChainKey;
use serde_json::{Map, Value};

use crate::decode::{Body, RecordType};
use crate::error::{Error, Result};
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

/// A knowledge-base view built from a log's commit records in a private temporary
/// directory (`ROOT/blackbox-UID/view-PID-…`, mode 0700; ROOT as `private_temp` chooses it), removed when dropped; one
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

/// The knowledge base of the log in `dir` in a temporary view.
///
/// The view starts from a copy of the recorder's own view (`DIR/kb`), taken without
/// any lock, when there is one that opens: the catch-up that follows checks that the
/// commit record the copy says it applied last is in the log with that version, and
/// reads the log forward only from there (a copy that has applied the log's last commit
/// reads only what follows that commit). A copy that does not open, that does not match
/// the log (ahead of it, of another log, caught mid-rebuild) or whose catch-up fails is
/// dropped, and the view is rebuilt from the whole log, as it is when there is no
/// `DIR/kb`.
///
/// # Errors
///
/// [`Error::NoSuchDir`](crate::Error::NoSuchDir), [`Error::Log`](crate::Error::Log)
/// (not a log, damage), [`Error::Kb`](crate::Error::Kb) (a commit record that does not
/// decode), [`Error::Io`](crate::Error::Io) (no private temporary directory).
pub fn kb_view(dir: &Path, key: Option<ChainKey>) -> Result<TempView> {
    check_structure(dir, key.clone())?;
    if let Some(view) = seeded_view(dir, key.clone()) {
        return Ok(view);
    }
    // A view rebuilt from the log is of a size not known before: on the disk.
    let temp = crate::private_temp::view_dir(u64::MAX)?;
    let view = View::open(temp.path())?;
    view.catch_up(dir, key, None)?;
    Ok(TempView { view, _dir: temp })
}

/// Checks that `dir` is a log whose segments are all there, continue one another and
/// are sealed but the last ([`LogReader::structure`]: two small reads per segment, no
/// block): reads that start past the log's beginning would not meet a missing or
/// foreign segment before their start.
fn check_structure(dir: &Path, key: Option<ChainKey>) -> Result<Vec<SegmentSummary>> {
    open_log_dir(dir)?;
    Ok(LogReader::open_with(dir, ReaderOptions { key })?.structure()?)
}

/// A temporary view started from a copy of `DIR/kb` and caught up with the log, or
/// `None` when there is no such view or any step fails (the caller rebuilds).
fn seeded_view(dir: &Path, key: Option<ChainKey>) -> Option<TempView> {
    // A shipped log has no view beside it.
    if blackbox_log::source::is_url(dir) {
        return None;
    }
    let source = dir.join(blackbox::KB_DIR);
    if !source.is_dir() {
        return None;
    }
    // A copy is used only if no file of the view changed while it was taken (a
    // recorder committing meanwhile): a few tries, then the rebuild.
    // Where the copy goes depends on its size; a size not known (a file removed while
    // it was measured), or a copy that failed in memory, goes to the disk.
    let bytes = held_bytes(&source).unwrap_or(u64::MAX);
    let temp = (0..3).find_map(|attempt| {
        let size = if attempt == 0 { bytes } else { u64::MAX };
        let temp = crate::private_temp::view_dir(size).ok()?;
        copy_unchanged(&source, temp.path(), || {})
            .ok()?
            .then_some(temp)
    })?;
    let view = View::open(temp.path()).ok()?;
    view.catch_up(dir, key, None).ok()?;
    Some(TempView { view, _dir: temp })
}

/// Every file and directory under `dir` with its length and modification time.
type Listing = Vec<(std::path::PathBuf, u64, Option<std::time::SystemTime>)>;

/// The bytes the disk holds for the files under `dir` (less than their lengths where
/// they have holes, as fjall's journal does): what a copy of it takes.
fn held_bytes(dir: &Path) -> std::io::Result<u64> {
    use std::os::unix::fs::MetadataExt;
    let mut total = 0u64;
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let meta = entry.metadata()?;
        total = total.saturating_add(if meta.is_dir() {
            held_bytes(&entry.path())?
        } else {
            meta.blocks().saturating_mul(512)
        });
    }
    Ok(total)
}

fn listing(dir: &Path, out: &mut Listing) -> std::io::Result<()> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)?.collect::<std::io::Result<_>>()?;
    entries.sort_by_key(std::fs::DirEntry::file_name);
    for entry in entries {
        let meta = entry.metadata()?;
        out.push((entry.path(), meta.len(), meta.modified().ok()));
        if meta.is_dir() {
            listing(&entry.path(), out)?;
        }
    }
    Ok(())
}

/// Copies `from` into `to` ([`copy_tree`]); `false` when a file or directory under
/// `from` was added, removed, resized or modified between the listing taken before the
/// copy and the one after it (`meanwhile` runs right after the first).
fn copy_unchanged(from: &Path, to: &Path, meanwhile: impl FnOnce()) -> std::io::Result<bool> {
    let mut before = Vec::new();
    listing(from, &mut before)?;
    meanwhile();
    copy_tree(from, to)?;
    let mut after = Vec::new();
    listing(from, &mut after)?;
    Ok(before == after)
}

/// Copies the regular files and directories under `from` into `to` (which exists); any
/// other kind of entry is an error.
fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        let target = to.join(entry.file_name());
        if kind.is_dir() {
            std::fs::create_dir(&target)?;
            copy_tree(&entry.path(), &target)?;
        } else if kind.is_file() {
            copy_sparse(&entry.path(), &target)?;
        } else {
            return Err(std::io::Error::other("not a file or a directory"));
        }
    }
    Ok(())
}

/// Copies the file `from` to `to`, leaving out the MiB-aligned stretches that are holes
/// (one `SEEK_DATA` per MiB): fjall's journal is a large file, mostly a hole past what
/// it has written.
fn copy_sparse(from: &Path, to: &Path) -> std::io::Result<()> {
    use std::io::{Read, Seek, SeekFrom, Write};
    use std::os::fd::AsRawFd;
    const CHUNK: u64 = 1 << 20;
    let mut src = std::fs::File::open(from)?;
    let len = src.metadata()?.len();
    let mut dst = std::fs::File::create_new(to)?;
    dst.set_len(len)?;
    let mut buf = vec![0u8; 1 << 20];
    let mut chunk = 0u64;
    while chunk < len {
        let end = chunk.saturating_add(CHUNK).min(len);
        let Ok(at) = libc::off_t::try_from(chunk) else {
            return Err(std::io::Error::other("file too large"));
        };
        // SAFETY: lseek on a descriptor this function owns; it reads no memory.
        let data = unsafe { libc::lseek(src.as_raw_fd(), at, libc::SEEK_DATA) };
        let start = if data < 0 {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::ENXIO) {
                break; // Only a hole follows.
            }
            return Err(e);
        } else {
            u64::try_from(data).map_err(|_| std::io::Error::other("negative offset"))?
        };
        if start >= end {
            // The chunk is a hole: skip to the chunk holding the next data.
            chunk = (start - start % CHUNK).max(end);
            continue;
        }
        src.seek(SeekFrom::Start(start))?;
        dst.seek(SeekFrom::Start(start))?;
        let n = usize::try_from(end - start)
            .unwrap_or(buf.len())
            .min(buf.len());
        let piece = buf.get_mut(..n).unwrap_or_default();
        src.read_exact(piece)?;
        dst.write_all(piece)?;
        chunk = end;
    }
    Ok(())
}

/// The state of the log in `dir` at `at_ns`: the working memory the host had then
/// (the last checkpoint at or before it and the working-memory deltas since, at or
/// before it: a change stamped at `at_ns` is in it), the knowledge base as of it, and
/// the accounting totals up to it.
///
/// The log's structure is checked first, as [`kb_view`] does. The read starts at the
/// earlier of two records found by looking back from `at_ns`
/// through the log's time index ([`start_seq`]): the last checkpoint at or before
/// `at_ns` and the last accounting snapshot at or before it; it then reads forward to
/// `at_ns`, decoding only checkpoints, deltas and accounting records. The knowledge base
/// comes from [`kb_view`], as of the last commit at or before `at_ns`.
///
/// # Errors
///
/// As [`kb_view`] and [`Replay::open`].
pub fn state_at(dir: &Path, at_ns: u64, key: Option<ChainKey>) -> Result<State> {
    let segments = check_structure(dir, key.clone())?;
    if let Some((earliest_ns, first_seq)) = retained_start(dir, &segments, key.clone())?
        && at_ns < earliest_ns
    {
        return Err(Error::PrunedBefore {
            at_ns,
            earliest_ns,
            pruned_up_to_seq: first_seq - 1,
        });
    }
    let from = start_seq(dir, at_ns, key.clone())?;
    let query = Query::new()
        .from_seq(from)
        .until(at_ns)
        .types([
            RecordType::Checkpoint,
            RecordType::Working,
            RecordType::Accounting,
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
            _ => {}
        }
    }
    let view = kb_view(dir, key)?;
    state.kb_version = view.resolve(AsOf::Time(at_ns))?;
    if state.kb_version > 0 {
        state.kb = view.snapshot(AsOf::Version(state.kb_version))?;
    }
    Ok(state)
}

/// When the log in `dir` was pruned: the stamp and seq of its first retained record,
/// the earliest point the retained log rebuilds the state at (the segment it opens
/// starts with the preamble: the dictionary, the accounting snapshot and the working
/// memory carried); `None` for a log that starts at seq 0.
fn retained_start(
    dir: &Path,
    segments: &[SegmentSummary],
    key: Option<ChainKey>,
) -> Result<Option<(u64, u64)>> {
    let Some(first) = segments.first() else {
        return Ok(None);
    };
    if first.first_seq == 0 {
        return Ok(None);
    }
    if let Some(sealed) = &first.sealed {
        return Ok(Some((sealed.first_ts_ns, first.first_seq)));
    }
    let reader = LogReader::open_with(dir, ReaderOptions { key })?;
    let first = first.first_seq;
    match reader.records(Seq(first)..)?.next() {
        Some(r) => Ok(Some((r?.ts_ns(), first))),
        None => Ok(None),
    }
}

/// How far back from `at_ns` [`start_seq`] first looks (ns); it looks 4 times as far
/// each time it finds too little.
const LOOK_BACK_NS: u64 = 64_000_000_000;

/// Where a fold up to `at_ns` may start and still give what a fold from seq 0 gives:
/// the smaller of the seqs of the last checkpoint and of the last accounting snapshot
/// at or before `at_ns` (a checkpoint holds the whole working memory, a snapshot every
/// kind's totals), or 0 when the log has no such pair.
///
/// Records' timestamps never decrease along the log, so the records at or before
/// `at_ns` are a prefix of it: the search reads the records stamped in a window ending
/// at `at_ns` (found through the footers' time index, passing over the blocks that
/// their tag index says hold neither a checkpoint nor an accounting record), widening
/// the window fourfold
/// until it holds both a checkpoint and a snapshot or reaches the log's start. It costs
/// the distance back to the later of the two, not the log's length.
///
/// # Errors
///
/// [`Error::Log`](crate::Error::Log) for damage met in the records read.
pub fn start_seq(dir: &Path, at_ns: u64, key: Option<ChainKey>) -> Result<u64> {
    let reader = LogReader::open_with(dir, ReaderOptions { key })?;
    let mut window = LOOK_BACK_NS;
    loop {
        let lo = at_ns.saturating_sub(window);
        let (mut checkpoint, mut snapshot) = (None, None);
        // The blocks of sealed segments that hold neither a checkpoint nor an
        // accounting record are skipped unread (the tag index).
        let tags = [codec::CHECKPOINT.index_tag(), codec::ACCOUNTING.index_tag()];
        for record in reader.records_by_time(lo..=at_ns)?.with_tags(tags) {
            let record = record?;
            let t = record.record_type();
            if t == codec::CHECKPOINT {
                checkpoint = Some(record.seq().0);
            } else if t == codec::ACCOUNTING
                && codec::is_accounting_snapshot(record.payload()) == Some(true)
            {
                snapshot = Some(record.seq().0);
            }
        }
        if let (Some(c), Some(s)) = (checkpoint, snapshot) {
            return Ok(c.min(s));
        }
        if lo == 0 {
            return Ok(0);
        }
        window = window.saturating_mul(4);
    }
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

#[cfg(test)]
mod tests {
    #![expect(clippy::unwrap_used, reason = "tests fail loudly on any error")]

    use super::*;

    #[test]
    fn a_copy_during_which_the_view_changed_is_not_used() {
        let from = tempfile::tempdir().unwrap();
        std::fs::create_dir(from.path().join("sub")).unwrap();
        std::fs::write(from.path().join("sub/table"), b"abc").unwrap();
        std::fs::write(from.path().join("0.jnl"), b"journal").unwrap();
        let to = tempfile::tempdir().unwrap();
        assert!(copy_unchanged(from.path(), to.path(), || {}).unwrap());
        assert_eq!(std::fs::read(to.path().join("sub/table")).unwrap(), b"abc");
        assert_eq!(std::fs::read(to.path().join("0.jnl")).unwrap(), b"journal");
        for change in 0..3 {
            let to = tempfile::tempdir().unwrap();
            let changed = copy_unchanged(from.path(), to.path(), || match change {
                0 => std::fs::write(from.path().join("0.jnl"), b"journal, longer").unwrap(),
                1 => std::fs::write(from.path().join("sub/new"), b"x").unwrap(),
                _ => std::fs::remove_file(from.path().join("sub/table")).unwrap(),
            });
            assert!(!changed.unwrap(), "change {change}");
        }
    }
}
