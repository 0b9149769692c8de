//! Readers: range reads by seq or time over the durable prefix, checking as they go.

use std::ops::{Bound, RangeBounds};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::chain::{ChainKey, Chainer, Digest, GENESIS_LINK, Link};
use crate::error::{Corruption, CorruptionKind, Error, Result};
use crate::format::{self, FRAME_HEADER_LEN, Footer, SEGMENT_HEADER_LEN};
use crate::salvage::Salvage;
use crate::scan::ChainPoint;
use crate::segment::{
    self, AlignedBuf, BlockCursor, CheckedBlock, HeaderOnly, HeaderState, SegmentEntry,
    SegmentFile, Step,
};
use crate::source::{self, SegmentSource};
use crate::structure::{self, SegmentSummary};
use crate::writer::check_continuity;
use crate::{RecordType, Seq};

/// Options for [`LogReader::open_with`].
#[derive(Debug, Clone, Default)]
pub struct ReaderOptions {
    /// The chain key of a keyed log. Without it a keyed log can still be read, with
    /// every frame checksum checked, but its chain cannot be verified.
    pub key: Option<ChainKey>,
}

/// Reads a log directory, also while a writer appends to it (from another thread or
/// process). A reader sees the records written to the OS when a range read starts.
///
/// Every block a reader returns records from has passed its frame checksums and, unless
/// the log is keyed and no key was given, its chain link.
#[derive(Debug, Clone)]
pub struct LogReader {
    dir: PathBuf,
    /// The store of a log read by URL; `None` for a directory.
    source: Option<Arc<dyn SegmentSource>>,
    /// The structure the source knows without reading segments (a shipped log's
    /// manifest), by first seq.
    summaries: Option<Arc<Vec<SegmentSummary>>>,
    pub(crate) key_id: Option<[u8; 32]>,
    pub(crate) chainer: Option<Chainer>,
    keyed_without_key: bool,
}

impl LogReader {
    /// Opens a reader on an unkeyed log (or a keyed one, without chain verification).
    ///
    /// # Errors
    ///
    /// [`Error::NotALog`] if the directory holds something else, I/O errors.
    pub fn open(dir: impl AsRef<Path>) -> Result<LogReader> {
        LogReader::open_with(dir, ReaderOptions::default())
    }

    /// Opens a reader with options.
    ///
    /// # Errors
    ///
    /// As [`LogReader::open`]; [`Error::WrongKey`] if the key does not match.
    pub fn open_with(dir: impl AsRef<Path>, opts: ReaderOptions) -> Result<LogReader> {
        let dir = dir.as_ref().to_owned();
        let (segments, source) = if source::is_url(&dir) {
            let source = source::open_url(&dir)?;
            (source::list_source(&source)?, Some(source))
        } else {
            let listing = segment::read_listing(&dir)?;
            if listing.segments.is_empty()
                && listing.not_files.is_empty()
                && let Some(name) = listing.foreign
            {
                return Err(Error::NotALog {
                    dir,
                    reason: format!("it holds {name:?}, which is not a segment file"),
                });
            }
            (listing.segments, None)
        };
        let key_id = opts.key.as_ref().map(ChainKey::id);
        let mut keyed_without_key = false;
        // The first header that can be read tells whether the log is keyed. Damage is
        // not an error here: range reads report what they meet, and salvage reads
        // around it.
        for entry in &segments {
            match SegmentFile::open(entry, key_id, true) {
                Ok(HeaderState::Ok(seg)) => {
                    keyed_without_key = seg.header.is_keyed() && key_id.is_none();
                    break;
                }
                Err(e @ (Error::WrongKey { .. } | Error::NotKeyed { .. })) => return Err(e),
                Ok(HeaderState::Torn { .. }) | Err(_) => {}
            }
        }
        let chainer = (!keyed_without_key).then(|| Chainer::new(opts.key.as_ref()));
        let summaries = source.as_ref().and_then(|s| s.summaries()).map(Arc::new);
        Ok(LogReader {
            dir,
            source,
            summaries,
            key_id,
            chainer,
            keyed_without_key,
        })
    }

    /// Whether records are checked against the hash chain (false only for a keyed log
    /// read without its key).
    pub fn chain_verified(&self) -> bool {
        !self.keyed_without_key
    }

