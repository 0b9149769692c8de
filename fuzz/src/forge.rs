//! A forger of flight-log segments, written from `docs/FORMAT.md` alone.
//!
//! Nothing here calls the log crate's encoders: every header, frame, compressed head,
//! footer, tag index, prune record, crc32c and blake3 chain link is laid out by the
//! rules of FORMAT.md, so what the forger writes is an oracle independent of the code
//! under test. A forged segment can hold values no writer produces (timestamps near
//! `u64::MAX`, lying counts, offsets past the file), each with valid checksums and
//! chain links recomputed, so that a fuzzer gets past them to the checks behind.
//!
//! The forger knows what it meant: [`SegmentForge`] records, for every block it laid
//! out, whether the block is well formed ([`BlockInfo::honest`]) and which records it
//! holds ([`Rec`]), so a target can say exactly what a reader must return. Only
//! unkeyed chains are forged.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

/// A chain link: 32 bytes of keyed blake3.
pub type Link = [u8; 32];

/// The link before a log's first block (FORMAT.md, "The hash chain": `link[-1]`).
pub const GENESIS_LINK: Link = [0; 32];
/// The format version forged.
pub const VERSION: u32 = 4;
/// Length of a segment header.
pub const SEGMENT_HEADER_LEN: usize = 96;
/// Length of a block header.
pub const BLOCK_HEADER_LEN: usize = 72;
/// Length of a frame header.
pub const FRAME_HEADER_LEN: usize = 16;
/// Length of a compressed block's head.
pub const COMPRESSED_HEAD_LEN: usize = 12;
/// Bit 31 of a block header's bytes 4..8: the stored bytes are compressed.
pub const COMPRESSED_BIT: u32 = 1 << 31;
/// Largest payload the format holds (1 GiB).
pub const MAX_PAYLOAD: u64 = 1 << 30;
/// Largest stored length of a block: one frame of the largest payload.
pub const MAX_STORED: u64 = MAX_PAYLOAD + FRAME_HEADER_LEN as u64;
/// Largest frames region of a compressed block (64 MiB).
pub const MAX_COMPRESSED_FRAMES: u64 = 64 << 20;
/// The record type of the log's own prune records.
pub const PRUNE_RECORD_TYPE: u16 = 0xFFFF;
/// Magic at the end of a sealed segment.
pub const TRAILER_MAGIC: [u8; 8] = *b"BBOXEND\0";

/// The crc32c of the concatenation of `parts`.
pub fn crc(parts: &[&[u8]]) -> u32 {
    parts.iter().fold(0, |c, p| crc32c::crc32c_append(c, p))
}

/// Rounds up to a multiple of 8.
pub fn align8(n: usize) -> usize {
    n.next_multiple_of(8)
}

fn chain_key() -> &'static [u8; 32] {
    static KEY: OnceLock<[u8; 32]> = OnceLock::new();
    KEY.get_or_init(|| blake3::derive_key("blackbox-log 2026-11-30 chain link, unkeyed", b""))
}

fn tag_key() -> &'static [u8; 32] {
    static KEY: OnceLock<[u8; 32]> = OnceLock::new();
    KEY.get_or_init(|| blake3::derive_key("blackbox-log 2026-12-01 tag index, unkeyed", b""))
}

/// `link[n] = keyed_hash(K, stored ‖ meta ‖ prev)`, unkeyed `K`.
pub fn link(stored: &[u8], meta: &[u8; 32], prev: &Link) -> Link {
    let mut h = blake3::Hasher::new_keyed(chain_key());
    h.update(stored);
    h.update(meta);
    h.update(prev);
    *h.finalize().as_bytes()
}

/// A segment file's name: its first seq in 20 decimal digits, then `.bbx`.
pub fn segment_name(first_seq: u64) -> String {
    format!("{first_seq:020}.bbx")
}

/// An unkeyed segment header (96 bytes).
pub fn segment_header(first_seq: u64, prev_link: &Link) -> Vec<u8> {
    let mut h = vec![0u8; SEGMENT_HEADER_LEN];
    h[0..8].copy_from_slice(b"BBOXSEG\0");
    h[8..12].copy_from_slice(&VERSION.to_le_bytes());
    h[16..24].copy_from_slice(&first_seq.to_le_bytes());
    h[24..56].copy_from_slice(prev_link);
    let c = crc(&[&h[0..92]]);
    h[92..96].copy_from_slice(&c.to_le_bytes());
    h
}

