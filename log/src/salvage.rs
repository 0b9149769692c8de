//! Salvage: every intact record of a damaged log, and exactly what was lost.
//!
//! A range read stops at the first damage; salvage walks around it. It reads the
//! segments in order and every block in them, checks each block in full, yields the
//! records of the blocks that pass, and reports each stretch it could not read as a
//! [`Loss`]: the seqs lost, and where (segment file, byte range, what was wrong).
//!
//! After damage the chain is picked up again from a link stored on disk: the link a
//! segment header carries, the link a sparse-index entry carries for its block, or the
//! link in the header of the damaged block itself. A block after the damage passes only
//! if its own link, recomputed over its frames and metadata from such a stored link,
//! matches: so in a keyed log every salvaged record was written by a holder of the key,
//! and no block is taken on the word of its checksums alone.

use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::ops::Range;
use std::path::PathBuf;
use std::sync::Arc;

use crate::chain::{Chainer, GENESIS_LINK, Link};
use crate::error::{Error, Result};
use crate::format::{self, BlockHeader, SEGMENT_HEADER_LEN};
use crate::reader::{LogReader, LogRecord};
use crate::segment::{
    self, BlockCursor, CheckedBlock, HeaderState, RawBlock, SegmentEntry, SegmentFile,
};

/// One item of a [`Salvage`]: an intact record, or a stretch that was lost before the
/// next one.
#[derive(Debug, Clone)]
pub enum Salvaged {
    /// A record whose block passed every check.
    Record(LogRecord),
    /// What was lost between the records before and after it.
    Lost(Loss),
}

/// A stretch of the log that salvage could not read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Loss {
    /// The seqs lost (clipped to the range asked for).
    pub seqs: LostSeqs,
    /// Where, in log order: each damaged, missing or unreadable piece.
    pub places: Vec<DamagePlace>,
    /// Whether the records after the loss were verified from a link stored after the
    /// damage rather than by following the chain across it: the chain is broken there.
    /// False when no record follows. In a keyed log read without its key no link is
    /// checked, and this is true whenever records were lost.
    pub chain_broken: bool,
}

/// The seqs a [`Loss`] covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LostSeqs {
    /// No record was lost: the damaged bytes held none (a damaged footer, bytes between
    /// blocks, a stray file named like a segment).
    None,
    /// Exactly these seqs, known from the intact records on both sides.
    Exact {
        /// The first seq lost.
        first: u64,
        /// The last seq lost.
        last: u64,
    },
    /// Every seq from `first` on: no intact record follows the damage, so how many were
    /// lost cannot be known.
    From {
        /// The first seq lost.
        first: u64,
        /// The highest seq that damaged or unverifiable block headers or footers claim
        /// to hold: a bound to read with care, since nothing verified it.
        claimed_last: Option<u64>,
    },
}

/// One damaged, missing or unreadable piece of a [`Loss`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DamagePlace {
    /// The segment file (for a missing segment, the name the first missing seq's
    /// segment would have).
    pub segment: PathBuf,
    /// The bytes of the file concerned; `None` for the whole file (or a missing one).
    pub bytes: Option<Range<u64>>,
    /// What is wrong there.
    pub kind: DamageKind,
}

/// What is wrong with a [`DamagePlace`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum DamageKind {
    /// No segment file holds these seqs.
    Missing,
    /// The file could not be opened or read.
    Unreadable(String),
    /// Named like a segment but not a regular file (a directory, a symbolic link, ...).
    NotARegularFile(&'static str),
    /// Bytes that fail their checks: why.
    Damaged(String),
    /// A block whose checksums pass but whose chain link could not be checked, because
    /// the link before it was lost with the damage: not trusted.
    Unverifiable,
    /// An incomplete write at the very end of the log: a crash cut it, or a live writer
    /// has not finished it. The next writer cuts it.
    TornTail(String),
}

