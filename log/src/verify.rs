//! `verify`: recompute every checksum and the whole chain, and check a digest.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::chain::{ChainKey, Chainer, Digest, GENESIS_LINK};
use crate::error::{Corruption, CorruptionKind, Error, Result};
use crate::retention::{self, PruneRecord};
use crate::scan::{self, ChainPoint, Tail};
use crate::segment::{self, HeaderState, SegmentFile};
use crate::structure;
use crate::writer::check_continuity;

/// What [`verify`] checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifyReport {
    /// Segment files checked.
    pub segments: usize,
    /// Records checked.
    pub records: u64,
    /// Blocks (chain links) checked.
    pub blocks: u64,
    /// Bytes of segment files read.
    pub bytes: u64,
    /// The chain point after the last intact record: what [`Log::digest`](crate::Log::digest) reports.
    pub last: Option<Digest>,
    /// A torn tail at the end of the active segment (left by a crash, or a block a live
    /// writer is writing): segment, offset and length. Records before it are intact;
    /// the next writer cuts it.
    pub torn_tail: Option<(PathBuf, u64, u64)>,
    /// Whether a digest was given and matched.
    pub digest_matched: bool,
    /// Whether a digest was given whose seq was pruned: the records it proves are gone,
    /// so it can be neither matched nor refuted (unless it points at a segment boundary
    /// the prune record names: then it is checked against that link).
    pub digest_pruned: bool,
    /// The log starts past seq 0 because it was pruned, as its newest prune record
    /// proves: "pruned up to seq N at T".
    pub pruned: Option<PrunedStart>,
}

/// Where a pruned log starts, as [`verify`] proved it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrunedStart {
    /// The last seq gone: the log starts at `up_to_seq + 1`.
    pub up_to_seq: u64,
    /// When the newest pruning was done: its prune record's timestamp (ns).
    pub at_ns: u64,
    /// The newest prune record's seq and content.
    pub record_seq: u64,
    /// What it says.
    pub record: PruneRecord,
}

/// Verifies the log in `dir`: every segment header and footer, every frame checksum,
/// seq continuity, timestamp order and the hash chain across all segments.
///
/// With `digest`, also proves that the log still holds exactly the prefix the digest
/// was taken from: the block ending at `digest.seq` must have that link. This catches a
/// cut tail, which nothing inside the log can reveal, and (for an unkeyed log) a tail
/// rewritten with a recomputed chain.
///
/// # Errors
///
/// The first problem found: [`Error::Corrupt`] with segment, offset and seq;
/// [`Error::DigestMismatch`]; [`Error::KeyRequired`] for a keyed log without its key;
/// [`Error::NotALog`]; I/O errors.
pub fn verify(
    dir: impl AsRef<Path>,
    key: Option<&ChainKey>,
    digest: Option<&Digest>,
) -> Result<VerifyReport> {
    let dir = dir.as_ref();
    let segments = segment::list_segments(dir)?;
    if segments.is_empty() {
        return Err(Error::NotALog {
            dir: dir.to_owned(),
            reason: "it holds no segment file".to_owned(),
        });
    }
    let key_id = key.map(ChainKey::id);
    let chainer = Chainer::new(key);
    let mut point = ChainPoint {
        next_seq: 0,
        last_ts: 0,
        link: GENESIS_LINK,
    };
    let mut report = VerifyReport {
        segments: segments.len(),
        records: 0,
        blocks: 0,
        bytes: 0,
        last: None,
        torn_tail: None,
        digest_matched: false,
        digest_pruned: false,
        pruned: None,
    };
    let mut digest_seen = false;
    let mut cut: Option<(PathBuf, ChainPoint)> = None;
    let mut last_prune = None;
    for (i, entry) in segments.iter().enumerate() {
        let is_last = i + 1 == segments.len();
        let seg = match SegmentFile::open(entry, key_id, false)? {
            HeaderState::Ok(seg) => Arc::new(seg),
            HeaderState::Torn { path, len } if is_last && entry.first_seq == point.next_seq => {
                report.torn_tail = Some((path, 0, len));
                report.bytes += len;
                break;
            }
            HeaderState::Torn { path, .. } => {
                return Err(Corruption {
                    segment: path,
                    offset: 0,
                    seq: Some(entry.first_seq),
                    kind: CorruptionKind::SegmentHeader("truncated or zeroed".to_owned()),
                }
                .into());
            }
        };
        if i == 0
            && let Some(start) = retention::cut_start(&seg)
        {
            point = start;
            cut = Some((seg.path.clone(), start));
            // A digest from before the cut is judged once the prune record is read.
            digest_seen = digest.is_some_and(|d| d.seq < start.next_seq);
        }
        check_continuity(&seg, &point, i == 0 && cut.is_none())?;
        if !is_last && seg.read_footer()?.is_none() {
            return Err(structure::missing_footer(&seg, &segments, i));
        }
        let scan = scan::scan_segment(&seg, point, Some(&chainer), is_last, digest.is_some())?;
        if let Some(d) = digest
            && !digest_seen
        {
            for &(last_seq, link) in &scan.block_ends {
                if last_seq >= d.seq {
                    digest_seen = true;
                    if last_seq != d.seq {
                        return Err(Error::DigestMismatch {
                            seq: d.seq,
                            reason: format!(
                                "seq {} is not the end of a block here (the block there ends at seq {last_seq}): the log was rewritten",
                                d.seq
                            ),
                        });
                    }
                    if link != d.link {
                        return Err(Error::DigestMismatch {
                            seq: d.seq,
                            reason: "the chain link differs: records up to this seq were changed"
                                .to_owned(),
                        });
                    }
                    report.digest_matched = true;
                    break;
                }
            }
        }
        if scan.last_prune.is_some() {
            last_prune = scan.last_prune.clone();
        }
        report.records += scan.record_count;
        report.blocks += scan.block_count;
        report.bytes += seg.len;
        if let Tail::Torn { offset, .. } = scan.tail {
            report.torn_tail = Some((seg.path.clone(), offset, seg.len - offset));
        }
        point = scan.end;
    }
    if let Some((path, start)) = &cut {
        let Some((record_seq, at_ns, record)) =
            last_prune.filter(|(_, _, p)| p.explains_start(start.next_seq, &start.link))
        else {
            return Err(retention::missing_start(path, start.next_seq));
        };
        if let Some(d) = digest
            && d.seq < start.next_seq
        {
            match record.link_after(d.seq) {
                Some(link) if link == d.link => report.digest_matched = true,
                Some(_) => {
                    return Err(Error::DigestMismatch {
                        seq: d.seq,
                        reason: "the chain link differs from the one the prune record holds for this seq: records up to it were changed".to_owned(),
                    });
                }
                None => report.digest_pruned = true,
            }
        }
        report.pruned = Some(PrunedStart {
            up_to_seq: start.next_seq - 1,
            at_ns,
            record_seq,
            record,
        });
    }
    report.last = point.next_seq.checked_sub(1).map(|seq| Digest {
        seq,
        link: point.link,
    });
    if let Some(d) = digest
        && !digest_seen
    {
        return Err(Error::DigestMismatch {
            seq: d.seq,
            reason: match report.last {
                Some(last) => format!("the log ends at seq {}: its tail was cut", last.seq),
                None => "the log holds no record".to_owned(),
            },
        });
    }
    Ok(report)
}