/// A record as the forger meant it: what a reader must return for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rec {
    /// Its seq.
    pub seq: u64,
    /// Its timestamp (ns).
    pub ts: u64,
    /// Its type tag.
    pub record_type: u16,
    /// Its payload.
    pub payload: Vec<u8>,
}

/// One frame: header (payload length, type, flags, ts delta, crc32c of the seq, header
/// bytes 0..12 and payload), payload, zero padding to a multiple of 8.
pub fn frame(seq: u64, record_type: u16, flags: u16, ts_delta: u32, payload: &[u8]) -> Vec<u8> {
    let mut head = [0u8; 12];
    let len = u32::try_from(payload.len()).unwrap_or(u32::MAX);
    head[0..4].copy_from_slice(&len.to_le_bytes());
    head[4..6].copy_from_slice(&record_type.to_le_bytes());
    head[6..8].copy_from_slice(&flags.to_le_bytes());
    head[8..12].copy_from_slice(&ts_delta.to_le_bytes());
    let c = crc(&[&seq.to_le_bytes(), &head, payload]);
    let mut out = Vec::with_capacity(FRAME_HEADER_LEN + align8(payload.len()));
    out.extend_from_slice(&head);
    out.extend_from_slice(&c.to_le_bytes());
    out.extend_from_slice(payload);
    out.resize(FRAME_HEADER_LEN + align8(payload.len()), 0);
    out
}

/// One zstd frame of `frames` that declares its content size.
pub fn zstd_frame(frames: &[u8]) -> Vec<u8> {
    // A one-shot compression writes the content size in the frame header.
    zstd::bulk::compress(frames, 3).unwrap_or_default()
}

/// A compressed block's stored bytes: frames length, zstd length, crc32c of the two and
/// the zstd frame, the zstd frame, zero padding to a multiple of 8.
pub fn compressed_stored(frames_len: u32, z: &[u8]) -> Vec<u8> {
    let zlen = u32::try_from(z.len()).unwrap_or(u32::MAX);
    let mut out = Vec::with_capacity(align8(COMPRESSED_HEAD_LEN + z.len()));
    out.extend_from_slice(&frames_len.to_le_bytes());
    out.extend_from_slice(&zlen.to_le_bytes());
    let c = crc(&[&out[0..8], z]);
    out.extend_from_slice(&c.to_le_bytes());
    out.extend_from_slice(z);
    out.resize(align8(COMPRESSED_HEAD_LEN + z.len()), 0);
    out
}

/// A block header's fields, as stored (FORMAT.md, "Block").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockMeta {
    /// Bytes 4..8 as stored: the stored length, bit 31 for a compressed block.
    pub len_word: u32,
    /// Frames in the block.
    pub count: u32,
    /// Seq of the first frame.
    pub first_seq: u64,
    /// Timestamp of the first frame.
    pub first_ts: u64,
    /// Timestamp of the last frame.
    pub last_ts: u64,
}

impl BlockMeta {
    /// The 32 bytes of metadata the chain link covers.
    pub fn chain_meta(&self) -> [u8; 32] {
        let mut m = [0u8; 32];
        m[0..4].copy_from_slice(&self.len_word.to_le_bytes());
        m[4..8].copy_from_slice(&self.count.to_le_bytes());
        m[8..16].copy_from_slice(&self.first_seq.to_le_bytes());
        m[16..24].copy_from_slice(&self.first_ts.to_le_bytes());
        m[24..32].copy_from_slice(&self.last_ts.to_le_bytes());
        m
    }

    /// Reads the fields of a block header (no check).
    pub fn read(h: &[u8]) -> BlockMeta {
        BlockMeta {
            len_word: le32(h, 4),
            count: le32(h, 8),
            first_seq: le64(h, 16),
            first_ts: le64(h, 24),
            last_ts: le64(h, 32),
        }
    }
}

/// A block header (72 bytes) with `link`, its crc32c over bytes 0..12 and 16..72.
pub fn block_header(meta: &BlockMeta, link: &Link) -> [u8; BLOCK_HEADER_LEN] {
    let mut h = [0u8; BLOCK_HEADER_LEN];
    h[0..4].copy_from_slice(b"BBLK");
    h[4..8].copy_from_slice(&meta.len_word.to_le_bytes());
    h[8..12].copy_from_slice(&meta.count.to_le_bytes());
    h[16..24].copy_from_slice(&meta.first_seq.to_le_bytes());
    h[24..32].copy_from_slice(&meta.first_ts.to_le_bytes());
    h[32..40].copy_from_slice(&meta.last_ts.to_le_bytes());
    h[40..72].copy_from_slice(link);
    let c = crc(&[&h[0..12], &h[16..72]]);
    h[12..16].copy_from_slice(&c.to_le_bytes());
    h
}

