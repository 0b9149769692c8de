//! Power-loss simulation: what the disk holds after a power cut, not after a process
//! death.
//!
//! Each cycle writes a log through [`PowerLossStorage`], which records every write,
//! cut, fsync and directory change, then takes a crash image (see its documentation for
//! the fault model: synced data survives; unsynced 4 KiB pages survive or not, each on
//! its own and in any order, a lost one reading as its old content; the length is that
//! after some prefix of the calls that changed it; the last write is torn at a random
//! byte; directory changes since the last directory fsync survive as a prefix, so a
//! new file may be missing and a removed one back), reopens the image and requires:
//!
//! - open succeeds;
//! - every acknowledged record (up to the writer's `durable_seq`, which `Sync` appends
//!   and `sync` calls move) is there with exactly the content written, unless a pruning
//!   removed it;
//! - every record read is the one the test last wrote at its seq (no garbage, no
//!   record of an earlier life of the log), in order, seqs dense from the first retained;
//! - `verify` passes, and matches the digest taken at the last acknowledgement;
//! - what recovery cut is reported: a segment shorter after open than in the image is
//!   shorter by exactly `torn_bytes_cut`, and the records from `first_lost_seq` on are
//!   gone;
//! - the reopened log goes on: each cycle crashes 1 to 3 times on the same directory, so
//!   recovery's own writes (a cut, a header written again) go through the simulation too.
//!
//! The operations are random: appends and batches in every durability mode, flushes,
//! syncs, rolls of small segments, prunings by age (explicit and after seals), keyed
//! and unkeyed chains, compressed blocks. Every cycle has its own seed; a failure
//! prints it and keeps the image.
//!
//! CI runs 300 cycles. The long mode (`BLACKBOX_POWER_CYCLES`, and
//! `BLACKBOX_POWER_SEED` for another base seed):
//!
//! ```text
//! BLACKBOX_POWER_CYCLES=10000 cargo test -p blackbox-log --release --test power_loss -- --nocapture
//! ```
#![expect(clippy::unwrap_used, reason = "tests fail loudly on any error")]
#![allow(
    clippy::cast_possible_truncation,
    reason = "test data is generated from small numbers and random bits"
)]

mod common;

use common::{FailureContext, SplitMix64};
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use blackbox_log::format::SEGMENT_HEADER_LEN;
use blackbox_log::retention::PRUNE_RECORD_TYPE;
use blackbox_log::storage::{CrashImage, PowerLossStorage};
use blackbox_log::{
    ChainKey, Compression, Digest, Durability, Log, LogOptions, LogReader, ReaderOptions, Record,
    RecordType, Retention, Seq, list_segments, verify,
};

const CYCLES_ENV: &str = "BLACKBOX_POWER_CYCLES";
const SEED_ENV: &str = "BLACKBOX_POWER_SEED";
const DEFAULT_CYCLES: u64 = 300;
const DEFAULT_SEED: u64 = 0x00B1_AC5B_0C5D_0A11;

const TS_BASE: u64 = 1_700_000_000_000_000_000;
/// Sealed segments whose newest record is older than this before the newest one go.
const MAX_AGE_NS: u64 = 20_000_000_000;

/// A record as the test wrote it at its seq.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Written {
    record_type: u16,
    ts: u64,
    payload: Vec<u8>,
}

/// The test's own account of the log: the record it last wrote at each seq (its own
/// records, and the prune records the writer reported), what was acknowledged, and
/// what prunings may have removed.
#[derive(Debug, Default)]
struct Model {
    records: BTreeMap<u64, Written>,
    /// Highest seq the writer called durable.
    acked: Option<u64>,
    /// The digest taken when everything written was durable, the newest such.
    acked_digest: Option<Digest>,
    /// Highest seq a pruning named: records up to it may be gone.
    pruned_up_to: Option<u64>,
    last_ts: u64,
    /// After each call of this life of the log: the storage's call count, and what was
    /// acknowledged then (`acked`, `acked_digest`), for a power cut inside a later call.
    history: Vec<(u64, Option<u64>, Option<Digest>)>,
}