impl fmt::Display for DamageKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DamageKind::Missing => f.write_str("missing: no segment file holds these seqs"),
            DamageKind::Unreadable(why) => write!(f, "unreadable: {why}"),
            DamageKind::NotARegularFile(what) => {
                write!(f, "named like a segment but {what}, not a regular file")
            }
            DamageKind::Damaged(why) => write!(f, "damaged: {why}"),
            DamageKind::Unverifiable => f.write_str(
                "its chain link cannot be checked (the link before it was lost): not trusted",
            ),
            DamageKind::TornTail(why) => write!(f, "torn tail ({why}): an incomplete last write"),
        }
    }
}

impl fmt::Display for DamagePlace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.segment.display())?;
        if let Some(bytes) = &self.bytes {
            write!(f, " bytes {}..{}", bytes.start, bytes.end)?;
        }
        write!(f, ": {}", self.kind)
    }
}

impl fmt::Display for LostSeqs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LostSeqs::None => f.write_str("no record"),
            LostSeqs::Exact { first, last } if first == last => write!(f, "seq {first}"),
            LostSeqs::Exact { first, last } => write!(f, "seqs {first}..={last}"),
            LostSeqs::From {
                first,
                claimed_last: Some(last),
            } => write!(
                f,
                "seqs from {first} on, how many unknown (damaged headers claim up to {last})"
            ),
            LostSeqs::From { first, .. } => write!(f, "seqs from {first} on, how many unknown"),
        }
    }
}

impl fmt::Display for Loss {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "lost {}", self.seqs)?;
        for (i, place) in self.places.iter().enumerate() {
            f.write_str(if i == 0 { ": " } else { "; " })?;
            write!(f, "{place}")?;
        }
        if self.chain_broken {
            f.write_str("; the chain is broken there")?;
        }
        Ok(())
    }
}

/// A directory entry named like a segment.
#[derive(Debug, Clone)]
enum Entry {
    Segment(SegmentEntry),
    NotAFile(SegmentEntry, &'static str),
}

impl Entry {
    fn first_seq(&self) -> u64 {
        match self {
            Entry::Segment(e) | Entry::NotAFile(e, _) => e.first_seq,
        }
    }
}

/// How a block that passed was tied to the chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Via {
    /// From the link of the last block that passed: the chain is unbroken.
    Chain,
    /// From a link stored on disk (segment header, index entry, a damaged block's header).
    Stored,
    /// No link checked: a keyed log read without its key.
    Unchecked,
}

/// The segment being walked.
#[derive(Debug)]
struct Walk {
    cursor: BlockCursor,
    /// Links stored on disk for the blocks that start at these offsets.
    anchors: BTreeMap<u64, Link>,
    is_last: bool,
    /// Damage to report once the blocks are read (a missing or damaged footer).
    end_note: Option<DamagePlace>,
}

/// The records of a block that passed, handed out one by one.
#[derive(Debug)]
struct Emitting {
    block: CheckedBlock,
    frame_at: usize,
    index: u32,
}

#[derive(Debug)]
struct Pending {
    first_seq: u64,
    places: Vec<DamagePlace>,
    claimed_last: Option<u64>,
}

/// Iterator over every intact record in a seq range and the losses between them; see
/// [`LogReader::salvage`].
#[derive(Debug)]
pub struct Salvage {
    dir: PathBuf,
    key_id: Option<[u8; 32]>,
    chainer: Option<Chainer>,
    entries: Vec<Entry>,
    next_entry: usize,
    walk: Option<Walk>,
    emitting: Option<Emitting>,
    queue: VecDeque<Salvaged>,
    /// The first seq not yet read or accounted as lost.
    next_seq: u64,
    last_ts: u64,
    /// Link of the last block that passed (the genesis link at the log's start).
    verified: Option<Link>,
    /// Whether a block passed yet: the first block of a read that starts mid-log is tied
    /// to a stored link without the chain being broken.
    started: bool,
    pending: Option<Pending>,
    lo: u64,
    hi: Option<u64>,
    done: bool,
}

