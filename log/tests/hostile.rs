//! Hostile values with valid checksums: numbers near `u64::MAX`, counts that cannot
//! be, lengths past the file or past the format's limits.
//!
//! The segments here are forged from scratch by the rules of `docs/FORMAT.md` (header,
//! blocks, frames, footer, every crc32c and the blake3 chain link computed here, not by
//! the crate), so the values reach the arithmetic behind the checksums. Every path
//! (open, verify, reads by seq and by time, digest, structure, salvage, appends) must
//! answer with a clear error, or report a loss, and never panic or wrap around.
#![expect(clippy::unwrap_used, reason = "tests fail loudly on any error")]

use std::fs;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;

use blackbox_log::format::segment_file_name;
use blackbox_log::{
    Durability, Error, Log, LogOptions, LogReader, Record, RecordType, Salvaged, Seq, verify,
};

const UNKEYED_CONTEXT: &str = "blackbox-log 2026-11-30 chain link, unkeyed";

/// Appends an empty tag index (no block described) and its unkeyed authenticator to a
/// footer body: bytes 0..88 of the body, then the index, under the tag-index key.
fn end_with_an_empty_tag_index(body: &mut Vec<u8>) {
    let index = [0u8; 8];
    let key = blake3::derive_key("blackbox-log 2026-12-01 tag index, unkeyed", &[]);
    let mut h = blake3::Hasher::new_keyed(&key);
    h.update(&body[..88]);
    h.update(&index);
    let mac = *h.finalize().as_bytes();
    body.extend_from_slice(&index);
    body.extend_from_slice(&mac);
}

fn crc(parts: &[&[u8]]) -> u32 {
    parts.iter().fold(0, |c, p| crc32c::crc32c_append(c, p))
}

/// A segment header (96 bytes): unkeyed, version 4.
fn header(first_seq: u64, prev_link: [u8; 32]) -> Vec<u8> {
    let mut h = vec![0u8; 96];
    h[0..8].copy_from_slice(b"BBOXSEG\0");
    h[8..12].copy_from_slice(&4u32.to_le_bytes());
    h[16..24].copy_from_slice(&first_seq.to_le_bytes());
    h[24..56].copy_from_slice(&prev_link);
    let c = crc(&[&h[0..92]]);
    h[92..96].copy_from_slice(&c.to_le_bytes());
    h
}

/// A block whose header says `first_seq`, `count`, `first_ts`, `last_ts`, holding one
/// frame per `(ts_delta, payload)`, chained from `prev_link`. Returns the bytes and
/// the block's link.
fn block(
    first_seq: u64,
    count: u32,
    first_ts: u64,
    last_ts: u64,
    frames: &[(u32, &[u8])],
    prev_link: [u8; 32],
) -> (Vec<u8>, [u8; 32]) {
    let mut body = Vec::new();
    for (i, (delta, payload)) in frames.iter().enumerate() {
        let mut head = [0u8; 12];
        head[0..4].copy_from_slice(&u32::try_from(payload.len()).unwrap().to_le_bytes());
        head[4..6].copy_from_slice(&1u16.to_le_bytes());
        head[8..12].copy_from_slice(&delta.to_le_bytes());
        let seq = first_seq.wrapping_add(u64::try_from(i).unwrap());
        let c = crc(&[&seq.to_le_bytes(), &head, payload]);
        body.extend_from_slice(&head);
        body.extend_from_slice(&c.to_le_bytes());
        body.extend_from_slice(payload);
        body.resize(body.len().next_multiple_of(8), 0);
    }
    let frames_len = u32::try_from(body.len()).unwrap();
    let mut meta = Vec::new();
    meta.extend_from_slice(&frames_len.to_le_bytes());
    meta.extend_from_slice(&count.to_le_bytes());
    meta.extend_from_slice(&first_seq.to_le_bytes());
    meta.extend_from_slice(&first_ts.to_le_bytes());
    meta.extend_from_slice(&last_ts.to_le_bytes());
    let key = blake3::derive_key(UNKEYED_CONTEXT, b"");
    let mut hasher = blake3::Hasher::new_keyed(&key);
    hasher.update(&body);
    hasher.update(&meta);
    hasher.update(&prev_link);
    let link = *hasher.finalize().as_bytes();
    let mut h = vec![0u8; 72];
    h[0..4].copy_from_slice(b"BBLK");
    h[4..8].copy_from_slice(&frames_len.to_le_bytes());
    h[8..12].copy_from_slice(&count.to_le_bytes());
    h[16..24].copy_from_slice(&first_seq.to_le_bytes());
    h[24..32].copy_from_slice(&first_ts.to_le_bytes());
    h[32..40].copy_from_slice(&last_ts.to_le_bytes());
    h[40..72].copy_from_slice(&link);
    let c = crc(&[&h[0..12], &h[16..72]]);
    h[12..16].copy_from_slice(&c.to_le_bytes());
    h.extend_from_slice(&body);
    (h, link)
}

