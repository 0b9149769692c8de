//! Full scans of segments, shared by recovery (the active segment) and `verify` (all).

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::chain::{Chainer, Link};
use crate::error::{Corruption, CorruptionKind, Error, Result};
use crate::format::{BlockHeader, FRAME_HEADER_LEN, Footer, IndexEntry, SEGMENT_HEADER_LEN};
use crate::retention::{PRUNE_RECORD_TYPE, PruneRecord};
use crate::segment::{BlockCursor, SegmentFile, Step};

/// Where a scan starts: the chain state left by the previous segment.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ChainPoint {
    pub(crate) next_seq: u64,
    pub(crate) last_ts: u64,
    pub(crate) link: Link,
}

/// How the data of a segment ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Tail {
    /// The blocks run to the end of the file.
    Clean,
    /// The blocks are followed by a footer that agrees with them.
    Sealed { footer_start: u64 },
    /// The bytes from `offset` to the end are a torn write: nothing intact follows.
    Torn { offset: u64, detail: String },
}

/// What a full scan of one segment found.
#[derive(Debug, Clone)]
pub(crate) struct SegmentScan {
    pub(crate) end: ChainPoint,
    pub(crate) record_count: u64,
    pub(crate) block_count: u64,
    pub(crate) first_ts: Option<u64>,
    pub(crate) type_counts: BTreeMap<u16, u64>,
    /// Every block: offset → index entry, to rebuild or check a sparse index.
    pub(crate) blocks: Vec<IndexEntry>,
    /// End of the last intact block.
    pub(crate) data_end: u64,
    pub(crate) tail: Tail,
    /// Link at the end of each block, with the block's last seq (for digest checks).
    pub(crate) block_ends: Vec<(u64, Link)>,
    /// The last prune record in the segment: its seq, timestamp and content.
    pub(crate) last_prune: Option<(u64, u64, PruneRecord)>,
}

/// Scans every block of `seg` from its header, checking checksums, seqs, timestamps and,
/// with a `chainer`, the chain. A sealed segment (`is_last == false`) must end in a
/// footer that agrees with its blocks; the last segment may instead end cleanly, in a
/// footer, or in a torn tail.
pub(crate) fn scan_segment(
    seg: &Arc<SegmentFile>,
    start: ChainPoint,
    chainer: Option<&Chainer>,
    is_last: bool,
    keep_block_ends: bool,
) -> Result<SegmentScan> {
    let footer = if is_last { None } else { seg.read_footer()? };
    if !is_last && footer.is_none() {
        return Err(Corruption {
            segment: seg.path.clone(),
            offset: seg.len.saturating_sub(crate::format::TRAILER_LEN as u64),
            seq: None,
            kind: CorruptionKind::Footer(
                "a sealed segment (one that is not the last) has no footer".to_owned(),
            ),
        }
        .into());
    }
    let end = footer.as_ref().map_or(seg.len, |(_, start)| *start);
    let mut cursor = BlockCursor::new(
        Arc::clone(seg),
        SEGMENT_HEADER_LEN as u64,
        end,
        start.next_seq,
        start.last_ts,
        start.link,
    );
    let mut scan = SegmentScan {
        end: start,
        record_count: 0,
        block_count: 0,
        first_ts: None,
        type_counts: BTreeMap::new(),
        blocks: Vec::new(),
        data_end: SEGMENT_HEADER_LEN as u64,
        tail: Tail::Clean,
        block_ends: Vec::new(),
        last_prune: None,
    };
    loop {
        let prev_link = cursor.prev_link;
        match cursor.next(chainer)? {
            Step::Block(block) => {
                let h = block.header;
                scan.blocks.push(IndexEntry {
                    first_seq: h.first_seq,
                    first_ts: h.first_ts,
                    offset: block.offset,
                    prev_link,
                });
                scan.first_ts.get_or_insert(h.first_ts);
                scan.record_count += u64::from(h.count);
                scan.block_count += 1;
                let mut has_prune = false;
                for_each_type(block.frames(), h.count, |t| {
                    *scan.type_counts.entry(t).or_insert(0) += 1;
                    has_prune |= t == PRUNE_RECORD_TYPE.0;
                });
                if has_prune && let Some(found) = last_prune_in(block.frames(), &h) {
                    let (seq, ts, rec) = found.map_err(|why| {
                        Error::from(Corruption {
                            segment: seg.path.clone(),
                            offset: block.offset,
                            seq: Some(h.first_seq),
                            kind: CorruptionKind::Frame(format!(
                                "a prune record in this block: {why}"
                            )),
                        })
                    })?;
                    scan.last_prune = Some((seq, ts, rec));
                }
                if keep_block_ends {
                    scan.block_ends.push((h.last_seq(), h.link));
                }
                scan.data_end = cursor.pos;
            }
            Step::End => break,
            Step::Damaged {
                offset,
                detail,
                frame,
            } => {
                let seq = cursor.next_seq;
                let corrupt = |kind| {
                    Error::from(Corruption {
                        segment: seg.path.clone(),
                        offset,
                        seq: Some(seq),
                        kind,
                    })
                };
                if !is_last {
                    // Name the damaged frame, if it is one, rather than its block.
                    return Err(match frame {
                        Some((at, frame_seq)) => Error::from(Corruption {
                            segment: seg.path.clone(),
                            offset: at,
                            seq: Some(frame_seq),
                            kind: CorruptionKind::Frame(detail),
                        }),
                        None => corrupt(CorruptionKind::BlockHeader(detail)),
                    });
                }
                let footer_at = seg.read_footer()?.map(|(_, start)| start);
                if footer_at == Some(offset) {
                    scan.tail = Tail::Sealed {
                        footer_start: offset,
                    };
                    break;
                }
                // Intact data after the damage (an intact block header, or the footer:
                // a segment that ends in one was written to its end) is refused, unless
                // the damage is a page a power loss kept from the disk: what follows it
                // was never synced (the pages of synced data all reached the disk), and
                // is cut with it.
                let mut detail = detail;
                let intact = match (cursor.intact_block_after(offset)?, footer_at) {
                    (Some(block), Some(footer)) => Some(block.min(footer)),
                    (block, footer) => block.or(footer),
                };
                if let Some(intact) = intact {
                    if !cursor.lost_pages_explain(offset, intact)? {
                        return Err(corrupt(CorruptionKind::DamageBeforeIntactData { detail }));
                    }
                    detail = format!(
                        "{detail}; pages of zeros explain it before intact data at byte \
                         {intact}: unsynced data a power loss kept from the disk"
                    );
                }
                scan.tail = Tail::Torn { offset, detail };
                break;
            }
        }
    }
    scan.end = ChainPoint {
        next_seq: cursor.next_seq,
        last_ts: cursor.last_ts,
        link: cursor.prev_link,
    };
    let footer = match (&scan.tail, footer) {
        (_, Some((f, _))) => Some(f),
        (Tail::Sealed { .. }, None) => seg.read_footer()?.map(|(f, _)| f),
        _ => None,
    };
    if let Some(footer) = footer {
        check_footer(seg, &scan, start, &footer, chainer)?;
    }
    Ok(scan)
}

