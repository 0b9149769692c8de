//! Blackbox's flight log: a directory of append-only segment files whose records are
//! checksummed one by one and hash-chained (blake3) block by block, across segments.
//!
//! This crate knows nothing of events, tiers or the knowledge base: a record is a type
//! tag, a timestamp and payload bytes. The layers above give them meaning.
//!
//! # Main types
//!
//! - [`Log`]: the single writer of a directory (a lock file keeps out a second one,
//!   and the writer stops if that file is replaced or removed under it).
//!   [`Log::append`] and [`Log::append_batch`] hand out dense [`Seq`]s; [`Log::sync`] is
//!   a durability barrier; [`Durability`] picks when data reaches the OS and the disk.
//!   No method overwrites or reorders a record. Records go only whole segments at a
//!   time, from the front, under a disk budget ([`Retention`], [`Pin`]), each pruning
//!   on the record ([`PruneRecord`]); and recovery cuts, on open, a torn write at the
//!   very end ([`Recovery`] reports it).
//! - [`LogReader`]: range reads by seq or by time, also while a writer appends. Seeks go
//!   through the sealed segments' sparse indexes; payloads are borrowed, 8-byte
//!   aligned, from the block buffer ([`LogRecord::payload`]).
//! - [`verify()`]: recomputes every checksum and the chain and reports the first problem
//!   with segment, byte offset and seq; with a [`Digest`] (`SEQ:HASH`, from
//!   [`Log::digest`]) it also proves the log still holds that exact prefix; a pruned
//!   log's start is proven by its prune record.
//! - [`storage`]: the file layer, swappable for fault injection in tests.
//!
//! The on-disk format is specified byte by byte in `docs/FORMAT.md`.
//!
//! # Example
//!
//! ```
//! use blackbox_log::{Durability, Log, LogOptions, LogReader, Record, RecordType, Seq};
//!
//! # fn main() -> Result<(), blackbox_log::Error> {
//! let dir = tempfile::tempdir().expect("temp dir");
//! let (mut log, recovery) = Log::open(dir.path(), LogOptions::new().durability(Durability::Sync))?;
//! assert!(recovery.created);
//!
//! let first = log.append(Record::new(RecordType(1), 1_000, b"hello"))?;
//! let last = log.append_batch(&[
//!     Record::new(RecordType(1), 2_000, b"world"),
//!     Record::new(RecordType(2), 2_000, b"!"),
//! ])?;
//! assert_eq!((first, last), (Seq(0), Some(Seq(2))));
//! let digest = log.digest().expect("the log holds records");
//! log.close()?;
//!
//! let reader = LogReader::open(dir.path())?;
//! let payloads: Vec<Vec<u8>> = reader
//!     .records(Seq(1)..)?
//!     .map(|r| r.map(|r| r.payload().to_vec()))
//!     .collect::<Result<_, _>>()?;
//! assert_eq!(payloads, [b"world".to_vec(), b"!".to_vec()]);
//!
//! let report = blackbox_log::verify(dir.path(), None, Some(&digest))?;
//! assert_eq!(report.records, 3);
//! assert!(report.digest_matched);
//! # Ok(())
//! # }
//! ```

mod chain;
mod compress;
mod crc;
mod error;
pub mod format;
mod reader;
pub mod retention;
mod salvage;
mod scan;
mod segment;
mod shown;
pub mod source;
pub mod storage;
mod structure;
mod verify;
mod writer;

use std::fmt;

pub use chain::{ChainKey, Digest, GENESIS_LINK, Link, link_from_hex, link_to_hex};
pub use compress::Compression;
pub use error::{Corruption, CorruptionKind, Error, Result};
pub use reader::{LogReader, LogRecord, ReaderOptions, Records};
pub use retention::{Pin, PruneRecord, Retention, ShippedThrough};
pub use salvage::{DamageKind, DamagePlace, Loss, LostSeqs, Salvage, Salvaged};
pub use segment::{LOCK_FILE_NAME, RESERVE_FILE_NAME, SegmentEntry, list_segments};
pub use shown::{SHOWN_CHARS_MAX, Shown};
pub use structure::{SealedSummary, SegmentSummary};
pub use verify::{PrunedStart, VerifyReport, verify};
pub use writer::{BUDGET_SEGMENT_BYTES_MIN, Durability, Log, LogOptions, Recovery};

/// A record's position in the log: dense, from 0, in append order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Seq(pub u64);

impl fmt::Display for Seq {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// A record's type tag. The log stores and counts it; the layers above define the values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct RecordType(pub u16);

impl RecordType {
    /// The tag a record of this type carries in the footer's tag index unless the layer
    /// above gives it another ([`Record::with_tag`]): `0xFFFF_0000` with the type in the
    /// low 16 bits (FORMAT.md, "Tag index"). A read of one type's records asks for it.
    #[must_use]
    pub const fn index_tag(self) -> u32 {
        TYPE_TAGS | self.0 as u32
    }
}

/// The tags from here up are the record types' ([`RecordType::index_tag`]); a layer
/// that tags records itself uses the ones below.
pub const TYPE_TAGS: u32 = 0xFFFF_0000;

/// A record to append: type tag, timestamp and payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record<'a> {
    /// The type tag.
    pub record_type: RecordType,
    /// Timestamp in nanoseconds since the Unix epoch (UTC). Never lower than the
    /// previous record's: a lower one is refused with [`Error::TimestampRegression`].
    pub ts_ns: u64,
    /// The payload.
    pub payload: &'a [u8],
    /// A tag for the footer's tag index (FORMAT.md, "Tag index"): its type's
    /// ([`RecordType::index_tag`]) unless the layer above sets another (the recorder:
    /// an event's kind id). A read given tags ([`Records::with_tags`]) may skip a sealed
    /// block none of whose records carries one of them. Not stored in the frame.
    pub tag: u32,
}

impl<'a> Record<'a> {
    /// A record of type `record_type` at `ts_ns` carrying `payload`.
    pub fn new(record_type: RecordType, ts_ns: u64, payload: &'a [u8]) -> Record<'a> {
        Record {
            record_type,
            ts_ns,
            payload,
            tag: record_type.index_tag(),
        }
    }

    /// The same record with `tag` for the tag index.
    pub fn with_tag(mut self, tag: u32) -> Record<'a> {
        self.tag = tag;
        self
    }
}
