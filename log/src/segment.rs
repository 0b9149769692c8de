//! Reading segment files: the directory listing, headers, footers and a cursor that
//! walks and checks blocks. Recovery, readers and `verify` all read through here, so
//! they agree on what is intact, what is a torn tail and what is damage.

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::chain::{Chainer, Link};
use crate::compress;
use crate::error::{Corruption, CorruptionKind, Error, Result};
use crate::format::{
    self, BLOCK_HEADER_LEN, BLOCK_MAGIC, BlockHeader, FORMAT_VERSION, FRAME_HEADER_LEN, Footer,
    SEGMENT_HEADER_LEN, SegmentHeader, TRAILER_LEN,
};
use crate::source::{SegmentRead, SegmentSource};

/// Name of the writer's lock file inside a log directory.
pub const LOCK_FILE_NAME: &str = "LOCK";

/// Name of the writer's disk reserve inside a log directory (a dotfile: listings
/// ignore it). Only a log with a disk budget has one.
pub const RESERVE_FILE_NAME: &str = ".reserve";

/// A segment file found in a log directory (or a segment of a log read by URL).
#[derive(Debug, Clone)]
pub struct SegmentEntry {
    /// First seq, from the file name.
    pub first_seq: u64,
    /// Full path (for a log read by URL, its object's URL).
    pub path: PathBuf,
    /// Where it is read from when it is not a file.
    pub(crate) source: Option<Arc<dyn SegmentSource>>,
}

impl SegmentEntry {
    /// The segment file at `path`, whose first seq is `first_seq`.
    pub fn new(first_seq: u64, path: PathBuf) -> SegmentEntry {
        SegmentEntry {
            first_seq,
            path,
            source: None,
        }
    }
}

impl PartialEq for SegmentEntry {
    fn eq(&self, other: &SegmentEntry) -> bool {
        self.first_seq == other.first_seq && self.path == other.path
    }
}

impl Eq for SegmentEntry {}

/// Lists the segments of `dir`, sorted by first seq.
///
/// Subdirectories and dotfiles are ignored (higher layers keep their own state in
/// subdirectories). Any other file that is neither a segment nor the lock file makes the
/// directory "not a log" when there is no segment at all; beside segments it is ignored.
///
/// # Errors
///
/// I/O errors reading the directory; [`Error::NotALog`] for a directory with foreign
/// files and no segment; [`CorruptionKind::NotARegularFile`] for anything named like a
/// segment that is not a regular file (a directory, a symbolic link, a FIFO, ...).
pub fn list_segments(dir: &Path) -> Result<Vec<SegmentEntry>> {
    let listing = read_listing(dir)?;
    if let Some((entry, found)) = listing.not_files.first() {
        return Err(not_a_regular_file(entry, found));
    }
    if listing.segments.is_empty()
        && let Some(name) = listing.foreign
    {
        return Err(Error::NotALog {
            dir: dir.to_owned(),
            reason: format!("it holds {name:?}, which is not a segment file"),
        });
    }
    Ok(listing.segments)
}

/// The error for an entry named like a segment that is not a regular file.
pub(crate) fn not_a_regular_file(entry: &SegmentEntry, found: &'static str) -> Error {
    Error::Corrupt(Corruption {
        segment: entry.path.clone(),
        offset: 0,
        seq: Some(entry.first_seq),
        kind: CorruptionKind::NotARegularFile { found },
    })
}

