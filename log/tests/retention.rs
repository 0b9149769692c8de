//! Retention: the oldest sealed segments go whole under a disk budget, pins hold back the
//! cut within their cap, every pruning is on the record, and `verify`, the readers and
//! the writer's open prove a pruned log's start from its prune record.
//!
//! The oracles are the test's own: what it wrote (payload and time by seq), the file
//! sizes it saw on disk before a pruning, and digests it took while writing.
#![expect(clippy::unwrap_used, reason = "tests fail loudly on any error")]
#![allow(
    clippy::cast_possible_truncation,
    reason = "test data is generated from small numbers"
)]

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use blackbox_log::retention::PRUNE_RECORD_TYPE;
use blackbox_log::storage::{OsStorage, Storage, WriteFile};
use blackbox_log::{
    CorruptionKind, Digest, Error, Log, LogOptions, LogReader, Pin, PruneRecord, Record,
    RecordType, Retention, Seq, verify,
};

const SEGMENT: u64 = 4096;

/// The payload of the `n`th record the test writes (not its seq: prune records take
/// seqs too).
fn payload(n: u64) -> Vec<u8> {
    let len = 60 + (n * 37 % 90) as usize;
    (0..len).map(|i| (n as usize * 7 + i) as u8).collect()
}

fn opts(retention: Retention) -> LogOptions {
    LogOptions::new()
        .segment_bytes_max(SEGMENT)
        .block_bytes_max(1024)
        .retention(retention)
}

/// Segment files on disk: name → length.
fn files(dir: &Path) -> BTreeMap<String, u64> {
    fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".bbx"))
        .map(|e| {
            (
                e.file_name().to_string_lossy().into_owned(),
                e.metadata().unwrap().len(),
            )
        })
        .collect()
}

/// What the test wrote: seq → (ts, payload).
type Written = BTreeMap<u64, (u64, Vec<u8>)>;

/// Every record the reader returns from seq 0, prune records apart.
fn read_back(dir: &Path) -> (Written, Vec<(u64, u64, PruneRecord)>) {
    let mut out = Written::new();
    let mut prunes = Vec::new();
    for r in LogReader::open(dir).unwrap().records(Seq(0)..).unwrap() {
        let r = r.unwrap();
        if r.record_type() == PRUNE_RECORD_TYPE {
            prunes.push((
                r.seq().0,
                r.ts_ns(),
                PruneRecord::decode(r.payload()).unwrap(),
            ));
        } else {
            out.insert(r.seq().0, (r.ts_ns(), r.payload().to_vec()));
        }
    }
    (out, prunes)
}

#[test]
fn pruning_keeps_the_budget_plus_one_segment_and_removes_no_more_than_it_must() {
    let dir = tempfile::tempdir().unwrap();
    let budget = 20_000;
    let retention = Retention {
        max_bytes: Some(budget),
        max_age_ns: None,
        pinned_max_bytes: 0,
    };
    let (mut log, _) = Log::open(dir.path(), opts(retention)).unwrap();
    let mut written = Written::new();
    let mut before = files(dir.path());
    let mut largest = 0;
    let mut prunings = 0;
    for n in 0..3000u64 {
        let seq = log
            .append(Record::new(RecordType(1), n, &payload(n)))
            .unwrap();
        written.insert(seq.0, (n, payload(n)));
        let now = files(dir.path());
        largest = largest.max(now.values().copied().max().unwrap());
        let total: u64 = now.values().sum();
        // The bound: the budget and one segment (the active one, which never goes).
        assert!(total <= budget + largest, "{total} bytes on disk after {n}");
        let removed: Vec<&String> = before.keys().filter(|k| !now.contains_key(*k)).collect();
        if !removed.is_empty() {
            prunings += 1;
            // The oldest go, whole.
            let oldest: Vec<&String> = before.keys().take(removed.len()).collect();
            assert_eq!(removed, oldest);
            // What is sealed fits the budget, and no more went than it needed: with
            // the newest of those removed back, the log would be over it.
            let active = *now.values().last().unwrap();
            let sealed = total - active;
            let newest_removed = before[*removed.last().unwrap()];
            assert!(sealed <= budget, "{sealed} sealed bytes after a pruning");
            assert!(
                sealed + newest_removed + active > budget,
                "pruning removed more than the budget needs"
            );
        }
        before = now;
    }
    log.close().unwrap();
    assert!(prunings > 10, "only {prunings} prunings");
    // What is left reads back as written, from the first retained record on, and
    // every prune record says what went.
    let (read, prunes) = read_back(dir.path());
    let first = (*read.keys().next().unwrap()).min(prunes[0].0);
    assert!(first > 0);
    let expected: Written = written
        .range(first..)
        .map(|(k, v)| (*k, v.clone()))
        .collect();
    assert_eq!(read, expected);
    let (_, _, newest) = prunes.last().unwrap();
    assert_eq!(newest.last_seq + 1, first);
    assert_eq!(newest.reasons, blackbox_log::retention::REASON_BYTES);
    let report = verify(dir.path(), None, None).unwrap();
    let pruned = report.pruned.unwrap();
    assert_eq!(pruned.up_to_seq, first - 1);
    assert_eq!(pruned.record, *newest);
}

