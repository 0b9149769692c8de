//! The knowledge base's errors. Each names the field or the record concerned; a refused
//! write commits nothing.

use std::fmt;
use std::path::PathBuf;

use crate::model::Version;

/// The knowledge base's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a knowledge-base operation failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// `evidence` is empty: every commit must cite at least one log record.
    NoEvidence,
    /// `evidence` names a seq that is not in the log before the commit.
    EvidenceNotInLog {
        /// The seq cited.
        seq: u64,
        /// The seq the commit would have taken: every cited seq must be below it.
        next_seq: u64,
    },
    /// `confidence` is not a number in `[0, 1]`.
    InvalidConfidence {
        /// The confidence given.
        confidence: f64,
    },
    /// `key` breaks the key rule (see [`crate::validate_key`]).
    InvalidKey {
        /// The key given.
        key: String,
        /// The rule it breaks.
        reason: &'static str,
    },
    /// `value` (or `conditions`, or `context`) is not valid JSON of the expected shape.
    InvalidJson {
        /// Which field: `value`, `conditions` or `context`.
        field: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// `version` names no commit.
    UnknownVersion {
        /// The version given.
        version: Version,
        /// The latest version.
        latest: Version,
    },
    /// The commit record would be larger than the log's record limit (a value too
    /// large): nothing was committed, and the next commit may succeed.
    CommitTooLarge {
        /// Bytes of the commit record.
        size_bytes: usize,
        /// The log's record limit.
        limit_bytes: usize,
    },
    /// The key has no fact.
    NotFound {
        /// The key.
        key: String,
    },
    /// A knowledge-base record in the log cannot be read as a commit, or breaks the
    /// version sequence.
    BadRecord {
        /// The record's seq.
        seq: u64,
        /// What is wrong with it.
        reason: String,
    },
    /// The fjall view failed.
    View {
        /// What the view was doing.
        op: &'static str,
        /// The view's directory.
        path: PathBuf,
        /// fjall's error.
        source: fjall::Error,
    },
    /// The commit is in the log, but the view could not apply it: the write happened.
    /// The next write (or the next open) catches the view up from the log.
    ViewBehind {
        /// The version committed.
        version: Version,
        /// The seq of its record.
        seq: u64,
        /// Why the view could not apply it.
        source: Box<Error>,
    },
    /// A read or a revert as of a point before the version from which the view's
    /// history is complete: the log was pruned, and the view started from a snapshot
    /// (see [`crate::View::history_from`]).
    BeforeHistory {
        /// The point asked for.
        at: crate::model::AsOf,
        /// The version from which the history is complete.
        history_from: Version,
    },
    /// The log was pruned, and the retained log holds commits but no snapshot to
    /// start the knowledge base from.
    NoSnapshot {
        /// The last seq pruned: the log starts after it.
        pruned_upto: u64,
    },
    /// Reading the log failed.
    Log(blackbox_log::Error),
    /// The recorder could not append the commit (it failed or is closed).
    Recorder(Box<dyn std::error::Error + Send + Sync>),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::NoEvidence => write!(
                f,
                "evidence: a commit must cite at least one log record (seq); nothing was committed"
            ),
            Error::EvidenceNotInLog { seq, next_seq } => write!(
                f,
                "evidence: seq {seq} is not in the log before this commit (the next seq is {next_seq}); nothing was committed"
            ),
            Error::InvalidConfidence { confidence } => write!(
                f,
                "confidence: {confidence} is not a number between 0 and 1; nothing was committed"
            ),
            Error::InvalidKey { key, reason } => {
                write!(
                    f,
                    "key: {} is not a valid key: {reason}",
                    blackbox_log::Shown(key)
                )
            }
            Error::InvalidJson { field, reason } => write!(f, "{field}: {reason}"),
            Error::UnknownVersion { version, latest: 0 } => write!(
                f,
                "version: {version} is not a knowledge-base version (there is no commit yet)"
            ),
            Error::UnknownVersion { version, latest } => write!(
                f,
                "version: {version} is not a knowledge-base version (versions run from 1 to {latest})"
            ),
            Error::CommitTooLarge {
                size_bytes,
                limit_bytes,
            } => write!(
                f,
                "the commit takes {size_bytes} bytes, more than the log's record limit of {limit_bytes} bytes; nothing was committed"
            ),
            Error::NotFound { key } => write!(
                f,
                "not found: the key {} has no fact",
                blackbox_log::Shown(key)
            ),
            Error::BadRecord { seq, reason } => {
                write!(f, "knowledge-base record at seq {seq}: {reason}")
            }
            Error::View {
                op,
                path,
                source: fjall::Error::Locked,
            } => write!(
                f,
                "could not {op} the knowledge-base view in {}: another open knowledge base holds it (a Recorder on the same directory not dropped yet, in this process or another)",
                path.display()
            ),
            Error::View { op, path, source } => write!(
                f,
                "could not {op} the knowledge-base view in {}: {} (it can be rebuilt from the log)",
                path.display(),
                fjall_cause(source)
            ),
            Error::ViewBehind {
                version,
                seq,
                source,
            } => write!(
                f,
                "committed as version {version} (log record at seq {seq}), but the knowledge-base view could not be updated: {source}; the next write or open catches it up from the log"
            ),
            Error::BeforeHistory { at, history_from } => {
                let at = match at {
                    crate::model::AsOf::Version(v) => format!("version {v}"),
                    crate::model::AsOf::Time(t) => format!("time {t} ns"),
                };
                write!(
                    f,
                    "{at} is before the knowledge base's history: it is complete from version {history_from} only (the log was pruned before it, and the knowledge base was rebuilt from its snapshot at version {history_from})"
                )
            }
            Error::NoSnapshot { pruned_upto } => write!(
                f,
                "the log is pruned up to seq {pruned_upto} and holds no knowledge-base snapshot: the knowledge base cannot be rebuilt from the retained log (its commits before the cut are gone)"
            ),
            Error::Log(e) => write!(f, "{e}"),
            Error::Recorder(e) => write!(f, "{e}"),
        }
    }
}

