//! The log's structure from segment headers and footers alone: every segment present,
//! readable and a regular file, each header continuing its predecessor's seqs and chain
//! link, every segment but the last sealed by a footer that agrees with the seqs around
//! it. This is what `Log::open` checks before it trusts a directory, and what
//! [`LogReader::structure`](crate::LogReader::structure) reports, without reading a
//! single block.

use std::path::{Path, PathBuf};

use crate::chain::{Digest, GENESIS_LINK, Link};
use crate::error::{Corruption, CorruptionKind, Error, Result};
use crate::format::{Footer, TRAILER_LEN};
use crate::retention;
use crate::scan::ChainPoint;
use crate::segment::{self, HeaderState, SegmentEntry, SegmentFile};
use crate::writer::check_continuity;

/// One segment file, as its header and footer describe it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentSummary {
    /// The segment file.
    pub path: PathBuf,
    /// Seq of its first record (its name and its header agree on it).
    pub first_seq: u64,
    /// Length of the file in bytes.
    pub len_bytes: u64,
    /// Its header's `prev_link`: the chain link before its first record.
    pub prev_link: Link,
    /// What the footer of a sealed segment says; `None` for the active segment.
    pub sealed: Option<SealedSummary>,
}

/// What a sealed segment's footer says about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SealedSummary {
    /// Records in the segment.
    pub record_count: u64,
    /// Timestamp of its first record (ns).
    pub first_ts_ns: u64,
    /// Timestamp of its last record (ns).
    pub last_ts_ns: u64,
    /// Its last seq and the chain link after it.
    pub last: Digest,
}

/// Checks the structure of the log in `dir` (see the module comment) and describes
/// every segment. A keyed log opened without its key (`key_id` `None` with
/// `allow_missing_key`) is checked the same way: headers and footers carry no link that
/// needs the key.
pub(crate) fn check_structure(
    dir: &Path,
    key_id: Option<[u8; 32]>,
    allow_missing_key: bool,
) -> Result<Vec<SegmentSummary>> {
    check_segments(&segment::list_segments(dir)?, key_id, allow_missing_key)
}

/// [`check_structure`] of the segments listed.
pub(crate) fn check_segments(
    segments: &[SegmentEntry],
    key_id: Option<[u8; 32]>,
    allow_missing_key: bool,
) -> Result<Vec<SegmentSummary>> {
    let mut point = ChainPoint {
        next_seq: 0,
        last_ts: 0,
        link: GENESIS_LINK,
    };
    let mut out = Vec::with_capacity(segments.len());
    for (i, entry) in segments.iter().enumerate() {
        let is_last = i + 1 == segments.len();
        let seg = match SegmentFile::open(entry, key_id, allow_missing_key)? {
            HeaderState::Ok(seg) => seg,
            HeaderState::Torn { len, .. } if is_last && entry.first_seq == point.next_seq => {
                // A creation a crash cut short: the next writer writes the header again.
                out.push(SegmentSummary {
                    path: entry.path.clone(),
                    first_seq: entry.first_seq,
                    len_bytes: len,
                    prev_link: point.link,
                    sealed: None,
                });
                break;
            }
            HeaderState::Torn { path, .. } => return Err(truncated_header(path, entry.first_seq)),
        };
        // A log pruned at its front starts at its first segment's header: readers take
        // the cut as it is; `verify` and the writer's open prove it by a prune record.
        if i == 0
            && let Some(start) = retention::cut_start(&seg)
        {
            point = start;
        }
        check_continuity(&seg, &point, i == 0 && point.next_seq == 0)?;
        let sealed = match seg.read_footer()? {
            None if is_last => None,
            None => return Err(missing_footer(&seg, segments, i)),
            Some((footer, footer_start)) => {
                point = point_after_footer(&seg, &footer, footer_start, &point)?;
                Some(SealedSummary {
                    record_count: footer.record_count,
                    first_ts_ns: footer.first_ts,
                    last_ts_ns: footer.last_ts,
                    last: Digest {
                        seq: footer.last_seq,
                        link: footer.last_link,
                    },
                })
            }
        };
        out.push(SegmentSummary {
            path: seg.path.clone(),
            first_seq: seg.header.first_seq,
            len_bytes: seg.len,
            prev_link: seg.header.prev_link,
            sealed,
        });
    }
    Ok(out)
}

