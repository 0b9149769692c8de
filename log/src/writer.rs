//! The writer: [`Log`], its options and its recovery on open.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::chain::{ChainKey, Chainer, Digest, GENESIS_LINK, Link};
use crate::compress::{Compression, Compressor};
use crate::error::{Corruption, CorruptionKind, Error, Result};
use crate::format::{
    self, BLOCK_HEADER_LEN, BlockHeader, FLAG_KEYED, FORMAT_VERSION, Footer, FrameHeader,
    IndexEntry, MAX_RECORD_BYTES_LIMIT, SEGMENT_HEADER_LEN, SegmentHeader,
};
use crate::retention::{self, PRUNE_RECORD_TYPE, Pin, PruneRecord, Retention, ShippedThrough};
use crate::scan::{self, ChainPoint, Tail};
use crate::segment::{
    self, HeaderState, LOCK_FILE_NAME, RESERVE_FILE_NAME, SegmentEntry, SegmentFile,
};
use crate::storage::{OsStorage, Storage, WriteFile};
use crate::structure;
use crate::{Record, RecordType, Seq};

/// When appended records reach the operating system and the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// Records collect in memory and are written to the OS when the write buffer fills,
    /// on [`Log::flush`], [`Log::sync`], a segment roll and close. Fastest; a crash of
    /// the process loses what was still buffered.
    Buffered,
    /// Every append call (one record or one batch) is written to the OS before it
    /// returns: a process crash loses nothing, a power loss may lose what was not synced.
    #[default]
    Flush,
    /// Every append call is written and `fdatasync`ed before it returns: group commit,
    /// one fdatasync per batch. Nothing acknowledged is lost to a crash or power loss.
    Sync,
}

/// The smallest segment size limit a disk budget sizes segments down to
/// ([`LogOptions::effective_segment_bytes_max`]): 64 KiB, one block at the default
/// block size.
pub const BUDGET_SEGMENT_BYTES_MIN: u64 = 64 << 10;

/// Options for [`Log::open`].
#[derive(Debug, Clone)]
pub struct LogOptions {
    pub(crate) segment_bytes_max: u64,
    pub(crate) segment_age_max_ns: Option<u64>,
    pub(crate) durability: Durability,
    pub(crate) key: Option<ChainKey>,
    pub(crate) index_interval_bytes: u64,
    pub(crate) record_bytes_max: usize,
    pub(crate) block_bytes_max: usize,
    pub(crate) write_buffer_bytes: usize,
    pub(crate) verify_on_open: bool,
    pub(crate) storage: Arc<dyn Storage>,
    pub(crate) retention: Retention,
    pub(crate) compression: Compression,
    pub(crate) disk_reserve_bytes: u64,
    pub(crate) ship_hold: Option<ShippedThrough>,
}

impl Default for LogOptions {
    fn default() -> LogOptions {
        LogOptions {
            segment_bytes_max: 64 << 20,
            segment_age_max_ns: None,
            durability: Durability::default(),
            key: None,
            index_interval_bytes: 64 << 10,
            record_bytes_max: 16 << 20,
            retention: Retention::default(),
            block_bytes_max: 64 << 10,
            write_buffer_bytes: 1 << 20,
            verify_on_open: false,
            storage: Arc::new(OsStorage),
            compression: Compression::Off,
            disk_reserve_bytes: 2 << 20,
            ship_hold: None,
        }
    }
}

impl LogOptions {
    /// Default options: 64 MiB segments, `Flush` durability, unkeyed, 16 MiB records.
    pub fn new() -> LogOptions {
        LogOptions::default()
    }

    /// The chain key, when the log is keyed.
    pub fn chain_key(&self) -> Option<&ChainKey> {
        self.key.as_ref()
    }

    /// Size at which the active segment is sealed and a new one started (default 64 MiB),
    /// counting the bytes after the segment preamble: a segment is at most its preamble
    /// plus this, so a preamble larger than the limit never makes a segment of every
    /// record. A single record larger than this gets a segment of its own. With a
    /// [`retention`](LogOptions::retention) budget by size, the log writes segments of
    /// at most an eighth of it ([`effective_segment_bytes_max`](LogOptions::effective_segment_bytes_max)).
    pub fn segment_bytes_max(mut self, bytes: u64) -> Self {
        self.segment_bytes_max = bytes;
        self
    }

    /// Seal the active segment once its records span this many nanoseconds of record
    /// time (default: no age limit).
    pub fn segment_age_max_ns(mut self, ns: Option<u64>) -> Self {
        self.segment_age_max_ns = ns;
        self
    }

    /// The durability mode (default [`Durability::Flush`]).
    pub fn durability(mut self, durability: Durability) -> Self {
        self.durability = durability;
        self
    }

    /// Mix a secret key into every chain link (default: unkeyed).
    pub fn key(mut self, key: Option<ChainKey>) -> Self {
        self.key = key;
        self
    }

    /// Bytes between entries of a sealed segment's sparse index (default 64 KiB).
    pub fn index_interval_bytes(mut self, bytes: u64) -> Self {
        self.index_interval_bytes = bytes;
        self
    }

    /// Largest payload accepted (default 16 MiB, at most 1 GiB).
    pub fn record_bytes_max(mut self, bytes: usize) -> Self {
        self.record_bytes_max = bytes;
        self
    }

    /// Frames per block are cut at about this many bytes (default 64 KiB): the chain's
    /// granularity, and the unit a digest and a reader's seek can point at.
    pub fn block_bytes_max(mut self, bytes: usize) -> Self {
        self.block_bytes_max = bytes;
        self
    }

    /// In `Buffered` mode, bytes held in memory before they are written (default 1 MiB).
    pub fn write_buffer_bytes(mut self, bytes: usize) -> Self {
        self.write_buffer_bytes = bytes;
        self
    }

    /// Verify every sealed segment's content and chain on open, not only the structure
    /// (default false: open checks every header and footer and the whole active segment).
    pub fn verify_on_open(mut self, verify: bool) -> Self {
        self.verify_on_open = verify;
        self
    }

    /// The file layer (default: the real file system). Tests pass a
    /// [`FaultyStorage`](crate::storage::FaultyStorage).
    pub fn storage(mut self, storage: Arc<dyn Storage>) -> Self {
        self.storage = storage;
        self
    }

    /// Prunes for the budget only segments shipped (up to `shipped`'s seq, which the
    /// shipper raises); every prune record then says whether what it removed was
    /// shipped ([`REASON_SHIPPED`](crate::retention::REASON_SHIPPED)). A full disk still
    /// removes the oldest segments, shipped or not (then
    /// [`REASON_UNSHIPPED`](crate::retention::REASON_UNSHIPPED)): room to record comes
    /// first.
    pub fn prune_after_shipped(mut self, shipped: ShippedThrough) -> Self {
        self.ship_hold = Some(shipped);
        self
    }

    /// A disk budget: after every seal the oldest sealed segments over it are removed,
    /// whole, each removal on the record (see [`Retention`]). Default: unbounded.
    pub fn retention(mut self, retention: Retention) -> Self {
        self.retention = retention;
        self
    }

    /// Per-block compression (default [`Compression::Off`]): with
    /// [`Compression::Zstd`], each block is compressed as it is finished and stored
    /// compressed when that saves at least an eighth of its bytes, raw otherwise.
    pub fn compression(mut self, compression: Compression) -> Self {
        self.compression = compression;
        self
    }

    /// The segment size limit the log writes with: `segment_bytes_max`, or, under a
    /// budget of `max_bytes`, an eighth of the budget when that is smaller, but never
    /// less than [`BUDGET_SEGMENT_BYTES_MIN`]. Only sealed segments are pruned, so a
    /// segment as large as the budget would never be: with an eighth, the log stays
    /// within its budget plus one segment (an eighth more), and pruning frees an eighth
    /// at a time.
    pub fn effective_segment_bytes_max(&self) -> u64 {
        match self.retention.max_bytes {
            Some(budget) => self
                .segment_bytes_max
                .min((budget / 8).max(BUDGET_SEGMENT_BYTES_MIN)),
            None => self.segment_bytes_max,
        }
    }

