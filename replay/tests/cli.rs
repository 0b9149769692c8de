//! The `blackbox` command, run as a real process: every subcommand of DESIGN §8 that
//! this crate ships (record, replay, verify, digest, stats, export), every field of its
//! output contract, and its refusals.

#![expect(clippy::unwrap_used, reason = "tests fail loudly on any error")]

mod common;

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use std::sync::Arc;

use blackbox::{Config, Event, LogReader, ManualClock, Policy, Recorder, Seq};
use common::{Recording, blackbox, fails, json_lines, ok, record, replay_json, s};
use serde_json::{Value, json};

const EVENTS: &str = r#"{"kind":"action.grasp","payload":{"object":"cup","ok":true},"values":{"force":3.2,"width":0.04},"source":"arm","event_time":"2026-01-02T03:04:05.123456789Z"}
{"op":"set","key":"goal","value":{"object":"cup"}}
{"op":"set","key":"tmp","value":1}
{"op":"del","key":"tmp"}
{"op":"checkpoint"}
{"op":"sync"}
{"kind":"action.lift","event_time":1767323045000000000}
{"kind":"nav.move","payload":[1,2,3],"values":{"dx":0.5}}
"#;

/// The content hash of DESIGN §8, recomputed from the raw log record.
fn expected_hash(dir: &Path, seq: u64) -> String {
    let reader = LogReader::open(dir).unwrap();
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
    h.finalize().to_hex().to_string()
}

fn events_of(records: &[Value]) -> Vec<&Value> {
    records.iter().filter(|r| r["type"] == "event").collect()
}

#[test]
fn record_prints_acks_and_a_summary_and_replay_shows_every_event_field() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    let out = ok(&record(&dir, EVENTS, &[]));
    let lines = json_lines(&out);
    assert_eq!(lines.len(), 2, "one ack and the summary: {out}");
    let synced = lines[0]["synced"].as_u64().unwrap();
    let summary = &lines[1];
    assert_eq!(summary["events"], 3);
    assert_eq!(summary["ops"], 5);
    assert_eq!(summary["skipped"], 0);
    assert_eq!(summary["lines"], 8);
    for kind in ["action.grasp", "action.lift", "nav.move"] {
        assert_eq!(
            summary["kinds"][kind],
            json!({"seen": 1, "kept": 1, "sampled_out": 0, "summarized": 0, "dropped": 0,
                   "overflow": 0, "preroll": 0, "lost": 0}),
            "{kind}"
        );
    }
    let last_seq = summary["last_seq"].as_u64().unwrap();
    assert!(last_seq > synced);

    let all = replay_json(&dir, &[]);
    assert!(
        all.iter().all(|r| r["type"] != "dictionary"),
        "dictionary hidden by default"
    );
    assert_eq!(all.last().unwrap()["seq"].as_u64().unwrap(), last_seq);
    for r in &all {
        let seq = r["seq"].as_u64().unwrap();
        let ts_ns = r["ts_ns"].as_u64().unwrap();
        assert_eq!(
            blackbox_replay::parse_time(r["ts"].as_str().unwrap()).unwrap(),
            ts_ns,
            "ts is RFC 3339 with ns: {r}"
        );
        assert!(r["ts"].as_str().unwrap().ends_with('Z'));
        assert_eq!(r["hash"].as_str().unwrap(), expected_hash(&dir, seq), "{r}");
    }
    let events = events_of(&all);
    assert_eq!(events.len(), 3);
    let grasp = events[0];
    assert_eq!(grasp["kind"], "action.grasp");
    assert_eq!(grasp["tier"], "full");
    assert_eq!(grasp["weight"], 1.0);
    assert_eq!(grasp["source"], "arm");
    assert_eq!(grasp["payload"], json!({"object": "cup", "ok": true}));
    assert_eq!(grasp["encoding"], "json");
    assert_eq!(grasp["values"], json!({"force": 3.2, "width": 0.04}));
    assert_eq!(grasp["event_time"], "2026-01-02T03:04:05.123456789Z");
    assert_eq!(grasp["event_time_ns"], 1_767_323_045_123_456_789u64);
    assert!(
        grasp["seq"].as_u64().unwrap() <= synced,
        "acknowledged before the sync"
    );
    let lift = events[1];
    assert_eq!(lift["kind"], "action.lift");
    assert_eq!(lift["source"], Value::Null);
    assert_eq!(lift["payload"], Value::Null);
    assert_eq!(lift["encoding"], "none");
    assert_eq!(lift["values"], json!({}));
    assert_eq!(lift["event_time_ns"], 1_767_323_045_000_000_000u64);
    assert_eq!(events[2]["payload"], json!([1, 2, 3]));

    // The checkpoint the run asked for, then the one close writes: the working memory
    // after set, set, del.
    let checkpoints: Vec<&Value> = all.iter().filter(|r| r["type"] == "checkpoint").collect();
    assert!(!checkpoints.is_empty());
    for c in &checkpoints {
        assert_eq!(c["working"], json!({"goal": {"object": "cup"}}));
    }
    // Accounting: running totals, every counter named.
    let accounting = all.iter().rfind(|r| r["type"] == "accounting").unwrap();
    assert_eq!(accounting["kinds"], summary["kinds"]);

    // The same records for people: one line each, kinds and values shown.
    let human = ok(&blackbox(&["replay", "--dir", s(&dir)]));
    assert_eq!(human.lines().count(), all.len());
    assert!(
        human.contains("action.grasp  [full]  source=arm  force=3.2  width=0.04"),
        "{human}"
    );
    assert!(
        human.contains(r#"payload={"object":"cup","ok":true}"#),
        "{human}"
    );
    assert!(human.contains("working memory"), "{human}");
}

