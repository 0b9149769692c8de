//! The on-disk format: segment header, block header, frame and footer, byte by byte.
//!
//! `docs/FORMAT.md` is the prose version of this module; the two must agree. Every
//! integer is fixed-width little-endian. Every structure starts at an offset that is a
//! multiple of [`ALIGN`], so a payload starts 8-byte aligned in the file and in any
//! 8-aligned buffer the file is read into.

use crate::chain::Link;

/// Alignment of blocks, frames and payloads, in bytes.
pub const ALIGN: usize = 8;

/// Magic number at the start of every segment file.
pub const SEGMENT_MAGIC: [u8; 8] = *b"BBOXSEG\0";
/// The format version this build writes, and the only one it reads.
pub const FORMAT_VERSION: u32 = 4;
/// Length of the segment header in bytes.
pub const SEGMENT_HEADER_LEN: usize = 96;
/// Segment header flag: the chain mixes in a secret key.
pub const FLAG_KEYED: u32 = 1;

/// Magic number at the start of every block header.
pub const BLOCK_MAGIC: [u8; 4] = *b"BBLK";
/// Length of a block header in bytes.
pub const BLOCK_HEADER_LEN: usize = 72;
/// Bit 31 of a block header's bytes 4..8: the block's frames are stored zstd-compressed
/// (bits 0..30 hold the stored length either way).
pub const BLOCK_COMPRESSED: u32 = 1 << 31;
/// Length of the head of a compressed block's stored bytes: the frames' length once
/// decompressed (u32), the length of the zstd frame that follows (u32) and a crc32c of
/// the two and the zstd frame (u32).
pub const COMPRESSED_HEAD_LEN: usize = 12;
/// Largest frames region a compressed block may decompress to: the largest block the
/// writer cuts (`block_bytes_max` is at most 64 MiB). The writer stores a larger block
/// (one record over 64 MiB) raw; a reader refuses a compressed block that claims more
/// before it allocates anything for it.
pub const MAX_COMPRESSED_FRAMES_BYTES: usize = 64 << 20;

/// Length of a frame header in bytes.
pub const FRAME_HEADER_LEN: usize = 16;

/// Magic number at the start of a footer body.
pub const FOOTER_MAGIC: [u8; 8] = *b"BBOXFTR\0";
/// Magic number at the very end of a sealed segment.
pub const TRAILER_MAGIC: [u8; 8] = *b"BBOXEND\0";
/// Length of the fixed part of the footer body.
pub const FOOTER_FIXED_LEN: usize = 96;
/// Length of one per-type count entry in the footer.
pub const FOOTER_TYPE_ENTRY_LEN: usize = 16;
/// Length of one sparse-index entry in the footer.
pub const FOOTER_INDEX_ENTRY_LEN: usize = 56;
/// Length of the trailer that closes a sealed segment.
pub const TRAILER_LEN: usize = 16;

/// Largest payload the format can hold; `LogOptions::max_record_bytes` may not exceed it.
pub const MAX_RECORD_BYTES_LIMIT: usize = 1 << 30;

/// Largest frames region a block can have: the writer cuts a block before it passes
/// its `block_bytes_max` (at most 64 MiB), unless a single record is larger, so a block
/// holds at most one frame of the largest record. A reader refuses a longer block
/// before it allocates or reads anything for it.
pub const MAX_BLOCK_FRAMES_BYTES: usize = FRAME_HEADER_LEN + MAX_RECORD_BYTES_LIMIT;

/// Most sparse-index entries a footer holds: the writer stops adding entries to a
/// segment's index there (a seek then skips more block headers), so that a footer stays
/// under [`MAX_FOOTER_BODY_BYTES`].
pub const MAX_FOOTER_INDEX_ENTRIES: usize = 1 << 20;

/// Length of one tag-index entry in the footer.
pub const FOOTER_TAG_ENTRY_LEN: usize = 16;
/// Most blocks a footer's tag index describes: the writer stops describing blocks there.
pub const MAX_FOOTER_TAG_ENTRIES: usize = 1 << 20;
/// Most tags a footer's tag index lists, all blocks together: the writer stops
/// describing blocks there.
pub const MAX_FOOTER_TAGS: usize = 1 << 22;
/// Most distinct tags the tag index lists for one block: a block with more is not
/// described (a read never skips it).
pub const MAX_BLOCK_TAGS: usize = 64;
/// Length of the tag index's authenticator.
pub const FOOTER_TAG_MAC_LEN: usize = 32;

