//! The tamper matrix: every kind of damage to a log's files, and what `verify` and
//! `Log::open` say about it.
//!
//! Each case damages a fresh copy of a real log (three sealed segments and an active one
//! of several blocks). `verify` must fail with a structured error that names the damaged
//! segment, the kind of damage and an offset inside the damaged bytes. `Log::open` must
//! refuse damage it cannot explain as a torn write, and leave every file byte-identical:
//! the log never "repairs" evidence. The only damage open may cut is in the last block
//! of the active segment, which is indistinguishable from a write a crash cut short.
//!
//! Open reads the headers and footers of sealed segments but not their blocks (that is
//! `verify`'s job, or `verify_on_open`'s): damage inside a sealed segment's blocks must
//! leave a default open harmless and make an open with `verify_on_open` fail.
#![expect(clippy::unwrap_used, reason = "tests fail loudly on any error")]

mod common;

use common::{FrameAt, Rec, flip, layout, le_u64, read_all, to_usize, write_file};
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fs;
use std::ops::Range;
use std::os::unix::fs::{FileExt, PermissionsExt};
use std::path::{Path, PathBuf};

use blackbox_log::format::{
    self, BLOCK_HEADER_LEN, FORMAT_VERSION, FRAME_HEADER_LEN, SEGMENT_HEADER_LEN,
};
use blackbox_log::{
    ChainKey, Corruption, CorruptionKind, Digest, Durability, Error, Log, LogOptions, Record,
    RecordType, Seq, verify,
};

const BASE_TS: u64 = 1_700_000_000_000_000_000;
const PAYLOAD_LENS: [usize; 13] = [0, 1, 7, 8, 9, 15, 16, 17, 100, 300, 3, 64, 255];
const BATCHES: usize = 68;
const REAL_KEY: [u8; 32] = [7; 32];
const FORGER_KEY: [u8; 32] = [8; 32];

// ---------------------------------------------------------------------------------------
// Building logs
// ---------------------------------------------------------------------------------------

fn payload(seq: usize, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| u8::try_from((seq * 31 + i * 7 + 1) % 251).unwrap())
        .collect()
}

/// The append calls every log here is built from: 1 to 4 records each, payload lengths
/// on both sides of the 8-byte alignment, timestamps that repeat and step.
fn plan() -> Vec<Vec<Rec>> {
    let mut batches: Vec<Vec<Rec>> = Vec::new();
    let mut seq = 0usize;
    let mut ts = BASE_TS;
    for batch_no in 0..BATCHES {
        ts += 1_000 * (batch_no as u64 % 3);
        let batch = (0..1 + batch_no % 4)
            .map(|j| {
                ts += (j as u64 % 2) * 17;
                let r = Rec {
                    seq: seq as u64,
                    ts,
                    record_type: u16::try_from(seq % 5).unwrap() + 1,
                    payload: payload(seq, PAYLOAD_LENS[seq % PAYLOAD_LENS.len()]),
                };
                seq += 1;
                r
            })
            .collect();
        batches.push(batch);
    }
    batches
}

fn options(key: Option<[u8; 32]>) -> LogOptions {
    LogOptions::new()
        .segment_bytes_max(4096)
        .index_interval_bytes(512)
        .durability(Durability::Flush)
        .key(key.map(ChainKey::new))
}

/// A built log: the directory, its records, the digest after every append call.
struct Built {
    dir: tempfile::TempDir,
    recs: Vec<Rec>,
    digests: Vec<Digest>,
}

impl Built {
    fn segments(&self) -> Vec<PathBuf> {
        segments(self.dir.path())
    }

    fn last_digest(&self) -> Digest {
        *self.digests.last().unwrap()
    }
}

fn build(key: Option<[u8; 32]>, batches: &[Vec<Rec>]) -> Built {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) = Log::open(dir.path(), options(key)).unwrap();
    let mut digests = Vec::new();
    for batch in batches {
        let records: Vec<Record<'_>> = batch
            .iter()
            .map(|r| Record::new(RecordType(r.record_type), r.ts, &r.payload))
            .collect();
        let last = log.append_batch(&records).unwrap();
        assert_eq!(last, Some(Seq(batch.last().unwrap().seq)));
        digests.push(log.digest().unwrap());
    }
    log.close().unwrap();
    Built {
        dir,
        recs: batches.concat(),
        digests,
    }
}

/// The log every case damages a copy of: at least three sealed segments, and an active
/// one of at least four blocks of which a non-last one holds several records.
fn standard(key: Option<[u8; 32]>) -> Built {
    let built = build(key, &plan());
    let segs = built.segments();
    assert!(segs.len() >= 4, "{} segments", segs.len());
    let active = layout(segs.last().unwrap());
    assert!(active.footer.is_none());
    assert!(
        active.blocks.len() >= 4,
        "{} active blocks",
        active.blocks.len()
    );
    assert!(
        active.blocks[..active.blocks.len() - 1]
            .iter()
            .any(|b| b.frames.len() >= 2)
    );
    built
}

fn segments(dir: &Path) -> Vec<PathBuf> {
    blackbox_log::list_segments(dir)
        .unwrap()
        .into_iter()
        .map(|s| s.path)
        .collect()
}

fn copy_dir(src: &Path) -> tempfile::TempDir {
    let dst = tempfile::tempdir().unwrap();
    common::copy_dir(src, dst.path());
    dst
}

/// Path of `file`'s namesake in `dir`.
fn in_dir(dir: &Path, file: &Path) -> PathBuf {
    dir.join(file.file_name().unwrap())
}

// ---------------------------------------------------------------------------------------
// Damage and checks
// ---------------------------------------------------------------------------------------

/// Flips bytes of one file in place, for sweeps over every byte: cheaper than
/// rewriting the file thousands of times.
struct InPlace {
    file: fs::File,
    bytes: std::cell::RefCell<Vec<u8>>,
}

impl InPlace {
    fn open(path: &Path) -> InPlace {
        fs::set_permissions(path, fs::Permissions::from_mode(0o600)).unwrap();
        InPlace {
            file: fs::OpenOptions::new().write(true).open(path).unwrap(),
            bytes: std::cell::RefCell::new(fs::read(path).unwrap()),
        }
    }

    /// Flips byte `at` (a second call flips it back).
    fn flip(&self, at: u64) {
        let mut bytes = self.bytes.borrow_mut();
        bytes[to_usize(at)] ^= 0xff;
        self.file
            .write_all_at(&bytes[to_usize(at)..=to_usize(at)], at)
            .unwrap();
    }
}

/// Rewrites a segment header's bytes with `edit` and recomputes its checksum.
fn patch_header(path: &Path, edit: impl FnOnce(&mut [u8])) {
    let mut bytes = fs::read(path).unwrap();
    edit(&mut bytes[..SEGMENT_HEADER_LEN]);
    let crc = crc32c::crc32c(&bytes[0..92]);
    bytes[92..96].copy_from_slice(&crc.to_le_bytes());
    write_file(path, &bytes);
}

