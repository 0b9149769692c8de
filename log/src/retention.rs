//! Retention: a disk budget kept by removing the oldest sealed segments whole, and the
//! prune record that puts every such removal on the record.
//!
//! The log never changes a record: pruning unlinks whole sealed segments from the
//! front of the log, after it has appended (and made durable) a prune record that says
//! which seqs and bytes went, why, and the chain link at the cut. The first retained
//! segment's header holds the cut's seq and link, so `verify` proves the retained log's
//! continuity from the cut; a log that starts past seq 0 without a prune record that
//! explains it is damage (`MissingStart`).
//!
//! What is pinned is the layer above's decision ([`Pin`], [`Log::set_pins`]): a pin
//! holds back the cut at the oldest segment it touches. Because seqs are dense in the
//! retained log (no holes), every segment after a pinned one is kept too; the bytes
//! pins keep beyond the budget are capped by [`Retention::pinned_max_bytes`], and when
//! they would pass it the oldest pin is evicted (and named in the prune record).
//!
//! [`Log::set_pins`]: crate::Log::set_pins

use std::path::{Path, PathBuf};

use crate::RecordType;
use crate::chain::Link;
use crate::error::{Corruption, CorruptionKind, Error, Result};
use crate::format::{u16_at, u32_at, u64_at};
use crate::scan::ChainPoint;
use std::sync::Arc;

use crate::chain::Chainer;
use crate::format::SEGMENT_HEADER_LEN;
use crate::segment::{BlockCursor, HeaderState, SegmentEntry, SegmentFile, Step};
use crate::storage::Storage;
use crate::structure;

/// The record type the log reserves for its prune records (FORMAT.md, "Prune
/// record"). [`Log::append`](crate::Log::append) refuses it from the layers above.
pub const PRUNE_RECORD_TYPE: RecordType = RecordType(0xFFFF);

/// The prune record's layout version.
pub const PRUNE_RECORD_VERSION: u16 = 1;

/// Reason bit: the log was over [`Retention::max_bytes`].
pub const REASON_BYTES: u16 = 1;
/// Reason bit: segments were older than [`Retention::max_age_ns`].
pub const REASON_AGE: u16 = 2;
/// Reason bit: pins held back more than [`Retention::pinned_max_bytes`], so the oldest
/// pins were evicted (listed in [`PruneRecord::evicted_pins`]).
pub const REASON_PINNED_CAP: u16 = 4;
/// Reason bit: the disk was full (a write failed with `ENOSPC`), so the oldest unpinned
/// sealed segments went to make room, whatever the budget still allowed.
pub const REASON_DISK_FULL: u16 = 8;

/// Reason bit, with a shipping hold ([`LogOptions::prune_after_shipped`](crate::LogOptions::prune_after_shipped)):
/// every segment removed had been shipped.
pub const REASON_SHIPPED: u16 = 16;
/// Reason bit, with a shipping hold: a full disk removed a segment not yet shipped.
pub const REASON_UNSHIPPED: u16 = 32;

/// How far a log's segments are shipped, shared between the shipper, which raises it
/// as each pass ends, and the log, which under
/// [`LogOptions::prune_after_shipped`](crate::LogOptions::prune_after_shipped) prunes
/// no segment past it for its budget.
#[derive(Debug, Clone, Default)]
pub struct ShippedThrough(std::sync::Arc<std::sync::atomic::AtomicU64>);

impl ShippedThrough {
    /// Nothing shipped yet.
    pub fn new() -> ShippedThrough {
        ShippedThrough::default()
    }

    /// Every seq up to `seq` is shipped (never lowered).
    pub fn set(&self, seq: u64) {
        self.0
            .fetch_max(seq.saturating_add(1), std::sync::atomic::Ordering::SeqCst);
    }

    /// The last seq shipped, if any.
    pub fn get(&self) -> Option<u64> {
        self.0
            .load(std::sync::atomic::Ordering::SeqCst)
            .checked_sub(1)
    }

    /// How many of the oldest of `sealed` are shipped whole.
    pub(crate) fn shipped_count(&self, sealed: &[SealedInfo]) -> usize {
        let through = self.get();
        sealed
            .iter()
            .take_while(|s| through.is_some_and(|t| s.last_seq <= t))
            .count()
    }
}

/// Bytes of a prune record before its segment list.
const FIXED_LEN: usize = 88;
/// Bytes per removed segment: first seq, prev link.
const SEGMENT_ENTRY_LEN: usize = 40;
/// Most segments one prune record lists (and so one pruning removes).
pub const PRUNE_SEGMENTS_MAX: usize = 4096;
/// Most pins one prune record names as evicted.
pub const PRUNE_EVICTED_MAX: usize = 4096;