/// What a log directory holds.
#[derive(Debug, Default)]
pub(crate) struct Listing {
    /// Regular files named like segments, sorted by first seq.
    pub(crate) segments: Vec<SegmentEntry>,
    /// Entries named like segments that are not regular files, with what they are.
    pub(crate) not_files: Vec<(SegmentEntry, &'static str)>,
    /// The first file that is neither a segment, the lock file, a dotfile nor a directory.
    pub(crate) foreign: Option<String>,
    /// The first entry of any kind that is not the lock file or named like a segment:
    /// a directory without a segment is a new log only when there is none.
    pub(crate) other: Option<String>,
    /// What the entry named like the lock file is, when it is not a regular file.
    pub(crate) lock_not_file: Option<&'static str>,
}

/// Reads a directory's entries, telling segments from everything else by the entry's
/// own file type (a symbolic link is never followed).
pub(crate) fn read_listing(dir: &Path) -> Result<Listing> {
    let entries = fs::read_dir(dir).map_err(|e| Error::io("list log directory", dir, e))?;
    let mut listing = Listing::default();
    for entry in entries {
        let entry = entry.map_err(|e| Error::io("list log directory", dir, e))?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else {
            let shown = format!("{:?}", entry.file_name());
            listing.other.get_or_insert_with(|| shown.clone());
            listing.foreign.get_or_insert(shown);
            continue;
        };
        let file_type = entry
            .file_type()
            .map_err(|e| Error::io("inspect", entry.path(), e))?;
        if let Some(first_seq) = format::parse_segment_file_name(name) {
            let segment = SegmentEntry::new(first_seq, entry.path());
            if file_type.is_file() {
                listing.segments.push(segment);
            } else {
                listing
                    .not_files
                    .push((segment, file_type_name(&file_type)));
            }
            continue;
        }
        if name == LOCK_FILE_NAME {
            if !file_type.is_file() {
                listing.lock_not_file = Some(file_type_name(&file_type));
            }
            continue;
        }
        if name == RESERVE_FILE_NAME {
            // The log's own, like the lock: the writer takes it again, or refuses it if
            // it is not a regular file, when it needs it.
            continue;
        }
        listing.other.get_or_insert_with(|| name.to_owned());
        if !(file_type.is_dir() || name.starts_with('.')) {
            listing.foreign.get_or_insert_with(|| name.to_owned());
        }
    }
    listing.segments.sort_by_key(|s| s.first_seq);
    listing.not_files.sort_by_key(|(s, _)| s.first_seq);
    Ok(listing)
}

/// What a file type is, in words, for an error message.
pub(crate) fn file_type_name(t: &fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if t.is_dir() {
        "a directory"
    } else if t.is_symlink() {
        "a symbolic link"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_block_device() || t.is_char_device() {
        "a device"
    } else if t.is_file() {
        "a regular file"
    } else {
        "of an unknown file type"
    }
}

/// Opens a file named like a segment for reading without following a symbolic link and
/// without blocking on a FIFO, and checks that what was opened is a regular file (the
/// entry may have changed since the directory was listed).
pub(crate) fn open_regular(entry: &SegmentEntry) -> Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(&entry.path)
        .map_err(|e| {
            if e.raw_os_error() == Some(libc::ELOOP) {
                not_a_regular_file(entry, "a symbolic link")
            } else {
                Error::io("open segment", &entry.path, e)
            }
        })?;
    let meta = file
        .metadata()
        .map_err(|e| Error::io("inspect segment", &entry.path, e))?;
    if !meta.is_file() {
        return Err(not_a_regular_file(entry, file_type_name(&meta.file_type())));
    }
    Ok(file)
}

/// A buffer whose start is 8-byte aligned, so frames read into it keep their alignment.
#[derive(Debug, Default)]
pub(crate) struct AlignedBuf {
    words: Vec<u64>,
    len: usize,
}

impl AlignedBuf {
    /// A buffer of `len` zero bytes.
    pub(crate) fn zeroed(len: usize) -> AlignedBuf {
        AlignedBuf {
            words: vec![0; len.div_ceil(8)],
            len,
        }
    }

    pub(crate) fn bytes(&self) -> &[u8] {
        &bytemuck::cast_slice(&self.words)[..self.len]
    }

    pub(crate) fn bytes_mut(&mut self) -> &mut [u8] {
        &mut bytemuck::cast_slice_mut(&mut self.words)[..self.len]
    }

    /// Fills the buffer with up to `want` bytes of `file` from `offset`; returns how many
    /// were available.
    fn fill(
        &mut self,
        file: &dyn SegmentRead,
        path: &Path,
        offset: u64,
        want: usize,
    ) -> Result<usize> {
        // Zero only on growth: a reused buffer is overwritten by the read, and bytes past
        // what the read returned are never exposed (`len` bounds every view).
        if self.words.len() < want.div_ceil(8) {
            self.words.resize(want.div_ceil(8), 0);
        }
        let buf: &mut [u8] = bytemuck::cast_slice_mut(&mut self.words);
        let buf = &mut buf[..want];
        let mut got = 0;
        while got < want {
            match file.read_at(&mut buf[got..], offset + got as u64) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(Error::io("read segment", path, e)),
            }
        }
        self.len = got;
        Ok(got)
    }
}

/// An open segment file with its checked header.
#[derive(Debug)]
pub(crate) struct SegmentFile {
    pub(crate) path: PathBuf,
    pub(crate) file: Box<dyn SegmentRead>,
    pub(crate) len: u64,
    pub(crate) header: SegmentHeader,
}

/// What a segment header check found when the header may be a torn creation.
#[derive(Debug)]
pub(crate) enum HeaderState {
    Ok(SegmentFile),
    /// The file is shorter than a header, all zero, or only a header that fails its
    /// checksum and ends in zeros: a creation a crash cut short.
    Torn {
        path: PathBuf,
        len: u64,
    },
}

