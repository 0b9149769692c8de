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

/// The groups DuckDB read, as the model holds them; every row weighs 1 (every kind is
/// recorded in full).
fn groups(got: &Value) -> Groups {
    got["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
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
        .collect()
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
    let found = groups(&got);
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

    // The same export again: its manifest is there, nothing is uploaded.
    let said = ok(&export(&r1, &[]));
    assert!(said.contains("already holds this export"), "{said}");
    assert_eq!(query_lake(&moto, lake), got);

    // An export that overlaps the first is refused, and names where to start.
    let err = fails(&export(&r1, &["--from-seq", "10"]));
    assert!(err.contains("overlap"), "{err}");
    let next = model
        .iter()
        .filter(|((robot, _, _), _)| robot == "r1")
        .map(|(_, &(_, _, last))| last)
        .max()
        .unwrap()
        + 1;
    assert!(err.contains(&format!("--from-seq {next}")), "{err}");

    // The robot records on; the events after the first export go in beside it.
    let clock = ManualClock::new(T0 + 10 * SEC);
    let rec = Recorder::open(&r1, Config::new().clock(Arc::new(clock.clone()))).unwrap();
    for i in 0..5u32 {
        let seq = rec
            .record_evidence(&Event::new("imu").values(&[("x", f64::from(i))]))
            .unwrap()
            .0;
        model
            .entry(("r1".to_owned(), "2026-03-02".to_owned(), "imu".to_owned()))
            .and_modify(|(rows, _, last)| {
                *rows += 1;
                *last = seq;
            });
        clock.advance_ns(MS);
    }
    rec.close().unwrap();
    let from = next.to_string();
    let said = ok(&export(&r1, &["--from-seq", &from]));
    assert!(said.contains("exported 5 events"), "{said}");
    let got = query_lake(&moto, lake);
    let found = groups(&got);
    assert_eq!(found, model);
    assert_eq!(got["manifests"].as_array().unwrap().len(), 3);

    // Now the advice names the seq after the robot's last in the lake, whichever
    // manifest the export overlaps first.
    let last = model
        .iter()
        .filter(|((robot, _, _), _)| robot == "r1")
        .map(|(_, &(_, _, last))| last)
        .max()
        .unwrap();
    let err = fails(&export(&r1, &[]));
    assert!(err.contains(&format!("--from-seq {}", last + 1)), "{err}");
}

/// Guards a lake's objects (issue 17): an export stopped part way (here: its manifest
/// and one file gone) finishes when run again, keeping the objects already there with
/// the same bytes; an object with other bytes at one of its paths stops it before any
/// upload; a lake export must be partitioned by robot.
#[test]
fn a_lake_export_finishes_when_run_again_and_never_replaces_an_object() {
    let tmp = tempfile::tempdir().unwrap();
    let mut model = Groups::new();
    let dir = tmp.path().join("r1");
    record_across_midnight(&dir, "r1", 30, 100 * MS, &mut model);
    let lake_dir = tmp.path().join("lake");
    let lake = format!("file://{}", lake_dir.display());
    let export = |partition: &str| {
        common::blackbox(&[
            "export",
            "--dir",
            s(&dir),
            "--format",
            "parquet",
            "--partition",
            partition,
            "--out",
            &lake,
        ])
    };
    let err = fails(&export("date,kind"));
    assert!(err.contains("partitioned by robot"), "{err}");
    // An export of the same seqs with other rows (a kind left out) first: the full one
    // is then refused, since its manifest's name is the same and its files are not.
    let other = tmp.path().join("other-lake");
    let other_url = format!("file://{}", other.display());
    let partial = [
        "export",
        "--dir",
        s(&dir),
        "--format",
        "parquet",
        "--partition",
        "robot,date,kind",
        "--kind",
        "!gps",
        "--out",
        &other_url,
    ];
    ok(&common::blackbox(&partial));
    let mut full = partial.to_vec();
    full.drain(7..9);
    let err = fails(&common::blackbox(&full));
    assert!(err.contains("lists another export"), "{err}");
    ok(&export("robot,date,kind"));
    let mut files: Vec<std::path::PathBuf> = Vec::new();
    let mut stack = vec![lake_dir.clone()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                files.push(p);
            }
        }
    }
    files.sort();
    let manifest = files
        .iter()
        .find(|p| p.to_string_lossy().contains("_manifests"))
        .unwrap()
        .clone();
    let data: Vec<_> = files.iter().filter(|p| **p != manifest).cloned().collect();
    assert_eq!(data.len(), model.len());
    let before = std::fs::read(&data[0]).unwrap();

    std::fs::remove_file(&manifest).unwrap();
    std::fs::remove_file(&data[0]).unwrap();
    let said = ok(&export("robot,date,kind"));
    assert!(
        said.contains(&format!(
            "uploaded 3 objects, kept {} already there",
            data.len() - 1
        )),
        "{said}"
    );
    assert_eq!(std::fs::read(&data[0]).unwrap(), before);
    assert!(manifest.is_file());

    std::fs::remove_file(&manifest).unwrap();
    std::fs::write(&data[1], b"other bytes").unwrap();
    let err = fails(&export("robot,date,kind"));
    assert!(err.contains("already exists with other bytes"), "{err}");
    assert!(err.contains("--to-seq"), "{err}");
    assert!(
        err.contains(&data[1].file_name().unwrap().to_string_lossy().into_owned()),
        "{err}"
    );
    assert!(!manifest.exists(), "nothing was uploaded");
    assert_eq!(std::fs::read(&data[1]).unwrap(), b"other bytes");
}

