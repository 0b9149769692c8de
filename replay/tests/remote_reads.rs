//! A shipped log read where it lies: a replay of one second fetches a bounded number of
//! bytes whatever the log's length (counted by the reader of shipped logs, which fetches
//! by range requests), and a replay and a state at a time return what the same reads of
//! the local log return. (A state's bytes are printed, not bounded: it rebuilds the
//! knowledge base from every commit before the time.)
#![expect(clippy::unwrap_used, reason = "tests fail loudly on any error")]

use std::path::Path;
use std::sync::Arc;

use blackbox::kb::{Conditions, Provenance};
use blackbox::log::LogOptions;
use blackbox::{Config, Event, ManualClock, Recorder};
use blackbox_replay::{Order, Query, Replay, state_at};
use blackbox_ship::{ShipOptions, install_url_reader, opened_remote_log, ship};
use serde_json::json;

const T0: u64 = 1_700_000_000_000_000_000;
const MS: u64 = 1_000_000;
const S: u64 = 1_000 * MS;

/// Records `seconds` seconds of a robot: an event every millisecond, a working-memory
/// change every 100 ms, a fact each second for the first three (citing the event before
/// it), a checkpoint every 5 s and an accounting record (whose watermark closes a read
/// by time) every second; small segments, so that the log has many.
fn record(dir: &Path, seconds: u64) {
    let clock = ManualClock::new(T0);
    let rec = Recorder::open(
        dir,
        Config::new()
            .clock(Arc::new(clock.clone()))
            .log_options(
                LogOptions::new()
                    .segment_bytes_max(64 << 10)
                    .block_bytes_max(4 << 10),
            )
            .checkpoint_interval_ns(Some(5 * S))
            .accounting_interval_ns(S),
    )
    .unwrap();
    let kb = rec.kb().unwrap();
    for i in 0..seconds * 1_000 {
        clock.set_ns(T0 + i * MS);
        let values = [("ax", (i % 17) as f64)];
        let event = Event::new("sensor.imu").values(&values);
        if i % 1_000 == 999 && i < 3_000 {
            let seq = rec.record_evidence(&event).unwrap();
            kb.assert(
                &format!("k{}", i / 1_000 % 3),
                json!(i),
                0.9,
                &Conditions::new(),
                Provenance::new([seq]),
            )
            .unwrap();
        } else {
            rec.record(&event).unwrap();
        }
        if i % 100 == 0 {
            rec.working().set("pose", json!(i)).unwrap();
        }
    }
    rec.close().unwrap();
}

/// What one length of log costs to read remotely.
struct Cost {
    shipped: u64,
    /// The largest shipped segment.
    segment_max: u64,
    /// A second in log order, and in the order things happened: both read on past the
    /// second until an accounting record's watermark proves that no event written
    /// later belongs in it.
    log_order: u64,
    happened: u64,
    state: u64,
}

/// Records a log of `seconds`, ships it once per read (so each read's bytes are
/// counted alone), and reads one second in its middle and the state at its middle,
/// remotely and locally.
fn cost(seconds: u64) -> Cost {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    record(&log, seconds);
    let store = |name: &str| {
        let url = format!("file://{}", dir.path().join(name).display());
        let report = ship(&log, &url, &ShipOptions::default()).unwrap();
        (url, report)
    };
    let (log_order_url, report) = store("log-order");
    let (happened_url, _) = store("happened");
    let (state_url, _) = store("state");
    let shipped: u64 = report.segments.iter().map(|s| s.bytes).sum();
    let segment_max = report.segments.iter().map(|s| s.bytes).max().unwrap();
    assert!(
        report.segments.len() >= 10,
        "{} segments",
        report.segments.len()
    );

    let middle = T0 + seconds / 2 * S;
    let second = Query::new().since(middle).until(middle + S);
    let seqs = |dir: &str, query: &Query| -> Vec<u64> {
        Replay::open(dir, query)
            .unwrap()
            .map(|r| r.unwrap().seq)
            .collect()
    };
    for (url, query) in [
        (&log_order_url, second.clone().order(Order::Log)),
        (&happened_url, second.clone()),
    ] {
        let local = seqs(log.to_str().unwrap(), &query);
        assert!(local.len() > 1_000, "{} records in the second", local.len());
        assert_eq!(
            seqs(url, &query),
            local,
            "the remote replay is the local one"
        );
    }
    let at = middle + 300 * MS;
    assert_eq!(
        state_at(Path::new(&state_url), at, None).unwrap().to_json(),
        state_at(&log, at, None).unwrap().to_json(),
        "the remote state is the local one"
    );
    let fetched = |url: &str| opened_remote_log(url).unwrap().bytes_fetched();
    Cost {
        shipped,
        segment_max,
        log_order: fetched(&log_order_url),
        happened: fetched(&happened_url),
        state: fetched(&state_url),
    }
}

#[test]
fn a_remote_second_fetches_bounded_bytes_whatever_the_logs_length() {
    install_url_reader();
    let short = cost(20);
    let long = cost(80);
    for (name, c) in [("20 s", &short), ("80 s", &long)] {
        eprintln!(
            "{name}: shipped {} bytes (segments up to {}); a second fetched {} in log order, {} as it happened; state fetched {}",
            c.shipped, c.segment_max, c.log_order, c.happened, c.state
        );
    }
    assert!(long.shipped > 3 * short.shipped);
    // A second fetches the segments it spans (the manifest finds them) and those up to
    // the accounting record whose watermark closes it (it reads on for events written
    // late), whatever the log's length: never more than ten segments' bytes, under a
    // quarter of the long log.
    for c in [&short, &long] {
        for fetched in [c.log_order, c.happened] {
            assert!(
                fetched <= 10 * c.segment_max,
                "{fetched} bytes for a second, segments of up to {}",
                c.segment_max
            );
        }
    }
    assert!(
        long.happened * 4 < long.shipped && long.log_order * 4 < long.shipped,
        "{} and {} of {}",
        long.log_order,
        long.happened,
        long.shipped
    );
}