    /// The log directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Records whose seq lies in `range`, in order.
    ///
    /// The read seeks by segment names, the sparse index and block headers, which only
    /// checksums cover, and then proves it started in time (FORMAT.md, "What readers
    /// check"): it returns every record of the range it reaches, or an error.
    ///
    /// # Errors
    ///
    /// I/O errors listing the directory; damage is reported by the iterator, including
    /// a seek hint that disagrees with the verified blocks
    /// ([`CorruptionKind::SeekMismatch`](crate::CorruptionKind::SeekMismatch)).
    pub fn records(&self, range: impl RangeBounds<Seq>) -> Result<Records> {
        let lo = match range.start_bound() {
            Bound::Included(s) => s.0,
            Bound::Excluded(s) => s.0.saturating_add(1),
            Bound::Unbounded => 0,
        };
        let hi = match range.end_bound() {
            Bound::Included(s) => Some(s.0),
            Bound::Excluded(s) => s.0.checked_sub(1),
            Bound::Unbounded => None,
        };
        let empty = matches!(range.end_bound(), Bound::Excluded(s) if s.0 <= lo);
        self.start(Range::Seq { lo, hi }, empty)
    }

    /// Records whose timestamp (ns) lies in `range`, in order.
    ///
    /// The read finds its start by the footers' last timestamps, the sparse index and
    /// the headers of the blocks it skips, then reads the block just before its first
    /// one in full to prove that none of them lied (FORMAT.md, "What readers check").
    ///
    /// # Errors
    ///
    /// As [`LogReader::records`].
    pub fn records_by_time(&self, range: impl RangeBounds<u64>) -> Result<Records> {
        let lo = match range.start_bound() {
            Bound::Included(&t) => t,
            Bound::Excluded(&t) => t.saturating_add(1),
            Bound::Unbounded => 0,
        };
        let (hi, empty) = match range.end_bound() {
            Bound::Included(&t) => (Some(t), false),
            Bound::Excluded(&t) => (t.checked_sub(1), t <= lo),
            Bound::Unbounded => (None, false),
        };
        self.start(Range::Time { lo, hi }, empty)
    }

    /// Every intact record whose seq lies in `range`, read around damage, and each
    /// stretch that was lost, in log order: as `mcap recover` does for MCAP files.
    ///
    /// Salvage reads every segment named like one, in order, and checks every block in
    /// full: its header checksum, every frame's checksum and structure, its seqs and
    /// timestamps against the records before it, and its chain link. A block passes
    /// only if its link, recomputed over its frames and metadata, matches from the link
    /// of the last block that passed (the chain is unbroken) or, after damage, from a
    /// link stored on disk right before it (a segment header's, a sparse-index entry's,
    /// or the header of the damaged block before it): the chain is then broken there,
    /// and the [`Loss`](crate::Loss) says so. A record is yielded only if its block passed; a block
    /// whose link cannot be checked at all (the link before it was lost with the
    /// damage) is reported lost, never yielded. Each [`Loss`](crate::Loss) gives the seqs lost
    /// (exactly when an intact record follows the damage; from a seq on, to an unknown
    /// end, when none does) and every damaged, missing or unreadable piece: segment
    /// file, byte range, what was wrong.
    ///
    /// What a salvaged record proves: in a keyed log read with its key, that a holder
    /// of the key wrote exactly that record (seq, timestamp, type, payload); in an
    /// unkeyed log, that its bytes are the ones its checksums and link were computed
    /// over (anyone can compute an unkeyed link: only a digest proves more); in a keyed
    /// log read without its key, only that its checksums pass. What it does not prove:
    /// that nothing after the last intact record was lost (only a
    /// [`Digest`] can show a cut tail), nor anything about the records that were lost.
    ///
    /// # Errors
    ///
    /// I/O errors listing the directory, [`Error::NotALog`](crate::Error::NotALog) for
    /// a directory of foreign files. Damage is never an error here: it is a
    /// [`Loss`](crate::Loss).
    pub fn salvage(&self, range: impl RangeBounds<Seq>) -> Result<Salvage> {
        let lo = match range.start_bound() {
            Bound::Included(s) => s.0,
            Bound::Excluded(s) => s.0.saturating_add(1),
            Bound::Unbounded => 0,
        };
        let hi = match range.end_bound() {
            Bound::Included(s) => Some(s.0),
            Bound::Excluded(s) if s.0 == 0 => return Salvage::new(self, 1, Some(0)),
            Bound::Excluded(s) => Some(s.0 - 1),
            Bound::Unbounded => None,
        };
        Salvage::new(self, lo, hi)
    }