impl Model {
    fn note(&mut self, storage: &PowerLossStorage) {
        self.history
            .push((storage.calls(), self.acked, self.acked_digest));
    }

    /// Rewinds what was acknowledged to what it was at a power cut after `calls`.
    fn cut_at(&mut self, calls: u64) {
        let (_, acked, digest) = self
            .history
            .iter()
            .rev()
            .find(|(c, ..)| *c <= calls)
            .copied()
            .expect("the life's start is noted");
        self.acked = acked;
        self.acked_digest = digest;
        self.history.clear();
    }
}

#[derive(Debug, Default)]
struct Stats {
    crashes: u64,
    inside_calls: u64,
    image: CrashImage,
    records_written: u64,
    acked_records: u64,
    unacked_lost: u64,
    unacked_kept: u64,
    cuts: u64,
    bytes_cut: u64,
    header_rewrites: u64,
    prunings: u64,
    prunings_finished: u64,
}

/// The log's options for one life of the log: drawn once per cycle (`shape`) and per
/// reopen (durability).
#[derive(Debug, Clone, Copy)]
struct Shape {
    segment_bytes: u64,
    block_bytes: usize,
    index_interval: u64,
    keyed: bool,
    compressed: bool,
    pruning: bool,
    reserve: u64,
}

impl Shape {
    fn draw(rng: &mut SplitMix64) -> Shape {
        Shape {
            segment_bytes: 4096 + rng.below(12_000),
            block_bytes: 256 + usize::try_from(rng.below(2048)).unwrap(),
            index_interval: 1 + rng.below(4096),
            keyed: rng.below(3) == 0,
            compressed: rng.below(4) == 0,
            pruning: rng.below(2) == 0,
            reserve: if rng.below(2) == 0 { 0 } else { 4096 },
        }
    }

    fn key(self) -> Option<ChainKey> {
        self.keyed.then(|| ChainKey::new([0x5A; 32]))
    }

    fn options(self, storage: &PowerLossStorage, durability: Durability) -> LogOptions {
        let mut opts = LogOptions::new()
            .durability(durability)
            .segment_bytes_max(self.segment_bytes)
            .block_bytes_max(self.block_bytes)
            .index_interval_bytes(self.index_interval)
            .key(self.key())
            .disk_reserve_bytes(self.reserve)
            .storage(Arc::new(storage.clone()));
        if self.compressed {
            opts = opts.compression(Compression::Zstd { level: 1 });
        }
        if self.pruning {
            opts = opts.retention(Retention {
                max_bytes: None,
                max_age_ns: Some(MAX_AGE_NS),
                pinned_max_bytes: 0,
            });
        }
        opts
    }
}

fn draw_durability(rng: &mut SplitMix64) -> Durability {
    match rng.below(3) {
        0 => Durability::Buffered,
        1 => Durability::Flush,
        _ => Durability::Sync,
    }
}

/// A new record: random type, payload (often compressible) and a timestamp at or after
/// the last, sometimes far after (past a block's 32-bit delta, and past the age limit).
fn new_record(rng: &mut SplitMix64, model: &mut Model) -> Written {
    let step = match rng.below(20) {
        0 => 5_000_000_000 + rng.below(10_000_000_000),
        1..=3 => 0,
        _ => rng.below(50_000_000),
    };
    model.last_ts = model.last_ts.max(TS_BASE) + step;
    let len = usize::try_from(rng.below(700)).unwrap();
    let payload = if rng.below(2) == 0 {
        (0..len).map(|_| rng.next_u64() as u8).collect()
    } else {
        let b = rng.next_u64() as u8;
        vec![b; len]
    };
    Written {
        record_type: u16::try_from(rng.below(8)).unwrap(),
        ts: model.last_ts,
        payload,
    }
}

