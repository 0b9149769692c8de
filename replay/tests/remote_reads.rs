//! A shipped log read where it lies: a replay of one second and a state at a time fetch
//! a bounded number of bytes whatever the log's length (counted by the reader of shipped
//! logs, which fetches by range requests), and return what the same reads of the local
//! log return.
#![expect(clippy::unwrap_used, reason = "tests fail loudly on any error")]

use std::path::Path;
use std::sync::Arc;

use blackbox::kb::{Conditions, Provenance};
use blackbox::log::LogOptions;
use blackbox::{Config, Event, ManualClock, Recorder};
use blackbox_replay::{Query, Replay, state_at};
use blackbox_ship::{ShipOptions, install_url_reader, opened_remote_log, ship};
use serde_json::json;

const T0: u64 = 1_700_000_000_000_000_000;
const MS: u64 = 1_000_000;
const S: u64 = 1_000 * MS;

/// Records `seconds` seconds of a robot: an event every millisecond, a working-memory
/// change every 100 ms, a fact every second (citing the event before it), a
/// checkpoint every 5 s; small segments, so that the log has many.
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
            .checkpoint_interval_ns(Some(5 * S)),
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
    replay: u64,
    state: u64,
}

/// Records a log of `seconds`, ships it twice (one store per read, so each read's
/// bytes are counted alone), and reads one second in its middle and the state at its
/// middle, remotely and locally.
fn cost(seconds: u64) -> Cost {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    record(&log, seconds);
    let url = |name: &str| format!("file://{}", dir.path().join(name).display());
    let (for_replay, for_state) = (url("replay-store"), url("state-store"));
    let report = ship(&log, &for_replay, &ShipOptions::default()).unwrap();
    ship(&log, &for_state, &ShipOptions::default()).unwrap();
    let shipped: u64 = report.segments.iter().map(|s| s.bytes).sum();
    assert!(
        report.segments.len() >= 10,
        "{} segments",
        report.segments.len()
    );

    let middle = T0 + seconds / 2 * S;
    let query = Query::new().since(middle).until(middle + S);
    let seqs = |dir: &str| -> Vec<u64> {
        Replay::open(dir, &query)
            .unwrap()
            .map(|r| r.unwrap().seq)
            .collect()
    };
    let local = seqs(log.to_str().unwrap());
    assert!(local.len() > 1_000, "{} records in the second", local.len());
    assert_eq!(
        seqs(&for_replay),
        local,
        "the remote replay is the local one"
    );
    let at = middle + 300 * MS;
    assert_eq!(
        state_at(Path::new(&for_state), at, None).unwrap().to_json(),
        state_at(&log, at, None).unwrap().to_json(),
        "the remote state is the local one"
    );
    Cost {
        shipped,
        replay: opened_remote_log(&for_replay).unwrap().bytes_fetched(),
        state: opened_remote_log(&for_state).unwrap().bytes_fetched(),
    }
}

#[test]
fn a_remote_second_fetches_bounded_bytes_whatever_the_logs_length() {
    install_url_reader();
    let short = cost(20);
    let long = cost(80);
    eprintln!(
        "shipped {} / {} bytes; replay of 1 s fetched {} / {}; state fetched {} / {}",
        short.shipped, long.shipped, short.replay, long.replay, short.state, long.state
    );
    assert!(long.shipped > 3 * short.shipped);
    // A log four times as long costs a second's replay about the same: the segments
    // the second and its late events span (the manifest finds them), not the log.
    assert!(
        long.replay * 2 < short.replay * 3,
        "{} bytes for the long log's second, {} for the short's",
        long.replay,
        short.replay
    );
    assert!(long.replay * 4 < long.shipped);
}