    /// Bytes of disk a log with a disk budget keeps allocated to its reserve file
    /// (`.reserve`, default 2 MiB; 0: none). When a write fails because the disk is
    /// full, the reserve is given back so that the write and a prune record fit; the
    /// pruning then frees room, and the reserve is taken again. A failed write larger
    /// than the reserve ends in [`Error::DiskFull`]. A log without a budget has no
    /// reserve.
    pub fn disk_reserve_bytes(mut self, bytes: u64) -> Self {
        self.disk_reserve_bytes = bytes;
        self
    }

    fn validate(&self) -> Result<()> {
        let bad = |reason: String| Err(Error::InvalidOptions { reason });
        if let Err(reason) = self.compression.validate() {
            return bad(reason);
        }
        if self.record_bytes_max == 0 || self.record_bytes_max > MAX_RECORD_BYTES_LIMIT {
            return bad(format!(
                "record_bytes_max {} must be between 1 and {MAX_RECORD_BYTES_LIMIT}",
                self.record_bytes_max
            ));
        }
        if self.segment_bytes_max < 4096 {
            return bad(format!(
                "segment_bytes_max {} must be at least 4096",
                self.segment_bytes_max
            ));
        }
        if self.block_bytes_max == 0 || self.block_bytes_max > 64 << 20 {
            return bad(format!(
                "block_bytes_max {} must be between 1 and 64 MiB",
                self.block_bytes_max
            ));
        }
        if self.index_interval_bytes == 0 {
            return bad("index_interval_bytes must be positive".to_owned());
        }
        if self.segment_age_max_ns == Some(0) {
            return bad("segment_age_max_ns must be positive".to_owned());
        }
        Ok(())
    }
}

/// What [`Log::open`] found and did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recovery {
    /// Segment files in the log after open (including a newly created active one).
    pub segments: usize,
    /// The last seq in the log, if it holds any record.
    pub last_seq: Option<Seq>,
    /// Bytes of an incomplete trailing write cut from the active segment.
    pub torn_bytes_cut: u64,
    /// Why the cut bytes were not an intact block, with their offset.
    pub torn_detail: Option<String>,
    /// The segment file the torn bytes were cut from.
    pub torn_segment: Option<PathBuf>,
    /// The seq the first record of the cut bytes would have had: records from it on,
    /// if the torn write held any, are lost (how many is not known).
    pub first_lost_seq: Option<Seq>,
    /// Whether the directory was created (or held no segment) and a new log started.
    pub created: bool,
    /// Segments a prune record names that a crash left behind (between the record and
    /// the last unlink), removed by this open, oldest first.
    pub pruning_finished: Vec<PathBuf>,
}

/// The one block being filled, at the end of the write buffer.
#[derive(Debug, Clone)]
struct OpenBlock {
    /// Index of the block header in the write buffer.
    start: usize,
    first_seq: u64,
    first_ts: u64,
    last_ts: u64,
    count: u32,
    /// The distinct tags of its records, ascending; `None` once
    /// there are more than the tag index lists for a block.
    tags: Option<Vec<u32>>,
}

#[derive(Debug)]
struct Active {
    path: PathBuf,
    file: Box<dyn WriteFile>,
    first_seq: u64,
    /// Bytes of the file handed to the OS.
    written_len: u64,
    /// Bytes of the file made durable by the last fsync.
    synced_len: u64,
    /// Start of the bytes written but not yet handed to `start_writeback`.
    writeback_from: u64,
    record_count: u64,
    block_count: u64,
    first_ts: Option<u64>,
    /// Records per type, indexed by type.
    type_counts: Vec<u64>,
    index: Vec<IndexEntry>,
    last_indexed_offset: Option<u64>,
    /// The tag index: the blocks this writer finished in this segment, with their tags
    /// (blocks a previous session wrote are not described).
    tags: Vec<format::BlockTags>,
    /// Tags listed in `tags`, all blocks together.
    tags_listed: usize,
    /// Bytes the segment preamble took when the writer started this segment (0 for a
    /// segment opened without one): the size limit counts the bytes after it.
    preamble_bytes: u64,
}

impl Active {
    /// A segment that holds nothing yet: not even its header.
    fn empty(path: PathBuf, file: Box<dyn WriteFile>, first_seq: u64) -> Active {
        Active {
            path,
            file,
            first_seq,
            written_len: 0,
            synced_len: 0,
            writeback_from: 0,
            record_count: 0,
            block_count: 0,
            first_ts: None,
            type_counts: Vec::new(),
            index: Vec::new(),
            last_indexed_offset: None,
            tags: Vec::new(),
            tags_listed: 0,
            preamble_bytes: 0,
        }
    }
}

/// The writer of a log directory. There is one per directory, enforced by a lock file.
///
/// Appends are `&mut self`: the host owns the writer on one thread (the recorder's
/// writer thread) and batches; readers open the directory separately with
/// [`LogReader`](crate::LogReader).
#[derive(Debug)]
pub struct Log {
    dir: PathBuf,
    opts: LogOptions,
    chainer: Chainer,
    key_id: [u8; 32],
    _lock: File,
    /// The lock file's path and the (device, inode) of the file this writer locked.
    lock_path: PathBuf,
    lock_id: (u64, u64),
    active: Active,
    segments: usize,
    buf: Vec<u8>,
    open_block: Option<OpenBlock>,
    next_seq: u64,
    last_ts: u64,
    /// Link of the last finished block.
    last_link: Link,
    /// Last seq of the last finished block, with its link: what [`Log::digest`] reports
    /// once written.
    written: Option<Digest>,
    durable_seq: Option<u64>,
    poisoned: Option<Arc<io::Error>>,
    /// Records written at the start of every new segment.
    preamble: Vec<(RecordType, Vec<u8>)>,
    /// What the layer above wants kept (retention).
    pins: Vec<Pin>,
    /// Prunings done since the layer above last took them.
    pruned: Vec<(Seq, PruneRecord)>,
    /// Compresses finished blocks, when compression is on.
    compressor: Option<Compressor>,
    /// The disk reserve's path, for a log with a disk budget and a reserve.
    reserve: Option<PathBuf>,
    /// Whether the reserve is allocated now.
    reserved: bool,
    /// Whether a pruning's record waits in the buffer: a full disk then gives back the
    /// reserve for it rather than start another pruning.
    pruning: bool,
}

