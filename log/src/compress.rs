//! Per-block compression: the writer stores a block's frames zstd-compressed when that
//! saves enough, and readers decompress them within bounds checked first.
//!
//! A compressed block's stored bytes (after its 72-byte header, whose bytes 4..8 carry
//! [`BLOCK_COMPRESSED`]):
//!
//! ```text
//!  0..4   frames length once decompressed (u32): a multiple of 8, at least 16 per
//!         frame, at most MAX_COMPRESSED_FRAMES_BYTES
//!  4..8   zstd length: bytes of the zstd frame that follows (u32)
//!  8..12  crc32c of bytes 0..8 and the zstd frame
//! 12..    one zstd frame whose declared content size is the frames length,
//!         then zeros up to the stored length (12 + zstd length, rounded up to 8)
//! ```
//!
//! The chain link covers the stored bytes, as for a raw block (`docs/FORMAT.md`, "The
//! hash chain"), and the frames' checksums are checked after decompression as for any
//! block. The head's checksum covers every stored byte but the padding (which must be
//! zero) for a reader without the chain (a keyed log read without its key): a changed
//! byte of a zstd frame may decompress to the same frames, which their checksums then
//! cannot show.

use std::cell::RefCell;
use std::fmt;

use zstd::zstd_safe::{self, CCtx, DCtx};

use crate::format::{
    ALIGN, BlockHeader, COMPRESSED_HEAD_LEN, FRAME_HEADER_LEN, MAX_COMPRESSED_FRAMES_BYTES,
    align_up, u32_at,
};
use crate::segment::AlignedBuf;

/// Whether and how the writer compresses blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Compression {
    /// Every block stored raw (the default).
    #[default]
    Off,
    /// Each block compressed with zstd at this level (1 to 22; negative levels are
    /// faster and compress less), and stored compressed when that saves at least an
    /// eighth of its bytes.
    Zstd {
        /// The zstd compression level.
        level: i32,
    },
}

impl Compression {
    /// The zstd levels accepted: from zstd's fastest (negative) to 22.
    pub fn zstd_levels() -> std::ops::RangeInclusive<i32> {
        zstd_safe::min_c_level()..=zstd_safe::max_c_level()
    }

    /// Checks the level: a zstd level must be one zstd has, and not 0.
    ///
    /// # Errors
    ///
    /// What is wrong, in one sentence.
    pub fn validate(&self) -> Result<(), String> {
        match *self {
            Compression::Off => Ok(()),
            Compression::Zstd { level } => {
                let levels = Compression::zstd_levels();
                if level == 0 || !levels.contains(&level) {
                    Err(format!(
                        "zstd level {level} must be between {} and {}, and not 0",
                        levels.start(),
                        levels.end()
                    ))
                } else {
                    Ok(())
                }
            }
        }
    }
}

/// The writer's compressor: a zstd context kept across blocks and a scratch buffer.
pub(crate) struct Compressor {
    cctx: CCtx<'static>,
    level: i32,
    /// The zstd frame of the last block compressed.
    zstd: Vec<u8>,
    /// The stored bytes of the last block compressed.
    stored: Vec<u8>,
}

impl fmt::Debug for Compressor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Compressor")
            .field("level", &self.level)
            .finish_non_exhaustive()
    }
}

impl Compressor {
    /// A compressor for `compression`, or `None` when it is off.
    pub(crate) fn new(compression: Compression) -> Option<Compressor> {
        match compression {
            Compression::Off => None,
            Compression::Zstd { level } => Some(Compressor {
                cctx: CCtx::create(),
                level,
                zstd: Vec::new(),
                stored: Vec::new(),
            }),
        }
    }

    /// Compresses a block's `frames`. Returns the stored bytes of the compressed block
    /// when they are at most seven eighths of the frames' length; `None` when the block
    /// is better stored raw (it does not compress enough, or it is larger than a
    /// compressed block may be).
    pub(crate) fn compress(&mut self, frames: &[u8]) -> Option<&[u8]> {
        let n = frames.len();
        if n > MAX_COMPRESSED_FRAMES_BYTES {
            return None;
        }
        let worth = n - n / 8;
        self.zstd.clear();
        self.zstd.reserve(zstd_safe::compress_bound(n));
        // A one-shot compression declares the content size in the frame header, which
        // the reader checks against the frames length before it decompresses.
        let zlen = self
            .cctx
            .compress(&mut self.zstd, frames, self.level)
            .ok()?;
        let stored_len = align_up(COMPRESSED_HEAD_LEN + zlen);
        if stored_len > worth {
            return None;
        }
        self.stored.clear();
        self.stored
            .extend_from_slice(&u32::try_from(n).ok()?.to_le_bytes());
        self.stored
            .extend_from_slice(&u32::try_from(zlen).ok()?.to_le_bytes());
        let crc = crc32c::crc32c_append(crc32c::crc32c(&self.stored), &self.zstd[..zlen]);
        self.stored.extend_from_slice(&crc.to_le_bytes());
        self.stored.extend_from_slice(&self.zstd[..zlen]);
        self.stored.resize(stored_len, 0);
        Some(&self.stored)
    }
}

