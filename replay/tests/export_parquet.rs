//! `blackbox export --format parquet` read back by the readers users have: pyarrow,
//! pandas and DuckDB (in the Python environment of `scripts/python-env`). The oracles
//! are what each test recorded and what `blackbox stats` and `blackbox replay` say of
//! the log, never the exporter.

#![expect(clippy::unwrap_used, reason = "tests fail loudly on any error")]

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use blackbox::{Config, Event, ManualClock, Policy, Recorder, Sampling, Tier};
use common::{blackbox, fails, ok, replay_json, s};
use serde_json::{Value, json};

const SEC: u64 = 1_000_000_000;
const MS: u64 = 1_000_000;
/// A start with nanoseconds that a float or a microsecond clock would lose.
const T0: u64 = 1_700_000_000 * SEC + 123_456_789;

/// What the mixed log holds, as this test recorded it.
struct Model {
    /// Per exported kind, the events recorded (= `seen`).
    recorded: BTreeMap<&'static str, u64>,
    /// Per exported kind, the rows the policy keeps.
    rows: BTreeMap<&'static str, u64>,
    /// Events of the summarized kind.
    summarized: u64,
}

/// Records events of every payload type (JSON object, JSON number, raw bytes, none, text
/// recorded as JSON that is not JSON), a sampled kind, a summarized kind and a dropped
/// kind, under a manual clock.
fn mixed_log(dir: &Path) -> Model {
    let clock = ManualClock::new(T0);
    let policy = Policy::builder()
        .rule("act.*", Tier::Full)
        .rule("traj.*", Tier::Sample(Sampling::Every(4)))
        .rule("sensor.*", Tier::Summary { window_ns: SEC })
        .rule("debug.*", Tier::Drop)
        .build()
        .unwrap();
    let config = Config::new().clock(Arc::new(clock.clone())).policy(policy);
    let rec = Recorder::open(dir, config).unwrap();
    rec.record(
        &Event::new("act.json")
            .json(r#"{"object":"cup","n":[1,2]}"#)
            .source("arm")
            .values(&[("force", 2.5)])
            .event_time_ns(T0 - 7),
    )
    .unwrap();
    clock.advance_ns(1);
    rec.record(&Event::new("act.num").json("42")).unwrap();
    rec.record(&Event::new("act.raw").raw(&[0, 255, 1, 10]))
        .unwrap();
    rec.record(&Event::new("act.none")).unwrap();
    rec.record(&Event::new("act.bad").json("{not json"))
        .unwrap();
    for i in 0..40u32 {
        clock.advance_ns(10 * MS);
        rec.record(&Event::new("traj.arm").values(&[("q", f64::from(i))]))
            .unwrap();
    }
    for i in 0..30u32 {
        clock.advance_ns(100 * MS);
        rec.record(&Event::new("sensor.imu").values(&[("temp", f64::from(i))]))
            .unwrap();
        rec.record(&Event::new("debug.tick").values(&[("tick", f64::from(i))]))
            .unwrap();
    }
    rec.close().unwrap();
    let mut recorded = BTreeMap::new();
    let mut rows = BTreeMap::new();
    for kind in ["act.json", "act.num", "act.raw", "act.none", "act.bad"] {
        recorded.insert(kind, 1);
        rows.insert(kind, 1);
    }
    recorded.insert("traj.arm", 40);
    // Every 4th of 40: events 0, 4, ..., 36.
    rows.insert("traj.arm", 10);
    Model {
        recorded,
        rows,
        summarized: 30,
    }
}

/// `blackbox stats --json`'s `seen` per kind.
fn seen(dir: &Path) -> BTreeMap<String, u64> {
    let stats: Value =
        serde_json::from_str(&ok(&blackbox(&["stats", "--dir", s(dir), "--json"]))).unwrap();
    stats["kinds"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, c)| (k.clone(), c["seen"].as_u64().unwrap()))
        .collect()
}

fn read(events: &Path, summaries: Option<&Path>) -> Value {
    let out = match summaries {
        Some(sum) => common::python::run("parquet_read.py", &[&events, &sum]),
        None => common::python::run("parquet_read.py", &[&events]),
    };
    serde_json::from_str(&out).unwrap()
}

