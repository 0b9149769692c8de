//! `blackbox ship` and `blackbox verify --dir URL` through the binary, against a real
//! S3 API server (moto) and a directory.
#![expect(clippy::unwrap_used, reason = "tests fail loudly on any error")]

mod common;
#[path = "../../ship/tests/common/moto.rs"]
mod moto;

use std::path::Path;
use std::process::{Output, Stdio};

use common::{bin, blackbox, fails, ok, record, s, segment_files};
use moto::Moto;

/// Runs `blackbox ARGS` with the environment an AWS tool reads to reach `moto`.
fn blackbox_s3(moto: &Moto, args: &[&str]) -> Output {
    let mut cmd = bin();
    cmd.args(args).stdin(Stdio::null());
    for (k, v) in moto.env() {
        cmd.env(k, v);
    }
    cmd.output().expect("run blackbox")
}

/// A recorded log of several sealed segments and an active one.
fn recorded_log(dir: &Path) -> Vec<String> {
    let input: String = (0..3_000)
        .map(|i| format!("{{\"kind\":\"sensor.imu\",\"values\":{{\"ax\":{i}}}}}\n"))
        .collect();
    ok(&record(dir, &input, &["--segment-bytes", "16KiB"]));
    let names: Vec<String> = segment_files(dir)
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert!(names.len() >= 4, "{names:?}");
    names
}

/// `blackbox digest` of the sealed segments alone (a copy of every file but the last).
fn digest_of_sealed(dir: &Path, names: &[String]) -> String {
    let copy = tempfile::tempdir().unwrap();
    for name in &names[..names.len() - 1] {
        std::fs::copy(dir.join(name), copy.path().join(name)).unwrap();
    }
    ok(&blackbox(&["digest", "--dir", s(copy.path())]))
        .trim()
        .to_owned()
}

#[test]
fn ship_to_s3_then_verify_remotely_with_the_local_digest() {
    let moto = Moto::start();
    moto.create_bucket("fleet");
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    let names = recorded_log(&log);
    let sealed = &names[..names.len() - 1];

    let out = ok(&blackbox_s3(
        &moto,
        &["ship", "--dir", s(&log), "--to", "s3://fleet/robot-7"],
    ));
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), sealed.len() + 1, "{out}");
    for (line, name) in lines.iter().zip(sealed) {
        assert!(
            line.starts_with(&format!("shipped {name} (seqs ")),
            "{line}"
        );
    }
    assert!(
        lines[sealed.len()].starts_with(&format!("shipped {} segments", sealed.len())),
        "{out}"
    );
    assert!(
        !out.contains(names.last().unwrap().as_str()),
        "the active segment is not shipped: {out}"
    );

    let again = ok(&blackbox_s3(
        &moto,
        &["ship", "--dir", s(&log), "--to", "s3://fleet/robot-7"],
    ));
    for (line, name) in again.lines().zip(sealed) {
        assert!(line.starts_with(&format!("skipped {name} ")), "{line}");
    }
    assert!(again.contains("shipped 0 segments"), "{again}");

    let verified = ok(&blackbox_s3(
        &moto,
        &["verify", "--dir", "s3://fleet/robot-7"],
    ));
    let last = verified
        .lines()
        .find_map(|l| l.strip_prefix("last: "))
        .unwrap_or_else(|| panic!("no digest in {verified}"));
    assert_eq!(last, digest_of_sealed(&log, &names));
    // The local log holds the prefix the remote digest names.
    ok(&blackbox(&["verify", "--dir", s(&log), "--digest", last]));
}

#[test]
fn a_tampered_shipped_segment_fails_remote_verify_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    let names = recorded_log(&log);
    let shipped = dir.path().join("shipped");
    let url = format!("file://{}", shipped.display());
    ok(&blackbox(&["ship", "--dir", s(&log), "--to", &url]));
    ok(&blackbox(&["verify", "--dir", &url]));

    let victim = &names[1];
    let object = shipped.join("segments").join(victim);
    let mut bytes = std::fs::read(&object).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x01;
    std::fs::write(&object, bytes).unwrap();
    let err = fails(&blackbox(&["verify", "--dir", &url]));
    assert!(err.contains(&format!("segment {victim}: ")), "{err}");
    assert!(err.contains("it was changed after it was shipped"), "{err}");

    std::fs::remove_file(&object).unwrap();
    let err = fails(&blackbox(&["verify", "--dir", &url]));
    assert!(err.contains(&format!("segment {victim}: ")), "{err}");
}

#[test]
fn ship_refuses_a_url_it_cannot_ship_to() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    recorded_log(&log);
    let err = fails(&blackbox(&[
        "ship",
        "--dir",
        s(&log),
        "--to",
        "gs://bucket/robot",
    ]));
    assert!(err.contains("cannot ship to gs://bucket/robot"), "{err}");
    let err = fails(&blackbox(&[
        "ship",
        "--dir",
        s(&log),
        "--to",
        "s3:///robot",
    ]));
    assert!(err.contains("names no bucket"), "{err}");
}
