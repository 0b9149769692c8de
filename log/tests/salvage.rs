//! Salvage: every intact record around damage, and exactly what was lost.
//!
//! Each case damages a copy of a real log (keyed and unkeyed: several sealed segments
//! and an active one, blocks of one append call each) in one way, then salvages it.
//! The oracle is the list of records written, kept apart from the log, and the block
//! boundaries read from the files by hand (`common::layout`): salvage must yield
//! exactly the written records outside the damaged blocks, each byte for byte, and
//! report exactly the seqs of the damaged blocks as lost, naming the file and the bytes.
#![expect(clippy::unwrap_used, reason = "tests fail loudly on any error")]

mod common;

use common::{Layout, Rec, layout, to_usize, write_file};
use std::fs;
use std::ops::RangeInclusive;
use std::path::{Path, PathBuf};

use blackbox_log::format::{self, FRAME_HEADER_LEN};
use blackbox_log::{
    ChainKey, DamageKind, Durability, Log, LogOptions, LogReader, Loss, LostSeqs, ReaderOptions,
    Record, RecordType, Salvaged, Seq,
};

const KEY: [u8; 32] = [7; 32];
const RECORDS: u64 = 240;
const TS_BASE: u64 = 1_700_000_000_000_000_000;

fn options(key: Option<[u8; 32]>, index_interval_bytes: u64) -> LogOptions {
    LogOptions::new()
        .segment_bytes_max(4096)
        .index_interval_bytes(index_interval_bytes)
        .durability(Durability::Flush)
        .key(key.map(ChainKey::new))
}

/// The record at `seq`, a function of the seq alone.
fn expected(seq: u64) -> Rec {
    let e = common::expected_record(seq, 120, TS_BASE + seq * 1_000);
    Rec {
        seq,
        ts: e.ts_ns,
        record_type: e.record_type.0,
        payload: e.payload,
    }
}

/// A log of `RECORDS` records appended in batches of 1 to 3 (one block each).
fn build(key: Option<[u8; 32]>, index_interval_bytes: u64) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) = Log::open(dir.path(), options(key, index_interval_bytes)).unwrap();
    let mut seq = 0;
    while seq < RECORDS {
        let n = (1 + seq % 3).min(RECORDS - seq);
        let recs: Vec<Rec> = (seq..seq + n).map(expected).collect();
        let batch: Vec<Record<'_>> = recs
            .iter()
            .map(|r| Record::new(RecordType(r.record_type), r.ts, &r.payload))
            .collect();
        log.append_batch(&batch).unwrap();
        seq += n;
    }
    log.close().unwrap();
    let segments = segments(dir.path());
    assert!(segments.len() >= 5, "{} segments", segments.len());
    dir
}

fn segments(dir: &Path) -> Vec<PathBuf> {
    blackbox_log::list_segments(dir)
        .unwrap()
        .into_iter()
        .map(|s| s.path)
        .collect()
}

fn first_seq_of(path: &Path) -> u64 {
    format::parse_segment_file_name(path.file_name().unwrap().to_str().unwrap()).unwrap()
}

/// Salvages `range` of the log in `dir`: the records and the losses, in order, checking
/// on the way that records and losses never overlap and come in seq order.
fn salvage(dir: &Path, key: Option<[u8; 32]>, range: RangeInclusive<u64>) -> (Vec<Rec>, Vec<Loss>) {
    let reader = LogReader::open_with(
        dir,
        ReaderOptions {
            key: key.map(ChainKey::new),
        },
    )
    .unwrap();
    let mut recs = Vec::new();
    let mut losses = Vec::new();
    let mut next = *range.start();
    for item in reader
        .salvage(Seq(*range.start())..=Seq(*range.end()))
        .unwrap()
    {
        match item {
            Salvaged::Record(r) => {
                assert!(r.seq().0 >= next, "seq {} out of order", r.seq());
                next = r.seq().0 + 1;
                recs.push(Rec {
                    seq: r.seq().0,
                    ts: r.ts_ns(),
                    record_type: r.record_type().0,
                    payload: r.payload().to_vec(),
                });
            }
            Salvaged::Lost(loss) => {
                match loss.seqs {
                    LostSeqs::Exact { first, last } => {
                        assert!(first >= next && last >= first, "{loss}");
                        next = last + 1;
                    }
                    LostSeqs::From { first, .. } => assert!(first >= next, "{loss}"),
                    LostSeqs::None => {}
                }
                losses.push(loss);
            }
        }
    }
    (recs, losses)
}