/// Reads a little-endian u32 at `at` (the caller checked the length).
pub fn le32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// Reads a little-endian u64 at `at` (the caller checked the length).
pub fn le64(b: &[u8], at: usize) -> u64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(x)
}

/// Whether the 72 bytes at the start of `b` are an intact block header by FORMAT.md:
/// magic, crc32c, at least one frame, seqs that stay under `u64::MAX`, a stored length
/// 8-aligned, within the format's limit and large enough for its frames (16 bytes per
/// frame raw, 16 bytes compressed), and a last timestamp not below the first.
pub fn intact_block_header(b: &[u8]) -> bool {
    if b.len() < BLOCK_HEADER_LEN || b[0..4] != *b"BBLK" {
        return false;
    }
    if le32(b, 12) != crc(&[&b[0..12], &b[16..72]]) {
        return false;
    }
    let m = BlockMeta::read(b);
    let stored = u64::from(m.len_word & !COMPRESSED_BIT);
    let least = if m.len_word & COMPRESSED_BIT != 0 {
        16
    } else {
        u64::from(m.count) * FRAME_HEADER_LEN as u64
    };
    m.count >= 1
        && m.first_seq.checked_add(u64::from(m.count)).is_some()
        && stored <= MAX_STORED
        && stored.is_multiple_of(8)
        && stored >= least
        && m.last_ts >= m.first_ts
}

/// A reference decoder of one block, from FORMAT.md: the block at the start of `b`
/// must be intact, start at `next_seq`, not go back before `last_ts`, chain from
/// `prev`, and its frames (decompressed within the format's bounds for a compressed
/// block) must pass every check, their crc32c checksums when `check_crc` (a reader
/// whose chain link matched leaves them to the link, which covers the same bytes).
/// Returns its records, its link and its length.
///
/// # Errors
///
/// What is wrong, in words.
pub fn decode_block(
    b: &[u8],
    next_seq: u64,
    last_ts: u64,
    prev: &Link,
    check_crc: bool,
) -> Result<(Vec<Rec>, Link, usize), String> {
    if !intact_block_header(b) {
        return Err("no intact block header".to_owned());
    }
    let m = BlockMeta::read(b);
    let stored_len = usize::try_from(m.len_word & !COMPRESSED_BIT).map_err(|e| e.to_string())?;
    let total = BLOCK_HEADER_LEN + stored_len;
    if total > b.len() {
        return Err("block runs past the data".to_owned());
    }
    if m.first_seq != next_seq {
        return Err("seq gap".to_owned());
    }
    if m.first_ts < last_ts {
        return Err("time goes back".to_owned());
    }
    let stored = &b[BLOCK_HEADER_LEN..total];
    let mut own = [0u8; 32];
    own.copy_from_slice(&b[40..72]);
    if link(stored, &m.chain_meta(), prev) != own {
        return Err("chain link mismatch".to_owned());
    }
    let frames = if m.len_word & COMPRESSED_BIT != 0 {
        decompress(stored, m.count)?
    } else {
        stored.to_vec()
    };
    let records = decode_frames(&frames, &m, check_crc)?;
    Ok((records, own, total))
}

/// A compressed block's frames, by FORMAT.md's checks: the head's lengths and crc, the
/// zero padding, the frames length within 64 MiB and enough for `count` frames, one
/// zstd frame exactly `zstd_len` long that declares the frames length, decompressing to
/// exactly that.
///
/// # Errors
///
/// What is wrong, in words.
pub fn decompress(stored: &[u8], count: u32) -> Result<Vec<u8>, String> {
    use zstd::zstd_safe;
    if stored.len() < COMPRESSED_HEAD_LEN {
        return Err("short head".to_owned());
    }
    let frames_len = u64::from(le32(stored, 0));
    let zlen = usize::try_from(le32(stored, 4)).map_err(|e| e.to_string())?;
    if zlen == 0 || align8(COMPRESSED_HEAD_LEN + zlen) != stored.len() {
        return Err("zstd length disagrees with the stored length".to_owned());
    }
    let z = &stored[COMPRESSED_HEAD_LEN..COMPRESSED_HEAD_LEN + zlen];
    if le32(stored, 8) != crc(&[&stored[0..8], z]) {
        return Err("head crc".to_owned());
    }
    if stored[COMPRESSED_HEAD_LEN + zlen..].iter().any(|&x| x != 0) {
        return Err("padding".to_owned());
    }
    if frames_len > MAX_COMPRESSED_FRAMES
        || !frames_len.is_multiple_of(8)
        || frames_len < u64::from(count) * FRAME_HEADER_LEN as u64
    {
        return Err("frames length".to_owned());
    }
    match zstd_safe::get_frame_content_size(z) {
        Ok(Some(n)) if n == frames_len => {}
        _ => return Err("declared content size".to_owned()),
    }
    match zstd_safe::find_frame_compressed_size(z) {
        Ok(n) if n == zlen => {}
        _ => return Err("not one zstd frame".to_owned()),
    }
    let cap = usize::try_from(frames_len).map_err(|e| e.to_string())?;
    let out = zstd::bulk::decompress(z, cap).map_err(|e| e.to_string())?;
    if out.len() != cap {
        return Err("decompressed length".to_owned());
    }
    Ok(out)
}