/// Largest footer body: the fixed part, a count for each of the 65 536 record types,
/// [`MAX_FOOTER_INDEX_ENTRIES`] index entries and the largest tag index (about 90 MiB).
/// A reader refuses a longer one before it allocates or reads anything for it.
pub const MAX_FOOTER_BODY_BYTES: usize = FOOTER_FIXED_LEN
    + (u16::MAX as usize + 1) * FOOTER_TYPE_ENTRY_LEN
    + MAX_FOOTER_INDEX_ENTRIES * FOOTER_INDEX_ENTRY_LEN
    + 8
    + MAX_FOOTER_TAG_ENTRIES * FOOTER_TAG_ENTRY_LEN
    + MAX_FOOTER_TAGS * 4
    + FOOTER_TAG_MAC_LEN;

const _: () = assert!(SEGMENT_HEADER_LEN.is_multiple_of(ALIGN));
const _: () = assert!(BLOCK_HEADER_LEN.is_multiple_of(ALIGN));
const _: () = assert!(FRAME_HEADER_LEN.is_multiple_of(ALIGN));
const _: () = assert!(FOOTER_FIXED_LEN.is_multiple_of(ALIGN));
const _: () = assert!(FOOTER_TYPE_ENTRY_LEN.is_multiple_of(ALIGN));
const _: () = assert!(FOOTER_INDEX_ENTRY_LEN.is_multiple_of(ALIGN));
const _: () = assert!(TRAILER_LEN.is_multiple_of(ALIGN));
// A block's frames region length is a u32: the largest record plus its header must fit.
const _: () = assert!(MAX_RECORD_BYTES_LIMIT + FRAME_HEADER_LEN + ALIGN <= u32::MAX as usize);
// The largest record's payload needs no padding, and a full block of small records
// (64 MiB, the most `block_bytes_max` allows) is within the block limit.
const _: () = assert!(MAX_RECORD_BYTES_LIMIT.is_multiple_of(ALIGN));
const _: () = assert!(64 << 20 <= MAX_BLOCK_FRAMES_BYTES);
// A footer body's length is a u32.
const _: () = assert!(MAX_FOOTER_BODY_BYTES <= u32::MAX as usize);

/// Rounds `n` up to the next multiple of [`ALIGN`].
pub const fn align_up(n: usize) -> usize {
    (n + (ALIGN - 1)) & !(ALIGN - 1)
}

/// Size of a frame (header, payload and padding) for a payload of `payload_len` bytes.
pub const fn frame_len(payload_len: usize) -> usize {
    FRAME_HEADER_LEN + align_up(payload_len)
}

pub(crate) fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

pub(crate) fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

pub(crate) fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(x)
}

fn link_at(b: &[u8], at: usize) -> Link {
    let mut x = [0u8; 32];
    x.copy_from_slice(&b[at..at + 32]);
    x
}

/// The header at the start of every segment file.
///
/// ```text
///  0..8   magic "BBOXSEG\0"
///  8..12  format version (u32)
/// 12..16  flags (u32; bit 0: keyed chain)
/// 16..24  first seq of the segment (u64)
/// 24..56  chain link preceding the segment's first block (all zero for the first segment)
/// 56..88  key id (blake3 of the key in a derive-key context; zero when unkeyed)
/// 88..92  reserved, zero
/// 92..96  crc32c of bytes 0..92
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentHeader {
    /// Format version.
    pub version: u32,
    /// Flags ([`FLAG_KEYED`]).
    pub flags: u32,
    /// First seq of the segment.
    pub first_seq: u64,
    /// Chain link that the segment's first block continues from.
    pub prev_link: Link,
    /// Identifies the key of a keyed chain without revealing it.
    pub key_id: [u8; 32],
}