/// Every file in `dir` with its bytes.
fn snapshot(dir: &Path) -> BTreeMap<OsString, Vec<u8>> {
    fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (e.file_name(), fs::read(e.path()).unwrap())
        })
        .collect()
}

fn corruption(e: Error) -> Corruption {
    match e {
        Error::Corrupt(c) => c,
        other => panic!("expected Error::Corrupt, got {other:?}"),
    }
}

/// The corruption `verify` reports; it must name `segment` and an offset in `region`.
fn verify_corrupt(
    dir: &Path,
    key: Option<[u8; 32]>,
    segment: &Path,
    region: Range<u64>,
) -> Corruption {
    let key = key.map(ChainKey::new);
    let c = corruption(verify(dir, key.as_ref(), None).unwrap_err());
    assert_eq!(c.segment, segment, "{c}");
    assert!(region.contains(&c.offset), "{c}: offset outside {region:?}");
    c
}

/// `Log::open` must fail and leave every file as it was.
fn open_fails(dir: &Path, opts: LogOptions) -> Error {
    let before = snapshot(dir);
    let err = Log::open(dir, opts).map(|_| ()).unwrap_err();
    assert_eq!(
        snapshot(dir),
        before,
        "a failed open changed the directory ({err})"
    );
    err
}

/// `Log::open` must fail with the same corruption `verify` found.
fn open_fails_with(dir: &Path, opts: LogOptions, expected: &Corruption) {
    let c = corruption(open_fails(dir, opts));
    assert_eq!(&c, expected);
}

/// Damage inside a sealed segment's blocks: a default open does not read them and must
/// change nothing; an open with `verify_on_open` must fail as `verify` did.
fn open_checks_sealed_content(dir: &Path, key: Option<[u8; 32]>, expected: &Corruption) {
    let before = snapshot(dir);
    let (log, recovery) = Log::open(dir, options(key)).unwrap();
    assert_eq!(recovery.torn_bytes_cut, 0);
    drop(log);
    assert_eq!(snapshot(dir), before, "an open changed a damaged log");
    open_fails_with(dir, options(key).verify_on_open(true), expected);
}

// ---------------------------------------------------------------------------------------
// Byte flips in a sealed segment
// ---------------------------------------------------------------------------------------

#[test]
fn sealed_segment_header_flip() {
    let built = standard(None);
    let copy = copy_dir(built.dir.path());
    let seg = in_dir(copy.path(), &built.segments()[1]);
    flip(&seg, 30); // inside the previous link
    let c = verify_corrupt(copy.path(), None, &seg, 0..SEGMENT_HEADER_LEN as u64);
    assert!(matches!(c.kind, CorruptionKind::SegmentHeader(_)), "{c}");
    open_fails_with(copy.path(), options(None), &c);
}

#[test]
fn sealed_block_header_flip() {
    let built = standard(None);
    let copy = copy_dir(built.dir.path());
    let seg = layout(&in_dir(copy.path(), &built.segments()[1]));
    let b = seg.middle_block();
    flip(&seg.path, b.start + 20); // inside the first seq
    let c = verify_corrupt(
        copy.path(),
        None,
        &seg.path,
        b.start..b.start + BLOCK_HEADER_LEN as u64,
    );
    assert!(matches!(c.kind, CorruptionKind::BlockHeader(_)), "{c}");
    assert_eq!(c.seq, Some(b.first_seq));
    open_checks_sealed_content(copy.path(), None, &c);
}