/// Writes `count` records (the `n`th at time `n`), pinning by `pins(seq)` as it goes;
/// returns what it wrote and the digest after every record (each append is a block).
fn write(
    dir: &Path,
    retention: Retention,
    count: u64,
    mut pins: impl FnMut(u64, &mut Log),
) -> (Written, BTreeMap<u64, Digest>, Vec<(Seq, PruneRecord)>) {
    let (mut log, _) = Log::open(dir, opts(retention)).unwrap();
    let mut written = Written::new();
    let mut digests = BTreeMap::new();
    let mut pruned = Vec::new();
    for n in 0..count {
        let seq = log
            .append(Record::new(RecordType(1), n, &payload(n)))
            .unwrap();
        written.insert(seq.0, (n, payload(n)));
        let d = log.digest().unwrap();
        digests.insert(d.seq, d);
        pins(seq.0, &mut log);
        pruned.extend(log.take_pruned());
    }
    log.close().unwrap();
    (written, digests, pruned)
}

#[test]
fn a_pinned_window_stays_whole_within_the_cap_and_its_eviction_is_recorded() {
    let retention = Retention {
        max_bytes: Some(12_000),
        max_age_ns: None,
        pinned_max_bytes: 40_000,
    };
    // An incident's window: seqs 300 to 340, pinned while it is written.
    let window = 300..=340u64;
    let pin = Pin {
        id: 7,
        first_seq: *window.start(),
        last_seq: Some(*window.end()),
    };
    let dir = tempfile::tempdir().unwrap();
    let (written, _, pruned) = write(dir.path(), retention, 500, |seq, log| {
        if seq >= *window.start() && seq < *window.start() + 3 {
            log.set_pins(vec![pin]);
        }
    });
    // Pruned while the pin held: the window is all there, as written.
    assert!(!pruned.is_empty());
    let (read, _) = read_back(dir.path());
    for seq in window.clone() {
        assert_eq!(read.get(&seq), written.get(&seq), "seq {seq}");
    }
    // The cut stopped at the window: everything kept beyond the budget is within the
    // cap, on disk.
    let total: u64 = files(dir.path()).values().sum();
    assert!(
        total > 12_000 + SEGMENT,
        "the pin kept nothing ({total} bytes)"
    );
    assert!(total <= 12_000 + 40_000 + 2 * SEGMENT, "{total} bytes");
    assert!(pruned.iter().all(|(_, p)| p.evicted_pins.is_empty()));

    // Written on past the cap, the pin is evicted, named in the prune record, and the
    // window goes.
    let dir = tempfile::tempdir().unwrap();
    let (_, _, pruned) = write(dir.path(), retention, 4000, |seq, log| {
        if seq >= *window.start() && seq < *window.start() + 3 {
            log.set_pins(vec![pin]);
        }
    });
    let evicting: Vec<&PruneRecord> = pruned
        .iter()
        .map(|(_, p)| p)
        .filter(|p| !p.evicted_pins.is_empty())
        .collect();
    assert_eq!(evicting.len(), 1, "{pruned:?}");
    assert_eq!(evicting[0].evicted_pins, vec![7]);
    assert_ne!(
        evicting[0].reasons & blackbox_log::retention::REASON_PINNED_CAP,
        0
    );
    assert!(evicting[0].last_seq >= *window.end());
    let (read, _) = read_back(dir.path());
    assert!(read.keys().next().unwrap() > window.end());
    let total: u64 = files(dir.path()).values().sum();
    assert!(total <= 12_000 + 40_000 + 2 * SEGMENT, "{total} bytes");
}

