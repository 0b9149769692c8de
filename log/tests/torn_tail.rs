//! Crash recovery at every byte: a write cut short anywhere in the active segment.
//!
//! A crash can leave the active segment at any length, and the bytes past the last
//! fsync may be missing or zero. These tests cut a real log at every byte offset of its
//! last blocks and check that `Log::open` recovers exactly the complete blocks, reports
//! the cut, leaves a log that `verify` accepts, and keeps appending with dense seqs.
//!
//! The unit of atomicity is a block, which in `Durability::Flush` mode is one append
//! call (one batch): a block missing even its last byte is cut whole, with every record
//! in it. A reader never sees part of a batch.
#![expect(clippy::unwrap_used, reason = "tests fail loudly on any error")]

mod common;

use common::{Rec, copy_dir};
use std::fs::{self, OpenOptions};
use std::os::unix::fs::{FileExt, PermissionsExt};
use std::path::{Path, PathBuf};

use blackbox_log::format::{self, BLOCK_HEADER_LEN, SEGMENT_HEADER_LEN};
use blackbox_log::{Digest, Durability, Log, LogOptions, Record, RecordType, Seq, verify};

const SEGMENT_BYTES: u64 = 4096;
const BASE_TS: u64 = 1_700_000_000_000_000_000;
/// Payload lengths around the 8-byte alignment and a few larger ones.
const PAYLOAD_LENS: [usize; 13] = [0, 1, 7, 8, 9, 15, 16, 17, 100, 300, 3, 64, 255];

/// A block of a segment file, found by walking the block headers.
#[derive(Debug, Clone, Copy)]
struct Block {
    start: u64,
    end: u64,
    first_seq: u64,
    count: u64,
}

/// The log every test cuts: its directory, what was appended, and the digest after each
/// append call (each one ends a block).
struct Built {
    dir: tempfile::TempDir,
    recs: Vec<Rec>,
    digests: Vec<Digest>,
    active: PathBuf,
}

fn options() -> LogOptions {
    LogOptions::new()
        .segment_bytes_max(SEGMENT_BYTES)
        .durability(Durability::Flush)
}

fn payload(seq: usize, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| u8::try_from((seq * 31 + i * 7 + 1) % 251).unwrap())
        .collect()
}

fn next_batch(recs: &[Rec], batch_no: usize) -> Vec<Rec> {
    let n = 1 + batch_no % 4;
    let mut ts = recs.last().map_or(BASE_TS, |r| r.ts) + 1_000 * (batch_no as u64 % 3);
    (0..n)
        .map(|j| {
            let seq = recs.len() + j;
            // Some records share a timestamp, some step forward.
            ts += (j as u64 % 2) * 17;
            Rec {
                seq: seq as u64,
                ts,
                record_type: u16::try_from(seq % 5).unwrap() + 1,
                payload: payload(seq, PAYLOAD_LENS[seq % PAYLOAD_LENS.len()]),
            }
        })
        .collect()
}

fn append(log: &mut Log, batch: &[Rec]) -> Option<Seq> {
    let records: Vec<Record<'_>> = batch
        .iter()
        .map(|r| Record::new(RecordType(r.record_type), r.ts, &r.payload))
        .collect();
    log.append_batch(&records).unwrap()
}

fn active_segment(dir: &Path) -> PathBuf {
    blackbox_log::list_segments(dir)
        .unwrap()
        .last()
        .unwrap()
        .path
        .clone()
}

/// Walks the blocks of a segment's bytes from the end of its header to `end`.
fn walk_blocks(bytes: &[u8], end: usize) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut at = SEGMENT_HEADER_LEN;
    while at < end {
        let h = &bytes[at..at + BLOCK_HEADER_LEN];
        assert_eq!(&h[0..4], b"BBLK", "block magic at byte {at}");
        let frames_len = u32::from_le_bytes(h[4..8].try_into().unwrap()) as usize;
        let count = u32::from_le_bytes(h[8..12].try_into().unwrap());
        let first_seq = u64::from_le_bytes(h[16..24].try_into().unwrap());
        let next = at + BLOCK_HEADER_LEN + frames_len;
        blocks.push(Block {
            start: at as u64,
            end: next as u64,
            first_seq,
            count: u64::from(count),
        });
        at = next;
    }
    assert_eq!(at, end, "blocks fill the segment exactly");
    blocks
}

