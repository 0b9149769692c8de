//! Per-block compression: compressed and raw blocks read back as the records appended,
//! whatever mix of them a log holds; a byte changed anywhere in a compressed block is
//! caught by the reader and by `verify`; reads that skip blocks by the tag index or
//! start at a time-index entry work over compressed blocks.
#![expect(clippy::unwrap_used, reason = "tests fail loudly on any error")]
#![allow(
    clippy::cast_possible_truncation,
    reason = "test offsets and counts are small"
)]

mod common;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use blackbox_log::{
    ChainKey, Compression, Durability, Error, Log, LogOptions, LogReader, ReaderOptions, Record,
    RecordType, Salvaged, Seq, list_segments, verify,
};
use common::{Layout, Rec, SplitMix64, layout, to_usize};
use proptest::prelude::*;

const KEY: [u8; 32] = [7; 32];

/// A JSON object like a robot's telemetry: compresses well.
fn json_payload(i: u64, rng: &mut SplitMix64) -> Vec<u8> {
    format!(
        r#"{{"seq":{i},"source":"arm.left","joint":{{"angle":{:.4},"velocity":{:.4},"torque":{:.3}}},"state":"{}","ok":true}}"#,
        rng.below(10_000) as f64 / 1000.0,
        rng.below(10_000) as f64 / 3000.0,
        rng.below(1000) as f64 / 7.0,
        ["moving", "holding", "idle"][to_usize(rng.below(3))]
    )
    .into_bytes()
}

/// Random bytes: do not compress.
fn noise_payload(len: usize, rng: &mut SplitMix64) -> Vec<u8> {
    (0..len).map(|_| rng.next_u64() as u8).collect()
}

/// What a record is appended as: (type, ts, tag, payload).
type Appended = (u16, u64, u32, Vec<u8>);

fn options(compression: Compression, block: usize, segment: u64) -> LogOptions {
    // Buffered: blocks are cut by size, not at every append call.
    LogOptions::new()
        .durability(Durability::Buffered)
        .compression(compression)
        .block_bytes_max(block)
        .segment_bytes_max(segment)
        .index_interval_bytes(1024)
}

fn write(dir: &Path, opts: LogOptions, recs: &[Appended]) {
    let (mut log, _) = Log::open(dir, opts).unwrap();
    for (t, ts, tag, p) in recs {
        log.append(Record::new(RecordType(*t), *ts, p).with_tag(*tag))
            .unwrap();
    }
    log.close().unwrap();
}

/// The model's records, as a reader returns them.
fn model(recs: &[Appended]) -> Vec<Rec> {
    recs.iter()
        .enumerate()
        .map(|(i, (t, ts, _, p))| Rec {
            seq: i as u64,
            ts: *ts,
            record_type: *t,
            payload: p.clone(),
        })
        .collect()
}

fn to_recs(records: blackbox_log::Records) -> blackbox_log::Result<Vec<Rec>> {
    records
        .map(|r| {
            r.map(|r| Rec {
                seq: r.seq().0,
                ts: r.ts_ns(),
                record_type: r.record_type().0,
                payload: r.payload().to_vec(),
            })
        })
        .collect()
}

fn reader(dir: &Path, key: Option<[u8; 32]>) -> LogReader {
    LogReader::open_with(
        dir,
        ReaderOptions {
            key: key.map(ChainKey::new),
        },
    )
    .unwrap()
}

fn read_all(dir: &Path, key: Option<[u8; 32]>) -> blackbox_log::Result<Vec<Rec>> {
    to_recs(reader(dir, key).records(Seq(0)..)?)
}

fn layouts(dir: &Path) -> Vec<Layout> {
    list_segments(dir)
        .unwrap()
        .iter()
        .map(|s| layout(&s.path))
        .collect()
}

/// (compressed, raw) blocks in the log.
fn block_kinds(dir: &Path) -> (usize, usize) {
    let blocks: Vec<bool> = layouts(dir)
        .iter()
        .flat_map(|l| l.blocks.iter().map(|b| b.compressed))
        .collect();
    let compressed = blocks.iter().filter(|&&c| c).count();
    (compressed, blocks.len() - compressed)
}