/// After a call that may have appended: places the prune records the writer reports
/// and the test's `mine` (in order) at the seqs from `first` to the writer's next seq.
fn account(log: &mut Log, model: &mut Model, first: u64, mine: Vec<Written>, stats: &mut Stats) {
    let next = log.next_seq().0;
    let mut prunes: BTreeMap<u64, Written> = BTreeMap::new();
    for (seq, record) in log.take_pruned() {
        stats.prunings += 1;
        model.pruned_up_to = model.pruned_up_to.max(Some(record.last_seq));
        prunes.insert(
            seq.0,
            Written {
                record_type: PRUNE_RECORD_TYPE.0,
                ts: u64::MAX, // the writer's choice: checked by type and content only
                payload: record.encode(),
            },
        );
    }
    let mut mine = mine.into_iter();
    for seq in first..next {
        let w = match prunes.remove(&seq) {
            Some(p) => p,
            None => mine.next().unwrap_or_else(|| {
                panic!("the writer holds seq {seq} that neither the test nor a pruning wrote")
            }),
        };
        model.records.insert(seq, w);
    }
    assert!(mine.next().is_none(), "records of the test got no seq");
    assert!(
        prunes.is_empty(),
        "a pruning reported a seq outside the call"
    );
    stats.records_written += next - first;
    if let Some(d) = log.durable_seq() {
        model.acked = model.acked.max(Some(d.0));
        if log.digest().is_some_and(|g| g.seq == d.0) {
            model.acked_digest = log.digest();
        }
    }
}

/// Random operations on an open log.
fn run_ops(
    log: &mut Log,
    storage: &PowerLossStorage,
    rng: &mut SplitMix64,
    model: &mut Model,
    stats: &mut Stats,
) {
    for _ in 0..1 + rng.below(40) {
        let first = log.next_seq().0;
        match rng.below(10) {
            0..=3 => {
                let w = new_record(rng, model);
                let seq = log
                    .append(Record::new(RecordType(w.record_type), w.ts, &w.payload))
                    .unwrap();
                assert!(seq.0 >= first);
                account(log, model, first, vec![w], stats);
            }
            4..=6 => {
                let n = 1 + rng.below(25);
                let batch: Vec<Written> = (0..n).map(|_| new_record(rng, model)).collect();
                let records: Vec<Record<'_>> = batch
                    .iter()
                    .map(|w| Record::new(RecordType(w.record_type), w.ts, &w.payload))
                    .collect();
                log.append_batch(&records).unwrap();
                account(log, model, first, batch, stats);
            }
            7 => {
                log.flush().unwrap();
                account(log, model, first, Vec::new(), stats);
            }
            8 => {
                log.sync().unwrap();
                account(log, model, first, Vec::new(), stats);
            }
            _ => {
                log.prune().unwrap();
                account(log, model, first, Vec::new(), stats);
            }
        }
        model.note(storage);
    }
}

fn segment_lengths(dir: &Path) -> BTreeMap<PathBuf, u64> {
    list_segments(dir)
        .unwrap()
        .into_iter()
        .map(|s| {
            let len = fs::metadata(&s.path).unwrap().len();
            (s.path.file_name().unwrap().into(), len)
        })
        .collect()
}