impl Error {
    /// Whether this is a view fjall finds damaged (a bad version marker, journal or
    /// table), which dropping and rebuilding it from the log repairs. A view that is
    /// locked or that the operating system refuses to read is not damaged.
    pub fn is_damaged_view(&self) -> bool {
        match self {
            Error::View {
                source:
                    fjall::Error::JournalRecovery(_)
                    | fjall::Error::InvalidVersion(_)
                    | fjall::Error::Decompress(_)
                    | fjall::Error::InvalidTrailer
                    | fjall::Error::InvalidTag(_)
                    | fjall::Error::Unrecoverable
                    | fjall::Error::Storage(_),
                ..
            } => true,
            // fjall's recovery after a kill part-way through creating a journal file can
            // meet the file it was creating ("File exists"): the view is a cache, rebuilt
            // from the log. Not when the view's own directory cannot be made (a file in
            // its place is the user's, not the view's).
            Error::View {
                op,
                source: fjall::Error::Io(e),
                ..
            } => *op != "create" && e.kind() == std::io::ErrorKind::AlreadyExists,
            _ => false,
        }
    }
}

/// fjall's error as words: its `Display` is its `Debug` dump.
fn fjall_cause(e: &fjall::Error) -> String {
    // The operating system's error, wherever fjall or its tree carries one.
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(s) = source {
        if let Some(io) = s.downcast_ref::<std::io::Error>() {
            return io.to_string();
        }
        source = s.source();
    }
    match e {
        fjall::Error::Poisoned => {
            "an earlier write to it failed, and it accepts no more".to_owned()
        }
        fjall::Error::Locked => "another process holds it".to_owned(),
        fjall::Error::KeyspaceDeleted => "one of its keyspaces was deleted".to_owned(),
        fjall::Error::InvalidVersion(_) => {
            "it was written by a fjall version this build does not read".to_owned()
        }
        fjall::Error::JournalRecovery(_) | fjall::Error::InvalidTrailer => {
            "its journal is damaged".to_owned()
        }
        fjall::Error::Decompress(_) | fjall::Error::InvalidTag(_) => {
            "its data is damaged".to_owned()
        }
        fjall::Error::Storage(_) => "its storage tree failed".to_owned(),
        _ => "it is unusable".to_owned(),
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::View { source, .. } => Some(source),
            Error::ViewBehind { source, .. } => Some(source.as_ref()),
            Error::Log(e) => Some(e),
            Error::Recorder(e) => Some(e.as_ref()),
            _ => None,
        }
    }
}

impl From<blackbox_log::Error> for Error {
    fn from(e: blackbox_log::Error) -> Error {
        Error::Log(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_view_says_what_happened_in_a_sentence() {
        // `kb put` on a full disk once printed fjall's debug dump:
        // `FjallError: Io(Os { code: 28, kind: StorageFull, message: "No space left on
        // device" })`.
        let e = Error::View {
            op: "write",
            path: PathBuf::from("/flight/kb"),
            source: fjall::Error::Io(std::io::Error::from_raw_os_error(28)),
        };
        let text = e.to_string();
        assert!(text.contains("No space left on device"), "{text}");
        for dump in ["FjallError", "Io(", "Os {", "kind:", "StorageFull"] {
            assert!(!text.contains(dump), "{dump:?} in {text}");
        }
        let e = Error::View {
            op: "open",
            path: PathBuf::from("/flight/kb"),
            source: fjall::Error::Poisoned,
        };
        let text = e.to_string();
        assert!(
            !text.contains("FjallError") && !text.contains("Poisoned"),
            "{text}"
        );
    }

    #[test]
    fn a_file_fjall_meets_again_while_opening_is_a_damaged_view_and_a_full_disk_is_not() {
        let view = |op, kind: std::io::ErrorKind| Error::View {
            op,
            path: PathBuf::from("/flight/kb"),
            source: fjall::Error::Io(std::io::Error::from(kind)),
        };
        assert!(view("open", std::io::ErrorKind::AlreadyExists).is_damaged_view());
        assert!(view("open a keyspace of", std::io::ErrorKind::AlreadyExists).is_damaged_view());
        // The view's directory cannot be made: something of the user's is in its place.
        assert!(!view("create", std::io::ErrorKind::AlreadyExists).is_damaged_view());
        assert!(!view("open", std::io::ErrorKind::StorageFull).is_damaged_view());
        assert!(!view("open", std::io::ErrorKind::PermissionDenied).is_damaged_view());
    }
}