/// A named choice of frame, and of the byte of it to flip.
type FrameByte = (&'static str, fn(&FrameAt) -> bool, fn(&FrameAt) -> u64);

#[test]
fn sealed_frame_flips() {
    // Frame header (ts delta), a payload byte, a padding byte: each is reported as the
    // frame it belongs to, at the frame's offset.
    let cases: [FrameByte; 3] = [
        ("frame header", |_| true, |f| f.start + 8),
        (
            "payload",
            |f| f.payload_len >= 4,
            |f| f.start + FRAME_HEADER_LEN as u64 + 3,
        ),
        (
            "padding",
            |f| f.payload_len % 8 != 0,
            |f| f.start + FRAME_HEADER_LEN as u64 + f.payload_len,
        ),
    ];
    for (name, pick, byte) in cases {
        let built = standard(None);
        let copy = copy_dir(built.dir.path());
        let seg = layout(&in_dir(copy.path(), &built.segments()[1]));
        let (_, frame) = seg.frame_where(pick);
        let at = byte(frame);
        flip(&seg.path, at);
        let c = verify_corrupt(copy.path(), None, &seg.path, frame.start..frame.end);
        assert!(matches!(c.kind, CorruptionKind::Frame(_)), "{name}: {c}");
        assert_eq!(
            (c.offset, c.seq),
            (frame.start, Some(frame.seq)),
            "{name}: {c}"
        );
        open_checks_sealed_content(copy.path(), None, &c);
    }
}

#[test]
fn sealed_footer_and_trailer_flips() {
    let built = standard(None);
    let sealed = layout(&built.segments()[1]);
    let (body, trailer) = sealed.footer.clone().unwrap();
    let cases = [
        ("footer body: record count", body.start + 9, body.clone()),
        ("footer body: an index entry", body.end - 10, body.clone()),
        (
            "trailer: footer length",
            trailer.start,
            body.start..trailer.end,
        ),
        (
            "trailer: footer checksum",
            trailer.start + 5,
            body.start..trailer.end,
        ),
        (
            "trailer: magic",
            trailer.start + 10,
            body.start..trailer.end,
        ),
    ];
    for (name, at, region) in cases {
        let copy = copy_dir(built.dir.path());
        let seg = in_dir(copy.path(), &sealed.path);
        flip(&seg, at);
        let c = verify_corrupt(copy.path(), None, &seg, region);
        assert!(matches!(c.kind, CorruptionKind::Footer(_)), "{name}: {c}");
        // Open reads every sealed footer, so it refuses this even without verify_on_open.
        open_fails_with(copy.path(), options(None), &c);
    }
}

/// A footer rewritten with a recomputed checksum, claiming other seqs: the checksum
/// passes, the footer's disagreement with the blocks and with the chain does not.
#[test]
fn sealed_footer_rewritten_with_a_valid_checksum() {
    let built = standard(None);
    let sealed = layout(&built.segments()[1]);
    let (body, trailer) = sealed.footer.clone().unwrap();
    // Footer body bytes 24..32 hold the first seq.
    let copy = copy_dir(built.dir.path());
    let seg = in_dir(copy.path(), &sealed.path);
    let mut bytes = fs::read(&seg).unwrap();
    let (b, t) = (to_usize(body.start), to_usize(trailer.start));
    let first_seq = le_u64(&bytes, b + 24);
    bytes[b + 24..b + 32].copy_from_slice(&(first_seq + 1).to_le_bytes());
    let crc = crc32c::crc32c(&bytes[b..t]);
    bytes[t + 4..t + 8].copy_from_slice(&crc.to_le_bytes());
    write_file(&seg, &bytes);
    let c = verify_corrupt(copy.path(), None, &seg, body.clone());
    assert!(matches!(c.kind, CorruptionKind::Footer(_)), "{c}");
    let c = corruption(open_fails(copy.path(), options(None)));
    assert_eq!(c.segment, seg, "{c}");
    assert!(body.contains(&c.offset), "{c}");
    assert!(matches!(c.kind, CorruptionKind::Footer(_)), "{c}");
}

/// Every byte of a sealed segment, flipped in turn: each is caught, and reported as the
/// structure it belongs to.
#[test]
fn every_byte_of_a_sealed_segment_is_covered() {
    let built = standard(None);
    let copy = copy_dir(built.dir.path());
    let seg = layout(&in_dir(copy.path(), &built.segments()[1]));
    let file = InPlace::open(&seg.path);
    let (body, trailer) = seg.footer.clone().unwrap();
    for at in 0..seg.len {
        file.flip(at);
        let err = verify(copy.path(), None, None).unwrap_err();
        file.flip(at);
        if (8..12).contains(&at) {
            // The version is read before the checksum, so that a newer format is
            // reported as such: a flip there reads as a newer version.
            assert!(
                matches!(err, Error::UnsupportedVersion { ref segment, .. } if *segment == seg.path),
                "byte {at}: {err}"
            );
            continue;
        }
        let c = corruption(err);
        assert_eq!(c.segment, seg.path, "byte {at}: {c}");
        let block = seg.blocks.iter().find(|b| (b.start..b.end).contains(&at));
        if at < SEGMENT_HEADER_LEN as u64 {
            assert!(
                matches!(c.kind, CorruptionKind::SegmentHeader(_)),
                "byte {at}: {c}"
            );
            assert_eq!(c.offset, 0);
        } else if let Some(b) = block {
            if at < b.start + BLOCK_HEADER_LEN as u64 {
                assert!(
                    matches!(c.kind, CorruptionKind::BlockHeader(_)),
                    "byte {at}: {c}"
                );
                assert_eq!(c.offset, b.start, "byte {at}: {c}");
            } else {
                let f = b
                    .frames
                    .iter()
                    .find(|f| (f.start..f.end).contains(&at))
                    .unwrap();
                assert!(matches!(c.kind, CorruptionKind::Frame(_)), "byte {at}: {c}");
                assert_eq!((c.offset, c.seq), (f.start, Some(f.seq)), "byte {at}: {c}");
            }
        } else if body.contains(&at) {
            assert!(
                matches!(c.kind, CorruptionKind::Footer(_)),
                "byte {at}: {c}"
            );
            assert_eq!(c.offset, body.start, "byte {at}: {c}");
        } else {
            assert!(trailer.contains(&at));
            assert!(
                matches!(c.kind, CorruptionKind::Footer(_)),
                "byte {at}: {c}"
            );
            assert!(
                (body.start..trailer.end).contains(&c.offset),
                "byte {at}: {c}"
            );
        }
    }
}

// ---------------------------------------------------------------------------------------
// Byte flips in the active segment
// ---------------------------------------------------------------------------------------

#[test]
fn active_segment_header_flip() {
    let built = standard(None);
    let copy = copy_dir(built.dir.path());
    let seg = in_dir(copy.path(), built.segments().last().unwrap());
    flip(&seg, 20); // inside the first seq
    let c = verify_corrupt(copy.path(), None, &seg, 0..SEGMENT_HEADER_LEN as u64);
    assert!(matches!(c.kind, CorruptionKind::SegmentHeader(_)), "{c}");
    open_fails_with(copy.path(), options(None), &c);
}

/// A flip in a block that intact blocks follow cannot be a torn write: open refuses it.
#[test]
fn active_flips_before_the_last_block_are_refused() {
    let built = standard(None);
    let active = layout(built.segments().last().unwrap());
    let b = active.multi_frame_block().clone();
    let f = &b.frames[1];
    let cases = [
        ("block header", b.start + 40),
        ("frame header", f.start + 2),
        (
            "payload",
            f.start + FRAME_HEADER_LEN as u64 + f.payload_len.saturating_sub(1),
        ),
    ];
    for (name, at) in cases {
        let copy = copy_dir(built.dir.path());
        let seg = in_dir(copy.path(), &active.path);
        flip(&seg, at);
        let c = verify_corrupt(copy.path(), None, &seg, b.start..b.end);
        assert!(
            matches!(c.kind, CorruptionKind::DamageBeforeIntactData { .. }),
            "{name}: {c}"
        );
        assert_eq!(c.offset, b.start, "{name}: {c}");
        open_fails_with(copy.path(), options(None), &c);
    }
}

/// A flip in the last block of the active segment looks exactly like a torn write: open
/// cuts that block (and reports it), every block before it survives.
#[test]
fn active_flips_in_the_last_block_are_cut_as_torn() {
    let built = standard(None);
    let active = layout(built.segments().last().unwrap());
    let last = active.blocks.last().unwrap().clone();
    let f = last
        .frames
        .iter()
        .rev()
        .find(|f| f.payload_len > 0)
        .unwrap();
    let cases = [
        ("block header", last.start + 5),
        ("frame header", f.start + 12),
        ("payload", f.start + FRAME_HEADER_LEN as u64),
    ];
    let kept = to_usize(last.first_seq);
    for (name, at) in cases {
        let copy = copy_dir(built.dir.path());
        let seg = in_dir(copy.path(), &active.path);
        flip(&seg, at);
        let report = verify(copy.path(), None, None).unwrap();
        assert_eq!(
            report.torn_tail,
            Some((seg.clone(), last.start, last.end - last.start)),
            "{name}"
        );
        assert_eq!(report.records, kept as u64, "{name}");
        let (log, recovery) = Log::open(copy.path(), options(None)).unwrap();
        assert_eq!(recovery.torn_bytes_cut, last.end - last.start, "{name}");
        assert!(recovery.torn_detail.is_some(), "{name}");
        assert_eq!(recovery.last_seq, Some(Seq(last.first_seq - 1)), "{name}");
        drop(log);
        assert_eq!(read_all(copy.path(), None), built.recs[..kept], "{name}");
        let report = verify(copy.path(), None, None).unwrap();
        assert_eq!(
            (report.records, report.torn_tail),
            (kept as u64, None),
            "{name}"
        );
    }
}

/// Every byte of the active segment, flipped in turn.
#[test]
fn every_byte_of_the_active_segment_is_covered() {
    let built = standard(None);
    let copy = copy_dir(built.dir.path());
    let seg = layout(&in_dir(copy.path(), built.segments().last().unwrap()));
    let file = InPlace::open(&seg.path);
    let last = seg.blocks.last().unwrap();
    for at in 0..seg.len {
        file.flip(at);
        let result = verify(copy.path(), None, None);
        file.flip(at);
        if (8..12).contains(&at) {
            assert!(
                matches!(result, Err(Error::UnsupportedVersion { .. })),
                "byte {at}"
            );
        } else if at < SEGMENT_HEADER_LEN as u64 {
            let c = corruption(result.unwrap_err());
            assert!(
                matches!(c.kind, CorruptionKind::SegmentHeader(_)),
                "byte {at}: {c}"
            );
            assert_eq!((&c.segment, c.offset), (&seg.path, 0), "byte {at}: {c}");
        } else if at >= last.start {
            let report = result.unwrap();
            let torn = Some((seg.path.clone(), last.start, last.end - last.start));
            assert_eq!(report.torn_tail, torn, "byte {at}");
        } else {
            let b = seg
                .blocks
                .iter()
                .find(|b| (b.start..b.end).contains(&at))
                .unwrap();
            let c = corruption(result.unwrap_err());
            assert!(
                matches!(c.kind, CorruptionKind::DamageBeforeIntactData { .. }),
                "byte {at}: {c}"
            );
            assert_eq!(
                (&c.segment, c.offset),
                (&seg.path, b.start),
                "byte {at}: {c}"
            );
        }
    }
}

// ---------------------------------------------------------------------------------------
// Missing, swapped, duplicated and spliced segments
// ---------------------------------------------------------------------------------------

#[test]
fn deleting_the_first_segment_is_a_missing_start() {
    let built = standard(None);
    let copy = copy_dir(built.dir.path());
    let segs = segments(copy.path());
    fs::remove_file(&segs[0]).unwrap();
    let c = verify_corrupt(copy.path(), None, &segs[1], 0..1);
    let first = format::parse_segment_file_name(segs[1].file_name().unwrap().to_str().unwrap());
    assert!(
        matches!(c.kind, CorruptionKind::MissingStart { first_seq } if Some(first_seq) == first),
        "{c}"
    );
    open_fails_with(copy.path(), options(None), &c);
}

#[test]
fn deleting_a_middle_segment_is_a_seq_gap() {
    let built = standard(None);
    let copy = copy_dir(built.dir.path());
    let segs = segments(copy.path());
    fs::remove_file(&segs[1]).unwrap();
    let c = verify_corrupt(copy.path(), None, &segs[2], 0..1);
    let seq_of = |p: &Path| {
        format::parse_segment_file_name(p.file_name().unwrap().to_str().unwrap()).unwrap()
    };
    let (expected, found) = (seq_of(&segs[1]), seq_of(&segs[2]));
    assert!(
        matches!(c.kind, CorruptionKind::SeqGap { expected: e, found: f } if (e, f) == (expected, found)),
        "{c}"
    );
    open_fails_with(copy.path(), options(None), &c);
}

#[test]
fn swapping_two_sealed_segments_is_caught_by_name() {
    let built = standard(None);
    let copy = copy_dir(built.dir.path());
    let segs = segments(copy.path());
    let (a, b) = (fs::read(&segs[1]).unwrap(), fs::read(&segs[2]).unwrap());
    write_file(&segs[1], &b);
    write_file(&segs[2], &a);
    let c = verify_corrupt(copy.path(), None, &segs[1], 0..1);
    assert!(matches!(c.kind, CorruptionKind::SegmentName { .. }), "{c}");
    open_fails_with(copy.path(), options(None), &c);
}

#[test]
fn a_duplicated_segment_is_caught() {
    let built = standard(None);
    let segs = built.segments();
    let first_seq = |p: &Path| {
        format::parse_segment_file_name(p.file_name().unwrap().to_str().unwrap()).unwrap()
    };
    // A copy of segment 1 under the name of a seq inside it: sorted between segments 1
    // and 2, it claims seqs it does not hold.
    let dup_name = format::segment_file_name(first_seq(&segs[1]) + 1);

    let copy = copy_dir(built.dir.path());
    let dup = copy.path().join(&dup_name);
    fs::copy(&segs[1], &dup).unwrap();
    let c = verify_corrupt(copy.path(), None, &dup, 0..1);
    assert!(matches!(c.kind, CorruptionKind::SegmentName { .. }), "{c}");
    open_fails_with(copy.path(), options(None), &c);

    // The same, with its header's first seq rewritten to match the name (and the
    // header checksum recomputed): the seqs do not continue.
    let copy = copy_dir(built.dir.path());
    let dup = copy.path().join(&dup_name);
    fs::copy(&segs[1], &dup).unwrap();
    patch_header(&dup, |h| {
        h[16..24].copy_from_slice(&(first_seq(&segs[1]) + 1).to_le_bytes())
    });
    let c = verify_corrupt(copy.path(), None, &dup, 0..1);
    assert!(
        matches!(
            c.kind,
            CorruptionKind::SeqGap { .. } | CorruptionKind::ChainBreak
        ),
        "{c}"
    );
    open_fails_with(copy.path(), options(None), &c);
}

/// One frame's bytes cut out of the middle of a block: the block no longer adds up.
#[test]
fn a_frame_spliced_out_is_caught() {
    let built = standard(None);
    let segs = built.segments();
    for seg_path in [&segs[1], segs.last().unwrap()] {
        let sealed = seg_path != segs.last().unwrap();
        let copy = copy_dir(built.dir.path());
        let seg = layout(&in_dir(copy.path(), seg_path));
        let b = if sealed {
            // Not the last block: its cut-short frames then reach into the next block.
            seg.blocks[..seg.blocks.len() - 1]
                .iter()
                .find(|b| b.frames.len() >= 2)
                .unwrap()
        } else {
            seg.multi_frame_block()
        };
        let f = &b.frames[1];
        let mut bytes = fs::read(&seg.path).unwrap();
        bytes.drain(to_usize(f.start)..to_usize(f.end));
        write_file(&seg.path, &bytes);
        let c = verify_corrupt(copy.path(), None, &seg.path, b.start..b.end);
        if sealed {
            assert!(matches!(c.kind, CorruptionKind::Frame(_)), "{c}");
            // Reported where the missing frame was, with its seq.
            assert_eq!((c.offset, c.seq), (f.start, Some(f.seq)), "{c}");
            open_checks_sealed_content(copy.path(), None, &c);
        } else {
            assert!(
                matches!(c.kind, CorruptionKind::DamageBeforeIntactData { .. }),
                "{c}"
            );
            assert_eq!(c.offset, b.start, "{c}");
            open_fails_with(copy.path(), options(None), &c);
        }
    }
}

// ---------------------------------------------------------------------------------------
// A cut tail: invisible without a digest, caught with one
// ---------------------------------------------------------------------------------------

/// A named way to cut the tail of a log directory.
type Cut<'a> = (&'static str, Box<dyn Fn(&Path) + 'a>);

#[test]
fn a_cut_tail_passes_verify_but_not_the_digest() {
    let built = standard(None);
    let digest = built.last_digest();
    let segs = built.segments();
    let active = layout(segs.last().unwrap());
    // A digest taken earlier, before the last sealed segment: every cut below keeps it.
    let seq_of = |p: &Path| {
        format::parse_segment_file_name(p.file_name().unwrap().to_str().unwrap()).unwrap()
    };
    let last_sealed_first = seq_of(&segs[segs.len() - 2]);
    let early = *built
        .digests
        .iter()
        .rev()
        .find(|d| d.seq < last_sealed_first)
        .unwrap();

    let cuts: [Cut<'_>; 3] = [
        (
            "the active segment deleted",
            Box::new(|dir: &Path| {
                fs::remove_file(in_dir(dir, &segs[segs.len() - 1])).unwrap();
            }),
        ),
        (
            "the active and the last sealed segment deleted",
            Box::new(|dir: &Path| {
                fs::remove_file(in_dir(dir, &segs[segs.len() - 1])).unwrap();
                fs::remove_file(in_dir(dir, &segs[segs.len() - 2])).unwrap();
            }),
        ),
        (
            "the last two blocks cut",
            Box::new(|dir: &Path| {
                let seg = in_dir(dir, &active.path);
                let keep = active.blocks[active.blocks.len() - 2].start;
                let bytes = fs::read(&seg).unwrap();
                write_file(&seg, &bytes[..to_usize(keep)]);
            }),
        ),
    ];
    for (name, cut) in cuts {
        let copy = copy_dir(built.dir.path());
        cut(copy.path());
        let report = verify(copy.path(), None, None).unwrap();
        assert_eq!(report.torn_tail, None, "{name}");
        assert!(report.records < built.recs.len() as u64, "{name}");
        match verify(copy.path(), None, Some(&digest)) {
            Err(Error::DigestMismatch { seq, .. }) => assert_eq!(seq, digest.seq, "{name}"),
            other => panic!("{name}: expected DigestMismatch, got {other:?}"),
        }
        // The prefix the early digest covers is still intact.
        assert!(
            verify(copy.path(), None, Some(&early))
                .unwrap()
                .digest_matched,
            "{name}"
        );
    }
}

// ---------------------------------------------------------------------------------------
// A tail rewritten with a recomputed chain
// ---------------------------------------------------------------------------------------

/// The plan with one payload of segment 1 changed, same length: the forged log has the
/// same seqs, timestamps, types, blocks and segment files.
fn forged_plan(original: &Built) -> (Vec<Vec<Rec>>, u64) {
    let target = layout(&original.segments()[1]).middle_block().first_seq;
    let mut batches = plan();
    for r in batches.iter_mut().flatten() {
        if r.seq >= target && !r.payload.is_empty() {
            r.payload[0] ^= 0x55;
            let seq = r.seq;
            return (batches, seq);
        }
    }
    panic!("no payload to change");
}

/// Replaces the log files of `dir` with those of `forged`.
fn replace_files(dir: &Path, forged: &Path) {
    for seg in segments(dir) {
        fs::remove_file(seg).unwrap();
    }
    for seg in segments(forged) {
        fs::copy(&seg, in_dir(dir, &seg)).unwrap();
    }
}

#[test]
fn an_unkeyed_rewrite_is_caught_only_by_a_digest() {
    let built = standard(None);
    let (batches, changed) = forged_plan(&built);
    let forged = build(None, &batches);
    let names = |d: &Path| {
        segments(d)
            .iter()
            .map(|p| p.file_name().unwrap().to_owned())
            .collect::<Vec<_>>()
    };
    assert_eq!(names(forged.dir.path()), names(built.dir.path()));
    let copy = copy_dir(built.dir.path());
    replace_files(copy.path(), forged.dir.path());
    assert_ne!(read_all(copy.path(), None), built.recs);

    // Without a key anyone can recompute the chain: the forgery is self-consistent.
    let report = verify(copy.path(), None, None).unwrap();
    assert_eq!(report.records, built.recs.len() as u64);
    // The digest taken from the original log exposes it.
    match verify(copy.path(), None, Some(&built.last_digest())) {
        Err(Error::DigestMismatch { seq, .. }) => assert_eq!(seq, built.last_digest().seq),
        other => panic!("expected DigestMismatch, got {other:?}"),
    }
    // A digest of the prefix before the changed record still matches.
    let before = built
        .digests
        .iter()
        .rev()
        .find(|d| d.seq < changed)
        .unwrap();
    assert!(
        verify(copy.path(), None, Some(before))
            .unwrap()
            .digest_matched
    );
}

#[test]
fn a_keyed_rewrite_with_another_key_is_caught() {
    let built = standard(Some(REAL_KEY));
    let real = ChainKey::new(REAL_KEY);
    let (batches, _) = forged_plan(&built);
    let forged = build(Some(FORGER_KEY), &batches);

    // As written, the forger's headers carry the forger's key id.
    let copy = copy_dir(built.dir.path());
    replace_files(copy.path(), forged.dir.path());
    let first = segments(copy.path())[0].clone();
    match verify(copy.path(), Some(&real), None) {
        Err(Error::WrongKey { segment }) => assert_eq!(segment, first),
        other => panic!("expected WrongKey, got {other:?}"),
    }
    let err = open_fails(copy.path(), options(Some(REAL_KEY)));
    assert!(matches!(err, Error::WrongKey { .. }), "{err}");
    let err = verify(copy.path(), None, None).unwrap_err();
    assert!(matches!(err, Error::KeyRequired { .. }), "{err}");

    // With the real key's id patched into every header (checksums recomputed), the
    // headers pass, and the chain, which the forger could not compute, fails.
    for seg in segments(copy.path()) {
        patch_header(&seg, |h| h[56..88].copy_from_slice(&real.id()));
    }
    let c = verify_corrupt(copy.path(), Some(REAL_KEY), &first, 96..97);
    assert!(matches!(c.kind, CorruptionKind::ChainMismatch), "{c}");
    assert_eq!(c.seq, Some(0));
    // Open scans the active segment's chain (sealed ones only with verify_on_open).
    let err = corruption(open_fails(copy.path(), options(Some(REAL_KEY))));
    assert!(matches!(err.kind, CorruptionKind::ChainMismatch), "{err}");
    open_fails_with(
        copy.path(),
        options(Some(REAL_KEY)).verify_on_open(true),
        &c,
    );
    // And the forger's own key no longer matches the headers.
    let err = verify(copy.path(), Some(&ChainKey::new(FORGER_KEY)), None).unwrap_err();
    assert!(matches!(err, Error::WrongKey { .. }), "{err}");
}

// ---------------------------------------------------------------------------------------
// Directories that are not (this version's) logs
// ---------------------------------------------------------------------------------------

/// Open must refuse `dir` with an error `check` accepts, create nothing and change nothing.
fn refused_untouched(dir: &Path, check: impl Fn(&Error) -> bool) {
    let before = snapshot(dir);
    let err = Log::open(dir, options(None)).map(|_| ()).unwrap_err();
    assert!(check(&err), "unexpected error: {err:?}");
    assert_eq!(snapshot(dir), before, "{err}");
}

#[test]
fn a_foreign_directory_is_not_a_log() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("notes.txt"), b"shopping list\n").unwrap();
    refused_untouched(dir.path(), |e| matches!(e, Error::NotALog { .. }));
    assert!(!dir.path().join(blackbox_log::LOCK_FILE_NAME).exists());
    let err = verify(dir.path(), None, None).unwrap_err();
    assert!(matches!(err, Error::NotALog { .. }), "{err}");
}