/// Opens a crash image and checks it against the model; returns the reopened log.
fn reopen_and_check(
    image: &Path,
    shape: Shape,
    durability: Durability,
    model: &mut Model,
    stats: &mut Stats,
) -> (Log, PowerLossStorage) {
    let before = segment_lengths(image);
    let storage = PowerLossStorage::new(image).unwrap();
    let (log, recovery) = Log::open(image, shape.options(&storage, durability))
        .unwrap_or_else(|e| panic!("open of the crash image failed: {e}"));
    let next = log.next_seq().0;
    assert_eq!(recovery.last_seq.map_or(0, |s| s.0 + 1), next);

    // What was cut is reported, by the byte.
    let after = segment_lengths(image);
    let finished: Vec<PathBuf> = recovery
        .pruning_finished
        .iter()
        .map(|p| p.file_name().unwrap().into())
        .collect();
    stats.prunings_finished += finished.len() as u64;
    let torn: Option<PathBuf> = recovery
        .torn_segment
        .as_ref()
        .map(|p| p.file_name().unwrap().into());
    for (name, &len) in &before {
        if finished.contains(name) {
            assert!(!after.contains_key(name), "{name:?} was not removed");
            continue;
        }
        let now = *after
            .get(name)
            .unwrap_or_else(|| panic!("recovery removed {name:?} without saying so"));
        if torn.as_ref() == Some(name) {
            if now == SEGMENT_HEADER_LEN as u64 && recovery.torn_bytes_cut == len {
                stats.header_rewrites += 1;
            } else {
                assert_eq!(
                    now + recovery.torn_bytes_cut,
                    len,
                    "{name:?}: recovery cut other than it reported"
                );
            }
        } else {
            assert_eq!(now, len, "{name:?} changed length, no cut reported");
        }
    }
    if recovery.torn_bytes_cut > 0 {
        stats.cuts += 1;
        stats.bytes_cut += recovery.torn_bytes_cut;
        assert_eq!(recovery.first_lost_seq, Some(Seq(next)));
    }

    // Every acknowledged record is there, unless pruned.
    if let Some(acked) = model.acked {
        assert!(
            next > acked,
            "acknowledged seq {acked} lost: the recovered log ends before seq {next}"
        );
    }
    let written_end = model.records.keys().next_back().map_or(0, |s| s + 1);
    assert!(
        next <= written_end,
        "the log holds seq {next}, never written"
    );

    // Every record is the one last written at its seq, dense from the first retained.
    let reader = LogReader::open_with(image, ReaderOptions { key: shape.key() }).unwrap();
    let mut want: Option<u64> = None;
    for r in reader.records(..).unwrap() {
        let r = r.unwrap_or_else(|e| panic!("reading after seq {want:?}: {e}"));
        let seq = r.seq().0;
        match want {
            None => {
                let may_start = model.pruned_up_to.map_or(0, |p| p + 1);
                assert!(
                    seq <= may_start,
                    "the log starts at seq {seq}, pruned only up to {:?}",
                    model.pruned_up_to
                );
            }
            Some(w) => assert_eq!(seq, w, "seqs are not dense"),
        }
        let w = model
            .records
            .get(&seq)
            .unwrap_or_else(|| panic!("seq {seq} was never written"));
        assert_eq!(r.record_type().0, w.record_type, "type of seq {seq}");
        if w.record_type != PRUNE_RECORD_TYPE.0 {
            assert_eq!(r.ts_ns(), w.ts, "timestamp of seq {seq}");
        }
        assert!(r.payload() == w.payload, "payload of seq {seq} is garbage");
        want = Some(seq + 1);
    }
    assert_eq!(
        want.unwrap_or(next),
        next,
        "the reader ends elsewhere than recovery"
    );

    // The chain verifies, and still holds the acknowledged prefix.
    let key = shape.key();
    let report = verify(image, key.as_ref(), model.acked_digest.as_ref())
        .unwrap_or_else(|e| panic!("verify of the recovered image failed: {e}"));
    assert_eq!(report.torn_tail, None, "recovery left a torn tail");
    if model.acked_digest.is_some() {
        assert!(
            report.digest_matched || report.digest_pruned,
            "the acknowledged digest neither matched nor was pruned"
        );
    }

    // The model now ends where the log does.
    let unacked_from = model.acked.map_or(0, |a| a + 1);
    for seq in next..written_end {
        assert!(seq >= unacked_from);
        stats.unacked_lost += 1;
    }
    stats.unacked_kept += next.saturating_sub(unacked_from);
    model.records.split_off(&next);
    model.acked = next.checked_sub(1);
    model.acked_digest = log.digest();
    (log, storage)
}

