//! The log against a model: a `Vec` of records.
//!
//! Random appends (single and batched, with timestamp jumps beyond a block's u32 delta),
//! flushes, syncs, reopens and range reads by seq and by time, under every durability
//! mode and with tiny segments, blocks and index intervals so that every roll, seek and
//! cross-segment path is exercised. After every read the reader must return exactly the
//! model's records in the range, limited to what the writer has handed to the OS.
#![expect(clippy::unwrap_used, reason = "tests fail loudly on any error")]
#![allow(
    clippy::cast_possible_truncation,
    reason = "test data is generated from small numbers"
)]

use blackbox_log::{Durability, Log, LogOptions, LogReader, Record, RecordType, Seq};
use proptest::prelude::*;

#[derive(Debug, Clone, PartialEq, Eq)]
struct Rec {
    record_type: u16,
    ts: u64,
    payload: Vec<u8>,
}

#[derive(Debug, Clone)]
enum Op {
    /// (type, ts step, payload length) per record; one batch.
    Append(Vec<(u16, u64, usize)>),
    Flush,
    Sync,
    Reopen,
    ReadSeq(u64, u64),
    ReadTime(u64, u64),
}

fn ts_step() -> impl Strategy<Value = u64> {
    prop_oneof![
        8 => Just(0u64),
        8 => 1u64..1_000,
        1 => (u64::from(u32::MAX) - 2)..(u64::from(u32::MAX) + 5),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        10 => prop::collection::vec((0u16..4, ts_step(), 0usize..300), 1..12).prop_map(Op::Append),
        1 => Just(Op::Flush),
        1 => Just(Op::Sync),
        1 => Just(Op::Reopen),
        2 => (0u64..400, 0u64..400).prop_map(|(a, b)| Op::ReadSeq(a.min(b), a.max(b))),
        2 => (0u64..200, 0u64..200).prop_map(|(a, b)| Op::ReadTime(a.min(b), a.max(b))),
    ]
}

fn durability() -> impl Strategy<Value = Durability> {
    prop_oneof![
        Just(Durability::Buffered),
        Just(Durability::Flush),
        Just(Durability::Sync)
    ]
}

fn payload(seq: usize, len: usize) -> Vec<u8> {
    (0..len).map(|i| (seq * 31 + i * 7) as u8).collect()
}

fn check_read(
    dir: &std::path::Path,
    model: &[Rec],
    visible: usize,
    by_time: bool,
    lo: u64,
    hi: u64,
) {
    let reader = LogReader::open(dir).unwrap();
    let got: Vec<(u64, Rec)> = if by_time {
        reader.records_by_time(lo..=hi).unwrap()
    } else {
        reader.records(Seq(lo)..=Seq(hi)).unwrap()
    }
    .map(|r| {
        let r = r.unwrap();
        (
            r.seq().0,
            Rec {
                record_type: r.record_type().0,
                ts: r.ts_ns(),
                payload: r.payload().to_vec(),
            },
        )
    })
    .collect();
    let want: Vec<(u64, Rec)> = model[..visible]
        .iter()
        .enumerate()
        .map(|(i, r)| (i as u64, r.clone()))
        .filter(|(seq, r)| {
            let key = if by_time { r.ts } else { *seq };
            key >= lo && key <= hi
        })
        .collect();
    assert_eq!(got, want, "by_time={by_time} range {lo}..={hi}");
}

fn options(durability: Durability, segment: u64, block: usize, interval: u64) -> LogOptions {
    LogOptions::new()
        .durability(durability)
        .segment_bytes_max(segment)
        .block_bytes_max(block)
        .index_interval_bytes(interval)
        .write_buffer_bytes(2048)
}

proptest! {
    // 48 cases in CI; `PROPTEST_CASES=5000 cargo test --release --test model` for a long run.
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(48),
        ..ProptestConfig::default()
    })]

    #[test]
    fn log_matches_model(
        ops in prop::collection::vec(op(), 1..60),
        durability in durability(),
        segment in 4096u64..12_000,
        block in 64usize..2048,
        interval in 1u64..1024,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let opts = options(durability, segment, block, interval);
        let (mut log, _) = Log::open(dir.path(), opts.clone()).unwrap();
        let mut model: Vec<Rec> = Vec::new();
        let mut ts = 0u64;
        for op in ops {
            match op {
                Op::Append(batch) => {
                    let mut recs = Vec::new();
                    for (t, step, len) in batch {
                        ts += step;
                        recs.push(Rec { record_type: t, ts, payload: payload(model.len() + recs.len(), len) });
                    }
                    let records: Vec<Record<'_>> = recs
                        .iter()
                        .map(|r| Record::new(RecordType(r.record_type), r.ts, &r.payload))
                        .collect();
                    let last = log.append_batch(&records).unwrap();
                    model.extend(recs);
                    prop_assert_eq!(last, Some(Seq(model.len() as u64 - 1)));
                }
                Op::Flush => log.flush().unwrap(),
                Op::Sync => {
                    let durable = log.sync().unwrap();
                    prop_assert_eq!(durable, model.len().checked_sub(1).map(|s| Seq(s as u64)));
                }
                Op::Reopen => {
                    log.close().unwrap();
                    let (l, recovery) = Log::open(dir.path(), opts.clone()).unwrap();
                    prop_assert_eq!(recovery.torn_bytes_cut, 0);
                    prop_assert_eq!(recovery.last_seq, model.len().checked_sub(1).map(|s| Seq(s as u64)));
                    log = l;
                }
                Op::ReadSeq(lo, hi) | Op::ReadTime(lo, hi) => {
                    let visible = log.written_seq().map_or(0, |s| s.0 as usize + 1);
                    prop_assert!(visible <= model.len());
                    if durability != Durability::Buffered {
                        prop_assert_eq!(visible, model.len());
                    }
                    let by_time = matches!(op, Op::ReadTime(..));
                    // Time reads use the model's own timestamps as bounds, scaled into range.
                    let (lo, hi) = if by_time && !model.is_empty() {
                        let max = model[model.len() - 1].ts.max(1);
                        (lo * max / 200, hi * max / 200)
                    } else {
                        (lo, hi)
                    };
                    check_read(dir.path(), &model, visible, by_time, lo, hi);
                }
            }
        }
        let digest = log.close().unwrap();
        prop_assert_eq!(digest, model.len().checked_sub(1).map(|s| Seq(s as u64)));
        check_read(dir.path(), &model, model.len(), false, 0, u64::MAX);
        if !model.is_empty() {
            let report = blackbox_log::verify(dir.path(), None, None).unwrap();
            prop_assert_eq!(report.records, model.len() as u64);
            prop_assert_eq!(report.torn_tail, None);
            let reader_digest = LogReader::open(dir.path()).unwrap().digest().unwrap();
            prop_assert_eq!(reader_digest, report.last);
            let again = blackbox_log::verify(dir.path(), None, report.last.as_ref()).unwrap();
            prop_assert!(again.digest_matched);
        }
    }
}