#[test]
fn a_segment_named_file_with_the_wrong_magic_is_not_a_log() {
    let name = format::segment_file_name(0);
    for content in [
        &b"hello"[..],
        b"not a segment",
        &[b'x'; 200],
        b"BBOXSEX\0 and then some more bytes",
    ] {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join(&name), content).unwrap();
        refused_untouched(dir.path(), |e| matches!(e, Error::NotALog { .. }));
        assert!(!dir.path().join(blackbox_log::LOCK_FILE_NAME).exists());
    }
}

#[test]
fn a_newer_format_version_is_refused_untouched() {
    let built = standard(None);
    let segs = built.segments();
    for seg in [&segs[0], segs.last().unwrap()] {
        let copy = copy_dir(built.dir.path());
        fs::remove_file(copy.path().join(blackbox_log::LOCK_FILE_NAME)).unwrap();
        let path = in_dir(copy.path(), seg);
        patch_header(&path, |h| h[8..12].copy_from_slice(&99u32.to_le_bytes()));
        let is_v99 = |e: &Error| {
            matches!(e, Error::UnsupportedVersion { segment, found: 99, supported }
                if *segment == path && *supported == FORMAT_VERSION)
        };
        refused_untouched(copy.path(), is_v99);
        assert!(!copy.path().join(blackbox_log::LOCK_FILE_NAME).exists());
        let err = verify(copy.path(), None, None).unwrap_err();
        assert!(is_v99(&err), "{err}");
    }
}