/// The records of a block's frames, by FORMAT.md's checks: each frame's flags zero,
/// payload within 1 GiB and the block, crc32c over its seq (when `check_crc`), zero
/// padding; deltas that
/// start at 0 and never decrease; frames that fill the block; the last timestamp equal
/// to the header's.
///
/// # Errors
///
/// What is wrong, in words.
pub fn decode_frames(frames: &[u8], m: &BlockMeta, check_crc: bool) -> Result<Vec<Rec>, String> {
    let mut at = 0usize;
    let mut prev_delta = 0u32;
    let mut out = Vec::new();
    for i in 0..m.count {
        let seq = m.first_seq + u64::from(i);
        if frames.len() - at < FRAME_HEADER_LEN {
            return Err(format!("frame {i} header past the end"));
        }
        let f = &frames[at..];
        let len = le32(f, 0);
        let record_type = u16::from_le_bytes([f[4], f[5]]);
        let flags = u16::from_le_bytes([f[6], f[7]]);
        let delta = le32(f, 8);
        if flags != 0 {
            return Err("flags".to_owned());
        }
        if u64::from(len) > MAX_PAYLOAD {
            return Err("payload length over the limit".to_owned());
        }
        let len = usize::try_from(len).map_err(|e| e.to_string())?;
        let total = FRAME_HEADER_LEN + align8(len);
        if total > f.len() {
            return Err("payload past the end".to_owned());
        }
        let payload = &f[FRAME_HEADER_LEN..FRAME_HEADER_LEN + len];
        if check_crc && le32(f, 12) != crc(&[&seq.to_le_bytes(), &f[0..12], payload]) {
            return Err("frame crc".to_owned());
        }
        if f[FRAME_HEADER_LEN + len..total].iter().any(|&x| x != 0) {
            return Err("frame padding".to_owned());
        }
        if (i == 0 && delta != 0) || delta < prev_delta {
            return Err("deltas".to_owned());
        }
        prev_delta = delta;
        out.push(Rec {
            seq,
            // Past `u64::MAX` the last timestamp check below refuses the block.
            ts: m.first_ts.wrapping_add(u64::from(delta)),
            record_type,
            payload: payload.to_vec(),
        });
        at += total;
    }
    if at != frames.len() {
        return Err("frames do not fill the block".to_owned());
    }
    if m.first_ts.checked_add(u64::from(prev_delta)) != Some(m.last_ts) {
        return Err("last timestamp".to_owned());
    }
    Ok(out)
}

/// A lie a block can tell, with its checksums and chain link recomputed over it (but
/// for [`BlockLie::Link`] and [`BlockLie::HeaderCrc`]), so only the checks behind them
/// can catch it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, arbitrary::Arbitrary)]
pub enum BlockLie {
    /// The header counts more frames than the block holds.
    CountMore(u8),
    /// The header counts fewer frames (perhaps none).
    CountLess(u8),
    /// The header's last timestamp is later than its last frame's.
    LastTs(u32),
    /// The chain link is not the one computed.
    Link,
    /// The header's first seq is past the next seq.
    SeqAhead(u32),
    /// The header's first seq is before the next seq.
    SeqBehind(u32),
    /// The block starts before the previous block's last timestamp.
    TsBack(u32),
    /// The header's crc32c is wrong (plain damage).
    HeaderCrc,
    /// The first frame's delta is not 0.
    FirstDelta,
    /// A frame's flags are not zero.
    FrameFlags(u16),
    /// A frame's padding is not zero.
    FramePadding(u8),
    /// A compressed block's head claims another frames length.
    FramesLen(u32),
    /// A compressed block's zstd bytes end in a skippable frame after the real one.
    TrailingSkippable,
    /// A compressed block's head crc is wrong.
    HeadCrc,
}