#[test]
fn summaries_samples_and_types_carry_their_fields() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    let policy = tmp.path().join("policy.toml");
    fs::write(
        &policy,
        r#"
[[rules]]
match = "sensor.*"
tier = "summary"
window = "1h"

[[rules]]
match = "trajectory.*"
tier = "sample"
every = 3

[[rules]]
match = "debug.*"
tier = "drop"
"#,
    )
    .unwrap();
    let mut input = String::new();
    for (i, x) in [1.0, 4.0, 2.5, 0.5].iter().enumerate() {
        input.push_str(&format!(
            "{{\"kind\":\"sensor.imu\",\"values\":{{\"ax\":{x},\"i\":{i}}}}}\n"
        ));
    }
    for i in 0..7 {
        input.push_str(&format!(
            "{{\"kind\":\"trajectory.point\",\"payload\":{i}}}\n"
        ));
    }
    input.push_str("{\"kind\":\"debug.tick\"}\n{\"kind\":\"debug.tick\"}\n");
    let out = ok(&record(&dir, &input, &["--policy", s(&policy)]));
    let summary = json_lines(&out).pop().unwrap();
    assert_eq!(
        summary["kinds"]["sensor.imu"],
        json!({"seen": 4, "kept": 0, "sampled_out": 0, "summarized": 4, "dropped": 0,
               "overflow": 0, "preroll": 0, "lost": 0})
    );
    assert_eq!(
        summary["kinds"]["trajectory.point"],
        json!({"seen": 7, "kept": 3, "sampled_out": 4, "summarized": 0, "dropped": 0,
               "overflow": 0, "preroll": 0, "lost": 0})
    );
    assert_eq!(summary["kinds"]["debug.tick"]["dropped"], 2);

    let sums = replay_json(&dir, &["--type", "summary"]);
    assert_eq!(sums.len(), 1, "{sums:?}");
    let w = &sums[0];
    assert_eq!(w["type"], "summary");
    assert_eq!(w["kind"], "sensor.imu");
    assert_eq!(w["count"], 4);
    assert_eq!(
        w["values"]["ax"],
        json!({"min": 0.5, "max": 4.0, "mean": 2.0, "sum": 8.0, "last": 0.5, "count": 4})
    );
    let start = w["window_start_ns"].as_u64().unwrap();
    let end = w["window_end_ns"].as_u64().unwrap();
    assert_eq!(end - start, 3_600_000_000_000);
    assert_eq!(
        blackbox_replay::parse_time(w["window_start"].as_str().unwrap()).unwrap(),
        start
    );
    assert_eq!(
        blackbox_replay::parse_time(w["window_end"].as_str().unwrap()).unwrap(),
        end
    );

    let samples = replay_json(&dir, &["--type", "event", "--kind", "trajectory.*"]);
    let payloads: Vec<i64> = samples
        .iter()
        .map(|r| r["payload"].as_i64().unwrap())
        .collect();
    assert_eq!(payloads, [0, 3, 6]);
    for r in &samples {
        assert_eq!(r["tier"], "sample");
        assert_eq!(r["weight"], 3.0);
    }

    // Several --type and --kind: their union within each, the intersection across.
    let mixed = replay_json(
        &dir,
        &[
            "--type",
            "summary",
            "--type",
            "event",
            "--kind",
            "sensor.*",
            "--kind",
            "nothing.*",
        ],
    );
    assert_eq!(mixed.len(), 1);
    assert_eq!(mixed[0]["type"], "summary");
    // Records without a kind never match a kind glob.
    assert!(replay_json(&dir, &["--type", "accounting", "--kind", "*"]).is_empty());
    // The dictionary shows only when asked for, with ids and names.
    let dict = replay_json(&dir, &["--type", "dictionary"]);
    let names: Vec<&str> = dict
        .iter()
        .flat_map(|d| d["entries"].as_object().unwrap().values())
        .map(|v| v.as_str().unwrap())
        .collect();
    for name in ["sensor.imu", "ax", "i", "trajectory.point", "debug.tick"] {
        assert!(names.contains(&name), "{name} in {names:?}");
    }
}

#[test]
fn replay_selects_by_seq_and_time_inclusively() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    let mut input = String::new();
    for i in 0..20 {
        input.push_str(&format!("{{\"kind\":\"step.n\",\"payload\":{i}}}\n"));
    }
    ok(&record(&dir, &input, &[]));
    let events = replay_json(&dir, &["--type", "event"]);
    assert_eq!(events.len(), 20);
    let seq = |i: usize| events[i]["seq"].as_u64().unwrap();
    let ts = |i: usize| events[i]["ts_ns"].as_u64().unwrap();

    let by_seq = replay_json(
        &dir,
        &[
            "--type",
            "event",
            "--from-seq",
            &seq(3).to_string(),
            "--to-seq",
            &seq(7).to_string(),
        ],
    );
    let got: Vec<u64> = by_seq.iter().map(|r| r["seq"].as_u64().unwrap()).collect();
    assert_eq!(got, (3..=7).map(seq).collect::<Vec<_>>());

    // --since as RFC 3339, --until as integer ns; both bounds inclusive.
    let since = events[5]["ts"].as_str().unwrap().to_owned();
    let until = ts(12).to_string();
    let by_time = replay_json(
        &dir,
        &["--type", "event", "--since", &since, "--until", &until],
    );
    let expected: Vec<&Value> = events
        .iter()
        .filter(|r| {
            let t = r["ts_ns"].as_u64().unwrap();
            t >= ts(5) && t <= ts(12)
        })
        .collect();
    assert_eq!(by_time.iter().collect::<Vec<_>>(), expected);

    // Time and seq bounds intersect; an empty range prints nothing and succeeds.
    let both = replay_json(
        &dir,
        &[
            "--type",
            "event",
            "--since",
            &since,
            "--to-seq",
            &seq(6).to_string(),
        ],
    );
    assert!(both.iter().all(|r| {
        let s = r["seq"].as_u64().unwrap();
        s <= seq(6) && r["ts_ns"].as_u64().unwrap() >= ts(5)
    }));
    assert!(replay_json(&dir, &["--from-seq", "100000"]).is_empty());
    assert!(replay_json(&dir, &["--since", "2500-01-01T00:00:00Z"]).is_empty());
    assert!(replay_json(&dir, &["--until", "1"]).is_empty());
}