/// A disk budget for [`LogOptions::retention`](crate::LogOptions::retention). Checked
/// after every seal: when the log is over `max_bytes`, or its oldest sealed segments
/// hold only records older than `max_age_ns` before the newest record, the oldest
/// sealed segments are removed, whole. The active segment is never removed, so the
/// log can stay over budget by up to one segment (plus what pins keep); under
/// `max_bytes` the log writes segments of at most an eighth of it (never below 64
/// KiB: [`LogOptions::effective_segment_bytes_max`](crate::LogOptions::effective_segment_bytes_max)),
/// so a budget smaller than the configured segment size still prunes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Retention {
    /// Most bytes of segment files to keep (all segments, the active one included);
    /// `None`: no limit by size.
    pub max_bytes: Option<u64>,
    /// Most age of a sealed segment's newest record, in ns before the newest record
    /// written; `None`: no limit by age.
    pub max_age_ns: Option<u64>,
    /// Most bytes pins may keep beyond what `max_bytes` and `max_age_ns` would remove.
    /// 0: pins keep nothing.
    pub pinned_max_bytes: u64,
}

impl Retention {
    /// Whether this budget can ever remove anything.
    pub fn is_bounded(&self) -> bool {
        self.max_bytes.is_some() || self.max_age_ns.is_some()
    }
}

/// A seq range the layer above wants kept (the recorder: an incident's pre-roll,
/// trigger and post-roll). A sealed segment that holds any seq of the range is pinned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pin {
    /// The layer above's name for it (the recorder: the incident's trigger seq).
    pub id: u64,
    /// First seq of the range.
    pub first_seq: u64,
    /// Last seq of the range; `None` while it is still open (a post-roll running).
    pub last_seq: Option<u64>,
}

/// A prune record's content (FORMAT.md, "Prune record").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PruneRecord {
    /// Why: [`REASON_BYTES`], [`REASON_AGE`], [`REASON_PINNED_CAP`],
    /// [`REASON_DISK_FULL`], or'ed.
    pub reasons: u16,
    /// First seq removed (the first seq of the oldest segment removed).
    pub first_seq: u64,
    /// Last seq removed: the log now starts at `last_seq + 1`.
    pub last_seq: u64,
    /// Bytes of segment files removed.
    pub bytes: u64,
    /// Timestamp of the first record removed (ns).
    pub first_ts_ns: u64,
    /// Timestamp of the last record removed (ns).
    pub last_ts_ns: u64,
    /// The chain link after `last_seq`: the first retained segment's `prev_link`.
    pub cut_link: Link,
    /// Every segment removed, oldest first: its first seq and its header's `prev_link`.
    /// A crash between the record and the last unlink leaves one of these first.
    pub segments: Vec<(u64, Link)>,
    /// The pins evicted because pins held back more than `pinned_max_bytes`.
    pub evicted_pins: Vec<u64>,
}