#[test]
fn an_older_format_version_is_refused_untouched_with_a_sentence_saying_so() {
    // Version 1 stored events in another layout, version 2 had no compressed blocks,
    // version 3 left every record but an event untagged in the tag index: this build
    // reads its own version only.
    let built = standard(None);
    let segs = built.segments();
    for old in [1u32, 2, 3] {
        for seg in [&segs[0], segs.last().unwrap()] {
            let copy = copy_dir(built.dir.path());
            fs::remove_file(copy.path().join(blackbox_log::LOCK_FILE_NAME)).unwrap();
            let path = in_dir(copy.path(), seg);
            patch_header(&path, |h| h[8..12].copy_from_slice(&old.to_le_bytes()));
            let is_old = |e: &Error| {
                matches!(e, Error::UnsupportedVersion { segment, found, supported: 4 }
                    if *segment == path && *found == old)
            };
            refused_untouched(copy.path(), is_old);
            assert!(!copy.path().join(blackbox_log::LOCK_FILE_NAME).exists());
            let err = verify(copy.path(), None, None).unwrap_err();
            assert!(is_old(&err), "{err}");
            let text = err.to_string();
            assert!(
                text.contains(&format!(
                    "format version {old}, older than the version 4 this build reads"
                )),
                "{text}"
            );
        }
    }
}