#[test]
fn names_resolve_when_a_replay_starts_in_a_later_segment() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    let mut input = String::new();
    for i in 0..400 {
        input.push_str(&format!(
            "{{\"kind\":\"k{}.e\",\"source\":\"s{}\",\"values\":{{\"v{}\":{i}}},\"payload\":{{\"i\":{i}}}}}\n",
            i % 7,
            i % 3,
            i % 5
        ));
        if i % 50 == 0 {
            input.push_str("{\"op\":\"sync\"}\n");
        }
    }
    ok(&record(&dir, &input, &["--segment-bytes", "4KiB"]));
    let stats: Value =
        serde_json::from_str(&ok(&blackbox(&["stats", "--dir", s(&dir), "--json"]))).unwrap();
    let segments = stats["segments"].as_u64().unwrap();
    assert!(segments >= 5, "small segments: {stats}");

    let all = replay_json(&dir, &[]);
    let segs = blackbox_log::list_segments(&dir).unwrap();
    for seg in segs.iter().skip(1) {
        for offset in [0, 1, 5] {
            let from = seg.first_seq + offset;
            let part = replay_json(&dir, &["--from-seq", &from.to_string()]);
            let expected: Vec<&Value> = all
                .iter()
                .filter(|r| r["seq"].as_u64().unwrap() >= from)
                .collect();
            assert_eq!(part.iter().collect::<Vec<_>>(), expected, "from seq {from}");
        }
    }
    // And by time, from the middle of the log.
    let mid = &all[all.len() / 2];
    let part = replay_json(
        &dir,
        &["--since", &mid["ts_ns"].to_string(), "--kind", "k3.*"],
    );
    assert!(!part.is_empty());
    assert!(
        part.iter()
            .all(|r| r["kind"] == "k3.e" && r["source"].is_string())
    );
}

#[test]
fn stats_reports_totals_since_the_log_was_created() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    ok(&record(
        &dir,
        "{\"kind\":\"a.b\"}\n{\"kind\":\"a.b\"}\n{\"kind\":\"c.d\"}\n",
        &[],
    ));
    let second = json_lines(&ok(&record(&dir, "{\"kind\":\"a.b\"}\n", &[])));
    assert_eq!(
        second[0]["kinds"]["a.b"]["seen"], 1,
        "record counts its own run"
    );

    let stats: Value =
        serde_json::from_str(&ok(&blackbox(&["stats", "--dir", s(&dir), "--json"]))).unwrap();
    let all = replay_json(
        &dir,
        &[
            "--type",
            "dictionary",
            "--type",
            "event",
            "--type",
            "accounting",
            "--type",
            "checkpoint",
            "--type",
            "policy",
        ],
    );
    let last = all.last().unwrap();
    assert_eq!(
        stats["records"].as_u64().unwrap(),
        last["seq"].as_u64().unwrap() + 1
    );
    assert_eq!(stats["segments"], 1);
    let bytes: u64 = blackbox_log::list_segments(&dir)
        .unwrap()
        .iter()
        .map(|s| fs::metadata(&s.path).unwrap().len())
        .sum();
    assert_eq!(stats["bytes"].as_u64().unwrap(), bytes);
    assert_eq!(stats["first_ts"], all[0]["ts"]);
    assert_eq!(stats["last_ts"], last["ts"]);
    assert_eq!(
        stats["kinds"]["a.b"],
        json!({"seen": 3, "kept": 3, "sampled_out": 0, "summarized": 0, "dropped": 0,
               "overflow": 0, "preroll": 0, "lost": 0})
    );
    assert_eq!(stats["kinds"]["c.d"]["kept"], 1);

    let human = ok(&blackbox(&["stats", "--dir", s(&dir)]));
    assert!(human.contains("records"), "{human}");
    assert!(human.contains("a.b"), "{human}");
}

#[test]
fn digest_and_verify_agree_and_a_digest_catches_a_rewrite() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    ok(&record(&dir, "{\"kind\":\"a.b\"}\n", &[]));
    let digest = ok(&blackbox(&["digest", "--dir", s(&dir)]))
        .trim()
        .to_owned();
    let (seq, hash) = digest.split_once(':').unwrap();
    assert_eq!(hash.len(), 64);
    let records = replay_json(&dir, &["--type", "checkpoint"]);
    assert_eq!(
        records.last().unwrap()["seq"].as_u64().unwrap(),
        seq.parse::<u64>().unwrap()
    );
    let digest_json: Value =
        serde_json::from_str(&ok(&blackbox(&["digest", "--dir", s(&dir), "--json"]))).unwrap();
    assert_eq!(digest_json["digest"], digest.as_str());

    let verified = ok(&blackbox(&[
        "verify",
        "--dir",
        s(&dir),
        "--digest",
        &digest,
    ]));
    assert!(verified.contains("intact"), "{verified}");
    let report: Value =
        serde_json::from_str(&ok(&blackbox(&["verify", "--dir", s(&dir), "--json"]))).unwrap();
    assert_eq!(report["intact"], true);
    assert_eq!(report["last"], digest.as_str());

    // More records keep the old digest's prefix.
    ok(&record(&dir, "{\"kind\":\"a.b\"}\n", &[]));
    ok(&blackbox(&[
        "verify",
        "--dir",
        s(&dir),
        "--digest",
        &digest,
    ]));
    // A digest of another log does not match.
    let other = tmp.path().join("other");
    ok(&record(
        &other,
        "{\"kind\":\"x.y\"}\n{\"kind\":\"x.y\"}\n",
        &[],
    ));
    let other_digest = ok(&blackbox(&["digest", "--dir", s(&other)]))
        .trim()
        .to_owned();
    let err = fails(&blackbox(&[
        "verify",
        "--dir",
        s(&dir),
        "--digest",
        &other_digest,
    ]));
    assert!(err.contains("digest"), "{err}");
    let err = fails(&blackbox(&[
        "verify",
        "--dir",
        s(&dir),
        "--digest",
        "12:nothex",
    ]));
    assert!(err.contains("SEQ:HASH"), "{err}");
}

