//! Arbitrary damage never panics and never passes silently.
//!
//! A valid log is damaged at random (bytes overwritten, files cut or extended with
//! garbage, bytes inserted or removed) and then opened, read and verified. No path may
//! panic: a recorder that crashes on a bad file fails the investigation that needed it.
//! And whenever `verify` accepts the damaged log, it must hold exactly the records
//! written, or a prefix of them where the damage was a torn tail, and reads by time and
//! by seq from inside it return exactly those records from there on. Salvage, whatever the
//! damage, yields only records exactly as written and accounts for every seq below the
//! last one it yields, as read or as lost.
#![expect(clippy::unwrap_used, reason = "tests fail loudly on any error")]
#![allow(
    clippy::cast_possible_truncation,
    reason = "test data is generated from small numbers"
)]

mod common;

use std::fs;
use std::os::unix::fs::PermissionsExt;

use blackbox_log::{Durability, Log, LogOptions, LogReader, LostSeqs, Record, Salvaged, Seq};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Damage {
    Overwrite { at: usize, bytes: Vec<u8> },
    Truncate { at: usize },
    Extend { bytes: Vec<u8> },
    Insert { at: usize, bytes: Vec<u8> },
    Remove { at: usize, len: usize },
}

fn damage() -> impl Strategy<Value = Damage> {
    prop_oneof![
        4 => (any::<usize>(), prop::collection::vec(any::<u8>(), 1..9))
            .prop_map(|(at, bytes)| Damage::Overwrite { at, bytes }),
        2 => any::<usize>().prop_map(|at| Damage::Truncate { at }),
        1 => prop::collection::vec(any::<u8>(), 1..200).prop_map(|bytes| Damage::Extend { bytes }),
        1 => (any::<usize>(), prop::collection::vec(any::<u8>(), 1..16))
            .prop_map(|(at, bytes)| Damage::Insert { at, bytes }),
        1 => (any::<usize>(), 1usize..64).prop_map(|(at, len)| Damage::Remove { at, len }),
    ]
}

fn apply(bytes: &mut Vec<u8>, d: &Damage) {
    let n = bytes.len().max(1);
    match d {
        Damage::Overwrite { at, bytes: b } => {
            let at = at % n;
            for (i, x) in b.iter().enumerate() {
                if let Some(slot) = bytes.get_mut(at + i) {
                    *slot ^= x | 1;
                }
            }
        }
        Damage::Truncate { at } => bytes.truncate(at % n),
        Damage::Extend { bytes: b } => bytes.extend_from_slice(b),
        Damage::Insert { at, bytes: b } => {
            let at = at % n;
            bytes.splice(at..at, b.iter().copied());
        }
        Damage::Remove { at, len } => {
            let at = at % n;
            let end = (at + len).min(bytes.len());
            bytes.drain(at..end);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(64),
        ..ProptestConfig::default()
    })]

    #[test]
    fn damaged_logs_fail_cleanly(
        records in 1usize..120,
        segment_pick in any::<usize>(),
        damages in prop::collection::vec(damage(), 1..4),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let opts = LogOptions::new()
            .durability(Durability::Flush)
            .segment_bytes_max(4096)
            .block_bytes_max(512)
            .index_interval_bytes(256);
        let (mut log, _) = Log::open(dir.path(), opts.clone()).unwrap();
        let mut written = Vec::new();
        for seq in 0..records as u64 {
            let e = common::expected_record(seq, 150, seq * 10);
            log.append(Record::new(e.record_type, e.ts_ns, &e.payload)).unwrap();
            written.push(e);
        }
        log.close().unwrap();

        let segments = blackbox_log::list_segments(dir.path()).unwrap();
        let target = &segments[segment_pick % segments.len()].path;
        fs::set_permissions(target, fs::Permissions::from_mode(0o600)).unwrap();
        let mut bytes = fs::read(target).unwrap();
        let before = bytes.clone();
        for d in &damages {
            apply(&mut bytes, d);
        }
        prop_assume!(bytes != before);
        fs::write(target, &bytes).unwrap();

        // None of these may panic; each may fail.
        let verified = blackbox_log::verify(dir.path(), None, None);
        if let Ok(reader) = LogReader::open(dir.path())
            && let Ok(records) = reader.records(..)
        {
            for r in records {
                if r.is_err() {
                    break;
                }
            }
        }
        let _ = LogReader::open(dir.path()).and_then(|r| r.records_by_time(500..).map(|i| i.count()));
        if let Ok(report) = verified {
            // Accepted: what it holds must be exactly what was written, up to a prefix.
            let got = common::read_all(dir.path(), None);
            prop_assert_eq!(got.len() as u64, report.records);
            prop_assert!(got.len() <= written.len());
            for (r, e) in got.iter().zip(&written) {
                prop_assert_eq!(&r.payload, &e.payload);
                prop_assert_eq!(r.ts, e.ts_ns);
                prop_assert_eq!(r.record_type, e.record_type.0);
            }
            // Reads that start inside it return exactly what it holds from there.
            if !got.is_empty() {
                let k = segment_pick % got.len();
                let reader = LogReader::open(dir.path()).unwrap();
                let by_time: Vec<u64> = reader
                    .records_by_time(got[k].ts..)
                    .unwrap()
                    .map(|r| r.map(|r| r.seq().0))
                    .collect::<Result<_, _>>()
                    .unwrap();
                let expected: Vec<u64> =
                    got.iter().filter(|r| r.ts >= got[k].ts).map(|r| r.seq).collect();
                prop_assert_eq!(by_time, expected);
                let by_seq = reader
                    .records(Seq(got[k].seq)..)
                    .unwrap()
                    .map(|r| r.map(|r| r.seq().0))
                    .collect::<Result<Vec<_>, _>>()
                    .unwrap();
                prop_assert_eq!(by_seq, (got[k].seq..got.len() as u64).collect::<Vec<_>>());
            }
        }
        // Salvage reads around any damage: every record it yields is exactly the one
        // written at its seq, and every seq below the last one it yields is either
        // yielded or inside a loss it reports: nothing goes missing silently.
        let reader = LogReader::open(dir.path()).unwrap();
        let mut accounted = 0u64;
        for item in reader.salvage(..).unwrap() {
            match item {
                Salvaged::Record(r) => {
                    let seq = r.seq().0;
                    prop_assert_eq!(seq, accounted, "seq {} not accounted for", accounted);
                    let e = &written[usize::try_from(seq).unwrap()];
                    prop_assert_eq!(r.payload(), e.payload.as_slice());
                    prop_assert_eq!(r.ts_ns(), e.ts_ns);
                    prop_assert_eq!(r.record_type(), e.record_type);
                    accounted = seq + 1;
                }
                Salvaged::Lost(loss) => match loss.seqs {
                    LostSeqs::Exact { first, last } => {
                        prop_assert_eq!(first, accounted, "{}", loss);
                        accounted = last + 1;
                    }
                    LostSeqs::From { first, .. } => prop_assert_eq!(first, accounted, "{}", loss),
                    LostSeqs::None => {}
                },
            }
        }
        let _ = LogReader::open(dir.path()).and_then(|r| r.digest());
        let _ = LogReader::open(dir.path()).and_then(|r| r.structure());
        let _ = Log::open(dir.path(), opts.clone().verify_on_open(true));
    }
}
