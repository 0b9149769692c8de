//! What `Recorder::open` keeps in the log when it cuts a torn tail: a recovery record,
//! read back here through the library.

#![expect(clippy::unwrap_used, reason = "tests fail loudly on any error")]

mod common;

use std::io::Write;
use std::sync::Arc;

use blackbox::{Config, Event, LogReader, ManualClock, Recorder, Seq};
use common::Rec;

const SEC: u64 = 1_000_000_000;
const T0: u64 = 1_700_000_000 * SEC;

fn config(clock: &ManualClock) -> Config {
    Config::new().clock(Arc::new(clock.clone()))
}

fn recoveries(dir: &std::path::Path) -> Vec<Rec> {
    common::read_log(dir)
        .into_iter()
        .filter(|r| matches!(r, Rec::Recovery { .. }))
        .collect()
}

/// Guards the torn tail cut at open (issue 9, point 4): `Recorder::open` used to cut a
/// torn tail and say nothing. The cut is kept in the log as the session's first record
/// (type 8), naming the first lost seq, the bytes cut and the segment; a clean reopen
/// adds none.
#[test]
fn a_recorder_opened_on_a_torn_log_keeps_a_record_of_what_it_cut() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let rec = Recorder::open(dir.path(), config(&clock)).unwrap();
    for i in 0..5u64 {
        clock.set_ns(T0 + i * SEC);
        rec.record(&Event::new("cmd.move").json(&i.to_string()))
            .unwrap();
    }
    rec.close().unwrap();
    // The log's last record, as its own reader sees it.
    let (last_seq, last_ts_ns) = LogReader::open(dir.path())
        .unwrap()
        .records(Seq(0)..)
        .unwrap()
        .map(|r| {
            let r = r.unwrap();
            (r.seq().0, r.ts_ns())
        })
        .last()
        .unwrap();
    // A crash mid-write: 100 bytes of a block that never completed.
    let segment = blackbox::log::list_segments(dir.path())
        .unwrap()
        .pop()
        .unwrap()
        .path;
    let name = segment.file_name().unwrap().to_str().unwrap().to_owned();
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(&segment)
        .unwrap();
    file.write_all(&[0xab; 100]).unwrap();
    drop(file);

    clock.set_ns(T0 + 60 * SEC);
    let rec = Recorder::open(dir.path(), config(&clock)).unwrap();
    let recovery = rec.recovery().clone();
    assert_eq!(recovery.torn_bytes_cut, 100);
    assert_eq!(recovery.first_lost_seq, Some(Seq(last_seq + 1)));
    rec.record(&Event::new("cmd.move").json("5")).unwrap();
    rec.close().unwrap();

    let found = recoveries(dir.path());
    assert_eq!(found.len(), 1, "{found:?}");
    let Rec::Recovery {
        seq,
        ts_ns,
        first_lost_seq,
        torn_bytes,
        segment,
        detail,
    } = &found[0]
    else {
        unreachable!("filtered to recovery records");
    };
    // The first record of the session that cut the tail, stamped with the log's last
    // stamp (the cut happened after it).
    assert_eq!(*seq, last_seq + 1);
    assert_eq!(*ts_ns, last_ts_ns);
    assert_eq!(*first_lost_seq, last_seq + 1);
    assert_eq!(*torn_bytes, 100);
    assert_eq!(*segment, name);
    assert!(detail.contains("at byte"), "{detail}");
    // Everything written before the tear is still there, and the session went on.
    let events: Vec<String> = common::events(&common::read_log(dir.path()))
        .into_iter()
        .map(|r| r.payload_str().unwrap().to_owned())
        .collect();
    assert_eq!(events, ["0", "1", "2", "3", "4", "5"]);

    // A clean reopen cuts nothing and adds no recovery record.
    let rec = Recorder::open(dir.path(), config(&clock)).unwrap();
    assert_eq!(rec.recovery().torn_bytes_cut, 0);
    rec.close().unwrap();
    assert_eq!(recoveries(dir.path()).len(), 1);
}

/// Guards the order of a new segment's records when the torn tail cut at open left the
/// active segment empty (a crash right after a roll created it, its header half
/// written): the segment must open with its preamble (the dictionary, then the
/// accounting snapshot, the policy), as every segment does, and the recovery record
/// follows it. It used to come first, so the segment opened without its preamble.
#[test]
fn a_recovery_record_in_an_empty_new_segment_follows_the_preamble() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let small = || {
        config(&clock)
            .log_options(blackbox::log::LogOptions::new().segment_bytes_max(4096))
            .accounting_interval_ns(SEC)
    };
    let rec = Recorder::open(dir.path(), small()).unwrap();
    for i in 0..200u64 {
        clock.set_ns(T0 + i * SEC);
        rec.record(&Event::new("cmd.move").json(&format!("\"{i:0>64}\"")))
            .unwrap();
        // Accounting records, so the preamble holds a snapshot of the totals.
        rec.sync().unwrap();
    }
    rec.close().unwrap();
    let segments = blackbox::log::list_segments(dir.path()).unwrap();
    assert!(segments.len() >= 2, "the log rolled: {segments:?}");
    // The crash: the last segment was just created and only 10 bytes of its header
    // reached the disk (the segments before it are sealed).
    let last = segments.last().unwrap();
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(&last.path)
        .unwrap();
    file.set_len(10).unwrap();
    drop(file);

    let rec = Recorder::open(dir.path(), small()).unwrap();
    assert_eq!(rec.recovery().torn_bytes_cut, 10);
    rec.record(&Event::new("cmd.move").json("\"after\""))
        .unwrap();
    rec.close().unwrap();

    // The records of the segment that was empty, by type tag, read alone from its start.
    let first_seq = last.first_seq;
    let types: Vec<u16> = LogReader::open(dir.path())
        .unwrap()
        .records(Seq(first_seq)..)
        .unwrap()
        .map(|r| r.unwrap().record_type().0)
        .take(4)
        .collect();
    let (dictionary, accounting, policy, recovery) = (
        blackbox::codec::DICTIONARY.0,
        blackbox::codec::ACCOUNTING.0,
        blackbox::codec::POLICY.0,
        blackbox::codec::RECOVERY.0,
    );
    assert_eq!(
        types,
        [dictionary, accounting, policy, recovery],
        "the segment opens with its preamble (dictionary, snapshot, policy), then the recovery record"
    );
    assert_eq!(recoveries(dir.path()).len(), 1);
    // And it reopens, its names restored.
    let rec = Recorder::open(dir.path(), small()).unwrap();
    let stats = rec.stats().unwrap();
    assert!(stats.contains_key("cmd.move"), "{stats:?}");
    rec.close().unwrap();
}