impl SegmentFile {
    /// Opens a segment and checks its header against its name and the expected key id.
    /// With `allow_missing_key`, a keyed segment opened without a key is accepted (its
    /// checksums can be checked, its chain cannot).
    pub(crate) fn open(
        entry: &SegmentEntry,
        key_id: Option<[u8; 32]>,
        allow_missing_key: bool,
    ) -> Result<HeaderState> {
        let path = entry.path.clone();
        let file: Box<dyn SegmentRead> = match &entry.source {
            Some(source) => source.open(entry)?,
            None => Box::new(open_regular(entry)?),
        };
        let len = file
            .byte_len()
            .map_err(|e| Error::io("inspect segment", &path, e))?;
        let mut head = [0u8; SEGMENT_HEADER_LEN];
        let want = usize::try_from(len.min(SEGMENT_HEADER_LEN as u64)).unwrap_or(0);
        file.read_exact_at(&mut head[..want], 0)
            .map_err(|e| Error::io("read segment header", &path, e))?;
        if want < SEGMENT_HEADER_LEN || head.iter().all(|&b| b == 0) {
            return Ok(HeaderState::Torn { path, len });
        }
        let corrupt = |kind| Corruption {
            segment: path.clone(),
            offset: 0,
            seq: Some(entry.first_seq),
            kind,
        };
        if head[0..8] == format::SEGMENT_MAGIC {
            let version = format::u32_at(&head, 8);
            if version != 0 && version != FORMAT_VERSION {
                return Err(Error::UnsupportedVersion {
                    segment: path,
                    found: version,
                    supported: FORMAT_VERSION,
                });
            }
        }
        let header = match SegmentHeader::decode(&head) {
            Ok(header) => header,
            // A header torn by a power loss: the file holds the header's length (its
            // length reached the disk), its last bytes, the checksum's, are zeros (they
            // did not), and it starts like a segment. The header is synced before
            // anything is written after it, so such a file holds nothing else and
            // nothing is lost with it.
            Err(_)
                if len == SEGMENT_HEADER_LEN as u64
                    && head[SEGMENT_HEADER_LEN - 1] == 0
                    && starts_like_a_segment(&head) =>
            {
                return Ok(HeaderState::Torn { path, len });
            }
            Err(why) => return Err(corrupt(CorruptionKind::SegmentHeader(why)).into()),
        };
        if header.version == 0 {
            return Err(corrupt(CorruptionKind::SegmentHeader("version 0".to_owned())).into());
        }
        if header.first_seq != entry.first_seq {
            return Err(corrupt(CorruptionKind::SegmentName {
                header_first_seq: header.first_seq,
            })
            .into());
        }
        match (header.is_keyed(), key_id) {
            (true, None) if !allow_missing_key => {
                return Err(Error::KeyRequired { segment: path });
            }
            (false, Some(_)) => return Err(Error::NotKeyed { segment: path }),
            (true, Some(id)) if id != header.key_id => {
                return Err(Error::WrongKey { segment: path });
            }
            _ => {}
        }
        Ok(HeaderState::Ok(SegmentFile {
            path,
            file,
            len,
            header,
        }))
    }

    /// Reads the footer if the segment ends with a trailer. `Ok(None)`: no trailer.
    /// A trailer whose footer fails its checks is an error.
    pub(crate) fn read_footer(&self) -> Result<Option<(Footer, u64)>> {
        let corrupt = |offset, why: String| {
            Error::from(Corruption {
                segment: self.path.clone(),
                offset,
                seq: None,
                kind: CorruptionKind::Footer(why),
            })
        };
        let min = (SEGMENT_HEADER_LEN + TRAILER_LEN) as u64;
        if self.len < min {
            return Ok(None);
        }
        let mut tail = [0u8; TRAILER_LEN];
        let tail_at = self.len - TRAILER_LEN as u64;
        self.file
            .read_exact_at(&mut tail, tail_at)
            .map_err(|e| Error::io("read segment footer", &self.path, e))?;
        let Some((body_len, crc)) = Footer::trailer_body_len(&tail) else {
            return Ok(None);
        };
        let body_len_u64 = body_len as u64;
        if body_len > format::MAX_FOOTER_BODY_BYTES {
            return Err(corrupt(
                tail_at,
                format!(
                    "footer length {body_len} exceeds the format's limit of {} bytes",
                    format::MAX_FOOTER_BODY_BYTES
                ),
            ));
        }
        if body_len_u64 > tail_at - SEGMENT_HEADER_LEN as u64
            || !body_len.is_multiple_of(format::ALIGN)
        {
            return Err(corrupt(
                tail_at,
                format!("impossible footer length {body_len}"),
            ));
        }
        let start = tail_at - body_len_u64;
        let mut body = vec![0u8; body_len];
        self.file
            .read_exact_at(&mut body, start)
            .map_err(|e| Error::io("read segment footer", &self.path, e))?;
        let footer = Footer::decode(&body, crc).map_err(|why| corrupt(start, why))?;
        Ok(Some((footer, start)))
    }
}

/// A block known only by its header: its checksum passed, nothing else was checked.
#[derive(Debug, Clone)]
pub(crate) struct HeaderOnly {
    pub(crate) seg: Arc<SegmentFile>,
    pub(crate) offset: u64,
    pub(crate) header: BlockHeader,
    /// The link stored before the block (in the header before it, an index entry or the
    /// segment header): the one its own link must be computed from.
    pub(crate) prev_link: Link,
}

impl HeaderOnly {
    /// Reads the block and checks it in full: its frames, and its link recomputed from
    /// the link stored before it (or, without a chainer, its frame checksums). Returns
    /// the corruption found otherwise.
    pub(crate) fn verify(&self, chainer: Option<&Chainer>) -> Result<()> {
        let end = self.offset + self.header.total_len() as u64;
        let mut cursor = BlockCursor::new(
            Arc::clone(&self.seg),
            self.offset,
            end,
            self.header.first_seq,
            0,
            self.prev_link,
        );
        cursor.verify_block(self, chainer)
    }
}

