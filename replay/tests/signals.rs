//! `blackbox record` stopped by a signal: a supervisor's SIGTERM or a Ctrl-C closes the
//! log as the end of input would, so the run's accounting is complete.

#![expect(clippy::unwrap_used, reason = "tests fail loudly on any error")]

mod common;

use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;
use std::time::{SystemTime, UNIX_EPOCH};

use common::{bin, blackbox, ok, s};
use serde_json::Value;

fn now_ns() -> u64 {
    u64::try_from(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_nanos(),
    )
    .unwrap()
}

fn stopped_by(signal: &str) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    let started = now_ns();
    let mut child = bin()
        .args(["record", "--dir", s(&dir)])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    for i in 0..100 {
        writeln!(stdin, r#"{{"kind":"action.step","values":{{"i":{i}}}}}"#).unwrap();
    }
    writeln!(stdin, r#"{{"op":"sync"}}"#).unwrap();
    stdin.flush().unwrap();
    let mut ack = String::new();
    stdout.read_line(&mut ack).unwrap();
    // Seq 0 is the policy in force, 1 the dictionary, 2 to 101 the events.
    assert_eq!(ack.trim(), r#"{"synced":101}"#);
    // More events, then the signal with stdin still open. This test once slept 300 ms
    // here and hoped the events had been read by then; a second acknowledgement now
    // says they were. Accounting is written every 5 s and at close, so (on a run
    // shorter than 5 s) only the close that the signal triggers counts them.
    for _ in 0..50 {
        writeln!(stdin, r#"{{"kind":"action.more"}}"#).unwrap();
    }
    writeln!(stdin, r#"{{"op":"sync"}}"#).unwrap();
    stdin.flush().unwrap();
    ack.clear();
    stdout.read_line(&mut ack).unwrap();
    let synced: Value = serde_json::from_str(&ack).unwrap();
    assert!(synced["synced"].as_u64().unwrap() >= 150, "{ack}");
    let sent = std::process::Command::new("kill")
        .args([signal, &child.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut rest).unwrap();
    let out = child.wait_with_output().unwrap();
    drop(stdin);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("interrupted: closed log"), "{stderr}");
    // The summary line, with the counts so far, as the end of input prints it: this
    // once went missing after a signal.
    let summary: Value = serde_json::from_str(rest.trim())
        .unwrap_or_else(|e| panic!("one summary line ({e}): {rest:?}"));
    assert_eq!(summary["lines"], 152, "{summary}");
    assert_eq!(summary["events"], 150, "{summary}");
    assert_eq!(summary["ops"], 2, "{summary}");
    assert_eq!(summary["kinds"]["action.step"]["seen"], 100, "{summary}");
    assert_eq!(summary["kinds"]["action.more"]["kept"], 50, "{summary}");
    assert!(summary["last_seq"].as_u64().unwrap() >= 151, "{summary}");

    // The close wrote the accounting of every event.
    let stats: Value =
        serde_json::from_str(&ok(&blackbox(&["stats", "--dir", s(&dir), "--json"]))).unwrap();
    assert_eq!(stats["kinds"]["action.step"]["kept"], 100, "{stats}");
    assert_eq!(stats["kinds"]["action.more"]["kept"], 50, "{stats}");
    assert_eq!(stats["kinds"]["action.more"]["seen"], 50, "{stats}");
    // Every record carries a real time, the first one (a dictionary) included.
    assert!(stats["first_ts_ns"].as_u64().unwrap() >= started, "{stats}");
    ok(&blackbox(&["verify", "--dir", s(&dir)]));
}

#[test]
fn sigterm_closes_the_log_with_complete_accounting() {
    stopped_by("-TERM");
}

#[test]
fn sigint_closes_the_log_with_complete_accounting() {
    stopped_by("-INT");
}

/// A Ctrl-C to a pipeline reaches the feeder too, so the end of input and the signal
/// arrive together: `record` once closed the log twice, the second close said "the
/// recorder is closed", and the process ended before the first printed its summary
/// (`interrupted, and closing the log failed`, no summary, with the log closed fine).
/// Whichever comes first closes; the run prints one summary and no failure, every time.
#[test]
fn a_signal_that_arrives_with_the_end_of_input_closes_once_and_prints_one_summary() {
    for round in 0..20 {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("log");
        let mut child = bin()
            .args(["record", "--dir", s(&dir)])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        writeln!(stdin, r#"{{"kind":"action.step"}}"#).unwrap();
        writeln!(stdin, r#"{{"op":"sync"}}"#).unwrap();
        stdin.flush().unwrap();
        let mut ack = String::new();
        stdout.read_line(&mut ack).unwrap();
        assert!(ack.contains("synced"), "{ack}");
        // The end of input and the signal, together.
        drop(stdin);
        let sent = std::process::Command::new("kill")
            .args(["-INT", &child.id().to_string()])
            .status()
            .unwrap();
        assert!(sent.success());
        let mut rest = String::new();
        std::io::Read::read_to_string(&mut stdout, &mut rest).unwrap();
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("failed"), "round {round}: {stderr}");
        assert!(
            matches!(out.status.code(), Some(0 | 130)),
            "round {round}: {:?} {stderr}",
            out.status
        );
        let summary: Value = serde_json::from_str(rest.trim())
            .unwrap_or_else(|e| panic!("round {round}: one summary line ({e}): {rest:?} {stderr}"));
        assert_eq!(summary["events"], 1, "{summary}");
        ok(&blackbox(&["verify", "--dir", s(&dir)]));
    }
}