impl Log {
    /// Opens the log in `dir`, creating it (mode 0700) if needed, and recovers it.
    ///
    /// # Errors
    ///
    /// [`Error::NotALog`] if the directory holds something else (it is left
    /// untouched), [`Error::Locked`] if another writer holds it, [`Error::Corrupt`] on
    /// damage that is not a torn tail, key errors, and I/O errors.
    pub fn open(dir: impl AsRef<Path>, mut opts: LogOptions) -> Result<(Log, Recovery)> {
        opts.validate()?;
        opts.segment_bytes_max = opts.effective_segment_bytes_max();
        let dir = dir.as_ref().to_owned();
        if crate::source::is_url(&dir) {
            return Err(Error::Remote {
                url: dir.display().to_string(),
                why: "a shipped log is read where it lies, never written: write to a log directory on this machine and ship it".to_owned(),
            });
        }
        let mut created = false;
        match fs::metadata(&dir) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => {
                return Err(Error::NotALog {
                    dir,
                    reason: "it is not a directory".to_owned(),
                });
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                fs::DirBuilder::new()
                    .recursive(true)
                    .mode(0o700)
                    .create(&dir)
                    .map_err(|e| Error::io("create log directory", &dir, e))?;
                created = true;
            }
            Err(e) => return Err(Error::io("inspect log directory", &dir, e)),
        }
        // Refuse a foreign directory before writing anything into it.
        let listing = segment::read_listing(&dir)?;
        if let Some((entry, found)) = listing.not_files.first() {
            return Err(segment::not_a_regular_file(entry, found));
        }
        if let Some(found) = listing.lock_not_file {
            return Err(Error::NotALog {
                dir,
                reason: format!(
                    "its {LOCK_FILE_NAME} is {found}, not the regular file a writer locks"
                ),
            });
        }
        if listing.segments.is_empty()
            && let Some(name) = listing.other
        {
            return Err(Error::NotALog {
                dir,
                reason: format!(
                    "it holds {name:?} and no segment file: a new log starts only in an empty directory"
                ),
            });
        }
        for entry in &listing.segments {
            precheck_header(entry)?;
        }
        let (lock, lock_id) = lock_dir(&dir)?;
        let key_id = opts.key.as_ref().map(ChainKey::id);
        let chainer = Chainer::new(opts.key.as_ref());
        let mut recovered = recover(&dir, key_id, &chainer, opts.verify_on_open)?;
        // A crash between a prune record and its last unlink left segments it names:
        // they go now, oldest first, before anything is written.
        let mut pruning_finished = Vec::new();
        if let Some(p) = &recovered.prune {
            let n = recovered.segments.len().saturating_sub(1);
            pruning_finished = recovered.segments[..n]
                .iter()
                .filter(|e| e.first_seq <= p.last_seq)
                .map(|e| e.path.clone())
                .collect();
            if !pruning_finished.is_empty() {
                retention::remove_segments(&dir, &*opts.storage, &pruning_finished)?;
                recovered.segments.drain(..pruning_finished.len());
            }
        }
        created |= recovered.segments.is_empty();
        let storage = Arc::clone(&opts.storage);
        let mut torn_bytes_cut = 0;
        let mut torn_detail = None;
        let mut torn_segment = None;
        let mut segments = recovered.segments.len();
        let point = recovered.point;
        let active = match recovered.last {
            Some(last) if !last.sealed => {
                let mut file = storage
                    .open_append(&last.path)
                    .map_err(|e| Error::io("open segment for writing", &last.path, e))?;
                if let Some((offset, detail)) = last.torn {
                    // IMPORTANT: the cut is made durable before anything new is written
                    // after it, so a second crash cannot resurrect the torn bytes.
                    torn_bytes_cut = last.file_len - offset;
                    torn_detail = Some(format!("at byte {offset}: {detail}"));
                    torn_segment = Some(last.path.clone());
                    file.truncate(offset)
                        .map_err(|e| Error::io("cut torn tail of", &last.path, e))?;
                }
                // What a crashed writer left in the page cache becomes durable here, so
                // `durable_seq` starts out true.
                file.sync_data()
                    .map_err(|e| Error::io("fsync segment", &last.path, e))?;
                let mut type_counts = Vec::new();
                for (&t, &n) in &last.type_counts {
                    bump(&mut type_counts, t, n);
                }
                let mut active = Active {
                    path: last.path,
                    file,
                    first_seq: last.first_seq,
                    written_len: last.data_end,
                    synced_len: last.data_end,
                    writeback_from: last.data_end,
                    record_count: last.record_count,
                    block_count: last.blocks.len() as u64,
                    first_ts: last.first_ts,
                    type_counts,
                    index: Vec::new(),
                    last_indexed_offset: None,
                    tags: Vec::new(),
                    tags_listed: 0,
                    preamble_bytes: 0,
                };
                for b in &last.blocks {
                    add_index_entry(&mut active, *b, opts.index_interval_bytes);
                }
                if last.header_torn {
                    // A creation cut short by a crash: write the header again.
                    active
                        .file
                        .truncate(0)
                        .map_err(|e| Error::io("rewrite torn header of", &active.path, e))?;
                    torn_bytes_cut = last.file_len;
                    torn_detail = Some("incomplete segment header".to_owned());
                    torn_segment = Some(active.path.clone());
                    write_segment_header(&mut active, &point, key_id, &dir, &*storage)?;
                }
                active
            }
            last => {
                if let Some(last) = last {
                    // IMPORTANT: a crash left this segment sealed (its footer written)
                    // but perhaps not durable nor read-only. Both happen before the
                    // next segment exists, as in a roll, so that a segment followed by
                    // another is always complete on disk.
                    storage
                        .sync_file(&last.path)
                        .map_err(|e| Error::io("fsync sealed segment", &last.path, e))?;
                    storage
                        .set_read_only(&last.path)
                        .map_err(|e| Error::io("make read-only", &last.path, e))?;
                }
                segments += 1;
                create_segment(&dir, &*storage, &point, key_id)?
            }
        };
        let written = point.next_seq.checked_sub(1).map(|seq| Digest {
            seq,
            link: point.link,
        });
        let recovery = Recovery {
            segments,
            last_seq: written.map(|d| Seq(d.seq)),
            torn_bytes_cut,
            torn_detail,
            first_lost_seq: torn_segment.as_ref().map(|_| Seq(point.next_seq)),
            torn_segment,
            created,
            pruning_finished,
        };
        let lock_path = dir.join(LOCK_FILE_NAME);
        let reserve_path = dir.join(RESERVE_FILE_NAME);
        let reserve = (opts.retention.is_bounded() && opts.disk_reserve_bytes > 0)
            .then(|| reserve_path.clone());
        if reserve.is_none() && fs::symlink_metadata(&reserve_path).is_ok() {
            // A reserve left by a run with a budget: this run has no use for it.
            let _ = storage.remove_file(&reserve_path);
        }
        let mut log = Log {
            dir,
            chainer,
            key_id: key_id.unwrap_or([0; 32]),
            _lock: lock,
            lock_path,
            lock_id,
            active,
            segments,
            buf: Vec::with_capacity(opts.write_buffer_bytes + opts.block_bytes_max),
            open_block: None,
            next_seq: point.next_seq,
            last_ts: point.last_ts,
            last_link: point.link,
            written,
            durable_seq: written.map(|d| d.seq),
            poisoned: None,
            preamble: Vec::new(),
            pins: Vec::new(),
            pruned: Vec::new(),
            compressor: Compressor::new(opts.compression),
            opts,
            reserve,
            reserved: false,
            pruning: false,
        };
        // On a full disk the log still opens, without its reserve (the next seal takes
        // it).
        let _ = log.refill_reserve();
        Ok((log, recovery))
    }

    /// The log directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The seq the next appended record will get.
    pub fn next_seq(&self) -> Seq {
        Seq(self.next_seq)
    }

    /// The highest seq known durable (fsynced), if any.
    pub fn durable_seq(&self) -> Option<Seq> {
        self.durable_seq.map(Seq)
    }

    /// The highest seq handed to the operating system, visible to readers.
    pub fn written_seq(&self) -> Option<Seq> {
        self.written.map(|d| Seq(d.seq))
    }

    /// The chain point after the last record written to the OS: `SEQ:HASH`, to be kept
    /// and later checked with [`verify`](crate::verify()). `None` for an empty log.
    pub fn digest(&self) -> Option<Digest> {
        self.written
    }

    /// Number of segment files.
    pub fn segment_count(&self) -> usize {
        self.segments
    }

    /// Sets the records that open every segment started from now on, so that each
    /// segment can be read alone: the layer above puts there what its records refer to
    /// (the recorder, its dictionary of interned names). They get seqs like any record.
    /// A segment that is already open is not changed.
    ///
    /// # Errors
    ///
    /// [`Error::RecordTooLarge`] if a preamble record exceeds the maximum record size.
    pub fn set_segment_preamble(&mut self, records: Vec<(RecordType, Vec<u8>)>) -> Result<()> {
        for (record_type, payload) in &records {
            self.check_preamble_record(*record_type, payload)?;
        }
        self.preamble = records;
        Ok(())
    }

    /// A preamble record's type must not be the log's own, nor its size past the limit.
    fn check_preamble_record(&self, record_type: RecordType, payload: &[u8]) -> Result<()> {
        if record_type == PRUNE_RECORD_TYPE {
            return Err(Error::ReservedRecordType {
                record_type: record_type.0,
            });
        }
        if payload.len() > self.opts.record_bytes_max {
            return Err(Error::RecordTooLarge {
                size_bytes: payload.len(),
                limit_bytes: self.opts.record_bytes_max,
            });
        }
        Ok(())
    }

    /// Adds one record at the end of the preamble set by
    /// [`set_segment_preamble`](Log::set_segment_preamble), for segments started from
    /// now on: a layer whose preamble grows by a record at a time does not hand the
    /// whole of it over again.
    ///
    /// # Errors
    ///
    /// As [`set_segment_preamble`](Log::set_segment_preamble).
    pub fn push_segment_preamble(
        &mut self,
        record_type: RecordType,
        payload: Vec<u8>,
    ) -> Result<()> {
        self.check_preamble_record(record_type, &payload)?;
        self.preamble.push((record_type, payload));
        Ok(())
    }

    /// Keeps the first `len` records of the preamble (all of them when it has no more),
    /// for segments started from now on.
    pub fn truncate_segment_preamble(&mut self, len: usize) {
        self.preamble.truncate(len);
    }

    /// Sets the seq ranges that the next prunings keep (see [`Pin`] and
    /// [`Retention::pinned_max_bytes`]), replacing the previous set.
    pub fn set_pins(&mut self, pins: Vec<Pin>) {
        self.pins = pins;
    }

    /// The prunings done since the last call, oldest first: each prune record's seq and
    /// content. A pin named in [`PruneRecord::evicted_pins`] is dropped from the set.
    pub fn take_pruned(&mut self) -> Vec<(Seq, PruneRecord)> {
        std::mem::take(&mut self.pruned)
    }

    /// Prunes now by the retention options, as the writer does after every seal: when
    /// the log is over its budget, appends a prune record, makes it durable, then
    /// removes the oldest sealed segments over the budget. Returns the prune record's
    /// seq, or `None` when nothing is over the budget.
    ///
    /// # Errors
    ///
    /// As [`Log::sync`]; I/O errors removing a segment (which poison: the log then
    /// holds a prune record and some of the segments it names, which the next open
    /// removes).
    pub fn prune(&mut self) -> Result<Option<Seq>> {
        self.check_poisoned()?;
        self.check_seq_space(1)?;
        let seq = self.prune_at(self.last_ts)?;
        if seq.is_some() {
            self.end_of_call()?;
        }
        Ok(seq)
    }

    /// The pruning after a seal (or [`Log::prune`]) at time `ts`, the newest record's.
    fn prune_at(&mut self, ts: u64) -> Result<Option<Seq>> {
        let key_id = self.opts.key.as_ref().map(|_| self.key_id);
        let (sealed, active_prev_link) = retention::sealed_segments(&self.dir, key_id)?;
        let active_bytes = self.active.written_len + self.buf.len() as u64;
        // Under a shipping hold the budget removes shipped segments only: the others
        // count as kept bytes.
        let shippable = self
            .opts
            .ship_hold
            .as_ref()
            .map_or(sealed.len(), |h| h.shipped_count(&sealed));
        let held: u64 = sealed[shippable..].iter().map(|s| s.bytes).sum();
        let mut plan = retention::plan(
            &sealed[..shippable],
            active_bytes + held,
            &self.opts.retention,
            &self.pins,
            ts,
        );
        if plan.remove == 0 {
            return Ok(None);
        }
        if self.opts.ship_hold.is_some() {
            plan.reasons |= retention::REASON_SHIPPED;
        }
        let (record, paths) = retention::prepare(&sealed, &plan, active_prev_link);
        // A full disk met while this record waits gives back the reserve for it, and
        // starts no pruning of its own (which would remove these same segments).
        self.pruning = true;
        let written = self
            .push_frame(&Record::new(PRUNE_RECORD_TYPE, ts, &record.encode()))
            .and_then(|seq| {
                // IMPORTANT: the prune record is durable before the first segment goes,
                // and segments go oldest first: a crash in between leaves a log whose
                // first segment the record explains, and the next open finishes the
                // removal.
                self.write_out()?;
                self.sync_active()?;
                Ok(seq)
            });
        self.pruning = false;
        let seq = written?;
        self.remove_pruned(seq, record, &paths, &plan.evicted)?;
        // Taken again now that there is room.
        let _ = self.refill_reserve();
        Ok(Some(seq))
    }

    /// Removes the segments a durable prune record names, oldest first, and notes the
    /// pruning.
    fn remove_pruned(
        &mut self,
        seq: Seq,
        record: PruneRecord,
        paths: &[PathBuf],
        evicted: &[u64],
    ) -> Result<()> {
        if let Err(e) = retention::remove_segments(&self.dir, &*self.opts.storage, paths) {
            self.poisoned = Some(Arc::new(io::Error::other(e.to_string())));
            return Err(e);
        }
        self.segments -= paths.len();
        self.pins.retain(|p| !evicted.contains(&p.id));
        self.pruned.push((seq, record));
        Ok(())
    }

    /// Allocates the disk reserve if the log has one and it is not allocated; returns
    /// why it could not be. On a full disk it stays unallocated until a pruning frees
    /// room.
    fn refill_reserve(&mut self) -> Option<io::Error> {
        let path = self.reserve.as_ref().filter(|_| !self.reserved)?;
        match self
            .opts
            .storage
            .reserve(path, self.opts.disk_reserve_bytes)
        {
            Ok(()) => {
                self.reserved = true;
                None
            }
            Err(e) => Some(e),
        }
    }

    /// After a seal: takes the reserve again if it was given back, and when the disk has
    /// no room for it, prunes for room first (as a write that found no room does).
    fn keep_reserve(&mut self) -> Result<()> {
        match self.refill_reserve() {
            Some(e) if is_disk_full(&e) => {
                if self.prune_for_room(self.opts.disk_reserve_bytes, &e)? {
                    let _ = self.refill_reserve();
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// Gives the disk reserve back, so that what a full disk refused can be written.
    fn release_reserve(&mut self) {
        if let Some(path) = &self.reserve
            && std::mem::take(&mut self.reserved)
        {
            // Failing to remove it leaves less room: the retry that follows says so.
            let _ = self.opts.storage.remove_file(path);
        }
    }

    /// After a write the disk refused for want of room, with the file cut back to
    /// `written_len`: when the log has a disk budget, plans the removal of the oldest
    /// unpinned sealed segments (enough for `needed` bytes), gives back the reserve,
    /// appends the prune record after what the buffer holds, writes and syncs it all
    /// and removes the segments. `Ok(false)` when there is nothing to remove.
    ///
    /// # Errors
    ///
    /// [`Error::DiskFull`] when even the buffer and the prune record do not fit (nothing
    /// is removed then), and the errors of a pruning; all of them poison.
    fn prune_for_room(&mut self, needed: u64, first: &io::Error) -> Result<bool> {
        if !self.opts.retention.is_bounded() || self.pruning || self.next_seq == u64::MAX {
            return Ok(false);
        }
        let key_id = self.opts.key.as_ref().map(|_| self.key_id);
        let (sealed, active_prev_link) = match retention::sealed_segments(&self.dir, key_id) {
            Ok(found) => found,
            Err(e) => {
                self.poisoned = Some(Arc::new(io::Error::new(first.kind(), e.to_string())));
                return Err(e);
            }
        };
        let mut plan = retention::plan_disk_full(&sealed, &self.pins, needed);
        if plan.remove == 0 {
            return Ok(false);
        }
        // Room comes before shipping; the record says whether it cost unshipped data.
        if let Some(hold) = &self.opts.ship_hold {
            plan.reasons |= if hold.shipped_count(&sealed) >= plan.remove {
                retention::REASON_SHIPPED
            } else {
                retention::REASON_UNSHIPPED
            };
        }
        let (record, paths) = retention::prepare(&sealed, &plan, active_prev_link);
        let unwritten = self.buf.len() as u64;
        self.release_reserve();
        let seq = self.encode_frame(&Record::new(
            PRUNE_RECORD_TYPE,
            self.last_ts,
            &record.encode(),
        ));
        self.finish_block();
        // IMPORTANT: if even the prune record cannot be written, nothing is removed.
        if let Err(e) = self.active.file.append(&self.buf) {
            let _ = self.active.file.truncate(self.active.written_len);
            return Err(self.disk_full(e, unwritten, NOT_WRITTEN));
        }
        self.wrote_buf();
        // IMPORTANT: durable before the first segment goes, as in every pruning.
        self.sync_active()?;
        self.remove_pruned(seq, record, &paths, &plan.evicted)?;
        Ok(true)
    }

    /// The largest payload this log accepts, in bytes.
    pub fn record_bytes_max(&self) -> usize {
        self.opts.record_bytes_max
    }

    /// Seq of the first record of the active segment (the next seq if it is empty).
    pub fn active_segment_first_seq(&self) -> Seq {
        Seq(self.active.first_seq)
    }

    /// Appends one record and returns its seq.
    ///
    /// # Errors
    ///
    /// [`Error::RecordTooLarge`], [`Error::TimestampRegression`] (nothing is written),
    /// [`Error::Poisoned`] after an earlier I/O failure, and I/O errors (which poison).
    pub fn append(&mut self, record: Record<'_>) -> Result<Seq> {
        self.check_record(&record, self.last_ts)?;
        self.check_seq_space(1)?;
        self.check_poisoned()?;
        let seq = self.push(&record)?;
        self.end_of_call()?;
        Ok(seq)
    }

    /// Appends records as one batch (one write, and in `Sync` mode one fdatasync) and
    /// returns the seq of the last one; `None` for an empty batch.
    ///
    /// The batch is checked whole first: if any record is refused, none is appended.
    ///
    /// # Errors
    ///
    /// As [`Log::append`].
    pub fn append_batch(&mut self, records: &[Record<'_>]) -> Result<Option<Seq>> {
        let mut last_ts = self.last_ts;
        for r in records {
            self.check_record(r, last_ts)?;
            last_ts = r.ts_ns;
        }
        self.check_seq_space(records.len())?;
        self.check_poisoned()?;
        let mut last = None;
        for r in records {
            last = Some(self.push(r)?);
        }
        self.end_of_call()?;
        Ok(last)
    }

    /// Writes everything appended so far to the operating system.
    ///
    /// # Errors
    ///
    /// I/O errors, which poison the log; [`Error::LockLost`] if the lock file was
    /// replaced or removed.
    pub fn flush(&mut self) -> Result<()> {
        self.check_poisoned()?;
        self.check_lock()?;
        self.write_out()
    }

    /// A barrier: returns once every record appended before it is durable.
    ///
    /// # Errors
    ///
    /// I/O errors, which poison the log: a failed fsync is never retried, because the
    /// kernel may have dropped the dirty data it could not write. [`Error::LockLost`]
    /// if the lock file was replaced or removed.
    pub fn sync(&mut self) -> Result<Option<Seq>> {
        self.check_poisoned()?;
        self.check_lock()?;
        self.write_out()?;
        self.sync_active()?;
        Ok(self.durable_seq())
    }

    /// Checks that the lock file is still the file this writer locked, and poisons the
    /// writer if not: whoever replaced or removed it may have let a second writer in,
    /// and two writers acknowledging appends would give two records one seq. One
    /// `lstat` per call that hands records to the OS or acknowledges them.
    fn check_lock(&mut self) -> Result<()> {
        let reason = match fs::symlink_metadata(&self.lock_path) {
            Ok(m) if (m.dev(), m.ino()) == self.lock_id => return Ok(()),
            Ok(_) => "was replaced by another file".to_owned(),
            Err(e) if e.kind() == io::ErrorKind::NotFound => "was removed".to_owned(),
            Err(e) => format!("cannot be checked ({e})"),
        };
        let err = Error::LockLost {
            lock: self.lock_path.clone(),
            reason,
        };
        self.poisoned = Some(Arc::new(io::Error::other(err.to_string())));
        Err(err)
    }

    /// Syncs everything and releases the directory. Dropping a `Log` writes its buffer
    /// to the OS but cannot report errors and does not fsync: prefer `close`.
    ///
    /// # Errors
    ///
    /// As [`Log::sync`].
    pub fn close(mut self) -> Result<Option<Seq>> {
        self.sync()
    }

    fn check_poisoned(&self) -> Result<()> {
        match &self.poisoned {
            Some(cause) => Err(Error::Poisoned {
                cause: Arc::clone(cause),
            }),
            None => Ok(()),
        }
    }

    /// Refuses `n` more records (and a preamble per segment they may start) when their
    /// seqs would run past the largest one: a log recovered from a crafted footer could
    /// otherwise wrap its seqs around.
    fn check_seq_space(&self, n: usize) -> Result<()> {
        // Per record: itself, and the preamble of a segment it starts; with a budget,
        // the prune records it may bring: the budget's at a seal, and on a full disk
        // one before the seal's footer, one for the reserve after it, and one after
        // the write that holds the record.
        let per_record =
            1 + self.preamble.len() as u64 + 4 * u64::from(self.opts.retention.is_bounded());
        let needed = (n as u64).saturating_mul(per_record);
        if self.next_seq.checked_add(needed).is_none() {
            return Err(Error::SeqSpaceExhausted {
                next_seq: self.next_seq,
            });
        }
        Ok(())
    }

    fn check_record(&self, r: &Record<'_>, last_ts: u64) -> Result<()> {
        if r.record_type == PRUNE_RECORD_TYPE {
            return Err(Error::ReservedRecordType {
                record_type: r.record_type.0,
            });
        }
        if r.payload.len() > self.opts.record_bytes_max {
            return Err(Error::RecordTooLarge {
                size_bytes: r.payload.len(),
                limit_bytes: self.opts.record_bytes_max,
            });
        }
        if r.ts_ns < last_ts {
            return Err(Error::TimestampRegression {
                ts_ns: r.ts_ns,
                last_ts_ns: last_ts,
            });
        }
        Ok(())
    }

    /// Encodes one checked record into the write buffer, rolling the block and the
    /// segment as needed.
    fn push(&mut self, r: &Record<'_>) -> Result<Seq> {
        let frame_len = format::frame_len(r.payload.len());
        if self.active.record_count > 0 {
            let too_old = match (self.opts.segment_age_max_ns, self.active.first_ts) {
                (Some(age), Some(first)) => r.ts_ns - first >= age,
                _ => false,
            };
            // The preamble does not count: a segment holds up to `segment_bytes_max`
            // bytes of records after it, however large the preamble has grown.
            let size_after = (self.active.written_len
                + self.buf.len() as u64
                + (BLOCK_HEADER_LEN + frame_len) as u64)
                .saturating_sub(self.active.preamble_bytes);
            if too_old || size_after > self.opts.segment_bytes_max {
                self.roll()?;
                // The preamble opens every new segment, stamped with the time of the
                // record that started it (no earlier than anything before, no later
                // than what follows).
                let start = self.active.written_len + self.buf.len() as u64;
                let preamble = std::mem::take(&mut self.preamble);
                for (record_type, payload) in &preamble {
                    self.push_frame(&Record::new(*record_type, r.ts_ns, payload))?;
                }
                self.preamble = preamble;
                self.active.preamble_bytes =
                    (self.active.written_len + self.buf.len() as u64).saturating_sub(start);
                if self.opts.retention.is_bounded() {
                    self.prune_at(r.ts_ns)?;
                    self.keep_reserve()?;
                }
            }
        }
        self.push_frame(r)
    }

    /// Encodes one record into the open block, cutting the block as needed, and in
    /// `Buffered` mode writes the buffer out when it is full.
    fn push_frame(&mut self, r: &Record<'_>) -> Result<Seq> {
        let seq = self.encode_frame(r);
        if self.opts.durability == Durability::Buffered
            && self.buf.len() >= self.opts.write_buffer_bytes
        {
            self.write_out()?;
        }
        Ok(seq)
    }

    /// Encodes one record into the open block, cutting the block as needed.
    fn encode_frame(&mut self, r: &Record<'_>) -> Seq {
        let frame_len = format::frame_len(r.payload.len());
        if let Some(b) = &self.open_block {
            let frames_len = self.buf.len() - b.start - BLOCK_HEADER_LEN;
            if frames_len + frame_len > self.opts.block_bytes_max
                || r.ts_ns - b.first_ts > u64::from(u32::MAX)
            {
                self.finish_block();
            }
        }
        let seq = self.next_seq;
        let block = match &mut self.open_block {
            Some(b) => b,
            None => {
                let start = self.buf.len();
                self.buf.resize(start + BLOCK_HEADER_LEN, 0);
                self.open_block.insert(OpenBlock {
                    start,
                    first_seq: seq,
                    first_ts: r.ts_ns,
                    last_ts: r.ts_ns,
                    count: 0,
                    tags: Some(Vec::new()),
                })
            }
        };
        if let Some(tags) = &mut block.tags
            && let Err(at) = tags.binary_search(&r.tag)
        {
            if tags.len() < format::MAX_BLOCK_TAGS {
                tags.insert(at, r.tag);
            } else {
                block.tags = None;
            }
        }
        let ts_delta = u32::try_from(r.ts_ns - block.first_ts)
            .expect("blocks are cut before a ts delta exceeds u32");
        block.count += 1;
        block.last_ts = r.ts_ns;
        let payload_len = u32::try_from(r.payload.len()).expect("checked against the 1 GiB limit");
        format::encode_frame(
            &mut self.buf,
            FrameHeader {
                payload_len,
                record_type: r.record_type.0,
                ts_delta,
            },
            seq,
            r.payload,
        );
        self.next_seq += 1;
        self.last_ts = r.ts_ns;
        let a = &mut self.active;
        a.record_count += 1;
        a.first_ts.get_or_insert(r.ts_ns);
        bump(&mut a.type_counts, r.record_type.0, 1);
        Seq(seq)
    }

    /// Closes the open block: compresses its frames when that saves enough, computes
    /// its chain link over the bytes stored and fills in its header.
    fn finish_block(&mut self) {
        let Some(b) = self.open_block.take() else {
            return;
        };
        let frames_at = b.start + BLOCK_HEADER_LEN;
        let compressed = match &mut self.compressor {
            Some(c) => match c.compress(&self.buf[frames_at..]) {
                Some(stored) => {
                    self.buf.truncate(frames_at);
                    self.buf.extend_from_slice(stored);
                    true
                }
                None => false,
            },
            None => false,
        };
        let stored_len = u32::try_from(self.buf.len() - frames_at)
            .expect("a block is at most block_bytes_max plus one record");
        let mut header = BlockHeader {
            stored_len,
            compressed,
            count: b.count,
            first_seq: b.first_seq,
            first_ts: b.first_ts,
            last_ts: b.last_ts,
            link: [0; 32],
        };
        let (head, frames) = self.buf[b.start..].split_at_mut(BLOCK_HEADER_LEN);
        header.link = self
            .chainer
            .link(frames, &header.chain_meta(), &self.last_link);
        header.encode_into(head);
        let offset = self.active.written_len + b.start as u64;
        add_index_entry(
            &mut self.active,
            IndexEntry {
                first_seq: b.first_seq,
                first_ts: b.first_ts,
                offset,
                prev_link: self.last_link,
            },
            self.opts.index_interval_bytes,
        );
        if let Some(tags) = b.tags {
            let a = &mut self.active;
            // Past the format's limits the index stops describing blocks: a read given
            // tags then reads those blocks.
            if a.tags.len() < format::MAX_FOOTER_TAG_ENTRIES
                && a.tags_listed + tags.len() <= format::MAX_FOOTER_TAGS
            {
                a.tags_listed += tags.len();
                a.tags.push(format::BlockTags {
                    first_seq: b.first_seq,
                    count: b.count,
                    tags,
                });
            }
        }
        self.active.block_count += 1;
        self.last_link = header.link;
    }

    /// Finishes the open block and hands the whole buffer to the OS.
    fn write_out(&mut self) -> Result<()> {
        self.finish_block();
        if self.buf.is_empty() {
            return Ok(());
        }
        // IMPORTANT: checked before the bytes reach the file, so a writer that lost its
        // lock writes nothing a second writer could be writing too.
        self.check_lock()?;
        if let Err(e) = self.active.file.append(&self.buf) {
            if is_disk_full(&e) {
                return self.write_on_full_disk(e);
            }
            return Err(self.poison("write segment", e));
        }
        self.wrote_buf();
        Ok(())
    }

    /// A write of the buffer that the disk refused for want of room (`first`).
    ///
    /// What of it reached the file is cut: the blocks are written again whole, where
    /// they belong, or not at all, and nothing the file does not hold is acknowledged.
    /// Then room is made, and the write tried once more: for a pruning under way, the
    /// reserve is given back for its record; otherwise, with a disk budget, the oldest
    /// unpinned sealed segments go (on the record). Without either, or when the retry
    /// fails, [`Error::DiskFull`], and the log is poisoned.
    fn write_on_full_disk(&mut self, first: io::Error) -> Result<()> {
        let unwritten = self.buf.len() as u64;
        if self.active.file.truncate(self.active.written_len).is_err() {
            return Err(self.disk_full(first, unwritten, NOT_WRITTEN));
        }
        if self.pruning {
            self.release_reserve();
            if let Err(e) = self.active.file.append(&self.buf) {
                let _ = self.active.file.truncate(self.active.written_len);
                return Err(self.disk_full(e, unwritten, NOT_WRITTEN));
            }
            self.wrote_buf();
            return Ok(());
        }
        let needed = unwritten.saturating_add(self.opts.disk_reserve_bytes);
        if self.prune_for_room(needed, &first)? {
            let _ = self.refill_reserve();
            return Ok(());
        }
        Err(self.disk_full(first, unwritten, NOT_WRITTEN))
    }

    /// Poisons the writer with a full disk, and returns the error that says so.
    fn disk_full(&mut self, source: io::Error, bytes: u64, what: &'static str) -> Error {
        let err = Error::DiskFull {
            dir: self.dir.clone(),
            bytes,
            what,
            source,
        };
        self.poisoned = Some(Arc::new(io::Error::new(
            io::ErrorKind::StorageFull,
            err.to_string(),
        )));
        err
    }

    /// Accounts for the buffer once it reached the file, and empties it.
    fn wrote_buf(&mut self) {
        self.active.written_len += self.buf.len() as u64;
        // Writeback is started a write buffer at a time: a hint per small flush-mode
        // batch would cost a system call per batch for nothing.
        let pending = self.active.written_len - self.active.writeback_from;
        if self.opts.durability != Durability::Sync
            && pending >= self.opts.write_buffer_bytes as u64
        {
            self.active
                .file
                .start_writeback(self.active.writeback_from, pending);
            self.active.writeback_from = self.active.written_len;
        }
        self.buf.clear();
        if let Some(last) = self.next_seq.checked_sub(1) {
            self.written = Some(Digest {
                seq: last,
                link: self.last_link,
            });
        }
    }

    fn sync_active(&mut self) -> Result<()> {
        if let Err(e) = self.active.file.sync_data() {
            // Never retried: the kernel may have dropped what it could not write.
            if is_disk_full(&e) {
                let bytes = self.active.written_len - self.active.synced_len;
                return Err(self.disk_full(e, bytes, NOT_SYNCED));
            }
            return Err(self.poison("fsync segment", e));
        }
        self.active.synced_len = self.active.written_len;
        self.durable_seq = self.written.map(|d| d.seq);
        Ok(())
    }

    fn end_of_call(&mut self) -> Result<()> {
        match self.opts.durability {
            Durability::Buffered => Ok(()),
            Durability::Flush => self.write_out(),
            Durability::Sync => {
                self.write_out()?;
                self.sync_active()
            }
        }
    }

    fn poison(&mut self, op: &'static str, e: io::Error) -> Error {
        self.poisoned = Some(Arc::new(io::Error::new(
            e.kind(),
            format!("{op} {}: {e}", self.active.path.display()),
        )));
        Error::io(op, &self.active.path, e)
    }

    /// Seals the active segment and starts the next one.
    fn roll(&mut self) -> Result<()> {
        self.write_out()?;
        // IMPORTANT: the footer is fsynced and the file made read-only before the next
        // segment exists, so a segment followed by another is always completely sealed.
        let footer = self.footer().encode();
        if let Err(e) = self.active.file.append(&footer) {
            if !is_disk_full(&e) {
                return Err(self.poison("write footer of", e));
            }
            // The part written is cut; a pruning on the full disk puts its record
            // before the footer, which is then built again and written once more.
            let bytes = footer.len() as u64;
            if self.active.file.truncate(self.active.written_len).is_err()
                || !self.prune_for_room(bytes.saturating_add(self.opts.disk_reserve_bytes), &e)?
            {
                return Err(self.disk_full(e, bytes, FOOTER_NOT_WRITTEN));
            }
            let footer = self.footer().encode();
            if let Err(e) = self.active.file.append(&footer) {
                let _ = self.active.file.truncate(self.active.written_len);
                return Err(self.disk_full(e, footer.len() as u64, FOOTER_NOT_WRITTEN));
            }
            let _ = self.refill_reserve();
        }
        self.sync_active()?;
        let sealed = self.active.path.clone();
        if let Err(e) = self.opts.storage.set_read_only(&sealed) {
            return Err(self.poison("make read-only", e));
        }
        let point = ChainPoint {
            next_seq: self.next_seq,
            last_ts: self.last_ts,
            link: self.last_link,
        };
        let key_id = self.opts.key.as_ref().map(|_| self.key_id);
        let mut created = create_segment(&self.dir, &*self.opts.storage, &point, key_id);
        if let Err(Error::Io { source, .. }) = &created
            && is_disk_full(source)
            && self.reserved
        {
            // The new segment's header did not fit: the file goes (the log then ends
            // at the segment just sealed, as after a crash between a seal and the next
            // segment), the reserve is given back for it, and it is tried once more.
            // The seal's pruning takes the reserve again (`keep_reserve`).
            let new_path = self.dir.join(format::segment_file_name(point.next_seq));
            if self.opts.storage.remove_file(&new_path).is_ok()
                && self.opts.storage.sync_dir(&self.dir).is_ok()
            {
                self.release_reserve();
                created = create_segment(&self.dir, &*self.opts.storage, &point, key_id);
            }
        }
        match created {
            Ok(active) => {
                self.active = active;
                self.segments += 1;
                Ok(())
            }
            Err(Error::Io { source, .. }) if is_disk_full(&source) => {
                Err(self.disk_full(source, SEGMENT_HEADER_LEN as u64, HEADER_NOT_WRITTEN))
            }
            Err(e) => {
                self.poisoned = Some(Arc::new(io::Error::other(e.to_string())));
                Err(e)
            }
        }
    }

    /// The active segment's footer, as it would seal it now.
    fn footer(&self) -> Footer {
        let a = &self.active;
        let mut footer = Footer {
            record_count: a.record_count,
            block_count: a.block_count,
            first_seq: a.first_seq,
            last_seq: self.next_seq - 1,
            first_ts: a.first_ts.unwrap_or(0),
            last_ts: self.last_ts,
            last_link: self.last_link,
            type_counts: a
                .type_counts
                .iter()
                .enumerate()
                .filter(|(_, n)| **n > 0)
                .map(|(t, n)| (u16::try_from(t).unwrap_or(u16::MAX), *n))
                .collect(),
            index: a.index.clone(),
            tags: a.tags.clone(),
            tag_mac: [0; 32],
        };
        footer.tag_mac = self.chainer.tag_mac(&footer.tag_mac_message());
        footer
    }
}

/// What a full disk kept from being written, for [`Error::DiskFull`].
const NOT_WRITTEN: &str = "records could not be written";
const NOT_SYNCED: &str = "records written since the last fsync could not be made durable";
const FOOTER_NOT_WRITTEN: &str = "a segment's footer could not be written";
const HEADER_NOT_WRITTEN: &str = "a new segment's header could not be written";

/// Whether a write or fsync failed because the disk is full.
/// A write refused for want of room: a full filesystem, or a full quota.
fn is_disk_full(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::StorageFull
        || e.kind() == io::ErrorKind::QuotaExceeded
        || matches!(e.raw_os_error(), Some(libc::ENOSPC | libc::EDQUOT))
}

impl Drop for Log {
    fn drop(&mut self) {
        if self.poisoned.is_none() {
            // Best effort: errors cannot be reported from drop; `close` reports them.
            let _ = self.write_out();
        }
    }
}

fn bump(counts: &mut Vec<u64>, t: u16, n: u64) {
    let i = usize::from(t);
    if counts.len() <= i {
        counts.resize(i + 1, 0);
    }
    counts[i] += n;
}

fn add_index_entry(active: &mut Active, e: IndexEntry, interval: u64) {
    let due = match active.last_indexed_offset {
        None => true,
        // Past the format's limit a segment's index stops growing: a seek then skips
        // more block headers, and the footer stays within what readers accept.
        Some(_) if active.index.len() >= format::MAX_FOOTER_INDEX_ENTRIES => false,
        Some(last) => e.offset - last >= interval,
    };
    if due {
        active.index.push(e);
        active.last_indexed_offset = Some(e.offset);
    }
}

fn create_segment(
    dir: &Path,
    storage: &dyn Storage,
    point: &ChainPoint,
    key_id: Option<[u8; 32]>,
) -> Result<Active> {
    let path = dir.join(format::segment_file_name(point.next_seq));
    let file = storage
        .create(&path)
        .map_err(|e| Error::io("create segment", &path, e))?;
    let mut active = Active::empty(path, file, point.next_seq);
    write_segment_header(&mut active, point, key_id, dir, storage)?;
    Ok(active)
}

fn write_segment_header(
    active: &mut Active,
    point: &ChainPoint,
    key_id: Option<[u8; 32]>,
    dir: &Path,
    storage: &dyn Storage,
) -> Result<()> {
    let header = SegmentHeader {
        version: FORMAT_VERSION,
        flags: if key_id.is_some() { FLAG_KEYED } else { 0 },
        first_seq: point.next_seq,
        prev_link: point.link,
        key_id: key_id.unwrap_or([0; 32]),
    };
    // IMPORTANT: header, file and directory entry are durable before any record goes in.
    active
        .file
        .append(&header.encode())
        .and_then(|()| active.file.sync_data())
        .map_err(|e| Error::io("write segment header", &active.path, e))?;
    storage
        .sync_dir(dir)
        .map_err(|e| Error::io("fsync log directory", dir, e))?;
    active.written_len = SEGMENT_HEADER_LEN as u64;
    active.synced_len = active.written_len;
    Ok(())
}

/// Checks magic and version of a segment without a lock, before anything is written, so
/// a foreign or newer directory is refused untouched.
fn precheck_header(entry: &SegmentEntry) -> Result<()> {
    let mut head = [0u8; 12];
    let mut f = segment::open_regular(entry)?;
    let n = read_up_to(&mut f, &mut head).map_err(|e| Error::io("read", &entry.path, e))?;
    if head[..n].iter().all(|&b| b == 0) {
        return Ok(()); // possibly a creation cut short by a crash: recovery decides
    }
    // A file shorter than the magic is a torn creation only if it starts like one; so
    // is a file of a header's length whose written bytes end inside the magic (a power
    // loss tore the header's write: the rest reads zero).
    let mut m = n;
    if f.metadata()
        .map_err(|e| Error::io("inspect", &entry.path, e))?
        .len()
        == SEGMENT_HEADER_LEN as u64
    {
        m = head[..n].iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
    }
    let m = m.min(format::SEGMENT_MAGIC.len());
    if head[..m] != format::SEGMENT_MAGIC[..m] {
        return Err(Error::NotALog {
            dir: entry.path.parent().unwrap_or(Path::new("")).to_owned(),
            reason: format!(
                "{} does not start with the segment magic number",
                entry.path.display()
            ),
        });
    }
    let version = if n == 12 { format::u32_at(&head, 8) } else { 0 };
    if version != 0 && version != FORMAT_VERSION {
        return Err(Error::UnsupportedVersion {
            segment: entry.path.clone(),
            found: version,
            supported: FORMAT_VERSION,
        });
    }
    Ok(())
}

fn read_up_to(f: &mut File, buf: &mut [u8]) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match f.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// Creates (or opens) and locks the lock file; returns it with the (device, inode) it
/// was locked as.
fn lock_dir(dir: &Path) -> Result<(File, (u64, u64))> {
    let path = dir.join(LOCK_FILE_NAME);
    // Never through a symbolic link: the writer truncates the lock file and writes its
    // pid into it, which must not land in a file outside the log.
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(&path)
        .map_err(|e| Error::io("open lock file", &path, e))?;
    let meta = file
        .metadata()
        .map_err(|e| Error::io("inspect lock file", &path, e))?;
    if !meta.is_file() {
        return Err(Error::NotALog {
            dir: dir.to_owned(),
            reason: format!(
                "its {LOCK_FILE_NAME} is {}, not the regular file a writer locks",
                segment::file_type_name(&meta.file_type())
            ),
        });
    }
    match file.try_lock() {
        Ok(()) => {}
        Err(fs::TryLockError::WouldBlock) => {
            // The holder wrote its pid and a newline: read no more than that, whatever
            // the file has grown to.
            let mut head = Vec::with_capacity(32);
            let _ = (&mut file).take(32).read_to_end(&mut head);
            let holder_pid = std::str::from_utf8(&head)
                .ok()
                .and_then(|t| t.lines().next())
                .and_then(|line| line.trim().parse().ok());
            return Err(Error::Locked {
                dir: dir.to_owned(),
                holder_pid,
            });
        }
        Err(fs::TryLockError::Error(e)) => return Err(Error::io("lock", &path, e)),
    }
    // The file locked must be the one the path names now: another process may have
    // removed or replaced it between our open and our lock.
    let id = (meta.dev(), meta.ino());
    match fs::symlink_metadata(&path) {
        Ok(now) if (now.dev(), now.ino()) == id => {}
        _ => {
            return Err(Error::Locked {
                dir: dir.to_owned(),
                holder_pid: None,
            });
        }
    }
    file.set_len(0)
        .and_then(|()| writeln!(file, "{}", std::process::id()))
        .map_err(|e| Error::io("write lock file", &path, e))?;
    Ok((file, id))
}

/// The state of the last segment after recovery's scan.
#[derive(Debug)]
struct LastSegment {
    path: PathBuf,
    first_seq: u64,
    file_len: u64,
    sealed: bool,
    header_torn: bool,
    torn: Option<(u64, String)>,
    data_end: u64,
    record_count: u64,
    first_ts: Option<u64>,
    type_counts: std::collections::BTreeMap<u16, u64>,
    blocks: Vec<IndexEntry>,
}

#[derive(Debug)]
struct Recovered {
    segments: Vec<SegmentEntry>,
    point: ChainPoint,
    last: Option<LastSegment>,
    /// The newest prune record, when it explains where the log starts.
    prune: Option<PruneRecord>,
}

/// Checks the structure of every segment and scans the last one fully.
fn recover(
    dir: &Path,
    key_id: Option<[u8; 32]>,
    chainer: &Chainer,
    verify_all: bool,
) -> Result<Recovered> {
    let segments = segment::list_segments(dir)?;
    let mut point = ChainPoint {
        next_seq: 0,
        last_ts: 0,
        link: GENESIS_LINK,
    };
    let mut last = None;
    // Where the log starts, when past seq 0: a cut a prune record must explain.
    let mut cut: Option<(PathBuf, ChainPoint)> = None;
    // The newest sealed segment whose footer counts a prune record, with the chain point
    // before it; and the last prune record of the last segment.
    let mut sealed_with_prune: Option<(Arc<SegmentFile>, ChainPoint)> = None;
    let mut last_prune = None;
    for (i, entry) in segments.iter().enumerate() {
        let is_last = i + 1 == segments.len();
        let seg = match SegmentFile::open(entry, key_id, false)? {
            HeaderState::Ok(seg) => Arc::new(seg),
            HeaderState::Torn { path, len } if is_last => {
                if entry.first_seq != point.next_seq {
                    return Err(Corruption {
                        segment: path,
                        offset: 0,
                        seq: Some(entry.first_seq),
                        kind: CorruptionKind::SeqGap {
                            expected: point.next_seq,
                            found: entry.first_seq,
                        },
                    }
                    .into());
                }
                last = Some(LastSegment {
                    path,
                    first_seq: entry.first_seq,
                    file_len: len,
                    sealed: false,
                    header_torn: true,
                    torn: None,
                    data_end: SEGMENT_HEADER_LEN as u64,
                    record_count: 0,
                    first_ts: None,
                    type_counts: Default::default(),
                    blocks: Vec::new(),
                });
                break;
            }
            HeaderState::Torn { path, .. } => {
                return Err(Corruption {
                    segment: path,
                    offset: 0,
                    seq: Some(entry.first_seq),
                    kind: CorruptionKind::SegmentHeader("truncated or zeroed".to_owned()),
                }
                .into());
            }
        };
        if i == 0
            && let Some(start) = retention::cut_start(&seg)
        {
            point = start;
            cut = Some((seg.path.clone(), start));
        }
        check_continuity(&seg, &point, i == 0 && cut.is_none())?;
        let footer = if is_last { None } else { seg.read_footer()? };
        if !is_last && footer.is_none() {
            return Err(structure::missing_footer(&seg, &segments, i));
        }
        if let Some((f, _)) = &footer
            && f.type_counts.iter().any(|&(t, _)| t == PRUNE_RECORD_TYPE.0)
        {
            sealed_with_prune = Some((Arc::clone(&seg), point));
        }
        if is_last || verify_all {
            let scan = scan::scan_segment(&seg, point, Some(chainer), is_last, false)?;
            if is_last {
                last_prune = scan.last_prune.clone().map(|(_, _, r)| r);
                let torn = match &scan.tail {
                    Tail::Torn { offset, detail } => Some((*offset, detail.clone())),
                    _ => None,
                };
                last = Some(LastSegment {
                    path: seg.path.clone(),
                    first_seq: entry.first_seq,
                    file_len: seg.len,
                    sealed: matches!(scan.tail, Tail::Sealed { .. }),
                    header_torn: false,
                    torn,
                    data_end: scan.data_end,
                    record_count: scan.record_count,
                    first_ts: scan.first_ts,
                    type_counts: scan.type_counts,
                    blocks: scan.blocks,
                });
            }
            point = scan.end;
        } else if let Some((footer, footer_start)) = footer {
            point = structure::point_after_footer(&seg, &footer, footer_start, &point)?;
        }
    }
    let prune = match (last_prune, sealed_with_prune) {
        (Some(p), _) => Some(p),
        (None, Some((seg, start))) => scan::scan_segment(&seg, start, Some(chainer), false, false)?
            .last_prune
            .map(|(_, _, r)| r),
        (None, None) => None,
    };
    let explains =
        |p: &PruneRecord, start: &ChainPoint| p.explains_start(start.next_seq, &start.link);
    if let Some((path, start)) = &cut
        && !prune.as_ref().is_some_and(|p| explains(p, start))
    {
        return Err(retention::missing_start(path, start.next_seq));
    }
    let start = cut.map_or(
        ChainPoint {
            next_seq: 0,
            last_ts: 0,
            link: GENESIS_LINK,
        },
        |(_, start)| start,
    );
    Ok(Recovered {
        segments,
        point,
        last,
        prune: prune.filter(|p| explains(p, &start)),
    })
}

/// Checks that a segment continues the chain where the previous one ended.
pub(crate) fn check_continuity(
    seg: &SegmentFile,
    point: &ChainPoint,
    is_first: bool,
) -> Result<()> {
    let h = &seg.header;
    let corrupt = |kind| {
        Error::from(Corruption {
            segment: seg.path.clone(),
            offset: 0,
            seq: Some(h.first_seq),
            kind,
        })
    };
    if is_first && (h.first_seq != 0 || h.prev_link != GENESIS_LINK) {
        return Err(corrupt(CorruptionKind::MissingStart {
            first_seq: h.first_seq,
        }));
    }
    if h.first_seq != point.next_seq {
        return Err(corrupt(CorruptionKind::SeqGap {
            expected: point.next_seq,
            found: h.first_seq,
        }));
    }
    if h.prev_link != point.link {
        return Err(corrupt(CorruptionKind::ChainBreak));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_quota_is_a_full_disk_and_other_errors_are_not() {
        for errno in [libc::ENOSPC, libc::EDQUOT] {
            assert!(
                is_disk_full(&io::Error::from_raw_os_error(errno)),
                "{errno}"
            );
        }
        for errno in [libc::EIO, libc::EROFS, libc::EACCES] {
            assert!(
                !is_disk_full(&io::Error::from_raw_os_error(errno)),
                "{errno}"
            );
        }
    }

    #[derive(Debug)]
    struct NullFile;

    impl WriteFile for NullFile {
        fn append(&mut self, _: &[u8]) -> io::Result<()> {
            Ok(())
        }
        fn sync_data(&mut self) -> io::Result<()> {
            Ok(())
        }
        fn truncate(&mut self, _: u64) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_segments_index_stops_growing_at_the_formats_limit() {
        let mut active = Active::empty(PathBuf::from("x"), Box::new(NullFile), 0);
        let blocks = format::MAX_FOOTER_INDEX_ENTRIES as u64 + 10;
        for i in 0..blocks {
            let e = IndexEntry {
                first_seq: i,
                first_ts: i,
                offset: SEGMENT_HEADER_LEN as u64 + i * 80,
                prev_link: GENESIS_LINK,
            };
            add_index_entry(&mut active, e, 1);
        }
        assert_eq!(active.index.len(), format::MAX_FOOTER_INDEX_ENTRIES);
        let footer = Footer {
            index: active.index,
            type_counts: (0..=u16::MAX).map(|t| (t, 1)).collect(),
            tags: (0..format::MAX_FOOTER_TAG_ENTRIES as u64)
                .map(|i| format::BlockTags {
                    first_seq: i,
                    count: 1,
                    tags: vec![1, 2, 3, 4],
                })
                .collect(),
            ..Footer::default()
        };
        let encoded = footer.encode();
        let body_len = encoded.len() - format::TRAILER_LEN;
        assert_eq!(body_len, format::MAX_FOOTER_BODY_BYTES);
    }
}
