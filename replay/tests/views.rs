//! `Replay::next_view` hands out records decoded in place: each borrowed view must say
//! exactly what was recorded (kind, source, values, payload bytes, times), its owned
//! form must be that too, and its content hash, computed only when asked for, must be
//! the one FORMAT.md defines over the log's own record.
#![expect(clippy::unwrap_used, reason = "tests fail loudly on any error")]

use std::sync::Arc;

use blackbox::log::LogOptions;
use blackbox::{Clock, Config, Event, LogReader, ManualClock, Recorder, Seq};
use blackbox_replay::{Body, BodyRef, Payload, PayloadRef, Query, RecordType, Replay, to_json};
use proptest::prelude::*;

const T0: u64 = 1_700_000_000_000_000_000;
const KINDS: [&str; 5] = [
    "arm.move",
    "arm.stop",
    "cam.frame",
    "nav.goal",
    "nav.replan",
];
const SOURCES: [&str; 2] = ["planner", "driver"];
const VALUE_NAMES: [&str; 3] = ["dx", "dy", "speed"];

/// What one event was recorded with.
#[derive(Debug, Clone)]
struct Recorded {
    kind: usize,
    source: Option<usize>,
    /// (index into VALUE_NAMES, value), each name at most once.
    values: Vec<(usize, f64)>,
    payload: RecordedPayload,
    event_time_ns: Option<u64>,
    step_ns: u64,
}

#[derive(Debug, Clone)]
enum RecordedPayload {
    None,
    Json(String),
    Raw(Vec<u8>),
}