fn rewrite(path: &Path, bytes: &[u8]) {
    fs::set_permissions(path, fs::Permissions::from_mode(0o600)).unwrap();
    fs::write(path, bytes).unwrap();
}

/// Runs of 12 JSON records then 12 records of noise, 1 µs apart; the tag is 1 for
/// JSON, 2 for noise.
fn mixed(n: u64, seed: u64) -> Vec<Appended> {
    let mut rng = SplitMix64(seed);
    (0..n)
        .map(|i| {
            let ts = 1_000_000 + i * 1_000;
            if i / 12 % 2 == 0 {
                (1, ts, 1, json_payload(i, &mut rng))
            } else {
                (
                    2,
                    ts,
                    2,
                    noise_payload(to_usize(20 + rng.below(200)), &mut rng),
                )
            }
        })
        .collect()
}

#[test]
fn compressed_and_raw_blocks_in_one_log_read_back_as_appended() {
    let dir = tempfile::tempdir().unwrap();
    let recs = mixed(2_000, 1);
    // 2 KiB blocks: a run of 12 JSON records fills about one block, so blocks of JSON
    // (compressed), of noise (raw) and of both (either) follow each other.
    write(
        dir.path(),
        options(Compression::Zstd { level: 3 }, 2048, 64 << 10),
        &recs,
    );
    let (compressed, raw) = block_kinds(dir.path());
    assert!(
        compressed >= 20 && raw >= 20,
        "{compressed} compressed, {raw} raw"
    );
    assert_eq!(read_all(dir.path(), None).unwrap(), model(&recs));
    let report = verify(dir.path(), None, None).unwrap();
    assert_eq!(report.records, recs.len() as u64);
    // Salvage reads every block itself, compressed ones too.
    let salvaged: Vec<Rec> = reader(dir.path(), None)
        .salvage(Seq(0)..)
        .unwrap()
        .map(|s| match s {
            Salvaged::Record(r) => Rec {
                seq: r.seq().0,
                ts: r.ts_ns(),
                record_type: r.record_type().0,
                payload: r.payload().to_vec(),
            },
            Salvaged::Lost(l) => panic!("an intact log lost {l:?}"),
        })
        .collect();
    assert_eq!(salvaged, model(&recs));
    // A second session opens the log (recovery walks compressed blocks) and appends.
    let more = mixed(300, 2)
        .into_iter()
        .map(|(t, ts, tag, p)| (t, ts + 10_000_000_000, tag, p))
        .collect::<Vec<_>>();
    write(
        dir.path(),
        options(Compression::Zstd { level: 3 }, 2048, 64 << 10),
        &more,
    );
    let all: Vec<Appended> = recs.into_iter().chain(more).collect();
    assert_eq!(read_all(dir.path(), None).unwrap(), model(&all));
    verify(dir.path(), None, None).unwrap();
}

#[test]
fn compression_off_writes_no_compressed_block_and_on_saves_disk() {
    let mut rng = SplitMix64(3);
    let recs: Vec<Appended> = (0..3_000)
        .map(|i| (1, 1_000 + i, 0, json_payload(i, &mut rng)))
        .collect();
    let size = |c: Compression| {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), options(c, 64 << 10, 64 << 20), &recs);
        assert_eq!(read_all(dir.path(), None).unwrap(), model(&recs));
        let bytes: u64 = layouts(dir.path()).iter().map(|l| l.len).sum();
        (block_kinds(dir.path()), bytes)
    };
    let ((c_off, r_off), off) = size(Compression::Off);
    let ((c_on, r_on), on) = size(Compression::Zstd { level: 3 });
    assert_eq!(c_off, 0);
    assert!(r_off > 0);
    assert_eq!(r_on, 0, "every JSON block compresses");
    assert!(c_on > 0);
    assert!(on * 3 < off, "compressed {on} bytes, raw {off}");
}

#[test]
fn a_zstd_level_out_of_range_is_refused_with_a_sentence() {
    for level in [0, 23, i32::MAX, i32::MIN] {
        let dir = tempfile::tempdir().unwrap();
        let err = Log::open(
            dir.path(),
            LogOptions::new().compression(Compression::Zstd { level }),
        )
        .unwrap_err();
        assert!(
            matches!(&err, Error::InvalidOptions { reason } if reason.contains(&format!("zstd level {level} "))),
            "{err}"
        );
    }
}