impl SegmentHeader {
    /// Encodes the header.
    pub fn encode(&self) -> [u8; SEGMENT_HEADER_LEN] {
        let mut b = [0u8; SEGMENT_HEADER_LEN];
        b[0..8].copy_from_slice(&SEGMENT_MAGIC);
        b[8..12].copy_from_slice(&self.version.to_le_bytes());
        b[12..16].copy_from_slice(&self.flags.to_le_bytes());
        b[16..24].copy_from_slice(&self.first_seq.to_le_bytes());
        b[24..56].copy_from_slice(&self.prev_link);
        b[56..88].copy_from_slice(&self.key_id);
        let crc = crc32c::crc32c(&b[0..92]);
        b[92..96].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// Decodes and checks a header. The version check is left to the caller, so that it
    /// can report a newer version distinctly from damage.
    pub fn decode(b: &[u8]) -> Result<SegmentHeader, String> {
        if b.len() < SEGMENT_HEADER_LEN {
            return Err(format!(
                "{} bytes, shorter than a segment header ({SEGMENT_HEADER_LEN})",
                b.len()
            ));
        }
        if b[0..8] != SEGMENT_MAGIC {
            return Err("wrong magic number".to_owned());
        }
        let crc = u32_at(b, 92);
        if crc != crc32c::crc32c(&b[0..92]) {
            return Err("header checksum mismatch".to_owned());
        }
        if u32_at(b, 88) != 0 {
            return Err("reserved bytes are not zero".to_owned());
        }
        Ok(SegmentHeader {
            version: u32_at(b, 8),
            flags: u32_at(b, 12),
            first_seq: u64_at(b, 16),
            prev_link: link_at(b, 24),
            key_id: link_at(b, 56),
        })
    }

    /// Whether the chain of this segment is keyed.
    pub fn is_keyed(&self) -> bool {
        self.flags & FLAG_KEYED != 0
    }
}

/// The header of a block: a run of frames written together and covered by one chain link.
///
/// ```text
///  0..4   magic "BBLK"
///  4..8   stored length: bytes that follow the header (bits 0..30, a multiple of 8);
///         bit 31 set: they are the frames zstd-compressed (see `crate::compress`),
///         clear: they are the frames
///  8..12  count: number of frames (u32, >= 1)
/// 12..16  crc32c of bytes 0..12 and 16..72
/// 16..24  first seq (u64); frame i has seq first_seq + i
/// 24..32  first ts (u64, ns); frame i has ts first_ts + its ts_delta
/// 32..40  last ts (u64, ns)
/// 40..72  chain link of this block
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockHeader {
    /// Bytes stored after the header: the frames, or the compressed frames.
    pub stored_len: u32,
    /// Whether the stored bytes are the frames zstd-compressed.
    pub compressed: bool,
    /// Number of frames.
    pub count: u32,
    /// Seq of the first frame.
    pub first_seq: u64,
    /// Timestamp of the first frame.
    pub first_ts: u64,
    /// Timestamp of the last frame.
    pub last_ts: u64,
    /// The chain link: hash of the frames, the block metadata and the previous link.
    pub link: Link,
}

impl BlockHeader {
    /// Encodes the header into `out` (which must be [`BLOCK_HEADER_LEN`] bytes).
    pub fn encode_into(&self, out: &mut [u8]) {
        debug_assert_eq!(out.len(), BLOCK_HEADER_LEN);
        out[0..4].copy_from_slice(&BLOCK_MAGIC);
        out[4..8].copy_from_slice(&self.len_word().to_le_bytes());
        out[8..12].copy_from_slice(&self.count.to_le_bytes());
        out[16..24].copy_from_slice(&self.first_seq.to_le_bytes());
        out[24..32].copy_from_slice(&self.first_ts.to_le_bytes());
        out[32..40].copy_from_slice(&self.last_ts.to_le_bytes());
        out[40..72].copy_from_slice(&self.link);
        let crc = block_header_crc(out);
        out[12..16].copy_from_slice(&crc.to_le_bytes());
    }