    /// Checks the log's structure from its segment headers and footers alone, as
    /// [`Log::open`](crate::Log::open) does, and describes every segment: each one is a
    /// readable regular file, the first starts at seq 0 from the genesis link, each
    /// header continues the seqs and the chain link where the footer before it ends,
    /// and every segment but the last is sealed. It reads no block, so it is cheap (two
    /// small reads per segment); it proves no record intact (a range read or
    /// [`verify`](crate::verify()) does that).
    ///
    /// # Errors
    ///
    /// [`Error::Corrupt`](crate::Error::Corrupt) naming the segment for a missing
    /// segment (a seq gap, or a missing start), a damaged or truncated header, a foreign
    /// file named like a segment, a missing or inconsistent footer, anything named like
    /// a segment that is not a regular file; I/O errors naming an unreadable segment;
    /// key errors.
    ///
    /// A log that starts past seq 0 was pruned only if a prune record explains its
    /// start: the blocks of the newest segment that holds one are read up to it (the
    /// only blocks this reads), else the start is a `MissingStart`.
    pub fn structure(&self) -> Result<Vec<SegmentSummary>> {
        // A shipped log's manifest was checked to continue from segment to segment
        // when it was read; the blocks a query reads are checked as they are read, and
        // `verify` of the shipped log reads them all.
        if let Some(summaries) = &self.summaries {
            return Ok(summaries.as_ref().clone());
        }
        let summaries = structure::check_segments(&self.segments()?, self.key_id, true)?;
        if let Some(first) = summaries.first()
            && first.first_seq > 0
        {
            let segments = self.segments()?;
            if let Some(entry) = segments.first()
                && let HeaderState::Ok(seg) = SegmentFile::open(entry, self.key_id, true)?
                && let Some(start) = crate::retention::cut_start(&seg)
            {
                crate::retention::prove_cut(
                    &segments,
                    self.key_id,
                    self.chainer.as_ref(),
                    &seg,
                    &start,
                )?;
            }
        }
        Ok(summaries)
    }

    /// The chain point after the last record visible now, `None` for an empty log.
    ///
    /// The whole log's structure is checked first ([`LogReader::structure`]), so a
    /// missing, foreign, truncated or unreadable segment anywhere is an error rather
    /// than a digest of a log with a hole; then the last segment is read in full.
    ///
    /// # Errors
    ///
    /// As [`LogReader::structure`]; damage found while reading the last segment.
    pub fn digest(&self) -> Result<Option<Digest>> {
        let summaries = self.structure()?;
        let Some(last) = summaries.last() else {
            return Ok(None);
        };
        let segments: Vec<SegmentEntry> = summaries
            .iter()
            .map(|s| SegmentEntry {
                first_seq: s.first_seq,
                path: s.path.clone(),
                source: self.source.clone(),
            })
            .collect();
        let n = segments.len();
        let mut records = Records {
            reader: self.clone(),
            segments,
            seg_index: n - 1,
            cursor: None,
            block: None,
            frame_at: 0,
            frame_index: 0,
            range: Range::Seq {
                lo: last.first_seq,
                hi: None,
            },
            done: false,
            last_block_end: None,
            // Not a range read: the whole last segment is read from its header.
            check_start: false,
            start_at: None,
            start_link: None,
            skipped: None,
            tags: None,
            seg_tags: SegTags::None,
            first_tag_skip: None,
        };
        while let Some(step) = records.next_block()? {
            records.last_block_end = Some(Digest {
                seq: step.header.last_seq(),
                link: step.header.link,
            });
        }
        if records.last_block_end.is_none() {
            // The last segment holds no record yet: the digest is the previous
            // segment's end, from its footer.
            return Ok(summaries
                .iter()
                .rev()
                .nth(1)
                .and_then(|s| s.sealed.map(|f| f.last)));
        }
        Ok(records.last_block_end)
    }

    /// The log's segments now: its directory's listing, or, for a log read by URL,
    /// its store's.
    ///
    /// # Errors
    ///
    /// As [`list_segments`](crate::list_segments); the store's error.
    pub fn segments(&self) -> Result<Vec<SegmentEntry>> {
        match &self.source {
            Some(source) => source::list_source(source),
            None => segment::list_segments(&self.dir),
        }
    }

    fn start(&self, range: Range, empty: bool) -> Result<Records> {
        let segments = self.segments()?;
        let mut records = Records {
            reader: self.clone(),
            segments,
            seg_index: 0,
            cursor: None,
            block: None,
            frame_at: 0,
            frame_index: 0,
            range,
            done: empty,
            last_block_end: None,
            check_start: true,
            start_at: None,
            start_link: None,
            skipped: None,
            tags: None,
            seg_tags: SegTags::None,
            first_tag_skip: None,
        };
        if !empty {
            records.seg_index = records.find_segment()?;
        }
        Ok(records)
    }
}

fn seek_mismatch(segment: PathBuf, offset: u64, seq: u64, why: String) -> Error {
    Error::Corrupt(Corruption {
        segment,
        offset,
        seq: Some(seq),
        kind: CorruptionKind::SeekMismatch(why),
    })
}

