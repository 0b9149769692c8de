//! Names (kinds, sources, value names): their limits per log and per event, what they
//! cost as the log grows, and the dictionary rules every reader applies.

#![expect(clippy::unwrap_used, reason = "tests fail loudly on any error")]

mod common;

use std::sync::Arc;

use blackbox::codec::{self, DictionaryRecord};
use blackbox::log::{Log, Record};
use blackbox::{
    Config, Counters, Error, Event, LogOptions, ManualClock, NAMES_PER_LOG_MAX, Recorder,
    VALUES_PER_EVENT_MAX,
};
use common::Rec;

const SEC: u64 = 1_000_000_000;
const T0: u64 = 1_700_000_000 * SEC;

/// Guards the cost of many kinds: every accounting record used to list every kind ever
/// seen (100 000 kinds, one tiny event each, wrote 520 MB of accounting). A record now
/// lists the kinds whose totals changed, so the entries written grow with the events,
/// not with kinds × records. Counted in entries, not seconds.
#[test]
fn accounting_and_dictionary_entries_grow_with_new_names_not_with_names_ever_seen() {
    const KINDS: u64 = 300;
    let clock = ManualClock::new(T0);
    let dir = tempfile::tempdir().unwrap();
    let config = Config::new()
        .clock(Arc::new(clock.clone()))
        .accounting_interval_ns(SEC)
        .checkpoint_interval_ns(None);
    let rec = Recorder::open(dir.path(), config).unwrap();
    for i in 0..KINDS {
        rec.record(&Event::new(&format!("kind.k{i}"))).unwrap();
        // An accounting record is due at the end of every batch.
        clock.advance_ns(2 * SEC);
        rec.sync().unwrap();
    }
    rec.close().unwrap();
    let recs = common::read_log(dir.path());
    let accountings = common::accountings(&recs);
    assert!(
        accountings.len() as u64 >= KINDS,
        "{} accounting records",
        accountings.len()
    );
    let entries: usize = accountings.iter().map(|a| a.len()).sum();
    // By hand: each kind is listed in the record after its event, and again only if its
    // totals changed since (records that listed every kind seen would list
    // 300 · 301 / 2 = 45 150 entries).
    assert!(
        (KINDS..=2 * KINDS).contains(&(entries as u64)),
        "{entries} entries"
    );
    let dictionary: usize = recs
        .iter()
        .map(|r| match r {
            Rec::Dictionary { entries, .. } => entries.len(),
            _ => 0,
        })
        .sum();
    assert_eq!(dictionary as u64, KINDS, "each name written once");
    let totals = common::last_accounting(&recs);
    assert_eq!(totals.len() as u64, KINDS);
    assert!(totals.values().all(|c| c.seen == 1 && c.balanced()));
}

/// Guards the limits on names: past about 127 000 names of 128 bytes the dictionary no
/// longer fit one record and the log could never be written again. A name past a limit
/// is now refused with an error that names it and the limit, the recorder goes on, and
/// the log, whose preamble (dictionary and accounting snapshot) opens every segment,
/// reopens and reads back. Here the limits follow from a small record limit.
#[test]
fn a_name_past_the_limit_is_refused_and_the_log_stays_writable_and_reopens() {
    let dir = tempfile::tempdir().unwrap();
    let config = || {
        Config::new().event_bytes_max(1024).log_options(
            LogOptions::new()
                .record_bytes_max(8192)
                .segment_bytes_max(16 << 10),
        )
    };
    let rec = Recorder::open(dir.path(), config()).unwrap();
    let mut accepted = Vec::new();
    let refused = loop {
        let kind = format!("robot.sensor.{:0>100}", accepted.len());
        match rec.record(&Event::new(&kind).json("{}")) {
            Ok(()) => accepted.push(kind),
            Err(Error::NameLimit(e)) => break (kind, e),
            Err(other) => panic!("expected a name limit, got {other:?}"),
        }
        assert!(accepted.len() < 10_000, "no limit reached");
    };
    let (kind, err) = refused;
    assert_eq!(err.name, kind);
    let message = Error::NameLimit(err).to_string();
    assert!(
        message.contains(&kind) && message.contains("limit"),
        "{message}"
    );
    // By hand: a 113-byte name counts 125 bytes (12 for its id and string header)
    // against the 8192 - 64 bytes a dictionary record may hold: 65 fit.
    assert_eq!(accepted.len(), 65);
    // The recorder goes on: known kinds record, and enough of them roll segments, so
    // segments open with the preamble.
    for i in 0..1200 {
        let kind = &accepted[i % accepted.len()];
        rec.record(&Event::new(kind).json(&format!("{{\"i\":{i}}}")))
            .unwrap();
    }
    let stats = rec.stats().unwrap();
    rec.close().unwrap();
    assert!(!stats.contains_key(&kind));
    assert!(stats.values().all(Counters::balanced));
    assert!(blackbox::log::list_segments(dir.path()).unwrap().len() > 2);

    let rec = Recorder::open(dir.path(), config()).unwrap();
    assert_eq!(rec.stats().unwrap(), stats);
    rec.record(&Event::new(&accepted[0])).unwrap();
    rec.close().unwrap();
    let recs = common::read_log(dir.path());
    assert_eq!(
        common::last_accounting(&recs)[&accepted[0]].seen,
        stats[&accepted[0]].seen + 1
    );
}

