//! Errors of the log layer.
//!
//! Every error that concerns bytes on disk names the segment file, the byte offset and,
//! where one is known, the sequence number, so that an investigator can go straight to
//! the damage.

use std::fmt;
use std::io;
use std::path::PathBuf;
use std::sync::Arc;

/// A specialized `Result` for the log.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong while writing, reading or verifying a log.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// An operating-system call failed.
    Io {
        /// What the log was doing, e.g. `"write segment"`.
        op: &'static str,
        /// The file or directory concerned.
        path: PathBuf,
        /// The error the operating system returned.
        source: io::Error,
    },
    /// The directory exists but does not hold a Blackbox log; it was left untouched.
    NotALog {
        /// The directory that was opened.
        dir: PathBuf,
        /// Why it is not a log (the first foreign entry, a bad magic number, ...).
        reason: String,
    },
    /// A log given by URL could not be opened, or was given to something that writes.
    Remote {
        /// The URL.
        url: String,
        /// Why, in the store's words or the program's.
        why: String,
    },
    /// A segment was written in a format version this build does not read: a newer
    /// one, or an older one (this build reads its own version only).
    UnsupportedVersion {
        /// The segment file.
        segment: PathBuf,
        /// The version found in its header.
        found: u32,
        /// The version this build reads.
        supported: u32,
    },
    /// Another writer holds the directory's lock file.
    Locked {
        /// The log directory.
        dir: PathBuf,
        /// The process id written into the lock file by the holder, if readable.
        holder_pid: Option<u32>,
    },
    /// Bytes on disk are damaged, missing or inconsistent.
    Corrupt(Corruption),
    /// A record's payload exceeds the configured maximum.
    RecordTooLarge {
        /// The payload size in bytes.
        size_bytes: usize,
        /// The configured limit in bytes.
        limit_bytes: usize,
    },
    /// A record's timestamp is lower than the previous record's; the log refuses it.
    TimestampRegression {
        /// The refused timestamp, in nanoseconds.
        ts_ns: u64,
        /// The timestamp of the last record in the log.
        last_ts_ns: u64,
    },
    /// An earlier write or fsync failed; the writer refuses every further append.
    Poisoned {
        /// The failure that poisoned the writer.
        cause: Arc<io::Error>,
    },
    /// The log is keyed (its chain mixes in a secret key) but no key was given.
    KeyRequired {
        /// The segment whose header says it is keyed.
        segment: PathBuf,
    },
    /// A key was given but it is not the key the log was written with.
    WrongKey {
        /// The segment whose key id does not match the given key.
        segment: PathBuf,
    },
    /// A key was given for a log written without one.
    NotKeyed {
        /// The segment whose header says it is not keyed.
        segment: PathBuf,
    },
    /// The log does not contain the prefix that a digest describes.
    DigestMismatch {
        /// The sequence number the digest points at.
        seq: u64,
        /// What went wrong: the log ends earlier, the seq is not at a block end, or the hash differs.
        reason: String,
    },
    /// A digest string is not of the form `SEQ:HASH` (decimal seq, 64 hex digits).
    InvalidDigest {
        /// The string that was given.
        input: String,
    },
    /// The writer's lock file was replaced or removed while it ran: another writer may
    /// be writing the log, so this one acknowledges nothing more (it is poisoned).
    LockLost {
        /// The lock file.
        lock: PathBuf,
        /// What happened to it: `"was replaced by another file"`, `"was removed"`.
        reason: String,
    },
    /// The log's seqs would run past `u64::MAX`: only a log whose footers were crafted
    /// can get there, and nothing more is appended to it.
    SeqSpaceExhausted {
        /// The seq the next record would get.
        next_seq: u64,
    },
    /// A record of a type the log reserves for itself (its prune records) was given to
    /// append or to the segment preamble.
    ReservedRecordType {
        /// The type.
        record_type: u16,
    },
    /// The disk holding the log is full (`ENOSPC`), and pruning (with a disk budget)
    /// could not free room: the writer is poisoned, and what it had acknowledged is on
    /// disk. The log opens again once there is room.
    DiskFull {
        /// The log directory.
        dir: PathBuf,
        /// Bytes that could not be written (or made durable).
        bytes: u64,
        /// What they were, and what failed: `"records could not be written"`, ...
        what: &'static str,
        /// The error the operating system returned.
        source: io::Error,
    },
    /// An option is out of range.
    InvalidOptions {
        /// Which option and why.
        reason: String,
    },
}

