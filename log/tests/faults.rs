//! Fault injection through the file layer, and bad input.
//!
//! A short write followed by ENOSPC, a failing fsync and a crash image (only synced bytes
//! survive, the pending write torn) must each return an error, poison the writer, and
//! lose nothing that was durable. Oversized records and timestamp regressions are
//! refused without harming the log.
#![expect(clippy::unwrap_used, reason = "tests fail loudly on any error")]
#![allow(
    clippy::cast_possible_truncation,
    reason = "test data is generated from small numbers"
)]

use std::fs;
use std::path::Path;
use std::sync::Arc;

use blackbox_log::storage::{Fault, FaultyStorage};
use blackbox_log::{Durability, Error, Log, LogOptions, LogReader, Record, RecordType, Seq};

fn payload(seq: u64) -> Vec<u8> {
    let len = (seq * 37 % 200) as usize;
    (0..len).map(|i| (seq as usize + i) as u8).collect()
}

fn opts(storage: &FaultyStorage, durability: Durability) -> LogOptions {
    LogOptions::new()
        .durability(durability)
        .segment_bytes_max(8192)
        .block_bytes_max(1024)
        .storage(Arc::new(storage.clone()))
}

/// Appends batches of 5 until an append fails; returns the last acknowledged seq and the
/// error.
fn append_until_error(log: &mut Log, start: u64) -> (Option<u64>, Error) {
    let mut acked = start.checked_sub(1);
    let mut seq = start;
    loop {
        let payloads: Vec<Vec<u8>> = (seq..seq + 5).map(payload).collect();
        let records: Vec<Record<'_>> = payloads
            .iter()
            .enumerate()
            .map(|(i, p)| Record::new(RecordType(1), seq + i as u64, p))
            .collect();
        match log.append_batch(&records) {
            Ok(last) => {
                acked = last.map(|s| s.0);
                seq += 5;
            }
            Err(e) => return (acked, e),
        }
        assert!(seq < 100_000, "the armed fault never fired");
    }
}

/// Reads the whole log back and checks every record against `payload`.
fn read_all(dir: &Path) -> u64 {
    let mut n = 0;
    for r in LogReader::open(dir).unwrap().records(..).unwrap() {
        let r = r.unwrap();
        assert_eq!(r.seq(), Seq(n));
        assert_eq!(r.payload(), payload(n).as_slice(), "seq {n}");
        n += 1;
    }
    n
}

fn assert_poisoned(log: &mut Log) {
    let rec = Record::new(RecordType(1), u64::MAX, b"after");
    assert!(matches!(log.append(rec), Err(Error::Poisoned { .. })));
    assert!(matches!(log.sync(), Err(Error::Poisoned { .. })));
    assert!(matches!(log.flush(), Err(Error::Poisoned { .. })));
}

#[test]
fn short_write_then_enospc_poisons_and_loses_nothing_durable() {
    for after in [0, 3, 17, 40] {
        let dir = tempfile::tempdir().unwrap();
        let storage = FaultyStorage::new();
        let (mut log, _) = Log::open(dir.path(), opts(&storage, Durability::Sync)).unwrap();
        storage.arm(Fault::ShortWriteThenNoSpace { written_bytes: 50 }, after);
        let (acked, err) = append_until_error(&mut log, 0);
        // ENOSPC is a full disk: said as such, with the OS's error as its source.
        match &err {
            Error::DiskFull { source, .. } => assert_eq!(source.raw_os_error(), Some(28)),
            other => panic!("expected ENOSPC, got {other}"),
        }
        assert!(storage.fired());
        assert_poisoned(&mut log);
        drop(log);

        let (log, recovery) = Log::open(dir.path(), LogOptions::new()).unwrap();
        assert_eq!(
            recovery.last_seq.map(|s| s.0),
            acked,
            "after {after} appends"
        );
        drop(log);
        assert_eq!(read_all(dir.path()), acked.map_or(0, |s| s + 1));
        blackbox_log::verify(dir.path(), None, None).unwrap();
    }
}