impl Salvage {
    pub(crate) fn new(reader: &LogReader, lo: u64, hi: Option<u64>) -> Result<Salvage> {
        let dir = reader.dir().to_owned();
        let listing = if crate::source::is_url(&dir) {
            // A shipped log: its store lists segments, never anything else.
            segment::Listing {
                segments: reader.segments()?,
                ..segment::Listing::default()
            }
        } else {
            segment::read_listing(&dir)?
        };
        if listing.segments.is_empty()
            && listing.not_files.is_empty()
            && let Some(name) = listing.foreign
        {
            return Err(Error::NotALog {
                dir,
                reason: format!("it holds {name:?}, which is not a segment file"),
            });
        }
        let mut entries: Vec<Entry> = listing.segments.into_iter().map(Entry::Segment).collect();
        entries.extend(
            listing
                .not_files
                .into_iter()
                .map(|(e, what)| Entry::NotAFile(e, what)),
        );
        entries.sort_by_key(Entry::first_seq);
        let start = entries
            .partition_point(|e| e.first_seq() <= lo)
            .saturating_sub(1);
        let (next_seq, verified) = match start {
            0 => (0, Some(GENESIS_LINK)),
            _ => (entries[start].first_seq(), None),
        };
        Ok(Salvage {
            dir,
            key_id: reader.key_id,
            chainer: reader.chainer.clone(),
            entries,
            next_entry: start,
            walk: None,
            emitting: None,
            queue: VecDeque::new(),
            next_seq,
            last_ts: 0,
            verified,
            started: false,
            pending: None,
            lo,
            hi,
            done: hi.is_some_and(|hi| hi < lo),
        })
    }

    /// Does one step: opens the next segment, or reads one block (or one damaged
    /// stretch) of the current one.
    fn advance(&mut self) {
        let Some(walk) = self.walk.as_mut() else {
            match self.entries.get(self.next_entry).cloned() {
                Some(entry) => {
                    self.next_entry += 1;
                    let is_last = self.next_entry == self.entries.len();
                    self.open_entry(entry, is_last);
                }
                None => self.finish(),
            }
            return;
        };
        let pos = walk.cursor.pos;
        if pos >= walk.cursor.end {
            if let Some(place) = walk.end_note.take() {
                self.damage(place, None);
            }
            self.walk = None;
            return;
        }
        match walk.cursor.read_raw(pos) {
            Err(e) => {
                let place = self.place_to_end(pos, DamageKind::Unreadable(e.to_string()));
                self.damage(place, None);
            }
            Ok(RawBlock::NoBlock { detail }) => self.skip_damage(pos, detail, true),
            Ok(RawBlock::Block { header, frames_at }) => self.try_block(pos, header, frames_at),
        }
    }

    /// The current segment from `pos` to the end of its data, which the walk skips.
    fn place_to_end(&mut self, pos: u64, kind: DamageKind) -> DamagePlace {
        let walk = self.walk.as_mut().expect("a segment is being walked");
        let end = walk.cursor.end;
        walk.cursor.pos = end;
        DamagePlace {
            segment: walk.cursor.segment().path.clone(),
            bytes: Some(pos..end),
            kind,
        }
    }

    /// Skips the damaged bytes at `pos` up to the next intact-looking block header (or
    /// the end of the data) and records them. `torn_if_last`: damage with nothing intact
    /// after it at the end of the last segment is a torn tail.
    fn skip_damage(&mut self, pos: u64, detail: String, torn_if_last: bool) {
        let walk = self.walk.as_mut().expect("a segment is being walked");
        let path = walk.cursor.segment().path.clone();
        match walk.cursor.intact_block_after(pos) {
            Ok(Some(next)) if next < walk.cursor.end => {
                walk.cursor.pos = next;
                self.damage(
                    DamagePlace {
                        segment: path,
                        bytes: Some(pos..next),
                        kind: DamageKind::Damaged(detail),
                    },
                    None,
                );
            }
            Ok(_) => {
                let kind = if torn_if_last && walk.is_last {
                    DamageKind::TornTail(detail)
                } else {
                    DamageKind::Damaged(detail)
                };
                let place = self.place_to_end(pos, kind);
                self.damage(place, None);
            }
            Err(e) => {
                let place = self.place_to_end(pos, DamageKind::Unreadable(e.to_string()));
                self.damage(place, None);
            }
        }
    }