/// Where and how the bytes on disk are damaged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Corruption {
    /// The segment file (full path).
    pub segment: PathBuf,
    /// Byte offset within the segment file where the damage was found.
    pub offset: u64,
    /// The sequence number of the record concerned, when known.
    pub seq: Option<u64>,
    /// What is wrong.
    pub kind: CorruptionKind,
}

/// The kinds of damage the log detects.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CorruptionKind {
    /// The segment header has a bad magic number, a bad checksum or is truncated.
    SegmentHeader(String),
    /// A segment's name does not match the first seq in its header.
    SegmentName {
        /// The first seq recorded in the header.
        header_first_seq: u64,
    },
    /// A block header is unreadable (bad magic, bad checksum, impossible length).
    BlockHeader(String),
    /// A frame's checksum, length or padding is wrong.
    Frame(String),
    /// A block's recomputed chain link differs from the stored one.
    ChainMismatch,
    /// A sequence number is not the one that follows its predecessor.
    SeqGap {
        /// The seq that should come next.
        expected: u64,
        /// The seq found.
        found: u64,
    },
    /// A segment does not continue the chain of the segment before it.
    ChainBreak,
    /// A timestamp is lower than its predecessor's.
    TimestampDecrease,
    /// The log does not start at seq 0 with the genesis link: segments are missing.
    MissingStart {
        /// The first seq of the first segment present.
        first_seq: u64,
    },
    /// A sealed segment's footer is missing, damaged or disagrees with its blocks.
    Footer(String),
    /// Damaged bytes are followed by intact records, so they are not a torn tail (nor
    /// a page a power loss kept from the disk: zeros to a 4 KiB boundary).
    DamageBeforeIntactData {
        /// How the damaged block failed to decode.
        detail: String,
    },
    /// A range read was positioned past records in its range: what it skipped by (a
    /// footer's last timestamp, a sparse-index entry, a block header), which only a
    /// checksum covers, disagrees with the blocks the chain verifies.
    SeekMismatch(String),
    /// Something named like a segment is not a regular file (a directory, a symbolic
    /// link, a FIFO, a device, ...). Only regular files are segments: a link is never
    /// followed out of the log, and a FIFO would block the reader.
    NotARegularFile {
        /// What it is instead, e.g. `"a directory"`.
        found: &'static str,
    },
}

impl fmt::Display for CorruptionKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CorruptionKind::SegmentHeader(why) => write!(f, "bad segment header: {why}"),
            CorruptionKind::SegmentName { header_first_seq } => write!(
                f,
                "file name does not match the header's first seq {header_first_seq}"
            ),
            CorruptionKind::BlockHeader(why) => write!(f, "bad block header: {why}"),
            CorruptionKind::Frame(why) => write!(f, "bad frame: {why}"),
            CorruptionKind::ChainMismatch => {
                write!(
                    f,
                    "hash chain mismatch (the block's content or key differs from what was written)"
                )
            }
            CorruptionKind::SeqGap { expected, found } => {
                write!(f, "sequence gap: expected seq {expected}, found {found}")
            }
            CorruptionKind::ChainBreak => write!(
                f,
                "segment does not continue the previous segment's hash chain"
            ),
            CorruptionKind::TimestampDecrease => {
                write!(f, "timestamp lower than its predecessor's")
            }
            CorruptionKind::MissingStart { first_seq } => write!(
                f,
                "log starts at seq {first_seq} instead of 0: earlier segments are missing"
            ),
            CorruptionKind::Footer(why) => write!(f, "bad footer: {why}"),
            CorruptionKind::DamageBeforeIntactData { detail } => write!(
                f,
                "damaged data ({detail}) followed by intact records: not a torn tail, refusing to cut"
            ),
            CorruptionKind::SeekMismatch(why) => {
                write!(
                    f,
                    "a range read would have skipped records in its range: {why}"
                )
            }
            CorruptionKind::NotARegularFile { found } => write!(
                f,
                "named like a segment but {found}, not a regular file: only regular files are segments"
            ),
        }
    }
}