#[test]
fn failed_fsync_poisons_and_keeps_every_acknowledged_record() {
    for after in [0, 5, 23] {
        let dir = tempfile::tempdir().unwrap();
        let storage = FaultyStorage::new();
        let (mut log, _) = Log::open(dir.path(), opts(&storage, Durability::Sync)).unwrap();
        storage.arm(Fault::SyncFails, after);
        let (acked, err) = append_until_error(&mut log, 0);
        match &err {
            Error::Io { source, .. } => assert_eq!(source.raw_os_error(), Some(5)),
            other => panic!("expected EIO, got {other}"),
        }
        assert_poisoned(&mut log);
        drop(log);

        // The failed batch reached the page cache, so it may be there: at least every
        // acknowledged record must be.
        let (log, _) = Log::open(dir.path(), LogOptions::new()).unwrap();
        drop(log);
        let n = read_all(dir.path());
        assert!(n >= acked.map_or(0, |s| s + 1), "lost acknowledged records");
        blackbox_log::verify(dir.path(), None, None).unwrap();
    }
}

/// Cuts every file to what a power loss could leave: the synced bytes, then a torn
/// prefix of the unsynced ones (`keep` of them), the rest gone.
fn crash_image(dir: &Path, storage: &FaultyStorage, keep: u64) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "bbx") {
            continue;
        }
        let len = fs::metadata(&path).unwrap().len();
        let durable = storage.durable_len(&path);
        let cut = (durable + keep).min(len);
        let mut perms = fs::metadata(&path).unwrap().permissions();
        #[expect(
            clippy::permissions_set_readonly_false,
            reason = "the test plays the disk"
        )]
        perms.set_readonly(false);
        fs::set_permissions(&path, perms).unwrap();
        fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(cut)
            .unwrap();
    }
}

#[test]
fn crash_image_keeps_every_synced_record() {
    for keep in [0, 1, 15, 16, 72, 73, 200, 1000, 5000] {
        let dir = tempfile::tempdir().unwrap();
        let storage = FaultyStorage::new();
        let (mut log, _) = Log::open(dir.path(), opts(&storage, Durability::Flush)).unwrap();
        let mut synced = None;
        for seq in 0..300u64 {
            let p = payload(seq);
            log.append(Record::new(RecordType(2), seq, &p)).unwrap();
            if seq % 40 == 39 {
                synced = log.sync().unwrap().map(|s| s.0);
            }
        }
        crash_image(dir.path(), &storage, keep);
        drop(log);

        let (log, recovery) = Log::open(dir.path(), LogOptions::new()).unwrap();
        let last = recovery.last_seq.map(|s| s.0);
        assert!(
            last >= synced,
            "keep {keep}: lost synced records ({last:?} < {synced:?})"
        );
        drop(log);
        assert_eq!(read_all(dir.path()), last.map_or(0, |s| s + 1));
        blackbox_log::verify(dir.path(), None, None).unwrap();
    }
}

#[test]
fn oversized_record_is_refused_with_size_and_limit() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) = Log::open(dir.path(), LogOptions::new().record_bytes_max(1000)).unwrap();
    log.append(Record::new(RecordType(1), 1, b"kept")).unwrap();
    let big = vec![0u8; 1001];
    let err = log.append(Record::new(RecordType(1), 2, &big)).unwrap_err();
    assert!(matches!(
        err,
        Error::RecordTooLarge {
            size_bytes: 1001,
            limit_bytes: 1000
        }
    ));
    assert!(err.to_string().contains("1001") && err.to_string().contains("1000"));
    // A batch with one bad record appends nothing.
    let batch = [
        Record::new(RecordType(1), 3, b"ok"),
        Record::new(RecordType(1), 3, &big),
    ];
    assert!(log.append_batch(&batch).is_err());
    assert_eq!(
        log.append(Record::new(RecordType(1), 4, b"next")).unwrap(),
        Seq(1)
    );
    log.close().unwrap();
    let payloads: Vec<Vec<u8>> = LogReader::open(dir.path())
        .unwrap()
        .records(..)
        .unwrap()
        .map(|r| r.unwrap().payload().to_vec())
        .collect();
    assert_eq!(payloads, [b"kept".to_vec(), b"next".to_vec()]);
}

