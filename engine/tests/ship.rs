//! The recorder's shipper (`Config::ship`): sealed segments shipped from a thread of
//! the recorder's own, and a log under a disk budget that prunes only what the store
//! holds. The oracle is the store's manifest, read as JSON (FORMAT.md, "Shipping
//! manifest"), and the store's own verification.

#![expect(clippy::unwrap_used, reason = "tests fail loudly on any error")]

use std::path::Path;
use std::time::{Duration, Instant};

use blackbox::log::retention::{PRUNE_RECORD_TYPE, REASON_SHIPPED, REASON_UNSHIPPED};
use blackbox::{Config, Event, LogOptions, Recorder, Ship, ShipStatus};
use blackbox_log::{LogReader, PruneRecord, Retention, Seq};
use serde_json::Value;

/// Waits until the shipper has finished a pass that began after this call.
fn next_pass(rec: &Recorder) -> ShipStatus {
    let passes = rec.ship_status().unwrap().passes;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let status = rec.ship_status().unwrap();
        // Two more: the one under way may have begun before.
        if status.passes >= passes + 2 {
            return status;
        }
        assert!(
            Instant::now() < deadline,
            "no shipping pass in 60 s: {status:?}"
        );
        std::thread::yield_now();
    }
}

fn config(store: &Path) -> Config {
    Config::new()
        .log_options(LogOptions::new().segment_bytes_max(64 << 10))
        .retention(Retention {
            max_bytes: Some(512 << 10),
            ..Retention::default()
        })
        .ship(Ship::to(store.display().to_string()).interval(Duration::from_millis(5)))
}

fn record_some(rec: &Recorder, from: u32, n: u32) {
    for i in from..from + n {
        let payload = format!("{{\"i\":{i},\"pad\":\"{}\"}}", "x".repeat(100));
        rec.record(&Event::new("robot.state").json(&payload))
            .unwrap();
    }
    rec.sync().unwrap();
}

/// The bytes of the log's segment files.
fn bytes_on_disk(dir: &Path) -> u64 {
    blackbox_log::list_segments(dir)
        .unwrap()
        .iter()
        .map(|s| std::fs::metadata(&s.path).unwrap().len())
        .sum()
}

/// The prune records of the log in `dir`.
fn prunes(dir: &Path) -> Vec<PruneRecord> {
    let reader = LogReader::open(dir).unwrap();
    reader
        .records(Seq(0)..)
        .unwrap()
        .map(Result::unwrap)
        .filter(|r| r.record_type() == PRUNE_RECORD_TYPE)
        .map(|r| PruneRecord::decode(r.payload()).unwrap())
        .collect()
}

/// Guards pruning after shipping (issue 17): a recorder over its budget prunes, while
/// it ships, only segments that the store's manifest lists, and every prune record
/// says they were shipped; the store verifies as a whole log from seq 0.
#[test]
fn a_budgeted_log_prunes_only_what_its_shipper_shipped() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, store) = (tmp.path().join("log"), tmp.path().join("store"));
    let rec = Recorder::open(&dir, config(&store)).unwrap();
    for round in 0..20 {
        record_some(&rec, round * 500, 500);
        next_pass(&rec);
    }
    rec.close().unwrap();
    let status = rec.ship_status().unwrap();
    assert_eq!(status.last_error, None);

    let manifest: Value =
        serde_json::from_slice(&std::fs::read(store.join("manifest.json")).unwrap()).unwrap();
    let shipped_through = manifest["segments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["last_seq"].as_u64().unwrap())
        .max()
        .unwrap();
    assert_eq!(manifest["log"]["first_seq"], 0);
    assert_eq!(status.shipped_through, Some(shipped_through));
    let prunes = prunes(&dir);
    assert!(prunes.len() > 3, "the budget pruned {} times", prunes.len());
    for p in &prunes {
        assert!(p.last_seq <= shipped_through, "{p:?}");
        assert_eq!(p.reasons & REASON_SHIPPED, REASON_SHIPPED, "{p:?}");
        assert_eq!(p.reasons & REASON_UNSHIPPED, 0, "{p:?}");
    }
    let report = blackbox_ship::verify_url(&store.display().to_string(), None, None).unwrap();
    assert_eq!(report.log.records, shipped_through + 1);
}

