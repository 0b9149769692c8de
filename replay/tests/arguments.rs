//! The command's arguments as a newcomer meets them: one name for one thing, defaults
//! that need no flag, `--json` everywhere, relative times, and errors that never show a
//! parser's internals.

#![expect(clippy::unwrap_used, reason = "tests fail loudly on any error")]

mod common;

use std::fs;

use common::{blackbox, json_lines, ok, record, s};

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