/// The compressed blocks of the sealed segments, with their segment's path.
fn sealed_compressed_blocks(dir: &Path) -> Vec<(PathBuf, u64, u64, u64, u32)> {
    let ls = layouts(dir);
    ls[..ls.len() - 1]
        .iter()
        .flat_map(|l| {
            l.blocks
                .iter()
                .filter(|b| b.compressed)
                .map(|b| (l.path.clone(), b.start, b.end, b.first_seq, b.count))
        })
        .collect()
}

fn flipped_bytes_are_caught(key: Option<[u8; 32]>, read_key: Option<[u8; 32]>) {
    let dir = tempfile::tempdir().unwrap();
    let recs = mixed(600, 4);
    write(
        dir.path(),
        options(Compression::Zstd { level: 3 }, 2048, 16 << 10).key(key.map(ChainKey::new)),
        &recs,
    );
    let blocks = sealed_compressed_blocks(dir.path());
    let (path, start, end, _, _) = blocks[blocks.len() / 2].clone();
    let clean = fs::read(&path).unwrap();
    for at in to_usize(start)..to_usize(end) {
        for bit in [0x01, 0x80] {
            let mut bytes = clean.clone();
            bytes[at] ^= bit;
            rewrite(&path, &bytes);
            match read_all(dir.path(), read_key) {
                Err(Error::Corrupt(c)) => assert_eq!(c.segment, path),
                other => panic!(
                    "byte {at} (block {start}..{end}) ^ {bit:#x} read as {}",
                    match other {
                        Ok(r) => format!("{} records", r.len()),
                        Err(e) => e.to_string(),
                    }
                ),
            }
            if read_key.is_some() || key.is_none() {
                let err =
                    verify(dir.path(), read_key.map(ChainKey::new).as_ref(), None).unwrap_err();
                assert!(
                    matches!(&err, Error::Corrupt(c) if c.segment == path),
                    "byte {at} ^ {bit:#x}: {err}"
                );
            }
        }
    }
    rewrite(&path, &clean);
    assert_eq!(read_all(dir.path(), read_key).unwrap(), model(&recs));
}

#[test]
fn a_flipped_bit_anywhere_in_a_compressed_block_is_caught_by_the_chain() {
    flipped_bytes_are_caught(None, None);
    flipped_bytes_are_caught(Some(KEY), Some(KEY));
}

#[test]
fn a_flipped_bit_anywhere_in_a_compressed_block_is_caught_without_the_key() {
    // A keyed log read without its key: no chain, only the header's checksum, the
    // compressed block's lengths and padding, zstd's own checks and the frames'
    // checksums after decompression.
    flipped_bytes_are_caught(Some(KEY), None);
}

#[test]
fn a_read_by_tag_skips_compressed_blocks_that_hold_none_of_its_tags() {
    // Runs of 12 JSON records of one tag (1, 2, 3 in turn) in 512-byte blocks: most
    // blocks hold one tag and are compressed. A compressed block of tag 3 only is
    // damaged in its stored bytes: a read of tag 1 does not read it and returns every
    // record of tag 1; a read of everything meets the damage.
    let dir = tempfile::tempdir().unwrap();
    let mut rng = SplitMix64(5);
    let recs: Vec<Appended> = (0..1_200)
        .map(|i| {
            let tag = 1 + (i / 12 % 3) as u32;
            (1, 1_000_000 + i * 1_000, tag, json_payload(i, &mut rng))
        })
        .collect();
    write(
        dir.path(),
        options(Compression::Zstd { level: 3 }, 1024, 16 << 10),
        &recs,
    );
    let tag_of = |seq: u64| recs[to_usize(seq)].2;
    let (path, start, end, _, _) = sealed_compressed_blocks(dir.path())
        .into_iter()
        .find(|&(_, _, _, first, count)| (first..first + u64::from(count)).all(|s| tag_of(s) == 3))
        .unwrap();
    let mut bytes = fs::read(&path).unwrap();
    bytes[to_usize((start + end) / 2)] ^= 0x10;
    rewrite(&path, &bytes);
    let tag1: Vec<Rec> = to_recs(
        reader(dir.path(), None)
            .records(Seq(0)..)
            .unwrap()
            .with_tags([1]),
    )
    .unwrap()
    .into_iter()
    .filter(|r| tag_of(r.seq) == 1)
    .collect();
    let expected: Vec<Rec> = model(&recs)
        .into_iter()
        .filter(|r| tag_of(r.seq) == 1)
        .collect();
    assert_eq!(tag1, expected);
    assert!(matches!(read_all(dir.path(), None), Err(Error::Corrupt(_))));
}