// ---------------------------------------------------------------------------------------
// The paths that read footers and the last segment only: digest and structure
// ---------------------------------------------------------------------------------------

/// `LogReader::digest` and `LogReader::structure` must both refuse `dir` with a
/// corruption naming `segment`; returns the corruption.
fn digest_refused(dir: &Path, segment: &Path) -> Corruption {
    let reader = blackbox_log::LogReader::open(dir).unwrap();
    let c = corruption(reader.digest().unwrap_err());
    assert_eq!(c.segment, segment, "{c}");
    let s = corruption(reader.structure().unwrap_err());
    assert_eq!(s, c);
    c
}

#[test]
fn digest_refuses_a_log_with_a_missing_middle_segment() {
    // Regression: the digest read only the last segment, so a log with a hole in the
    // middle got a digest as if it were whole.
    let built = standard(None);
    let copy = copy_dir(built.dir.path());
    let segs = segments(copy.path());
    fs::remove_file(&segs[1]).unwrap();
    let c = digest_refused(copy.path(), &segs[2]);
    assert!(matches!(c.kind, CorruptionKind::SeqGap { .. }), "{c}");
}

#[test]
fn digest_refuses_a_foreign_file_named_like_a_segment() {
    // Regression: a foreign file among the segments went unnoticed by the digest.
    let built = standard(None);
    let segs = built.segments();
    // In place of a middle segment, and beside intact ones under a seq they hold.
    let copy = copy_dir(built.dir.path());
    let replaced = in_dir(copy.path(), &segs[1]);
    write_file(
        &replaced,
        b"these are not the bytes of a segment, but a shopping list",
    );
    let c = digest_refused(copy.path(), &replaced);
    assert!(matches!(c.kind, CorruptionKind::SegmentHeader(_)), "{c}");

    let copy = copy_dir(built.dir.path());
    let first = format::parse_segment_file_name(segs[1].file_name().unwrap().to_str().unwrap());
    let stray = copy
        .path()
        .join(format::segment_file_name(first.unwrap() + 1));
    fs::write(&stray, [b'x'; 200]).unwrap();
    let c = digest_refused(copy.path(), &stray);
    assert!(matches!(c.kind, CorruptionKind::SegmentHeader(_)), "{c}");
}

#[test]
fn digest_refuses_a_zero_length_stray_segment() {
    // Regression: an empty file named after a seq past the end made the digest skip
    // the real last segment and report the one before it.
    let built = standard(None);
    let segs = built.segments();
    for (where_, seq) in [
        ("past the end", 1_000_000u64),
        (
            "inside a sealed segment",
            format::parse_segment_file_name(segs[1].file_name().unwrap().to_str().unwrap())
                .unwrap()
                + 1,
        ),
    ] {
        let copy = copy_dir(built.dir.path());
        let stray = copy.path().join(format::segment_file_name(seq));
        fs::write(&stray, b"").unwrap();
        let c = digest_refused(copy.path(), &stray);
        assert!(
            matches!(c.kind, CorruptionKind::SegmentHeader(_)),
            "{where_}: {c}"
        );
        // Open and verify name the same file.
        let err = corruption(open_fails(copy.path(), options(None)));
        assert_eq!(err.segment, stray, "{where_}: {err}");
        let err = corruption(verify(copy.path(), None, None).unwrap_err());
        assert_eq!(err.segment, stray, "{where_}: {err}");
    }
}