#[test]
fn decreasing_timestamp_is_refused_and_the_log_stays_usable() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) = Log::open(dir.path(), LogOptions::new()).unwrap();
    log.append(Record::new(RecordType(1), 100, b"a")).unwrap();
    let err = log
        .append(Record::new(RecordType(1), 99, b"b"))
        .unwrap_err();
    assert!(matches!(
        err,
        Error::TimestampRegression {
            ts_ns: 99,
            last_ts_ns: 100
        }
    ));
    // Equal timestamps are fine.
    assert_eq!(
        log.append(Record::new(RecordType(1), 100, b"c")).unwrap(),
        Seq(1)
    );
    log.close().unwrap();
    let (mut log, _) = Log::open(dir.path(), LogOptions::new()).unwrap();
    assert!(matches!(
        log.append(Record::new(RecordType(1), 50, b"d")),
        Err(Error::TimestampRegression { .. })
    ));
}

#[test]
fn invalid_options_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    for opts in [
        LogOptions::new().record_bytes_max(0),
        LogOptions::new().record_bytes_max(2 << 30),
        LogOptions::new().segment_bytes_max(10),
        LogOptions::new().block_bytes_max(0),
        LogOptions::new().index_interval_bytes(0),
        LogOptions::new().segment_age_max_ns(Some(0)),
    ] {
        assert!(matches!(
            Log::open(dir.path().join("x"), opts),
            Err(Error::InvalidOptions { .. })
        ));
    }
    assert!(!dir.path().join("x").exists());
}

#[test]
fn segments_roll_by_age_of_record_time() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) = Log::open(
        dir.path(),
        LogOptions::new().segment_age_max_ns(Some(1_000)),
    )
    .unwrap();
    for ts in [0u64, 500, 999, 1_000, 1_500, 2_200] {
        log.append(Record::new(RecordType(1), ts, b"x")).unwrap();
    }
    // Segments start at ts 0, 1000 and 2200.
    assert_eq!(log.segment_count(), 3);
    log.close().unwrap();
    let names: Vec<u64> = blackbox_log::list_segments(dir.path())
        .unwrap()
        .iter()
        .map(|s| s.first_seq)
        .collect();
    assert_eq!(names, [0, 3, 5]);
    blackbox_log::verify(dir.path(), None, None).unwrap();
}

#[test]
fn files_and_directory_are_owner_only_and_sealed_segments_read_only() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let log_dir = dir.path().join("log");
    let (mut log, _) = Log::open(&log_dir, LogOptions::new().segment_bytes_max(4096)).unwrap();
    for seq in 0..100u64 {
        log.append(Record::new(RecordType(1), seq, &[0u8; 100]))
            .unwrap();
    }
    log.close().unwrap();
    let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&log_dir), 0o700);
    let segments = blackbox_log::list_segments(&log_dir).unwrap();
    assert!(segments.len() > 2);
    for (i, s) in segments.iter().enumerate() {
        let want = if i + 1 == segments.len() {
            0o600
        } else {
            0o400
        };
        assert_eq!(mode(&s.path), want, "{}", s.path.display());
    }
    assert_eq!(mode(&log_dir.join(blackbox_log::LOCK_FILE_NAME)), 0o600);
}