    /// Decodes and checks a block header.
    pub fn decode(b: &[u8]) -> Result<BlockHeader, String> {
        debug_assert!(b.len() >= BLOCK_HEADER_LEN);
        if b[0..4] != BLOCK_MAGIC {
            return Err("wrong block magic".to_owned());
        }
        if u32_at(b, 12) != block_header_crc(b) {
            return Err("block header checksum mismatch".to_owned());
        }
        let word = u32_at(b, 4);
        let h = BlockHeader {
            stored_len: word & !BLOCK_COMPRESSED,
            compressed: word & BLOCK_COMPRESSED != 0,
            count: u32_at(b, 8),
            first_seq: u64_at(b, 16),
            first_ts: u64_at(b, 24),
            last_ts: u64_at(b, 32),
            link: link_at(b, 40),
        };
        if h.count == 0 {
            return Err("block holds no frames".to_owned());
        }
        if h.first_seq.checked_add(u64::from(h.count)).is_none() {
            return Err(format!(
                "{} frames from seq {} run past the largest seq",
                h.count, h.first_seq
            ));
        }
        let what = if h.compressed {
            "compressed frames length"
        } else {
            "frames length"
        };
        if h.stored_len as usize > MAX_BLOCK_FRAMES_BYTES {
            return Err(format!(
                "{what} {} exceeds the format's limit of {MAX_BLOCK_FRAMES_BYTES} bytes",
                h.stored_len
            ));
        }
        if !(h.stored_len as usize).is_multiple_of(ALIGN) {
            return Err(format!("{what} {} is not 8-aligned", h.stored_len));
        }
        let least = if h.compressed {
            align_up(COMPRESSED_HEAD_LEN + 1)
        } else {
            h.count as usize * FRAME_HEADER_LEN
        };
        if (h.stored_len as usize) < least {
            return Err(format!(
                "{what} {} too small for {} frames",
                h.stored_len, h.count
            ));
        }
        if h.last_ts < h.first_ts {
            return Err("last ts lower than first ts".to_owned());
        }
        Ok(h)
    }

    /// Header bytes 4..8: the stored length, with [`BLOCK_COMPRESSED`] for a
    /// compressed block.
    pub fn len_word(&self) -> u32 {
        if self.compressed {
            self.stored_len | BLOCK_COMPRESSED
        } else {
            self.stored_len
        }
    }

    /// The 32 bytes of block metadata that the chain link commits to: header bytes
    /// 4..12 (stored length and compression bit, count), then the seqs and times.
    pub fn chain_meta(&self) -> [u8; 32] {
        let mut m = [0u8; 32];
        m[0..4].copy_from_slice(&self.len_word().to_le_bytes());
        m[4..8].copy_from_slice(&self.count.to_le_bytes());
        m[8..16].copy_from_slice(&self.first_seq.to_le_bytes());
        m[16..24].copy_from_slice(&self.first_ts.to_le_bytes());
        m[24..32].copy_from_slice(&self.last_ts.to_le_bytes());
        m
    }

    /// Seq of the last frame. [`BlockHeader::decode`] refuses a header whose seqs run
    /// past `u64::MAX`, so this never overflows for a decoded header.
    pub fn last_seq(&self) -> u64 {
        self.first_seq.saturating_add(u64::from(self.count)) - 1
    }

    /// Seq that follows the last frame (see [`BlockHeader::last_seq`]).
    pub fn next_seq(&self) -> u64 {
        self.first_seq.saturating_add(u64::from(self.count))
    }

