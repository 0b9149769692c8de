//! The footer's tag index: a read given tags skips the sealed blocks that hold none of
//! them, returns every record of the blocks it reads, and refuses a tag index that was
//! changed after the seal.
#![expect(clippy::unwrap_used, reason = "tests fail loudly on any error")]
#![allow(
    clippy::cast_possible_truncation,
    reason = "test offsets and counts are small"
)]

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use blackbox_log::{
    ChainKey, Error, Log, LogOptions, LogReader, ReaderOptions, Record, RecordType, verify,
};
use proptest::prelude::*;

const KEY: [u8; 32] = [9; 32];

/// A record of the model: (ts, tag); its payload is the tag (u32 LE), its index in the
/// log (u32 LE) and 32 filler bytes.
type Rec = (u64, u32);

fn payload(i: usize, tag: u32) -> Vec<u8> {
    let mut p = tag.to_le_bytes().to_vec();
    p.extend_from_slice(&(i as u32).to_le_bytes());
    p.extend_from_slice(&[0xa5; 32]);
    p
}

fn write(dir: &Path, recs: &[Rec], block: usize, segment: u64, key: Option<[u8; 32]>) {
    let (mut log, _) = Log::open(
        dir,
        LogOptions::new()
            .block_bytes_max(block)
            .segment_bytes_max(segment)
            .key(key.map(ChainKey::new)),
    )
    .unwrap();
    for (i, &(ts, tag)) in recs.iter().enumerate() {
        let p = payload(i, tag);
        log.append(Record::new(RecordType(1), ts, &p).with_tag(tag))
            .unwrap();
    }
    log.close().unwrap();
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

/// (index in the log, tag) of every record a read returns.
fn read(
    dir: &Path,
    key: Option<[u8; 32]>,
    range: std::ops::RangeInclusive<u64>,
    tags: Option<&[u32]>,
) -> blackbox_log::Result<Vec<(u32, u32)>> {
    let records = reader(dir, key).records_by_time(range)?;
    let records = match tags {
        Some(t) => records.with_tags(t.iter().copied()),
        None => records,
    };
    records
        .map(|r| {
            r.map(|r| {
                let p = r.payload();
                (
                    u32::from_le_bytes(p[4..8].try_into().unwrap()),
                    u32::from_le_bytes(p[0..4].try_into().unwrap()),
                )
            })
        })
        .collect()
}

/// The model's answer: the records in the time range whose tag is wanted.
fn expected(recs: &[Rec], range: &std::ops::RangeInclusive<u64>, tags: &[u32]) -> Vec<(u32, u32)> {
    recs.iter()
        .enumerate()
        .filter(|(_, (ts, tag))| range.contains(ts) && tags.contains(tag))
        .map(|(i, &(_, tag))| (i as u32, tag))
        .collect()
}

/// Runs of 12 records of one tag, cycling through tags 1, 2, 3; 1 ms apart.
fn runs(n: usize) -> Vec<Rec> {
    (0..n)
        .map(|i| (1_000_000 + i as u64 * 1_000, 1 + (i / 12 % 3) as u32))
        .collect()
}

/// A tag-index entry of a sealed segment: (byte offset of its tag list in the file,
/// first seq, count, tags).
struct TagEntry {
    tags_at: usize,
    first_seq: u64,
    count: u32,
    tags: Vec<u32>,
}

fn le32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

fn le64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

/// Parses a sealed segment's tag index by FORMAT.md's layout; returns the footer body's
/// range and the entries.
fn tag_index(bytes: &[u8]) -> (std::ops::Range<usize>, Vec<TagEntry>) {
    let end = bytes.len() - 16;
    let body_len = le32(bytes, end) as usize;
    let body = end - body_len;
    let (types, index) = (
        le32(bytes, body + 88) as usize,
        le32(bytes, body + 92) as usize,
    );
    let at = body + 96 + 16 * types + 56 * index;
    let blocks = le32(bytes, at) as usize;
    let mut list = at + 8 + 16 * blocks;
    let mut out = Vec::new();
    for k in 0..blocks {
        let e = at + 8 + 16 * k;
        let n = le32(bytes, e + 12) as usize;
        out.push(TagEntry {
            tags_at: list,
            first_seq: le64(bytes, e),
            count: le32(bytes, e + 8),
            tags: (0..n).map(|j| le32(bytes, list + 4 * j)).collect(),
        });
        list += 4 * n;
    }
    (body..end, out)
}

fn sealed_segments(dir: &Path) -> Vec<PathBuf> {
    let segs = blackbox_log::list_segments(dir).unwrap();
    segs[..segs.len() - 1]
        .iter()
        .map(|s| s.path.clone())
        .collect()
}

fn rewrite(path: &Path, bytes: &[u8]) {
    fs::set_permissions(path, fs::Permissions::from_mode(0o600)).unwrap();
    fs::write(path, bytes).unwrap();
}

#[test]
fn every_sealed_block_is_described_by_its_records_tags() {
    let dir = tempfile::tempdir().unwrap();
    let recs = runs(600);
    write(dir.path(), &recs, 512, 8192, None);
    let segs = sealed_segments(dir.path());
    assert!(segs.len() >= 3, "{} sealed segments", segs.len());
    for path in segs {
        let (_, entries) = tag_index(&fs::read(&path).unwrap());
        assert!(entries.len() >= 3);
        for e in entries {
            // By the model: the distinct tags of the block's records, ascending.
            let mut want: Vec<u32> = recs[e.first_seq as usize..][..e.count as usize]
                .iter()
                .map(|r| r.1)
                .collect();
            want.sort_unstable();
            want.dedup();
            assert_eq!(e.tags, want, "block from seq {}", e.first_seq);
        }
    }
}

#[test]
fn a_read_by_tag_skips_the_blocks_that_hold_none_of_them() {
    // A block of tag 3 only is damaged (a payload byte): a read of tag 1 does not read
    // it, and returns every record of tag 1; a read of everything meets the damage.
    let dir = tempfile::tempdir().unwrap();
    let recs = runs(600);
    write(dir.path(), &recs, 512, 8192, None);
    let path = &sealed_segments(dir.path())[1];
    let mut bytes = fs::read(path).unwrap();
    let (_, entries) = tag_index(&bytes);
    let victim = entries.iter().find(|e| e.tags == [3]).unwrap();
    // The victim's first frame: find its payload by its index in the log.
    let needle = payload(victim.first_seq as usize, 3);
    let at = bytes
        .windows(needle.len())
        .position(|w| w == needle.as_slice())
        .unwrap();
    bytes[at + 20] ^= 0xff;
    rewrite(path, &bytes);
    let all = 0..=u64::MAX;
    assert_eq!(
        read(dir.path(), None, all.clone(), Some(&[1]))
            .unwrap()
            .into_iter()
            .filter(|r| r.1 == 1)
            .collect::<Vec<_>>(),
        expected(&recs, &all, &[1])
    );
    match read(dir.path(), None, all, None) {
        Err(Error::Corrupt(_)) => {}
        other => panic!("the damaged block was not met: {other:?}"),
    }
}

#[test]
fn a_tag_index_changed_after_the_seal_is_refused() {
    // A block of tag 2 made to say tag 3, checksum recomputed: a read of tag 2 would
    // skip it. The index's authenticator gives the change away, keyed or not (an
    // unkeyed log's authenticator can be recomputed, as its chain can: FORMAT.md).
    for key in [None, Some(KEY)] {
        let dir = tempfile::tempdir().unwrap();
        let recs = runs(600);
        write(dir.path(), &recs, 512, 8192, key);
        let all = 0..=u64::MAX;
        let intact = read(dir.path(), key, all.clone(), Some(&[2])).unwrap();
        assert_eq!(
            intact
                .iter()
                .filter(|r| r.1 == 2)
                .copied()
                .collect::<Vec<_>>(),
            expected(&recs, &all, &[2])
        );
        let path = &sealed_segments(dir.path())[1];
        let mut bytes = fs::read(path).unwrap();
        let (body, entries) = tag_index(&bytes);
        let victim = entries.iter().find(|e| e.tags == [2]).unwrap();
        bytes[victim.tags_at..victim.tags_at + 4].copy_from_slice(&3u32.to_le_bytes());
        let crc = crc32c::crc32c(&bytes[body.clone()]);
        bytes[body.end + 4..body.end + 8].copy_from_slice(&crc.to_le_bytes());
        rewrite(path, &bytes);
        match read(dir.path(), key, all.clone(), Some(&[2])) {
            Err(Error::Corrupt(c)) => {
                assert!(c.to_string().contains("tag index"), "{c}");
            }
            other => panic!(
                "key {}: the changed index was trusted: {other:?}",
                key.is_some()
            ),
        }
        let err = verify(dir.path(), key.map(ChainKey::new).as_ref(), None).unwrap_err();
        assert!(err.to_string().contains("tag index"), "{err}");
    }
}

#[test]
fn a_seq_read_by_tag_that_starts_in_a_skipped_block_proves_its_start() {
    let dir = tempfile::tempdir().unwrap();
    let recs = runs(600);
    write(dir.path(), &recs, 512, 8192, None);
    let path = &sealed_segments(dir.path())[1];
    let (_, entries) = tag_index(&fs::read(path).unwrap());
    let e = entries.iter().find(|e| e.tags == [3]).unwrap();
    let lo = e.first_seq + 1;
    let got: Vec<u32> = reader(dir.path(), None)
        .records(blackbox_log::Seq(lo)..)
        .unwrap()
        .with_tags([1])
        .map(|r| u32::from_le_bytes(r.unwrap().payload()[4..8].try_into().unwrap()))
        .filter(|&i| recs[i as usize].1 == 1)
        .collect();
    let want: Vec<u32> = (lo as u32..recs.len() as u32)
        .filter(|&i| recs[i as usize].1 == 1)
        .collect();
    assert_eq!(got, want);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn a_read_by_tag_returns_what_a_full_read_filtered_by_tag_returns(
        steps in prop::collection::vec((0u64..3_000, 0u32..5, 1usize..30), 1..40),
        block in 200usize..2_000,
        segment in 4_096u64..12_000,
        wanted in prop::collection::btree_set(0u32..5, 0..4),
        a in 0u64..150_000,
        len in 0u64..150_000,
    ) {
        // Runs of one tag, time advancing by a random step per run.
        let mut recs = Vec::new();
        let mut ts = 1_000u64;
        for (step, tag, run) in steps {
            for _ in 0..run {
                ts += step;
                recs.push((ts, tag));
            }
        }
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), &recs, block, segment, None);
        let wanted: Vec<u32> = wanted.into_iter().collect();
        let range = 1_000 + a..=1_000 + a + len;
        let got: Vec<(u32, u32)> = read(dir.path(), None, range.clone(), Some(&wanted))
            .unwrap()
            .into_iter()
            .filter(|r| wanted.contains(&r.1))
            .collect();
        let full: Vec<(u32, u32)> = read(dir.path(), None, range.clone(), None)
            .unwrap()
            .into_iter()
            .filter(|r| wanted.contains(&r.1))
            .collect();
        prop_assert_eq!(&got, &full);
        prop_assert_eq!(got, expected(&recs, &range, &wanted));
    }
}