#[test]
fn digest_refuses_an_unreadable_segment() {
    let built = standard(None);
    let copy = copy_dir(built.dir.path());
    let seg = in_dir(copy.path(), &built.segments()[1]);
    fs::set_permissions(&seg, fs::Permissions::from_mode(0o000)).unwrap();
    if fs::File::open(&seg).is_ok() {
        eprintln!("skipped: this user reads files whatever their mode (root)");
        return;
    }
    let reader = blackbox_log::LogReader::open(copy.path()).unwrap();
    match reader.digest() {
        Err(Error::Io { path, .. }) => assert_eq!(path, seg),
        other => panic!(
            "expected an I/O error naming {}, got {other:?}",
            seg.display()
        ),
    }
}

#[test]
fn structure_describes_every_segment_of_an_intact_log() {
    let built = standard(None);
    let reader = blackbox_log::LogReader::open(built.dir.path()).unwrap();
    let summaries = reader.structure().unwrap();
    let segs = built.segments();
    assert_eq!(summaries.len(), segs.len());
    let mut next = 0;
    for (s, path) in summaries.iter().zip(&segs) {
        assert_eq!(&s.path, path);
        assert_eq!(s.first_seq, next);
        assert_eq!(s.len_bytes, fs::metadata(path).unwrap().len());
        match s.sealed {
            Some(f) => {
                let recs: Vec<&Rec> = built
                    .recs
                    .iter()
                    .filter(|r| r.seq >= s.first_seq && r.seq <= f.last.seq)
                    .collect();
                assert_eq!(f.record_count, recs.len() as u64);
                assert_eq!(f.first_ts_ns, recs[0].ts);
                assert_eq!(f.last_ts_ns, recs[recs.len() - 1].ts);
                next = f.last.seq + 1;
            }
            None => assert_eq!(path, segs.last().unwrap()),
        }
    }
    assert_eq!(
        reader.digest().unwrap(),
        Some(built.last_digest()),
        "the digest of an intact log is the writer's"
    );
}

// ---------------------------------------------------------------------------------------
// Range reads never skip records silently
// ---------------------------------------------------------------------------------------
//
// A range read positions itself by what only checksums cover: the footers' last
// timestamps (binary search over segments), the sparse index (first seq, first ts,
// offset, previous link) and the headers of the blocks it skips. Each case rewrites one
// of them, checksum recomputed, so that the read would start after records in its
// range: the read must then return every record in the range or fail, never fewer.

/// Rewrites a block header's bytes with `edit` and recomputes its checksum.
fn patch_block_header(path: &Path, start: u64, edit: impl FnOnce(&mut [u8])) {
    let mut bytes = fs::read(path).unwrap();
    let h = &mut bytes[to_usize(start)..to_usize(start) + BLOCK_HEADER_LEN];
    edit(h);
    let crc = crc32c::crc32c_append(crc32c::crc32c(&h[0..12]), &h[16..BLOCK_HEADER_LEN]);
    h[12..16].copy_from_slice(&crc.to_le_bytes());
    write_file(path, &bytes);
}

/// Rewrites a sealed segment's footer body with `edit` and recomputes its checksum.
fn patch_footer(seg: &common::Layout, edit: impl FnOnce(&mut [u8])) {
    let (body, trailer) = seg.footer.clone().unwrap();
    let mut bytes = fs::read(&seg.path).unwrap();
    let (b, t) = (to_usize(body.start), to_usize(trailer.start));
    edit(&mut bytes[b..t]);
    let crc = crc32c::crc32c(&bytes[b..t]);
    bytes[t + 4..t + 8].copy_from_slice(&crc.to_le_bytes());
    write_file(&seg.path, &bytes);
}

/// The footer's index entries: (first seq, first ts, offset) at body bytes 96 + 16 T.
fn index_entries(seg: &common::Layout) -> Vec<(usize, u64, u64, u64)> {
    let (body, _) = seg.footer.clone().unwrap();
    let bytes = fs::read(&seg.path).unwrap();
    let f = &bytes[to_usize(body.start)..to_usize(body.end)];
    let types = common::le_u32(f, 88) as usize;
    let n = common::le_u32(f, 92) as usize;
    (0..n)
        .map(|i| {
            let at = 96 + types * 16 + i * 56;
            (at, le_u64(f, at), le_u64(f, at + 8), le_u64(f, at + 16))
        })
        .collect()
}

fn reader(dir: &Path, key: Option<[u8; 32]>) -> blackbox_log::LogReader {
    blackbox_log::LogReader::open_with(
        dir,
        blackbox_log::ReaderOptions {
            key: key.map(ChainKey::new),
        },
    )
    .unwrap()
}

