//! Where a reader's segments come from: a log directory (the default), or a store a
//! program plugs in for URLs (object storage, through `blackbox-ship`).
//!
//! A reader reaches segment bytes only through [`SegmentRead`] (a length and reads at
//! an offset), and finds segments through [`SegmentSource`]. The log's directory needs
//! neither: its segments are files. A `--dir` that is a URL (`s3://…`) is opened by the
//! [`UrlOpener`] the program installed with [`set_url_opener`]; the log crate itself
//! speaks no network protocol.

use std::fmt;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::{Arc, OnceLock};

use crate::error::{Error, Result};
use crate::segment::SegmentEntry;
use crate::structure::SegmentSummary;

/// A segment's bytes: its length, and reads at an offset.
pub trait SegmentRead: Send + Sync + fmt::Debug {
    /// The segment's length in bytes.
    ///
    /// # Errors
    ///
    /// The store's error.
    fn byte_len(&self) -> io::Result<u64>;

    /// Reads up to `buf.len()` bytes at `offset`; fewer only at the end.
    ///
    /// # Errors
    ///
    /// The store's error.
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize>;

    /// Reads exactly `buf.len()` bytes at `offset`.
    ///
    /// # Errors
    ///
    /// [`io::ErrorKind::UnexpectedEof`] when the segment ends first; the store's error.
    fn read_exact_at(&self, mut buf: &mut [u8], mut offset: u64) -> io::Result<()> {
        while !buf.is_empty() {
            match self.read_at(buf, offset) {
                Ok(0) => {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the segment ends before the bytes asked for",
                    ));
                }
                Ok(n) => {
                    buf = &mut buf[n..];
                    offset += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

impl SegmentRead for File {
    fn byte_len(&self) -> io::Result<u64> {
        Ok(self.metadata()?.len())
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        FileExt::read_at(self, buf, offset)
    }

    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        FileExt::read_exact_at(self, buf, offset)
    }
}

/// A log's segments somewhere other than a directory.
pub trait SegmentSource: Send + Sync + fmt::Debug {
    /// The segments, sorted by first seq, each with a path that names it in messages
    /// (the URL of its object).
    ///
    /// # Errors
    ///
    /// The store's error.
    fn list(&self) -> Result<Vec<(u64, std::path::PathBuf)>>;

    /// Opens the segment `entry` names.
    ///
    /// # Errors
    ///
    /// The store's error.
    fn open(&self, entry: &SegmentEntry) -> Result<Box<dyn SegmentRead>>;

    /// What the source knows of every segment's header and footer without reading
    /// them (a shipped log's manifest records it), in the order of [`list`]: a reader
    /// takes the log's structure from it and finds a time's segment by it, reading no
    /// segment but the ones a query touches. `None`: read every header and footer.
    ///
    /// [`list`]: SegmentSource::list
    fn summaries(&self) -> Option<Vec<SegmentSummary>> {
        None
    }
}

/// Opens the log at a URL: `None` when the URL is not one it reads.
pub type UrlOpener = fn(&str) -> Option<Result<Arc<dyn SegmentSource>>>;

static URL_OPENER: OnceLock<UrlOpener> = OnceLock::new();

/// Installs the opener of logs given by URL (once per process); returns whether this
/// call installed it.
pub fn set_url_opener(opener: UrlOpener) -> bool {
    URL_OPENER.set(opener).is_ok()
}

/// Whether `dir` is a URL (`scheme://…`) rather than a directory.
pub fn is_url(dir: &Path) -> bool {
    dir.to_str().is_some_and(|s| {
        s.split_once("://").is_some_and(|(scheme, _)| {
            !scheme.is_empty()
                && scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '+' || c == '-' || c == '.')
        })
    })
}

/// The source of the log at the URL `dir`.
pub(crate) fn open_url(dir: &Path) -> Result<Arc<dyn SegmentSource>> {
    let url = dir.to_str().unwrap_or_default();
    let refused = |why: &str| Error::Remote {
        url: url.to_owned(),
        why: why.to_owned(),
    };
    let Some(opener) = URL_OPENER.get() else {
        return Err(refused("this program reads no log by URL"));
    };
    opener(url).unwrap_or_else(|| {
        Err(refused(
            "no reader of this program takes such a URL (s3://BUCKET/PREFIX, file:///PATH)",
        ))
    })
}

/// The segments of `source`, as entries that open through it.
pub(crate) fn list_source(source: &Arc<dyn SegmentSource>) -> Result<Vec<SegmentEntry>> {
    Ok(source
        .list()?
        .into_iter()
        .map(|(first_seq, path)| SegmentEntry {
            first_seq,
            path,
            source: Some(Arc::clone(source)),
        })
        .collect())
}