/// The error for a segment whose header is shorter than a header or all zero, where
/// that cannot be a creation a crash cut short.
pub(crate) fn truncated_header(path: PathBuf, first_seq: u64) -> Error {
    Error::Corrupt(Corruption {
        segment: path,
        offset: 0,
        seq: Some(first_seq),
        kind: CorruptionKind::SegmentHeader("truncated or zeroed".to_owned()),
    })
}

/// The error for segment `i` of `segments`, which has no footer though another segment
/// follows it. When the one that follows is the last and holds no header (empty, short
/// or zeroed), that file is the one to blame: a writer creates a segment only after it
/// sealed the one before, so an empty file after an unsealed segment is a stray, not a
/// creation cut short.
pub(crate) fn missing_footer(seg: &SegmentFile, segments: &[SegmentEntry], i: usize) -> Error {
    if i + 2 == segments.len()
        && let Some(next) = segments.get(i + 1)
        && let Ok(HeaderState::Torn { path, .. }) = SegmentFile::open(next, None, true)
    {
        return Error::Corrupt(Corruption {
            segment: path,
            offset: 0,
            seq: Some(next.first_seq),
            kind: CorruptionKind::SegmentHeader(format!(
                "an empty or truncated file after segment {}, which is not sealed: not a segment the writer created",
                seg.path.display()
            )),
        });
    }
    Error::Corrupt(Corruption {
        segment: seg.path.clone(),
        offset: seg.len.saturating_sub(TRAILER_LEN as u64),
        seq: None,
        kind: CorruptionKind::Footer(
            "a sealed segment (one that is not the last) has no footer".to_owned(),
        ),
    })
}

/// Checks a footer against the chain point before its segment and returns the point
/// after it: the footer must start at the expected seq, hold at least one record, count
/// them consistently, keep timestamps in order, and end at a seq that has a successor.
pub(crate) fn point_after_footer(
    seg: &SegmentFile,
    footer: &Footer,
    footer_start: u64,
    point: &ChainPoint,
) -> Result<ChainPoint> {
    let fail = |why: String| {
        Error::from(Corruption {
            segment: seg.path.clone(),
            offset: footer_start,
            seq: Some(footer.first_seq),
            kind: CorruptionKind::Footer(why),
        })
    };
    if footer.first_seq != point.next_seq || footer.last_seq < footer.first_seq {
        return Err(fail(format!(
            "footer covers seqs {}..={}, expected to start at {}",
            footer.first_seq, footer.last_seq, point.next_seq
        )));
    }
    let Some(next_seq) = footer.last_seq.checked_add(1) else {
        return Err(fail(format!(
            "footer's last seq {} leaves no seq for the next record",
            footer.last_seq
        )));
    };
    // Every record takes at least a frame header, so a segment cannot hold more
    // records than its data bytes hold frame headers.
    let data_bytes = footer_start.saturating_sub(crate::format::SEGMENT_HEADER_LEN as u64);
    if footer.record_count > data_bytes / crate::format::FRAME_HEADER_LEN as u64 {
        return Err(fail(format!(
            "footer counts {} records, more than its {data_bytes} bytes of blocks can hold",
            footer.record_count
        )));
    }
    if footer.record_count != next_seq - footer.first_seq {
        return Err(fail(format!(
            "footer counts {} records for seqs {}..={}",
            footer.record_count, footer.first_seq, footer.last_seq
        )));
    }
    if footer.first_ts < point.last_ts || footer.last_ts < footer.first_ts {
        return Err(fail(format!(
            "footer's timestamps {}..={} are out of order (the segment before ends at {})",
            footer.first_ts, footer.last_ts, point.last_ts
        )));
    }
    Ok(ChainPoint {
        next_seq,
        last_ts: footer.last_ts,
        link: footer.last_link,
    })
}
