//! Helpers shared by the integration tests: a tiny deterministic PRNG, records that are
//! a function of their seq (so any reader can check any record it is handed), and
//! directory copies and full reads, and the byte layout of segment files.
#![allow(dead_code, reason = "each test binary uses a subset of the helpers")]

use std::fs;
use std::ops::Range;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use blackbox_log::format::{self, BLOCK_HEADER_LEN, Footer, SEGMENT_HEADER_LEN, TRAILER_LEN};
use blackbox_log::{ChainKey, LogReader, ReaderOptions, RecordType, Seq};

/// splitmix64: tiny and deterministic, for delays, batch sizes and read ranges.
pub struct SplitMix64(pub u64);

impl SplitMix64 {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
}

/// The record written at a seq.
pub struct Expected {
    pub record_type: RecordType,
    pub ts_ns: u64,
    pub payload: Vec<u8>,
}

/// The record at `seq`: type and payload (up to `max_payload_bytes`) derived from the
/// blake3 hash of the seq, at `ts_ns`.
pub fn expected_record(seq: u64, max_payload_bytes: usize, ts_ns: u64) -> Expected {
    let hash = blake3::hash(&seq.to_le_bytes());
    let h = hash.as_bytes();
    let len = usize::from(u16::from_le_bytes([h[0], h[1]])) % (max_payload_bytes + 1);
    Expected {
        record_type: RecordType(u16::from(h[2] % 4)),
        ts_ns,
        payload: h.iter().copied().cycle().take(len).collect(),
    }
}

/// A record as read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rec {
    pub seq: u64,
    pub ts: u64,
    pub record_type: u16,
    pub payload: Vec<u8>,
}

/// Copies the files (not subdirectories) of `src` into `dst`.
pub fn copy_dir(src: &Path, dst: &Path) {
    for entry in fs::read_dir(src).expect("read source directory") {
        let entry = entry.expect("directory entry");
        if entry.file_type().expect("file type").is_file() {
            fs::copy(entry.path(), dst.join(entry.file_name())).expect("copy file");
        }
    }
}

/// Every record of the log in `dir`, read with the given chain key.
pub fn read_all(dir: &Path, key: Option<[u8; 32]>) -> Vec<Rec> {
    let opts = ReaderOptions {
        key: key.map(ChainKey::new),
    };
    LogReader::open_with(dir, opts)
        .expect("open reader")
        .records(Seq(0)..)
        .expect("range read")
        .map(|r| {
            let r = r.expect("intact record");
            Rec {
                seq: r.seq().0,
                ts: r.ts_ns(),
                record_type: r.record_type().0,
                payload: r.payload().to_vec(),
            }
        })
        .collect()
}

// ---------------------------------------------------------------------------------------
// Finding the regions of a segment file
// ---------------------------------------------------------------------------------------

#[derive(Debug, Clone)]
pub struct FrameAt {
    pub start: u64,
    pub end: u64,
    pub payload_len: u64,
    pub seq: u64,
}

#[derive(Debug, Clone)]
pub struct BlockAt {
    pub start: u64,
    pub end: u64,
    pub first_seq: u64,
    /// Records in the block.
    pub count: u32,
    /// Whether its frames are stored compressed (then `frames` is empty: they are not
    /// on disk as such).
    pub compressed: bool,
    pub frames: Vec<FrameAt>,
}

#[derive(Debug, Clone)]
pub struct Layout {
    pub path: PathBuf,
    pub len: u64,
    pub blocks: Vec<BlockAt>,
    /// Footer body, then trailer, of a sealed segment.
    pub footer: Option<(Range<u64>, Range<u64>)>,
}

pub fn le_u32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

pub fn le_u64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

pub fn to_usize(x: u64) -> usize {
    usize::try_from(x).unwrap()
}