#[derive(Debug, Clone, Copy)]
enum Range {
    Seq { lo: u64, hi: Option<u64> },
    Time { lo: u64, hi: Option<u64> },
}

/// One record read from the log. Its payload is borrowed from the block buffer it was
/// read into, which is 8-byte aligned: an rkyv archive written as a payload can be
/// accessed in place.
#[derive(Debug, Clone)]
pub struct LogRecord {
    chunk: Arc<AlignedBuf>,
    payload_at: usize,
    payload_len: usize,
    seq: u64,
    ts_ns: u64,
    record_type: u16,
}

impl LogRecord {
    /// The record of frame `index` of a checked block, whose frame starts at `frame_at`
    /// in the block's chunk; with the chunk offset of the next frame.
    pub(crate) fn at(block: &CheckedBlock, frame_at: usize, index: u32) -> (LogRecord, usize) {
        let bytes = block.chunk.bytes();
        let payload_len = format::u32_at(bytes, frame_at) as usize;
        let record = LogRecord {
            chunk: Arc::clone(&block.chunk),
            payload_at: frame_at + FRAME_HEADER_LEN,
            payload_len,
            seq: block.header.first_seq + u64::from(index),
            // The block's frames were checked: its first ts plus any frame's delta is at
            // most its last ts, so this cannot saturate.
            ts_ns: block
                .header
                .first_ts
                .saturating_add(u64::from(format::u32_at(bytes, frame_at + 8))),
            record_type: format::u16_at(bytes, frame_at + 4),
        };
        (record, frame_at + format::frame_len(payload_len))
    }

    /// A record held apart from any log: `payload` copied into an 8-byte aligned buffer
    /// of its own, as a block read from a segment would hold it. For hosts that carry
    /// records elsewhere and decode them with the same decoders, and for tests.
    pub fn from_parts(seq: Seq, ts_ns: u64, record_type: RecordType, payload: &[u8]) -> LogRecord {
        let mut chunk = AlignedBuf::zeroed(payload.len());
        chunk.bytes_mut().copy_from_slice(payload);
        LogRecord {
            chunk: Arc::new(chunk),
            payload_at: 0,
            payload_len: payload.len(),
            seq: seq.0,
            ts_ns,
            record_type: record_type.0,
        }
    }

    /// The record's seq.
    #[inline]
    pub fn seq(&self) -> Seq {
        Seq(self.seq)
    }

    /// The record's timestamp in nanoseconds.
    #[inline]
    pub fn ts_ns(&self) -> u64 {
        self.ts_ns
    }

    /// The record's type tag.
    #[inline]
    pub fn record_type(&self) -> RecordType {
        RecordType(self.record_type)
    }

    /// The payload bytes, 8-byte aligned, without a copy.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.chunk.bytes()[self.payload_at..self.payload_at + self.payload_len]
    }
}

/// Iterator over a range of records; see [`LogReader::records`].
///
/// Yields an error (and then stops) when it meets damage: a failed checksum, a broken
/// chain, a missing segment. The end of the data in the active segment, including a
/// block the writer has not finished writing, is the end of the iteration.
#[derive(Debug)]
pub struct Records {
    reader: LogReader,
    segments: Vec<SegmentEntry>,
    seg_index: usize,
    cursor: Option<BlockCursor>,
    block: Option<CheckedBlock>,
    frame_at: usize,
    frame_index: u32,
    range: Range,
    done: bool,
    last_block_end: Option<Digest>,
    /// Whether the first block read still has to prove that the read did not start too
    /// late (see [`Records::check_start`]).
    check_start: bool,
    /// Where the first block is read: segment index and byte offset, once positioned.
    start_at: Option<(usize, u64)>,
    /// The link the first block must chain from (the one stored before it).
    start_link: Option<Link>,
    /// The last block skipped by its header alone while positioning.
    skipped: Option<HeaderOnly>,
    /// The tags asked for, ascending ([`Records::with_tags`]).
    tags: Option<Vec<u32>>,
    /// The tag index of the segment being read.
    seg_tags: SegTags,
    /// The first seq of the first block skipped by the tag index before any block was
    /// read (what a read by seq proves its start with).
    first_tag_skip: Option<u64>,
}

/// A segment's tag index as the reader found it.
#[derive(Debug)]
enum SegTags {
    /// None to use: the active segment, or a keyed log read without its key.
    None,
    /// Authenticated.
    Verified(Vec<format::BlockTags>),
    /// Its authenticator does not match: any use is an error.
    Bad(Box<Corruption>),
}