fn recorded() -> impl Strategy<Value = Recorded> {
    let payload = prop_oneof![
        Just(RecordedPayload::None),
        (0u32..1000).prop_map(|n| RecordedPayload::Json(format!(r#"{{"n": {n}, "ok": true}}"#))),
        // Text recorded as JSON that is not valid JSON: stored as given.
        "[a-z{]{1,8}".prop_map(RecordedPayload::Json),
        proptest::collection::vec(any::<u8>(), 0..200).prop_map(RecordedPayload::Raw),
    ];
    (
        0..KINDS.len(),
        proptest::option::of(0..SOURCES.len()),
        proptest::sample::subsequence(vec![0usize, 1, 2], 0..=3),
        proptest::collection::vec(-1e6f64..1e6, 3),
        payload,
        proptest::option::of(0u64..1_000_000),
        1u64..5_000_000,
    )
        .prop_map(
            |(kind, source, names, xs, payload, event_time_ns, step_ns)| Recorded {
                kind,
                source,
                values: names.into_iter().zip(xs).collect(),
                payload,
                event_time_ns,
                step_ns,
            },
        )
}

/// Records `events` into `dir` on a manual clock, in small segments and blocks (so that
/// kinds are named mid-segment and reads cross segments); returns each event's
/// recording time.
fn record(dir: &std::path::Path, events: &[Recorded]) -> Vec<u64> {
    let clock = ManualClock::new(T0);
    let rec = Recorder::open(
        dir,
        Config::new().clock(Arc::new(clock.clone())).log_options(
            LogOptions::new()
                .segment_bytes_max(8 * 1024)
                .block_bytes_max(512),
        ),
    )
    .unwrap();
    let mut times = Vec::new();
    for e in events {
        clock.advance_ns(e.step_ns);
        let values: Vec<(&str, f64)> = e.values.iter().map(|&(n, v)| (VALUE_NAMES[n], v)).collect();
        let mut event = Event::new(KINDS[e.kind]).values(&values);
        if let Some(s) = e.source {
            event = event.source(SOURCES[s]);
        }
        if let Some(t) = e.event_time_ns {
            event = event.event_time_ns(t);
        }
        event = match &e.payload {
            RecordedPayload::None => event,
            RecordedPayload::Json(text) => event.json(text),
            RecordedPayload::Raw(bytes) => event.raw(bytes),
        };
        rec.record(&event).unwrap();
        times.push(clock.now_ns());
    }
    rec.close().unwrap();
    times
}

/// FORMAT.md's content hash, computed here by hand: blake3 over seq, timestamp and type
/// (little-endian) and the payload, of the log's record at `seq`.
fn hash_by_hand(reader: &LogReader, seq: u64) -> [u8; 32] {
    let r = reader
        .records(Seq(seq)..=Seq(seq))
        .unwrap()
        .next()
        .unwrap()
        .unwrap();
    let mut h = blake3::Hasher::new();
    h.update(&seq.to_le_bytes());
    h.update(&r.ts_ns().to_le_bytes());
    h.update(&r.record_type().0.to_le_bytes());
    h.update(r.payload());
    *h.finalize().as_bytes()
}

fn check(events: &[Recorded]) {
    let dir = tempfile::tempdir().unwrap();
    let times = record(dir.path(), events);
    let reader = LogReader::open(dir.path()).unwrap();
    let query = Query::new().types([RecordType::Event]);
    let mut replay = Replay::open(dir.path(), &query).unwrap();
    let mut n = 0;
    while let Some(view) = replay.next_view() {
        let view = view.unwrap();
        let want = &events[n];
        let BodyRef::Event(e) = &view.body else {
            panic!("seq {}: not an event", view.seq)
        };
        assert_eq!(e.kind, KINDS[want.kind], "event {n}");
        assert_eq!(e.source, want.source.map(|s| SOURCES[s]), "event {n}");
        assert_eq!(e.recorded_ns, times[n], "event {n}");
        assert_eq!(view.happened_ns(), times[n], "event {n}");
        assert_eq!(e.event_time_ns, want.event_time_ns, "event {n}");
        assert_eq!(e.weight, 1.0, "event {n}");
        let values: Vec<(&str, f64)> = e.values.iter().collect();
        let want_values: Vec<(&str, f64)> = want
            .values
            .iter()
            .map(|&(i, v)| (VALUE_NAMES[i], v))
            .collect();
        assert_eq!(values, want_values, "event {n}");
        assert_eq!(e.values.len(), want_values.len(), "event {n}");
        match (&e.payload, &want.payload) {
            (PayloadRef::None, RecordedPayload::None) => {}
            (PayloadRef::Json(b), RecordedPayload::Json(t)) => assert_eq!(*b, t.as_bytes()),
            (PayloadRef::Raw(b), RecordedPayload::Raw(r)) => assert_eq!(*b, r.as_slice()),
            (got, want) => panic!("event {n}: payload {got:?}, recorded {want:?}"),
        }
        assert_eq!(view.hash(), hash_by_hand(&reader, view.seq), "event {n}");

        // The owned form says the same, a JSON payload parsed when it is JSON.
        let json = view.to_json();
        let owned = view.into_owned();
        assert_eq!(to_json(&owned), json, "event {n}");
        assert_eq!(owned.hash, hash_by_hand(&reader, owned.seq));
        let Body::Event(o) = owned.body else {
            panic!("event {n}: the owned form is not an event")
        };
        assert_eq!(o.kind, KINDS[want.kind]);
        assert_eq!(o.source.as_deref(), want.source.map(|s| SOURCES[s]));
        let owned_values: Vec<(&str, f64)> =
            o.values.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        assert_eq!(owned_values, want_values);
        match (&o.payload, &want.payload) {
            (Payload::None, RecordedPayload::None) => {}
            (Payload::Json(v), RecordedPayload::Json(t)) => {
                assert_eq!(
                    Some(v),
                    serde_json::from_str::<serde_json::Value>(t).ok().as_ref()
                );
            }
            (Payload::Raw(b), RecordedPayload::Json(t)) => {
                assert!(serde_json::from_str::<serde_json::Value>(t).is_err());
                assert_eq!(b.as_slice(), t.as_bytes());
            }
            (Payload::Raw(b), RecordedPayload::Raw(r)) => assert_eq!(b, r),
            (got, want) => panic!("event {n}: owned payload {got:?}, recorded {want:?}"),
        }
        n += 1;
    }
    assert_eq!(n, events.len(), "every recorded event is read back");
}

fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

proptest! {
    // 32 cases by default; a long run sets PROPTEST_CASES.
    #![proptest_config(ProptestConfig {
        cases: cases(32),
        ..ProptestConfig::default()
    })]

    #[test]
    fn views_say_what_was_recorded(events in proptest::collection::vec(recorded(), 1..120)) {
        check(&events);
    }
}

/// The owned iterator and the views give the same records, the non-event ones (the
/// dictionary, accounting, the policy) included.
#[test]
fn the_iterator_is_the_views_made_owned() {
    let events: Vec<Recorded> = (0..300)
        .map(|i| Recorded {
            kind: i % KINDS.len(),
            source: (i % 3 == 0).then_some(i % 2),
            values: vec![(i % 3, i as f64)],
            payload: RecordedPayload::Json(format!(r#"{{"i":{i}}}"#)),
            event_time_ns: None,
            step_ns: 1_000_000,
        })
        .collect();
    let dir = tempfile::tempdir().unwrap();
    record(dir.path(), &events);
    let query = Query::new().types(RecordType::ALL);
    let owned: Vec<_> = Replay::open(dir.path(), &query)
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let mut replay = Replay::open(dir.path(), &query).unwrap();
    let mut viewed = Vec::new();
    while let Some(v) = replay.next_view() {
        viewed.push(v.unwrap().into_owned());
    }
    assert_eq!(viewed, owned);
    let types: std::collections::BTreeSet<_> =
        owned.iter().filter_map(|r| r.record_type()).collect();
    for t in [
        RecordType::Event,
        RecordType::Dictionary,
        RecordType::Accounting,
        RecordType::Policy,
    ] {
        assert!(types.contains(&t), "the log holds a {t} record");
    }
}