    /// Checks the block at `pos` in full and either hands out its records or records it
    /// as lost.
    fn try_block(&mut self, pos: u64, header: BlockHeader, frames_at: usize) {
        let walk = self.walk.as_mut().expect("a segment is being walked");
        let stored = walk.cursor.stored(&header, frames_at);
        let total = header.total_len() as u64;
        let (frames, failure) = match walk.cursor.frames(pos, &header, frames_at) {
            Err(why) => (None, Some((DamageKind::Damaged(why), true))),
            Ok(frames) => match segment::check_frames(&header, frames.bytes(), true) {
                Err((frame_offset, seq, why)) => {
                    let (_, place) = segment::frame_place(pos, &header, frame_offset, seq);
                    (
                        None,
                        Some((DamageKind::Damaged(format!("{place}: {why}")), true)),
                    )
                }
                Ok(()) => (Some(frames), None),
            },
        };
        let meta = header.chain_meta();
        let via = match &self.chainer {
            None => Some(Via::Unchecked),
            Some(chainer) => {
                let matches = |link: &Link| chainer.link(stored, &meta, link) == header.link;
                if self.verified.as_ref().is_some_and(matches) {
                    Some(Via::Chain)
                } else if walk.anchors.get(&pos).is_some_and(matches) {
                    Some(Via::Stored)
                } else {
                    None
                }
            }
        };
        // Without a stored link for this block, the chain from the last block that
        // passed can check it only if nothing was lost since.
        let checkable =
            walk.anchors.contains_key(&pos) || (self.pending.is_none() && self.verified.is_some());
        let failure = failure.or_else(|| {
            match via {
            None if !checkable => Some((DamageKind::Unverifiable, false)),
            None => Some((
                DamageKind::Damaged(
                    "chain link mismatch (the block's content or key differs from what was written)"
                        .to_owned(),
                ),
                false,
            )),
            Some(Via::Chain) if header.first_seq != self.next_seq => Some((
                DamageKind::Damaged(format!(
                    "holds seqs from {}, expected {}",
                    header.first_seq, self.next_seq
                )),
                false,
            )),
            Some(_) if header.first_seq < self.next_seq => Some((
                DamageKind::Damaged(format!(
                    "holds seqs from {}, which come before seq {} already read",
                    header.first_seq, self.next_seq
                )),
                false,
            )),
            Some(_) if header.first_ts < self.last_ts => Some((
                DamageKind::Damaged("timestamp lower than its predecessor's".to_owned()),
                false,
            )),
            Some(_) => None,
        }
        });
        let frames = match (frames, failure) {
            (Some(frames), None) => frames,
            (_, failure) => {
                // Frames are missing only where their checks failed.
                let (kind, torn_if_last) = failure.unwrap_or_else(|| {
                    (
                        DamageKind::Damaged("its frames could not be read".to_owned()),
                        true,
                    )
                });
                // The next block, if this one was real, chains from the link it stores.
                walk.anchors.insert(pos + total, header.link);
                let claimed = header.first_seq.checked_add(u64::from(header.count) - 1);
                let detail = kind.to_string();
                let before = self.pending.as_ref().map_or(0, |p| p.places.len());
                self.skip_damage(pos, detail, torn_if_last);
                // Keep the precise kind for the block's own bytes.
                if let Some(p) = self.pending.as_mut() {
                    if let Some(place) = p.places.get_mut(before)
                        && !matches!(
                            place.kind,
                            DamageKind::TornTail(_) | DamageKind::Unreadable(_)
                        )
                    {
                        place.kind = kind;
                    }
                    p.claimed_last = p.claimed_last.max(claimed);
                }
                return;
            }
        };
        let via = via.expect("a block without a failure passed a link check");
        let walk = self.walk.as_mut().expect("a segment is being walked");
        let path = walk.cursor.segment().path.clone();
        walk.cursor.pos = pos + total;
        let block = BlockCursor::checked(pos, header, frames);
        let lost_records = header.first_seq > self.next_seq;
        let broken = match via {
            Via::Chain => false,
            Via::Stored => self.started || lost_records,
            Via::Unchecked => lost_records,
        };
        match self.pending.take() {
            Some(p) => self.emit_loss(Loss {
                seqs: if lost_records {
                    LostSeqs::Exact {
                        first: p.first_seq,
                        last: header.first_seq - 1,
                    }
                } else {
                    LostSeqs::None
                },
                places: p.places,
                chain_broken: broken,
            }),
            None if broken => {
                // No damaged bytes, yet the block does not follow the one before it:
                // whole blocks were cut out (their seqs are lost), or the link stored
                // here was changed.
                let bytes = if pos == SEGMENT_HEADER_LEN as u64 {
                    0..SEGMENT_HEADER_LEN as u64
                } else {
                    pos..pos
                };
                let (seqs, why) = if lost_records {
                    (
                        LostSeqs::Exact {
                            first: self.next_seq,
                            last: header.first_seq - 1,
                        },
                        format!(
                            "no block holds seqs {}..={}: the block here starts at seq {}",
                            self.next_seq,
                            header.first_seq - 1,
                            header.first_seq
                        ),
                    )
                } else {
                    (
                        LostSeqs::None,
                        "the chain link stored here differs from the last link before it"
                            .to_owned(),
                    )
                };
                self.emit_loss(Loss {
                    seqs,
                    places: vec![DamagePlace {
                        segment: path,
                        bytes: Some(bytes),
                        kind: DamageKind::Damaged(why),
                    }],
                    chain_broken: true,
                });
            }
            None => {}
        }
        self.verified = Some(header.link);
        self.started = true;
        self.next_seq = header.next_seq();
        self.last_ts = header.last_ts;
        if self.hi.is_some_and(|hi| header.first_seq > hi) {
            self.done = true;
            return;
        }
        self.emitting = Some(Emitting {
            frame_at: block.frames_at,
            block,
            index: 0,
        });
    }