#[test]
fn verify_proves_a_cut_and_judges_old_digests_as_pruned() {
    let retention = Retention {
        max_bytes: Some(16_000),
        max_age_ns: None,
        pinned_max_bytes: 0,
    };
    let dir = tempfile::tempdir().unwrap();
    let (_, digests, pruned) = write(dir.path(), retention, 2000, |_, _| {});
    let (read, prunes) = read_back(dir.path());
    let (prune_seq, prune_ts, newest) = prunes.last().unwrap().clone();
    let first = (*read.keys().next().unwrap()).min(prunes[0].0);
    let cut = first - 1;
    assert_eq!(newest.last_seq, cut);
    assert_eq!(pruned.last().unwrap().1, newest);

    let report = verify(dir.path(), None, None).unwrap();
    let p = report.pruned.clone().unwrap();
    assert_eq!(
        (p.up_to_seq, p.at_ns, p.record_seq),
        (cut, prune_ts, prune_seq)
    );
    assert_eq!(report.records, read.len() as u64 + prunes.len() as u64);

    // The newest digest matches as before.
    let last = digests.values().last().unwrap();
    assert!(verify(dir.path(), None, Some(last)).unwrap().digest_matched);
    // A digest from inside the pruned range: pruned, not tampered.
    let old = *digests.range(..=cut / 2).next_back().unwrap().1;
    let r = verify(dir.path(), None, Some(&old)).unwrap();
    assert!(r.digest_pruned && !r.digest_matched, "{r:?}");
    // A digest at the cut is checked against the prune record's link.
    let at_cut = digests[&cut];
    let r = verify(dir.path(), None, Some(&at_cut)).unwrap();
    assert!(r.digest_matched && !r.digest_pruned, "{r:?}");
    let forged = Digest {
        seq: cut,
        link: [0x5a; 32],
    };
    assert!(matches!(
        verify(dir.path(), None, Some(&forged)),
        Err(Error::DigestMismatch { seq, .. }) if seq == cut
    ));
}

#[test]
fn a_pruned_log_missing_its_first_segment_is_damage() {
    let retention = Retention {
        max_bytes: Some(16_000),
        max_age_ns: None,
        pinned_max_bytes: 0,
    };
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), retention, 2000, |_, _| {});
    let names: Vec<String> = files(dir.path()).into_keys().collect();
    assert!(names.len() >= 3);
    let first = dir.path().join(&names[0]);
    let second_seq: u64 = names[1].trim_end_matches(".bbx").parse().unwrap();
    fs::remove_file(&first).unwrap();
    let missing = |e: Error| match e {
        Error::Corrupt(c) => {
            assert!(
                matches!(c.kind, CorruptionKind::MissingStart { first_seq } if first_seq == second_seq),
                "{c}"
            );
        }
        e => panic!("{e}"),
    };
    missing(verify(dir.path(), None, None).unwrap_err());
    missing(Log::open(dir.path(), opts(retention)).unwrap_err());
    missing(
        LogReader::open(dir.path())
            .unwrap()
            .structure()
            .unwrap_err(),
    );
    let read = LogReader::open(dir.path())
        .unwrap()
        .records(Seq(0)..)
        .unwrap()
        .collect::<Result<Vec<_>, _>>();
    missing(read.unwrap_err());
}

/// A file layer whose `remove_file` fails from its `fail_at`th call on (0-based): the
/// writer stops between the prune record and its unlinks, as a crash would.
#[derive(Debug)]
struct UnlinkFails {
    calls: AtomicU64,
    fail_at: u64,
}

impl Storage for UnlinkFails {
    fn create(&self, path: &Path) -> io::Result<Box<dyn WriteFile>> {
        OsStorage.create(path)
    }
    fn open_append(&self, path: &Path) -> io::Result<Box<dyn WriteFile>> {
        OsStorage.open_append(path)
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        OsStorage.sync_dir(dir)
    }
    fn set_read_only(&self, path: &Path) -> io::Result<()> {
        OsStorage.set_read_only(path)
    }
    fn remove_file(&self, path: &Path) -> io::Result<()> {
        if self.calls.fetch_add(1, Ordering::SeqCst) >= self.fail_at {
            return Err(io::Error::other("simulated crash"));
        }
        OsStorage.remove_file(path)
    }
}