/// Builds a log with sealed segments and an active segment of at least `min_blocks`
/// blocks, one per append call.
fn build(min_blocks: usize) -> Built {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, recovery) = Log::open(dir.path(), options()).unwrap();
    assert!(recovery.created);
    let mut recs = Vec::new();
    let mut digests = Vec::new();
    for batch_no in 0.. {
        let batch = next_batch(&recs, batch_no);
        let last = append(&mut log, &batch);
        assert_eq!(last, Some(Seq(batch.last().unwrap().seq)));
        recs.extend(batch);
        digests.push(log.digest().unwrap());
        if log.segment_count() >= 3 {
            let active = fs::read(active_segment(dir.path())).unwrap();
            if walk_blocks(&active, active.len()).len() >= min_blocks {
                break;
            }
        }
    }
    log.close().unwrap();
    let active = active_segment(dir.path());
    Built {
        dir,
        recs,
        digests,
        active,
    }
}

fn read_all(dir: &Path) -> Vec<Rec> {
    common::read_all(dir, None)
}

fn digest_at(built: &Built, last_seq: u64) -> Digest {
    *built
        .digests
        .iter()
        .find(|d| d.seq == last_seq)
        .unwrap_or_else(|| panic!("no append call ended at seq {last_seq}"))
}

/// Checks a damaged copy whose active segment's intact data ends at `data_end`, where
/// the records before `kept` are intact: verify sees the torn tail, open cuts exactly
/// it, the survivors read back unchanged, and the log takes new records after them.
fn check_recovers(built: &Built, dir: &Path, data_end: u64, kept: usize) {
    let seg = dir.join(built.active.file_name().unwrap());
    let len = fs::metadata(&seg).unwrap().len();
    let cut = len - data_end;
    let what = format!("active segment of {len} bytes, intact to {data_end}");
    let last = Seq(u64::try_from(kept).unwrap() - 1);

    // Before recovery, verify reports the torn bytes and accepts everything before them.
    let report = verify(dir, None, None).unwrap();
    let expect_torn = (cut > 0).then(|| (seg.clone(), data_end, cut));
    assert_eq!(report.torn_tail, expect_torn, "{what}");
    assert_eq!(report.records, kept as u64, "{what}");
    assert_eq!(report.last, Some(digest_at(built, last.0)), "{what}");

    let (mut log, recovery) = Log::open(dir, options()).unwrap();
    assert_eq!(recovery.torn_bytes_cut, cut, "{what}");
    assert_eq!(recovery.torn_detail.is_some(), cut > 0, "{what}");
    assert_eq!(recovery.last_seq, Some(last), "{what}");
    assert!(!recovery.created, "{what}");
    assert_eq!(
        fs::metadata(&seg).unwrap().len(),
        data_end,
        "{what}: the cut is made"
    );
    assert_eq!(log.next_seq(), Seq(last.0 + 1), "{what}");
    assert_eq!(read_all(dir), built.recs[..kept], "{what}");

    let report = verify(dir, None, Some(&digest_at(built, last.0))).unwrap();
    assert!(report.digest_matched, "{what}");
    assert_eq!(report.torn_tail, None, "{what}");

    // The log continues densely after the cut, across a reopen.
    let ts = built.recs[kept - 1].ts + 5;
    let seq = log
        .append(Record::new(RecordType(9), ts, b"after recovery"))
        .unwrap();
    assert_eq!(seq, Seq(last.0 + 1), "{what}");
    // Dropped, not closed: the appends have reached the OS (`Flush`), and skipping the
    // fsync of `close` keeps a thousand cases fast. The reopen sees the same bytes.
    drop(log);
    let (mut log, recovery) = Log::open(dir, options()).unwrap();
    assert_eq!(recovery.torn_bytes_cut, 0, "{what}");
    assert_eq!(recovery.last_seq, Some(seq), "{what}");
    let seq2 = log
        .append(Record::new(RecordType(9), ts, b"after reopen"))
        .unwrap();
    assert_eq!(seq2, Seq(seq.0 + 1), "{what}");
    drop(log);
    let mut expect = built.recs[..kept].to_vec();
    for (s, p) in [(seq, &b"after recovery"[..]), (seq2, b"after reopen")] {
        expect.push(Rec {
            seq: s.0,
            ts,
            record_type: 9,
            payload: p.to_vec(),
        });
    }
    assert_eq!(read_all(dir), expect, "{what}");
    let report = verify(dir, None, None).unwrap();
    assert_eq!(report.records, seq2.0 + 1, "{what}");
    assert_eq!(report.torn_tail, None, "{what}");
}