/// A block that passed its checks, with its frames in a shared aligned buffer.
#[derive(Debug, Clone)]
pub(crate) struct CheckedBlock {
    pub(crate) offset: u64,
    pub(crate) header: BlockHeader,
    /// The cursor's chunk for a block stored raw; the decompressed frames for a
    /// compressed one.
    pub(crate) chunk: Arc<AlignedBuf>,
    /// Index of the block's first frame byte in `chunk`.
    pub(crate) frames_at: usize,
    /// Length of the block's frames.
    pub(crate) frames_len: usize,
}

impl CheckedBlock {
    pub(crate) fn frames(&self) -> &[u8] {
        &self.chunk.bytes()[self.frames_at..self.frames_at + self.frames_len]
    }
}

/// A block's frames: in the cursor's chunk for a block stored raw, in a buffer of their
/// own for a compressed block.
#[derive(Debug)]
pub(crate) struct Frames {
    buf: Arc<AlignedBuf>,
    at: usize,
    len: usize,
}

impl Frames {
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.buf.bytes()[self.at..self.at + self.len]
    }
}

/// Where a frame that failed its checks is, for an error: its byte offset in the
/// segment and words naming it. A compressed block's frames are not on disk, so the
/// offset is the block's and the words say where in its decompressed frames.
pub(crate) fn frame_place(
    offset: u64,
    header: &BlockHeader,
    frame_offset: usize,
    seq: u64,
) -> (u64, String) {
    if header.compressed {
        (
            offset,
            format!(
                "frame {frame_offset} bytes into the decompressed frames of the compressed block at byte {offset} (seq {seq})"
            ),
        )
    } else {
        let at = offset + BLOCK_HEADER_LEN as u64 + frame_offset as u64;
        (at, format!("frame at byte {at} (seq {seq})"))
    }
}

/// A block header read at an offset, before any check of its content.
#[derive(Debug)]
pub(crate) enum RawBlock {
    /// The bytes there are not a block header that decodes and fits in the data.
    NoBlock { detail: String },
    /// A header that decodes and fits; its frames start at `frames_at` in the chunk.
    Block {
        header: BlockHeader,
        frames_at: usize,
    },
}

/// The outcome of reading the next block.
#[derive(Debug)]
pub(crate) enum Step {
    Block(CheckedBlock),
    /// No more bytes before the end of the block region.
    End,
    /// The bytes at `offset` are not an intact block (torn or damaged); the caller
    /// decides which with [`BlockCursor::intact_block_after`].
    Damaged {
        offset: u64,
        detail: String,
        /// Offset and seq of the frame that failed its checks, if the damage is in one.
        frame: Option<(u64, u64)>,
    },
}

/// The most a cursor reads at once: what a scan reads per call once it is under way.
const CHUNK_BYTES: usize = 1 << 20;

/// The page size in which recovery recognizes data a power loss kept from the disk
/// ([`BlockCursor::lost_page_between`]): 4 KiB, the smallest page of the systems the log
/// runs on (a larger page ends on a 4 KiB boundary too).
pub(crate) const LOST_PAGE_BYTES: u64 = 4096;
/// What a cursor reads first after a seek (or at its start): a little more than one
/// block of the default size. Each read that continues where the last one ended reads
/// twice as much, up to [`CHUNK_BYTES`]: a scan soon reads 1 MiB a call, while a read
/// that wants one block, or jumps from block to block through the index, does not copy
/// a whole MiB around each.
const FIRST_READ_BYTES: usize = 128 << 10;

/// A walk over block headers reads through a block smaller than this (the read ahead
/// goes on) and reads only the next header after a larger one
/// ([`BlockCursor::header_window`]).
const SKIP_READ_THROUGH_BYTES: u64 = 16 << 10;

/// Walks the blocks of one segment in order, checking each as it goes.
#[derive(Debug)]
pub(crate) struct BlockCursor {
    seg: Arc<SegmentFile>,
    chunk: Arc<AlignedBuf>,
    chunk_offset: u64,
    /// Offset of the next block.
    pub(crate) pos: u64,
    /// End of the block region (footer start, or file length for an active segment).
    pub(crate) end: u64,
    /// Seq the next block must start with.
    pub(crate) next_seq: u64,
    /// Timestamp of the last record seen.
    pub(crate) last_ts: u64,
    /// Link of the last block seen.
    pub(crate) prev_link: Link,
    /// Recompute every frame checksum even when the chain link verifies (`verify`).
    pub(crate) always_check_crc: bool,
    /// Bytes the next read that continues the last one asks for.
    next_read: usize,
}

impl BlockCursor {
    /// A cursor at `pos` that expects `next_seq` and continues the chain from `prev_link`.
    pub(crate) fn new(
        seg: Arc<SegmentFile>,
        pos: u64,
        end: u64,
        next_seq: u64,
        last_ts: u64,
        prev_link: Link,
    ) -> BlockCursor {
        BlockCursor {
            seg,
            chunk: Arc::new(AlignedBuf::default()),
            chunk_offset: 0,
            pos,
            end,
            next_seq,
            last_ts,
            prev_link,
            always_check_crc: true,
            next_read: FIRST_READ_BYTES,
        }
    }