#[test]
fn export_writes_events_and_a_manifest_whose_digest_is_the_logs() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    let mut input = String::new();
    for i in 0..10 {
        let kind = if i % 2 == 0 { "arm.move" } else { "cam.frame" };
        input.push_str(&format!(
            "{{\"kind\":\"{kind}\",\"payload\":{{\"i\":{i}}},\"values\":{{\"x\":{i}}},\"source\":\"s\"}}\n"
        ));
    }
    ok(&record(&dir, &input, &[]));
    let out = tmp.path().join("train.jsonl");
    let said = ok(&blackbox(&[
        "export",
        "--dir",
        s(&dir),
        "--format",
        "jsonl",
        "--kind",
        "arm.*",
        "--out",
        s(&out),
    ]));
    assert!(said.contains("exported 5 events"), "{said}");
    let rows = json_lines(&fs::read_to_string(&out).unwrap());
    assert_eq!(rows.len(), 5);
    let replayed = replay_json(&dir, &["--type", "event", "--kind", "arm.*"]);
    assert_eq!(rows, replayed, "an exported row is the replayed record");
    for r in &rows {
        for field in [
            "seq", "ts", "kind", "source", "payload", "values", "weight", "tier", "hash",
        ] {
            assert!(r.get(field).is_some(), "{field} in {r}");
        }
        assert_eq!(r["kind"], "arm.move");
    }
    let manifest_path = tmp.path().join("train.jsonl.manifest.json");
    let manifest: Value =
        serde_json::from_str(&fs::read_to_string(&manifest_path).unwrap()).unwrap();
    let digest = ok(&blackbox(&["digest", "--dir", s(&dir)]))
        .trim()
        .to_owned();
    assert_eq!(manifest["log"]["digest"], digest.as_str());
    assert_eq!(manifest["rows"], 5);
    assert_eq!(manifest["file"]["rows"], 5);
    assert_eq!(manifest["file"]["path"], "train.jsonl");
    assert_eq!(manifest["format"], "jsonl");
    assert_eq!(manifest["first_hash"], rows[0]["hash"]);
    assert_eq!(manifest["last_hash"], rows[4]["hash"]);
    assert_eq!(manifest["first_seq"], rows[0]["seq"]);
    assert_eq!(manifest["last_seq"], rows[4]["seq"]);
    assert_eq!(manifest["query"]["kinds"], json!(["arm.*"]));
    assert_eq!(manifest["query"]["since"], Value::Null);

    // A time range, recorded in the manifest.
    let since = rows[1]["ts"].as_str().unwrap().to_owned();
    let until = rows[3]["ts_ns"].to_string();
    let out2 = tmp.path().join("part.jsonl");
    let said = ok(&blackbox(&[
        "export",
        "--dir",
        s(&dir),
        "--format",
        "jsonl",
        "--since",
        &since,
        "--until",
        &until,
        "--kind",
        "arm.*",
        "--out",
        s(&out2),
        "--json",
    ]));
    let m: Value = serde_json::from_str(said.trim()).unwrap();
    // Records of one batch may share a timestamp (the recorder never lets time go
    // back), so the expected rows are those stamped inside the bounds.
    let (lo, hi) = (
        rows[1]["ts_ns"].as_u64().unwrap(),
        rows[3]["ts_ns"].as_u64().unwrap(),
    );
    let expected: Vec<Value> = rows
        .iter()
        .filter(|r| (lo..=hi).contains(&r["ts_ns"].as_u64().unwrap()))
        .cloned()
        .collect();
    assert!(expected.len() >= 3);
    assert_eq!(m["rows"], expected.len());
    assert_eq!(m["query"]["since"], since.as_str());
    assert_eq!(m["query"]["until_ns"], rows[3]["ts_ns"]);
    let part = json_lines(&fs::read_to_string(&out2).unwrap());
    assert_eq!(part, expected);
    assert!(
        fs::read_dir(tmp.path()).unwrap().all(|e| !e
            .unwrap()
            .file_name()
            .to_string_lossy()
            .contains(".tmp-")),
        "no temporary file left"
    );
}