/// What the forger laid out for one block.
#[derive(Debug, Clone)]
pub struct BlockInfo {
    /// Offset of its header in the segment file.
    pub offset: u64,
    /// Its length on disk (header and stored bytes).
    pub len: u64,
    /// The header's fields as written.
    pub meta: BlockMeta,
    /// The link stored before it (the one it chains from).
    pub prev_link: Link,
    /// Its link as written in its header.
    pub link: Link,
    /// Whether it is well formed: no lie, or a lie that changed nothing.
    pub honest: bool,
    /// The records it holds, as meant (a lying block's too).
    pub records: Vec<Rec>,
    /// The records as its header and frames say (seqs and timestamps from a lying
    /// header's), for a block whose lie shows only against the blocks before it (a
    /// seq or a time out of place): read alone, after damage, it is intact.
    pub intact_alone: Option<Vec<Rec>>,
}

/// A record to lay out: type, timestamp, payload.
pub type RecordSpec = (u16, u64, Vec<u8>);

/// Lays out one segment block by block, keeping what it meant.
#[derive(Debug, Clone)]
pub struct SegmentForge {
    /// The segment's first seq (its file name).
    pub first_seq: u64,
    /// The link its header stores.
    pub prev_link: Link,
    /// The file's bytes so far.
    pub bytes: Vec<u8>,
    /// Every block laid out.
    pub blocks: Vec<BlockInfo>,
    /// The seq the next block starts at (the true count, whatever a lie said).
    pub next_seq: u64,
    /// The last timestamp laid out.
    pub last_ts: u64,
    /// The link the next block chains from: the last header's link, as written.
    pub link: Link,
    /// Where the footer starts, once sealed.
    pub footer_at: Option<u64>,
}

impl SegmentForge {
    /// A segment starting at `first_seq`, its header storing `prev_link`; timestamps
    /// must not go below `last_ts`.
    pub fn new(first_seq: u64, prev_link: Link, last_ts: u64) -> SegmentForge {
        SegmentForge {
            first_seq,
            prev_link,
            bytes: segment_header(first_seq, &prev_link),
            blocks: Vec::new(),
            next_seq: first_seq,
            last_ts,
            link: prev_link,
            footer_at: None,
        }
    }

    /// The records of the honest blocks, in order.
    pub fn honest_records(&self) -> Vec<Rec> {
        self.blocks
            .iter()
            .filter(|b| b.honest)
            .flat_map(|b| b.records.iter().cloned())
            .collect()
    }

    /// Offset of the first block that is not honest.
    pub fn first_lie(&self) -> Option<u64> {
        self.blocks.iter().find(|b| !b.honest).map(|b| b.offset)
    }

