//! Decompression bombs: a compressed block that claims a huge length, or whose zstd
//! data expands past the length it claims, is refused with a clear error, and no read
//! allocates more than a few MiB for it.
//!
//! The segments are forged here by the rules of `docs/FORMAT.md` (segment header,
//! block header, compressed head, every crc32c and the blake3 chain link), with valid
//! checksums and links, so that the hostile lengths reach the decompression. An
//! allocator counts the largest allocation the reading thread asks for.
#![expect(clippy::unwrap_used, reason = "tests fail loudly on any error")]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::fs;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

use blackbox_log::format::segment_file_name;
use blackbox_log::{Error, LogReader, Salvaged, Seq, verify};

/// Counts the largest allocation made while the thread watches.
struct Counting;

static LARGEST: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static WATCHING: Cell<bool> = const { Cell::new(false) };
}

fn note(size: usize) {
    if WATCHING.try_with(Cell::get).unwrap_or(false) {
        LARGEST.fetch_max(size, Ordering::Relaxed);
    }
}

// SAFETY: every call is passed on to the system allocator unchanged.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: the caller's contract is the system allocator's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: as above.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size);
        // SAFETY: as above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// The largest allocation `f` made on this thread.
fn largest_allocation<T>(f: impl FnOnce() -> T) -> (T, usize) {
    LARGEST.store(0, Ordering::Relaxed);
    WATCHING.with(|w| w.set(true));
    let out = f();
    WATCHING.with(|w| w.set(false));
    (out, LARGEST.load(Ordering::Relaxed))
}

const UNKEYED_CONTEXT: &str = "blackbox-log 2026-11-30 chain link, unkeyed";
const MIB: usize = 1 << 20;

fn crc(parts: &[&[u8]]) -> u32 {
    parts.iter().fold(0, |c, p| crc32c::crc32c_append(c, p))
}

/// A segment header (96 bytes): unkeyed, version 4, first seq 0, genesis link.
fn segment_header() -> Vec<u8> {
    let mut h = vec![0u8; 96];
    h[0..8].copy_from_slice(b"BBOXSEG\0");
    h[8..12].copy_from_slice(&4u32.to_le_bytes());
    let c = crc(&[&h[0..92]]);
    h[92..96].copy_from_slice(&c.to_le_bytes());
    h
}