/// The records that survive when the active segment is cut to `len`: those of the blocks
/// that end at or before it. Returns the end of the last such block and their count.
fn survivors(blocks: &[Block], len: u64) -> (u64, usize) {
    let first_seq = blocks[0].first_seq;
    let complete = blocks.iter().take_while(|b| b.end <= len);
    let (end, next_seq) = complete
        .last()
        .map_or((SEGMENT_HEADER_LEN as u64, first_seq), |b| {
            (b.end, b.first_seq + b.count)
        });
    (end, usize::try_from(next_seq).unwrap())
}

/// A scratch copy of the built log, reset before each case. Thousands of cases each in a
/// fresh directory spend most of their time creating and deleting files; resetting one
/// copy rewrites the active segment, removes any file a case added, and checks that no
/// case changed a sealed segment.
struct Scratch {
    dir: tempfile::TempDir,
    files: Vec<(std::ffi::OsString, Vec<u8>)>,
}

impl Scratch {
    fn new(built: &Built) -> Scratch {
        let dir = tempfile::tempdir().unwrap();
        let mut files = Vec::new();
        for entry in fs::read_dir(built.dir.path()).unwrap() {
            let entry = entry.unwrap();
            if entry.file_name() != blackbox_log::LOCK_FILE_NAME {
                files.push((entry.file_name(), fs::read(entry.path()).unwrap()));
            }
        }
        copy_dir(built.dir.path(), dir.path());
        Scratch { dir, files }
    }

    fn reset(&self, built: &Built, active_image: &[u8]) {
        let active = built.active.file_name().unwrap();
        for entry in fs::read_dir(self.dir.path()).unwrap() {
            let name = entry.unwrap().file_name();
            if name != blackbox_log::LOCK_FILE_NAME && !self.files.iter().any(|(n, _)| *n == name) {
                fs::remove_file(self.dir.path().join(name)).unwrap();
            }
        }
        for (name, bytes) in &self.files {
            let path = self.dir.path().join(name);
            if name == active {
                // A case's append may have sealed it (made it read-only) by rolling.
                fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).unwrap();
                // Rewritten in place rather than recreated: freeing and reallocating
                // the whole file for every case is what would make this slow.
                let file = OpenOptions::new().write(true).open(&path).unwrap();
                file.write_all_at(active_image, 0).unwrap();
                file.set_len(active_image.len() as u64).unwrap();
            } else {
                assert!(fs::read(&path).unwrap() == *bytes, "{name:?} was changed");
            }
        }
    }
}

#[test]
fn truncation_at_every_offset_of_the_last_blocks_recovers_the_complete_blocks() {
    let built = build(6);
    let bytes = fs::read(&built.active).unwrap();
    let blocks = walk_blocks(&bytes, bytes.len());
    assert!(blocks.len() >= 6);
    assert!(
        blocks.iter().rev().take(3).any(|b| b.count > 1),
        "a torn block of several records is among those cut"
    );
    // Every length from the start of the third block from the end to the whole file.
    let from = usize::try_from(blocks[blocks.len() - 3].start).unwrap();
    let lens: Vec<usize> = (from..=bytes.len()).collect();
    assert!(lens.len() > 3 * BLOCK_HEADER_LEN);
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get().min(4));
    std::thread::scope(|s| {
        for w in 0..workers {
            let (built, bytes, blocks, lens) = (&built, &bytes, &blocks, &lens);
            s.spawn(move || {
                let scratch = Scratch::new(built);
                for &cut_to in lens.iter().skip(w).step_by(workers) {
                    scratch.reset(built, &bytes[..cut_to]);
                    let (data_end, kept) = survivors(blocks, cut_to as u64);
                    check_recovers(built, scratch.dir.path(), data_end, kept);
                }
                scratch.reset(built, bytes);
            });
        }
    });
}