    /// Total length of the block on disk.
    pub fn total_len(&self) -> usize {
        BLOCK_HEADER_LEN + self.stored_len as usize
    }
}

fn block_header_crc(b: &[u8]) -> u32 {
    let crc = crc32c::crc32c(&b[0..12]);
    crc32c::crc32c_append(crc, &b[16..BLOCK_HEADER_LEN])
}

/// A frame header.
///
/// ```text
///  0..4   payload length (u32)
///  4..6   record type (u16)
///  6..8   flags (u16, zero)
///  8..12  ts delta: ts minus the block's first ts (u32, ns)
/// 12..16  crc32c of the seq (u64 LE), bytes 0..12 and the payload
/// 16..    payload, then zero padding to a multiple of 8
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameHeader {
    /// Payload length in bytes.
    pub payload_len: u32,
    /// Record type tag.
    pub record_type: u16,
    /// Timestamp minus the block's first timestamp.
    pub ts_delta: u32,
}

/// Computes a frame's checksum: crc32c of the seq (u64 LE), the frame header's bytes
/// 0..12 and the payload, so a frame moved to another position fails its check.
pub fn frame_crc(header12: &[u8; 12], seq: u64, payload: &[u8]) -> u32 {
    crate::crc::frame_crc(seq, header12, payload)
}

/// Appends one frame to `out`.
pub fn encode_frame(out: &mut Vec<u8>, h: FrameHeader, seq: u64, payload: &[u8]) {
    debug_assert_eq!(h.payload_len as usize, payload.len());
    let mut head = [0u8; FRAME_HEADER_LEN];
    head[0..4].copy_from_slice(&h.payload_len.to_le_bytes());
    head[4..6].copy_from_slice(&h.record_type.to_le_bytes());
    head[8..12].copy_from_slice(&h.ts_delta.to_le_bytes());
    let crc = frame_crc(head[0..12].try_into().expect("12 bytes"), seq, payload);
    head[12..16].copy_from_slice(&crc.to_le_bytes());
    out.extend_from_slice(&head);
    out.extend_from_slice(payload);
    let pad = align_up(payload.len()) - payload.len();
    out.extend_from_slice(&[0u8; ALIGN][..pad]);
}

/// Decodes the frame at the start of `b`, checking its structure (flags, length,
/// padding) and, with `check_crc`, its checksum.
///
/// Returns the header and the frame's total length.
pub fn decode_frame(b: &[u8], seq: u64, check_crc: bool) -> Result<(FrameHeader, usize), String> {
    if b.len() < FRAME_HEADER_LEN {
        return Err("frame header runs past the end of its block".to_owned());
    }
    let h = FrameHeader {
        payload_len: u32_at(b, 0),
        record_type: u16_at(b, 4),
        ts_delta: u32_at(b, 8),
    };
    if u16_at(b, 6) != 0 {
        return Err("frame flags are not zero".to_owned());
    }
    let len = h.payload_len as usize;
    if len > MAX_RECORD_BYTES_LIMIT {
        return Err(format!("payload length {len} exceeds the format's limit"));
    }
    let total = frame_len(len);
    if total > b.len() {
        return Err(format!(
            "payload length {len} runs past the end of its block"
        ));
    }
    let payload = &b[FRAME_HEADER_LEN..FRAME_HEADER_LEN + len];
    if check_crc && u32_at(b, 12) != frame_crc(b[0..12].try_into().expect("12 bytes"), seq, payload)
    {
        return Err("frame checksum mismatch".to_owned());
    }
    if b[FRAME_HEADER_LEN + len..total].iter().any(|&x| x != 0) {
        return Err("frame padding is not zero".to_owned());
    }
    Ok((h, total))
}

/// One entry of a sealed segment's sparse index: where a block starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexEntry {
    /// First seq of the block.
    pub first_seq: u64,
    /// First timestamp of the block.
    pub first_ts: u64,
    /// Byte offset of the block header in the segment.
    pub offset: u64,
    /// The chain link that precedes the block, so a reader can verify from here.
    pub prev_link: Link,
}

/// The footer written when a segment is sealed.
///
/// ```text
/// footer body:
///  0..8   magic "BBOXFTR\0"
///  8..16  record count (u64)
/// 16..24  block count (u64)
/// 24..32  first seq (u64)
/// 32..40  last seq (u64)
/// 40..48  first ts (u64)
/// 48..56  last ts (u64)
/// 56..88  last chain link
/// 88..92  number of per-type entries T (u32)
/// 92..96  number of index entries I (u32)
/// 96..    T × { record type u16, zero u16, zero u32, count u64 }
///         I × { first seq u64, first ts u64, offset u64, previous link [32] }
///         tag index:
///         K (u32), N (u32)
///         K × { first seq u64, count u32, tags n u32 }, sorted by first seq
///         N × tag u32 (each block's n tags, ascending), zeros to a multiple of 8
///         authenticator [32]: keyed blake3 over bytes 0..88 and the tag index
/// trailer (last 16 bytes of the file):
///  0..4   footer body length (u32)
///  4..8   crc32c of the footer body
///  8..16  magic "BBOXEND\0"
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Footer {
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
    /// Link of the last block.
    pub last_link: Link,
    /// Records per record type, sorted by type.
    pub type_counts: Vec<(u16, u64)>,
    /// Sparse index, sorted by seq.
    pub index: Vec<IndexEntry>,
    /// Tag index: the tags of the blocks the writer described, sorted by seq.
    pub tags: Vec<BlockTags>,
    /// The tag index's authenticator (see [`Footer::tag_mac_message`]).
    pub tag_mac: Link,
}