/// The written records in `range` except those in `lost`.
fn written_except(range: RangeInclusive<u64>, lost: &[RangeInclusive<u64>]) -> Vec<Rec> {
    range
        .filter(|s| !lost.iter().any(|l| l.contains(s)))
        .map(expected)
        .collect()
}

/// The seqs a block holds.
fn seqs_of(block: &common::BlockAt) -> RangeInclusive<u64> {
    block.first_seq..=block.frames.last().unwrap().seq
}

fn exact(range: &RangeInclusive<u64>) -> LostSeqs {
    LostSeqs::Exact {
        first: *range.start(),
        last: *range.end(),
    }
}

fn all() -> RangeInclusive<u64> {
    0..=RECORDS - 1
}

/// A middle segment (not the first, not the last) of the log.
fn middle(dir: &Path) -> Layout {
    let segs = segments(dir);
    layout(&segs[segs.len() / 2])
}

#[test]
fn an_intact_log_is_salvaged_whole_without_loss() {
    for key in [None, Some(KEY)] {
        let dir = build(key, 512);
        let (recs, losses) = salvage(dir.path(), key, all());
        assert_eq!(recs, written_except(all(), &[]));
        assert_eq!(losses, []);
    }
}

#[test]
fn damage_in_the_middle_of_a_segment_loses_exactly_its_block() {
    for key in [None, Some(KEY)] {
        let dir = build(key, 512);
        let seg = middle(dir.path());
        let block = &seg.blocks[seg.blocks.len() / 2];
        let frame = block.frames.iter().find(|f| f.payload_len > 0).unwrap();
        common::flip(&seg.path, frame.start + FRAME_HEADER_LEN as u64);
        let lost = seqs_of(block);
        let (recs, losses) = salvage(dir.path(), key, all());
        assert_eq!(recs, written_except(all(), std::slice::from_ref(&lost)));
        assert_eq!(losses.len(), 1, "{losses:?}");
        let loss = &losses[0];
        assert_eq!(loss.seqs, exact(&lost), "{loss}");
        assert!(loss.chain_broken, "{loss}");
        assert_eq!(loss.places.len(), 1, "{loss}");
        let place = &loss.places[0];
        assert_eq!(place.segment, seg.path);
        assert_eq!(place.bytes, Some(block.start..block.end), "{loss}");
        assert!(
            matches!(&place.kind, DamageKind::Damaged(why) if why.contains("frame")),
            "{loss}"
        );
    }
}

#[test]
fn a_damaged_block_header_loses_its_block_and_an_unindexed_successor() {
    // The block after a block whose header is unreadable follows a link that was lost
    // with that header: unless the sparse index stores the link before it, its own
    // link cannot be checked, and it is reported lost rather than trusted.
    for (interval, successor_indexed) in [(1 << 20, false), (1, true)] {
        let dir = build(Some(KEY), interval);
        let seg = middle(dir.path());
        let k = seg.blocks.len() / 2;
        let (block, next) = (&seg.blocks[k], &seg.blocks[k + 1]);
        common::flip(&seg.path, block.start + 20); // the first seq, under the header crc
        let (recs, losses) = salvage(dir.path(), Some(KEY), all());
        let lost = if successor_indexed {
            seqs_of(block)
        } else {
            block.first_seq..=*seqs_of(next).end()
        };
        assert_eq!(recs, written_except(all(), std::slice::from_ref(&lost)));
        assert_eq!(losses.len(), 1, "{losses:?}");
        let loss = &losses[0];
        assert_eq!(loss.seqs, exact(&lost), "{loss}");
        assert!(loss.chain_broken);
        assert_eq!(loss.places[0].bytes, Some(block.start..block.end), "{loss}");
        if successor_indexed {
            assert_eq!(loss.places.len(), 1, "{loss}");
        } else {
            assert_eq!(loss.places.len(), 2, "{loss}");
            assert_eq!(loss.places[1].bytes, Some(next.start..next.end), "{loss}");
            assert_eq!(loss.places[1].kind, DamageKind::Unverifiable, "{loss}");
        }
    }
}