    /// Lays out one block of `records` (at least one; timestamps not decreasing, from
    /// at least the segment's last one, all within `u32::MAX` ns of the first), stored
    /// compressed when `compress`, telling `lie`. Returns whether the block is honest.
    /// A block whose seqs would pass `u64::MAX` is never honest.
    pub fn push_block(
        &mut self,
        records: &[RecordSpec],
        compress: bool,
        lie: Option<BlockLie>,
    ) -> bool {
        let Some(&(_, first_ts, _)) = records.first() else {
            return true;
        };
        let count = u32::try_from(records.len()).unwrap_or(u32::MAX);
        let true_seq = self.next_seq;
        let mut honest = true_seq.checked_add(u64::from(count)).is_some();
        let mut meta_seq = true_seq;
        let mut meta_first_ts = first_ts;
        let mut meta_count = count;
        match lie {
            Some(BlockLie::SeqAhead(x)) => {
                meta_seq = true_seq.wrapping_add(u64::from(x) + 1);
                honest = false;
            }
            Some(BlockLie::SeqBehind(x)) => {
                meta_seq = true_seq.wrapping_sub(u64::from(x) + 1);
                honest = false;
            }
            Some(BlockLie::TsBack(x)) if self.last_ts > 0 => {
                meta_first_ts = self.last_ts.saturating_sub(u64::from(x) + 1);
                honest = false;
            }
            Some(BlockLie::CountMore(x)) => {
                meta_count = count.saturating_add(u32::from(x % 4) + 1);
                honest = false;
            }
            Some(BlockLie::CountLess(x)) => {
                meta_count = count.saturating_sub(u32::from(x % 4) + 1);
                honest = false;
            }
            _ => {}
        }
        let mut body = Vec::new();
        let mut last_delta = 0u32;
        let mut recs = Vec::new();
        let mut laid = Vec::new();
        for (i, (record_type, ts, payload)) in records.iter().enumerate() {
            let i = u32::try_from(i).unwrap_or(u32::MAX);
            let delta = u32::try_from(ts - first_ts).unwrap_or(u32::MAX);
            let seq = meta_seq.wrapping_add(u64::from(i));
            let mut flags = 0;
            let mut d = delta;
            if i == 0 {
                match lie {
                    Some(BlockLie::FirstDelta) => {
                        d = 1;
                        honest = false;
                    }
                    Some(BlockLie::FrameFlags(f)) if f != 0 => {
                        flags = f;
                        honest = false;
                    }
                    _ => {}
                }
            }
            let mut f = frame(seq, *record_type, flags, d, payload);
            if let Some(BlockLie::FramePadding(p)) = lie
                && p != 0
                && honest
                && !payload.len().is_multiple_of(8)
            {
                let n = f.len();
                f[n - 1] = p;
                honest = false;
            }
            last_delta = d.max(last_delta);
            body.extend_from_slice(&f);
            laid.push(Rec {
                seq,
                ts: meta_first_ts.saturating_add(u64::from(d)),
                record_type: *record_type,
                payload: payload.clone(),
            });
            recs.push(Rec {
                seq: true_seq.wrapping_add(u64::from(i)),
                ts: *ts,
                record_type: *record_type,
                payload: payload.clone(),
            });
        }
        let mut last_ts = meta_first_ts.saturating_add(u64::from(last_delta));
        if let Some(BlockLie::LastTs(x)) = lie {
            if let Some(t) = last_ts.checked_add(u64::from(x) + 1) {
                last_ts = t;
                honest = false;
            } else if last_ts > meta_first_ts {
                last_ts -= 1;
                honest = false;
            }
        }
        let (stored, len_word) = if compress {
            let mut z = zstd_frame(&body);
            let mut frames_len = u32::try_from(body.len()).unwrap_or(u32::MAX);
            match lie {
                Some(BlockLie::FramesLen(x)) if x != frames_len => {
                    frames_len = x;
                    honest = false;
                }
                Some(BlockLie::TrailingSkippable) => {
                    z.extend_from_slice(&[0x50, 0x2A, 0x4D, 0x18, 0, 0, 0, 0]);
                    honest = false;
                }
                _ => {}
            }
            let mut stored = compressed_stored(frames_len, &z);
            if lie == Some(BlockLie::HeadCrc) {
                stored[8] ^= 1;
                honest = false;
            }
            let word = u32::try_from(stored.len()).unwrap_or(u32::MAX) | COMPRESSED_BIT;
            (stored, word)
        } else {
            let word = u32::try_from(body.len()).unwrap_or(u32::MAX);
            (body, word)
        };
        let meta = BlockMeta {
            len_word,
            count: meta_count,
            first_seq: meta_seq,
            first_ts: meta_first_ts,
            last_ts,
        };
        let mut own = link(&stored, &meta.chain_meta(), &self.link);
        if lie == Some(BlockLie::Link) {
            own[0] ^= 1;
            honest = false;
        }
        let mut header = block_header(&meta, &own);
        if lie == Some(BlockLie::HeaderCrc) {
            header[12] ^= 1;
            honest = false;
        }
        let offset = self.bytes.len() as u64;
        self.bytes.extend_from_slice(&header);
        self.bytes.extend_from_slice(&stored);
        self.blocks.push(BlockInfo {
            offset,
            len: (BLOCK_HEADER_LEN + stored.len()) as u64,
            meta,
            prev_link: self.link,
            link: own,
            honest,
            records: recs,
            intact_alone: matches!(
                lie,
                Some(BlockLie::SeqAhead(_) | BlockLie::SeqBehind(_) | BlockLie::TsBack(_))
            )
            .then_some(laid),
        });
        self.next_seq = true_seq.wrapping_add(u64::from(count));
        self.last_ts = self
            .last_ts
            .max(last_ts)
            .max(records.last().map_or(0, |r| r.1));
        self.link = own;
        honest
    }