    /// Starts on the next directory entry named like a segment.
    fn open_entry(&mut self, entry: Entry, is_last: bool) {
        let entry = match entry {
            Entry::NotAFile(e, what) => {
                self.damage(
                    DamagePlace {
                        segment: e.path,
                        bytes: None,
                        kind: DamageKind::NotARegularFile(what),
                    },
                    None,
                );
                return;
            }
            Entry::Segment(e) => e,
        };
        let seg = match SegmentFile::open(&entry, self.key_id, true) {
            Ok(HeaderState::Ok(seg)) => seg,
            Ok(HeaderState::Torn { path, len }) => {
                if !(is_last && entry.first_seq == self.next_seq && self.pending.is_none()) {
                    self.damage(
                        DamagePlace {
                            segment: path,
                            bytes: Some(0..len),
                            kind: DamageKind::Damaged(
                                "truncated or zeroed segment header".to_owned(),
                            ),
                        },
                        None,
                    );
                }
                // Else a creation a crash cut short, before any record went in.
                return;
            }
            Err(e) => {
                let kind = match &e {
                    Error::Io { .. } => DamageKind::Unreadable(e.to_string()),
                    Error::Corrupt(c) => DamageKind::Damaged(c.kind.to_string()),
                    _ => DamageKind::Damaged(e.to_string()),
                };
                self.damage(
                    DamagePlace {
                        segment: entry.path,
                        bytes: None,
                        kind,
                    },
                    None,
                );
                return;
            }
        };
        let h = seg.header;
        if h.first_seq < self.next_seq {
            self.damage(
                DamagePlace {
                    segment: entry.path,
                    bytes: None,
                    kind: DamageKind::Damaged(format!(
                        "its header starts at seq {}, which the segments before it already hold",
                        h.first_seq
                    )),
                },
                None,
            );
            return;
        }
        if h.first_seq > self.next_seq && self.pending.is_none() {
            self.damage(
                DamagePlace {
                    segment: self.dir.join(format::segment_file_name(self.next_seq)),
                    bytes: None,
                    kind: DamageKind::Missing,
                },
                None,
            );
        }
        let mut anchors = BTreeMap::new();
        anchors.insert(SEGMENT_HEADER_LEN as u64, h.prev_link);
        let (end, end_note) = match seg.read_footer() {
            Ok(Some((footer, start))) => {
                for e in &footer.index {
                    if e.offset >= SEGMENT_HEADER_LEN as u64 && e.offset < start {
                        anchors.entry(e.offset).or_insert(e.prev_link);
                    }
                }
                let claimed = footer.last_seq;
                if let Some(p) = self.pending.as_mut() {
                    p.claimed_last = p.claimed_last.max(Some(claimed));
                }
                (start, None)
            }
            Ok(None) if is_last => (seg.len, None),
            Ok(None) => (
                seg.len,
                Some(DamagePlace {
                    segment: seg.path.clone(),
                    bytes: Some(seg.len..seg.len),
                    kind: DamageKind::Damaged(
                        "no footer, though a segment follows it: it was never sealed".to_owned(),
                    ),
                }),
            ),
            Err(e) => (
                seg.len,
                Some(DamagePlace {
                    segment: seg.path.clone(),
                    bytes: Some(seg.len.saturating_sub(format::TRAILER_LEN as u64)..seg.len),
                    kind: match &e {
                        Error::Corrupt(c) => DamageKind::Damaged(c.kind.to_string()),
                        _ => DamageKind::Unreadable(e.to_string()),
                    },
                }),
            ),
        };
        let cursor = BlockCursor::new(
            Arc::new(seg),
            SEGMENT_HEADER_LEN as u64,
            end,
            self.next_seq,
            self.last_ts,
            GENESIS_LINK,
        );
        self.walk = Some(Walk {
            cursor,
            anchors,
            is_last,
            end_note,
        });
    }

