//! Errors of replay.

use std::fmt;
use std::path::PathBuf;

use blackbox_log::Shown;

/// A specialized `Result` for replay.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong while reading, decoding or exporting a log, or parsing
/// the arguments that select what to read.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The log directory does not exist (readers never create one).
    NoSuchDir {
        /// The directory that was named.
        dir: PathBuf,
    },
    /// The log layer failed: not a log, damage (with segment, offset and seq), a key
    /// problem, a digest mismatch, I/O.
    Log(blackbox_log::Error),
    /// A record read intact from the log cannot be decoded as the recorder's record of
    /// its type.
    Decode {
        /// The record's seq.
        seq: u64,
        /// The record's type tag.
        record_type: u16,
        /// What is wrong with it.
        reason: String,
    },
    /// A time is neither RFC 3339 nor an integer count of nanoseconds since the epoch.
    InvalidTime {
        /// The text given.
        input: String,
        /// Why it was refused.
        reason: String,
    },
    /// A duration such as `30s` does not parse.
    InvalidDuration {
        /// The text given.
        input: String,
        /// Why it was refused.
        reason: String,
    },
    /// A size such as `64MiB` does not parse.
    InvalidSize {
        /// The text given.
        input: String,
        /// Why it was refused.
        reason: String,
    },
    /// A kind glob does not compile.
    InvalidGlob {
        /// The glob given.
        glob: String,
        /// Why it was refused.
        reason: String,
    },
    /// A record type name is not one of the recorder's.
    InvalidRecordType {
        /// The name given.
        input: String,
    },
    /// A chain key file cannot be read or does not hold a key.
    InvalidKey {
        /// The key file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// The knowledge base failed (rebuilding its view from the log, or a read).
    Kb(blackbox::kb::Error),
    /// An export output is refused: it lies inside a log directory, or its name is taken
    /// by something other than a regular file.
    UnsafeOutput {
        /// The output named.
        path: PathBuf,
        /// Why it is refused.
        reason: String,
    },
    /// A file given as an export manifest cannot be read as one.
    Manifest {
        /// The manifest file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// An exported file is not what its manifest says.
    ExportChanged {
        /// The data file.
        file: PathBuf,
        /// The first difference found.
        what: String,
    },
    /// An export cannot write what it read: a row its format cannot hold, or its
    /// encoder failed.
    Unexportable {
        /// The output being written.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// A point in time before the first one the retained log can rebuild the state at:
    /// the log was pruned, and the segments that told the state then are gone.
    PrunedBefore {
        /// The time asked for, ns since the epoch.
        at_ns: u64,
        /// The earliest time the retained log answers for: its first record's stamp.
        earliest_ns: u64,
        /// The last seq pruned.
        pruned_up_to_seq: u64,
    },
    /// A file read as MCAP is not one, or is damaged: truncated, a CRC that does not
    /// match, a record that does not parse.
    Mcap {
        /// The file.
        path: PathBuf,
        /// The byte offset in the file up to which it was read when the fault was found.
        offset: u64,
        /// What is wrong.
        reason: String,
    },
    /// The recorder failed (an import recording into a log).
    Recorder(blackbox::Error),
    /// An operating-system call failed outside the log (an export file, a key file).
    Io {
        /// What was being done, e.g. `"write export file"`.
        op: &'static str,
        /// The file concerned.
        path: PathBuf,
        /// The error the operating system returned.
        source: std::io::Error,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::NoSuchDir { dir } => {
                write!(f, "log directory {} does not exist", dir.display())
            }
            Error::Log(e) => e.fmt(f),
            Error::Decode {
                seq,
                record_type,
                reason,
            } => {
                let tag = blackbox::log::RecordType(*record_type);
                match crate::decode::RecordType::from_tag(tag) {
                    Some(t) => write!(
                        f,
                        "{} record at seq {seq} (type {record_type}) cannot be decoded: {reason}",
                        t.name()
                    ),
                    None => write!(
                        f,
                        "record at seq {seq} (type {record_type}) cannot be decoded: {reason}"
                    ),
                }
            }
            Error::InvalidTime { input, reason } => {
                write!(f, "invalid time {}: {reason}", Shown(input))
            }
            Error::InvalidDuration { input, reason } => {
                write!(f, "invalid duration {}: {reason}", Shown(input))
            }
            Error::InvalidSize { input, reason } => {
                write!(f, "invalid size {}: {reason}", Shown(input))
            }
            // The policy's message names the glob already.
            Error::InvalidGlob { reason, .. } => f.write_str(reason),
            Error::InvalidRecordType { input } => write!(
                f,
                "unknown record type {}: expected event, summary, accounting, checkpoint, working, kb, incident, dictionary or recovery",
                Shown(input)
            ),
            Error::InvalidKey { path, reason } => {
                write!(f, "invalid key file {}: {reason}", path.display())
            }
            Error::Kb(e) => e.fmt(f),
            Error::Manifest { path, reason } => {
                write!(
                    f,
                    "{} is not a readable export manifest: {reason}",
                    path.display()
                )
            }
            Error::ExportChanged { file, what } => write!(
                f,
                "{} is not the file its manifest describes: {what}",
                file.display()
            ),
            Error::Unexportable { path, reason } => {
                write!(f, "cannot export to {}: {reason}", path.display())
            }
            Error::UnsafeOutput { path, reason } => {
                write!(f, "refusing to write {}: {reason}", path.display())
            }
            Error::PrunedBefore {
                at_ns,
                earliest_ns,
                pruned_up_to_seq,
            } => write!(
                f,
                "the log was pruned up to seq {pruned_up_to_seq}: it can tell the state at \
                 {} or later, not at {}",
                crate::format_time(*earliest_ns),
                crate::format_time(*at_ns)
            ),
            Error::Mcap {
                path,
                offset,
                reason,
            } => write!(
                f,
                "{} is not a readable MCAP file (at byte {offset}): {reason}",
                path.display()
            ),
            Error::Recorder(e) => e.fmt(f),
            Error::Io { op, path, source } => {
                write!(f, "cannot {op} {}: {source}", path.display())
            }
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Log(e) => Some(e),
            Error::Kb(e) => Some(e),
            Error::Recorder(e) => Some(e),
            Error::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

impl From<blackbox_log::Error> for Error {
    fn from(e: blackbox_log::Error) -> Self {
        Error::Log(e)
    }
}

impl From<blackbox::kb::Error> for Error {
    fn from(e: blackbox::kb::Error) -> Self {
        match e {
            blackbox::kb::Error::Log(e) => Error::Log(e),
            e => Error::Kb(e),
        }
    }
}