    /// The footer that agrees with the blocks laid out: counts, seqs, times, last link,
    /// per-type counts, an index entry for every `index_every`-th block (the first
    /// always), and, with `tags`, a tag-index entry for every block listing its records'
    /// type tags (`0xFFFF_0000 | type`, as a writer tags a record the layer above left
    /// untagged).
    /// `None` for a segment without a block (no writer seals one).
    pub fn honest_footer(&self, index_every: usize, tags: bool) -> Option<FooterSpec> {
        let first = self.blocks.first()?;
        let last = self.blocks.last()?;
        let mut type_counts: BTreeMap<u16, u64> = BTreeMap::new();
        for r in self.blocks.iter().flat_map(|b| &b.records) {
            *type_counts.entry(r.record_type).or_default() += 1;
        }
        let every = index_every.max(1);
        Some(FooterSpec {
            record_count: self.blocks.iter().map(|b| b.records.len() as u64).sum(),
            block_count: self.blocks.len() as u64,
            first_seq: self.first_seq,
            last_seq: self.next_seq.wrapping_sub(1),
            first_ts: first.meta.first_ts,
            last_ts: last.meta.last_ts,
            last_link: self.link,
            type_counts: type_counts.into_iter().collect(),
            index: self
                .blocks
                .iter()
                .step_by(every)
                .map(|b| IndexEntry {
                    first_seq: b.meta.first_seq,
                    first_ts: b.meta.first_ts,
                    offset: b.offset,
                    prev_link: b.prev_link,
                })
                .collect(),
            tags: if tags {
                self.blocks
                    .iter()
                    .map(|b| {
                        let tags: std::collections::BTreeSet<u32> = b
                            .records
                            .iter()
                            .map(|r| 0xFFFF_0000 | u32::from(r.record_type))
                            .collect();
                        (b.meta.first_seq, b.meta.count, tags.into_iter().collect())
                    })
                    .collect()
            } else {
                Vec::new()
            },
            tag_mac_flip: false,
        })
    }

    /// Appends the footer body and trailer `spec` describes.
    pub fn seal(&mut self, spec: &FooterSpec) {
        self.footer_at = Some(self.bytes.len() as u64);
        self.bytes.extend_from_slice(&spec.encode());
    }

    /// Writes the segment into `dir` under its name; returns the path.
    ///
    /// # Errors
    ///
    /// The I/O error.
    pub fn write(&self, dir: &Path) -> std::io::Result<PathBuf> {
        let path = dir.join(segment_name(self.first_seq));
        fs::write(&path, &self.bytes)?;
        Ok(path)
    }
}

/// One sparse-index entry of a footer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexEntry {
    /// The block's first seq.
    pub first_seq: u64,
    /// The block's first timestamp.
    pub first_ts: u64,
    /// Offset of its header in the file.
    pub offset: u64,
    /// The link before it.
    pub prev_link: Link,
}

/// A footer's content, perhaps lying (FORMAT.md, "Footer").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FooterSpec {
    /// Records in the segment.
    pub record_count: u64,
    /// Blocks in the segment.
    pub block_count: u64,
    /// First seq.
    pub first_seq: u64,
    /// Last seq.
    pub last_seq: u64,
    /// First timestamp.
    pub first_ts: u64,
    /// Last timestamp.
    pub last_ts: u64,
    /// Last chain link.
    pub last_link: Link,
    /// Per-type counts, sorted by type.
    pub type_counts: Vec<(u16, u64)>,
    /// Sparse index, sorted by seq.
    pub index: Vec<IndexEntry>,
    /// Tag index: (first seq, count, tags) per block described.
    pub tags: Vec<(u64, u32, Vec<u32>)>,
    /// Whether the tag index's authenticator is wrong.
    pub tag_mac_flip: bool,
}