fn collect(records: blackbox_log::Result<blackbox_log::Records>) -> blackbox_log::Result<Vec<Rec>> {
    records?
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

/// A read by time from `lo` must fail with a corruption, and the same read of the
/// undamaged log returns every record from `lo` on: the damage hid some of them.
fn time_read_fails(built: &Built, dir: &Path, key: Option<[u8; 32]>, lo: u64, what: &str) {
    let whole: Vec<Rec> = built.recs.iter().filter(|r| r.ts >= lo).cloned().collect();
    assert_eq!(
        collect(reader(built.dir.path(), key).records_by_time(lo..)).unwrap(),
        whole,
        "{what}"
    );
    match collect(reader(dir, key).records_by_time(lo..)) {
        Ok(got) => panic!(
            "{what}: the read returned {} of the {} records from ts {lo} without an error",
            got.len(),
            whole.len()
        ),
        Err(Error::Corrupt(_)) => {}
        Err(other) => panic!("{what}: expected a corruption, got {other}"),
    }
}

/// A block of `seg` (after its first) whose records span more than one timestamp.
fn block_with_a_time_span(seg: &common::Layout, built: &Built) -> (usize, u64, u64) {
    seg.blocks
        .iter()
        .enumerate()
        .skip(1)
        .find_map(|(i, b)| {
            let first = built.recs[to_usize(b.first_seq)].ts;
            let last = built.recs[to_usize(b.frames.last().unwrap().seq)].ts;
            (first < last).then_some((i, first, last))
        })
        .unwrap()
}

#[test]
fn a_lowered_last_ts_in_a_skipped_block_header_is_caught() {
    // Regression: a read by time skipped blocks by their headers' last timestamp, which
    // only a checksum covers: lowered, the block's records in range were skipped.
    for key in [None, Some(REAL_KEY)] {
        let built = standard(key);
        let segs = built.segments();
        for (name, path) in [("sealed", &segs[1]), ("active", segs.last().unwrap())] {
            let copy = copy_dir(built.dir.path());
            let seg = layout(&in_dir(copy.path(), path));
            let (i, first_ts, last_ts) = block_with_a_time_span(&seg, &built);
            patch_block_header(&seg.path, seg.blocks[i].start, |h| {
                h[32..40].copy_from_slice(&first_ts.to_le_bytes());
            });
            let what = format!("{name} segment, key {}", key.is_some());
            time_read_fails(&built, copy.path(), key, last_ts, &what);
        }
    }
}

#[test]
fn a_lowered_last_block_cannot_empty_a_read() {
    // The skipped block is the log's last: with nothing after it to read, the read
    // would have ended empty.
    for key in [None, Some(REAL_KEY)] {
        let built = standard(key);
        let copy = copy_dir(built.dir.path());
        let seg = layout(&in_dir(copy.path(), built.segments().last().unwrap()));
        let last = seg.blocks.last().unwrap();
        let first_ts = built.recs[to_usize(last.first_seq)].ts;
        let last_ts = built.recs.last().unwrap().ts;
        assert!(first_ts < last_ts, "the last block spans one timestamp");
        patch_block_header(&seg.path, last.start, |h| {
            h[32..40].copy_from_slice(&first_ts.to_le_bytes());
        });
        time_read_fails(&built, copy.path(), key, last_ts, "last block");
    }
}

#[test]
fn a_lowered_last_ts_in_a_footer_is_caught() {
    // Regression: the binary search over segments trusted the footers' last
    // timestamps: lowered, a read by time started at the next segment.
    for key in [None, Some(REAL_KEY)] {
        let built = standard(key);
        let copy = copy_dir(built.dir.path());
        let seg = layout(&in_dir(copy.path(), &built.segments()[1]));
        let first = built.recs[to_usize(seg.blocks[0].first_seq)].ts;
        let last_seq = seg.blocks.last().unwrap().frames.last().unwrap().seq;
        let lo = built.recs[to_usize(last_seq)].ts;
        assert!(first < lo);
        patch_footer(&seg, |f| f[48..56].copy_from_slice(&(lo - 1).to_le_bytes()));
        time_read_fails(&built, copy.path(), key, lo, "footer last ts");
    }
}

#[test]
fn a_lowered_first_ts_in_an_index_entry_is_caught() {
    // Regression: the seek took the last index entry whose first timestamp is before
    // the range; lowered, a later entry was taken and the records before it skipped.
    for key in [None, Some(REAL_KEY)] {
        let built = standard(key);
        let copy = copy_dir(built.dir.path());
        let seg = layout(&in_dir(copy.path(), &built.segments()[1]));
        let entries = index_entries(&seg);
        assert!(entries.len() >= 3, "{} index entries", entries.len());
        let first_seq = entries[2].1;
        let lo = built.recs[to_usize(first_seq - 1)].ts; // the record just before
        assert!(lo > entries[1].2);
        // Every entry from the third on claims to start before `lo`, whichever the
        // seek picks.
        patch_footer(&seg, |f| {
            for &(at, ..) in &entries[2..] {
                f[at + 8..at + 16].copy_from_slice(&(lo - 1).to_le_bytes());
            }
        });
        time_read_fails(&built, copy.path(), key, lo, "index first ts");
    }
}

#[test]
fn an_index_entry_moved_to_a_later_block_is_caught() {
    // Index entries rewritten to point at a later block, with that block's first seq
    // and the link stored before it (copied from the header before it): the seek lands
    // past records in range, on a block whose chain link verifies.
    for key in [None, Some(REAL_KEY)] {
        let built = standard(key);
        let copy = copy_dir(built.dir.path());
        let seg = layout(&in_dir(copy.path(), &built.segments()[1]));
        let entries = index_entries(&seg);
        let position = |offset: u64| seg.blocks.iter().position(|b| b.start == offset).unwrap();
        // An entry whose block k is followed by two blocks without an entry, the second
        // of which spans a later time than the entry's first.
        let last_ts_of =
            |b: &common::BlockAt| built.recs[to_usize(b.frames.last().unwrap().seq)].ts;
        let (j, k) = (1..entries.len())
            .find_map(|j| {
                let k = position(entries[j].3);
                let next_entry = entries
                    .get(j + 1)
                    .map_or(seg.blocks.len(), |e| position(e.3));
                (next_entry >= k + 3 && last_ts_of(&seg.blocks[k + 1]) > entries[j].2)
                    .then_some((j, k))
            })
            .unwrap();
        let target = &seg.blocks[k + 2];
        let bytes = fs::read(&seg.path).unwrap();
        let prev_link_at = to_usize(seg.blocks[k + 1].start) + 40;
        let prev_link = bytes[prev_link_at..prev_link_at + 32].to_vec();
        // That entry and every one before it point at the target, whichever the seek
        // picks.
        patch_footer(&seg, |f| {
            for &(at, ..) in &entries[..=j] {
                f[at..at + 8].copy_from_slice(&target.first_seq.to_le_bytes());
                f[at + 16..at + 24].copy_from_slice(&target.start.to_le_bytes());
                f[at + 24..at + 56].copy_from_slice(&prev_link);
            }
        });
        // From the last record of the block before the target: in range, and skipped.
        let lo = last_ts_of(&seg.blocks[k + 1]);
        time_read_fails(&built, copy.path(), key, lo, "index entry moved");
    }
}

#[test]
fn a_lowered_count_in_the_last_block_cannot_empty_a_seq_read() {
    // Regression: a read by seq skips blocks whose header says they end before the
    // range; the last block's count lowered (checksum recomputed) made a read of the
    // log's last records return nothing. Anywhere else the next block's seq gives the
    // lie away; at the end nothing followed.
    for key in [None, Some(REAL_KEY)] {
        let built = standard(key);
        let copy = copy_dir(built.dir.path());
        let seg = layout(&in_dir(copy.path(), built.segments().last().unwrap()));
        let last = seg.blocks.last().unwrap();
        let count = u32::try_from(last.frames.len()).unwrap();
        assert!(count >= 2, "the last block holds one record");
        patch_block_header(&seg.path, last.start, |h| {
            h[8..12].copy_from_slice(&(count - 1).to_le_bytes());
        });
        let lo = built.recs.last().unwrap().seq;
        assert_eq!(
            collect(reader(built.dir.path(), key).records(Seq(lo)..)).unwrap(),
            built.recs[to_usize(lo)..].to_vec()
        );
        match collect(reader(copy.path(), key).records(Seq(lo)..)) {
            Ok(got) => panic!("the read returned {got:?} without an error"),
            Err(e) => assert!(matches!(e, Error::Corrupt(_)), "{e}"),
        }
    }
}