/// Rewrites the footer of a sealed segment with `edit` and recomputes its crc.
fn patch_footer(path: &Path, edit: impl FnOnce(&mut [u8])) {
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(path, fs::Permissions::from_mode(0o600)).unwrap();
    let mut bytes = fs::read(path).unwrap();
    let len = bytes.len();
    let body_len = usize::try_from(u32::from_le_bytes(
        bytes[len - 16..len - 12].try_into().unwrap(),
    ))
    .unwrap();
    let (b, t) = (len - 16 - body_len, len - 16);
    edit(&mut bytes[b..t]);
    let c = crc(&[&bytes[b..t]]);
    bytes[t + 4..t + 8].copy_from_slice(&c.to_le_bytes());
    fs::write(path, &bytes).unwrap();
}

/// Runs every reading and writing path on `dir`; none may panic. Returns what each
/// said, for the caller to check.
/// Salvage reads every byte of every segment, so `with_salvage` is off where a sparse
/// file of gigabytes would make that slow.
fn every_path(
    dir: &Path,
    seq: u64,
    ts: u64,
    with_salvage: bool,
) -> Vec<(&'static str, Result<(), String>)> {
    let show = |r: Result<(), Error>| r.map_err(|e| e.to_string());
    type Op = Box<dyn Fn(&Path) -> Result<(), Error>>;
    let ops: Vec<(&'static str, Op)> = vec![
        ("verify", Box::new(|d| verify(d, None, None).map(|_| ()))),
        (
            "open",
            Box::new(|d| {
                let (mut log, _) = Log::open(d, LogOptions::new())?;
                log.append(Record::new(RecordType(1), u64::MAX, b"x"))?;
                log.close().map(|_| ())
            }),
        ),
        (
            "open, verify all",
            Box::new(|d| Log::open(d, LogOptions::new().verify_on_open(true)).map(|_| ())),
        ),
        (
            "read by seq",
            Box::new(move |d| {
                LogReader::open(d)?
                    .records(Seq(seq)..)?
                    .try_for_each(|r| r.map(|_| ()))
            }),
        ),
        (
            "read by time",
            Box::new(move |d| {
                LogReader::open(d)?
                    .records_by_time(ts..)?
                    .try_for_each(|r| r.map(|_| ()))
            }),
        ),
        (
            "digest",
            Box::new(|d| LogReader::open(d)?.digest().map(|_| ())),
        ),
        (
            "structure",
            Box::new(|d| LogReader::open(d)?.structure().map(|_| ())),
        ),
        (
            "salvage",
            Box::new(move |d| {
                let reader = LogReader::open(d)?;
                for from in [0, seq] {
                    for item in reader.salvage(Seq(from)..)? {
                        if let Salvaged::Record(r) = item {
                            // A salvaged record's seq and time are what its block says.
                            let _ = (r.seq(), r.ts_ns());
                        }
                    }
                }
                Ok(())
            }),
        ),
    ];
    ops.into_iter()
        .filter(|(name, _)| with_salvage || *name != "salvage")
        .map(|(name, op)| {
            // A panic is the failure this test exists for: report which path.
            let outcome = catch_unwind(AssertUnwindSafe(|| op(dir)))
                .unwrap_or_else(|_| panic!("{name} panicked"));
            (name, show(outcome))
        })
        .collect()
}

fn assert_all_refused(results: &[(&str, Result<(), String>)], except: &[&str]) {
    for (name, r) in results {
        if !except.contains(name) {
            assert!(r.is_err(), "{name} accepted the log");
        }
    }
}