#[test]
fn a_block_missing_only_its_last_byte_loses_every_record_in_it() {
    let built = build(6);
    let bytes = fs::read(&built.active).unwrap();
    let blocks = walk_blocks(&bytes, bytes.len());
    // The unit of atomicity is the block (one batch): all of its records go together.
    let last = *blocks.iter().rev().find(|b| b.count > 1).unwrap();
    let copy = tempfile::tempdir().unwrap();
    copy_dir(built.dir.path(), copy.path());
    let seg = copy.path().join(built.active.file_name().unwrap());
    OpenOptions::new()
        .write(true)
        .open(&seg)
        .unwrap()
        .set_len(last.end - 1)
        .unwrap();
    let kept = usize::try_from(last.first_seq).unwrap();
    let (data_end, survivors_count) = survivors(&blocks, last.end - 1);
    assert_eq!((data_end, survivors_count), (last.start, kept));
    check_recovers(&built, copy.path(), last.start, kept);
}

#[test]
fn zeroed_tail_bytes_are_cut_as_torn() {
    let built = build(6);
    let bytes = fs::read(&built.active).unwrap();
    let blocks = walk_blocks(&bytes, bytes.len());
    let last = *blocks.last().unwrap();
    let (_, kept_before_last) = survivors(&blocks, last.start);

    // The whole last block zeroed (its pages reached the disk, its data did not), just
    // its frames zeroed (the header written, the frames not), or just its last 8 bytes.
    for zero_from in [
        last.start,
        last.start + BLOCK_HEADER_LEN as u64,
        last.end - 8,
    ] {
        let copy = tempfile::tempdir().unwrap();
        copy_dir(built.dir.path(), copy.path());
        let seg = copy.path().join(built.active.file_name().unwrap());
        let mut damaged = bytes.clone();
        damaged[usize::try_from(zero_from).unwrap()..].fill(0);
        fs::write(&seg, &damaged).unwrap();
        check_recovers(&built, copy.path(), last.start, kept_before_last);
    }

    // Zeros past the end of the data (a file extended but never written): the blocks
    // are all intact, only the zeros go.
    for extra in [1usize, 8, 72, 4096] {
        let copy = tempfile::tempdir().unwrap();
        copy_dir(built.dir.path(), copy.path());
        let seg = copy.path().join(built.active.file_name().unwrap());
        let mut damaged = bytes.clone();
        damaged.resize(bytes.len() + extra, 0);
        fs::write(&seg, &damaged).unwrap();
        check_recovers(&built, copy.path(), last.end, built.recs.len());
    }
}