impl Records {
    /// The same read, skipping every block of a sealed segment that its footer's tag
    /// index (authenticated by the chain key) says holds no record tagged with one of
    /// `tags` (FORMAT.md, "Tag index"; a record's tag is its type's,
    /// [`RecordType::index_tag`](crate::RecordType::index_tag), unless its writer gave it
    /// another). The records of the blocks read are all returned, whatever their tags:
    /// the caller filters. A tag index whose authenticator does not match is an error
    /// when the read would use it.
    #[must_use]
    pub fn with_tags(mut self, tags: impl IntoIterator<Item = u32>) -> Records {
        self.set_tags(Some(tags.into_iter().collect()));
        self
    }

    /// Changes the tags a read skips blocks by, from the next block on (`None`: skip
    /// nothing); see [`Records::with_tags`].
    pub fn set_tags(&mut self, tags: Option<Vec<u32>>) {
        self.tags = tags.map(|mut t| {
            t.sort_unstable();
            t.dedup();
            t
        });
    }

    /// Whether the tag index lets the read skip a block with this header.
    fn skippable(tags: &[u32], index: &[format::BlockTags], h: &format::BlockHeader) -> bool {
        let Ok(i) = index.binary_search_by_key(&h.first_seq, |b| b.first_seq) else {
            return false;
        };
        let b = &index[i];
        b.count == h.count && !b.tags.iter().any(|t| tags.binary_search(t).is_ok())
    }

    /// Finds the segment where the range starts, by binary search over segment names
    /// (seq) or footers (time): O(log segments) footer reads.
    fn find_segment(&mut self) -> Result<usize> {
        let n = self.segments.len();
        if n == 0 {
            return Ok(0);
        }
        match self.range {
            Range::Seq { lo, .. } => {
                let i = self.segments.partition_point(|s| s.first_seq <= lo);
                Ok(i.saturating_sub(1))
            }
            Range::Time { lo, .. } => {
                // First segment whose last ts reaches `lo`; the last segment (active) has
                // no footer and counts as reaching everything.
                let (mut a, mut b) = (0usize, n - 1);
                while a < b {
                    let mid = a + (b - a) / 2;
                    let last_ts = match self.known_last_ts(mid) {
                        Some(known) => known,
                        None => self.footer_of(mid)?.map_or(u64::MAX, |f| f.last_ts),
                    };
                    if last_ts < lo {
                        a = mid + 1;
                    } else {
                        b = mid;
                    }
                }
                Ok(a)
            }
        }
    }

    /// Segment `i` as the source knows it without reading it (a shipped log's
    /// manifest); `None` when it does not.
    fn known(&self, i: usize) -> Option<&SegmentSummary> {
        let summaries = self.reader.summaries.as_ref()?;
        let first_seq = self.segments.get(i)?.first_seq;
        let at = summaries
            .binary_search_by_key(&first_seq, |s| s.first_seq)
            .ok()?;
        summaries.get(at)
    }

    /// The last time of segment `i` as the source knows it without reading it (an
    /// unsealed segment reaches everything); `None` when it does not.
    fn known_last_ts(&self, i: usize) -> Option<u64> {
        Some(self.known(i)?.sealed.map_or(u64::MAX, |f| f.last_ts_ns))
    }

    fn footer_of(&self, i: usize) -> Result<Option<Footer>> {
        match SegmentFile::open(&self.segments[i], self.reader.key_id, true)? {
            HeaderState::Ok(seg) => Ok(seg.read_footer()?.map(|(f, _)| f)),
            HeaderState::Torn { .. } => Ok(None),
        }
    }

