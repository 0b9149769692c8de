//! A query by time window (and kind) starts where the window starts: the names come
//! from the segment's preamble and the dictionary records after it (the blocks that
//! hold none are passed over by the tag index), and the read starts at the
//! footer's index entry for the window. It must return exactly what a full scan
//! filtered by time and kind returns (the model: what was recorded), with kinds named
//! mid-segment and across segments, and still catch a changed block in the window.
#![expect(clippy::unwrap_used, reason = "tests fail loudly on any error")]

use std::sync::Arc;

use blackbox::log::LogOptions;
use blackbox::{Clock, Config, Event, ManualClock, Recorder};
use blackbox_replay::{BodyRef, PayloadRef, Query, RecordType, Replay};
use proptest::prelude::*;

const T0: u64 = 1_700_000_000_000_000_000;
const STEP_NS: u64 = 1_000;

/// One recorded event: (recording time, kind, its number, carried in its payload).
type Model = Vec<(u64, String, u64)>;

/// Records `n` events on a manual clock, 1 µs apart; event `i` is of kind `k.(i % kinds_at(i))`,
/// where a new kind is first used every `new_kind_every` events (so kinds are named
/// mid-segment). Its payload is 8 bytes of its number and 56 of filler.
fn record(dir: &std::path::Path, n: u64, new_kind_every: u64, segment_bytes: u64) -> Model {
    let clock = ManualClock::new(T0);
    let rec = Recorder::open(
        dir,
        Config::new()
            .clock(Arc::new(clock.clone()))
            .log_options(
                LogOptions::new()
                    .segment_bytes_max(segment_bytes)
                    .block_bytes_max(1024)
                    .index_interval_bytes(1024),
            )
            // A watermark every 200 events: a window's read ends about that far
            // past its end (an event that happened in it may be written later).
            .accounting_interval_ns(200 * STEP_NS)
            .checkpoint_interval_ns(None),
    )
    .unwrap();
    let mut model = Vec::new();
    for i in 0..n {
        clock.advance_ns(STEP_NS);
        let kinds = 2 + i / new_kind_every;
        let kind = format!("k.{}", i % kinds);
        let mut payload = [0xA5u8; 64];
        payload[..8].copy_from_slice(&i.to_le_bytes());
        rec.record(&Event::new(&kind).raw(&payload)).unwrap();
        model.push((clock.now_ns(), kind, i));
    }
    rec.close().unwrap();
    model
}

/// The event numbers the query returns (read as views), and the records it read.
fn query(dir: &std::path::Path, q: &Query) -> Result<(Vec<u64>, u64), blackbox_replay::Error> {
    let mut replay = Replay::open(dir, q)?;
    let mut out = Vec::new();
    while let Some(r) = replay.next_view() {
        if let BodyRef::Event(e) = r?.body {
            let PayloadRef::Raw(p) = e.payload else {
                panic!("a raw payload")
            };
            out.push(u64::from_le_bytes(p[..8].try_into().unwrap()));
        }
    }
    Ok((out, replay.records_read()))
}

fn expected(model: &Model, since: u64, until: u64, kind: Option<&str>) -> Vec<u64> {
    model
        .iter()
        .filter(|(t, k, _)| *t >= since && *t <= until && kind.is_none_or(|want| want == k))
        .map(|&(_, _, i)| i)
        .collect()
}