/// Calls `f` with the record type of each of the `count` frames in `frames`.
/// The last prune record among a checked block's frames, with its seq and timestamp.
pub(crate) fn last_prune_in(
    frames: &[u8],
    h: &BlockHeader,
) -> Option<std::result::Result<(u64, u64, PruneRecord), String>> {
    let mut at = 0usize;
    let mut found = None;
    for i in 0..h.count {
        let len = crate::format::u32_at(frames, at) as usize;
        if crate::format::u16_at(frames, at + 4) == PRUNE_RECORD_TYPE.0 {
            let ts = h.first_ts + u64::from(crate::format::u32_at(frames, at + 8));
            let payload = &frames[at + FRAME_HEADER_LEN..at + FRAME_HEADER_LEN + len];
            found = Some((h.first_seq + u64::from(i), ts, payload));
        }
        at += crate::format::frame_len(len);
    }
    found.map(|(seq, ts, payload)| PruneRecord::decode(payload).map(|r| (seq, ts, r)))
}

pub(crate) fn for_each_type(frames: &[u8], count: u32, mut f: impl FnMut(u16)) {
    let mut at = 0usize;
    for _ in 0..count {
        let len = crate::format::u32_at(frames, at) as usize;
        f(crate::format::u16_at(frames, at + 4));
        at += crate::format::frame_len(len);
    }
}

/// Checks that a footer agrees with the blocks it closes.
fn check_footer(
    seg: &SegmentFile,
    scan: &SegmentScan,
    start: ChainPoint,
    f: &Footer,
    chainer: Option<&Chainer>,
) -> Result<()> {
    let fail = |why: String| {
        Error::from(Corruption {
            segment: seg.path.clone(),
            offset: scan.data_end,
            seq: None,
            kind: CorruptionKind::Footer(why),
        })
    };
    let last_seq = scan.end.next_seq.checked_sub(1);
    let expect = [
        ("record count", f.record_count, scan.record_count),
        ("block count", f.block_count, scan.block_count),
        ("first seq", f.first_seq, start.next_seq),
        ("last seq", f.last_seq, last_seq.unwrap_or(0)),
        ("first ts", f.first_ts, scan.first_ts.unwrap_or(0)),
        ("last ts", f.last_ts, scan.end.last_ts),
    ];
    for (what, stored, actual) in expect {
        if stored != actual {
            return Err(fail(format!("{what} is {stored}, the blocks say {actual}")));
        }
    }
    if f.last_link != scan.end.link {
        return Err(fail(
            "last link differs from the last block's link".to_owned(),
        ));
    }
    let counts: Vec<(u16, u64)> = scan.type_counts.iter().map(|(&t, &n)| (t, n)).collect();
    if f.type_counts != counts {
        return Err(fail("per-type counts disagree with the blocks".to_owned()));
    }
    let mut blocks = scan.blocks.iter();
    for e in &f.index {
        if !blocks.any(|b| b == e) {
            return Err(fail(format!(
                "index entry for seq {} at byte {} names no block (or is out of order)",
                e.first_seq, e.offset
            )));
        }
    }
    // Every tag-index entry names a block by its first seq and its record count.
    let mut starts = scan.blocks.iter().map(|b| b.first_seq).peekable();
    for t in &f.tags {
        let named = loop {
            match starts.next() {
                Some(s) if s == t.first_seq => {
                    let end = starts.peek().copied().unwrap_or(scan.end.next_seq);
                    break end - s == u64::from(t.count);
                }
                Some(s) if s < t.first_seq => {}
                _ => break false,
            }
        };
        if !named {
            return Err(fail(format!(
                "tag index entry for seq {} ({} records) names no block (or is out of order)",
                t.first_seq, t.count
            )));
        }
    }
    if let Some(chainer) = chainer
        && chainer.tag_mac(&f.tag_mac_message()) != f.tag_mac
    {
        return Err(fail(
            "the tag index does not match its authenticator".to_owned(),
        ));
    }
    Ok(())
}