/// Guards a stopped lake export (issue 17): its marker, uploaded first, holds its seqs
/// while its manifest is missing: an export over other seqs that overlap them is
/// refused and told the seqs to finish it with, and running it over those seqs finishes
/// it (the files already there kept) and takes the marker away. The stop is a directory
/// where its manifest would go, which the store cannot replace.
#[test]
fn a_stopped_lake_export_holds_its_seqs_until_it_is_finished() {
    let tmp = tempfile::tempdir().unwrap();
    let mut model = Groups::new();
    let dir = tmp.path().join("r1");
    record_across_midnight(&dir, "r1", 30, 100 * MS, &mut model);
    let first = model.values().map(|&(_, a, _)| a).min().unwrap();
    let last = model.values().map(|&(_, _, b)| b).max().unwrap();
    let lake_dir = tmp.path().join("lake");
    let manifests = lake_dir.join("_manifests");
    let lake = format!("file://{}", lake_dir.display());
    let export = |extra: &[&str]| {
        let mut args = vec![
            "export",
            "--dir",
            s(&dir),
            "--format",
            "parquet",
            "--partition",
            "robot,date,kind",
            "--out",
            &lake,
        ];
        args.extend_from_slice(extra);
        common::blackbox(&args)
    };
    let manifest = manifests.join(format!("r1.seq-{first}-{last}.manifest.json"));
    let marker = manifests.join(format!("r1.seq-{first}-{last}.pending.json"));
    std::fs::create_dir_all(&manifest).unwrap();
    let err = fails(&export(&[]));
    assert!(
        err.contains(&format!("--from-seq {first} --to-seq {last}")),
        "{err}"
    );
    assert!(marker.is_file());

    let later = (first + 10).to_string();
    let err = fails(&export(&["--from-seq", &later]));
    assert!(err.contains("stopped part way"), "{err}");

    std::fs::remove_dir(&manifest).unwrap();
    let (a, b) = (first.to_string(), last.to_string());
    let said = ok(&export(&["--from-seq", &a, "--to-seq", &b]));
    assert!(said.contains("kept"), "{said}");
    assert!(manifest.is_file());
    assert!(!marker.exists());
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

/// Guards the files a partitioned export keeps open (issue 17): with more partitions
/// than it keeps open at once (64), the least recently used file is finished and a
/// later row of its partition starts another, named by its seq; every row is read back
/// once by DuckDB, and the export checks against its log.
#[test]
fn more_partitions_than_open_files_lose_and_repeat_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    let kinds = 70;
    let rounds = 3;
    let input: String = (0..rounds)
        .flat_map(|r| {
            (0..kinds).map(move |k| format!("{{\"kind\":\"k{k}\",\"values\":{{\"r\":{r}}}}}\n"))
        })
        .collect();
    ok(&common::record(&dir, &input, &[]));
    let out = tmp.path().join("by_kind");
    ok(&common::blackbox(&[
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
    let found: BTreeMap<String, u64> = got["kinds"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v["rows"].as_u64().unwrap()))
        .collect();
    let want: BTreeMap<String, u64> = (0..kinds).map(|k| (format!("k{k}"), rounds)).collect();
    assert_eq!(found, want);
    // A kind's rows went into more than one file once its file was closed.
    let files = std::fs::read_dir(out.join("kind=k0")).unwrap().count();
    assert!(files > 1, "{files}");
    ok(&common::blackbox(&[
        "export",
        "--check",
        s(&out),
        "--dir",
        s(&dir),
    ]));
}