fn window_query(since: u64, until: u64, kind: Option<&str>) -> Query {
    let q = Query::new()
        .types([RecordType::Event])
        .since(since)
        .until(until);
    match kind {
        Some(k) => q.kind(k).unwrap(),
        None => q,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn a_window_query_returns_what_a_filtered_scan_does(
        n in 200u64..1500,
        new_kind_every in 50u64..400,
        segment_kib in prop_oneof![Just(16u64), Just(64), Just(1024)],
        start_permille in 0u64..1000,
        len_permille in 0u64..400,
        kind in proptest::option::of(0u64..8),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let model = record(dir.path(), n, new_kind_every, segment_kib * 1024);
        let span = n * STEP_NS;
        let since = T0 + span * start_permille / 1000;
        let until = since + span * len_permille / 1000;
        let kind = kind.map(|k| format!("k.{k}"));
        let want = expected(&model, since, until, kind.as_deref());
        let (got, _) = query(dir.path(), &window_query(since, until, kind.as_deref())).unwrap();
        prop_assert_eq!(got, want);
    }
}

/// The read jumps to the window: a window near the end of a long sealed segment reads
/// the blocks that hold the window (and the few that hold a dictionary record before
/// it), not the segment from its start.
#[test]
fn a_window_late_in_a_segment_is_read_from_where_it_starts() {
    let dir = tempfile::tempdir().unwrap();
    // 30 000 events of about 94 bytes in 2 MiB segments: the first segment is sealed
    // and holds about 22 000 of them; kinds named every 2 000 events.
    let model = record(dir.path(), 30_000, 2_000, 1 << 21);
    let segments = blackbox::log::list_segments(dir.path()).unwrap();
    assert!(segments.len() >= 2, "the first segment is sealed");
    let since = model[15_000].0;
    let until = model[15_999].0;
    let kind = "k.3";
    let want = expected(&model, since, until, Some(kind));
    assert!(!want.is_empty());
    let (got, read) = query(dir.path(), &window_query(since, until, Some(kind))).unwrap();
    assert_eq!(got, want);
    // The window holds 1 000 events, and the read goes on to the first watermark past
    // it (how far depends on how the writer batched the events: at most about 8 192
    // records); reading from the segment's start takes 15 000 records before the window.
    assert!(
        read < 14_000,
        "the window query read {read} records for a window of 1000"
    );
}

/// A changed byte in a block inside the window fails the read; a changed byte in a
/// block of events before the window, which the read passes over, does not.
#[test]
fn a_changed_block_inside_the_window_is_caught() {
    let dir = tempfile::tempdir().unwrap();
    let model = record(dir.path(), 30_000, 2_000, 1 << 21);
    let segments = blackbox::log::list_segments(dir.path()).unwrap();
    let since = model[15_000].0;
    let until = model[15_999].0;
    let q = window_query(since, until, Some("k.3"));
    let path = &segments[0].path;
    let bytes = std::fs::read(path).unwrap();
    // Event i's payload starts with its number: find it in the segment file.
    let at = |i: u64| {
        let mut needle = i.to_le_bytes().to_vec();
        needle.extend_from_slice(&[0xA5; 8]);
        bytes
            .windows(needle.len())
            .position(|w| w == needle.as_slice())
            .unwrap()
    };
    let flip = |offset: usize| {
        let mut changed = bytes.clone();
        changed[offset + 20] ^= 0x01;
        std::fs::write(path, &changed).unwrap();
    };

    flip(at(9_000));
    let (got, _) = query(dir.path(), &q).unwrap();
    assert_eq!(got, expected(&model, since, until, Some("k.3")));

    flip(at(15_500));
    let err = query(dir.path(), &q).unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("chain") || text.contains("checksum") || text.contains("crc"),
        "the read reports the damage: {text}"
    );
}

/// A read bounded by `until` goes on to the first watermark past it; the recorder
/// writes one at least every 8 192 records, also when its clock's accounting interval
/// has not come round: a window early in a log written faster than the interval (here
/// 60 000 events in 60 ms of the recorder's clock, under the 5 s default; 1 MiB
/// segments, so that the window's is sealed) does not read on to the log's end.
#[test]
fn a_window_read_stops_within_a_few_thousand_records_of_its_end() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let rec = Recorder::open(
        dir.path(),
        Config::new()
            .clock(Arc::new(clock.clone()))
            .log_options(LogOptions::new().segment_bytes_max(1 << 20)),
    )
    .unwrap();
    let mut model = Vec::new();
    for i in 0..60_000u64 {
        clock.advance_ns(STEP_NS);
        let kind = format!("k.{}", i % 4);
        let mut payload = [0xA5u8; 64];
        payload[..8].copy_from_slice(&i.to_le_bytes());
        rec.record(&Event::new(&kind).raw(&payload)).unwrap();
        model.push((clock.now_ns(), kind, i));
    }
    rec.close().unwrap();
    let since = model[20_000].0;
    let until = model[20_999].0;
    let (got, read) = query(dir.path(), &window_query(since, until, None)).unwrap();
    assert_eq!(got, expected(&model, since, until, None));
    // The window, then at most two stretches of 8 192 records (the watermark trails the
    // writer by a batch or two, so the first record after the window may carry one
    // short of it) and two batches of at most 4 096 events; the whole log's remainder
    // is 39 000 records.
    assert!(
        read < 1_000 + 2 * 8_192 + 2 * 4_096,
        "the window of 1000 events read {read} records"
    );
}