#[test]
fn a_missing_middle_segment_is_an_exact_loss() {
    for key in [None, Some(KEY)] {
        let dir = build(key, 512);
        let segs = segments(dir.path());
        let i = segs.len() / 2;
        let lost = first_seq_of(&segs[i])..=first_seq_of(&segs[i + 1]) - 1;
        fs::remove_file(&segs[i]).unwrap();
        let (recs, losses) = salvage(dir.path(), key, all());
        assert_eq!(recs, written_except(all(), std::slice::from_ref(&lost)));
        assert_eq!(losses.len(), 1, "{losses:?}");
        assert_eq!(losses[0].seqs, exact(&lost));
        assert!(losses[0].chain_broken);
        assert_eq!(losses[0].places.len(), 1);
        assert_eq!(losses[0].places[0].segment, segs[i]);
        assert_eq!(losses[0].places[0].kind, DamageKind::Missing);
    }
}

#[test]
fn a_missing_first_segment_is_lost_from_seq_zero() {
    let dir = build(None, 512);
    let segs = segments(dir.path());
    let lost = 0..=first_seq_of(&segs[1]) - 1;
    fs::remove_file(&segs[0]).unwrap();
    let (recs, losses) = salvage(dir.path(), None, all());
    assert_eq!(recs, written_except(all(), std::slice::from_ref(&lost)));
    assert_eq!(losses.len(), 1, "{losses:?}");
    assert_eq!(losses[0].seqs, exact(&lost));
    assert_eq!(losses[0].places[0].kind, DamageKind::Missing);
}

#[test]
fn a_torn_header_of_a_middle_segment_loses_that_segment() {
    let dir = build(None, 512);
    let segs = segments(dir.path());
    let i = segs.len() / 2;
    let lost = first_seq_of(&segs[i])..=first_seq_of(&segs[i + 1]) - 1;
    let bytes = fs::read(&segs[i]).unwrap();
    write_file(&segs[i], &bytes[..50]);
    let (recs, losses) = salvage(dir.path(), None, all());
    assert_eq!(recs, written_except(all(), std::slice::from_ref(&lost)));
    assert_eq!(losses.len(), 1, "{losses:?}");
    assert_eq!(losses[0].seqs, exact(&lost));
    assert_eq!(losses[0].places.len(), 1);
    assert_eq!(losses[0].places[0].segment, segs[i]);
    assert_eq!(losses[0].places[0].bytes, Some(0..50));
}

#[test]
fn a_foreign_file_as_a_middle_segment_loses_that_segment() {
    let dir = build(None, 512);
    let segs = segments(dir.path());
    let i = segs.len() / 2;
    let lost = first_seq_of(&segs[i])..=first_seq_of(&segs[i + 1]) - 1;
    write_file(&segs[i], &[b'x'; 300]);
    let (recs, losses) = salvage(dir.path(), None, all());
    assert_eq!(recs, written_except(all(), std::slice::from_ref(&lost)));
    assert_eq!(losses.len(), 1, "{losses:?}");
    assert_eq!(losses[0].seqs, exact(&lost));
    assert_eq!(losses[0].places[0].segment, segs[i]);
    assert_eq!(losses[0].places[0].bytes, None);
    assert!(
        matches!(&losses[0].places[0].kind, DamageKind::Damaged(why) if why.contains("magic")),
        "{}",
        losses[0]
    );
}

#[test]
fn stray_files_named_like_segments_lose_no_record() {
    // A foreign file, an empty file and a directory, each named after a seq inside an
    // intact segment: reported, with no record lost and the chain unbroken.
    let dir = build(None, 512);
    let segs = segments(dir.path());
    let inside = first_seq_of(&segs[1]) + 1;
    let strays = [
        (inside, "foreign"),
        (inside + 1, "empty"),
        (inside + 2, "directory"),
    ];
    for (seq, what) in strays {
        let path = dir.path().join(format::segment_file_name(seq));
        match what {
            "foreign" => fs::write(&path, b"not a segment at all, but long enough").unwrap(),
            "empty" => fs::write(&path, b"").unwrap(),
            _ => fs::create_dir(&path).unwrap(),
        }
    }
    let (recs, losses) = salvage(dir.path(), None, all());
    assert_eq!(recs, written_except(all(), &[]));
    assert_eq!(losses.len(), 1, "{losses:?}");
    assert_eq!(losses[0].seqs, LostSeqs::None);
    assert!(!losses[0].chain_broken);
    let named: Vec<u64> = losses[0]
        .places
        .iter()
        .map(|p| first_seq_of(&p.segment))
        .collect();
    assert_eq!(named, [inside, inside + 1, inside + 2]);
    assert_eq!(
        losses[0].places[2].kind,
        DamageKind::NotARegularFile("a directory")
    );
}