impl PruneRecord {
    /// The record's payload.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(
            FIXED_LEN + self.segments.len() * SEGMENT_ENTRY_LEN + self.evicted_pins.len() * 8,
        );
        out.extend_from_slice(&PRUNE_RECORD_VERSION.to_le_bytes());
        out.extend_from_slice(&self.reasons.to_le_bytes());
        out.extend_from_slice(
            &u32::try_from(self.segments.len())
                .unwrap_or(u32::MAX)
                .to_le_bytes(),
        );
        out.extend_from_slice(
            &u32::try_from(self.evicted_pins.len())
                .unwrap_or(u32::MAX)
                .to_le_bytes(),
        );
        out.extend_from_slice(&[0; 4]);
        for v in [
            self.first_seq,
            self.last_seq,
            self.bytes,
            self.first_ts_ns,
            self.last_ts_ns,
        ] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out.extend_from_slice(&self.cut_link);
        for (seq, link) in &self.segments {
            out.extend_from_slice(&seq.to_le_bytes());
            out.extend_from_slice(link);
        }
        for id in &self.evicted_pins {
            out.extend_from_slice(&id.to_le_bytes());
        }
        out
    }

    /// Reads a prune record's payload; the error says which part is wrong.
    ///
    /// # Errors
    ///
    /// A sentence naming the field: a payload of the wrong length for its counts, an
    /// unknown version, nonzero reserved bytes, seqs out of order, a segment list that
    /// does not start at `first_seq` or is not ascending within the range.
    pub fn decode(b: &[u8]) -> Result<PruneRecord, String> {
        if b.len() < FIXED_LEN {
            return Err(format!(
                "a prune record of {} bytes is shorter than its {FIXED_LEN}-byte header",
                b.len()
            ));
        }
        let version = u16_at(b, 0);
        if version != PRUNE_RECORD_VERSION {
            return Err(format!(
                "prune record version {version} is not {PRUNE_RECORD_VERSION}"
            ));
        }
        let reasons = u16_at(b, 2);
        let n_segments = u32_at(b, 4) as usize;
        let n_evicted = u32_at(b, 8) as usize;
        if u32_at(b, 12) != 0 {
            return Err("a prune record's reserved bytes 12..16 are not zero".to_owned());
        }
        if n_segments == 0 || n_segments > PRUNE_SEGMENTS_MAX || n_evicted > PRUNE_EVICTED_MAX {
            return Err(format!(
                "a prune record lists {n_segments} segments and {n_evicted} evicted pins (1 to {PRUNE_SEGMENTS_MAX} and at most {PRUNE_EVICTED_MAX})"
            ));
        }
        let expected = FIXED_LEN + n_segments * SEGMENT_ENTRY_LEN + n_evicted * 8;
        if b.len() != expected {
            return Err(format!(
                "a prune record listing {n_segments} segments and {n_evicted} pins is {expected} bytes, not {}",
                b.len()
            ));
        }
        let rec = PruneRecord {
            reasons,
            first_seq: u64_at(b, 16),
            last_seq: u64_at(b, 24),
            bytes: u64_at(b, 32),
            first_ts_ns: u64_at(b, 40),
            last_ts_ns: u64_at(b, 48),
            cut_link: b[56..88].try_into().expect("32 bytes"),
            segments: (0..n_segments)
                .map(|i| {
                    let at = FIXED_LEN + i * SEGMENT_ENTRY_LEN;
                    (
                        u64_at(b, at),
                        b[at + 8..at + 40].try_into().expect("32 bytes"),
                    )
                })
                .collect(),
            evicted_pins: (0..n_evicted)
                .map(|i| u64_at(b, FIXED_LEN + n_segments * SEGMENT_ENTRY_LEN + i * 8))
                .collect(),
        };
        if rec.last_seq < rec.first_seq || rec.last_ts_ns < rec.first_ts_ns {
            return Err(format!(
                "a prune record's range {}..={} (times {}..={}) is out of order",
                rec.first_seq, rec.last_seq, rec.first_ts_ns, rec.last_ts_ns
            ));
        }
        if rec.segments[0].0 != rec.first_seq
            || rec
                .segments
                .windows(2)
                .any(|w| w[1].0 <= w[0].0 || w[1].0 > rec.last_seq)
        {
            return Err(
                "a prune record's segments do not start at its first seq and ascend within its range"
                    .to_owned(),
            );
        }
        Ok(rec)
    }

    /// Whether a log whose first segment starts at `first_seq` with `prev_link` is what
    /// this pruning left: its cut (`last_seq + 1`, `cut_link`), or, after a crash
    /// between the record and the last unlink, one of the segments it removes.
    pub fn explains_start(&self, first_seq: u64, prev_link: &Link) -> bool {
        (self.last_seq.checked_add(1) == Some(first_seq) && self.cut_link == *prev_link)
            || self
                .segments
                .iter()
                .any(|(seq, link)| *seq == first_seq && link == prev_link)
    }

    /// The link after seq `seq` if this record knows it: at the cut, or before one of
    /// the segments it removed.
    pub fn link_after(&self, seq: u64) -> Option<Link> {
        if seq == self.last_seq {
            return Some(self.cut_link);
        }
        self.segments
            .iter()
            .find(|(first, _)| first.checked_sub(1) == Some(seq))
            .map(|(_, link)| *link)
    }
}

/// A sealed segment, as pruning needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SealedInfo {
    pub(crate) path: PathBuf,
    pub(crate) first_seq: u64,
    pub(crate) last_seq: u64,
    pub(crate) bytes: u64,
    pub(crate) first_ts: u64,
    pub(crate) last_ts: u64,
    pub(crate) prev_link: Link,
}

/// What one pruning removes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Plan {
    /// How many of the oldest sealed segments go.
    pub(crate) remove: usize,
    pub(crate) reasons: u16,
    /// Pins evicted, oldest first.
    pub(crate) evicted: Vec<u64>,
}