fn run_cycle(seed: u64, ctx: &mut FailureContext, stats: &mut Stats) {
    let tmp = tempfile::Builder::new()
        .prefix("blackbox-power")
        .tempdir()
        .unwrap();
    let mut rng = SplitMix64(seed);
    let shape = Shape::draw(&mut rng);
    let mut model = Model::default();
    let mut dir = tmp.path().join("life0");
    ctx.dir = Some(tmp);
    let mut storage = PowerLossStorage::new(&dir).unwrap();
    let (mut log, _) = Log::open(&dir, shape.options(&storage, draw_durability(&mut rng))).unwrap();
    model.note(&storage);
    for crash in 1..=1 + rng.below(3) {
        let image = ctx
            .dir
            .as_ref()
            .unwrap()
            .path()
            .join(format!("life{crash}"));
        // Two cuts in three come inside a call (a roll, a pruning, a sync), the
        // others after the last call.
        let image_seed = rng.next_u64();
        if rng.below(3) != 0 {
            storage.arm_crash(rng.below(60), &image, image_seed);
        }
        run_ops(&mut log, &storage, &mut rng, &mut model, stats);
        let report = match storage.armed_image() {
            Some(taken) => {
                stats.inside_calls += 1;
                taken.unwrap()
            }
            None => storage.crash_image(&image, image_seed).unwrap(),
        };
        model.cut_at(report.calls);
        // What the old life's writer does from here on reaches only its own directory.
        drop(log);
        stats.crashes += 1;
        stats.acked_records += model.acked.map_or(0, |a| a + 1);
        let i = &mut stats.image;
        i.files += report.files;
        i.pages_dirty += report.pages_dirty;
        i.pages_dropped += report.pages_dropped;
        i.writes_torn += report.writes_torn;
        i.files_lost += report.files_lost;
        i.files_back += report.files_back;
        i.bytes_lost += report.bytes_lost;
        ctx.what = format!("{} (crash {crash}, image {})", ctx.what, image.display());
        let durability = draw_durability(&mut rng);
        (log, storage) = reopen_and_check(&image, shape, durability, &mut model, stats);
        model.note(&storage);
        dir = image;
    }
    let _ = dir;
    drop(log);
    // The cycle passed: its directory goes.
    ctx.dir = None;
}

fn run(cycles: u64) {
    let base = std::env::var(SEED_ENV).map_or(DEFAULT_SEED, |s| s.parse().unwrap());
    let started = Instant::now();
    let mut stats = Stats::default();
    let mut ctx = FailureContext {
        test: "power-loss test",
        dir: None,
        what: String::new(),
    };
    for cycle in 0..cycles {
        let seed = SplitMix64(base ^ cycle.wrapping_mul(0xA076_1D64_78BD_642F)).next_u64();
        ctx.what = format!("cycle {cycle}, seed {seed:#018x} (base {SEED_ENV}={base})");
        run_cycle(seed, &mut ctx, &mut stats);
    }
    let i = &stats.image;
    println!(
        "{cycles} cycles, {} power cuts ({} inside a call) in {:.1?}: {} records written, {} acknowledged \
         at the cuts and all kept (0 lost); images: {} files, {} of {} unsynced pages dropped, {} \
         writes torn, {} new files lost, {} removed files back, {} bytes of the page \
         cache lost; recovery cut {} torn tails ({} bytes, {} headers written again), \
         finished {} prunings' removals; {} unacknowledged records lost, {} kept; {} \
         prunings",
        stats.crashes,
        stats.inside_calls,
        started.elapsed(),
        stats.records_written,
        stats.acked_records,
        i.files,
        i.pages_dropped,
        i.pages_dirty,
        i.writes_torn,
        i.files_lost,
        i.files_back,
        i.bytes_lost,
        stats.cuts,
        stats.bytes_cut,
        stats.header_rewrites,
        stats.prunings_finished,
        stats.unacked_lost,
        stats.unacked_kept,
        stats.prunings,
    );
    assert!(stats.image.pages_dropped > 0, "no page was ever dropped");
    assert!(stats.image.writes_torn > 0, "no write was ever torn");
    assert!(stats.cuts > 0, "recovery never cut anything");
}