#[test]
fn reading_commands_refuse_a_missing_or_foreign_directory_and_create_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("missing");
    let foreign = tmp.path().join("foreign");
    fs::create_dir(&foreign).unwrap();
    fs::write(foreign.join("notes.txt"), "hello").unwrap();
    let empty = tmp.path().join("empty");
    fs::create_dir(&empty).unwrap();
    let out = tmp.path().join("x.jsonl");
    for dir in [&missing, &foreign, &empty] {
        let d = s(dir);
        let runs: [Vec<&str>; 5] = [
            vec!["replay", "--dir", d],
            vec!["verify", "--dir", d],
            vec!["digest", "--dir", d],
            vec!["stats", "--dir", d],
            vec!["export", "--dir", d, "--format", "jsonl", "--out", s(&out)],
        ];
        for args in runs {
            let err = fails(&blackbox(&args));
            if dir == &missing {
                assert!(err.contains("does not exist"), "{args:?}: {err}");
            } else {
                assert!(err.contains("is not a Blackbox log"), "{args:?}: {err}");
            }
            assert!(err.contains("--dir"), "says what to do: {err}");
        }
    }
    assert!(!missing.exists(), "a reader never creates a log");
    assert_eq!(fs::read_dir(&empty).unwrap().count(), 0);
    assert_eq!(fs::read_dir(&foreign).unwrap().count(), 1);
    assert!(!out.exists());
    // A foreign directory is refused by the writer too, untouched.
    let err = fails(&record(&foreign, "{\"kind\":\"a.b\"}\n", &[]));
    assert!(err.contains("is not a Blackbox log"), "{err}");
    assert_eq!(fs::read_dir(&foreign).unwrap().count(), 1);
    // So is a home-like directory: only dotfiles and subdirectories (`record` once wrote
    // its segments among them), and a directory named like a segment in a log.
    let home = tmp.path().join("home");
    fs::create_dir_all(home.join("Documents")).unwrap();
    fs::write(home.join(".bashrc"), "alias ll='ls -l'\n").unwrap();
    let err = fails(&record(&home, "{\"kind\":\"a.b\"}\n", &[]));
    assert!(err.contains("is not a Blackbox log"), "{err}");
    let mut names: Vec<String> = fs::read_dir(&home)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, [".bashrc", "Documents"]);
    let log = tmp.path().join("log");
    ok(&record(&log, "{\"kind\":\"a.b\"}\n", &[]));
    fs::create_dir(log.join("00000000000000001000.bbx")).unwrap();
    for args in [
        vec!["verify", "--dir", s(&log)],
        vec!["replay", "--dir", s(&log)],
    ] {
        let err = fails(&blackbox(&args));
        assert!(err.contains("00000000000000001000.bbx"), "{args:?}: {err}");
    }
    let err = fails(&record(&log, "{\"kind\":\"a.b\"}\n", &[]));
    assert!(err.contains("00000000000000001000.bbx"), "{err}");
}

#[test]
fn malformed_arguments_are_refused_naming_the_option() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    ok(&record(&dir, "{\"kind\":\"a.b\"}\n", &[]));
    let d = s(&dir);
    let cases: [(&[&str], &str); 9] = [
        (&["replay", "--dir", d, "--since", "yesterday"], "--since"),
        (
            &["replay", "--dir", d, "--until", "2026-13-01T00:00:00Z"],
            "--until",
        ),
        (
            &["replay", "--dir", d, "--since", "1969-01-01T00:00:00Z"],
            "before the Unix epoch",
        ),
        (&["replay", "--dir", d, "--kind", "a b"], "--kind"),
        (&["replay", "--dir", d, "--kind", "a[b"], "--kind"),
        (&["replay", "--dir", d, "--type", "events"], "--type"),
        (&["replay", "--dir", d, "--from-seq", "three"], "--from-seq"),
        (
            &["export", "--dir", d, "--format", "csv", "--out", "x"],
            "--format",
        ),
        (
            &["record", "--dir", d, "--segment-bytes", "12XB"],
            "--segment-bytes",
        ),
    ];
    for (args, needle) in cases {
        let out = blackbox(args);
        let err = fails(&out);
        assert_eq!(out.status.code(), Some(2), "a usage error: {args:?}");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
    let err = fails(&record(&dir, "", &["--segment-bytes", "100"]));
    assert!(err.contains("--segment-bytes"), "{err}");

    // A policy with a bad duration or glob is refused with its line.
    let policy = tmp.path().join("p.toml");
    fs::write(
        &policy,
        "[[rules]]\nmatch = \"sensor.*\"\ntier = \"summary\"\nwindow = \"1 sec\"\n",
    )
    .unwrap();
    let err = fails(&record(&dir, "", &["--policy", s(&policy)]));
    assert!(err.contains("line 4") && err.contains("duration"), "{err}");
    fs::write(&policy, "[[rules]]\nmatch = \"a[\"\ntier = \"drop\"\n").unwrap();
    let err = fails(&record(&dir, "", &["--policy", s(&policy)]));
    assert!(err.contains("line 2") && err.contains("glob"), "{err}");
    let err = fails(&record(
        &dir,
        "",
        &["--policy", s(&tmp.path().join("none.toml"))],
    ));
    assert!(err.contains("none.toml"), "{err}");
}

#[test]
fn an_invalid_line_stops_the_run_naming_it_and_earlier_records_stay() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    let input =
        "{\"kind\":\"a.one\"}\n\n{\"kind\":\"a.two\"}\n{\"kind\": oops}\n{\"kind\":\"a.three\"}\n";
    let err = fails(&record(&dir, input, &[]));
    assert!(err.contains("line 4"), "{err}");
    assert!(err.contains("--skip-invalid"), "{err}");
    let kinds: Vec<Value> = replay_json(&dir, &["--type", "event"])
        .into_iter()
        .map(|r| r["kind"].clone())
        .collect();
    assert_eq!(kinds, [json!("a.one"), json!("a.two")]);

    for (line, needle) in [
        ("{\"payload\":1}", "kind"),
        ("{\"kind\":\"..bad\"}", "invalid kind"),
        (
            "{\"kind\":\"a.b\",\"values\":{\"x\":\"high\"}}",
            "not a number",
        ),
        ("{\"kind\":\"a.b\",\"event_time\":\"noon\"}", "event_time"),
        ("{\"kind\":\"a.b\",\"colour\":\"red\"}", "unknown field"),
        ("{\"op\":\"jump\"}", "unknown op"),
        ("{\"op\":\"set\",\"value\":1}", "key"),
        ("[1,2]", "JSON object"),
    ] {
        let d = tmp.path().join(format!("l{}", line.len()));
        let err = fails(&record(
            &d,
            &format!("{{\"kind\":\"ok.first\"}}\n{line}\n"),
            &[],
        ));
        assert!(
            err.contains("line 2") && err.contains(needle),
            "{line}: {err}"
        );
    }
}