#[test]
fn a_crash_between_the_prune_record_and_its_unlinks_reopens_and_verifies() {
    for fail_at in 0..3 {
        let dir = tempfile::tempdir().unwrap();
        // Ten or so segments written without a budget.
        let (written, _, _) = write(dir.path(), Retention::default(), 600, |_, _| {});
        let before: Vec<PathBuf> = files(dir.path())
            .into_keys()
            .map(|k| dir.path().join(k))
            .collect();
        assert!(before.len() > 6);
        // Reopened with a budget that removes several; the unlinks stop at `fail_at`.
        let retention = Retention {
            max_bytes: Some(12_000),
            max_age_ns: None,
            pinned_max_bytes: 0,
        };
        let storage = Arc::new(UnlinkFails {
            calls: AtomicU64::new(0),
            fail_at,
        });
        let (mut log, _) = Log::open(dir.path(), opts(retention).storage(storage)).unwrap();
        assert!(log.prune().is_err());
        drop(log);
        // Between the steps the log verifies: its start is one the record names.
        let left = files(dir.path()).len();
        assert_eq!(left, before.len() - fail_at as usize);
        let r = verify(dir.path(), None, None).unwrap();
        assert_eq!(r.pruned.is_some(), fail_at > 0, "{r:?}");
        let (_, prunes) = read_back(dir.path());
        let record = prunes.last().unwrap().2.clone();
        assert!(record.segments.len() > fail_at as usize + 1, "{record:?}");

        // The next open finishes the removal, oldest first, and the log verifies.
        let (log, recovery) = Log::open(dir.path(), opts(retention)).unwrap();
        let named: Vec<PathBuf> = before[fail_at as usize..record.segments.len()].to_vec();
        assert_eq!(recovery.pruning_finished, named);
        log.close().unwrap();
        let r = verify(dir.path(), None, None).unwrap();
        assert_eq!(r.pruned.unwrap().up_to_seq, record.last_seq);
        let (read, _) = read_back(dir.path());
        let expected: Written = written
            .range(record.last_seq + 1..)
            .map(|(k, v)| (*k, v.clone()))
            .collect();
        assert_eq!(read, expected);
    }
}

#[test]
fn the_prune_record_type_is_the_logs_own() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) = Log::open(dir.path(), LogOptions::new()).unwrap();
    let r = log.append(Record::new(PRUNE_RECORD_TYPE, 1, b"forged"));
    assert!(
        matches!(
            r,
            Err(Error::ReservedRecordType {
                record_type: 0xFFFF
            })
        ),
        "{r:?}"
    );
    assert!(
        log.set_segment_preamble(vec![(PRUNE_RECORD_TYPE, vec![1])])
            .is_err()
    );
    assert_eq!(log.next_seq(), Seq(0));
}

#[test]
fn segments_older_than_the_age_limit_go() {
    let retention = Retention {
        max_bytes: None,
        max_age_ns: Some(500),
        pinned_max_bytes: 0,
    };
    let dir = tempfile::tempdir().unwrap();
    let (written, _, pruned) = write(dir.path(), retention, 2000, |_, _| {});
    assert!(!pruned.is_empty());
    assert!(
        pruned
            .iter()
            .all(|(_, p)| p.reasons == blackbox_log::retention::REASON_AGE)
    );
    // At the newest pruning (done at time `at`, the newest record's), what went had
    // ended more than 500 ns before, and the first segment kept had not.
    let (read, prunes) = read_back(dir.path());
    let (_, at, newest) = prunes.last().unwrap();
    assert!(at - newest.last_ts_ns > 500);
    let structure = LogReader::open(dir.path()).unwrap().structure().unwrap();
    let kept = structure[0].sealed.unwrap();
    assert!(at - kept.last_ts_ns <= 500, "{kept:?} kept at {at}");
    let oldest_kept = read.keys().next().unwrap();
    assert_eq!(read.get(oldest_kept), written.get(oldest_kept));
}

#[test]
fn a_budget_by_size_sizes_the_segments_to_an_eighth_of_it() {
    let budget = |max_bytes: Option<u64>, max_age_ns: Option<u64>| Retention {
        max_bytes,
        max_age_ns,
        pinned_max_bytes: 0,
    };
    // By hand: an eighth of the budget, not below 64 KiB, not above what is configured.
    let default = LogOptions::new();
    assert_eq!(default.effective_segment_bytes_max(), 64 << 20);
    let cases = [
        (
            default.clone().retention(budget(Some(2 << 20), None)),
            256 << 10,
        ),
        (
            default.clone().retention(budget(Some(100 << 10), None)),
            64 << 10,
        ),
        (
            default.clone().retention(budget(Some(1 << 40), None)),
            64 << 20,
        ),
        (default.clone().retention(budget(None, Some(1))), 64 << 20),
        (
            LogOptions::new()
                .segment_bytes_max(8 << 10)
                .retention(budget(Some(2 << 20), None)),
            8 << 10,
        ),
    ];
    for (i, (opts, want)) in cases.iter().enumerate() {
        assert_eq!(opts.effective_segment_bytes_max(), *want, "case {i}");
    }
}