    /// Records a damaged piece: the loss it belongs to starts at the first seq not yet
    /// read.
    fn damage(&mut self, place: DamagePlace, claimed_last: Option<u64>) {
        let first_seq = self.next_seq;
        let p = self.pending.get_or_insert_with(|| Pending {
            first_seq,
            places: Vec::new(),
            claimed_last: None,
        });
        p.places.push(place);
        p.claimed_last = p.claimed_last.max(claimed_last);
    }

    /// The end of the directory: what is still pending was lost, to an unknown end.
    fn finish(&mut self) {
        if let Some(p) = self.pending.take() {
            self.emit_loss(Loss {
                seqs: LostSeqs::From {
                    first: p.first_seq,
                    claimed_last: p.claimed_last,
                },
                places: p.places,
                chain_broken: false,
            });
        }
        self.done = true;
    }

    /// Queues a loss if it concerns the range asked for, clipped to it.
    fn emit_loss(&mut self, mut loss: Loss) {
        let (lo, hi) = (self.lo, self.hi.unwrap_or(u64::MAX));
        let keep = match &mut loss.seqs {
            LostSeqs::None => (lo..=hi).contains(&self.next_seq),
            LostSeqs::Exact { first, last } => {
                let keep = *last >= lo && *first <= hi;
                *first = (*first).max(lo);
                *last = (*last).min(hi);
                keep
            }
            LostSeqs::From { first, .. } => {
                let keep = *first <= hi;
                *first = (*first).max(lo);
                keep
            }
        };
        if keep {
            self.queue.push_back(Salvaged::Lost(loss));
        }
    }
}

impl Iterator for Salvage {
    type Item = Salvaged;

    fn next(&mut self) -> Option<Salvaged> {
        loop {
            if let Some(item) = self.queue.pop_front() {
                return Some(item);
            }
            if let Some(e) = self.emitting.as_mut() {
                if e.index < e.block.header.count {
                    let (record, next_at) = LogRecord::at(&e.block, e.frame_at, e.index);
                    e.frame_at = next_at;
                    e.index += 1;
                    let seq = record.seq().0;
                    if seq < self.lo {
                        continue;
                    }
                    if self.hi.is_some_and(|hi| seq > hi) {
                        self.emitting = None;
                        self.done = true;
                        continue;
                    }
                    return Some(Salvaged::Record(record));
                }
                self.emitting = None;
            }
            if self.done {
                return None;
            }
            self.advance();
        }
    }
}