/// Decides what a pruning removes: `sealed` oldest first, `active_bytes` the active
/// segment's bytes, `newest_ts` the newest record's time.
///
/// The budget alone removes the longest prefix of sealed segments such that the rest
/// fits `max_bytes` and no removed segment is younger than `max_age_ns`. A pinned
/// segment in that prefix stops the cut there; if the bytes it keeps beyond the budget
/// (from it to the end of the prefix) pass `pinned_max_bytes`, the oldest pin among
/// those in the prefix is evicted and the cut is decided again.
pub(crate) fn plan(
    sealed: &[SealedInfo],
    active_bytes: u64,
    retention: &Retention,
    pins: &[Pin],
    newest_ts: u64,
) -> Plan {
    let mut total: u64 = sealed.iter().map(|s| s.bytes).sum::<u64>() + active_bytes;
    let mut reasons = 0;
    let mut want = 0;
    for s in sealed {
        let over_bytes = retention.max_bytes.is_some_and(|max| total > max);
        let too_old = retention
            .max_age_ns
            .is_some_and(|age| newest_ts.saturating_sub(s.last_ts) > age);
        if !over_bytes && !too_old {
            break;
        }
        reasons |= if over_bytes { REASON_BYTES } else { 0 } | if too_old { REASON_AGE } else { 0 };
        total -= s.bytes;
        want += 1;
    }
    let pinned = |s: &SealedInfo, p: &Pin| {
        p.first_seq <= s.last_seq && p.last_seq.is_none_or(|last| last >= s.first_seq)
    };
    let mut pins: Vec<Pin> = pins.to_vec();
    pins.sort_by_key(|p| (p.first_seq, p.id));
    let mut evicted = Vec::new();
    loop {
        let cut = sealed[..want]
            .iter()
            .position(|s| pins.iter().any(|p| pinned(s, p)))
            .unwrap_or(want);
        let held: u64 = sealed[cut..want].iter().map(|s| s.bytes).sum();
        if held <= retention.pinned_max_bytes {
            if !evicted.is_empty() {
                reasons |= REASON_PINNED_CAP;
            }
            return Plan {
                remove: cut,
                reasons: if cut == 0 { 0 } else { reasons },
                evicted: if cut == 0 { Vec::new() } else { evicted },
            };
        }
        // The oldest pin that holds a segment of the prefix goes.
        let Some(i) = pins
            .iter()
            .position(|p| sealed[..want].iter().any(|s| pinned(s, p)))
        else {
            unreachable!("a pinned segment has a pin");
        };
        evicted.push(pins.remove(i).id);
    }
}

/// Decides what a pruning on a full disk removes: the oldest sealed segments, up to the
/// first pinned one (pins are never evicted for room), until they free `needed` bytes
/// (at least one segment, when the oldest is not pinned).
pub(crate) fn plan_disk_full(sealed: &[SealedInfo], pins: &[Pin], needed: u64) -> Plan {
    let mut remove = 0;
    let mut freed = 0u64;
    for s in sealed {
        let pinned = pins.iter().any(|p| {
            p.first_seq <= s.last_seq && p.last_seq.is_none_or(|last| last >= s.first_seq)
        });
        if pinned || (remove > 0 && freed >= needed) {
            break;
        }
        remove += 1;
        freed = freed.saturating_add(s.bytes);
    }
    Plan {
        remove,
        reasons: if remove == 0 { 0 } else { REASON_DISK_FULL },
        evicted: Vec::new(),
    }
}

/// Where the log starts when its first segment starts past seq 0: at that segment's
/// header (`first_seq`, `prev_link`), a cut that a prune record must explain. `None`
/// for a segment at seq 0, which must start from the genesis link.
pub(crate) fn cut_start(seg: &SegmentFile) -> Option<ChainPoint> {
    (seg.header.first_seq > 0).then_some(ChainPoint {
        next_seq: seg.header.first_seq,
        last_ts: 0,
        link: seg.header.prev_link,
    })
}

/// The error for a log that starts past seq 0 without a prune record that explains it:
/// its first segments are missing.
pub(crate) fn missing_start(path: &Path, first_seq: u64) -> Error {
    Error::Corrupt(Corruption {
        segment: path.to_owned(),
        offset: 0,
        seq: Some(first_seq),
        kind: CorruptionKind::MissingStart { first_seq },
    })
}

