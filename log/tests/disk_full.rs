//! A full disk (`ENOSPC`), played through the file layer by [`SmallDisk`]: a write past
//! its size writes what fits and fails, and a removed file gives its bytes back.
//!
//! With a disk budget the writer frees room by pruning the oldest unpinned sealed
//! segments, on the record (reason bit 8, "disk full", FORMAT.md), and writes on.
//! Without one, or when pins keep every sealed segment, it stops with one sentence,
//! poisoned, and the log reopens with every acknowledged record.
//!
//! The oracles are the test's own: what it wrote by seq, and what each call answered.
#![expect(clippy::unwrap_used, reason = "tests fail loudly on any error")]
#![allow(
    clippy::cast_possible_truncation,
    reason = "test data is generated from small numbers"
)]

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use blackbox_log::format;
use blackbox_log::retention::PRUNE_RECORD_TYPE;
use blackbox_log::storage::{Fault, FaultyStorage, SmallDisk};
use blackbox_log::{
    Durability, Error, Log, LogOptions, LogReader, Pin, PruneRecord, Record, RecordType, Retention,
    Seq, verify,
};

/// The "disk full" reason bit of a prune record, as FORMAT.md gives it.
const REASON_DISK_FULL: u16 = 8;

/// The payload of the `n`th record the test writes (not its seq: prune records take
/// seqs too).
fn payload(n: u64) -> Vec<u8> {
    let len = 100 + (n * 37 % 150) as usize;
    (0..len).map(|i| (n as usize * 7 + i) as u8).collect()
}

fn opts(disk: &SmallDisk, durability: Durability) -> LogOptions {
    LogOptions::new()
        .durability(durability)
        .segment_bytes_max(4096)
        .block_bytes_max(1024)
        .disk_reserve_bytes(4096)
        .storage(Arc::new(disk.clone()))
}

/// A budget far larger than the disk: it never prunes on its own.
const LARGE_BUDGET: Retention = Retention {
    max_bytes: Some(1 << 40),
    max_age_ns: None,
    pinned_max_bytes: 0,
};

/// Records by seq → payload.
type Written = BTreeMap<u64, Vec<u8>>;

/// Every record the reader returns, prune records apart, and the prune records by seq.
fn read_back(dir: &Path) -> (Written, Vec<(u64, PruneRecord)>) {
    let mut out = BTreeMap::new();
    let mut prunes = Vec::new();
    for r in LogReader::open(dir).unwrap().records(Seq(0)..).unwrap() {
        let r = r.unwrap();
        if r.record_type() == PRUNE_RECORD_TYPE {
            prunes.push((r.seq().0, PruneRecord::decode(r.payload()).unwrap()));
        } else {
            out.insert(r.seq().0, r.payload().to_vec());
        }
    }
    (out, prunes)
}

#[test]
fn a_full_disk_with_a_budget_prunes_the_oldest_segments_on_the_record_and_writes_on() {
    for durability in [Durability::Sync, Durability::Flush, Durability::Buffered] {
        let dir = tempfile::tempdir().unwrap();
        // Room for about ten segments; the test writes about fifty segments' worth.
        let disk = SmallDisk::new(48 << 10);
        let (mut log, _) =
            Log::open(dir.path(), opts(&disk, durability).retention(LARGE_BUDGET)).unwrap();
        let mut written = BTreeMap::new();
        for n in 0..1200u64 {
            let p = payload(n);
            let seq = log.append(Record::new(RecordType(1), n, &p)).unwrap();
            written.insert(seq.0, p);
            if n % 50 == 49 {
                log.flush().unwrap();
            }
        }
        let pruned = log.take_pruned();
        log.close().unwrap();
        assert!(disk.refused() > 0, "{durability:?}: the disk never filled");
        assert!(!pruned.is_empty(), "{durability:?}: nothing was pruned");
        for (_, rec) in &pruned {
            assert_eq!(rec.reasons, REASON_DISK_FULL, "{durability:?}: {rec:?}");
        }

        // The log holds every record from its cut on, and says where the cut is.
        let report = verify(dir.path(), None, None).unwrap();
        let cut = pruned.last().unwrap().1.last_seq;
        assert_eq!(report.pruned.as_ref().map(|p| p.up_to_seq), Some(cut));
        let (read, prunes) = read_back(dir.path());
        let kept: Written = written
            .range(cut + 1..)
            .map(|(s, p)| (*s, p.clone()))
            .collect();
        assert_eq!(read, kept, "{durability:?}: records after the cut");
        // The prune records readable are those the writer reported, with their seqs.
        let in_log: Vec<(u64, PruneRecord)> = pruned
            .iter()
            .filter(|(seq, _)| seq.0 > cut)
            .map(|(seq, rec)| (seq.0, rec.clone()))
            .collect();
        assert_eq!(prunes, in_log, "{durability:?}");
        assert!(
            std::fs::metadata(dir.path().join(blackbox_log::RESERVE_FILE_NAME)).is_ok(),
            "{durability:?}: the reserve is taken again"
        );

        // And it opens again, on a normal disk, where it left off.
        let (log, recovery) = Log::open(dir.path(), LogOptions::new()).unwrap();
        assert_eq!(
            recovery.last_seq,
            Some(log.next_seq()).map(|s| Seq(s.0 - 1))
        );
        assert_eq!(recovery.torn_bytes_cut, 0);
        assert!(log.next_seq().0 > *written.keys().last().unwrap());
    }
}