#[test]
fn a_record_left_untagged_carries_its_types_tag() {
    // Runs of 12 records cycling through types 1, 2 and 3; the records of type 3 are
    // tagged 7 by the layer above, the others keep their type's tag, 0xFFFF_0000 | type
    // (FORMAT.md, "Tag index").
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) = Log::open(
        dir.path(),
        LogOptions::new()
            .block_bytes_max(512)
            .segment_bytes_max(8192),
    )
    .unwrap();
    let mut model = Vec::new();
    for i in 0..600usize {
        let t = 1 + (i / 12 % 3) as u16;
        let tag = if t == 3 {
            7
        } else {
            0xFFFF_0000 | u32::from(t)
        };
        let p = payload(i, tag);
        let record = Record::new(RecordType(t), 1_000 + i as u64, &p);
        log.append(if t == 3 { record.with_tag(7) } else { record })
            .unwrap();
        model.push(tag);
    }
    log.close().unwrap();
    let segs = sealed_segments(dir.path());
    assert!(segs.len() >= 3, "{} sealed segments", segs.len());
    for path in segs {
        for e in tag_index(&fs::read(&path).unwrap()).1 {
            let mut want: Vec<u32> = model[e.first_seq as usize..][..e.count as usize].to_vec();
            want.sort_unstable();
            want.dedup();
            assert_eq!(e.tags, want, "block from seq {}", e.first_seq);
        }
    }
    let all = 0..=u64::MAX;
    let recs: Vec<Rec> = model
        .iter()
        .enumerate()
        .map(|(i, &t)| (1_000 + i as u64, t))
        .collect();
    let type_2 = 0xFFFF_0002;
    assert_eq!(RecordType(2).index_tag(), type_2);
    let got: Vec<(u32, u32)> = read(dir.path(), None, all.clone(), Some(&[type_2]))
        .unwrap()
        .into_iter()
        .filter(|r| r.1 == type_2)
        .collect();
    assert_eq!(got, expected(&recs, &all, &[type_2]));
}