/// Guards the Parquet export's types and rows (issue 14): pyarrow and pandas read every
/// exported event once, with seq as uint64 and every time as timestamp[ns, UTC] to the
/// nanosecond (never a float), each payload type in its column, the values in their
/// float64 columns, weights that add up to `seen` per kind, and every summary record
/// with its statistics in the summaries file.
#[test]
fn pyarrow_and_pandas_read_every_event_and_summary_with_exact_types() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    let model = mixed_log(&dir);
    let events = tmp.path().join("events.parquet");
    let sums = tmp.path().join("summaries.parquet");
    ok(&blackbox(&[
        "export",
        "--dir",
        s(&dir),
        "--format",
        "parquet",
        "--out",
        s(&events),
        "--summaries",
        s(&sums),
    ]));
    let got = read(&events, Some(&sums));

    // Types, as pyarrow and pandas give them.
    let arrow = &got["arrow_types"];
    assert_eq!(arrow["seq"], "uint64");
    for t in ["ts", "written", "event_time"] {
        assert_eq!(arrow[t], "timestamp[ns, tz=UTC]", "{t}");
        assert_eq!(got["pandas_dtypes"][t], "datetime64[ns, UTC]", "{t}");
    }
    assert_eq!(got["pandas_dtypes"]["seq"], "uint64");
    assert_eq!(arrow["weight"], "double");
    for t in ["kind", "source", "tier"] {
        assert_eq!(
            arrow[t], "dictionary<values=string, indices=int32, ordered=0>",
            "{t}"
        );
    }
    assert_eq!(arrow["payload_json"], "string");
    assert_eq!(arrow["payload_raw"], "binary");
    assert_eq!(arrow["hash"], "fixed_size_binary[32]");
    assert_eq!(arrow["value_q"], "double");
    assert_eq!(arrow["value_force"], "double");
    // The values of the summarized and dropped kinds, whose events are left out, have
    // no column.
    assert!(arrow.get("value_temp").is_none() && arrow.get("value_tick").is_none());

    // Rows: per kind, what the policy kept of what was recorded.
    let rows = got["events"].as_array().unwrap();
    let expected_rows: u64 = model.rows.values().sum();
    assert_eq!(got["rows"], json!(expected_rows));
    assert_eq!(rows.len() as u64, expected_rows);
    let mut per_kind: BTreeMap<String, (u64, f64)> = BTreeMap::new();
    for r in rows {
        let k = per_kind
            .entry(r["kind"].as_str().unwrap().to_owned())
            .or_default();
        k.0 += 1;
        k.1 += r["weight"].as_f64().unwrap();
    }
    let seen = seen(&dir);
    for (kind, n) in &model.rows {
        let (got_rows, weight) = per_kind[*kind];
        assert_eq!(got_rows, *n, "{kind}");
        assert_eq!(
            seen[*kind], model.recorded[kind],
            "{kind}: the recorder's own count"
        );
        assert_eq!(weight, seen[*kind] as f64, "{kind}: weights add up to seen");
    }
    assert_eq!(per_kind.len(), model.rows.len(), "{per_kind:?}");

    // Each row is the record `replay` shows: seq, times to the nanosecond, hash.
    let replayed: BTreeMap<u64, Value> = replay_json(&dir, &["--type", "event"])
        .into_iter()
        .map(|r| (r["seq"].as_u64().unwrap(), r))
        .collect();
    for r in rows {
        let seq = r["seq"].as_u64().unwrap();
        let want = &replayed[&seq];
        assert_eq!(r["kind"], want["kind"]);
        assert_eq!(r["ts_ns"], want["ts_ns"], "seq {seq}");
        assert_eq!(r["written_ns"], want["written_ns"], "seq {seq}");
        assert_eq!(r["event_time_ns"], want["event_time_ns"], "seq {seq}");
        assert_eq!(r["hash"], want["hash"], "seq {seq}");
        assert_eq!(r["tier"], want["tier"], "seq {seq}");
    }
    let by_kind = |kind: &str| rows.iter().find(|r| r["kind"] == kind).unwrap();
    // The first event, at the clock's start: its nanoseconds intact.
    let first = by_kind("act.json");
    assert_eq!(first["ts_ns"], json!(T0));
    assert_eq!(first["event_time_ns"], json!(T0 - 7));
    assert_eq!(first["source"], "arm");
    assert_eq!(first["values"], json!({"force": 2.5}));
    let payload: Value = serde_json::from_str(first["payload_json"].as_str().unwrap()).unwrap();
    assert_eq!(payload, json!({"object": "cup", "n": [1, 2]}));
    assert_eq!(first["payload_raw"], Value::Null);
    assert_eq!(by_kind("act.num")["payload_json"], "42");
    assert_eq!(by_kind("act.raw")["payload_raw"], "00ff010a");
    assert_eq!(by_kind("act.raw")["payload_json"], Value::Null);
    let none = by_kind("act.none");
    assert_eq!(
        (&none["payload_json"], &none["payload_raw"]),
        (&Value::Null, &Value::Null)
    );
    // Text recorded as JSON that is not JSON: its bytes, as the JSONL export's raw hex.
    assert_eq!(
        by_kind("act.bad")["payload_raw"],
        json!(
            b"{not json"
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect::<String>()
        )
    );
    let q: Vec<f64> = rows
        .iter()
        .filter(|r| r["kind"] == "traj.arm")
        .map(|r| r["values"]["q"].as_f64().unwrap())
        .collect();
    assert_eq!(q, [0.0, 4.0, 8.0, 12.0, 16.0, 20.0, 24.0, 28.0, 32.0, 36.0]);

    // Row groups carry statistics on seq, time and kind.
    for col in ["seq", "ts", "kind"] {
        assert!(
            got["statistics"][col]
                .as_array()
                .is_some_and(|a| !a.is_empty()),
            "{col}: {}",
            got["statistics"]
        );
    }

    // Every summary record, with its window, count and statistics.
    let want: Vec<Value> = replay_json(&dir, &["--type", "summary"]);
    let sums = got["summaries"].as_array().unwrap();
    assert_eq!(sums.len(), want.len());
    assert!(!want.is_empty());
    let mut counted = 0;
    for (g, w) in sums.iter().zip(&want) {
        assert_eq!(g["seq"], w["seq"]);
        assert_eq!(g["kind"], w["kind"]);
        assert_eq!(g["window_start_ns"], w["window_start_ns"]);
        assert_eq!(g["window_end_ns"], w["window_end_ns"]);
        assert_eq!(g["count"], w["count"]);
        assert_eq!(g["values"], w["values"], "seq {}", w["seq"]);
        counted += g["count"].as_u64().unwrap();
    }
    assert_eq!(
        counted, model.summarized,
        "every summarized event is in a window"
    );
    for t in ["written", "window_start", "window_end"] {
        assert_eq!(got["summaries_arrow_types"][t], "timestamp[ns, tz=UTC]");
    }
    assert_eq!(got["summaries_arrow_types"]["count_temp"], "uint64");
}