/// Appends batches of 5 (flushed when not in `Sync` mode) until a call fails; returns
/// what was acknowledged and the error.
fn append_until_error(log: &mut Log, durability: Durability) -> (Written, Error) {
    let mut acked = BTreeMap::new();
    let mut n = 0;
    loop {
        let payloads: Vec<Vec<u8>> = (n..n + 5).map(payload).collect();
        let records: Vec<Record<'_>> = payloads
            .iter()
            .zip(n..)
            .map(|(p, i)| Record::new(RecordType(1), i, p))
            .collect();
        let answer = log
            .append_batch(&records)
            .and_then(|last| match durability {
                Durability::Buffered => log.flush().map(|()| last),
                _ => Ok(last),
            });
        match answer {
            Ok(last) => {
                let first = last.unwrap().0 - 4;
                for (p, seq) in payloads.into_iter().zip(first..) {
                    acked.insert(seq, p);
                }
                n += 5;
            }
            Err(e) => return (acked, e),
        }
        assert!(n < 100_000, "the disk never filled");
    }
}

#[test]
fn a_full_disk_without_room_to_free_says_so_and_the_log_reopens_with_every_acknowledged_record() {
    // No budget; a budget whose pin holds every record (pins are never evicted for
    // room); a budget over a log with no sealed segment yet.
    let cases: [(&str, Option<Retention>, bool, u64); 3] = [
        ("no budget", None, false, 40 << 10),
        ("all pinned", Some(LARGE_BUDGET), true, 40 << 10),
        ("nothing sealed", Some(LARGE_BUDGET), false, 3 << 10),
    ];
    for (case, retention, pin_all, capacity) in cases {
        for durability in [Durability::Sync, Durability::Flush, Durability::Buffered] {
            let what = format!("{case}, {durability:?}");
            let dir = tempfile::tempdir().unwrap();
            let disk = SmallDisk::new(capacity);
            let mut o = opts(&disk, durability).segment_bytes_max(if capacity < 4096 {
                1 << 20
            } else {
                4096
            });
            if let Some(r) = retention {
                o = o.retention(r);
            }
            let (mut log, _) = Log::open(dir.path(), o).unwrap();
            if pin_all {
                log.set_pins(vec![Pin {
                    id: 1,
                    first_seq: 0,
                    last_seq: None,
                }]);
            }
            let (acked, err) = append_until_error(&mut log, durability);
            match &err {
                Error::DiskFull {
                    dir: d,
                    bytes,
                    source,
                    ..
                } => {
                    assert_eq!(d, dir.path(), "{what}");
                    assert!(*bytes > 0, "{what}");
                    assert_eq!(source.raw_os_error(), Some(28), "{what}");
                }
                other => panic!("{what}: expected a full disk, got {other:?}"),
            }
            let message = err.to_string();
            assert_eq!(
                message,
                format!(
                    "the disk holding {} is full: {} bytes of records could not be written; nothing acknowledged is lost",
                    dir.path().display(),
                    match &err {
                        Error::DiskFull { bytes, .. } => *bytes,
                        _ => unreachable!(),
                    }
                ),
                "{what}"
            );
            assert!(log.take_pruned().is_empty(), "{what}: nothing is pruned");
            // Poisoned, with that cause.
            let later = log
                .append(Record::new(RecordType(1), u64::MAX, b"after"))
                .unwrap_err();
            match &later {
                Error::Poisoned { cause } => {
                    assert!(cause.to_string().contains("is full"), "{what}: {cause}");
                }
                other => panic!("{what}: expected the poisoned writer, got {other:?}"),
            }
            assert!(matches!(log.sync(), Err(Error::Poisoned { .. })), "{what}");
            drop(log);

            // Reopened on a normal disk: every acknowledged record, the chain intact.
            let (log, recovery) = Log::open(dir.path(), LogOptions::new()).unwrap();
            assert_eq!(
                recovery.last_seq.map(|s| s.0),
                acked.keys().last().copied(),
                "{what}: what was acknowledged is all there is"
            );
            assert_eq!(
                recovery.torn_bytes_cut, 0,
                "{what}: the failed write was cut"
            );
            drop(log);
            let (read, prunes) = read_back(dir.path());
            assert_eq!(read, acked, "{what}");
            assert!(prunes.is_empty(), "{what}");
            let report = verify(dir.path(), None, None).unwrap();
            assert_eq!(report.records, acked.len() as u64, "{what}");
            assert!(report.pruned.is_none(), "{what}");
        }
    }
}