/// One entry of a sealed segment's tag index: the distinct tags of a block's records.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct BlockTags {
    /// First seq of the block.
    pub first_seq: u64,
    /// Records in the block.
    pub count: u32,
    /// The distinct tags of its records, ascending.
    pub tags: Vec<u32>,
}

fn tag_padding(n_tags: usize) -> usize {
    (n_tags * 4).next_multiple_of(ALIGN) - n_tags * 4
}

impl Footer {
    /// Encodes the footer body and trailer.
    pub fn encode(&self) -> Vec<u8> {
        let tags = self.tag_section();
        let body_len = FOOTER_FIXED_LEN
            + self.type_counts.len() * FOOTER_TYPE_ENTRY_LEN
            + self.index.len() * FOOTER_INDEX_ENTRY_LEN
            + tags.len()
            + FOOTER_TAG_MAC_LEN;
        let mut b = Vec::with_capacity(body_len + TRAILER_LEN);
        self.put_head(&mut b);
        b.extend_from_slice(&len_u32(self.type_counts.len()).to_le_bytes());
        b.extend_from_slice(&len_u32(self.index.len()).to_le_bytes());
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
        b.extend_from_slice(&tags);
        b.extend_from_slice(&self.tag_mac);
        debug_assert_eq!(b.len(), body_len);
        let crc = crc32c::crc32c(&b);
        b.extend_from_slice(&len_u32(body_len).to_le_bytes());
        b.extend_from_slice(&crc.to_le_bytes());
        b.extend_from_slice(&TRAILER_MAGIC);
        b
    }

    /// Footer bytes 0..88: the magic, the counts, seqs and times, the last link.
    fn put_head(&self, b: &mut Vec<u8>) {
        b.extend_from_slice(&FOOTER_MAGIC);
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
    }

    /// The tag index as stored: K, N, the entries, the tags and their padding.
    fn tag_section(&self) -> Vec<u8> {
        let n: usize = self.tags.iter().map(|t| t.tags.len()).sum();
        let mut b = Vec::with_capacity(8 + self.tags.len() * FOOTER_TAG_ENTRY_LEN + n * 4 + 8);
        b.extend_from_slice(&len_u32(self.tags.len()).to_le_bytes());
        b.extend_from_slice(&len_u32(n).to_le_bytes());
        for t in &self.tags {
            b.extend_from_slice(&t.first_seq.to_le_bytes());
            b.extend_from_slice(&t.count.to_le_bytes());
            b.extend_from_slice(&len_u32(t.tags.len()).to_le_bytes());
        }
        for t in &self.tags {
            for tag in &t.tags {
                b.extend_from_slice(&tag.to_le_bytes());
            }
        }
        b.resize(b.len() + tag_padding(n), 0);
        b
    }

    /// What the tag index's authenticator covers: footer bytes 0..88 (counts, seqs,
    /// times, last link), then the tag index as stored (without the authenticator).
    pub fn tag_mac_message(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(88);
        self.put_head(&mut b);
        b.extend_from_slice(&self.tag_section());
        b
    }

    /// Reads the trailer at the end of `tail` (the last [`TRAILER_LEN`] bytes of a file)
    /// and returns the footer body length, or `None` when there is no trailer.
    pub fn trailer_body_len(tail: &[u8]) -> Option<(usize, u32)> {
        if tail.len() < TRAILER_LEN || tail[tail.len() - 8..] != TRAILER_MAGIC {
            return None;
        }
        let at = tail.len() - TRAILER_LEN;
        Some((u32_at(tail, at) as usize, u32_at(tail, at + 4)))
    }