/// The sealed segments of the log in `dir` (all but the last), oldest first, from their
/// headers and footers, and the last segment's `prev_link`.
pub(crate) fn sealed_segments(
    dir: &Path,
    key_id: Option<[u8; 32]>,
) -> Result<(Vec<SealedInfo>, Link)> {
    let all = structure::check_structure(dir, key_id, false)?;
    let Some((active, sealed)) = all.split_last() else {
        return Ok((Vec::new(), crate::chain::GENESIS_LINK));
    };
    let sealed = sealed
        .iter()
        .filter_map(|s| {
            s.sealed.map(|f| SealedInfo {
                path: s.path.clone(),
                first_seq: s.first_seq,
                last_seq: f.last.seq,
                bytes: s.len_bytes,
                first_ts: f.first_ts_ns,
                last_ts: f.last_ts_ns,
                prev_link: s.prev_link,
            })
        })
        .collect();
    Ok((sealed, active.prev_link))
}

/// The prune record for removing `removed` (oldest first, at least one) by `plan`.
/// The prune record of `plan` over `sealed` (oldest first), and the paths it removes:
/// the chain link at the cut is the `prev_link` of the first segment kept, or
/// `active_prev_link` when every sealed segment goes.
pub(crate) fn prepare(
    sealed: &[SealedInfo],
    plan: &Plan,
    active_prev_link: Link,
) -> (PruneRecord, Vec<PathBuf>) {
    let removed = &sealed[..plan.remove];
    let cut_link = sealed
        .get(plan.remove)
        .map_or(active_prev_link, |s| s.prev_link);
    let record = record_for(removed, plan, cut_link);
    let paths = removed.iter().map(|s| s.path.clone()).collect();
    (record, paths)
}

pub(crate) fn record_for(removed: &[SealedInfo], plan: &Plan, cut_link: Link) -> PruneRecord {
    PruneRecord {
        reasons: plan.reasons,
        first_seq: removed[0].first_seq,
        last_seq: removed[removed.len() - 1].last_seq,
        bytes: removed.iter().map(|s| s.bytes).sum(),
        first_ts_ns: removed[0].first_ts,
        last_ts_ns: removed[removed.len() - 1].last_ts,
        cut_link,
        segments: removed.iter().map(|s| (s.first_seq, s.prev_link)).collect(),
        evicted_pins: plan.evicted.clone(),
    }
}

/// Unlinks `paths` oldest first, then makes the removals durable (fsync of the
/// directory). The prune record that names them must be durable before this starts.
pub(crate) fn remove_segments(dir: &Path, storage: &dyn Storage, paths: &[PathBuf]) -> Result<()> {
    for path in paths {
        storage
            .remove_file(path)
            .map_err(|e| Error::io("remove pruned segment", path, e))?;
    }
    storage
        .sync_dir(dir)
        .map_err(|e| Error::io("fsync log directory", dir, e))
}