    /// Opens segment `seg_index` and positions a cursor at the block where the range
    /// starts, using the footer's sparse index when the segment is sealed.
    fn open_segment(&mut self, prev: Option<ChainPoint>) -> Result<Option<BlockCursor>> {
        let i = self.seg_index;
        let is_last = i + 1 == self.segments.len();
        if prev.is_none() {
            self.start_at = Some((i, SEGMENT_HEADER_LEN as u64));
        }
        let seg = match SegmentFile::open(&self.segments[i], self.reader.key_id, true)? {
            HeaderState::Ok(seg) => Arc::new(seg),
            HeaderState::Torn { path, .. } => {
                if is_last {
                    return Ok(None); // a segment being created: nothing visible yet
                }
                return Err(Corruption {
                    segment: path,
                    offset: 0,
                    seq: Some(self.segments[i].first_seq),
                    kind: CorruptionKind::SegmentHeader("truncated or zeroed".to_owned()),
                }
                .into());
            }
        };
        if let Some(point) = prev {
            check_continuity(&seg, &point, false)?;
        } else if i == 0
            && let Some(start) = crate::retention::cut_start(&seg)
        {
            crate::retention::prove_cut(
                &self.segments,
                self.reader.key_id,
                self.reader.chainer.as_ref(),
                &seg,
                &start,
            )?;
        } else if i == 0 {
            check_continuity(
                &seg,
                &ChainPoint {
                    next_seq: 0,
                    last_ts: 0,
                    link: GENESIS_LINK,
                },
                true,
            )?;
        }
        let footer = seg.read_footer()?;
        if !is_last && footer.is_none() {
            return Err(structure::missing_footer(&seg, &self.segments, i));
        }
        // A segment the source described without reading it (a shipped log's manifest)
        // must be what it said: sealed, with that footer. Otherwise a read would stop
        // or skip where the description says records are.
        if let Some(known) = self.known(i) {
            let agrees = match (&footer, known.sealed) {
                (Some((f, _)), Some(k)) => {
                    f.last_seq == k.last.seq
                        && f.last_link == k.last.link
                        && f.first_ts == k.first_ts_ns
                        && f.last_ts == k.last_ts_ns
                }
                (None, None) => true,
                _ => false,
            };
            if !agrees || seg.header.prev_link != known.prev_link {
                return Err(Corruption {
                    segment: seg.path.clone(),
                    offset: 0,
                    seq: Some(self.segments[i].first_seq),
                    kind: CorruptionKind::Footer(
                        "its header or footer is not what the log's manifest lists for it (its seqs, times or links): the object and the manifest disagree".to_owned(),
                    ),
                }
                .into());
            }
        }
        self.seg_tags = match (&footer, self.reader.chainer.as_ref()) {
            (Some((f, at)), Some(chainer)) => {
                if chainer.tag_mac(&f.tag_mac_message()) == f.tag_mac {
                    SegTags::Verified(f.tags.clone())
                } else {
                    SegTags::Bad(Box::new(Corruption {
                        segment: seg.path.clone(),
                        offset: *at,
                        seq: Some(f.first_seq),
                        kind: CorruptionKind::Footer(
                            "the tag index does not match its authenticator: it was changed after the segment was sealed".to_owned(),
                        ),
                    }))
                }
            }
            _ => SegTags::None,
        };
        let end = footer.as_ref().map_or(seg.len, |(_, start)| *start);
        let mut start = ChainPoint {
            next_seq: seg.header.first_seq,
            last_ts: prev.map_or(0, |p| p.last_ts),
            link: seg.header.prev_link,
        };
        let mut pos = SEGMENT_HEADER_LEN as u64;
        if prev.is_none()
            && let Some((footer, _)) = &footer
        {
            // Seek: the last index entry strictly before the range's start; for a read
            // by time the one before that, so that at least one block is skipped and
            // the block before the start comes from the skip (`check_start`).
            let (k, back) = match self.range {
                Range::Seq { lo, .. } => (footer.index.partition_point(|e| e.first_seq <= lo), 1),
                Range::Time { lo, .. } => (footer.index.partition_point(|e| e.first_ts < lo), 2),
            };
            if let Some(e) = k
                .checked_sub(back)
                .or(k.checked_sub(1))
                .map(|k| footer.index[k])
                && e.offset > pos
                && e.offset < end
            {
                // An entry for the segment's first block gives nothing the segment
                // header does not; the header's first seq and link are the ones the
                // first block must continue, whatever an entry says.
                pos = e.offset;
                start = ChainPoint {
                    next_seq: e.first_seq,
                    last_ts: e.first_ts,
                    link: e.prev_link,
                };
            }
        }
        let mut cursor = BlockCursor::new(seg, pos, end, start.next_seq, start.last_ts, start.link);
        // Blocks whose chain link verifies need no second pass over their checksums.
        cursor.always_check_crc = false;
        if prev.is_none() {
            let range = self.range;
            self.skipped = cursor.skip_before(|h| match range {
                Range::Seq { lo, .. } => h.last_seq() < lo,
                Range::Time { lo, .. } => h.last_ts < lo,
            })?;
            self.start_at = Some((i, cursor.pos));
            self.start_link = Some(cursor.prev_link);
        }
        Ok(Some(cursor))
    }