#[test]
fn a_seal_finished_by_recovery_is_durable_and_read_only_before_the_next_segment() {
    // Regression: when the last segment already ended in a footer (a crash after the
    // footer was written, before its fdatasync and chmod), open started the next
    // segment at once, without syncing the sealed one; a power loss then left a
    // segment without its footer before another one, and the next open failed.
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let storage = FaultyStorage::new();
    let (mut first, _) = Log::open(dir.path(), opts(&storage, Durability::Buffered)).unwrap();
    // Buffered appends sync nothing until the seal: the seal's fdatasync fails, after
    // its footer reached the file.
    storage.arm(Fault::SyncFails, 0);
    let (_, err) = append_until_error(&mut first, 0);
    assert!(matches!(&err, Error::Io { source, .. } if source.raw_os_error() == Some(5)));
    drop(first);
    let segments = blackbox_log::list_segments(dir.path()).unwrap();
    assert_eq!(segments.len(), 1);
    let sealed = segments[0].path.clone();
    let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&sealed), 0o600, "the crash came before the chmod");

    // Recovery finds the footer and starts the next segment; what it acknowledges
    // after that must survive a power loss.
    let (mut second, recovery) = Log::open(dir.path(), opts(&storage, Durability::Sync)).unwrap();
    assert_eq!(recovery.segments, 2);
    assert_eq!(mode(&sealed), 0o400, "sealed segments are read-only");
    let start = second.next_seq().0;
    let mut acked = None;
    for seq in start..start + 20 {
        let p = payload(seq);
        acked = Some(
            second
                .append(Record::new(RecordType(1), seq, &p))
                .unwrap()
                .0,
        );
    }
    crash_image(dir.path(), &storage, 0);
    drop(second);

    let (log, recovery) = Log::open(dir.path(), LogOptions::new()).unwrap();
    assert_eq!(recovery.last_seq.map(|s| s.0), acked);
    drop(log);
    assert_eq!(read_all(dir.path()), acked.unwrap() + 1);
    blackbox_log::verify(dir.path(), None, None).unwrap();
}

#[test]
fn a_writer_whose_lock_file_was_replaced_or_removed_stops_before_it_acknowledges() {
    // Regression: replacing DIR/LOCK under a running writer (an export written over it,
    // say) let a second writer in, and both acknowledged appends: two records per seq.
    for (how, durability) in [
        ("replaced", Durability::Sync),
        ("replaced", Durability::Flush),
        ("removed", Durability::Buffered),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let lock = dir.path().join(blackbox_log::LOCK_FILE_NAME);
        let opts = LogOptions::new().durability(durability);
        let (mut first, _) = Log::open(dir.path(), opts.clone()).unwrap();
        first
            .append(Record::new(RecordType(1), 1, b"before"))
            .unwrap();
        first.flush().unwrap();
        if how == "replaced" {
            let other = dir.path().join(".LOCK.new");
            fs::write(&other, b"someone else's\n").unwrap();
            fs::rename(&other, &lock).unwrap();
        } else {
            fs::remove_file(&lock).unwrap();
        }
        // The next call that hands records to the OS or acknowledges refuses.
        let refused = match durability {
            Durability::Buffered => {
                first
                    .append(Record::new(RecordType(1), 2, b"lost"))
                    .unwrap();
                first.flush().unwrap_err()
            }
            _ => first
                .append(Record::new(RecordType(1), 2, b"lost"))
                .unwrap_err(),
        };
        assert!(
            matches!(&refused, Error::LockLost { .. }),
            "{how} {durability:?}: {refused}"
        );
        let text = refused.to_string();
        assert!(text.contains(how) && text.contains("LOCK"), "{text}");
        assert!(matches!(first.sync(), Err(Error::Poisoned { .. })));

        // A second writer may now take the log: the seqs stay dense, one record each.
        let (mut second, recovery) = Log::open(dir.path(), opts).unwrap();
        assert_eq!(recovery.last_seq, Some(Seq(0)), "{how} {durability:?}");
        second
            .append(Record::new(RecordType(1), 3, b"after"))
            .unwrap();
        second.close().unwrap();
        drop(first);
        let payloads: Vec<Vec<u8>> = LogReader::open(dir.path())
            .unwrap()
            .records(..)
            .unwrap()
            .map(|r| r.unwrap().payload().to_vec())
            .collect();
        assert_eq!(payloads, [b"before".to_vec(), b"after".to_vec()], "{how}");
        blackbox_log::verify(dir.path(), None, None).unwrap();
    }
}