#[test]
fn a_read_by_time_starts_mid_log_over_compressed_blocks() {
    // Damage in the first segment's compressed block: a read by time that starts in a
    // later segment (found through the footers and the time index) never reads it, and
    // returns exactly the model's records in its range.
    let dir = tempfile::tempdir().unwrap();
    let recs = mixed(3_000, 6);
    write(
        dir.path(),
        options(Compression::Zstd { level: 3 }, 2048, 16 << 10),
        &recs,
    );
    let ls = layouts(dir.path());
    assert!(ls.len() >= 4);
    let first = &ls[0];
    let victim = first.blocks.iter().find(|b| b.compressed).unwrap();
    let mut bytes = fs::read(&first.path).unwrap();
    bytes[to_usize((victim.start + victim.end) / 2)] ^= 0x01;
    rewrite(&first.path, &bytes);
    let second_start = ls[1].blocks[0].first_seq;
    let mut rng = SplitMix64(7);
    let all = model(&recs);
    for _ in 0..40 {
        let lo_i = second_start + rng.below(recs.len() as u64 - second_start);
        let hi_i = lo_i + rng.below(400);
        let (lo, hi) = (
            recs[to_usize(lo_i)].1 + 1,
            recs[to_usize(hi_i.min(2_999))].1,
        );
        let got = to_recs(reader(dir.path(), None).records_by_time(lo..=hi).unwrap()).unwrap();
        let want: Vec<Rec> = all
            .iter()
            .filter(|r| (lo..=hi).contains(&r.ts))
            .cloned()
            .collect();
        assert_eq!(got, want, "{lo}..={hi}");
    }
    assert!(matches!(read_all(dir.path(), None), Err(Error::Corrupt(_))));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(
        std::env::var("PROPTEST_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(24)
    ))]

    #[test]
    fn compressed_logs_read_back_as_appended(
        kinds in prop::collection::vec((0u8..4, 0u64..3_000), 1..600),
        level in prop_oneof![Just(1), Just(3), Just(9), Just(-5)],
        block in prop_oneof![Just(256usize), Just(2048), Just(16 << 10)],
        seed in any::<u64>(),
    ) {
        // Each record: JSON, noise, empty or a run of one byte; time steps of up to
        // 3 µs (ties included).
        let mut rng = SplitMix64(seed);
        let mut ts = 0u64;
        let recs: Vec<Appended> = kinds
            .iter()
            .enumerate()
            .map(|(i, &(kind, step))| {
                ts += step;
                let payload = match kind {
                    0 => json_payload(i as u64, &mut rng),
                    1 => noise_payload(to_usize(rng.below(300)), &mut rng),
                    2 => Vec::new(),
                    _ => vec![b'x'; to_usize(rng.below(5_000))],
                };
                (u16::from(kind), ts, u32::from(kind), payload)
            })
            .collect();
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), options(Compression::Zstd { level }, block, 8 << 10), &recs);
        let all = model(&recs);
        prop_assert_eq!(&read_all(dir.path(), None).unwrap(), &all);
        let lo = to_usize(rng.below(recs.len() as u64));
        let got = to_recs(reader(dir.path(), None).records(Seq(lo as u64)..).unwrap()).unwrap();
        prop_assert_eq!(&got[..], &all[lo..]);
        prop_assert_eq!(verify(dir.path(), None, None).unwrap().records, recs.len() as u64);
    }
}
