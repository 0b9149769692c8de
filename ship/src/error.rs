//! The errors of shipping and of remote verification: each one sentence that names the
//! segment, the object or the URL it is about.

use std::fmt;
use std::path::PathBuf;

/// What went wrong, in one sentence naming what and where.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The URL is not one this crate ships to.
    Url {
        /// The URL as given.
        url: String,
        /// Why it is refused.
        why: String,
    },
    /// The local log could not be read.
    Log {
        /// What was being done.
        what: String,
        /// The log's error.
        source: blackbox_log::Error,
    },
    /// A local file could not be read or written.
    Io {
        /// What was being done.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A request to the object store failed.
    Store {
        /// What was being done, naming the object.
        what: String,
        /// The store's error.
        source: Box<object_store::Error>,
        /// What the user may be missing (credentials), when something suggests it.
        hint: Option<&'static str>,
    },
    /// The manifest is not a shipping manifest this version reads, or contradicts itself.
    Manifest {
        /// The manifest's URL.
        url: String,
        /// What is wrong with it.
        why: String,
    },
    /// The manifest at the URL records another log than the one in the local directory.
    ForeignLog {
        /// The manifest's URL.
        url: String,
        /// How the two differ.
        why: String,
    },
    /// Another shipper changed the manifest during this pass (a conditional put failed).
    Conflict {
        /// The manifest's URL.
        url: String,
    },
    /// A shipped object does not hold what the manifest or the local file says it holds.
    Mismatch {
        /// The segment's file name.
        segment: String,
        /// What differs.
        why: String,
    },
    /// An object with other bytes is already where an upload would put it, and is
    /// never replaced.
    Exists {
        /// The object's URL.
        url: String,
    },
    /// A local file to put in a lake is not what was listed.
    LakeFile {
        /// The file.
        path: PathBuf,
        /// What differs.
        why: String,
    },
    /// An upload to a lake failed after others had been made.
    Partial {
        /// Objects uploaded before the failure.
        done: usize,
        /// Objects the run had to upload.
        total: usize,
        /// The failure.
        source: Box<Error>,
    },
    /// The shipped log does not verify.
    Verify {
        /// Where the log was shipped.
        url: String,
        /// The log's own verification error, the segment named by its object.
        why: String,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Url { url, why } => write!(f, "cannot use {url}: {why}"),
            Error::Log { what, source } => write!(f, "{what}: {source}"),
            Error::Io { what, path, source } => {
                write!(f, "{what} {}: {source}", path.display())
            }
            Error::Store { what, source, hint } => {
                write!(f, "{what}: {}", one_line(source))?;
                if let Some(hint) = hint {
                    write!(f, "; {hint}")?;
                }
                Ok(())
            }
            Error::Manifest { url, why } => write!(f, "manifest {url} is not usable: {why}"),
            Error::ForeignLog { url, why } => {
                write!(f, "manifest {url} belongs to another log: {why}")
            }
            Error::Conflict { url } => write!(
                f,
                "manifest {url} was changed by another shipper during this pass; nothing of this pass was lost: run it again"
            ),
            Error::Mismatch { segment, why } => write!(f, "segment {segment}: {why}"),
            Error::Exists { url } => write!(
                f,
                "{url} already exists with other bytes, and an object in the lake is never replaced"
            ),
            Error::LakeFile { path, why } => write!(f, "{}: {why}", path.display()),
            Error::Partial {
                done,
                total,
                source,
            } => write!(
                f,
                "{source}; {done} of the {total} objects to upload were uploaded before it, and not the manifest: run the same command again to finish (objects already there with the same bytes are kept)"
            ),
            Error::Verify { url, why } => write!(f, "log shipped to {url} does not verify: {why}"),
        }
    }
}

/// The store's error on one line (its messages may carry a response body).
fn one_line(e: &object_store::Error) -> String {
    e.to_string()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Log { source, .. } => Some(source),
            Error::Io { source, .. } => Some(source),
            Error::Store { source, .. } => Some(source.as_ref()),
            Error::Partial { source, .. } => Some(source.as_ref()),
            _ => None,
        }
    }
}

/// This crate's result.
pub type Result<T, E = Error> = std::result::Result<T, E>;