/// Guards the partitioned export (issue 14): `--partition kind` writes
/// `OUT/kind=<kind>/part-<seq>.parquet`, which DuckDB reads as one table with, per kind,
/// the rows `replay` shows and weights that add up to `seen`; its manifest checks, and
/// a stray file in the directory (which a reader would take rows from) fails the check.
#[test]
fn duckdb_reads_the_demo_partitioned_by_kind_as_one_table() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    ok(&blackbox(&["demo", "--dir", s(&dir), "--seed", "7"]));
    let out = tmp.path().join("by_kind");
    ok(&blackbox(&[
        "export",
        "--dir",
        s(&dir),
        "--format",
        "parquet",
        "--partition",
        "kind",
        "--out",
        s(&out),
    ]));
    let got: Value =
        serde_json::from_str(&common::python::run("parquet_duckdb.py", &[&out])).unwrap();

    // The oracle: the events `replay` shows, less the kinds the recorder summarized or
    // dropped (an export leaves them out), and `seen` from `stats`.
    let stats: Value =
        serde_json::from_str(&ok(&blackbox(&["stats", "--dir", s(&dir), "--json"]))).unwrap();
    let unweighted = |k: &str| {
        let c = &stats["kinds"][k];
        c["summarized"].as_u64().unwrap() > 0 || c["dropped"].as_u64().unwrap() > 0
    };
    let mut want: BTreeMap<String, u64> = BTreeMap::new();
    for r in replay_json(&dir, &["--type", "event"]) {
        let kind = r["kind"].as_str().unwrap();
        if !unweighted(kind) {
            *want.entry(kind.to_owned()).or_default() += 1;
        }
    }
    assert!(want.len() > 3, "{want:?}");
    let kinds = got["kinds"].as_object().unwrap();
    let found: BTreeMap<String, u64> = kinds
        .iter()
        .map(|(k, v)| (k.clone(), v["rows"].as_u64().unwrap()))
        .collect();
    assert_eq!(found, want);
    for (kind, v) in kinds {
        let seen = stats["kinds"][kind]["seen"].as_u64().unwrap();
        assert_eq!(v["weight_sum"].as_f64().unwrap(), seen as f64, "{kind}");
    }
    assert_eq!(got["types"]["seq"], "UBIGINT");
    assert_eq!(got["types"]["ts"], "TIMESTAMPTZ_NS");
    // Each kind's one file is named by the seq of its first row.
    let first_seq = |kind: &str| {
        replay_json(&dir, &["--type", "event", "--kind", kind])[0]["seq"]
            .as_u64()
            .unwrap()
    };
    for kind in want.keys() {
        let file = format!("kind={kind}/part-{}.parquet", first_seq(kind));
        assert!(out.join(file).is_file(), "{kind}");
    }

    // The manifest's blake3 of the directory is that of its listing, as b3sum prints
    // it, in path order (GUIDE.md).
    let mut listing: Vec<String> = want
        .keys()
        .map(|kind| {
            let rel = format!("kind={kind}/part-{}.parquet", first_seq(kind));
            let hash = blake3::hash(&std::fs::read(out.join(&rel)).unwrap());
            format!("{}  {rel}\n", hash.to_hex())
        })
        .collect();
    listing.sort_by(|a, b| a[66..].cmp(&b[66..]));
    let manifest: Value = serde_json::from_str(
        &std::fs::read_to_string(tmp.path().join("by_kind.manifest.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        manifest["file"]["blake3"],
        blake3::hash(listing.concat().as_bytes()).to_hex().as_str()
    );

    ok(&blackbox(&["export", "--check", s(&out)]));
    ok(&blackbox(&["export", "--check", s(&out), "--dir", s(&dir)]));
    std::fs::write(out.join("kind=action.grasp/stray.parquet"), b"PAR1").unwrap();
    let err = fails(&blackbox(&["export", "--check", s(&out)]));
    assert!(err.contains("does not list"), "{err}");
}

/// Guards a partitioned export longer than a batch (issue 14): with batches handed to
/// the encoder and the partitions' memory bounded along the way, every kind's file
/// holds exactly its events, in seq order, as pyarrow reads them.
#[test]
fn a_partitioned_export_of_many_batches_holds_every_event_once() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    let kinds = ["a.x", "b.y", "c-z_w.v"];
    let per_kind = 4000u64;
    let mut input = String::new();
    for i in 0..per_kind {
        for k in kinds {
            input.push_str(&format!(
                "{{\"kind\":\"{k}\",\"payload\":{{\"i\":{i}}},\"values\":{{\"i\":{i}}}}}\n"
            ));
        }
    }
    ok(&common::record(&dir, &input, &[]));
    let out = tmp.path().join("parts");
    ok(&blackbox(&[
        "export",
        "--dir",
        s(&dir),
        "--format",
        "parquet",
        "--partition",
        "kind",
        "--out",
        s(&out),
    ]));
    for kind in kinds {
        // One file a kind.
        let files: Vec<_> = std::fs::read_dir(out.join(format!("kind={kind}")))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        let [file] = files.as_slice() else {
            panic!("{kind}: {files:?}")
        };
        let got = read(file, None);
        let events = got["events"].as_array().unwrap();
        let i: Vec<f64> = events
            .iter()
            .map(|e| e["values"]["i"].as_f64().unwrap())
            .collect();
        let want: Vec<f64> = (0..per_kind).map(|n| n as f64).collect();
        assert_eq!(i, want, "{kind}");
        let seqs: Vec<u64> = events.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
        assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{kind}: seq order");
    }
    ok(&blackbox(&["export", "--check", s(&out), "--dir", s(&dir)]));
}

