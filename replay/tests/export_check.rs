//! `blackbox export --check`: a manifest proves what its file holds. An edited, appended
//! or truncated file is caught with a sentence that says what differs; with `--dir`, a
//! file forged along with its manifest is caught by deriving it again from the log.

#![expect(clippy::unwrap_used, reason = "tests fail loudly on any error")]

mod common;

use std::fs;
use std::path::Path;

use common::{blackbox, fails, ok, record, replay_json, s};
use serde_json::Value;

fn exported(tmp: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let dir = tmp.join("log");
    let input: String = (0..30)
        .map(|i| {
            format!(
                "{{\"kind\":\"arm.move\",\"payload\":{{\"i\":{i}}},\"values\":{{\"x\":{i}}}}}\n"
            )
        })
        .collect();
    ok(&record(&dir, &input, &[]));
    let out = tmp.join("train.jsonl");
    ok(&blackbox(&["export", "--dir", s(&dir), "--out", s(&out)]));
    (dir, out)
}

fn check(file: &Path, extra: &[&str]) -> std::process::Output {
    let mut args = vec!["export", "--check", s(file)];
    args.extend_from_slice(extra);
    blackbox(&args)
}

#[test]
fn an_untouched_export_checks_by_its_file_or_its_manifest() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, out) = exported(tmp.path());
    let said = ok(&check(&out, &[]));
    assert!(said.contains("matches its manifest"), "{said}");
    assert!(said.contains("30 rows"), "{said}");
    let manifest = tmp.path().join("train.jsonl.manifest.json");
    ok(&check(&manifest, &[]));
    let said = ok(&check(&out, &["--dir", s(&dir)]));
    assert!(said.contains("derived again from"), "{said}");
    let report: Value = serde_json::from_str(&ok(&check(&out, &["--json"]))).unwrap();
    assert_eq!(report["matches"], true);
    assert_eq!(report["rows"], 30);
    // What the manifest carries: the file's blake3 (as b3sum would compute it), its
    // rows, the query, the tool's version, the accounting and the log's digest.
    let m: Value = serde_json::from_str(&fs::read_to_string(&manifest).unwrap()).unwrap();
    let bytes = fs::read(&out).unwrap();
    assert_eq!(m["file"]["blake3"], blake3::hash(&bytes).to_hex().as_str());
    assert_eq!(m["file"]["bytes"], bytes.len());
    assert_eq!(m["file"]["rows"], 30);
    assert_eq!(m["tool"]["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(m["query"]["kinds"], serde_json::json!([]));
    assert_eq!(m["accounting"]["kinds"]["arm.move"]["seen"], 30);
    // The policy in force: `record` without `--policy` keeps every kind in full.
    let policies = replay_json(&dir, &["--type", "policy"]);
    assert_eq!(policies.len(), 1, "{policies:?}");
    assert_eq!(
        m["policy"],
        serde_json::json!([{"from_seq": policies[0]["seq"], "toml": "default = \"full\"\n"}])
    );
    let digest = ok(&blackbox(&["digest", "--dir", s(&dir)]));
    assert_eq!(m["log"]["digest"], digest.trim());
}

#[test]
fn an_edited_appended_or_truncated_export_fails_its_check() {
    // Editing rows once still passed the documented check (the manifest held only the
    // log's digest and the first and last hashes).
    let tmp = tempfile::tempdir().unwrap();
    let (_, out) = exported(tmp.path());
    let original = fs::read_to_string(&out).unwrap();
    let lines: Vec<&str> = original.lines().collect();
    let edited = original.replacen("\"x\":7.0", "\"x\":8.0", 1);
    assert_ne!(edited, original);
    let appended = format!("{original}{}\n", lines[3]);
    let truncated: String = lines[..29].iter().map(|l| format!("{l}\n")).collect();
    let reweighted = original.replacen("\"weight\":1.0", "\"weight\":2.0", 1);
    for (name, text, needle) in [
        ("edited", edited, "blake3"),
        ("appended", appended, "bytes"),
        ("truncated", truncated, "bytes"),
        ("reweighted", reweighted, "blake3"),
    ] {
        fs::write(&out, &text).unwrap();
        let out_ = check(&out, &[]);
        let err = fails(&out_);
        assert_eq!(out_.status.code(), Some(1), "{name}");
        assert!(
            err.contains("is not the file its manifest describes") && err.contains(needle),
            "{name}: {err}"
        );
    }
}

#[test]
fn a_file_forged_with_its_manifest_is_caught_against_the_log() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, out) = exported(tmp.path());
    let manifest_path = tmp.path().join("train.jsonl.manifest.json");
    // Change one value and rewrite the manifest's hash to match: the file alone checks.
    let forged = fs::read_to_string(&out)
        .unwrap()
        .replacen("\"x\":7.0", "\"x\":9.0", 1);
    fs::write(&out, &forged).unwrap();
    let mut m: Value = serde_json::from_str(&fs::read_to_string(&manifest_path).unwrap()).unwrap();
    m["file"]["blake3"] = blake3::hash(forged.as_bytes()).to_hex().as_str().into();
    fs::write(&manifest_path, serde_json::to_vec_pretty(&m).unwrap()).unwrap();
    ok(&check(&out, &[]));
    // Derived again from the log, it is not the same file.
    let err = fails(&check(&out, &["--dir", s(&dir)]));
    assert!(err.contains("exporting its query"), "{err}");
    assert!(err.contains("not the file's"), "{err}");
}