    /// Proves that the read did not start too late, once the first block is read (or
    /// the data ended before one): positioning trusted footers' last timestamps, sparse
    /// index entries and the headers of skipped blocks, which only checksums protect.
    ///
    /// A seq read that returns a block needs nothing more: the block passed its chain
    /// link, which covers its first seq, and that seq must not be past the range's
    /// start. Otherwise the block just before the first one read (the last one skipped,
    /// or found by walking headers from the index entry before it) is read and checked
    /// in full: its link, recomputed from the link stored before it, must match, and it
    /// must be the block the first one chains from. Its last timestamp (or seq) must be
    /// before the range's start; since timestamps never decrease and seqs increase in
    /// the chain, every record before it is then out of range too. In a keyed log that
    /// block is authentic, so whatever lied about where to start is caught.
    fn check_start(&mut self, first: Option<&CheckedBlock>) -> Result<()> {
        let (lo, by_time) = match self.range {
            Range::Seq { lo, .. } => (lo, false),
            Range::Time { lo, .. } => (lo, true),
        };
        if lo == 0 {
            return Ok(());
        }
        if !by_time && let Some(b) = first {
            // A block the authenticated tag index let the read skip counts as read: its
            // first seq and count are the index's.
            if self.first_tag_skip.unwrap_or(b.header.first_seq) <= lo {
                return Ok(());
            }
            // A log pruned at its front: a read from a pruned seq starts at the log's
            // first record (what the first segment's header says; `verify` proves it).
            if self.start_at == Some((0, SEGMENT_HEADER_LEN as u64))
                && self.segments.first().map(|s| s.first_seq) == Some(b.header.first_seq)
            {
                return Ok(());
            }
            let path = self
                .cursor
                .as_ref()
                .map_or_else(PathBuf::new, |c| c.segment().path.clone());
            return Err(seek_mismatch(
                path,
                b.offset,
                b.header.first_seq,
                format!(
                    "a read from seq {lo} starts at a block whose first seq is {}: the sparse index or a skipped block header is wrong",
                    b.header.first_seq
                ),
            ));
        }
        let before = match self.skipped.take() {
            Some(skipped) => skipped,
            None => match self.block_before_start()? {
                Some(block) => block,
                None => return Ok(()), // the log's first block: nothing precedes it
            },
        };
        // The block before is usually in the chunk the cursor has just read.
        match self.cursor.as_mut() {
            Some(cursor) if Arc::ptr_eq(&before.seg, cursor.segment_arc()) => {
                cursor.verify_block(&before, self.reader.chainer.as_ref())?;
            }
            _ => before.verify(self.reader.chainer.as_ref())?,
        }
        let path = before.seg.path.clone();
        if first.is_some() && Some(before.header.link) != self.start_link {
            return Err(seek_mismatch(
                path,
                before.offset,
                before.header.first_seq,
                "the block before the range's start is not the one the first block read chains from".to_owned(),
            ));
        }
        let (key, what) = if by_time {
            (before.header.last_ts, "timestamp")
        } else {
            (before.header.last_seq(), "seq")
        };
        if key >= lo {
            return Err(seek_mismatch(
                path,
                before.offset,
                before.header.first_seq,
                format!(
                    "the read was positioned after this block, whose last {what} {key} is in the range (from {lo}): a footer's last timestamp, a sparse-index entry or a skipped block header is wrong"
                ),
            ));
        }
        Ok(())
    }

    /// The block that ends where the first block would be read, found by walking block
    /// headers from the index entry before it (or from the segment's start); in the
    /// segment before when the read starts at a segment's first block. `None` at the
    /// log's very start.
    fn block_before_start(&self) -> Result<Option<HeaderOnly>> {
        let Some((i, offset)) = self.start_at else {
            return Ok(None);
        };
        let (j, end) = if offset > SEGMENT_HEADER_LEN as u64 {
            (i, Some(offset))
        } else if i == 0 {
            return Ok(None);
        } else {
            (i - 1, None)
        };
        let seg = match SegmentFile::open(&self.segments[j], self.reader.key_id, true)? {
            HeaderState::Ok(seg) => Arc::new(seg),
            HeaderState::Torn { path, .. } => {
                return Err(structure::truncated_header(
                    path,
                    self.segments[j].first_seq,
                ));
            }
        };
        let footer = seg.read_footer()?;
        let end = match (end, &footer) {
            (Some(end), _) => end,
            (None, Some((_, footer_start))) => *footer_start,
            (None, None) => return Err(structure::missing_footer(&seg, &self.segments, j)),
        };
        let (mut pos, mut link) = (SEGMENT_HEADER_LEN as u64, seg.header.prev_link);
        if let Some((footer, _)) = &footer {
            let k = footer.index.partition_point(|e| e.offset < end);
            if let Some(e) = k.checked_sub(1).map(|k| footer.index[k])
                && e.offset >= pos
            {
                (pos, link) = (e.offset, e.prev_link);
            }
        }
        let path = seg.path.clone();
        let mut cursor = BlockCursor::new(seg, pos, end, 0, 0, link);
        match cursor.header_ending_at(end)? {
            Some(block) => Ok(Some(block)),
            None => Err(seek_mismatch(
                path,
                end,
                0,
                format!("no walk of block headers ends at byte {end}, where the read starts"),
            )),
        }
    }