#[test]
fn power_loss_loop() {
    let cycles = std::env::var(CYCLES_ENV).map_or(DEFAULT_CYCLES, |s| s.parse().unwrap());
    run(cycles);
}

/// The blocks of a segment's bytes: (start, end, first seq, count), walked from the end
/// of the segment header by the block headers' lengths (docs/FORMAT.md).
fn walk_blocks(bytes: &[u8]) -> Vec<(usize, usize, u64, u64)> {
    let mut blocks = Vec::new();
    let mut at = SEGMENT_HEADER_LEN;
    while at + 24 <= bytes.len() && bytes[at..at + 4] == *b"BBLK" {
        let frames_len = u32::from_le_bytes(bytes[at + 4..at + 8].try_into().unwrap());
        let count = u32::from_le_bytes(bytes[at + 8..at + 12].try_into().unwrap());
        let first_seq = u64::from_le_bytes(bytes[at + 16..at + 24].try_into().unwrap());
        let end = at + blackbox_log::format::BLOCK_HEADER_LEN + frames_len as usize;
        blocks.push((at, end, first_seq, u64::from(count)));
        at = end;
    }
    assert_eq!(at, bytes.len(), "the blocks fill the segment");
    blocks
}

/// A power loss that kept one page of unsynced data from the disk while later pages
/// reached it: the page reads as zeros from the synced end (or its start) to its end,
/// and intact blocks follow. Open cuts from the block the page damaged, reports the
/// cut, and the log goes on; the same page holding anything but that stretch of zeros
/// (a byte left, or other bytes) is still refused as damage before intact data.
#[test]
fn a_page_lost_before_intact_blocks_is_cut_from_its_block() {
    let dir = tempfile::tempdir().unwrap();
    let opts = || {
        LogOptions::new()
            .durability(Durability::Flush)
            .segment_bytes_max(1 << 20)
            .block_bytes_max(512)
    };
    let (mut log, _) = Log::open(dir.path(), opts()).unwrap();
    let mut written = Vec::new();
    // One block per call (`Flush`), of 100 to 400 bytes, until the segment spans 5 pages.
    for seq in 0u64.. {
        let payload = vec![u8::try_from(seq % 251).unwrap() + 1; 100 + (seq as usize * 37) % 300];
        log.append(Record::new(RecordType(1), TS_BASE + seq, &payload))
            .unwrap();
        written.push(payload);
        if log.written_seq().is_some()
            && fs::metadata(list_segments(dir.path()).unwrap()[0].path.clone())
                .unwrap()
                .len()
                > 5 * 4096
        {
            break;
        }
    }
    drop(log);
    let seg = list_segments(dir.path()).unwrap()[0].path.clone();
    let bytes = fs::read(&seg).unwrap();
    let blocks = walk_blocks(&bytes);

    // (zeros from, zeros to): whole pages 1 and 2, and from the first block that starts
    // inside page 3 to that page's end (the synced end was there: the page's old content
    // is the synced bytes, then zeros).
    let inside = blocks
        .iter()
        .find(|b| b.0 > 3 * 4096 && b.0 < 4 * 4096)
        .unwrap()
        .0;
    for (from, to) in [(4096, 8192), (8192, 12288), (inside, 4 * 4096)] {
        let what = format!("zeros at bytes {from}..{to}");
        let copy = tempfile::tempdir().unwrap();
        common::copy_dir(dir.path(), copy.path());
        let path = copy.path().join(seg.file_name().unwrap());
        let mut image = bytes.clone();
        image[from..to].fill(0);
        fs::write(&path, &image).unwrap();
        // Oracle: the blocks that end before the zeros are kept, from the walk above.
        let kept: Vec<_> = blocks.iter().filter(|b| b.1 <= from).collect();
        let data_end = kept.last().unwrap().1;
        let next = kept.last().map(|b| b.2 + b.3).unwrap();

        let (mut log, recovery) =
            Log::open(copy.path(), opts()).unwrap_or_else(|e| panic!("{what}: open failed: {e}"));
        assert_eq!(log.next_seq(), Seq(next), "{what}");
        assert_eq!(
            recovery.torn_bytes_cut,
            (bytes.len() - data_end) as u64,
            "{what}"
        );
        assert_eq!(recovery.first_lost_seq, Some(Seq(next)), "{what}");
        assert_eq!(
            fs::metadata(&path).unwrap().len(),
            data_end as u64,
            "{what}"
        );
        let read: Vec<Vec<u8>> = LogReader::open(copy.path())
            .unwrap()
            .records(..)
            .unwrap()
            .map(|r| r.unwrap().payload().to_vec())
            .collect();
        assert!(read == written[..usize::try_from(next).unwrap()], "{what}");
        let seq = log
            .append(Record::new(RecordType(2), TS_BASE + 1_000_000, b"after"))
            .unwrap();
        assert_eq!(seq, Seq(next), "{what}");
        log.close().unwrap();
        verify(copy.path(), None, None).unwrap();
    }

    // Not the trace of a lost page: refused, the file untouched.
    for (fill, keep_last) in [(0u8, true), (0xFF, false)] {
        let copy = tempfile::tempdir().unwrap();
        common::copy_dir(dir.path(), copy.path());
        let path = copy.path().join(seg.file_name().unwrap());
        let mut image = bytes.clone();
        image[4096..8191].fill(fill);
        if !keep_last {
            image[8191] = fill;
        }
        fs::write(&path, &image).unwrap();
        let err = Log::open(copy.path(), opts()).unwrap_err();
        assert!(
            err.to_string().contains("followed by intact records"),
            "fill {fill:#x}: {err}"
        );
        assert!(
            fs::read(&path).unwrap() == image,
            "fill {fill:#x}: the file changed"
        );
    }
}