/// Guards `export --check` on a Parquet file (issue 14): it matches its manifest and
/// derives again from the log; a byte changed in the file fails the check.
#[test]
fn a_parquet_export_checks_against_its_manifest_and_its_log() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    mixed_log(&dir);
    let out = tmp.path().join("e.parquet");
    let sums = tmp.path().join("s.parquet");
    ok(&blackbox(&[
        "export",
        "--dir",
        s(&dir),
        "--format",
        "parquet",
        "--out",
        s(&out),
        "--summaries",
        s(&sums),
    ]));
    let manifest: Value = serde_json::from_str(
        &std::fs::read_to_string(tmp.path().join("e.parquet.manifest.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(manifest["format"], "parquet");
    let files = manifest["files"].as_array().unwrap();
    let roles: Vec<(&str, &str)> = files
        .iter()
        .map(|f| (f["path"].as_str().unwrap(), f["role"].as_str().unwrap()))
        .collect();
    assert_eq!(roles, [("e.parquet", "events"), ("s.parquet", "summaries")]);
    let hash = blake3::hash(&std::fs::read(&out).unwrap())
        .to_hex()
        .to_string();
    assert_eq!(files[0]["blake3"], hash);
    assert_eq!(manifest["file"]["blake3"], hash);

    ok(&blackbox(&["export", "--check", s(&out)]));
    ok(&blackbox(&["export", "--check", s(&out), "--dir", s(&dir)]));

    // A file edited together with its manifest passes the plain check; deriving it
    // again from the log catches it.
    let original = std::fs::read(&out).unwrap();
    let mut edited = original.clone();
    // The first data page starts right after the 4-byte magic.
    edited[8] ^= 1;
    std::fs::write(&out, &edited).unwrap();
    let edited_hash = blake3::hash(&edited).to_hex().to_string();
    let mut forged = manifest.clone();
    forged["file"]["blake3"] = json!(edited_hash);
    forged["files"][0]["blake3"] = json!(edited_hash);
    let manifest_path = tmp.path().join("e.parquet.manifest.json");
    std::fs::write(&manifest_path, serde_json::to_vec_pretty(&forged).unwrap()).unwrap();
    ok(&blackbox(&["export", "--check", s(&out)]));
    let err = fails(&blackbox(&["export", "--check", s(&out), "--dir", s(&dir)]));
    assert!(err.contains("again gives"), "{err}");
    std::fs::write(&out, &original).unwrap();
    std::fs::write(
        &manifest_path,
        serde_json::to_vec_pretty(&manifest).unwrap(),
    )
    .unwrap();
    ok(&blackbox(&["export", "--check", s(&out)]));

    let mut bytes = std::fs::read(&sums).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 1;
    std::fs::write(&sums, &bytes).unwrap();
    let err = fails(&blackbox(&["export", "--check", s(&out)]));
    assert!(err.contains("s.parquet") && err.contains("blake3"), "{err}");
}

/// Guards the Parquet options' errors: one sentence each, nothing written.
#[test]
fn parquet_options_are_refused_where_they_cannot_apply() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    mixed_log(&dir);
    let err = fails(&blackbox(&[
        "export",
        "--dir",
        s(&dir),
        "--format",
        "parquet",
        "--out",
        "-",
    ]));
    assert!(err.contains("not to stdout"), "{err}");
    let out = tmp.path().join("x");
    let err = fails(&blackbox(&[
        "export",
        "--dir",
        s(&dir),
        "--partition",
        "kind",
        "--out",
        s(&out),
    ]));
    assert!(err.contains("--format parquet"), "{err}");
    std::fs::create_dir(&out).unwrap();
    std::fs::write(out.join("mine.txt"), b"keep").unwrap();
    let err = fails(&blackbox(&[
        "export",
        "--dir",
        s(&dir),
        "--format",
        "parquet",
        "--partition",
        "kind",
        "--out",
        s(&out),
    ]));
    assert!(err.contains("not empty"), "{err}");
    assert_eq!(std::fs::read(out.join("mine.txt")).unwrap(), b"keep");
    let leftovers: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n.to_string_lossy().starts_with(".x"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

/// A summaries file named like the events file, its manifest, or inside the partition
/// directory is refused before anything is written (it would overwrite the events);
/// `--compression` outside MCAP is refused rather than ignored.
#[test]
fn a_summaries_file_that_would_overwrite_the_export_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    mixed_log(&dir);
    let out = tmp.path().join("same.parquet");
    let manifest = tmp.path().join("same.parquet.manifest.json");
    let by_kind = tmp.path().join("by_kind");
    let inside = by_kind.join("s.parquet");
    let cases: [(&Path, &[&str]); 3] = [
        (&out, &[]),
        (&manifest, &[]),
        (&inside, &["--partition", "kind"]),
    ];
    for (summaries, extra) in cases {
        let target = if extra.is_empty() { &out } else { &by_kind };
        let mut args = vec![
            "export",
            "--dir",
            s(&dir),
            "--format",
            "parquet",
            "--out",
            s(target),
            "--summaries",
            s(summaries),
        ];
        args.extend_from_slice(extra);
        let err = fails(&blackbox(&args));
        assert!(err.contains("would overwrite the export"), "{err}");
        assert!(!out.exists() && !by_kind.exists(), "something was written");
    }
    let err = fails(&blackbox(&[
        "export",
        "--dir",
        s(&dir),
        "--format",
        "parquet",
        "--compression",
        "lz4",
        "--out",
        s(&out),
    ]));
    assert!(err.contains("--compression is an MCAP option"), "{err}");
}

/// Guards the exports written before partition files were named by their first seq
/// (issue 17): such an export (`"partition": "kind"`, each kind's one file
/// `part-0.parquet`) still checks against its manifest and against its log. The old
/// export is made here from a new one by hand: the files renamed, the manifest's paths
/// and its listing's blake3 (GUIDE.md) written as the old exporter wrote them.
#[test]
fn an_export_partitioned_by_kind_before_files_were_named_by_seq_still_checks() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    let input: String = (0..30)
        .map(|i| format!("{{\"kind\":\"k{}\",\"values\":{{\"i\":{i}}}}}\n", i % 3))
        .collect();
    ok(&common::record(&dir, &input, &[]));
    let out = tmp.path().join("old");
    ok(&blackbox(&[
        "export",
        "--dir",
        s(&dir),
        "--format",
        "parquet",
        "--partition",
        "kind",
        "--out",
        s(&out),
    ]));
    let manifest_path = tmp.path().join("old.manifest.json");
    let mut m: Value =
        serde_json::from_str(&std::fs::read_to_string(&manifest_path).unwrap()).unwrap();
    m["parquet"] = json!({"partition": "kind"});
    let mut lines = Vec::new();
    for f in m["files"].as_array_mut().unwrap() {
        let path = std::path::PathBuf::from(f["path"].as_str().unwrap());
        let old = path.with_file_name("part-0.parquet");
        std::fs::rename(tmp.path().join(&path), tmp.path().join(&old)).unwrap();
        let under = old.strip_prefix("old").unwrap().display().to_string();
        lines.push(format!("{}  {under}\n", f["blake3"].as_str().unwrap()));
        f["path"] = old.display().to_string().into();
        f.as_object_mut().unwrap().remove("date");
    }
    lines.sort_by(|a, b| a[66..].cmp(&b[66..]));
    m["file"]["blake3"] = blake3::hash(lines.concat().as_bytes())
        .to_hex()
        .as_str()
        .into();
    std::fs::write(&manifest_path, serde_json::to_vec_pretty(&m).unwrap()).unwrap();
    ok(&blackbox(&["export", "--check", s(&out)]));
    ok(&blackbox(&["export", "--check", s(&out), "--dir", s(&dir)]));
}