#[test]
fn a_block_whose_seqs_run_past_u64_max_is_corrupt_not_a_panic() {
    // Regression: `last_seq` and the seq after a block were computed with unchecked
    // additions: a segment named near u64::MAX made a read that started there panic
    // (debug) or wrap to seq 0 (release).
    for (first, count) in [(u64::MAX - 1, 3u32), (u64::MAX, 1)] {
        let dir = tempfile::tempdir().unwrap();
        let mut seg = header(first, [9; 32]);
        let frames: Vec<(u32, &[u8])> = (0..count).map(|_| (0, &b"p"[..])).collect();
        let (b, _) = block(first, count, 5, 5, &frames, [9; 32]);
        seg.extend_from_slice(&b);
        fs::write(dir.path().join(segment_file_name(first)), &seg).unwrap();
        let results = every_path(dir.path(), first, 1, true);
        assert_all_refused(&results, &["salvage"]);
    }
}

#[test]
fn timestamps_near_u64_max_are_corrupt_not_a_panic() {
    // Regression: a frame's time was the block's first time plus its delta, unchecked:
    // near u64::MAX it overflowed while the frames were checked.
    // An intact block follows, so the bad one is damage, not a torn tail.
    let dir = tempfile::tempdir().unwrap();
    let mut seg = header(0, [0; 32]);
    let (b, link) = block(
        0,
        2,
        u64::MAX - 5,
        u64::MAX,
        &[(0, b"a"), (10, b"b")],
        [0; 32],
    );
    seg.extend_from_slice(&b);
    let (b, _) = block(2, 1, u64::MAX, u64::MAX, &[(0, b"c")], link);
    seg.extend_from_slice(&b);
    fs::write(dir.path().join(segment_file_name(0)), &seg).unwrap();
    let results = every_path(dir.path(), 1, u64::MAX - 1, true);
    // Structure reads headers and footers only, and salvage reports losses.
    assert_all_refused(&results, &["salvage", "structure"]);
    for (name, r) in &results {
        if let Err(e) = r {
            assert!(!e.contains("overflow"), "{name}: {e}");
        }
    }
}

/// A real log of several segments.
fn real_log() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let opts = LogOptions::new()
        .segment_bytes_max(4096)
        .durability(Durability::Flush);
    let (mut log, _) = Log::open(dir.path(), opts).unwrap();
    for i in 0..120u64 {
        log.append(Record::new(RecordType(1), 1_000 + i, &[7; 60]))
            .unwrap();
    }
    log.close().unwrap();
    dir
}

#[test]
fn a_footer_whose_seqs_cannot_be_is_corrupt_not_a_panic() {
    // Regression: open computed the seq after a sealed segment from its footer's last
    // seq plus one, unchecked; and trusted a record count no file of that size holds.
    type Edit = (&'static str, fn(&mut [u8]));
    let cases: [Edit; 3] = [
        ("last seq u64::MAX", |f| {
            f[32..40].copy_from_slice(&u64::MAX.to_le_bytes());
            f[8..16].copy_from_slice(&u64::MAX.to_le_bytes());
        }),
        ("a count past what the file holds", |f| {
            let first = u64::from_le_bytes(f[24..32].try_into().unwrap());
            f[32..40].copy_from_slice(&(first + (1 << 40)).to_le_bytes());
            f[8..16].copy_from_slice(&((1u64 << 40) + 1).to_le_bytes());
        }),
        ("times out of order", |f| {
            f[48..56].copy_from_slice(&0u64.to_le_bytes());
        }),
    ];
    for (name, edit) in cases {
        let dir = real_log();
        let segs = blackbox_log::list_segments(dir.path()).unwrap();
        patch_footer(&segs[0].path, edit);
        let results = every_path(dir.path(), 5, 1_005, true);
        for (path, r) in &results {
            if matches!(*path, "open" | "structure" | "digest" | "verify") {
                assert!(r.is_err(), "{name}: {path} accepted the log");
            }
        }
    }
}

#[test]
fn index_entries_past_the_file_are_harmless() {
    // Index entries whose offsets point past the file (or at u64::MAX): reads fall back
    // to the blocks, never read out of bounds.
    let dir = real_log();
    let segs = blackbox_log::list_segments(dir.path()).unwrap();
    patch_footer(&segs[1].path, |f| {
        let types = usize::try_from(u32::from_le_bytes(f[88..92].try_into().unwrap())).unwrap();
        let n = usize::try_from(u32::from_le_bytes(f[92..96].try_into().unwrap())).unwrap();
        for i in 0..n {
            let at = 96 + types * 16 + i * 56 + 16;
            let offset = if i % 2 == 0 { u64::MAX } else { 1 << 40 };
            f[at..at + 8].copy_from_slice(&offset.to_le_bytes());
        }
    });
    let first = segs[1].first_seq;
    let reader = LogReader::open(dir.path()).unwrap();
    let by_seq: Vec<u64> = reader
        .records(Seq(first + 1)..)
        .unwrap()
        .map(|r| r.unwrap().seq().0)
        .collect();
    assert_eq!(by_seq, (first + 1..120).collect::<Vec<_>>());
    let by_time: Vec<u64> = reader
        .records_by_time(1_000 + first + 1..)
        .unwrap()
        .map(|r| r.unwrap().seq().0)
        .collect();
    assert_eq!(by_time, (first + 1..120).collect::<Vec<_>>());
    let _ = every_path(dir.path(), first + 1, 1_000 + first + 1, true);
}

#[test]
fn one_torn_segment_not_named_zero_is_corrupt_not_a_panic() {
    // Regression: the digest of a log whose only segment is an empty file not named
    // seq 0 looked for the segment two before the last, `n - 2`, and underflowed.
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join(segment_file_name(5)), b"").unwrap();
    let results = every_path(dir.path(), 5, 1, true);
    assert_all_refused(&results, &["salvage", "read by seq", "read by time"]);
}