    fn corrupt(&self, offset: u64, seq: Option<u64>, kind: CorruptionKind) -> Error {
        Error::Corrupt(Corruption {
            segment: self.seg.path.clone(),
            offset,
            seq,
            kind,
        })
    }

    /// Makes `[offset, offset + n)` available in the chunk; returns its start index, or
    /// `None` if the file ends first.
    fn window(&mut self, offset: u64, n: usize) -> Result<Option<usize>> {
        let have_from = self.chunk_offset;
        let have_to = self.chunk_offset + self.chunk.bytes().len() as u64;
        if offset >= have_from && offset + n as u64 <= have_to {
            return Ok(Some(
                usize::try_from(offset - have_from).unwrap_or(usize::MAX),
            ));
        }
        let remaining = usize::try_from(self.end - offset).unwrap_or(usize::MAX);
        // Read ahead in a growing run while the reads follow one another; start small
        // again after a jump.
        let read = if have_from < have_to && (have_from..=have_to).contains(&offset) {
            self.next_read
        } else {
            FIRST_READ_BYTES
        };
        self.next_read = read.saturating_mul(2).min(CHUNK_BYTES);
        let want = n.max(read).min(remaining.max(n));
        let got = self.fill_chunk(offset, want)?;
        Ok((got >= n).then_some(0))
    }

    /// Reads `want` bytes from `offset` into the chunk (fewer where the file ends);
    /// returns how many were read.
    fn fill_chunk(&mut self, offset: u64, want: usize) -> Result<usize> {
        // Reuse the allocation when no record borrows the old chunk any more.
        let buf = match Arc::get_mut(&mut self.chunk) {
            Some(buf) => buf,
            None => {
                self.chunk = Arc::new(AlignedBuf::default());
                Arc::get_mut(&mut self.chunk).expect("a fresh Arc is unique")
            }
        };
        let got = buf.fill(&*self.seg.file, &self.seg.path, offset, want)?;
        self.chunk_offset = offset;
        Ok(got)
    }

    /// Makes the block header at `offset` available in the chunk for a walk that moves
    /// past blocks by their headers; `after` is the size of the block the walk just
    /// moved past. After a large block, only the header is read when the chunk does not
    /// hold it: the walk reads 64 bytes a block, not the blocks (and the read ahead
    /// starts small again at the block it stops at). After a small one, the read ahead
    /// goes on as for any read ([`BlockCursor::window`]): reading through small blocks
    /// costs less than a call for each header. Returns its start index, or `None` if
    /// the file ends first.
    fn header_window(&mut self, offset: u64, after: Option<u64>) -> Result<Option<usize>> {
        if after.is_none_or(|len| len < SKIP_READ_THROUGH_BYTES) {
            return self.window(offset, BLOCK_HEADER_LEN);
        }
        let have_from = self.chunk_offset;
        let have_to = self.chunk_offset + self.chunk.bytes().len() as u64;
        if offset >= have_from && offset + BLOCK_HEADER_LEN as u64 <= have_to {
            return Ok(Some(
                usize::try_from(offset - have_from).unwrap_or(usize::MAX),
            ));
        }
        let got = self.fill_chunk(offset, BLOCK_HEADER_LEN)?;
        self.next_read = FIRST_READ_BYTES;
        Ok((got >= BLOCK_HEADER_LEN).then_some(0))
    }

    /// Reads the block header at `offset` and makes the whole block available in the
    /// chunk, without checking its frames, seq, time or link.
    pub(crate) fn read_raw(&mut self, offset: u64) -> Result<RawBlock> {
        let no_block = |detail: String| Ok(RawBlock::NoBlock { detail });
        if offset >= self.end || self.end - offset < BLOCK_HEADER_LEN as u64 {
            return no_block("incomplete block header".to_owned());
        }
        let Some(at) = self.window(offset, BLOCK_HEADER_LEN)? else {
            return no_block("incomplete block header".to_owned());
        };
        let header = match BlockHeader::decode(&self.chunk.bytes()[at..at + BLOCK_HEADER_LEN]) {
            Ok(h) => h,
            Err(why) => return no_block(why),
        };
        let total = header.total_len() as u64;
        if total > self.end - offset {
            return no_block(format!(
                "block of {total} bytes runs past the end of the data"
            ));
        }
        let Some(at) = self.window(offset, header.total_len())? else {
            return no_block("block runs past the end of the file".to_owned());
        };
        Ok(RawBlock::Block {
            header,
            frames_at: at + BLOCK_HEADER_LEN,
        })
    }

    /// The stored bytes of a block [`BlockCursor::read_raw`] just made available (its
    /// frames, or its compressed frames): what its chain link covers.
    pub(crate) fn stored(&self, header: &BlockHeader, stored_at: usize) -> &[u8] {
        &self.chunk.bytes()[stored_at..stored_at + header.stored_len as usize]
    }