#[test]
fn a_forged_block_in_a_keyed_log_is_never_salvaged() {
    // A payload changed and its frame checksum recomputed: every checksum passes, but
    // the keyed link cannot be recomputed without the key.
    let dir = build(Some(KEY), 512);
    let seg = middle(dir.path());
    let block = &seg.blocks[1];
    let frame = block.frames.iter().find(|f| f.payload_len > 0).unwrap();
    let mut bytes = fs::read(&seg.path).unwrap();
    let (fs_, fe) = (to_usize(frame.start), to_usize(frame.end));
    bytes[fs_ + FRAME_HEADER_LEN] ^= 0x55;
    let payload_len = to_usize(frame.payload_len);
    let mut head = [0u8; 12];
    head.copy_from_slice(&bytes[fs_..fs_ + 12]);
    let mut crc = crc32c::crc32c(&frame.seq.to_le_bytes());
    crc = crc32c::crc32c_append(crc, &head);
    crc = crc32c::crc32c_append(
        crc,
        &bytes[fs_ + FRAME_HEADER_LEN..fs_ + FRAME_HEADER_LEN + payload_len],
    );
    bytes[fs_ + 12..fs_ + 16].copy_from_slice(&crc.to_le_bytes());
    assert!(fe <= bytes.len());
    write_file(&seg.path, &bytes);
    blackbox_log::verify(dir.path(), Some(&ChainKey::new(KEY)), None).unwrap_err();

    let lost = seqs_of(block);
    let (recs, losses) = salvage(dir.path(), Some(KEY), all());
    assert_eq!(recs, written_except(all(), std::slice::from_ref(&lost)));
    assert_eq!(losses.len(), 1, "{losses:?}");
    assert_eq!(losses[0].seqs, exact(&lost));
    assert!(
        matches!(&losses[0].places[0].kind, DamageKind::Damaged(why) if why.contains("chain link")),
        "{}",
        losses[0]
    );
}

#[test]
fn a_torn_tail_is_lost_from_its_first_seq() {
    let dir = build(None, 512);
    let segs = segments(dir.path());
    let active = layout(segs.last().unwrap());
    let last = active.blocks.last().unwrap();
    let bytes = fs::read(&active.path).unwrap();
    let cut = last.end - 3;
    write_file(&active.path, &bytes[..to_usize(cut)]);
    let lost = seqs_of(last);
    let (recs, losses) = salvage(dir.path(), None, all());
    assert_eq!(recs, written_except(all(), std::slice::from_ref(&lost)));
    assert_eq!(losses.len(), 1, "{losses:?}");
    assert!(
        matches!(losses[0].seqs, LostSeqs::From { first, .. } if first == *lost.start()),
        "{}",
        losses[0]
    );
    assert_eq!(losses[0].places[0].bytes, Some(last.start..cut));
    assert!(matches!(losses[0].places[0].kind, DamageKind::TornTail(_)));
}

#[test]
fn a_salvage_of_a_range_clips_its_losses_to_the_range() {
    let dir = build(None, 512);
    let seg = middle(dir.path());
    let block = seg.blocks.iter().find(|b| b.frames.len() >= 2).unwrap();
    common::flip(&seg.path, block.frames[0].start + 2);
    let lost = seqs_of(block);
    // A range that starts inside the damaged block and ends later.
    let range = *lost.start() + 1..=*lost.end() + 20;
    let (recs, losses) = salvage(dir.path(), None, range.clone());
    assert_eq!(
        recs,
        written_except(range.clone(), std::slice::from_ref(&lost))
    );
    assert_eq!(losses.len(), 1, "{losses:?}");
    assert_eq!(losses[0].seqs, exact(&(*range.start()..=*lost.end())));
    // A range entirely after the damage reports none.
    let after = *lost.end() + 1..=*lost.end() + 5;
    let (recs, losses) = salvage(dir.path(), None, after.clone());
    assert_eq!(recs, written_except(after, &[]));
    assert_eq!(losses, []);
}

#[test]
fn a_damaged_footer_loses_no_record() {
    let dir = build(None, 512);
    let seg = middle(dir.path());
    let (body, _) = seg.footer.clone().unwrap();
    common::flip(&seg.path, body.start + 9);
    let (recs, losses) = salvage(dir.path(), None, all());
    assert_eq!(recs, written_except(all(), &[]));
    assert_eq!(losses.len(), 1, "{losses:?}");
    assert_eq!(losses[0].seqs, LostSeqs::None);
    assert!(!losses[0].chain_broken);
    assert!(losses[0].places.iter().all(|p| p.segment == seg.path));
    let first = losses[0].places[0].bytes.clone().unwrap();
    assert_eq!(first.start, body.start, "{}", losses[0]);
}