/// Damage in synced data is refused even where a record holds pages of zeros of its
/// own: those zeros are what was written, and explain no damage outside the record's
/// checksum (a malformed frame header, a frame of another record). Seven records are
/// synced one by one, the fourth 12 KiB of zeros (whole pages of them, stored raw), or
/// in one block with a record after it; a byte is changed in a frame header. Open,
/// the readers and `verify` refuse the log, the file untouched: cutting there would cut
/// acknowledged records.
#[test]
fn zeros_of_a_records_own_excuse_no_damage_in_synced_data() {
    let sizes = [200, 300, 250, 12 * 1024, 200, 250, 300];
    let payload = |i: usize| {
        let fill = if i == 3 {
            0
        } else {
            u8::try_from(i).unwrap() + 1
        };
        vec![fill; sizes[i]]
    };
    let opts = || {
        LogOptions::new()
            .durability(Durability::Sync)
            .segment_bytes_max(1 << 20)
    };
    // (what, records batched per call, the record whose frame header is changed, the
    // byte of its header changed: 6 is the flags, 0 and 1 the payload length).
    let cases = [
        (
            "one record a block, the zeros' own flags",
            &[1usize; 7][..],
            3,
            6,
        ),
        (
            "one record a block, the zeros' own length",
            &[1; 7][..],
            3,
            1,
        ),
        (
            "the zeros and the next record in one block",
            &[1, 1, 1, 2, 1, 1][..],
            4,
            6,
        ),
        (
            "the next record's length, in the zeros' block",
            &[1, 1, 1, 2, 1, 1][..],
            4,
            0,
        ),
    ];
    for (what, batches, damaged, byte) in cases {
        let dir = tempfile::tempdir().unwrap();
        let (mut log, _) = Log::open(dir.path(), opts()).unwrap();
        let mut i = 0;
        for &n in batches {
            let records: Vec<Vec<u8>> = (i..i + n).map(payload).collect();
            let batch: Vec<Record<'_>> = records
                .iter()
                .enumerate()
                .map(|(k, p)| Record::new(RecordType(1), TS_BASE + (i + k) as u64, p))
                .collect();
            log.append_batch(&batch).unwrap();
            i += n;
        }
        // Dropped, not closed: the segment stays the active one, as after a crash.
        drop(log);
        assert_eq!(list_segments(dir.path()).unwrap().len(), 1);
        let seg = list_segments(dir.path()).unwrap()[0].path.clone();
        let mut image = fs::read(&seg).unwrap();
        // The frame of record `damaged`: walked from its block's header by the frames'
        // lengths (docs/FORMAT.md: a 16-byte frame header, the payload padded to 8).
        let blocks = walk_blocks(&image);
        let block = blocks
            .iter()
            .find(|b| (b.2..b.2 + b.3).contains(&(damaged as u64)))
            .unwrap();
        let mut frame = block.0 + blackbox_log::format::BLOCK_HEADER_LEN;
        for s in block.2..damaged as u64 {
            frame += 16 + sizes[usize::try_from(s).unwrap()].next_multiple_of(8);
        }
        image[frame + byte] ^= 0x40;
        fs::write(&seg, &image).unwrap();

        let err = Log::open(dir.path(), opts()).unwrap_err().to_string();
        assert!(err.contains("followed by intact records"), "{what}: {err}");
        assert!(fs::read(&seg).unwrap() == image, "{what}: the file changed");
        let read: Result<Vec<_>, _> = LogReader::open(dir.path())
            .unwrap()
            .records(..)
            .unwrap()
            .collect();
        let err = read.unwrap_err().to_string();
        assert!(err.contains("followed by intact records"), "{what}: {err}");
        let err = verify(dir.path(), None, None).unwrap_err().to_string();
        assert!(err.contains("followed by intact records"), "{what}: {err}");
    }
}