    /// The frames of a block [`BlockCursor::read_raw`] just made available: its stored
    /// bytes, or for a compressed block those bytes decompressed (within the bounds
    /// [`compress::decompress`] checks). The error names the block.
    pub(crate) fn frames(
        &self,
        offset: u64,
        header: &BlockHeader,
        stored_at: usize,
    ) -> std::result::Result<Frames, String> {
        let stored = self.stored(header, stored_at);
        if header.compressed {
            let buf = compress::decompress(header, stored).map_err(|why| {
                format!("block at byte {offset} (seq {}): {why}", header.first_seq)
            })?;
            let len = buf.bytes().len();
            Ok(Frames {
                buf: Arc::new(buf),
                at: 0,
                len,
            })
        } else {
            Ok(Frames {
                buf: Arc::clone(&self.chunk),
                at: stored_at,
                len: stored.len(),
            })
        }
    }

    /// A [`CheckedBlock`] holding the frames of a block [`BlockCursor::read_raw`] just
    /// made available.
    pub(crate) fn checked(offset: u64, header: BlockHeader, frames: Frames) -> CheckedBlock {
        CheckedBlock {
            offset,
            header,
            chunk: frames.buf,
            frames_at: frames.at,
            frames_len: frames.len,
        }
    }

    /// Reads and checks the next block. With a `chainer` the chain link is recomputed;
    /// without one (a keyed log read without its key) only checksums are checked.
    pub(crate) fn next(&mut self, chainer: Option<&Chainer>) -> Result<Step> {
        let offset = self.pos;
        if offset >= self.end {
            return Ok(Step::End);
        }
        let (header, frames_at) = match self.read_raw(offset)? {
            RawBlock::NoBlock { detail } => {
                return Ok(Step::Damaged {
                    offset,
                    detail,
                    frame: None,
                });
            }
            RawBlock::Block { header, frames_at } => (header, frames_at),
        };
        if header.first_seq != self.next_seq {
            return Err(self.corrupt(
                offset,
                Some(header.first_seq),
                CorruptionKind::SeqGap {
                    expected: self.next_seq,
                    found: header.first_seq,
                },
            ));
        }
        if header.first_ts < self.last_ts {
            return Err(self.corrupt(
                offset,
                Some(header.first_seq),
                CorruptionKind::TimestampDecrease,
            ));
        }
        // The link covers the stored bytes (a compressed block's compressed frames).
        let stored = self.stored(&header, frames_at);
        // With a chain to check, the blake3 link covers every byte the crc32c checksums
        // cover: the checksums are recomputed only when asked (verify) or when the link
        // fails, to tell a torn write (a bad checksum) from tampering (good checksums,
        // bad link) and to name the damaged frame.
        let link_ok =
            chainer.map(|c| c.link(stored, &header.chain_meta(), &self.prev_link) == header.link);
        let check_crc = self.always_check_crc || link_ok != Some(true);
        let frames = match self.frames(offset, &header, frames_at) {
            Ok(frames) => frames,
            Err(detail) => {
                return Ok(Step::Damaged {
                    offset,
                    detail,
                    frame: Some((offset, header.first_seq)),
                });
            }
        };
        if let Err((frame_offset, seq, why)) = check_frames(&header, frames.bytes(), check_crc) {
            let (at, place) = frame_place(offset, &header, frame_offset, seq);
            return Ok(Step::Damaged {
                offset,
                detail: format!("{place}: {why}"),
                frame: Some((at, seq)),
            });
        }
        if link_ok == Some(false) {
            return Err(self.corrupt(
                offset,
                Some(header.first_seq),
                CorruptionKind::ChainMismatch,
            ));
        }
        self.pos = offset + header.total_len() as u64;
        self.next_seq = header.next_seq();
        self.last_ts = header.last_ts;
        self.prev_link = header.link;
        Ok(Step::Block(BlockCursor::checked(offset, header, frames)))
    }

    /// Moves past whole blocks for which `until` holds, reading only their headers (a
    /// header's checksum is all that covers what `until` looks at). The block the cursor
    /// stops at is checked in full by the next [`BlockCursor::next`]; its chain starts
    /// from the link stored in the last skipped header. Returns the last block skipped:
    /// the caller must check it in full before it trusts that the skip was right.
    pub(crate) fn skip_before(
        &mut self,
        until: impl Fn(&BlockHeader) -> bool,
    ) -> Result<Option<HeaderOnly>> {
        let mut last: Option<HeaderOnly> = None;
        while self.pos < self.end && self.end - self.pos >= BLOCK_HEADER_LEN as u64 {
            let after = last.as_ref().map(|b| b.header.total_len() as u64);
            let Some(at) = self.header_window(self.pos, after)? else {
                break;
            };
            let Ok(header) = BlockHeader::decode(&self.chunk.bytes()[at..at + BLOCK_HEADER_LEN])
            else {
                break; // `next` reports it
            };
            if header.first_seq != self.next_seq
                || header.total_len() as u64 > self.end - self.pos
                || !until(&header)
            {
                break;
            }
            last = Some(HeaderOnly {
                seg: Arc::clone(&self.seg),
                offset: self.pos,
                header,
                prev_link: self.prev_link,
            });
            self.pos += header.total_len() as u64;
            self.next_seq = header.next_seq();
            self.last_ts = header.last_ts;
            self.prev_link = header.link;
        }
        Ok(last)
    }