#[test]
fn a_block_longer_than_the_format_allows_is_refused_before_it_is_read() {
    // Regression: a block header's length was bounded only by the file's, so a crafted
    // header in a sparse file made every reader allocate and read 4 GiB. Here the block
    // is in a sealed segment (its footer at the end of the sparse file, a segment after
    // it), so every path meets it at once.
    let dir = tempfile::tempdir().unwrap();
    let mut seg = header(0, [0; 32]);
    let mut h = vec![0u8; 72];
    h[0..4].copy_from_slice(b"BBLK");
    h[4..8].copy_from_slice(&(u32::MAX - 7).to_le_bytes());
    h[8..12].copy_from_slice(&1u32.to_le_bytes());
    h[24..40].copy_from_slice(&[0; 16]);
    let c = crc(&[&h[0..12], &h[16..72]]);
    h[12..16].copy_from_slice(&c.to_le_bytes());
    seg.extend_from_slice(&h);
    let footer_start = 96 + 72 + u64::from(u32::MAX - 7);
    let mut footer = vec![0u8; 96];
    footer[0..8].copy_from_slice(b"BBOXFTR\0");
    footer[8..16].copy_from_slice(&1u64.to_le_bytes());
    footer[16..24].copy_from_slice(&1u64.to_le_bytes());
    footer[56..88].copy_from_slice(&[5; 32]);
    end_with_an_empty_tag_index(&mut footer);
    let c = crc(&[&footer]);
    footer.extend_from_slice(&136u32.to_le_bytes());
    footer.extend_from_slice(&c.to_le_bytes());
    footer.extend_from_slice(b"BBOXEND\0");
    let path = dir.path().join(segment_file_name(0));
    fs::write(&path, &seg).unwrap();
    let file = fs::OpenOptions::new().write(true).open(&path).unwrap();
    std::os::unix::fs::FileExt::write_all_at(&file, &footer, footer_start).unwrap();
    drop(file);
    fs::write(dir.path().join(segment_file_name(1)), header(1, [5; 32])).unwrap();

    let err = verify(dir.path(), None, None).unwrap_err();
    assert!(err.to_string().contains("limit"), "{err}");
    let results = every_path(dir.path(), 0, 0, false);
    for (name, r) in &results {
        if let Err(e) = r
            && *name != "open"
        {
            assert!(e.contains("limit"), "{name}: {e}");
        }
    }
}