#[test]
fn a_torn_segment_header_of_a_fresh_active_segment_is_rewritten() {
    let built = build(1);
    // A log whose active segment holds only its header: drop the active segment so the
    // last one is sealed (a crash between sealing and creating the next), and let open
    // create the fresh one.
    let base = tempfile::tempdir().unwrap();
    copy_dir(built.dir.path(), base.path());
    fs::remove_file(base.path().join(built.active.file_name().unwrap())).unwrap();
    let (log, recovery) = Log::open(base.path(), options()).unwrap();
    let kept = usize::try_from(recovery.last_seq.unwrap().0).unwrap() + 1;
    log.close().unwrap();
    let fresh = active_segment(base.path());
    let header = fs::read(&fresh).unwrap();
    assert_eq!(header.len(), SEGMENT_HEADER_LEN);
    assert_eq!(
        fresh.file_name().unwrap().to_str().unwrap(),
        format::segment_file_name(kept as u64)
    );
    let expected = &built.recs[..kept];

    let mut images: Vec<Vec<u8>> = (0..SEGMENT_HEADER_LEN)
        .map(|n| header[..n].to_vec())
        .collect();
    images.push(vec![0; SEGMENT_HEADER_LEN]);
    // The header's length reached the disk and only a prefix of its bytes (a power
    // loss tears the write): the rest, the checksum's last byte at least, reads zero.
    images.extend((0..SEGMENT_HEADER_LEN).filter_map(|n| {
        let mut image = header[..n].to_vec();
        image.resize(SEGMENT_HEADER_LEN, 0);
        (image != header).then_some(image)
    }));
    for image in images {
        let written = image.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
        let what = format!(
            "header image of {} bytes, {written} of them written",
            image.len()
        );
        let copy = tempfile::tempdir().unwrap();
        copy_dir(base.path(), copy.path());
        let seg = copy.path().join(fresh.file_name().unwrap());
        fs::write(&seg, &image).unwrap();

        let report = verify(copy.path(), None, None).unwrap();
        assert_eq!(
            report.torn_tail,
            Some((seg.clone(), 0, image.len() as u64)),
            "{what}"
        );
        assert_eq!(report.records, kept as u64, "{what}");

        let (mut log, recovery) = Log::open(copy.path(), options()).unwrap();
        assert_eq!(recovery.torn_bytes_cut, image.len() as u64, "{what}");
        assert!(recovery.torn_detail.is_some(), "{what}");
        assert_eq!(recovery.last_seq, Some(Seq(kept as u64 - 1)), "{what}");
        assert_eq!(
            fs::read(&seg).unwrap(),
            header,
            "{what}: the header is rewritten"
        );
        assert_eq!(read_all(copy.path()), expected, "{what}");
        let ts = expected.last().unwrap().ts;
        let seq = log.append(Record::new(RecordType(3), ts, b"x")).unwrap();
        assert_eq!(seq, Seq(kept as u64), "{what}");
        log.close().unwrap();

        let (log, recovery) = Log::open(copy.path(), options()).unwrap();
        assert_eq!(recovery.torn_bytes_cut, 0, "{what}");
        assert_eq!(recovery.last_seq, Some(seq), "{what}");
        log.close().unwrap();
        let got = read_all(copy.path());
        assert_eq!(got.len(), kept + 1, "{what}");
        assert_eq!(got[..kept], *expected, "{what}");
        assert_eq!(got[kept].payload, b"x", "{what}");
        let report = verify(copy.path(), None, None).unwrap();
        assert_eq!((report.records, report.torn_tail), (kept as u64 + 1, None));
    }
}

/// A file of a header's length whose last byte is zero but which does not start like a
/// segment (another program's file under a segment's name) is not a torn header: every
/// reader refuses it as the writer does, instead of reading it as an empty segment.
#[test]
fn a_foreign_file_of_a_header_length_is_not_a_torn_header() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) = Log::open(dir.path(), options()).unwrap();
    log.append(Record::new(RecordType(1), 1_000, b"first"))
        .unwrap();
    log.close().unwrap();
    let seg = active_segment(dir.path());
    let mut head = fs::read(&seg).unwrap();
    head.truncate(SEGMENT_HEADER_LEN);
    head[..8].copy_from_slice(b"NOTALOG!");
    head[SEGMENT_HEADER_LEN - 1] = 0;
    fs::set_permissions(&seg, fs::Permissions::from_mode(0o600)).unwrap();
    fs::write(&seg, &head).unwrap();
    let verified = verify(dir.path(), None, None);
    assert!(
        verified.is_err(),
        "verify took a foreign file for a torn header: {verified:?}"
    );
    let read = blackbox_log::LogReader::open(dir.path())
        .and_then(|r| r.records(..)?.collect::<Result<Vec<_>, _>>());
    assert!(
        read.is_err(),
        "a reader took a foreign file for a torn header: {read:?}"
    );
    assert!(Log::open(dir.path(), options()).is_err());
}