    /// Walks block headers from the cursor's position to the block that ends exactly at
    /// `end_offset`, and returns it (known by its header only). `None` if no walk of
    /// intact headers lands there.
    pub(crate) fn header_ending_at(&mut self, end_offset: u64) -> Result<Option<HeaderOnly>> {
        let mut after = None;
        while self.pos < end_offset && end_offset - self.pos >= BLOCK_HEADER_LEN as u64 {
            let Some(at) = self.header_window(self.pos, after)? else {
                return Ok(None);
            };
            let Ok(header) = BlockHeader::decode(&self.chunk.bytes()[at..at + BLOCK_HEADER_LEN])
            else {
                return Ok(None);
            };
            let total = header.total_len() as u64;
            if total > end_offset - self.pos {
                return Ok(None);
            }
            if self.pos + total == end_offset {
                return Ok(Some(HeaderOnly {
                    seg: Arc::clone(&self.seg),
                    offset: self.pos,
                    header,
                    prev_link: self.prev_link,
                }));
            }
            self.pos += total;
            self.prev_link = header.link;
            after = Some(total);
        }
        Ok(None)
    }

    /// Checks in full a block of this cursor's segment known by its header, without
    /// moving the cursor: its frames, and its link recomputed from the link stored
    /// before it (without a chainer, its frame checksums). Reads it from the chunk when
    /// it is there.
    pub(crate) fn verify_block(
        &mut self,
        block: &HeaderOnly,
        chainer: Option<&Chainer>,
    ) -> Result<()> {
        let offset = block.offset;
        let seq = block.header.first_seq;
        let (header, frames_at) = match self.read_raw(offset)? {
            RawBlock::Block { header, frames_at } if header == block.header => (header, frames_at),
            RawBlock::Block { .. } => {
                return Err(self.corrupt(
                    offset,
                    Some(seq),
                    CorruptionKind::BlockHeader("changed while it was read".to_owned()),
                ));
            }
            RawBlock::NoBlock { detail } => {
                return Err(self.corrupt(offset, Some(seq), CorruptionKind::BlockHeader(detail)));
            }
        };
        let stored = self.stored(&header, frames_at);
        let link_ok =
            chainer.map(|c| c.link(stored, &header.chain_meta(), &block.prev_link) == header.link);
        let frames = self
            .frames(offset, &header, frames_at)
            .map_err(|why| self.corrupt(offset, Some(seq), CorruptionKind::Frame(why)))?;
        if let Err((frame_offset, frame_seq, why)) =
            check_frames(&header, frames.bytes(), link_ok != Some(true))
        {
            let (at, place) = frame_place(offset, &header, frame_offset, frame_seq);
            return Err(self.corrupt(
                at,
                Some(frame_seq),
                CorruptionKind::Frame(format!("{place}: {why}")),
            ));
        }
        if link_ok == Some(false) {
            return Err(self.corrupt(offset, Some(seq), CorruptionKind::ChainMismatch));
        }
        Ok(())
    }

    /// The segment this cursor reads, shared.
    pub(crate) fn segment_arc(&self) -> &Arc<SegmentFile> {
        &self.seg
    }

    /// The segment this cursor reads.
    pub(crate) fn segment(&self) -> &SegmentFile {
        &self.seg
    }

    /// Whether the damage of the block at `offset` is the trace of pages a power loss
    /// kept from the disk, with intact data from `intact` on. Unsynced data reaches the
    /// disk page by page ([`LOST_PAGE_BYTES`]), in any order; a page that did not reads
    /// as its old content, which past the synced end of an appended file is zeros: a
    /// *lost page* reads as zeros from its start (or from `offset`, the synced end, if
    /// that is inside it) to its end, wholly before `intact`. Every byte outside lost
    /// pages is as written, so the damage is a lost page's only if the damaged bytes lie
    /// in lost pages: the block header fails and lies in one; or the header holds and
    /// the block's stored bytes, compressed, overlap one; or, stored raw, each frame
    /// that fails its checksum has a well-formed header and overlaps one, until a frame
    /// header lies in one (the framing after it is lost with it), and every other frame
    /// passes. Zeros of a record's own (a payload of zeros) explain nothing in another
    /// record, nor a malformed frame header. Damage that leaves no lost page (a flipped
    /// byte, a rewritten block) is not this.
    pub(crate) fn lost_pages_explain(&mut self, offset: u64, intact: u64) -> Result<bool> {
        let limit = intact.min(self.end);
        let header = match self.read_raw(offset)? {
            RawBlock::NoBlock { .. } => {
                return self.lost_page_in(offset, offset + BLOCK_HEADER_LEN as u64, offset, limit);
            }
            RawBlock::Block { header, .. } => header,
        };
        let body = offset + BLOCK_HEADER_LEN as u64;
        let frames_end = body + u64::from(header.stored_len);
        if header.compressed {
            return self.lost_page_in(body, frames_end, offset, limit);
        }
        let mut at = body;
        let mut explained = false;
        for i in 0..header.count {
            if self.lost_page_in(at, at + FRAME_HEADER_LEN as u64, offset, limit)? {
                return Ok(true);
            }
            let n = usize::try_from(frames_end.saturating_sub(at)).unwrap_or(usize::MAX);
            let Some(start) = self.window(at, n)? else {
                return Ok(false);
            };
            let seq = header.first_seq + u64::from(i);
            let bytes = &self.chunk.bytes()[start..start + n];
            // A frame header outside lost pages is as written: malformed, it is damage
            // no lost page explains.
            let Ok((_, len)) = format::decode_frame(bytes, seq, false) else {
                return Ok(false);
            };
            let crc_ok = format::decode_frame(bytes, seq, true).is_ok();
            let frame_end = at + len as u64;
            if !crc_ok {
                if !self.lost_page_in(at, frame_end, offset, limit)? {
                    return Ok(false);
                }
                explained = true;
            }
            at = frame_end;
        }
        Ok(explained && at == frames_end)
    }