#[test]
fn a_footer_longer_than_the_format_allows_is_refused_before_it_is_read() {
    // Regression: a trailer claiming a 4 GiB footer at the end of a sparse file that
    // long made open, verify and every read allocate and read 4 GiB.
    let dir = real_log();
    let segs = blackbox_log::list_segments(dir.path()).unwrap();
    let path = &segs[0].path;
    {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(path, fs::Permissions::from_mode(0o600)).unwrap();
    }
    let len = u64::from(u32::MAX) + (1 << 20);
    let file = fs::OpenOptions::new().write(true).open(path).unwrap();
    file.set_len(len).unwrap();
    let mut trailer = [0u8; 16];
    trailer[0..4].copy_from_slice(&(u32::MAX - 7).to_le_bytes());
    trailer[8..16].copy_from_slice(b"BBOXEND\0");
    std::os::unix::fs::FileExt::write_all_at(&file, &trailer, len - 16).unwrap();
    drop(file);
    let err = verify(dir.path(), None, None).unwrap_err();
    assert!(err.to_string().contains("limit"), "{err}");
    let _ = every_path(dir.path(), 0, 1, false);
}

#[test]
fn a_huge_lock_file_is_read_no_further_than_a_pid() {
    // Regression: a second writer read the whole lock file to name its holder; a lock
    // file grown to 64 GiB (sparse) would be read into memory, or, where that memory
    // cannot be had, the holder went unnamed. Only the first line is read.
    let dir = tempfile::tempdir().unwrap();
    let (log, _) = Log::open(dir.path(), LogOptions::new()).unwrap();
    let lock = dir.path().join(blackbox_log::LOCK_FILE_NAME);
    fs::OpenOptions::new()
        .write(true)
        .open(&lock)
        .unwrap()
        .set_len(64 << 30)
        .unwrap();
    let err = Log::open(dir.path(), LogOptions::new())
        .map(|_| ())
        .unwrap_err();
    let pid = std::process::id();
    assert!(
        matches!(err, Error::Locked { holder_pid: Some(p), .. } if p == pid),
        "{err}"
    );
    drop(log);
}

/// A footer (body and trailer) for a sealed segment of `count` records from
/// `first_seq`, all at time `ts`, its one index entry at the first block (offset 96).
fn footer(
    first_seq: u64,
    count: u64,
    ts: u64,
    prev_link: [u8; 32],
    last_link: [u8; 32],
) -> Vec<u8> {
    let mut body = Vec::new();
    body.extend_from_slice(b"BBOXFTR\0");
    body.extend_from_slice(&count.to_le_bytes());
    body.extend_from_slice(&1u64.to_le_bytes());
    body.extend_from_slice(&first_seq.to_le_bytes());
    body.extend_from_slice(&(first_seq + count - 1).to_le_bytes());
    body.extend_from_slice(&ts.to_le_bytes());
    body.extend_from_slice(&ts.to_le_bytes());
    body.extend_from_slice(&last_link);
    body.extend_from_slice(&1u32.to_le_bytes());
    body.extend_from_slice(&1u32.to_le_bytes());
    // One type count: type 1, every record.
    body.extend_from_slice(&1u16.to_le_bytes());
    body.extend_from_slice(&[0; 6]);
    body.extend_from_slice(&count.to_le_bytes());
    // One index entry.
    body.extend_from_slice(&first_seq.to_le_bytes());
    body.extend_from_slice(&ts.to_le_bytes());
    body.extend_from_slice(&96u64.to_le_bytes());
    body.extend_from_slice(&prev_link);
    end_with_an_empty_tag_index(&mut body);
    let mut out = body.clone();
    out.extend_from_slice(&u32::try_from(body.len()).unwrap().to_le_bytes());
    out.extend_from_slice(&crc(&[&body]).to_le_bytes());
    out.extend_from_slice(b"BBOXEND\0");
    out
}