/// `count` frames from seq `first`, all at ts delta 0, each with a 40-byte JSON payload.
fn frames_from(first: u64, count: u32) -> Vec<u8> {
    let mut body = Vec::new();
    for seq in first..first + u64::from(count) {
        let payload = format!(r#"{{"seq":{seq:>8},"joint":"elbow","ok":true}}"#);
        let payload = payload.as_bytes();
        let mut head = [0u8; 12];
        head[0..4].copy_from_slice(&u32::try_from(payload.len()).unwrap().to_le_bytes());
        head[4..6].copy_from_slice(&1u16.to_le_bytes());
        let c = crc(&[&seq.to_le_bytes(), &head, payload]);
        body.extend_from_slice(&head);
        body.extend_from_slice(&c.to_le_bytes());
        body.extend_from_slice(payload);
        body.resize(body.len().next_multiple_of(8), 0);
    }
    body
}

fn frames(count: u32) -> Vec<u8> {
    frames_from(0, count)
}

/// A block header for `stored` bytes (`word`: their length, with bit 31 for a
/// compressed block) of `count` records from `first_seq`, all at ts 1000, chained from
/// `prev`. Returns the header and the block's link.
fn block_header(
    word: u32,
    count: u32,
    first_seq: u64,
    stored: &[u8],
    prev: [u8; 32],
) -> (Vec<u8>, [u8; 32]) {
    let mut meta = Vec::new();
    meta.extend_from_slice(&word.to_le_bytes());
    meta.extend_from_slice(&count.to_le_bytes());
    meta.extend_from_slice(&first_seq.to_le_bytes());
    meta.extend_from_slice(&1000u64.to_le_bytes());
    meta.extend_from_slice(&1000u64.to_le_bytes());
    let key = blake3::derive_key(UNKEYED_CONTEXT, b"");
    let mut hasher = blake3::Hasher::new_keyed(&key);
    hasher.update(stored);
    hasher.update(&meta);
    hasher.update(&prev);
    let link = *hasher.finalize().as_bytes();
    let mut h = vec![0u8; 72];
    h[0..4].copy_from_slice(b"BBLK");
    h[4..12].copy_from_slice(&meta[0..8]);
    h[16..40].copy_from_slice(&meta[8..32]);
    h[40..72].copy_from_slice(&link);
    let c = crc(&[&h[0..12], &h[16..72]]);
    h[12..16].copy_from_slice(&c.to_le_bytes());
    (h, link)
}

/// Makes a zstd frame's header declare `size` as its content size, in an 8-byte field.
fn set_content_size(z: &mut Vec<u8>, size: u64) {
    let fhd = z[4];
    let single = (fhd >> 5) & 1 == 1;
    let dict_bytes = [0, 1, 2, 4][usize::from(fhd & 3)];
    let fcs_at = 5 + usize::from(!single) + dict_bytes;
    let fcs_bytes = [usize::from(single), 2, 4, 8][usize::from(fhd >> 6)];
    let mut out = z[..fcs_at].to_vec();
    out[4] = (fhd & 0x3f) | 0xc0;
    out.extend_from_slice(&size.to_le_bytes());
    out.extend_from_slice(&z[fcs_at + fcs_bytes..]);
    *z = out;
}

/// A log of one segment holding one compressed block of `count` records at ts 1000
/// (its head claims `frames_len`, it stores the zstd frame `z`), then a raw block of 3
/// records; checksums and links valid.
fn forge(dir: &Path, count: u32, frames_len: u32, z: &[u8]) {
    let mut stored = Vec::new();
    stored.extend_from_slice(&frames_len.to_le_bytes());
    stored.extend_from_slice(&u32::try_from(z.len()).unwrap().to_le_bytes());
    let c = crc(&[&stored, z]);
    stored.extend_from_slice(&c.to_le_bytes());
    stored.extend_from_slice(z);
    stored.resize(stored.len().next_multiple_of(8), 0);
    let word = u32::try_from(stored.len()).unwrap() | 1 << 31;
    let (h, link) = block_header(word, count, 0, &stored, [0; 32]);
    let mut file = segment_header();
    file.extend_from_slice(&h);
    file.extend_from_slice(&stored);
    // An intact raw block follows, so the forged one is not a torn tail.
    let next = frames_from(u64::from(count), 3);
    let (h, _) = block_header(
        u32::try_from(next.len()).unwrap(),
        3,
        u64::from(count),
        &next,
        link,
    );
    file.extend_from_slice(&h);
    file.extend_from_slice(&next);
    fs::write(dir.join(segment_file_name(0)), file).unwrap();
}

/// Reads the forged log every way (range read, verify, salvage) and returns the range
/// read's and verify's error texts, and the largest allocation any of them made.
fn read_every_way(dir: &Path) -> (String, String, usize) {
    let ((read, verified, salvaged), largest) = largest_allocation(|| {
        let reader = LogReader::open(dir).unwrap();
        let read: Result<Vec<_>, Error> = reader.records(Seq(0)..).unwrap().collect();
        let verified = verify(dir, None, None);
        let salvaged: Vec<Salvaged> = reader.salvage(Seq(0)..).unwrap().collect();
        (read, verified, salvaged)
    });
    let read = match read {
        Err(e @ Error::Corrupt(_)) => e.to_string(),
        Ok(records) => panic!("the forged block was read: {} records", records.len()),
        Err(e) => panic!("the forged block was refused, but not as damage: {e}"),
    };
    let verified = match verified {
        Err(e @ Error::Corrupt(_)) => e.to_string(),
        other => panic!("the forged block verified: {other:?}"),
    };
    assert!(
        salvaged
            .iter()
            .all(|s| !matches!(s, Salvaged::Record(r) if r.seq().0 < 100)),
        "salvage returned a record of the forged block"
    );
    (read, verified, largest)
}

#[test]
fn the_forged_block_is_read_when_its_lengths_are_true() {
    // The forger's own check: the same block with true lengths reads back.
    let dir = tempfile::tempdir().unwrap();
    let f = frames(100);
    let z = zstd::bulk::compress(&f, 3).unwrap();
    forge(dir.path(), 100, u32::try_from(f.len()).unwrap(), &z);
    let reader = LogReader::open(dir.path()).unwrap();
    let read: Vec<_> = reader
        .records(Seq(0)..)
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(read.len(), 103);
    assert_eq!(
        read[7].payload(),
        br#"{"seq":       7,"joint":"elbow","ok":true}"#
    );
    assert_eq!(verify(dir.path(), None, None).unwrap().records, 103);
}

#[test]
fn decompression_bombs_are_refused_without_a_huge_allocation() {
    let f = frames(100);
    let true_len = u32::try_from(f.len()).unwrap();

    // 1. A head (and a zstd frame) claiming 1 GiB of frames: past the format's limit
    // for a compressed block, refused before anything is allocated for it.
    let dir = tempfile::tempdir().unwrap();
    let mut z = zstd::bulk::compress(&f, 3).unwrap();
    set_content_size(&mut z, 1 << 30);
    forge(dir.path(), 100, 1 << 30, &z);
    let (read, verified, largest) = read_every_way(dir.path());
    for text in [&read, &verified] {
        assert!(
            text.contains("claims 1073741824 bytes of frames, more than the format's limit"),
            "{text}"
        );
    }
    assert!(largest < 4 * MIB, "largest allocation {largest} bytes");

    // 2. Data that expands to 32 MiB behind a head and a zstd frame header claiming
    // 64 KiB: zstd stops at the 64 KiB it was given room for.
    let dir = tempfile::tempdir().unwrap();
    let mut bomb = f.clone();
    bomb.resize(32 * MIB, 0);
    let mut z = zstd::bulk::compress(&bomb, 3).unwrap();
    assert!(z.len() < 64 << 10);
    set_content_size(&mut z, 64 << 10);
    forge(dir.path(), 100, 64 << 10, &z);
    let (read, verified, largest) = read_every_way(dir.path());
    for text in [&read, &verified] {
        assert!(
            text.contains("does not decompress to the 65536 bytes it declares"),
            "{text}"
        );
    }
    assert!(largest < 4 * MIB, "largest allocation {largest} bytes");

    // 3. A head claiming 48 MiB (within the limit) over a zstd frame that declares its
    // true length: refused before the 48 MiB are allocated.
    let dir = tempfile::tempdir().unwrap();
    let z = zstd::bulk::compress(&f, 3).unwrap();
    forge(dir.path(), 100, 48 << 20, &z);
    let (read, verified, largest) = read_every_way(dir.path());
    for text in [&read, &verified] {
        assert!(
            text.contains(&format!(
                "zstd frame declares {true_len} bytes, its head 50331648"
            )),
            "{text}"
        );
    }
    assert!(largest < 4 * MIB, "largest allocation {largest} bytes");

    // 4. A skippable frame after the zstd frame (decompression would pass over it):
    // the zstd bytes must be exactly one frame.
    let dir = tempfile::tempdir().unwrap();
    let mut z = zstd::bulk::compress(&f, 3).unwrap();
    z.extend_from_slice(&0x184D_2A50u32.to_le_bytes());
    z.extend_from_slice(&5u32.to_le_bytes());
    z.extend_from_slice(b"extra");
    forge(dir.path(), 100, true_len, &z);
    let (read, verified, _) = read_every_way(dir.path());
    for text in [&read, &verified] {
        assert!(text.contains("are not one zstd frame of"), "{text}");
    }

    // 5. Data that decompresses to less than it claims.
    let dir = tempfile::tempdir().unwrap();
    let mut z = zstd::bulk::compress(&f, 3).unwrap();
    set_content_size(&mut z, u64::from(true_len) + 64);
    forge(dir.path(), 100, true_len + 64, &z);
    let (read, _, _) = read_every_way(dir.path());
    assert!(read.contains("does not decompress to the"), "{read}");
}