/// A page lost inside a large record's payload (its frame header intact, its checksum
/// failing) before intact blocks: the trace of a power loss, cut from its block like a
/// page lost across frame headers.
#[test]
fn a_page_lost_inside_a_large_record_is_cut_from_its_block() {
    let sizes = [200usize, 300, 16 * 1024, 200, 250];
    let dir = tempfile::tempdir().unwrap();
    let opts = || {
        LogOptions::new()
            .durability(Durability::Flush)
            .segment_bytes_max(1 << 20)
    };
    let (mut log, _) = Log::open(dir.path(), opts()).unwrap();
    for (i, &size) in sizes.iter().enumerate() {
        let fill = 0x70 + u8::try_from(i).unwrap();
        log.append(Record::new(
            RecordType(1),
            TS_BASE + i as u64,
            &vec![fill; size],
        ))
        .unwrap();
    }
    drop(log);
    let seg = list_segments(dir.path()).unwrap()[0].path.clone();
    let bytes = fs::read(&seg).unwrap();
    let blocks = walk_blocks(&bytes);
    let big = blocks.iter().find(|b| b.2 == 2).unwrap();
    // A whole page inside the large payload: past its block and frame headers.
    let page = (big.0 + 64 + 16).next_multiple_of(4096);
    assert!(page + 4096 < big.1);

    let mut image = bytes.clone();
    image[page..page + 4096].fill(0);
    fs::write(&seg, &image).unwrap();
    // Before any writer opens it, readers end where recovery will cut.
    let read: Vec<u64> = LogReader::open(dir.path())
        .unwrap()
        .records(..)
        .unwrap()
        .map(|r| r.unwrap().seq().0)
        .collect();
    assert_eq!(read, [0, 1]);
    let report = verify(dir.path(), None, None).unwrap();
    assert_eq!(report.records, 2);
    let (log, recovery) = Log::open(dir.path(), opts()).unwrap();
    assert_eq!(log.next_seq(), Seq(2));
    assert_eq!(recovery.first_lost_seq, Some(Seq(2)));
    assert_eq!(recovery.torn_bytes_cut, (bytes.len() - big.0) as u64);
    drop(log);
    assert_eq!(fs::metadata(&seg).unwrap().len(), big.0 as u64);
}