#[test]
fn check_refuses_what_is_not_a_manifest() {
    let tmp = tempfile::tempdir().unwrap();
    let (_, out) = exported(tmp.path());
    let manifest_path = tmp.path().join("train.jsonl.manifest.json");
    fs::write(&manifest_path, "{not json").unwrap();
    let err = fails(&check(&out, &[]));
    assert!(err.contains("not a readable export manifest"), "{err}");
    let err = fails(&check(&tmp.path().join("missing.jsonl"), &[]));
    assert!(err.contains("missing.jsonl.manifest.json"), "{err}");
}

/// The manifest names the policies in force over its rows (issue: "the policy in
/// force"): two sessions under two policy files, over small segments; an export of the
/// whole log lists both, in order, each from the seq of a policy record; an export that
/// starts in a later segment of the second session lists the second only, found in that
/// segment's preamble.
#[test]
fn the_manifest_names_the_policies_in_force_over_its_rows() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    let first = tmp.path().join("first.toml");
    let second = tmp.path().join("second.toml");
    fs::write(
        &first,
        "[[rules]]\nmatch = \"imu.*\"\ntier = \"sample\"\nevery = 3\n",
    )
    .unwrap();
    fs::write(
        &second,
        "default = \"full\"\n[[rules]]\nmatch = \"debug.*\"\ntier = \"drop\"\n",
    )
    .unwrap();
    let lines = |from: usize| -> String {
        (from..from + 300)
            .map(|i| {
                format!(
                    "{{\"kind\":\"arm.move\",\"payload\":{{\"i\":{i},\"pad\":\"{}\"}}}}\n",
                    "x".repeat(60)
                )
            })
            .collect()
    };
    for (policy, from) in [(&first, 0), (&second, 300)] {
        ok(&record(
            &dir,
            &lines(from),
            &["--policy", s(policy), "--segment-bytes", "8KiB"],
        ));
    }
    let policy_records = replay_json(&dir, &["--type", "policy"]);
    let seqs: Vec<u64> = policy_records
        .iter()
        .map(|r| r["seq"].as_u64().unwrap())
        .collect();
    let first_text =
        "default = \"full\"\n\n[[rules]]\nmatch = \"imu.*\"\ntier = \"sample\"\nevery = 3\n";
    let second_text = "default = \"full\"\n\n[[rules]]\nmatch = \"debug.*\"\ntier = \"drop\"\n";

    let whole = tmp.path().join("whole.jsonl");
    ok(&blackbox(&["export", "--dir", s(&dir), "--out", s(&whole)]));
    let m: Value = serde_json::from_str(
        &fs::read_to_string(tmp.path().join("whole.jsonl.manifest.json")).unwrap(),
    )
    .unwrap();
    let listed = m["policy"].as_array().unwrap();
    let texts: Vec<&str> = listed.iter().map(|p| p["toml"].as_str().unwrap()).collect();
    // The whole export changes policy once: at the second session's policy record (each
    // segment's preamble repeats the policy, listed once).
    assert_eq!(texts, [first_text, second_text], "{listed:?}");
    for p in listed {
        assert!(
            seqs.contains(&p["from_seq"].as_u64().unwrap()),
            "{p} not among {seqs:?}"
        );
    }

    // From the second session's last event backwards: a range inside its last segment.
    let events = replay_json(&dir, &["--type", "event"]);
    let last = events.last().unwrap()["seq"].as_u64().unwrap();
    let last_ns = events.last().unwrap()["ts_ns"].as_u64().unwrap();
    let tail = tmp.path().join("tail.jsonl");
    ok(&blackbox(&[
        "export",
        "--dir",
        s(&dir),
        "--since",
        &last_ns.to_string(),
        "--out",
        s(&tail),
    ]));
    let m: Value = serde_json::from_str(
        &fs::read_to_string(tmp.path().join("tail.jsonl.manifest.json")).unwrap(),
    )
    .unwrap();
    let listed = m["policy"].as_array().unwrap();
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0]["toml"], second_text);
    let from = listed[0]["from_seq"].as_u64().unwrap();
    assert!(
        seqs.contains(&from) && from < last,
        "{from} {last} {seqs:?}"
    );
}

/// A manifest edited where the data file's own check cannot see it (the policy in force,
/// the accounting, a kind's weights, the list of files) fails the check against the log,
/// in every format: the log says again what the manifest must say.
#[test]
fn a_manifest_edited_beside_its_file_is_caught_against_the_log() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("flight");
    ok(&blackbox(&["demo", "--dir", s(&dir), "--seed", "7"]));
    type Edit = fn(&mut Value);
    let edits: [(&str, Edit); 3] = [
        ("policy", |m| m["policy"] = Value::from("x = 1")),
        ("accounting", |m| {
            m["accounting"]["kinds"]["action.grasp"]["seen"] = Value::from(99)
        }),
        ("kinds", |m| {
            m["kinds"]["action.grasp"]["weight_sum"] = Value::from(40.0)
        }),
    ];
    for format in ["jsonl", "parquet", "mcap"] {
        let out = tmp.path().join(format!("run.{format}"));
        ok(&blackbox(&[
            "export",
            "--dir",
            s(&dir),
            "--format",
            format,
            "--out",
            s(&out),
        ]));
        let manifest = tmp.path().join(format!("run.{format}.manifest.json"));
        let original = fs::read(&manifest).unwrap();
        ok(&check(&out, &["--dir", s(&dir)]));
        for (what, edit) in edits {
            let mut m: Value = serde_json::from_slice(&original).unwrap();
            edit(&mut m);
            fs::write(&manifest, serde_json::to_vec(&m).unwrap()).unwrap();
            let err = fails(&check(&out, &["--dir", s(&dir)]));
            assert!(
                err.contains("not the file its manifest describes"),
                "{format} {what}: {err}"
            );
        }
        fs::write(&manifest, &original).unwrap();
    }
}