#[test]
fn a_full_disk_at_a_segments_footer_prunes_before_it_and_seals_the_segment() {
    // The footer is the write that meets the full disk: records fill the disk to
    // exactly where the first roll writes its footer.
    let dir = tempfile::tempdir().unwrap();
    let disk = SmallDisk::new(1 << 30);
    let (mut log, _) = Log::open(
        dir.path(),
        opts(&disk, Durability::Sync).retention(LARGE_BUDGET),
    )
    .unwrap();
    let mut written = BTreeMap::new();
    let mut n = 0;
    // Three sealed segments, then the active one almost full.
    while log.segment_count() < 4 {
        let p = payload(n);
        written.insert(log.append(Record::new(RecordType(1), n, &p)).unwrap().0, p);
        n += 1;
    }
    // The append that rolls the segment meets a disk with no room at all: its
    // footer is the first write to fail.
    loop {
        let p = payload(n);
        let active = dir
            .path()
            .join(format::segment_file_name(log.active_segment_first_seq().0));
        let active_len = std::fs::metadata(&active).unwrap().len() as usize;
        let rolls = active_len + format::BLOCK_HEADER_LEN + format::frame_len(p.len()) > 4096;
        if rolls {
            disk.set_capacity(disk.used());
        }
        let seq = log.append(Record::new(RecordType(1), n, &p)).unwrap();
        written.insert(seq.0, p);
        n += 1;
        if rolls {
            break;
        }
    }
    let on_disk = std::fs::read_dir(dir.path())
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .ends_with(".bbx")
        })
        .count();
    assert_eq!(log.segment_count(), on_disk);
    let pruned = log.take_pruned();
    assert_eq!(pruned.len(), 1, "one pruning made room for the footer");
    assert_eq!(pruned[0].1.reasons, REASON_DISK_FULL);
    log.close().unwrap();
    let report = verify(dir.path(), None, None).unwrap();
    let cut = pruned[0].1.last_seq;
    assert_eq!(report.pruned.map(|p| p.up_to_seq), Some(cut));
    let (read, _) = read_back(dir.path());
    let kept: Written = written
        .range(cut + 1..)
        .map(|(s, p)| (*s, p.clone()))
        .collect();
    assert_eq!(read, kept);
}

/// Appends record `n` and says whether it rolled the segment, with the length the
/// active segment had before and the sealed one has after.
fn append_watching_roll(
    log: &mut Log,
    dir: &Path,
    n: u64,
    written: &mut Written,
    before_roll: impl FnOnce(u64),
) -> Option<(u64, u64)> {
    let p = payload(n);
    let active = dir.join(format::segment_file_name(log.active_segment_first_seq().0));
    let active_len = std::fs::metadata(&active).unwrap().len();
    let rolls = active_len as usize + format::BLOCK_HEADER_LEN + format::frame_len(p.len()) > 4096;
    if rolls {
        before_roll(active_len);
    }
    let seq = log.append(Record::new(RecordType(1), n, &p)).unwrap();
    written.insert(seq.0, p);
    rolls.then(|| (active_len, std::fs::metadata(&active).unwrap().len()))
}