/// Walks a segment file: header, blocks (72-byte header, the stored length at bytes
/// 4..8 with bit 31 set for a compressed block, frames of a 16-byte header and a
/// payload padded to 8), and the footer a trailer points at.
pub fn layout(path: &Path) -> Layout {
    let bytes = fs::read(path).unwrap();
    let len = bytes.len();
    let footer = Footer::trailer_body_len(&bytes[len - TRAILER_LEN..]).map(|(body_len, crc)| {
        let trailer = len - TRAILER_LEN;
        let body = trailer - body_len;
        let f = Footer::decode(&bytes[body..trailer], crc).unwrap();
        assert!(f.record_count > 0 && f.block_count > 0);
        (body as u64..trailer as u64, trailer as u64..len as u64)
    });
    let data_end = footer
        .as_ref()
        .map_or(len, |(body, _)| to_usize(body.start));
    let mut blocks = Vec::new();
    let mut at = SEGMENT_HEADER_LEN;
    while at < data_end {
        assert_eq!(
            &bytes[at..at + 4],
            b"BBLK",
            "{}: block at {at}",
            path.display()
        );
        let word = le_u32(&bytes, at + 4);
        let compressed = word >> 31 == 1;
        let frames_len = (word & 0x7fff_ffff) as usize;
        let count = le_u32(&bytes, at + 8);
        let first_seq = le_u64(&bytes, at + 16);
        let end = at + BLOCK_HEADER_LEN + frames_len;
        let mut frames = Vec::new();
        let mut f = if compressed {
            end
        } else {
            at + BLOCK_HEADER_LEN
        };
        for i in 0..if compressed { 0 } else { count } {
            let payload_len = le_u32(&bytes, f) as usize;
            let next = f + format::frame_len(payload_len);
            frames.push(FrameAt {
                start: f as u64,
                end: next as u64,
                payload_len: payload_len as u64,
                seq: first_seq + u64::from(i),
            });
            f = next;
        }
        assert_eq!(f, end, "frames fill their block");
        blocks.push(BlockAt {
            start: at as u64,
            end: end as u64,
            first_seq,
            count,
            compressed,
            frames,
        });
        at = end;
    }
    assert_eq!(at, data_end);
    if let Some((body, _)) = &footer {
        let f = &bytes[to_usize(body.start)..];
        assert_eq!(le_u64(f, 16), blocks.len() as u64, "footer block count");
    }
    Layout {
        path: path.to_owned(),
        len: len as u64,
        blocks,
        footer,
    }
}

impl Layout {
    /// A block that is neither the first nor the last of the segment.
    pub fn middle_block(&self) -> &BlockAt {
        assert!(self.blocks.len() >= 3);
        &self.blocks[self.blocks.len() / 2]
    }

    /// A block before the last one with at least two frames.
    pub fn multi_frame_block(&self) -> &BlockAt {
        self.blocks[..self.blocks.len() - 1]
            .iter()
            .rev()
            .find(|b| b.frames.len() >= 2)
            .unwrap()
    }

    /// A frame (of a block before the last) whose payload has bytes, or padding.
    pub fn frame_where(&self, pred: impl Fn(&FrameAt) -> bool) -> (&BlockAt, &FrameAt) {
        self.blocks[..self.blocks.len() - 1]
            .iter()
            .flat_map(|b| b.frames.iter().map(move |f| (b, f)))
            .find(|(_, f)| pred(f))
            .unwrap()
    }
}

// ---------------------------------------------------------------------------------------
// Damage and checks
// ---------------------------------------------------------------------------------------

/// Writes a file whatever its mode (sealed segments are read-only), keeping the mode.
pub fn write_file(path: &Path, bytes: &[u8]) {
    let mode = fs::metadata(path).map(|m| m.permissions().mode()).ok();
    if mode.is_some() {
        fs::set_permissions(path, fs::Permissions::from_mode(0o600)).unwrap();
    }
    fs::write(path, bytes).unwrap();
    if let Some(mode) = mode {
        fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
    }
}

/// Flips every bit of the byte at `at` of a file, whatever its mode.
pub fn flip(path: &Path, at: u64) {
    let mut bytes = fs::read(path).unwrap();
    bytes[to_usize(at)] ^= 0xff;
    write_file(path, &bytes);
}

/// On a failure (a panic while it lives), prints where the test was (`what`: the
/// iteration, the seed) and keeps its directory for inspection.
pub struct FailureContext {
    pub test: &'static str,
    pub dir: Option<tempfile::TempDir>,
    pub what: String,
}

impl Drop for FailureContext {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let kept = self.dir.take().map(tempfile::TempDir::keep);
            eprintln!(
                "{} failed at {}; directory kept at {kept:?}",
                self.test, self.what
            );
        }
    }
}
