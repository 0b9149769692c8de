//! Criterion benches of `blackbox-log`: append throughput per durability mode, and
//! verified sequential reads, for 100-byte and 4 KiB payloads.
//!
//! ```text
//! cargo bench -p blackbox-benches --bench log
//! ```
//!
//! Append benches time the appends and the final hand-off of the write buffer to the OS
//! (`Log::flush`), in a log with default options; opening the log (directory creation
//! and its fsyncs) is not timed, and the log is dropped unsynced, so the one fsync of
//! `close()` is not timed either. Segment rolls, with their fsync of the sealed
//! segment, are part of the workload and are timed. `Buffered` appends one record per
//! call; `Flush` and `Sync` append batches of 1000 records (per-record calls in those
//! modes measure the syscalls, not the log), plus one `Sync` bench of single 4 KiB
//! records: one fdatasync per record.
//!
//! Read benches scan a log written beforehand (warm page cache): `LogReader::records`
//! over every record, touching each payload (the blake3 chain link of every block and
//! the structure of every frame are checked as it goes), and `blackbox_log::verify`
//! over the same log (which also recomputes every frame's crc32c). Seek benches time
//! short range reads (100 records, by seq and by time) from pseudo-random points of
//! the 100-byte log: the cost of finding where a range starts.

use std::hint::black_box;
use std::path::Path;
use std::time::{Duration, Instant};

use blackbox_log::{Durability, Log, LogOptions, LogReader, Record, RecordType, Seq};
use criterion::{Criterion, SamplingMode, Throughput, criterion_group, criterion_main};

const RECORD_TYPE: RecordType = RecordType(1);
/// First timestamp (ns); records are 1 µs apart.
const BASE_TS_NS: u64 = 1_700_000_000_000_000_000;
const TS_STEP_NS: u64 = 1_000;
/// Records per `append_batch` call in the batched benches.
const BATCH: usize = 1_000;

const SMALL: usize = 100;
const LARGE: usize = 4 << 10;
/// Records in the pre-written logs that the read benches scan: about 100 MiB of
/// payload each.
const SCAN_SMALL_RECORDS: usize = 1_000_000;
const SCAN_LARGE_RECORDS: usize = 25_600;

/// Deterministic, incompressible payload bytes.
fn payload(len: usize) -> Vec<u8> {
    let mut state = 0x0B1A_C0B0_0000_0001u64;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        out.extend_from_slice(&(z ^ (z >> 31)).to_le_bytes());
    }
    out.truncate(len);
    out
}

fn ts(i: u64) -> u64 {
    BASE_TS_NS + i * TS_STEP_NS
}

fn usize_to_u64(n: usize) -> u64 {
    u64::try_from(n).expect("usize fits in u64")
}

fn open(dir: &Path, durability: Durability) -> Log {
    let (log, _) =
        Log::open(dir.join("log"), LogOptions::new().durability(durability)).expect("open the log");
    log
}

fn temp_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("blackbox-bench-")
        .tempdir()
        .expect("create a temporary directory")
}

/// Times `iters` single appends of `payload` into a fresh log.
fn time_single_appends(durability: Durability, payload: &[u8], iters: u64) -> Duration {
    let dir = temp_dir();
    let mut log = open(dir.path(), durability);
    let start = Instant::now();
    for i in 0..iters {
        log.append(Record::new(RECORD_TYPE, ts(i), payload))
            .expect("append");
    }
    log.flush().expect("flush");
    let elapsed = start.elapsed();
    drop(log);
    drop(dir);
    elapsed
}

/// Times `iters` batches of [`BATCH`] records of `payload` into a fresh log.
fn time_batches(durability: Durability, payload: &[u8], iters: u64) -> Duration {
    let dir = temp_dir();
    let mut log = open(dir.path(), durability);
    let mut batch = Vec::with_capacity(BATCH);
    let mut next = 0u64;
    let start = Instant::now();
    for _ in 0..iters {
        batch.clear();
        for _ in 0..BATCH {
            batch.push(Record::new(RECORD_TYPE, ts(next), payload));
            next += 1;
        }
        log.append_batch(&batch).expect("append a batch");
    }
    log.flush().expect("flush");
    let elapsed = start.elapsed();
    drop(log);
    drop(dir);
    elapsed
}