impl fmt::Display for Corruption {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "segment {} at byte {}",
            self.segment.display(),
            self.offset
        )?;
        if let Some(seq) = self.seq {
            write!(f, " (seq {seq})")?;
        }
        write!(f, ": {}", self.kind)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io { op, path, source } => {
                write!(f, "cannot {op} {}: {source}", path.display())
            }
            Error::NotALog { dir, reason } => {
                write!(f, "{} is not a Blackbox log: {reason}", dir.display())
            }
            Error::Remote { url, why } => write!(f, "log {url}: {why}"),
            Error::UnsupportedVersion {
                segment,
                found,
                supported,
            } if found > supported => write!(
                f,
                "segment {} has format version {found}, newer than the version {supported} this build reads",
                segment.display()
            ),
            Error::UnsupportedVersion {
                segment,
                found,
                supported,
            } => write!(
                f,
                "segment {} has format version {found}, older than the version {supported} this build reads; read it with the build that wrote it",
                segment.display()
            ),
            Error::Locked { dir, holder_pid } => match holder_pid {
                Some(pid) => write!(
                    f,
                    "log {} is locked by another writer (pid {pid})",
                    dir.display()
                ),
                None => write!(f, "log {} is locked by another writer", dir.display()),
            },
            Error::Corrupt(c) => write!(f, "corrupt log: {c}"),
            Error::RecordTooLarge {
                size_bytes,
                limit_bytes,
            } => write!(
                f,
                "record of {size_bytes} bytes exceeds the maximum record size of {limit_bytes} bytes"
            ),
            Error::TimestampRegression { ts_ns, last_ts_ns } => write!(
                f,
                "timestamp {ts_ns} ns is lower than the last record's {last_ts_ns} ns"
            ),
            Error::Poisoned { cause } => write!(
                f,
                "the log writer is poisoned by an earlier I/O failure and accepts no more records: {cause}"
            ),
            Error::KeyRequired { segment } => write!(
                f,
                "segment {} is keyed: a chain key is needed",
                segment.display()
            ),
            Error::WrongKey { segment } => write!(
                f,
                "the chain key does not match the key segment {} was written with",
                segment.display()
            ),
            Error::NotKeyed { segment } => write!(
                f,
                "a chain key was given but segment {} was written without one",
                segment.display()
            ),
            Error::DigestMismatch { seq, reason } => {
                write!(
                    f,
                    "the log does not match the digest at seq {seq}: {reason}"
                )
            }
            Error::InvalidDigest { input } => write!(
                f,
                "invalid digest {}: expected SEQ:HASH with a decimal seq and 64 hex digits",
                crate::Shown(input)
            ),
            Error::LockLost { lock, reason } => write!(
                f,
                "the log's lock file {} {reason} while this writer held it: another writer may be writing the log, so this one accepts and acknowledges no more records",
                lock.display()
            ),
            Error::SeqSpaceExhausted { next_seq } => write!(
                f,
                "the log's next seq {next_seq} leaves no room for more records below the largest seq"
            ),
            Error::ReservedRecordType { record_type } => write!(
                f,
                "record type {record_type} is reserved for the log's own prune records"
            ),
            Error::DiskFull {
                dir, bytes, what, ..
            } => write!(
                f,
                "the disk holding {} is full: {bytes} bytes of {what}; nothing acknowledged is lost",
                dir.display()
            ),
            Error::InvalidOptions { reason } => write!(f, "invalid log options: {reason}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } | Error::DiskFull { source, .. } => Some(source),
            Error::Poisoned { cause } => Some(cause.as_ref()),
            _ => None,
        }
    }
}

impl From<Corruption> for Error {
    fn from(c: Corruption) -> Self {
        Error::Corrupt(c)
    }
}

impl Error {
    /// Builds an [`Error::Io`].
    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>, source: io::Error) -> Error {
        Error::Io {
            op,
            path: path.into(),
            source,
        }
    }

    /// The corruption report, if this error is one.
    pub fn corruption(&self) -> Option<&Corruption> {
        match self {
            Error::Corrupt(c) => Some(c),
            _ => None,
        }
    }
}
