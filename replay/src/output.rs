//! Files the exporter writes: where they may go, and how they appear (whole or not at
//! all).
//!
//! An output is refused when it lies inside a log directory (any log, the one being read
//! included: its segments and its lock file must never be overwritten), or when
//! something other than a regular file already has its name (a device node, a FIFO, a
//! directory, a symlink). Paths are resolved first, so `..` and symlinked directories
//! do not get around the check. A file is written under a temporary name beside its
//! final one and renamed into place once complete and synced, so a failed or
//! interrupted export never leaves half a file under the final name.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// Checks that `path` may be written as an export output (see the module
/// documentation), and returns the directory it will be written in, resolved.
///
/// # Errors
///
/// [`Error::UnsafeOutput`] for an output inside a log directory or a name taken by
/// something other than a regular file; [`Error::Io`] when its directory cannot be
/// resolved.
pub fn check_output(path: &Path) -> Result<PathBuf> {
    let refuse = |reason: String| Error::UnsafeOutput {
        path: path.to_owned(),
        reason,
    };
    let Some(name) = path.file_name() else {
        return Err(refuse("it names no file".to_owned()));
    };
    let dir = safe_parent(path)?;
    match std::fs::symlink_metadata(dir.join(name)) {
        Ok(meta) if meta.file_type().is_file() => Ok(dir),
        Ok(meta) => Err(refuse(format!(
            "it is {}, not a regular file",
            describe_type(&meta.file_type())
        ))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(dir),
        Err(source) => Err(Error::Io {
            op: "inspect",
            path: path.to_owned(),
            source,
        }),
    }
}

/// Checks that `path` may be written as an export output directory (a partitioned
/// export): not inside a log directory, and either absent or an empty directory; returns
/// the directory it will be written in, resolved.
///
/// # Errors
///
/// As [`check_output`], and [`Error::UnsafeOutput`] for a name taken by anything but
/// an empty directory.
pub fn check_output_dir(path: &Path) -> Result<PathBuf> {
    let refuse = |reason: String| Error::UnsafeOutput {
        path: path.to_owned(),
        reason,
    };
    let Some(name) = path.file_name() else {
        return Err(refuse("it names no directory".to_owned()));
    };
    let dir = safe_parent(path)?;
    let target = dir.join(name);
    match std::fs::symlink_metadata(&target) {
        Ok(meta) if meta.file_type().is_dir() => {
            let mut entries = std::fs::read_dir(&target).map_err(|source| Error::Io {
                op: "list",
                path: path.to_owned(),
                source,
            })?;
            if entries.next().is_some() {
                Err(refuse(
                    "it is a directory that is not empty: remove it or name another".to_owned(),
                ))
            } else {
                Ok(dir)
            }
        }
        Ok(meta) => Err(refuse(format!(
            "it is {}, not a directory",
            describe_type(&meta.file_type())
        ))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(dir),
        Err(source) => Err(Error::Io {
            op: "inspect",
            path: path.to_owned(),
            source,
        }),
    }
}

/// The directory `path` lies in, resolved, if no log directory holds it.
fn safe_parent(path: &Path) -> Result<PathBuf> {
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let dir = parent.canonicalize().map_err(|source| Error::Io {
        op: "resolve the directory of",
        path: path.to_owned(),
        source,
    })?;
    for ancestor in dir.ancestors() {
        if is_log_dir(ancestor) {
            return Err(Error::UnsafeOutput {
                path: path.to_owned(),
                reason: format!(
                    "it is inside the log directory {}, whose files only the recorder writes",
                    ancestor.display()
                ),
            });
        }
    }
    Ok(dir)
}

/// Whether `dir` holds a log: a segment file or the writer's lock file. Unreadable
/// directories count as no log (the write into them fails on its own).
fn is_log_dir(dir: &Path) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    entries.flatten().any(|e| {
        e.file_name().to_str().is_some_and(|n| {
            n == blackbox_log::LOCK_FILE_NAME
                || blackbox_log::format::parse_segment_file_name(n).is_some()
        })
    })
}

fn describe_type(t: &std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if t.is_dir() {
        "a directory"
    } else if t.is_symlink() {
        "a symbolic link"
    } else if t.is_block_device() || t.is_char_device() {
        "a device"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    }
}

/// A file being written under a temporary name beside its final one (mode 0600). It
/// appears under its final name only through [`AtomicFile::commit`]; dropped before
/// that, it is removed.
#[derive(Debug)]
pub struct AtomicFile {
    path: PathBuf,
    temp: tempfile::NamedTempFile,
    writer: Option<BufWriter<File>>,
}

impl AtomicFile {
    /// Checks `path` ([`check_output`]) and creates its temporary file.
    ///
    /// # Errors
    ///
    /// As [`check_output`]; [`Error::Io`] when the temporary file cannot be created.
    pub fn create(path: &Path) -> Result<AtomicFile> {
        let dir = check_output(path)?;
        let mut prefix = std::ffi::OsString::from(".");
        prefix.push(path.file_name().unwrap_or_default());
        prefix.push(".tmp-");
        let temp = tempfile::Builder::new()
            .prefix(&prefix)
            .tempfile_in(&dir)
            .map_err(|source| Error::Io {
                op: "create a temporary file beside",
                path: path.to_owned(),
                source,
            })?;
        let writer = temp.as_file().try_clone().map_err(|source| Error::Io {
            op: "open",
            path: temp.path().to_owned(),
            source,
        })?;
        Ok(AtomicFile {
            path: dir.join(path.file_name().unwrap_or_default()),
            temp,
            writer: Some(BufWriter::new(writer)),
        })
    }

    /// The final path, resolved.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The writer of the temporary file.
    pub fn writer(&mut self) -> &mut dyn Write {
        match &mut self.writer {
            Some(w) => w,
            // `writer` is only taken by `commit`, which consumes `self`.
            None => unreachable!("an AtomicFile is written only before it is committed"),
        }
    }

    /// Flushes and syncs the temporary file, checks the final name again (something
    /// may have taken it meanwhile), renames it into place and syncs the directory.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] on a failed write, sync or rename; [`Error::UnsafeOutput`] when the
    /// final name is no longer safe to replace.
    pub fn commit(mut self) -> Result<PathBuf> {
        let io = |op: &'static str, path: &Path| {
            let path = path.to_owned();
            move |source| Error::Io { op, path, source }
        };
        if let Some(w) = self.writer.take() {
            let file = w
                .into_inner()
                .map_err(|e| e.into_error())
                .map_err(io("write", &self.path))?;
            file.sync_all().map_err(io("sync", &self.path))?;
        }
        check_output(&self.path)?;
        // IMPORTANT: the data is durable under its temporary name before the rename
        // makes it visible, and the directory is synced after, so the final name never
        // shows a partial file, even after a power cut.
        self.temp
            .persist(&self.path)
            .map_err(|e| e.error)
            .map_err(io("rename into place", &self.path))?;
        if let Some(dir) = self.path.parent() {
            File::open(dir)
                .and_then(|d| d.sync_all())
                .map_err(io("sync the directory of", &self.path))?;
        }
        Ok(self.path)
    }
}

impl Write for AtomicFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.writer().write(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.writer().flush()
    }
}

#[cfg(test)]
#[expect(clippy::unwrap_used, reason = "tests fail loudly on any error")]
mod tests {
    use super::*;

    #[test]
    fn a_directory_with_a_segment_or_a_lock_is_a_log() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        assert!(!is_log_dir(dir));
        std::fs::write(dir.join("notes.txt"), "x").unwrap();
        assert!(!is_log_dir(dir));
        std::fs::write(dir.join("LOCK"), "").unwrap();
        assert!(is_log_dir(dir));
        let other = dir.join("other");
        std::fs::create_dir(&other).unwrap();
        assert!(!is_log_dir(&other));
        std::fs::write(other.join(blackbox_log::format::segment_file_name(0)), "").unwrap();
        assert!(is_log_dir(&other));
    }
}