#[test]
fn skip_invalid_counts_and_skips_bad_lines() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    let input = "{\"kind\":\"a.one\"}\nnot json\n{\"kind\":\"\"}\n{\"kind\":\"a.two\",\"extra\":1}\n{\"kind\":\"a.three\"}\n";
    let out = record(&dir, input, &["--skip-invalid"]);
    let summary = json_lines(&ok(&out)).pop().unwrap();
    assert_eq!(summary["skipped"], 3);
    assert_eq!(summary["events"], 2);
    let stderr = String::from_utf8_lossy(&out.stderr);
    for n in [2, 3, 4] {
        assert!(stderr.contains(&format!("line {n} skipped")), "{stderr}");
    }
    let kinds: Vec<Value> = replay_json(&dir, &["--type", "event"])
        .into_iter()
        .map(|r| r["kind"].clone())
        .collect();
    assert_eq!(kinds, [json!("a.one"), json!("a.three")]);
}

#[test]
fn a_second_writer_is_refused_naming_the_lock_holder() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    let mut first = Recording::start(&dir, &[]);
    first.send(&["{\"kind\":\"a.b\"}".to_owned()]);
    first.sync();
    let pid = first.child.id();
    let err = fails(&record(&dir, "{\"kind\":\"c.d\"}\n", &[]));
    assert!(err.contains("locked"), "{err}");
    assert!(
        err.contains(&format!("pid {pid}")),
        "names the holder: {err}"
    );
    // Readers are welcome meanwhile.
    assert_eq!(replay_json(&dir, &["--type", "event"]).len(), 1);
    let (rest, status, stderr) = first.finish();
    assert!(status.success(), "{stderr}");
    assert!(rest.contains("last_seq"));
    // Once the first writer is gone, the next one gets the log.
    ok(&record(&dir, "{\"kind\":\"c.d\"}\n", &[]));
}

#[test]
fn a_corrupt_log_fails_verify_and_replay_naming_segment_and_offset() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    let mut input = String::new();
    for i in 0..600 {
        input.push_str(&format!("{{\"kind\":\"a.b\",\"payload\":{{\"i\":{i}}}}}\n"));
    }
    ok(&record(&dir, &input, &["--segment-bytes", "4KiB"]));
    ok(&blackbox(&["verify", "--dir", s(&dir)]));
    let segments = blackbox_log::list_segments(&dir).unwrap();
    assert!(segments.len() >= 3);
    // Flip a byte inside the first sealed segment's records.
    let victim = &segments[0].path;
    fs::set_permissions(victim, fs::Permissions::from_mode(0o600)).unwrap();
    let mut bytes = fs::read(victim).unwrap();
    bytes[400] ^= 0x5a;
    fs::write(victim, &bytes).unwrap();

    let name = victim.file_name().unwrap().to_str().unwrap();
    let err = fails(&blackbox(&["verify", "--dir", s(&dir)]));
    assert!(err.contains("corrupt log"), "{err}");
    assert!(err.contains(name), "names the segment: {err}");
    assert!(err.contains("at byte"), "names the offset: {err}");
    let err = fails(&blackbox(&["replay", "--dir", s(&dir)]));
    assert!(err.contains(name) && err.contains("at byte"), "{err}");
    // Records in later segments still read (the chain is checked from the seek point).
    let later = segments[2].first_seq.to_string();
    assert!(!replay_json(&dir, &["--from-seq", &later]).is_empty());
}

#[test]
fn a_keyed_log_needs_its_key_to_verify() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    let key = tmp.path().join("key");
    fs::write(
        &key,
        "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff\n",
    )
    .unwrap();
    let raw = tmp.path().join("key.bin");
    fs::write(&raw, [7u8; 32]).unwrap();
    ok(&record(
        &dir,
        "{\"kind\":\"a.b\"}\n",
        &["--key-file", s(&key)],
    ));
    ok(&blackbox(&[
        "verify",
        "--dir",
        s(&dir),
        "--key-file",
        s(&key),
    ]));
    let err = fails(&blackbox(&["verify", "--dir", s(&dir)]));
    assert!(err.contains("--key-file"), "{err}");
    let err = fails(&blackbox(&[
        "verify",
        "--dir",
        s(&dir),
        "--key-file",
        s(&raw),
    ]));
    assert!(err.contains("key"), "{err}");
    let bad = tmp.path().join("bad");
    fs::write(&bad, "short").unwrap();
    let err = fails(&blackbox(&[
        "verify",
        "--dir",
        s(&dir),
        "--key-file",
        s(&bad),
    ]));
    assert!(err.contains("32"), "{err}");
    // Replay reads it with its key, or without (checksums only, with a warning).
    assert_eq!(
        replay_json(&dir, &["--type", "event", "--key-file", s(&key)]).len(),
        1
    );
    let out = blackbox(&["replay", "--dir", s(&dir), "--json"]);
    assert!(ok(&out).contains("a.b"));
    assert!(String::from_utf8_lossy(&out.stderr).contains("warning"));
    // Appending needs the same key.
    let err = fails(&record(
        &dir,
        "{\"kind\":\"a.b\"}\n",
        &["--key-file", s(&raw)],
    ));
    assert!(err.contains("key"), "{err}");
}