/// Guards the per-event limit: thousands of value names on one event made the log
/// unwritable. An event carries at most `VALUES_PER_EVENT_MAX` values; one with more is
/// refused, nothing of it counted or named, and the next event records.
#[test]
fn an_event_with_too_many_values_is_refused_and_the_next_one_records() {
    let dir = tempfile::tempdir().unwrap();
    let rec = Recorder::open(dir.path(), Config::new()).unwrap();
    let names: Vec<String> = (0..=VALUES_PER_EVENT_MAX)
        .map(|i| format!("v{i}"))
        .collect();
    let values: Vec<(&str, f64)> = names.iter().map(|n| (n.as_str(), 1.0)).collect();
    match rec.record(&Event::new("sensor.wide").values(&values)) {
        Err(e @ Error::TooManyValues { .. }) => {
            let message = e.to_string();
            assert!(
                message.contains("sensor.wide")
                    && message.contains("1025")
                    && message.contains("1024"),
                "{message}"
            );
        }
        other => panic!("expected TooManyValues, got {other:?}"),
    }
    rec.record(&Event::new("sensor.wide").values(&values[..VALUES_PER_EVENT_MAX]))
        .unwrap();
    let stats = rec.stats().unwrap();
    rec.close().unwrap();
    assert_eq!(stats["sensor.wide"].seen, 1);
    assert_eq!(common::events(&common::read_log(dir.path())).len(), 1);
}

/// Writes a log whose only record is a dictionary record with `entries`, as a hostile
/// or damaged writer could.
fn log_with_dictionary(entries: Vec<(u32, String)>) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) = Log::open(dir.path(), LogOptions::new()).unwrap();
    let bytes = rkyv::to_bytes::<rkyv::rancor::Error>(&DictionaryRecord { entries }).unwrap();
    log.append(Record::new(codec::DICTIONARY, T0, &bytes))
        .unwrap();
    log.close().unwrap();
    dir
}

/// Guards restoring names from disk: the dictionary's ids were trusted, so a record
/// naming id 4 000 000 000 made `Recorder::open` allocate about 64 GiB, and id 0 or an
/// id given two names were accepted (replay's decoder refused them). Open now refuses
/// each with `Error::Restore` naming the seq, before allocating anything by the id.
#[test]
fn a_hostile_dictionary_is_refused_at_open_naming_its_seq() {
    let cases = [
        (vec![(4_000_000_000, "a".to_owned())], "ids are from 1"),
        (
            vec![(NAMES_PER_LOG_MAX + 1, "a".to_owned())],
            "ids are from 1",
        ),
        (vec![(0, "a".to_owned())], "ids are from 1"),
        (
            vec![(1, "a".to_owned()), (1, "b".to_owned())],
            "renames id 1",
        ),
        (
            vec![(1, "a".to_owned()), (2, "a".to_owned())],
            "already has id 1",
        ),
        (vec![(1, String::new())], "1 to 256 bytes"),
    ];
    for (entries, reason) in cases {
        let dir = log_with_dictionary(entries.clone());
        match Recorder::open(dir.path(), Config::new()) {
            Err(e @ Error::Restore { seq: 0, .. }) => {
                let message = e.to_string();
                assert!(message.contains(reason), "{entries:?}: {message}");
                assert!(message.contains("seq 0"), "{message}");
            }
            other => panic!("{entries:?}: expected Error::Restore at seq 0, got {other:?}"),
        }
    }
    // The largest id the rules allow is restored, and recording goes on after it.
    let dir = log_with_dictionary(vec![(NAMES_PER_LOG_MAX, "a".to_owned())]);
    let rec = Recorder::open(dir.path(), Config::new()).unwrap();
    rec.close().unwrap();
}