/// Forges, in `dir`, a log whose next seq is `u64::MAX - 1`: sealed segments of the
/// largest size a file may have (sparse, 8 EiB), each whose footer counts as many
/// records as its bytes can hold (16 bytes each), then an active segment holding one
/// record, `p` at seq `u64::MAX - 2`. Returns false where the file system does not take
/// files that large.
fn forge_log_near_the_last_seq(dir: &Path) -> bool {
    use std::io::{Seek, SeekFrom, Write};
    const TS: u64 = 5;
    let size = (1u64 << 63) - 8;
    let active_first = u64::MAX - 2;
    let (mut first, mut prev) = (0u64, [0u8; 32]);
    let mut n = 0u8;
    while first < active_first {
        let tail_len = footer(0, 1, TS, prev, prev).len() as u64;
        let data_bytes = size - tail_len - 96;
        let count = (data_bytes / 16).min(active_first - first);
        n += 1;
        let link = [n; 32];
        let path = dir.join(segment_file_name(first));
        let mut file = fs::File::create(&path).unwrap();
        file.write_all(&header(first, prev)).unwrap();
        if file.set_len(size).is_err() {
            return false;
        }
        let tail = footer(first, count, TS, prev, link);
        file.seek(SeekFrom::Start(size - tail.len() as u64))
            .unwrap();
        file.write_all(&tail).unwrap();
        first += count;
        prev = link;
    }
    let mut seg = header(active_first, prev);
    let (b, _) = block(active_first, 1, TS, TS, &[(0, b"p")], prev);
    seg.extend_from_slice(&b);
    fs::write(dir.join(segment_file_name(active_first)), &seg).unwrap();
    true
}

#[test]
fn appends_that_seqs_cannot_hold_are_refused_and_lose_nothing() {
    // Regression: appends took the next seq with unchecked additions, so a log whose
    // footers (valid checksums, counts its files' sizes allow) bring its next seq near
    // u64::MAX overflowed: a panic in debug, seqs wrapping to 0 in release. An append
    // whose seqs would run past u64::MAX is refused whole as SeqSpaceExhausted, and the
    // log keeps what it holds. The forged log needs files of 8 EiB, which only a file
    // system like tmpfs takes (sparse: a few pages each).
    let Ok(dir) = tempfile::tempdir_in("/dev/shm") else {
        eprintln!("skipped: no /dev/shm for files of 8 EiB");
        return;
    };
    if !forge_log_near_the_last_seq(dir.path()) {
        eprintln!("skipped: /dev/shm does not take files of 8 EiB");
        return;
    }
    let last = u64::MAX - 2;
    let (mut log, recovery) = catch_unwind(AssertUnwindSafe(|| {
        Log::open(dir.path(), LogOptions::new())
    }))
    .unwrap_or_else(|_| panic!("open panicked"))
    .unwrap();
    assert_eq!(recovery.last_seq, Some(Seq(last)));
    assert_eq!(log.next_seq(), Seq(u64::MAX - 1));
    // Two records need seqs u64::MAX - 1 and u64::MAX, after which no next seq exists:
    // refused whole.
    let two = [
        Record::new(RecordType(1), 10, b"a"),
        Record::new(RecordType(1), 11, b"b"),
    ];
    let refused = catch_unwind(AssertUnwindSafe(|| log.append_batch(&two)))
        .unwrap_or_else(|_| panic!("a batch past the seq space panicked"));
    assert!(
        matches!(refused, Err(Error::SeqSpaceExhausted { next_seq }) if next_seq == u64::MAX - 1),
        "{refused:?}"
    );
    // One fits; the one after it does not.
    assert_eq!(
        log.append(Record::new(RecordType(1), 12, b"c")).unwrap(),
        Seq(u64::MAX - 1)
    );
    let refused = catch_unwind(AssertUnwindSafe(|| {
        log.append(Record::new(RecordType(1), 13, b"d"))
    }))
    .unwrap_or_else(|_| panic!("an append past the seq space panicked"));
    let Err(e @ Error::SeqSpaceExhausted { next_seq }) = refused else {
        panic!("{refused:?}");
    };
    assert_eq!(next_seq, u64::MAX);
    assert!(e.to_string().contains(&u64::MAX.to_string()), "{e}");
    log.close().unwrap();

    // Nothing refused reached the log, and nothing wrapped around to seq 0.
    let got: Vec<(u64, u64, Vec<u8>)> = LogReader::open(dir.path())
        .unwrap()
        .records(Seq(last)..)
        .unwrap()
        .map(|r| {
            let r = r.unwrap();
            (r.seq().0, r.ts_ns(), r.payload().to_vec())
        })
        .collect();
    assert_eq!(
        got,
        [(last, 5, b"p".to_vec()), (u64::MAX - 1, 12, b"c".to_vec())]
    );
}