/// Guards the hold at every prune (issue 17): shipping works for a while, then the
/// store breaks (its manifest replaced by bytes no pass reads); every prune after that
/// removes only seqs shipped before it broke, however far over its budget the log goes.
#[test]
fn a_log_prunes_nothing_past_what_was_shipped_before_the_store_broke() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, store) = (tmp.path().join("log"), tmp.path().join("store"));
    let rec = Recorder::open(&dir, config(&store)).unwrap();
    for round in 0..5 {
        record_some(&rec, round * 500, 500);
        next_pass(&rec);
    }
    std::fs::write(store.join("manifest.json"), b"not a manifest").unwrap();
    let broken = next_pass(&rec);
    assert!(broken.last_error.is_some(), "{broken:?}");
    let shipped = broken.shipped_through.unwrap();
    for round in 5..25 {
        record_some(&rec, round * 500, 500);
    }
    rec.close().unwrap();
    let prunes = prunes(&dir);
    assert!(!prunes.is_empty());
    for p in &prunes {
        assert!(p.last_seq <= shipped, "pruned {p:?} past seq {shipped}");
    }
    let bytes = bytes_on_disk(&dir);
    assert!(bytes > 2 * (512 << 10), "{bytes}");
}

/// Guards the hold when shipping fails (issue 17): a store whose manifest cannot be
/// read fails every pass, the status says why, and the log, far over its budget, prunes
/// nothing.
#[test]
fn a_log_whose_shipping_fails_keeps_every_segment() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, store) = (tmp.path().join("log"), tmp.path().join("store"));
    std::fs::create_dir_all(&store).unwrap();
    std::fs::write(store.join("manifest.json"), b"not a manifest").unwrap();
    let rec = Recorder::open(&dir, config(&store)).unwrap();
    for round in 0..20 {
        record_some(&rec, round * 500, 500);
    }
    let status = next_pass(&rec);
    assert!(
        status
            .last_error
            .as_deref()
            .unwrap_or_default()
            .contains("manifest"),
        "{status:?}"
    );
    rec.close().unwrap();
    assert!(prunes(&dir).is_empty());
    let bytes = bytes_on_disk(&dir);
    assert!(bytes > 2 * (512 << 10), "{bytes}");
}

/// Guards a URL the shipper cannot use (issue 17): the recorder does not open, and says
/// why in a sentence naming it.
#[test]
fn a_recorder_with_an_unusable_ship_url_does_not_open() {
    let tmp = tempfile::tempdir().unwrap();
    let err = Recorder::open(
        tmp.path().join("log"),
        Config::new().ship(Ship::to("ftp://example.com/logs")),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("ftp://example.com/logs"), "{err}");
}

/// Guards what counts as shipped (issue 17): a copy of a log (a cloned robot image, a
/// restored backup) shipping to the store its original ships further to counts as
/// shipped only its own segments that the store's manifest holds, never the manifest's
/// end: it prunes nothing it wrote after the copy.
#[test]
fn a_copy_of_a_log_counts_as_shipped_only_its_own_segments() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b, store) = (
        tmp.path().join("a"),
        tmp.path().join("b"),
        tmp.path().join("store"),
    );
    let rec = Recorder::open(
        &a,
        Config::new().log_options(LogOptions::new().segment_bytes_max(64 << 10)),
    )
    .unwrap();
    record_some(&rec, 0, 2_000);
    let copied_through = rec.close().unwrap().unwrap().0;
    std::fs::create_dir(&b).unwrap();
    for entry in std::fs::read_dir(&a).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() {
            std::fs::copy(&path, b.join(path.file_name().unwrap())).unwrap();
        }
    }
    // The original ships far past the copy.
    let rec = Recorder::open(&a, config(&store)).unwrap();
    for round in 0..10 {
        record_some(&rec, 2_000 + round * 500, 500);
        next_pass(&rec);
    }
    rec.close().unwrap();
    // The copy, over its budget, ships to the same store.
    let rec = Recorder::open(&b, config(&store)).unwrap();
    // Its first passes find its copied segments in the manifest: shipped.
    let first = next_pass(&rec);
    assert_eq!(first.last_error, None, "{first:?}");
    assert!(first.shipped_through.is_some(), "{first:?}");
    for round in 0..20 {
        record_some(&rec, 2_000 + round * 500, 500);
    }
    rec.close().unwrap();
    let status = rec.ship_status().unwrap();
    assert!(
        status.shipped_through.is_none_or(|s| s <= copied_through),
        "{status:?}, copied through {copied_through}"
    );
    let prunes = prunes(&b);
    assert!(!prunes.is_empty(), "the copy's budget pruned nothing");
    for p in prunes {
        assert!(
            p.last_seq <= copied_through,
            "pruned {p:?} past the copy's seq {copied_through}"
        );
    }
}