#[test]
fn a_full_disk_at_a_budget_prunings_own_record_gives_back_the_reserve_for_it() {
    // A budget of four segments prunes at every seal once the log is past it. At the
    // eighth seal the disk has room for the footer and the next header to the byte,
    // none for the pruning's record: the reserve is given back for it, and the
    // pruning goes on as the budget decided.
    let budget = Retention {
        max_bytes: Some(4 * 4096),
        max_age_ns: None,
        pinned_max_bytes: 0,
    };
    let run = |dir: &Path, disk: &SmallDisk, footer: Option<u64>| {
        let (mut log, _) = Log::open(dir, opts(disk, Durability::Sync).retention(budget)).unwrap();
        let mut written = Written::new();
        let mut rolls = 0;
        let mut n = 0;
        let mut seen = None;
        while rolls < 8 {
            let arm = rolls == 7;
            let rolled = append_watching_roll(&mut log, dir, n, &mut written, |_| {
                if let (true, Some(footer)) = (arm, footer) {
                    let header = format::SEGMENT_HEADER_LEN as u64;
                    disk.set_capacity(disk.used() + footer + header);
                }
            });
            if let Some((before, after)) = rolled {
                rolls += 1;
                seen = Some(after - before);
            }
            n += 1;
        }
        let pruned = log.take_pruned();
        log.close().unwrap();
        (written, pruned, seen.unwrap())
    };
    // A run on a large disk gives the length of the eighth seal's footer.
    let dry = tempfile::tempdir().unwrap();
    let (_, _, footer) = run(dry.path(), &SmallDisk::new(1 << 30), None);

    let dir = tempfile::tempdir().unwrap();
    let disk = SmallDisk::new(1 << 30);
    let (written, pruned, _) = run(dir.path(), &disk, Some(footer));
    assert_eq!(
        disk.refused(),
        1,
        "the pruning's record was the one refused write"
    );
    assert!(pruned.len() >= 2);
    for (_, rec) in &pruned {
        assert_eq!(
            rec.reasons, 1,
            "over max_bytes, as the budget decided: {rec:?}"
        );
    }
    let report = verify(dir.path(), None, None).unwrap();
    let cut = pruned.last().unwrap().1.last_seq;
    assert_eq!(report.pruned.map(|p| p.up_to_seq), Some(cut));
    let (read, _) = read_back(dir.path());
    let kept: Written = written
        .range(cut + 1..)
        .map(|(s, p)| (*s, p.clone()))
        .collect();
    assert_eq!(read, kept);
    assert!(
        std::fs::metadata(dir.path().join(blackbox_log::RESERVE_FILE_NAME)).is_ok(),
        "the reserve is taken again"
    );
}

#[test]
fn an_fsync_that_finds_the_disk_full_is_not_retried_and_prunes_nothing() {
    for (case, retention) in [("no budget", None), ("a budget", Some(LARGE_BUDGET))] {
        for after in [0, 7, 40] {
            let what = format!("{case}, after {after} fsyncs");
            let dir = tempfile::tempdir().unwrap();
            let storage = FaultyStorage::new();
            let mut o = LogOptions::new()
                .durability(Durability::Sync)
                .segment_bytes_max(4096)
                .block_bytes_max(1024)
                .storage(Arc::new(storage.clone()));
            if let Some(r) = retention {
                o = o.retention(r);
            }
            let (mut log, _) = Log::open(dir.path(), o).unwrap();
            storage.arm(Fault::SyncNoSpace, after);
            let (acked, err) = append_until_error(&mut log, Durability::Sync);
            assert!(storage.fired(), "{what}");
            match &err {
                Error::DiskFull { dir: d, source, .. } => {
                    assert_eq!(d, dir.path(), "{what}");
                    assert_eq!(source.raw_os_error(), Some(28), "{what}");
                }
                other => panic!("{what}: expected a full disk, got {other:?}"),
            }
            let message = err.to_string();
            assert!(
                message.ends_with(
                    "bytes of records written since the last fsync could not be made durable; nothing acknowledged is lost"
                ),
                "{what}: {message}"
            );
            assert!(log.take_pruned().is_empty(), "{what}: nothing is pruned");
            assert!(
                matches!(log.flush(), Err(Error::Poisoned { .. })),
                "{what}: poisoned"
            );
            drop(log);

            // The refused batch reached the page cache, so it may be there: every
            // acknowledged record must be, and nothing else but that batch.
            let (log, _) = Log::open(dir.path(), LogOptions::new()).unwrap();
            drop(log);
            let (read, prunes) = read_back(dir.path());
            assert!(prunes.is_empty(), "{what}");
            let first_read: Written = read
                .iter()
                .take(acked.len())
                .map(|(s, p)| (*s, p.clone()))
                .collect();
            assert_eq!(first_read, acked, "{what}");
            assert!(read.len() <= acked.len() + 5, "{what}");
            verify(dir.path(), None, None).unwrap();
        }
    }
}