/// Proves, for a reader, that a log whose first segment starts at `start` (past seq 0)
/// was pruned there: finds a prune record that explains the start, looking at the
/// sealed segments newest first (only those whose footer counts a prune record, each
/// read until such a record), then at the last segment. Its blocks are checked as any
/// read's (chain included with a `chainer`).
///
/// # Errors
///
/// `MissingStart` when no prune record explains the start; damage met on the way.
pub(crate) fn prove_cut(
    segments: &[SegmentEntry],
    key_id: Option<[u8; 32]>,
    chainer: Option<&Chainer>,
    first: &SegmentFile,
    start: &ChainPoint,
) -> Result<()> {
    let n = segments.len();
    // Sealed segments newest first, then the last one.
    let order = (0..n.saturating_sub(1)).rev().chain(n.checked_sub(1));
    for i in order {
        let is_last = i + 1 == n;
        let seg = match SegmentFile::open(&segments[i], key_id, true)? {
            HeaderState::Ok(seg) => Arc::new(seg),
            HeaderState::Torn { .. } => continue,
        };
        let footer = seg.read_footer()?;
        let end = match &footer {
            Some((f, at)) if f.type_counts.iter().any(|&(t, _)| t == PRUNE_RECORD_TYPE.0) => *at,
            Some(_) => continue,
            None if is_last => seg.len,
            None => continue,
        };
        let mut cursor = BlockCursor::new(
            Arc::clone(&seg),
            SEGMENT_HEADER_LEN as u64,
            end,
            seg.header.first_seq,
            0,
            seg.header.prev_link,
        );
        while let Step::Block(block) = cursor.next(chainer)? {
            if let Some(found) = crate::scan::last_prune_in(block.frames(), &block.header) {
                let (_, _, rec) = found.map_err(|why| {
                    Error::from(Corruption {
                        segment: seg.path.clone(),
                        offset: block.offset,
                        seq: Some(block.header.first_seq),
                        kind: CorruptionKind::Frame(format!("a prune record in this block: {why}")),
                    })
                })?;
                if rec.explains_start(start.next_seq, &start.link) {
                    return Ok(());
                }
            }
        }
    }
    Err(missing_start(&first.path, start.next_seq))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(first: u64, last: u64, bytes: u64, ts: u64) -> SealedInfo {
        SealedInfo {
            first_seq: first,
            last_seq: last,
            bytes,
            first_ts: ts,
            last_ts: ts,
            path: PathBuf::from(format!("{first}")),
            prev_link: [u8::try_from(first).unwrap_or(0); 32],
        }
    }

    #[test]
    fn a_prune_record_reads_back_and_refuses_a_wrong_length() {
        let rec = PruneRecord {
            reasons: REASON_BYTES | REASON_PINNED_CAP,
            first_seq: 10,
            last_seq: 29,
            bytes: 4096,
            first_ts_ns: 5,
            last_ts_ns: 9,
            cut_link: [7; 32],
            segments: vec![(10, [1; 32]), (20, [2; 32])],
            evicted_pins: vec![3],
        };
        let b = rec.encode();
        assert_eq!(b.len(), 88 + 2 * 40 + 8);
        assert_eq!(PruneRecord::decode(&b), Ok(rec.clone()));
        assert!(PruneRecord::decode(&b[..b.len() - 1]).is_err());
        assert!(rec.explains_start(30, &[7; 32]));
        assert!(rec.explains_start(20, &[2; 32]));
        assert!(!rec.explains_start(20, &[7; 32]));
        assert!(!rec.explains_start(40, &[7; 32]));
        assert_eq!(rec.link_after(19), Some([2; 32]));
        assert_eq!(rec.link_after(29), Some([7; 32]));
        assert_eq!(rec.link_after(25), None);
    }

    #[test]
    fn a_full_disk_removes_the_oldest_until_enough_is_freed_and_never_past_a_pin() {
        let sealed = [seg(0, 9, 100, 1), seg(10, 19, 100, 2), seg(20, 29, 100, 3)];
        // At least one segment, then as many as free what is needed.
        assert_eq!(plan_disk_full(&sealed, &[], 0).remove, 1);
        assert_eq!(plan_disk_full(&sealed, &[], 100).remove, 1);
        assert_eq!(plan_disk_full(&sealed, &[], 101).remove, 2);
        assert_eq!(plan_disk_full(&sealed, &[], 1000).remove, 3);
        assert_eq!(plan_disk_full(&sealed, &[], 1).reasons, REASON_DISK_FULL);
        // A pin stops the cut at its oldest segment, and is not evicted.
        let pin = Pin {
            id: 1,
            first_seq: 15,
            last_seq: None,
        };
        let p = plan_disk_full(&sealed, &[pin], 1000);
        assert_eq!((p.remove, p.evicted), (1, vec![]));
        let on_first = Pin {
            id: 2,
            first_seq: 0,
            last_seq: Some(0),
        };
        let p = plan_disk_full(&sealed, &[on_first], 1000);
        assert_eq!((p.remove, p.reasons), (0, 0));
    }

    #[test]
    fn a_pin_holds_the_cut_until_its_bytes_pass_the_cap() {
        let sealed = [seg(0, 9, 100, 1), seg(10, 19, 100, 2), seg(20, 29, 100, 3)];
        let r = Retention {
            max_bytes: Some(100),
            max_age_ns: None,
            pinned_max_bytes: 200,
        };
        // Unpinned: 350 bytes, three segments go to fit 100 (the active one has 50).
        assert_eq!(plan(&sealed, 50, &r, &[], 3).remove, 3);
        // A pin on seqs 12..=14 keeps the second segment and all after it: 200 held.
        let pin = Pin {
            id: 1,
            first_seq: 12,
            last_seq: Some(14),
        };
        assert_eq!(plan(&sealed, 50, &r, &[pin], 3).remove, 1);
        // With a cap of 150 the pin is evicted and all three go.
        let r = Retention {
            pinned_max_bytes: 150,
            ..r
        };
        let p = plan(&sealed, 50, &r, &[pin], 3);
        assert_eq!((p.remove, p.evicted), (3, vec![1]));
        assert_eq!(p.reasons, REASON_BYTES | REASON_PINNED_CAP);
    }
}
