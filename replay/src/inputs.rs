//! What the command reads besides records: a log directory (checked, never created) and
//! a chain key file.

use std::io::Read;
use std::path::Path;

use blackbox::ChainKey;
use blackbox::log::SegmentEntry;

use crate::error::{Error, Result};

/// Checks that `dir` holds a log and lists its segments, without creating or changing
/// anything.
///
/// # Errors
///
/// [`Error::NoSuchDir`]; [`blackbox_log::Error::NotALog`] (as [`Error::Log`]) for a
/// file, a directory holding foreign files, or a directory without any segment.
pub fn open_log_dir(dir: &Path) -> Result<Vec<SegmentEntry>> {
    // A log shipped to object storage, read where it lies (the program installed the
    // reader of such URLs).
    if blackbox_log::source::is_url(dir) {
        return Ok(blackbox_log::LogReader::open(dir)?.segments()?);
    }
    match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => {
            return Err(blackbox_log::Error::NotALog {
                dir: dir.to_owned(),
                reason: "it is not a directory".to_owned(),
            }
            .into());
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(Error::NoSuchDir {
                dir: dir.to_owned(),
            });
        }
        Err(e) => {
            return Err(Error::Io {
                op: "inspect log directory",
                path: dir.to_owned(),
                source: e,
            });
        }
    }
    if is_shipped_dir(dir) {
        return Err(blackbox_log::Error::NotALog {
            dir: dir.to_owned(),
            reason: format!(
                "it holds no segment file but a shipping manifest: it is where a log was shipped (`blackbox ship --to`), which `verify --dir` takes as it is and the other readers as file://{}",
                std::path::absolute(dir).unwrap_or_else(|_| dir.to_owned()).display()
            ),
        }
        .into());
    }
    let segments = blackbox_log::list_segments(dir)?;
    if segments.is_empty() {
        return Err(blackbox_log::Error::NotALog {
            dir: dir.to_owned(),
            reason: "it holds no segment file".to_owned(),
        }
        .into());
    }
    Ok(segments)
}

/// Whether `dir` is a directory a log was shipped to: it holds a shipping manifest
/// (`manifest.json`) and no segment file of its own.
pub fn is_shipped_dir(dir: &Path) -> bool {
    if !dir.join("manifest.json").is_file() {
        return false;
    }
    match blackbox_log::list_segments(dir) {
        Ok(segments) => segments.is_empty(),
        // The manifest is a file no log directory holds: without segments, refused.
        Err(blackbox_log::Error::NotALog { .. }) => true,
        Err(_) => false,
    }
}

/// The most a key file is read of: a key with generous whitespace around it.
const KEY_FILE_BYTES_MAX: u64 = 4096;

/// Reads a chain key file: exactly 32 raw bytes, or 64 hex digits (surrounding
/// whitespace, such as a final newline, is ignored). At most 4096 bytes are read.
///
/// # Errors
///
/// [`Error::InvalidKey`] when the file cannot be read or holds anything else.
pub fn read_key_file(path: &Path) -> Result<ChainKey> {
    let invalid = |reason: String| Error::InvalidKey {
        path: path.to_owned(),
        reason,
    };
    // Read through a bound, not by the size the file claims: a device or a FIFO (like
    // /dev/zero) has none, and is read only as far as the bound.
    let file = std::fs::File::open(path).map_err(|e| invalid(format!("cannot read it: {e}")))?;
    let mut bytes = Vec::new();
    file.take(KEY_FILE_BYTES_MAX + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| invalid(format!("cannot read it: {e}")))?;
    if bytes.len() as u64 > KEY_FILE_BYTES_MAX {
        return Err(invalid(format!(
            "it holds more than {KEY_FILE_BYTES_MAX} bytes; a key file holds 32 raw bytes or 64 hex digits"
        )));
    }
    if let Ok(raw) = <[u8; 32]>::try_from(bytes.as_slice()) {
        return Ok(ChainKey::new(raw));
    }
    let text = std::str::from_utf8(&bytes).map(str::trim).unwrap_or("");
    match blackbox_log::link_from_hex(text) {
        Some(key) => Ok(ChainKey::new(key)),
        None => Err(invalid(format!(
            "it holds {} bytes; a key file holds 32 raw bytes or 64 hex digits",
            bytes.len()
        ))),
    }
}