#[test]
fn salvage_checks_the_header_of_a_segment_it_starts_in() {
    // A range read that starts in a segment whose header is damaged loses that
    // segment's seqs up to the next intact one, never reads past it silently.
    let dir = build(None, 512);
    let segs = segments(dir.path());
    let i = segs.len() / 2;
    let start = first_seq_of(&segs[i]);
    let lost = start..=first_seq_of(&segs[i + 1]) - 1;
    common::flip(&segs[i], 30);
    let range = start + 1..=RECORDS - 1;
    let (recs, losses) = salvage(dir.path(), None, range.clone());
    assert_eq!(
        recs,
        written_except(range.clone(), std::slice::from_ref(&lost))
    );
    assert_eq!(losses.len(), 1, "{losses:?}");
    assert_eq!(losses[0].seqs, exact(&(start + 1..=*lost.end())));
    assert_eq!(losses[0].places[0].segment, segs[i]);
}

/// Removes the bytes `cut` from a segment file and, when `relink` is set, makes its
/// header's `prev_link` the link of the last removed block (its crc recomputed): the
/// block after the cut then chains from a link stored on disk.
fn cut_out(seg: &Layout, removed: &[&common::BlockAt], relink: bool) {
    let mut bytes = fs::read(&seg.path).unwrap();
    let (start, end) = (
        to_usize(removed[0].start),
        to_usize(removed.last().unwrap().end),
    );
    if relink {
        let last = removed.last().unwrap();
        let at = to_usize(last.start) + 40;
        let mut header = format::SegmentHeader::decode(&bytes).unwrap();
        header.prev_link.copy_from_slice(&bytes[at..at + 32]);
        bytes[..format::SEGMENT_HEADER_LEN].copy_from_slice(&header.encode());
    }
    bytes.drain(start..end);
    write_file(&seg.path, &bytes);
}

#[test]
fn blocks_cut_before_a_stored_link_are_an_exact_loss() {
    // Guards a past bug: a segment's first block cut out and the header's previous
    // link set to that block's own link chains the next block from a stored link with
    // nothing pending, and salvage said it lost no record while the cut seqs were gone.
    for active in [false, true] {
        let dir = build(Some(KEY), 1 << 20);
        let segs = segments(dir.path());
        let seg = if active {
            layout(segs.last().unwrap())
        } else {
            middle(dir.path())
        };
        assert!(seg.blocks.len() >= 3, "{} blocks", seg.blocks.len());
        let removed = &seg.blocks[0];
        cut_out(&seg, &[removed], true);
        let lost = seqs_of(removed);
        let (recs, losses) = salvage(dir.path(), Some(KEY), all());
        assert_eq!(recs, written_except(all(), std::slice::from_ref(&lost)));
        let exact_losses: Vec<LostSeqs> = losses
            .iter()
            .map(|l| l.seqs)
            .filter(|s| *s != LostSeqs::None)
            .collect();
        assert_eq!(exact_losses, [exact(&lost)], "{losses:?}");
        let loss = losses.iter().find(|l| l.seqs == exact(&lost)).unwrap();
        assert!(loss.chain_broken, "{loss}");
        assert_eq!(loss.places[0].segment, seg.path, "{loss}");
    }
}

#[test]
fn a_block_cut_from_a_keyed_log_read_without_its_key_is_an_exact_loss() {
    // Guards a past bug: without the key no link is checked, so the block after a cut
    // one passed unchecked with nothing pending, and salvage reported no loss at all.
    let dir = build(Some(KEY), 1 << 20);
    let segs = segments(dir.path());
    let seg = layout(segs.last().unwrap());
    assert!(seg.blocks.len() >= 3, "{} blocks", seg.blocks.len());
    let removed = seg.middle_block();
    cut_out(&seg, &[removed], false);
    let lost = seqs_of(removed);
    let (recs, losses) = salvage(dir.path(), None, all());
    assert_eq!(recs, written_except(all(), std::slice::from_ref(&lost)));
    assert_eq!(losses.len(), 1, "{losses:?}");
    let loss = &losses[0];
    assert_eq!(loss.seqs, exact(&lost), "{loss}");
    assert!(loss.chain_broken, "{loss}");
    assert_eq!(loss.places[0].segment, seg.path, "{loss}");
    assert_eq!(
        loss.places[0].bytes,
        Some(removed.start..removed.start),
        "{loss}"
    );
}