    /// Whether a lost page (see [`BlockCursor::lost_pages_explain`]: zeros from the
    /// start of a [`LOST_PAGE_BYTES`] page, or from `synced_end` inside it, to its end,
    /// the page ending by `limit`) overlaps `[from, to)`.
    fn lost_page_in(&mut self, from: u64, to: u64, synced_end: u64, limit: u64) -> Result<bool> {
        let mut page_start = from / LOST_PAGE_BYTES * LOST_PAGE_BYTES;
        while page_start < to && page_start + LOST_PAGE_BYTES <= limit {
            let zeros_from = synced_end.max(page_start);
            let page_end = page_start + LOST_PAGE_BYTES;
            let n = usize::try_from(page_end - zeros_from).unwrap_or(usize::MAX);
            let Some(start) = self.window(zeros_from, n)? else {
                return Ok(false);
            };
            if self.chunk.bytes()[start..start + n].iter().all(|&b| b == 0) {
                return Ok(true);
            }
            page_start = page_end;
        }
        Ok(false)
    }

    /// Whether an intact-looking block header (magic and checksum) starts anywhere in
    /// `(offset, end)`. Used to tell a torn tail (nothing intact follows the damage) from
    /// damage in the middle of the data.
    pub(crate) fn intact_block_after(&mut self, offset: u64) -> Result<Option<u64>> {
        let mut at = offset + format::ALIGN as u64;
        while at + BLOCK_HEADER_LEN as u64 <= self.end {
            let n = usize::try_from((self.end - at).min(CHUNK_BYTES as u64)).unwrap_or(0);
            let Some(start) = self.window(at, n)? else {
                return Ok(None);
            };
            let bytes = &self.chunk.bytes()[start..start + n];
            let mut i = 0;
            while i + BLOCK_HEADER_LEN <= n {
                if bytes[i..i + 4] == BLOCK_MAGIC
                    && BlockHeader::decode(&bytes[i..i + BLOCK_HEADER_LEN]).is_ok()
                {
                    return Ok(Some(at + i as u64));
                }
                i += format::ALIGN;
            }
            at += i as u64;
        }
        Ok(None)
    }
}

/// Checks every frame of a block: checksums, lengths, padding, timestamps and count.
/// On failure returns the frame's offset within the frames region, its seq and why.
pub(crate) fn check_frames(
    header: &BlockHeader,
    frames: &[u8],
    check_crc: bool,
) -> std::result::Result<(), (usize, u64, String)> {
    let mut at = 0usize;
    let mut prev_delta = 0u32;
    for i in 0..header.count {
        let seq = header.first_seq + u64::from(i);
        let (fh, len) =
            format::decode_frame(&frames[at..], seq, check_crc).map_err(|why| (at, seq, why))?;
        if fh.ts_delta < prev_delta || (i == 0 && fh.ts_delta != 0) {
            return Err((
                at,
                seq,
                "timestamp out of order within its block".to_owned(),
            ));
        }
        prev_delta = fh.ts_delta;
        at += len;
    }
    if at != frames.len() {
        return Err((
            at,
            header.last_seq(),
            "frames do not fill their block".to_owned(),
        ));
    }
    if header.first_ts.checked_add(u64::from(prev_delta)) != Some(header.last_ts) {
        return Err((
            at - FRAME_HEADER_LEN.min(at),
            header.last_seq(),
            "last frame's timestamp disagrees with the block header".to_owned(),
        ));
    }
    Ok(())
}

/// Whether a header's bytes start as a segment's do: the whole magic, or a prefix of it
/// followed by nothing but zeros (a header write torn inside the magic).
fn starts_like_a_segment(head: &[u8]) -> bool {
    let magic = &format::SEGMENT_MAGIC;
    if head.get(..magic.len()) == Some(&magic[..]) {
        return true;
    }
    let written = head.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
    written <= magic.len() && head[..written] == magic[..written]
}
