//! `blackbox export --partition robot,date,kind --out s3://...`: two robots' logs
//! exported into one prefix of a real S3 API server (moto), queried there as one table
//! by DuckDB's own S3 support (scripts/python-duckdb-s3-requirements.txt). The oracle is what the test recorded: each event's robot,
//! kind and time (its UTC date by hand), never the exporter.
#![expect(clippy::unwrap_used, reason = "tests fail loudly on any error")]

mod common;
#[path = "../../ship/tests/common/moto.rs"]
mod moto;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::Arc;

use blackbox::{Config, Event, ManualClock, Recorder};
use common::{bin, fails, ok, s};
use moto::Moto;
use serde_json::Value;

const SEC: u64 = 1_000_000_000;
const MS: u64 = 1_000_000;
/// 2026-03-01T23:59:58Z (Python's datetime): two seconds before a UTC midnight.
const T0: u64 = 1_772_409_598 * SEC;

/// Runs `blackbox ARGS` with the environment an AWS tool reads to reach `moto`.
fn blackbox_s3(moto: &Moto, args: &[&str]) -> Output {
    let mut cmd = bin();
    cmd.args(args).stdin(Stdio::null());
    for (k, v) in moto.env() {
        cmd.env(k, v);
    }
    cmd.output().expect("run blackbox")
}

/// (robot, date, kind) -> (rows, first seq, last seq), as recorded.
type Groups = BTreeMap<(String, String, String), (u64, u64, u64)>;

/// Records `n` events, one every `step_ns` from `T0`, kinds taking turns, under a
/// manual clock; adds each to `model` under `robot`, with the date its time falls on.
fn record_across_midnight(dir: &Path, robot: &str, n: u32, step_ns: u64, model: &mut Groups) {
    let clock = ManualClock::new(T0);
    let rec = Recorder::open(dir, Config::new().clock(Arc::new(clock.clone()))).unwrap();
    let kinds = ["imu", "gps", "cmd.vel"];
    for i in 0..n {
        let kind = kinds[usize::try_from(i).unwrap() % kinds.len()];
        // Evidence is written like any event, and its seq comes back.
        let seq = rec
            .record_evidence(&Event::new(kind).values(&[("x", f64::from(i))]))
            .unwrap()
            .0;
        // Midnight is 2 s after T0.
        let date = if u64::from(i) * step_ns < 2 * SEC {
            "2026-03-01"
        } else {
            "2026-03-02"
        };
        model
            .entry((robot.to_owned(), date.to_owned(), kind.to_owned()))
            .and_modify(|(rows, _, last)| {
                *rows += 1;
                *last = seq;
            })
            .or_insert((1, seq, seq));
        clock.advance_ns(step_ns);
    }
    rec.close().unwrap();
}

/// What DuckDB reads from the lake.
fn query_lake(moto: &Moto, lake: &str) -> Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/lake_duckdb.py");
    let python = common::python::python();
    // DuckDB with S3 support is installed apart (scripts/python-env).
    let duckdb_s3 = python.parent().unwrap().parent().unwrap().join("duckdb-s3");
    let mut cmd = Command::new(python);
    cmd.env("PYTHONPATH", duckdb_s3)
        .arg(&script)
        .arg(&moto.endpoint)
        .arg(lake);
    for (k, v) in moto.env() {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Guards the fleet's data lake (issue 17): two robots' exports under one S3 prefix,
/// `robot=/date=/kind=` directories, read by DuckDB over S3 as one table whose groups
/// are exactly what was recorded, each export's manifest under `_manifests/`; a second
/// export of the same events is refused and the lake is unchanged.
#[test]
fn duckdb_queries_two_robots_exports_in_s3_as_one_table() {
    let tmp = tempfile::tempdir().unwrap();
    let moto = Moto::start();
    moto.create_bucket("lake");
    let mut model = Groups::new();
    let r1 = tmp.path().join("r1");
    record_across_midnight(&r1, "r1", 60, 100 * MS, &mut model);
    // The second robot's log lies in a directory named otherwise: --robot names it.
    let r2 = tmp.path().join("flight");
    record_across_midnight(&r2, "arm-2", 25, 170 * MS, &mut model);

    let lake = "s3://lake/events";
    let export = |dir: &Path, extra: &[&str]| {
        let mut args = vec![
            "export",
            "--dir",
            s(dir),
            "--format",
            "parquet",
            "--partition",
            "robot,date,kind",
            "--out",
            lake,
        ];
        args.extend_from_slice(extra);
        blackbox_s3(&moto, &args)
    };
    let said = ok(&export(&r1, &[]));
    assert!(said.contains("exported 60 events"), "{said}");
    assert!(
        said.contains("s3://lake/events/_manifests/r1.seq-"),
        "{said}"
    );
    ok(&export(&r2, &["--robot", "arm-2"]));

    let got = query_lake(&moto, lake);
    let found: Groups = got["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            // Every kind is recorded in full: each row weighs 1.
            assert_eq!(g["weight_sum"], g["rows"].as_f64().unwrap());
            (
                (
                    g["robot"].as_str().unwrap().to_owned(),
                    g["date"].as_str().unwrap().to_owned(),
                    g["kind"].as_str().unwrap().to_owned(),
                ),
                (
                    g["rows"].as_u64().unwrap(),
                    g["first_seq"].as_u64().unwrap(),
                    g["last_seq"].as_u64().unwrap(),
                ),
            )
        })
        .collect();
    assert_eq!(found, model);
    assert_eq!(
        model.len(),
        12,
        "both robots cross midnight with three kinds"
    );
    let manifests: Vec<&str> = got["manifests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m.as_str().unwrap())
        .collect();
    assert_eq!(manifests.len(), 2, "{manifests:?}");
    assert!(manifests[0].starts_with("arm-2.seq-"), "{manifests:?}");
    assert!(manifests[1].starts_with("r1.seq-"), "{manifests:?}");

    // The same events again: refused before anything is uploaded.
    let err = fails(&export(&r1, &[]));
    assert!(
        err.contains("already exists and is never replaced"),
        "{err}"
    );
    assert_eq!(query_lake(&moto, lake), got);
}

/// Guards the partitions' directories on a local disk (issue 17): `--partition
/// date,kind` writes `OUT/date=D/kind=K/part-<seq>.parquet`, a file for each date and
/// kind recorded, and the export checks against its manifest and its log.
#[test]
fn a_local_export_by_date_and_kind_checks_against_its_log() {
    let tmp = tempfile::tempdir().unwrap();
    let mut model = Groups::new();
    let dir = tmp.path().join("r1");
    record_across_midnight(&dir, "r1", 30, 100 * MS, &mut model);
    let out = tmp.path().join("by_day");
    ok(&common::blackbox(&[
        "export",
        "--dir",
        s(&dir),
        "--format",
        "parquet",
        "--partition",
        "date,kind",
        "--out",
        s(&out),
    ]));
    for ((_, date, kind), (_, first, _)) in &model {
        let file = out.join(format!("date={date}/kind={kind}/part-{first}.parquet"));
        assert!(file.is_file(), "{}", file.display());
    }
    ok(&common::blackbox(&["export", "--check", s(&out)]));
    ok(&common::blackbox(&[
        "export",
        "--check",
        s(&out),
        "--dir",
        s(&dir),
    ]));
}