    /// Decodes a footer body whose checksum is `crc`.
    pub fn decode(body: &[u8], crc: u32) -> Result<Footer, String> {
        if body.len() < FOOTER_FIXED_LEN {
            return Err("footer shorter than its fixed part".to_owned());
        }
        if body.len() > MAX_FOOTER_BODY_BYTES {
            return Err(format!(
                "footer of {} bytes exceeds the format's limit of {MAX_FOOTER_BODY_BYTES} bytes",
                body.len()
            ));
        }
        if body[0..8] != FOOTER_MAGIC {
            return Err("wrong footer magic".to_owned());
        }
        if crc32c::crc32c(body) != crc {
            return Err("footer checksum mismatch".to_owned());
        }
        let types_n = u32_at(body, 88) as usize;
        let index_n = u32_at(body, 92) as usize;
        // Bound the counts by the body length before allocating anything.
        let tags_at = types_n
            .checked_mul(FOOTER_TYPE_ENTRY_LEN)
            .and_then(|t| index_n.checked_mul(FOOTER_INDEX_ENTRY_LEN).map(|i| (t, i)))
            .and_then(|(t, i)| t.checked_add(i))
            .and_then(|x| x.checked_add(FOOTER_FIXED_LEN))
            .filter(|&x| x.checked_add(8).is_some_and(|x| x <= body.len()));
        let Some(tags_at) = tags_at else {
            return Err(format!(
                "footer of {} bytes cannot hold {types_n} type counts, {index_n} index entries and a tag index",
                body.len()
            ));
        };
        let blocks_n = u32_at(body, tags_at) as usize;
        let tags_n = u32_at(body, tags_at + 4) as usize;
        if blocks_n > MAX_FOOTER_TAG_ENTRIES || tags_n > MAX_FOOTER_TAGS {
            return Err(format!(
                "footer's tag index claims {blocks_n} blocks and {tags_n} tags, more than the format's {MAX_FOOTER_TAG_ENTRIES} and {MAX_FOOTER_TAGS}"
            ));
        }
        let tag_list_at = tags_at + 8 + blocks_n * FOOTER_TAG_ENTRY_LEN;
        let mac_at = tag_list_at + tags_n * 4 + tag_padding(tags_n);
        if mac_at + FOOTER_TAG_MAC_LEN != body.len() {
            return Err(format!(
                "footer of {} bytes cannot hold {types_n} type counts, {index_n} index entries and a tag index of {blocks_n} blocks and {tags_n} tags",
                body.len()
            ));
        }
        if body[tag_list_at + tags_n * 4..mac_at]
            .iter()
            .any(|&b| b != 0)
        {
            return Err("nonzero padding after the footer's tags".to_owned());
        }
        let mut at = FOOTER_FIXED_LEN;
        let mut type_counts = Vec::with_capacity(types_n);
        for _ in 0..types_n {
            type_counts.push((u16_at(body, at), u64_at(body, at + 8)));
            at += FOOTER_TYPE_ENTRY_LEN;
        }
        let mut index = Vec::with_capacity(index_n);
        for _ in 0..index_n {
            index.push(IndexEntry {
                first_seq: u64_at(body, at),
                first_ts: u64_at(body, at + 8),
                offset: u64_at(body, at + 16),
                prev_link: link_at(body, at + 24),
            });
            at += FOOTER_INDEX_ENTRY_LEN;
        }
        let mut tags = Vec::with_capacity(blocks_n);
        let (mut at, mut tag_at) = (tags_at + 8, tag_list_at);
        for _ in 0..blocks_n {
            let first_seq = u64_at(body, at);
            let n = u32_at(body, at + 12) as usize;
            if n > MAX_BLOCK_TAGS || (tag_at - tag_list_at) / 4 + n > tags_n {
                return Err(format!(
                    "footer's tag index gives the block from seq {first_seq} {n} tags, more than the index or the format holds"
                ));
            }
            let list: Vec<u32> = (0..n).map(|k| u32_at(body, tag_at + 4 * k)).collect();
            if !list.is_sorted_by(|a, b| a < b)
                || tags
                    .last()
                    .is_some_and(|p: &BlockTags| p.first_seq >= first_seq)
            {
                return Err(format!(
                    "footer's tag index is out of order at the block from seq {first_seq}"
                ));
            }
            tags.push(BlockTags {
                first_seq,
                count: u32_at(body, at + 8),
                tags: list,
            });
            at += FOOTER_TAG_ENTRY_LEN;
            tag_at += 4 * n;
        }
        if tag_at != tag_list_at + tags_n * 4 {
            return Err(format!(
                "footer's tag index lists {tags_n} tags but its blocks hold {}",
                (tag_at - tag_list_at) / 4
            ));
        }
        Ok(Footer {
            record_count: u64_at(body, 8),
            block_count: u64_at(body, 16),
            first_seq: u64_at(body, 24),
            last_seq: u64_at(body, 32),
            first_ts: u64_at(body, 40),
            last_ts: u64_at(body, 48),
            last_link: link_at(body, 56),
            type_counts,
            index,
            tags,
            tag_mac: link_at(body, mac_at),
        })
    }
}