    /// The next checked block, moving across segments; `None` at the end of the data.
    fn next_block(&mut self) -> Result<Option<CheckedBlock>> {
        let block = self.next_block_unchecked()?;
        if self.check_start {
            self.check_start = false;
            self.check_start(block.as_ref())?;
        }
        Ok(block)
    }

    fn next_block_unchecked(&mut self) -> Result<Option<CheckedBlock>> {
        loop {
            if self.cursor.is_none() {
                if self.seg_index >= self.segments.len() {
                    return Ok(None);
                }
                match self.open_segment(None)? {
                    Some(c) => self.cursor = Some(c),
                    None => return Ok(None),
                }
            }
            let Some(cursor) = self.cursor.as_mut() else {
                return Ok(None);
            };
            let is_last = self.seg_index + 1 == self.segments.len();
            if let Some(tags) = &self.tags {
                match &self.seg_tags {
                    SegTags::None => {}
                    SegTags::Bad(c) => return Err(Error::Corrupt((**c).clone())),
                    SegTags::Verified(index) => {
                        let first = std::cell::Cell::new(None);
                        cursor.skip_before(|h| {
                            let skip = Self::skippable(tags, index, h);
                            if skip && first.get().is_none() {
                                first.set(Some(h.first_seq));
                            }
                            skip
                        })?;
                        if self.check_start && self.first_tag_skip.is_none() {
                            self.first_tag_skip = first.get();
                        }
                    }
                }
            }
            match cursor.next(self.reader.chainer.as_ref())? {
                Step::Block(b) => return Ok(Some(b)),
                Step::End if is_last => return Ok(None),
                Step::End => {
                    let point = ChainPoint {
                        next_seq: cursor.next_seq,
                        last_ts: cursor.last_ts,
                        link: cursor.prev_link,
                    };
                    self.seg_index += 1;
                    self.cursor = self.open_segment(Some(point))?;
                    if self.cursor.is_none() {
                        return Ok(None);
                    }
                }
                Step::Damaged {
                    offset,
                    detail,
                    frame,
                } => {
                    let seq = cursor.next_seq;
                    let path = cursor.segment().path.clone();
                    // The end of what the writer has finished writing, or of what a
                    // power loss left of it: damage with no intact data after it, or
                    // pages a power loss kept from the disk before it (as recovery
                    // decides, docs/FORMAT.md "Recovery"). A segment that ends in a
                    // footer (the cursor stops before it) was written to its end: the
                    // footer is intact data.
                    if is_last {
                        let footer = cursor.end < cursor.segment().len;
                        let intact = match cursor.intact_block_after(offset)? {
                            Some(block) if footer => Some(block.min(cursor.end)),
                            Some(block) => Some(block),
                            None => footer.then_some(cursor.end),
                        };
                        let end = match intact {
                            None => true,
                            Some(intact) => cursor.lost_pages_explain(offset, intact)?,
                        };
                        if end {
                            return Ok(None);
                        }
                    }
                    let (offset, seq, kind) = match frame {
                        _ if is_last => (
                            offset,
                            seq,
                            CorruptionKind::DamageBeforeIntactData { detail },
                        ),
                        Some((at, frame_seq)) => (at, frame_seq, CorruptionKind::Frame(detail)),
                        None => (offset, seq, CorruptionKind::BlockHeader(detail)),
                    };
                    return Err(Corruption {
                        segment: path,
                        offset,
                        seq: Some(seq),
                        kind,
                    }
                    .into());
                }
            }
        }
    }

    fn next_record(&mut self) -> Result<Option<LogRecord>> {
        loop {
            if self.block.is_none() {
                match self.next_block()? {
                    Some(b) => {
                        self.frame_at = b.frames_at;
                        self.frame_index = 0;
                        self.block = Some(b);
                    }
                    None => return Ok(None),
                }
            }
            let Some(block) = self.block.as_ref() else {
                return Ok(None);
            };
            if self.frame_index == block.header.count {
                self.block = None;
                continue;
            }
            let (record, next_at) = LogRecord::at(block, self.frame_at, self.frame_index);
            self.frame_at = next_at;
            self.frame_index += 1;
            let (key, lo, hi) = match self.range {
                Range::Seq { lo, hi } => (record.seq, lo, hi),
                Range::Time { lo, hi } => (record.ts_ns, lo, hi),
            };
            if key < lo {
                continue;
            }
            if hi.is_some_and(|hi| key > hi) {
                return Ok(None);
            }
            return Ok(Some(record));
        }
    }
}

impl Iterator for Records {
    type Item = Result<LogRecord>;

    fn next(&mut self) -> Option<Result<LogRecord>> {
        if self.done {
            return None;
        }
        match self.next_record() {
            Ok(Some(r)) => Some(Ok(r)),
            Ok(None) => {
                self.done = true;
                None
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}