#[test]
fn a_replay_around_an_incident_is_the_preroll_the_trigger_and_the_postroll() {
    // This test once waited out the pre-roll with two 3 s sleeps on the wall clock; the
    // log is now recorded on a manual clock, so the phases are seconds apart without
    // waiting, and the command reads it back.
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    let policy = Policy::from_toml_str(
        r#"
[[rules]]
match = "sensor.*"
tier = "summary"
window = "1h"

[incident]
triggers = ["failure.*"]
preroll = "2s"
postroll = "2s"
"#,
    )
    .unwrap();
    let t0: u64 = 1_767_323_045_000_000_000;
    let clock = ManualClock::new(t0);
    let recorder = Recorder::open(
        &dir,
        Config::new()
            .policy(policy)
            .clock(Arc::new(clock.clone()))
            .checkpoint_interval_ns(None),
    )
    .unwrap();
    let ms = 1_000_000u64;
    let phase = |name: &str, start_ns: u64| {
        for i in 0..5u32 {
            clock.set_ns(start_ns + u64::from(i) * 10 * ms);
            let payload = format!("{{\"phase\":\"{name}\",\"i\":{i}}}");
            recorder
                .record(
                    &Event::new("sensor.imu")
                        .json(&payload)
                        .values(&[("ax", f64::from(i))]),
                )
                .unwrap();
        }
    };
    phase("before", t0);
    recorder.sync().unwrap();
    // 3 s later: "before" has left the 2 s pre-roll ring.
    phase("pre", t0 + 3_000 * ms);
    clock.set_ns(t0 + 3_100 * ms);
    recorder
        .record(&Event::new("failure.gripper").json(r#"{"slip":true}"#))
        .unwrap();
    phase("post", t0 + 3_200 * ms);
    recorder.sync().unwrap();
    // 3 s later still: the 2 s post-roll is over.
    phase("after", t0 + 6_200 * ms);
    recorder.close().unwrap();

    let incidents = replay_json(&dir, &["--type", "incident"]);
    assert_eq!(incidents.len(), 1, "{incidents:?}");
    let incident = &incidents[0];
    assert_eq!(incident["kind"], "failure.gripper");
    assert_eq!(incident["trigger_kind"], "failure.gripper");
    assert_eq!(incident["preroll_events"], 5);
    let trigger_seq = incident["trigger_seq"].as_u64().unwrap();
    let from = incident["preroll_start_ns"].as_u64().unwrap();
    let to = incident["postroll_end_ns"].as_u64().unwrap();
    assert_eq!(
        blackbox_replay::parse_time(incident["preroll_start"].as_str().unwrap()).unwrap(),
        from
    );

    let window = replay_json(
        &dir,
        &[
            "--type",
            "event",
            "--since",
            &from.to_string(),
            "--until",
            &to.to_string(),
        ],
    );
    let got: Vec<(String, String)> = window
        .iter()
        .map(|r| {
            let phase = r["payload"]["phase"]
                .as_str()
                .unwrap_or("trigger")
                .to_owned();
            (phase, r["tier"].as_str().unwrap().to_owned())
        })
        .collect();
    let mut expected = vec![("pre".to_owned(), "preroll".to_owned()); 5];
    expected.push(("trigger".to_owned(), "full".to_owned()));
    expected.extend(vec![("post".to_owned(), "postroll".to_owned()); 5]);
    assert_eq!(got, expected, "{window:?}");
    assert_eq!(window[5]["seq"].as_u64().unwrap(), trigger_seq);
    assert_eq!(window[5]["kind"], "failure.gripper");
    let order: Vec<u64> = window
        .iter()
        .map(|r| r["payload"]["i"].as_u64().unwrap_or(99))
        .collect();
    assert_eq!(order, [0, 1, 2, 3, 4, 99, 0, 1, 2, 3, 4]);

    // The events outside the window were summarized, never written as events.
    let events = replay_json(&dir, &["--type", "event"]);
    assert_eq!(events.len(), 11);
    let counted: u64 = replay_json(&dir, &["--type", "summary"])
        .iter()
        .map(|r| r["count"].as_u64().unwrap())
        .sum();
    assert_eq!(
        counted, 15,
        "before, pre and after are summarized; post is postroll"
    );
    let stats: Value =
        serde_json::from_str(&ok(&blackbox(&["stats", "--dir", s(&dir), "--json"]))).unwrap();
    assert_eq!(
        stats["kinds"]["sensor.imu"],
        json!({"seen": 20, "kept": 5, "sampled_out": 0, "summarized": 15, "dropped": 0,
               "overflow": 0, "preroll": 5, "lost": 0})
    );
}

#[test]
fn every_acknowledged_record_replays_after_sigkill() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    let mut acknowledged: BTreeMap<u64, u64> = BTreeMap::new(); // id -> ack seq
    let mut next_id = 0u64;
    for round in 0..4u64 {
        let mut rec = Recording::start(&dir, &["--durability", "sync"]);
        for batch in 0..(3 + round) {
            let lines: Vec<String> = (0..(5 + batch * 7))
                .map(|_| {
                    next_id += 1;
                    format!("{{\"kind\":\"crash.test\",\"payload\":{{\"id\":{next_id}}}}}")
                })
                .collect();
            rec.send(&lines);
            let ack = rec.sync();
            for id in (next_id + 1 - lines.len() as u64)..=next_id {
                acknowledged.insert(id, ack);
            }
        }
        // Events in flight, never acknowledged, then SIGKILL.
        let lines: Vec<String> = (0..50)
            .map(|_| {
                next_id += 1;
                format!("{{\"kind\":\"crash.test\",\"payload\":{{\"id\":{next_id}}}}}")
            })
            .collect();
        rec.send(&lines);
        rec.kill();

        let events = replay_json(&dir, &["--type", "event", "--kind", "crash.*"]);
        let present: BTreeMap<u64, u64> = events
            .iter()
            .map(|r| {
                (
                    r["payload"]["id"].as_u64().unwrap(),
                    r["seq"].as_u64().unwrap(),
                )
            })
            .collect();
        for (id, ack) in &acknowledged {
            let seq = present
                .get(id)
                .unwrap_or_else(|| panic!("acknowledged id {id} lost in round {round}"));
            assert!(seq <= ack, "id {id} at seq {seq}, acknowledged by {ack}");
        }
        // The chain is intact: a torn tail at most, which the next writer cuts.
        ok(&blackbox(&["verify", "--dir", s(&dir)]));
    }
}

/// Guards the README's promise that what a crash tore is reported: `record` on a log
/// whose last write was torn used to cut it without a word. It now says what it cut
/// (bytes, file, the first seq lost) on stderr and in its summary, and the log keeps a
/// recovery record that `replay` shows a later reviewer.
#[test]
fn record_on_a_torn_log_says_what_it_cut_and_the_log_keeps_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("flight");
    ok(&record(&dir, "{\"kind\": \"cmd.move\"}\n", &[]));
    let records = replay_json(&dir, &[]);
    let last_seq = records.last().unwrap()["seq"].as_u64().unwrap();
    // A crash mid-write: 100 bytes of a block that never completed.
    let segment = blackbox::log::list_segments(&dir)
        .unwrap()
        .pop()
        .unwrap()
        .path;
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(&segment)
        .unwrap();
    std::io::Write::write_all(&mut file, &[0xab; 100]).unwrap();
    drop(file);

    let out = record(&dir, "{\"kind\": \"cmd.move\"}\n", &[]);
    let stdout = ok(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let name = segment.file_name().unwrap().to_str().unwrap();
    assert!(
        stderr.contains("100 bytes") && stderr.contains(name),
        "stderr: {stderr}"
    );
    assert!(
        stderr.contains(&format!("seq {}", last_seq + 1)),
        "stderr: {stderr}"
    );
    let summary = json_lines(&stdout).pop().unwrap();
    let recovered = &summary["recovered"];
    assert_eq!(recovered["torn_bytes"], 100, "{summary}");
    assert_eq!(recovered["first_lost_seq"], last_seq + 1, "{summary}");
    assert!(
        recovered["segment"].as_str().unwrap().ends_with(name),
        "{summary}"
    );

    // The log keeps it, as the first record of the session that cut it.
    let recovery = replay_json(&dir, &["--type", "recovery"]);
    assert_eq!(recovery.len(), 1, "{recovery:?}");
    let r = &recovery[0];
    assert_eq!(r["seq"], last_seq + 1);
    assert_eq!(
        (r["torn_bytes"].as_u64(), r["first_lost_seq"].as_u64()),
        (Some(100), Some(last_seq + 1))
    );
    assert_eq!(r["segment"], name);
    assert!(r["detail"].as_str().unwrap().contains("at byte"), "{r}");
    // A clean reopen writes none.
    let again = record(&dir, "", &[]);
    let summary = json_lines(&ok(&again)).pop().unwrap();
    assert!(summary["recovered"].is_null(), "{summary}");
    assert_eq!(replay_json(&dir, &["--type", "recovery"]).len(), 1);
}

/// Guards names past the recorder's limits arriving through `record`: three events
/// with 60 000 value names each made the log unwritable and lost the good line after
/// them. The event is refused as its line's error, naming the line and the limit, and
/// with `--skip-invalid` the lines after it are recorded.
#[test]
fn record_refuses_an_event_past_the_name_limits_as_its_lines_error() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("flight");
    let values: serde_json::Map<String, Value> = (0..=blackbox::VALUES_PER_EVENT_MAX)
        .map(|i| (format!("v{i}"), json!(1.0)))
        .collect();
    let wide = json!({"kind": "sensor.wide", "values": values}).to_string();
    let input = format!("{{\"kind\": \"cmd.a\"}}\n{wide}\n{{\"kind\": \"cmd.b\"}}\n");
    let err = fails(&record(&dir, &input, &[]));
    assert!(
        err.contains("line 2") && err.contains("1025 values") && err.contains("1024"),
        "{err}"
    );
    let out = record(&dir, &input, &["--skip-invalid"]);
    let stdout = ok(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("line 2 skipped"), "{stderr}");
    let summary = json_lines(&stdout).pop().unwrap();
    assert_eq!(summary["skipped"], 1, "{summary}");
    assert_eq!(summary["kinds"]["cmd.b"]["seen"], 1, "{summary}");
    assert!(summary["kinds"].get("sensor.wide").is_none(), "{summary}");
}