/// Guards a past bug: every segment opens with the dictionary and the accounting
/// snapshot, and the size limit counted them, so once they outgrew it every event got
/// a segment of its own (65 535 kinds and 4096-byte segments: 204 segments of 6 MB for
/// 200 events). The limit now counts the records after the preamble.
#[test]
fn many_names_do_not_make_a_segment_of_every_event() {
    let dir = tempfile::tempdir().unwrap();
    let config = || Config::new().log_options(LogOptions::new().segment_bytes_max(4096));
    let rec = Recorder::open(dir.path(), config()).unwrap();
    // 1500 kinds of 40 bytes: a preamble of about 80 KB, 20 times the limit.
    for i in 0..1_500 {
        rec.record(&Event::new(&format!("robot.many.kinds.{i:0>20}")).json("{}"))
            .unwrap();
    }
    rec.close().unwrap();
    drop(rec);
    let before = blackbox::log::list_segments(dir.path()).unwrap().len();
    let rec = Recorder::open(dir.path(), config()).unwrap();
    for i in 0..200 {
        rec.record(&Event::new("robot.tick").json(&format!("{{\"i\":{i}}}")))
            .unwrap();
    }
    rec.close().unwrap();
    let segments = blackbox::log::list_segments(dir.path()).unwrap();
    // By hand: 200 events of well under 100 bytes each take under 20 000 bytes of
    // records: a few segments of 4096 bytes after their preamble, not 200.
    let added = segments.len() - before;
    assert!(added <= 12, "{added} segments for 200 events");
    let recs = common::read_log(dir.path());
    assert_eq!(common::count_events(&recs, "robot.tick", "full"), 200);
}

/// Where the names in use at a seq start ([`blackbox::dictionary_start`], the one rule
/// the recorder's restore and replay's reads share): the last segment at or before the
/// seq's that opens with a dictionary record, or the first. Checked against the types
/// written, segment by segment, over a log whose segments open with a dictionary record
/// only sometimes.
#[test]
fn names_start_at_the_last_segment_that_opens_with_the_dictionary() {
    use blackbox::log::{Log, LogOptions, LogReader, Record, RecordType, list_segments};
    use blackbox::{codec, dictionary_start};

    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) = Log::open(
        dir.path(),
        LogOptions::new()
            .segment_bytes_max(4096)
            .block_bytes_max(512),
    )
    .unwrap();
    // Record i's type: a dictionary record at every 7th, else an event (the payload
    // is not read).
    let payload = [0u8; 300];
    let types: Vec<RecordType> = (0..200)
        .map(|i| {
            if i % 7 == 0 {
                codec::DICTIONARY
            } else {
                codec::EVENT
            }
        })
        .collect();
    for (i, t) in types.iter().enumerate() {
        log.append(Record::new(*t, 1_000 + i as u64, &payload))
            .unwrap();
    }
    log.close().unwrap();
    let segments = list_segments(dir.path()).unwrap();
    assert!(segments.len() > 10, "{} segments", segments.len());
    let firsts: Vec<u64> = segments.iter().map(|s| s.first_seq).collect();
    let reader = LogReader::open(dir.path()).unwrap();
    let mut walked_back = false;
    for seq in 0..types.len() as u64 {
        // By hand: the segment holding seq, then back while its first record is not a
        // dictionary record.
        let mut k = firsts.iter().rposition(|&f| f <= seq).unwrap();
        while k > 0 && types[usize::try_from(firsts[k]).unwrap()] != codec::DICTIONARY {
            k -= 1;
        }
        walked_back |= firsts.iter().rposition(|&f| f <= seq).unwrap() != k;
        assert_eq!(
            dictionary_start(&reader, &segments, seq).unwrap(),
            firsts[k],
            "seq {seq}"
        );
    }
    assert!(
        walked_back,
        "some segment does not open with the dictionary"
    );
}