fn append(c: &mut Criterion, label: &str, len: usize) {
    let payload = payload(len);
    let per_record = |records: usize| {
        if len == SMALL {
            Throughput::Elements(usize_to_u64(records))
        } else {
            Throughput::Bytes(usize_to_u64(records * len))
        }
    };
    let mut group = c.benchmark_group(format!("append_{label}"));
    group.throughput(per_record(1));
    group.bench_function("buffered", |b| {
        b.iter_custom(|iters| time_single_appends(Durability::Buffered, &payload, iters));
    });
    group.throughput(per_record(BATCH));
    group.bench_function("flush_batch_1000", |b| {
        b.iter_custom(|iters| time_batches(Durability::Flush, &payload, iters));
    });
    group.bench_function("sync_batch_1000", |b| {
        b.iter_custom(|iters| time_batches(Durability::Sync, &payload, iters));
    });
    if len == LARGE {
        group.throughput(per_record(1));
        group.bench_function("sync_batch_1", |b| {
            b.iter_custom(|iters| time_single_appends(Durability::Sync, &payload, iters));
        });
    }
    group.finish();
}

fn append_small(c: &mut Criterion) {
    append(c, "100B", SMALL);
}

fn append_large(c: &mut Criterion) {
    append(c, "4KiB", LARGE);
}

/// Writes `records` records of `len` bytes into a new log under `dir` and closes it.
fn write_log(dir: &Path, len: usize, records: usize) {
    let payload = payload(len);
    let mut log = open(dir, Durability::Buffered);
    for i in 0..usize_to_u64(records) {
        log.append(Record::new(RECORD_TYPE, ts(i), &payload))
            .expect("append");
    }
    log.close().expect("close");
}

fn scan(c: &mut Criterion, label: &str, len: usize, records: usize) {
    let dir = temp_dir();
    write_log(dir.path(), len, records);
    let log_dir = dir.path().join("log");
    let expected = usize_to_u64(records);

    let mut group = c.benchmark_group(format!("scan_{label}"));
    // One iteration reads the whole log (about 100 ms): flat sampling keeps the
    // iteration count, and so the run time, bounded.
    group.sampling_mode(SamplingMode::Flat);
    group.throughput(if len == SMALL {
        Throughput::Elements(expected)
    } else {
        Throughput::Bytes(usize_to_u64(records * len))
    });
    group.bench_function("records", |b| {
        b.iter(|| {
            let reader = LogReader::open(&log_dir).expect("open a reader");
            let mut count = 0u64;
            for record in reader.records(..).expect("start a range read") {
                let record = record.expect("read a record");
                black_box(record.payload());
                count += 1;
            }
            assert_eq!(count, expected);
        });
    });
    group.bench_function("verify", |b| {
        b.iter(|| {
            let report = blackbox_log::verify(&log_dir, None, None).expect("verify");
            assert_eq!(report.records, expected);
        });
    });
    group.finish();
}

fn scan_small(c: &mut Criterion) {
    scan(c, "100B", SMALL, SCAN_SMALL_RECORDS);
}

fn scan_large(c: &mut Criterion) {
    scan(c, "4KiB", LARGE, SCAN_LARGE_RECORDS);
}

/// Records read by each short range read of the seek benches.
const SEEK_READ_RECORDS: u64 = 100;

/// Short range reads from pseudo-random points of the 100-byte log: each finds its
/// segment (by name for seqs, by a binary search over footers for times), seeks
/// through the sparse index, skips the blocks before the start by their headers and
/// reads 100 records.
fn seek(c: &mut Criterion) {
    let dir = temp_dir();
    write_log(dir.path(), SMALL, SCAN_SMALL_RECORDS);
    let log_dir = dir.path().join("log");
    let reader = LogReader::open(&log_dir).expect("open a reader");
    let span = usize_to_u64(SCAN_SMALL_RECORDS) - SEEK_READ_RECORDS;
    let mut group = c.benchmark_group("seek_100B");
    group.throughput(Throughput::Elements(SEEK_READ_RECORDS));
    let mut state = 0x5EED_u64;
    let mut next_start = move || {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (state >> 11) % span
    };
    group.bench_function("by_seq", |b| {
        b.iter(|| {
            let start = next_start();
            let range = Seq(start)..Seq(start + SEEK_READ_RECORDS);
            let count = reader.records(range).expect("range read").count();
            assert_eq!(usize_to_u64(count), SEEK_READ_RECORDS);
        });
    });
    group.bench_function("by_time", |b| {
        b.iter(|| {
            let start = next_start();
            let range = ts(start)..ts(start + SEEK_READ_RECORDS);
            let count = reader.records_by_time(range).expect("range read").count();
            assert_eq!(usize_to_u64(count), SEEK_READ_RECORDS);
        });
    });
    group.finish();
}

fn config() -> Criterion {
    Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5))
        .without_plots()
}

criterion_group! {
    name = benches;
    config = config();
    targets = append_small, append_large, scan_small, scan_large, seek
}
criterion_main!(benches);