fn len_u32(n: usize) -> u32 {
    // Footer counts are bounded by the segment size, far below u32::MAX entries.
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// The file name of the segment whose first record has `first_seq`.
pub fn segment_file_name(first_seq: u64) -> String {
    format!("{first_seq:020}.bbx")
}

/// Parses a segment file name back into its first seq.
pub fn parse_segment_file_name(name: &str) -> Option<u64> {
    let digits = name.strip_suffix(".bbx")?;
    if digits.len() != 20 || !digits.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segment_header_round_trips_and_rejects_a_flipped_bit() {
        let h = SegmentHeader {
            version: FORMAT_VERSION,
            flags: FLAG_KEYED,
            first_seq: 42,
            prev_link: [7; 32],
            key_id: [9; 32],
        };
        let mut b = h.encode();
        assert_eq!(SegmentHeader::decode(&b), Ok(h));
        for i in 0..SEGMENT_HEADER_LEN {
            b[i] ^= 0x10;
            assert!(
                SegmentHeader::decode(&b).is_err(),
                "flip at byte {i} went unnoticed"
            );
            b[i] ^= 0x10;
        }
    }

    #[test]
    fn frame_checksum_binds_the_seq() {
        let mut out = Vec::new();
        let h = FrameHeader {
            payload_len: 3,
            record_type: 5,
            ts_delta: 9,
        };
        encode_frame(&mut out, h, 100, b"abc");
        assert_eq!(out.len(), frame_len(3));
        assert_eq!(decode_frame(&out, 100, true), Ok((h, 24)));
        assert!(decode_frame(&out, 101, true).is_err());
    }

    #[test]
    fn footer_round_trips_and_bounds_counts() {
        let f = Footer {
            record_count: 10,
            block_count: 2,
            first_seq: 5,
            last_seq: 14,
            first_ts: 1,
            last_ts: 2,
            last_link: [3; 32],
            type_counts: vec![(1, 4), (2, 6)],
            index: vec![IndexEntry {
                first_seq: 5,
                first_ts: 1,
                offset: 96,
                prev_link: [1; 32],
            }],
            tags: vec![BlockTags {
                first_seq: 5,
                count: 10,
                tags: vec![0, 3, 9],
            }],
            tag_mac: [4; 32],
        };
        let b = f.encode();
        let (body_len, crc) = Footer::trailer_body_len(&b).expect("trailer present");
        assert_eq!(body_len, b.len() - TRAILER_LEN);
        assert_eq!(Footer::decode(&b[..body_len], crc), Ok(f));
        // A count that claims more entries than the body holds is refused, not trusted.
        let mut bad = b[..body_len].to_vec();
        bad[92..96].copy_from_slice(&u32::MAX.to_le_bytes());
        let crc = crc32c::crc32c(&bad);
        assert!(Footer::decode(&bad, crc).is_err());
    }

    #[test]
    fn segment_names_round_trip() {
        assert_eq!(segment_file_name(7), "00000000000000000007.bbx");
        assert_eq!(parse_segment_file_name("00000000000000000007.bbx"), Some(7));
        assert_eq!(parse_segment_file_name("7.bbx"), None);
        assert_eq!(parse_segment_file_name("0000000000000000000a.bbx"), None);
    }
}
