//! Errors of the recorder.

use std::fmt;
use std::sync::Arc;

use crate::policy::{KindError, PolicyError};

/// A specialized `Result` for the recorder.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong while recording.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Error {
    /// The log failed: opening, writing, syncing or reading it.
    Log(Arc<blackbox_log::Error>),
    /// The writer thread met an error earlier and records nothing more; every call
    /// returns that error.
    Writer(Arc<blackbox_log::Error>),
    /// The event's kind breaks the naming rule.
    InvalidKind(KindError),
    /// A source or value name is empty or too long.
    InvalidName {
        /// The name.
        name: String,
        /// What it is (`"source"`, `"value name"`).
        what: &'static str,
        /// The rule it breaks.
        rule: &'static str,
    },
    /// The event's payload exceeds the limit.
    EventTooLarge {
        /// The event's kind.
        kind: String,
        /// Payload size in bytes.
        size_bytes: usize,
        /// The limit in bytes.
        limit_bytes: usize,
    },
    /// The event carries more numeric values than an event may.
    TooManyValues {
        /// The event's kind.
        kind: String,
        /// Values it carries.
        values: usize,
        /// The limit.
        limit: usize,
    },
    /// The log has no room for another name (kind, source or value name): the event
    /// was not recorded.
    NameLimit(crate::names::NameLimitError),
    /// The policy is invalid.
    Policy(PolicyError),
    /// The working memory is too large to checkpoint in one log record; nothing was
    /// written and the recorder goes on.
    CheckpointTooLarge {
        /// Size of the JSON snapshot in bytes.
        size_bytes: usize,
        /// The log's record limit in bytes.
        limit_bytes: usize,
    },
    /// A working-memory `set` that would make the memory too large to checkpoint in
    /// one log record; the memory was left as it was.
    WorkingMemoryTooLarge {
        /// The key that was being set (for a `replace`, its largest entry's).
        key: String,
        /// Size the memory's JSON would have had, in bytes.
        size_bytes: usize,
        /// The memory's limit in bytes: the log's record limit less
        /// [`DELTA_OVERHEAD_BYTES`](crate::DELTA_OVERHEAD_BYTES).
        limit_bytes: usize,
    },
    /// The recorder was closed.
    Closed,
    /// A knowledge-base operation failed. A refused write committed nothing, except
    /// `ViewBehind`, which says the commit is in the log.
    Kb(Arc<blackbox_kb::Error>),
    /// A record the recorder wrote earlier cannot be read back (dictionary, accounting,
    /// checkpoint) while restoring state on open.
    Restore {
        /// The seq of the record.
        seq: u64,
        /// What is wrong with it.
        reason: String,
    },
    /// The shipper cannot ship to the URL it was given (`Config::ship`).
    Ship {
        /// The URL.
        url: String,
        /// Why, in a sentence.
        why: String,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Log(e) => e.fmt(f),
            Error::Writer(e) => write!(f, "the recorder's writer stopped after an error: {e}"),
            Error::InvalidKind(e) => e.fmt(f),
            Error::InvalidName { name, what, rule } => {
                write!(f, "invalid {what} {}: {rule}", blackbox_log::Shown(name))
            }
            Error::EventTooLarge {
                kind,
                size_bytes,
                limit_bytes,
            } => write!(
                f,
                "event of kind {kind:?} has a payload of {size_bytes} bytes, over the limit of {limit_bytes} bytes"
            ),
            Error::TooManyValues {
                kind,
                values,
                limit,
            } => write!(
                f,
                "event of kind {kind:?} carries {values} values, over the limit of {limit} per event"
            ),
            Error::NameLimit(e) => e.fmt(f),
            Error::Policy(e) => e.fmt(f),
            Error::CheckpointTooLarge {
                size_bytes,
                limit_bytes,
            } => write!(
                f,
                "the working memory ({size_bytes} bytes of JSON) is over the log's record limit of {limit_bytes} bytes: not checkpointed"
            ),
            Error::WorkingMemoryTooLarge {
                key,
                size_bytes,
                limit_bytes,
            } => write!(
                f,
                "setting working-memory key {} would make the memory {size_bytes} bytes of JSON, over its limit of {limit_bytes} bytes (what one log record holds): not set",
                blackbox_log::Shown(key)
            ),
            Error::Closed => write!(f, "the recorder is closed"),
            Error::Kb(e) => write!(f, "{e}"),
            Error::Restore { seq, reason } => {
                write!(
                    f,
                    "cannot restore the recorder's state from seq {seq}: {reason}"
                )
            }
            Error::Ship { url: _, why } => write!(f, "the recorder's shipper: {why}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Log(e) | Error::Writer(e) => Some(e.as_ref()),
            Error::Policy(e) => Some(e),
            Error::NameLimit(e) => Some(e),
            Error::Kb(e) => Some(e.as_ref()),
            _ => None,
        }
    }
}

impl From<blackbox_log::Error> for Error {
    fn from(e: blackbox_log::Error) -> Self {
        Error::Log(Arc::new(e))
    }
}

impl From<blackbox_kb::Error> for Error {
    fn from(e: blackbox_kb::Error) -> Self {
        Error::Kb(Arc::new(e))
    }
}

impl From<PolicyError> for Error {
    fn from(e: PolicyError) -> Self {
        Error::Policy(e)
    }
}

impl From<crate::names::NameLimitError> for Error {
    fn from(e: crate::names::NameLimitError) -> Self {
        Error::NameLimit(e)
    }
}

impl From<KindError> for Error {
    fn from(e: KindError) -> Self {
        Error::InvalidKind(e)
    }
}
