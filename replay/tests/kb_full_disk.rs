//! `kb put` when the disk takes no more (issue: a Rust debug dump instead of a
//! sentence). A file-size limit (`ulimit -f`, with SIGXFSZ ignored, so a write past it
//! fails with EFBIG as a full disk fails with ENOSPC) stops the write at every point in
//! turn: opening the knowledge-base view, appending the commit to the log, updating the
//! view after the log took it. Each ends in one sentence and exit 1, or succeeds; the
//! log stays intact, and a commit the log took is the knowledge base's next answer.

#![expect(clippy::unwrap_used, reason = "tests fail loudly on any error")]

mod common;

use std::path::Path;
use std::process::Command;

use common::{blackbox, ok, record, s};

/// Copies a log directory (files and the `kb/` tree).
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// `blackbox kb put --dir DIR door VALUE --evidence 1` with files limited to `kib` KiB.
fn put_limited(dir: &Path, value: &str, kib: u64) -> std::process::Output {
    let script = format!(
        "trap '' XFSZ; ulimit -f {kib}; exec \"$0\" kb put --dir \"$1\" door '{value}' --evidence 1"
    );
    Command::new("bash")
        .args(["-c", &script, env!("CARGO_BIN_EXE_blackbox"), s(dir)])
        .output()
        .unwrap()
}

/// What `kb get door --json` says the value is (`None`: no fact).
fn door(dir: &Path) -> Option<String> {
    let out = blackbox(&["kb", "get", "--dir", s(dir), "door", "--json"]);
    if !out.status.success() {
        return None;
    }
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    Some(v["value"].as_str().unwrap().to_owned())
}

/// The value of the write the limits stop: long enough that the view's write of it (the
/// fact, its history entry and the commit) passes a limit that the log's (the commit,
/// after the snapshot the first commit was followed by) stays under.
static CLOSED: std::sync::LazyLock<String> =
    std::sync::LazyLock::new(|| format!("closed{}", ".".repeat(600)));

#[test]
fn a_kb_put_that_runs_out_of_disk_says_so_in_a_sentence_and_loses_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("base");
    ok(&record(
        &base,
        "{\"kind\":\"obs.door\",\"ack\":true}\n",
        &[],
    ));
    // Without a view yet: the limit stops fjall creating it.
    let fresh = tmp.path().join("fresh");
    copy_dir(&base, &fresh);
    let out = put_limited(&fresh, "\"open\"", 16);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("File too large"), "{stderr}");
    ok(&blackbox(&["verify", "--dir", s(&fresh)]));

    // With a view: each limit stops a later or earlier write.
    ok(&blackbox(&[
        "kb",
        "put",
        "--dir",
        s(&base),
        "door",
        "\"open\"",
        "--evidence",
        "1",
    ]));
    let (mut log_refused, mut view_behind, mut done) = (0, 0, 0);
    for kib in 1..=8 {
        let dir = tmp.path().join(format!("limit{kib}"));
        copy_dir(&base, &dir);
        let out = put_limited(&dir, &format!("\"{}\"", CLOSED.as_str()), kib);
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        // One sentence on one line, no Rust debug output, no panic.
        assert!(stderr.lines().count() <= 1, "{kib} KiB: {stderr}");
        for debug in ["Os {", "Custom {", "kind:", "panicked", "RUST_BACKTRACE"] {
            assert!(!stderr.contains(debug), "{kib} KiB: {stderr}");
        }
        ok(&blackbox(&["verify", "--dir", s(&dir)]));
        match out.status.code() {
            Some(0) => {
                done += 1;
                assert_eq!(door(&dir).as_deref(), Some(CLOSED.as_str()), "{kib} KiB");
            }
            Some(1) if stderr.contains("committed as version 2") => {
                // The log took the commit; the view catches up at the next read.
                view_behind += 1;
                assert!(stderr.contains("catches it up"), "{stderr}");
                assert_eq!(door(&dir).as_deref(), Some(CLOSED.as_str()), "{kib} KiB");
            }
            Some(1) => {
                // Refused before the log took anything: the fact is as it was.
                log_refused += 1;
                assert!(stderr.starts_with("blackbox: "), "{stderr}");
                assert_eq!(door(&dir).as_deref(), Some("open"), "{kib} KiB: {stderr}");
            }
            other => panic!("{kib} KiB: exit {other:?}: {stderr}"),
        }
    }
    // The sweep reached each failure point (sizes of a 1-event log and a small view).
    assert!(
        log_refused > 0 && view_behind > 0 && done > 0,
        "{log_refused} {view_behind} {done}"
    );
}
