//! The command's arguments as a newcomer meets them: one name for one thing, defaults
//! that need no flag, `--json` everywhere, relative times, and errors that never show a
//! parser's internals.

#![expect(clippy::unwrap_used, reason = "tests fail loudly on any error")]

mod common;

use std::fs;

use common::{blackbox, fails, json_lines, ok, record, s};

/// A small log: `n` events of kind `a.b`, then what `record` writes at close.
fn small_log(dir: &std::path::Path, n: usize) {
    let input: String = (0..n)
        .map(|i| format!("{{\"kind\":\"a.b\",\"payload\":{{\"i\":{i}}}}}\n"))
        .collect();
    ok(&record(dir, &input, &[]));
}

#[test]
fn kb_writes_take_reason_and_message_as_one_option() {
    // `kb put` took only --message and `kb refute` only --reason, for the same thing.
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    small_log(&dir, 3);
    let d = s(&dir);
    ok(&blackbox(&[
        "kb",
        "put",
        "cup.mass",
        "0.4",
        "--evidence",
        "1",
        "--reason",
        "weighed",
        "--dir",
        d,
    ]));
    ok(&blackbox(&[
        "kb",
        "put",
        "cup.color",
        "\"red\"",
        "--evidence",
        "1",
        "--message",
        "seen",
        "--dir",
        d,
    ]));
    ok(&blackbox(&[
        "kb",
        "refute",
        "cup.mass",
        "0.4",
        "--evidence",
        "2",
        "--message",
        "it slipped",
        "--dir",
        d,
    ]));
    ok(&blackbox(&[
        "kb",
        "refute",
        "cup.color",
        "\"red\"",
        "--evidence",
        "2",
        "--reason",
        "it is blue",
        "--dir",
        d,
    ]));
    let messages: Vec<String> = json_lines(&ok(&blackbox(&["kb", "log", "--dir", d, "--json"])))
        .iter()
        .map(|c| c["message"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(messages, ["weighed", "seen", "it slipped", "it is blue"]);
}

#[test]
fn export_defaults_to_jsonl_and_writes_to_stdout_with_out_dash() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    small_log(&dir, 4);
    let file = tmp.path().join("x.jsonl");
    // No --format: JSON lines.
    ok(&blackbox(&["export", "--dir", s(&dir), "--out", s(&file)]));
    let rows = json_lines(&fs::read_to_string(&file).unwrap());
    assert_eq!(rows.len(), 4);
    // --out -: the rows on stdout, nothing else there; the summary on stderr.
    let out = blackbox(&["export", "--dir", s(&dir), "--out", "-"]);
    let stdout = ok(&out);
    let piped = json_lines(&stdout);
    assert_eq!(piped.len(), 4, "{stdout}");
    for (a, b) in rows.iter().zip(&piped) {
        assert_eq!(a["seq"], b["seq"]);
        assert_eq!(a["hash"], b["hash"]);
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("exported 4 events"), "{stderr}");
    assert!(
        !tmp.path().join("-").exists(),
        "no file named - was created"
    );
}

/// Every line of a run's stdout parses as JSON, and there is at least one.
fn all_json(args: &[&str]) -> Vec<serde_json::Value> {
    let text = ok(&blackbox(args));
    let lines = json_lines(&text);
    assert!(!lines.is_empty(), "{args:?} printed nothing");
    lines
}

#[test]
fn every_subcommand_takes_json() {
    // `record` and `demo` refused --json; verify --json said "digest_matched": false
    // when no digest had been given.
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    let d = s(&dir);
    let out = record(
        &dir,
        "{\"kind\":\"a.b\",\"payload\":1}\n{\"kind\":\"a.b\",\"payload\":2}\n",
        &["--json"],
    );
    let lines = json_lines(&ok(&out));
    assert!(lines.last().unwrap()["last_seq"].is_u64());
    let file = tmp.path().join("x.jsonl");
    let f = s(&file);
    for args in [
        vec!["replay", "--dir", d, "--json"],
        vec!["verify", "--dir", d, "--json"],
        vec!["digest", "--dir", d, "--json"],
        vec!["stats", "--dir", d, "--json"],
        vec!["state", "--dir", d, "--at", "now", "--json"],
        vec![
            "kb",
            "put",
            "k",
            "1",
            "--evidence",
            "1",
            "--dir",
            d,
            "--json",
        ],
        vec![
            "kb",
            "put",
            "k",
            "2",
            "--evidence",
            "1",
            "--confidence",
            "0.1",
            "--dir",
            d,
            "--json",
        ],
        vec!["kb", "get", "k", "--dir", d, "--json"],
        vec!["kb", "matching", "--context", "{}", "--dir", d, "--json"],
        vec!["kb", "history", "k", "--dir", d, "--json"],
        vec!["kb", "log", "--dir", d, "--json"],
        vec!["kb", "diff", "1", "2", "--dir", d, "--json"],
        vec!["kb", "contradictions", "--dir", d, "--json"],
        vec![
            "kb",
            "refute",
            "k",
            "1",
            "--evidence",
            "2",
            "--reason",
            "no",
            "--dir",
            d,
            "--json",
        ],
        vec!["kb", "rejected", "--dir", d, "--json"],
        vec![
            "kb",
            "revert",
            "1",
            "--evidence",
            "2",
            "--reason",
            "back",
            "--dir",
            d,
            "--json",
        ],
        vec![
            "kb",
            "retract",
            "k",
            "--evidence",
            "2",
            "--reason",
            "gone",
            "--dir",
            d,
            "--json",
        ],
        vec!["kb", "rebuild", "--dir", d, "--json"],
        vec!["export", "--dir", d, "--out", f, "--json"],
        vec!["export", "--check", f, "--json"],
    ] {
        all_json(&args);
    }
    let demo = tmp.path().join("demo");
    let review = all_json(&["demo", "--dir", s(&demo), "--seed", "3", "--json"]);
    assert_eq!(review.len(), 1);
    let r = &review[0];
    assert_eq!(r["incident"]["trigger_kind"], "failure.gripper_slip");
    assert_eq!(r["verify"]["intact"], true);
    assert!(r["stats"]["kinds"]["sensor.imu"]["seen"].as_u64().unwrap() > 0);
    assert!(!r["kb_commits"].as_array().unwrap().is_empty());
    // No digest given: whether it matched is null, not false.
    let v = &all_json(&["verify", "--dir", d, "--json"])[0];
    assert_eq!(v["digest_matched"], serde_json::Value::Null);
    let digest = ok(&blackbox(&["digest", "--dir", d])).trim().to_owned();
    let v = &all_json(&["verify", "--dir", d, "--digest", &digest, "--json"])[0];
    assert_eq!(v["digest_matched"], true);
}

#[test]
fn times_relative_to_now_select_a_recent_log() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    small_log(&dir, 5);
    let d = s(&dir);
    let events = |extra: &[&str]| {
        let mut args = vec!["replay", "--dir", d, "--type", "event", "--json"];
        args.extend_from_slice(extra);
        let out = blackbox(&args);
        (
            json_lines(&ok(&out)),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    assert_eq!(events(&["--since", "-1h"]).0.len(), 5);
    assert_eq!(events(&["--since", "-1h", "--until", "now"]).0.len(), 5);
    let (none, note) = events(&["--since", "now"]);
    assert!(none.is_empty());
    assert!(note.contains("after the log's last record"), "{note}");
    let (none, note) = events(&["--until", "-1h"]);
    assert!(none.is_empty());
    assert!(note.contains("before the log's first record"), "{note}");
}

#[test]
fn state_and_kb_get_take_relative_times() {
    // `state --at -5s` and `kb get --at -5s` were refused as "unknown option -5".
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    small_log(&dir, 3);
    let d = s(&dir);
    ok(&blackbox(&[
        "kb",
        "put",
        "door",
        "\"open\"",
        "--evidence",
        "1",
        "--dir",
        d,
    ]));
    // An hour ago the log did not exist yet; `-0s` is now, after every record.
    let then = &all_json(&["state", "--dir", d, "--at", "-1h", "--json"])[0];
    assert_eq!(then["kb_version"], 0, "{then}");
    let now = &all_json(&["state", "--dir", d, "--at", "-0s", "--json"])[0];
    assert_eq!(now["kb_version"], 1, "{now}");
    assert_eq!(now["kb"]["door"]["value"], "open", "{now}");
    let fact = &all_json(&["kb", "get", "door", "--dir", d, "--at", "-0s", "--json"])[0];
    assert_eq!(fact["value"], "open", "{fact}");
    let err = fails(&blackbox(&["kb", "get", "door", "--dir", d, "--at", "-1h"]));
    assert!(err.contains("not found"), "{err}");
}

#[test]
fn around_a_seq_or_an_incident_selects_a_window() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("demo");
    ok(&blackbox(&["demo", "--dir", s(&dir), "--seed", "7"]));
    let d = s(&dir);
    let json = |extra: &[&str]| {
        let mut args = vec!["replay", "--dir", d, "--json", "--type", "event"];
        args.extend_from_slice(extra);
        json_lines(&ok(&blackbox(&args)))
    };
    let inc = json(&[]).len();
    assert!(inc > 0);
    let marker = &json_lines(&ok(&blackbox(&[
        "replay", "--dir", d, "--json", "--type", "incident",
    ])))[0];
    let ns = |v: &serde_json::Value, f: &str| v[f].as_u64().unwrap();
    let (from, to, trigger) = (
        ns(marker, "preroll_start_ns"),
        ns(marker, "postroll_end_ns"),
        ns(marker, "trigger_ts_ns"),
    );
    // Around the incident: its own pre-roll and post-roll, the same as --since/--until.
    let around = json(&["--around", "incident"]);
    let explicit = json(&["--since", &from.to_string(), "--until", &to.to_string()]);
    assert_eq!(around, explicit);
    assert_eq!(json(&["--around", "incident:1"]), around);
    assert_eq!(json(&["--around", "incident:-1"]), around);
    // With a window: that far on each side of the trigger.
    let near = json(&["--around", "incident", "--window", "20ms"]);
    assert!(!near.is_empty());
    for r in &near {
        let t = ns(r, "ts_ns");
        assert!(
            t + 20_000_000 >= trigger && t <= trigger + 20_000_000,
            "{r}"
        );
    }
    // Around a seq: the record's own time.
    let seq = ns(marker, "trigger_seq").to_string();
    let by_seq = json(&["--around", &seq, "--window", "20ms"]);
    assert_eq!(by_seq, near);
    // What does not exist is refused, saying what there is.
    let err = fails(&blackbox(&["replay", "--dir", d, "--around", "incident:2"]));
    assert!(err.contains("holds 1 incident"), "{err}");
    let err = fails(&blackbox(&["replay", "--dir", d, "--around", "99999999"]));
    assert!(err.contains("last seq"), "{err}");
    let err = fails(&blackbox(&["replay", "--dir", d, "--around", "yesterday"]));
    assert!(err.contains("--around"), "{err}");
    let err = fails(&blackbox(&["replay", "--dir", d, "--window", "1s"]));
    assert!(
        err.contains("--window") || err.contains("--around"),
        "{err}"
    );
    // A window beside --since or --until is refused, not silently ignored.
    for bound in ["--since", "--until"] {
        let err = fails(&blackbox(&[
            "replay", "--dir", d, bound, "-1h", "--window", "1s",
        ]));
        assert!(err.contains("--window") && err.contains(bound), "{err}");
    }
}

#[test]
fn limit_and_excluding_kinds() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    let input =
        "{\"kind\":\"a.x\"}\n{\"kind\":\"a.y\"}\n{\"kind\":\"debug.z\"}\n{\"kind\":\"a.x\"}\n";
    ok(&record(&dir, input, &[]));
    let d = s(&dir);
    let json = |extra: &[&str]| {
        let mut args = vec!["replay", "--dir", d, "--json"];
        args.extend_from_slice(extra);
        json_lines(&ok(&blackbox(&args)))
    };
    let all = json(&[]);
    assert_eq!(json(&["--limit", "3"]), all[..3].to_vec());
    assert!(json(&["--limit", "0"]).is_empty());
    // An exclusion alone keeps the records without a kind.
    let no_debug = json(&["--kind", "!debug.*"]);
    assert_eq!(
        no_debug.len(),
        all.iter().filter(|r| r["kind"] != "debug.z").count()
    );
    assert!(no_debug.iter().any(|r| r["type"] == "accounting"));
    let kinds: Vec<String> = json(&["--kind", "a.*", "--kind", "!a.y"])
        .iter()
        .map(|r| r["kind"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(kinds, ["a.x", "a.x"]);
}

#[test]
fn a_filter_that_cannot_match_says_so_on_stderr() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    small_log(&dir, 3);
    let d = s(&dir);
    for (extra, needle) in [
        (
            vec![
                "--since",
                "2000000000000000000",
                "--until",
                "1000000000000000000",
            ],
            "before it starts",
        ),
        (
            vec!["--from-seq", "9", "--to-seq", "2"],
            "--to-seq 2 is before --from-seq 9",
        ),
        (vec!["--from-seq", "100000"], "past the log's last seq"),
        (
            vec!["--kind", "nothing.*"],
            "no kind the log has counted matches --kind nothing.*",
        ),
    ] {
        let mut args = vec!["replay", "--dir", d];
        args.extend_from_slice(&extra);
        let out = blackbox(&args);
        assert!(ok(&out).is_empty(), "{extra:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.starts_with("blackbox: note: "), "{extra:?}: {err}");
        assert!(err.contains(needle), "{extra:?}: {err}");
    }
    // The export says so too.
    let out = blackbox(&[
        "export",
        "--dir",
        d,
        "--out",
        s(&tmp.path().join("x.jsonl")),
        "--kind",
        "nothing.*",
    ]);
    ok(&out);
    assert!(String::from_utf8_lossy(&out.stderr).contains("no kind the log has counted"));
}

#[test]
fn errors_never_show_a_parsers_words() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    small_log(&dir, 2);
    let d = s(&dir);
    let internals = [
        "line 1 column",
        "expected value at",
        "failed to parse",
        "invalid digit",
        "tip:",
        "Usage:",
        "error:",
        "For more information",
    ];
    let mut runs: Vec<(std::process::Output, &str)> = vec![
        (
            blackbox(&["replay", "--dir", d, "--since", "yesterday"]),
            "--since",
        ),
        (
            blackbox(&["replay", "--dir", d, "--until", "2026-13-01T00:00:00Z"]),
            "--until",
        ),
        (blackbox(&["replay", "--dir", d, "--limit", "x"]), "--limit"),
        (
            blackbox(&["replay", "--dir", d, "--frobnicate"]),
            "--frobnicate",
        ),
        (
            blackbox(&["replay", "--dir", d, "--type", "events"]),
            "--type",
        ),
        (
            blackbox(&["export", "--check", "a", "--out", "b"]),
            "--check",
        ),
        (blackbox(&["replay"]), "--dir"),
        (blackbox(&["frob"]), "frob"),
        (
            blackbox(&["kb", "put", "k", "x", "--evidence", "1", "--dir", d]),
            "VALUE_JSON",
        ),
        (
            blackbox(&["kb", "get", "k", "--context", "{", "--dir", d]),
            "--context",
        ),
    ];
    runs.push((record(&dir, "{\"kind\": oops}\n", &[]), "line 1"));
    for (out, needle) in runs {
        let err = fails(&out);
        assert!(err.contains(needle), "{err}");
        for word in internals {
            assert!(!err.contains(word), "{word:?} in {err}");
        }
    }
}

#[test]
fn duplicate_keys_are_refused_naming_the_line_and_the_key() {
    // `{"kind": "a", "kind": "b"}` recorded `b` silently; a payload's duplicate key lost
    // the first value.
    let tmp = tempfile::tempdir().unwrap();
    for (line, key) in [
        (r#"{"kind": "a.one", "kind": "a.two"}"#, "kind"),
        (r#"{"kind": "a.b", "payload": {"x": 1, "x": 2}}"#, "x"),
        (
            r#"{"kind": "a.b", "payload": [{"deep": {"y": 1, "y": 1}}]}"#,
            "y",
        ),
        (r#"{"kind": "a.b", "values": {"f": 1, "f": 2}}"#, "f"),
        (
            r#"{"op": "set", "key": "k", "value": {"z": 1, "z": 2}}"#,
            "z",
        ),
    ] {
        let dir = tmp.path().join(format!("l{}", line.len()));
        let err = fails(&record(
            &dir,
            &format!("{{\"kind\":\"ok.first\"}}\n{line}\n"),
            &[],
        ));
        assert!(
            err.contains("line 2") && err.contains(&format!("{key:?} appears twice")),
            "{line}: {err}"
        );
        // The line before it is recorded; the duplicate is not.
        let kinds: Vec<String> = common::replay_json(&dir, &["--type", "event"])
            .iter()
            .map(|r| r["kind"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(kinds, ["ok.first"], "{line}");
    }
    // The same in the knowledge base's JSON arguments, refused before the log opens.
    let dir = tmp.path().join("kb");
    small_log(&dir, 2);
    let d = s(&dir);
    for args in [
        vec![
            "kb",
            "put",
            "k",
            r#"{"a": 1, "a": 2}"#,
            "--evidence",
            "1",
            "--dir",
            d,
        ],
        vec![
            "kb",
            "put",
            "k",
            "1",
            "--evidence",
            "1",
            "--conditions",
            r#"{"l": 1, "l": 2}"#,
            "--dir",
            d,
        ],
    ] {
        let err = fails(&blackbox(&args));
        assert!(err.contains("appears twice"), "{args:?}: {err}");
    }
    assert!(json_lines(&ok(&blackbox(&["kb", "log", "--dir", d, "--json"]))).is_empty());
}