/// Guards the per-log name limit through `record` (a log once grew past what it could
/// reopen): when the log already holds every name it may, an event with a new kind is
/// refused as its line's error, naming the line and the limit; the lines after it are
/// recorded with `--skip-invalid`, and the log opens again.
#[test]
fn record_refuses_a_new_kind_past_the_logs_name_limit_naming_its_line() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("flight");
    let max = blackbox::NAMES_PER_LOG_MAX as usize;
    let mut input: String = (0..max)
        .map(|i| format!("{{\"kind\":\"k{i}\"}}\n"))
        .collect();
    input.push_str("{\"kind\":\"one.too.many\"}\n{\"kind\":\"k1\"}\n");
    let out = record(&dir, &input, &["--skip-invalid"]);
    let stdout = ok(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let line = max + 1;
    assert!(
        stderr.contains(&format!("line {line} skipped"))
            && stderr.contains(&format!("limit of {max}"))
            && stderr.contains("one.too.many"),
        "{stderr}"
    );
    let summary = json_lines(&stdout).pop().unwrap();
    assert_eq!(summary["skipped"], 1, "{summary}");
    assert_eq!(summary["kinds"]["k1"]["seen"], 2, "{summary}");
    // Without --skip-invalid, the same line stops the run, named.
    let err = fails(&record(
        &dir,
        "{\"kind\":\"k2\"}\n{\"kind\":\"also.new\"}\n",
        &[],
    ));
    assert!(
        err.contains("line 2") && err.contains(&format!("limit of {max}")),
        "{err}"
    );
    ok(&blackbox(&["verify", "--dir", s(&dir)]));
}