#[test]
fn a_full_disk_at_a_new_segments_header_gives_back_the_reserve_and_prunes_for_it() {
    // At the fourth seal the disk has room for the footer to the byte, none for the
    // next segment's header: the new file goes, the reserve is given back for the
    // header, and the seal's pruning, finding no room to take the reserve again,
    // prunes for it (disk full).
    let run = |dir: &Path, disk: &SmallDisk, footer: Option<u64>| {
        let (mut log, _) =
            Log::open(dir, opts(disk, Durability::Sync).retention(LARGE_BUDGET)).unwrap();
        let mut written = Written::new();
        let (mut rolls, mut n, mut seen) = (0, 0, None);
        while rolls < 4 {
            let arm = rolls == 3;
            let rolled = append_watching_roll(&mut log, dir, n, &mut written, |_| {
                if let (true, Some(footer)) = (arm, footer) {
                    disk.set_capacity(disk.used() + footer);
                }
            });
            if let Some((before, after)) = rolled {
                rolls += 1;
                seen = Some(after - before);
            }
            n += 1;
        }
        let pruned = log.take_pruned();
        log.close().unwrap();
        (written, pruned, seen.unwrap())
    };
    let dry = tempfile::tempdir().unwrap();
    let (_, none, footer) = run(dry.path(), &SmallDisk::new(1 << 30), None);
    assert!(none.is_empty());

    let dir = tempfile::tempdir().unwrap();
    let disk = SmallDisk::new(1 << 30);
    let (written, pruned, _) = run(dir.path(), &disk, Some(footer));
    assert_eq!(disk.refused(), 2, "the header, then the reserve");
    assert_eq!(pruned.len(), 1);
    assert_eq!(pruned[0].1.reasons, REASON_DISK_FULL);
    assert!(
        std::fs::metadata(dir.path().join(blackbox_log::RESERVE_FILE_NAME)).is_ok(),
        "the reserve is taken again"
    );
    let report = verify(dir.path(), None, None).unwrap();
    let cut = pruned[0].1.last_seq;
    assert_eq!(report.pruned.map(|p| p.up_to_seq), Some(cut));
    let (read, _) = read_back(dir.path());
    let kept: Written = written
        .range(cut + 1..)
        .map(|(s, p)| (*s, p.clone()))
        .collect();
    assert_eq!(read, kept);
}

#[test]
fn a_directory_left_with_only_the_lock_and_the_reserve_opens() {
    // Segments removed by hand to free a full disk left LOCK and .reserve behind; the
    // reserve made the directory look foreign to the writer.
    let dir = tempfile::tempdir().unwrap();
    let budget = Retention {
        max_bytes: Some(1 << 20),
        max_age_ns: None,
        pinned_max_bytes: 0,
    };
    let (mut log, _) = Log::open(dir.path(), LogOptions::new().retention(budget)).unwrap();
    log.append(Record::new(RecordType(1), 1, b"x")).unwrap();
    log.close().unwrap();
    assert!(dir.path().join(blackbox_log::RESERVE_FILE_NAME).is_file());
    for s in blackbox_log::list_segments(dir.path()).unwrap() {
        std::fs::remove_file(s.path).unwrap();
    }
    let (log, _) = Log::open(dir.path(), LogOptions::new().retention(budget)).unwrap();
    assert_eq!(log.next_seq(), Seq(0));
}