thread_local! {
    /// One decompression context per thread, reused across blocks.
    static DCTX: RefCell<Option<DCtx<'static>>> = const { RefCell::new(None) };
}

/// Decompresses the stored bytes of a compressed block into a buffer of its own.
///
/// Every length is checked before anything is allocated: the frames length against
/// the format's limit ([`MAX_COMPRESSED_FRAMES_BYTES`]), the block's frame count and
/// alignment, the zstd length against the stored bytes, and the zstd frame's declared
/// content size against the frames length, and that the zstd bytes are exactly one
/// frame. The buffer is then exactly the frames length, and zstd refuses to write past
/// it: data that expands further is an error, as is data that fills less of it.
pub(crate) fn decompress(header: &BlockHeader, stored: &[u8]) -> Result<AlignedBuf, String> {
    debug_assert!(header.compressed);
    if stored.len() < COMPRESSED_HEAD_LEN {
        return Err(format!(
            "compressed block of {} bytes is shorter than its {COMPRESSED_HEAD_LEN}-byte head",
            stored.len()
        ));
    }
    let frames_len = u32_at(stored, 0) as usize;
    let zlen = u32_at(stored, 4) as usize;
    if zlen == 0 || align_up(COMPRESSED_HEAD_LEN + zlen) != stored.len() {
        return Err(format!(
            "compressed block claims a zstd frame of {zlen} bytes in {} stored bytes",
            stored.len()
        ));
    }
    let (z, pad) = stored[COMPRESSED_HEAD_LEN..].split_at(zlen);
    if u32_at(stored, 8) != crc32c::crc32c_append(crc32c::crc32c(&stored[0..8]), z) {
        return Err("compressed block's checksum mismatch".to_owned());
    }
    if pad.iter().any(|&b| b != 0) {
        return Err("compressed block's padding is not zero".to_owned());
    }
    if frames_len > MAX_COMPRESSED_FRAMES_BYTES {
        return Err(format!(
            "compressed block claims {frames_len} bytes of frames, more than the format's limit of {MAX_COMPRESSED_FRAMES_BYTES}"
        ));
    }
    let count = header.count as usize;
    if !frames_len.is_multiple_of(ALIGN) || frames_len < count * FRAME_HEADER_LEN {
        return Err(format!(
            "compressed block claims {frames_len} bytes of frames, which cannot hold its {count} frames"
        ));
    }
    match zstd_safe::get_frame_content_size(z) {
        Ok(Some(n)) if n == frames_len as u64 => {}
        Ok(Some(n)) => {
            return Err(format!(
                "compressed block's zstd frame declares {n} bytes, its head {frames_len}"
            ));
        }
        Ok(None) => {
            return Err("compressed block's zstd frame declares no content size".to_owned());
        }
        Err(_) => return Err("compressed block's zstd frame header is not valid".to_owned()),
    }
    // One frame fills the zstd bytes: nothing may follow it (decompression would pass
    // over a skippable frame, so bytes no check reads could hide there).
    match zstd_safe::find_frame_compressed_size(z) {
        Ok(n) if n == zlen => {}
        _ => {
            return Err(format!(
                "compressed block's zstd bytes are not one zstd frame of {zlen} bytes"
            ));
        }
    }
    let mut buf = AlignedBuf::zeroed(frames_len);
    let out = buf.bytes_mut();
    let result = DCTX.with(|cell| {
        let mut slot = cell.borrow_mut();
        let dctx = slot.get_or_insert_with(DCtx::create);
        dctx.decompress(out, z)
    });
    match result {
        Ok(n) if n == frames_len => Ok(buf),
        Ok(n) => Err(format!(
            "compressed block decompresses to {n} bytes, not the {frames_len} it declares"
        )),
        Err(code) => Err(format!(
            "compressed block does not decompress to the {frames_len} bytes it declares ({})",
            zstd_safe::get_error_name(code)
        )),
    }
}