impl FooterSpec {
    /// The footer body, then the trailer (body length, crc32c of the body, magic).
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(b"BBOXFTR\0");
        for x in [
            self.record_count,
            self.block_count,
            self.first_seq,
            self.last_seq,
            self.first_ts,
            self.last_ts,
        ] {
            b.extend_from_slice(&x.to_le_bytes());
        }
        b.extend_from_slice(&self.last_link);
        let n32 = |n: usize| u32::try_from(n).unwrap_or(u32::MAX).to_le_bytes();
        b.extend_from_slice(&n32(self.type_counts.len()));
        b.extend_from_slice(&n32(self.index.len()));
        for &(t, n) in &self.type_counts {
            b.extend_from_slice(&t.to_le_bytes());
            b.extend_from_slice(&[0u8; 6]);
            b.extend_from_slice(&n.to_le_bytes());
        }
        for e in &self.index {
            b.extend_from_slice(&e.first_seq.to_le_bytes());
            b.extend_from_slice(&e.first_ts.to_le_bytes());
            b.extend_from_slice(&e.offset.to_le_bytes());
            b.extend_from_slice(&e.prev_link);
        }
        let mut tags = Vec::new();
        let n: usize = self.tags.iter().map(|t| t.2.len()).sum();
        tags.extend_from_slice(&n32(self.tags.len()));
        tags.extend_from_slice(&n32(n));
        for (seq, count, list) in &self.tags {
            tags.extend_from_slice(&seq.to_le_bytes());
            tags.extend_from_slice(&count.to_le_bytes());
            tags.extend_from_slice(&n32(list.len()));
        }
        for (_, _, list) in &self.tags {
            for t in list {
                tags.extend_from_slice(&t.to_le_bytes());
            }
        }
        tags.resize(align8(tags.len()), 0);
        let mut h = blake3::Hasher::new_keyed(tag_key());
        h.update(&b[0..88]);
        h.update(&tags);
        let mut mac = *h.finalize().as_bytes();
        if self.tag_mac_flip {
            mac[0] ^= 1;
        }
        b.extend_from_slice(&tags);
        b.extend_from_slice(&mac);
        let c = crc(&[&b]);
        let len = u32::try_from(b.len()).unwrap_or(u32::MAX);
        b.extend_from_slice(&len.to_le_bytes());
        b.extend_from_slice(&c.to_le_bytes());
        b.extend_from_slice(&TRAILER_MAGIC);
        b
    }
}

/// A prune record's payload (FORMAT.md, "The prune record"): version 1, `reasons`,
/// the segments removed (first seq and the link their header stored, oldest first),
/// the seqs and times removed, the link after the cut, no pin evicted.
pub fn prune_payload(
    reasons: u16,
    segments: &[(u64, Link)],
    last_seq: u64,
    times: (u64, u64),
    cut_link: &Link,
) -> Vec<u8> {
    let mut p = Vec::with_capacity(88 + 40 * segments.len());
    p.extend_from_slice(&1u16.to_le_bytes());
    p.extend_from_slice(&reasons.to_le_bytes());
    let s = u32::try_from(segments.len()).unwrap_or(u32::MAX);
    p.extend_from_slice(&s.to_le_bytes());
    p.extend_from_slice(&0u32.to_le_bytes());
    p.extend_from_slice(&0u32.to_le_bytes());
    p.extend_from_slice(&segments.first().map_or(0, |s| s.0).to_le_bytes());
    p.extend_from_slice(&last_seq.to_le_bytes());
    p.extend_from_slice(&4096u64.to_le_bytes());
    p.extend_from_slice(&times.0.to_le_bytes());
    p.extend_from_slice(&times.1.to_le_bytes());
    p.extend_from_slice(cut_link);
    for (seq, link) in segments {
        p.extend_from_slice(&seq.to_le_bytes());
        p.extend_from_slice(link);
    }
    p
}

/// A fresh directory for one forged log, removed when dropped: under `/dev/shm` when
/// there is one (the targets write files on every run), else the temp directory.
#[derive(Debug)]
pub struct Scratch {
    path: PathBuf,
}

impl Scratch {
    /// Creates it.
    ///
    /// # Panics
    ///
    /// When no directory can be made: the target cannot run at all then.
    pub fn new(what: &str) -> Scratch {
        static N: AtomicU64 = AtomicU64::new(0);
        let base = Path::new("/dev/shm");
        let base = if base.is_dir() {
            base.to_owned()
        } else {
            std::env::temp_dir()
        };
        let n = N.fetch_add(1, Ordering::Relaxed);
        let path = base.join(format!("blackbox-fuzz-{what}-{}-{n}", std::process::id()));
        let _ = fs::remove_dir_all(&path);
        if let Err(e) = fs::create_dir_all(&path) {
            panic!(
                "cannot create the scratch directory {}: {e}",
                path.display()
            );
        }
        Scratch { path }
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.path);
    }
}

/// Whether `b` holds an intact block header at an 8-aligned offset in `(from, end)`
/// (`end` exclusive for the header's last byte): what a reader takes for intact data
/// after damage.
pub fn intact_header_after(b: &[u8], from: usize) -> bool {
    let mut at = from + 8;
    while at + BLOCK_HEADER_LEN <= b.len() {
        if intact_block_header(&b[at..at + BLOCK_HEADER_LEN]) {
            return true;
        }
        at += 8;
    }
    false
}
