//! `blackbox record`'s acknowledgements: a reader that closes stdout while they are
//! due stops the recording with an error that says how far it got.

#![expect(clippy::unwrap_used, reason = "tests fail loudly on any error")]

mod common;

use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;

use common::{bin, replay_json, s};

#[test]
fn a_closed_stdout_stops_record_with_an_error_naming_the_last_recorded_line() {
    // Guards a past bug: `blackbox record … | head -1` recorded 11 of 5000 events and
    // exited 0 with nothing on stderr, because a broken pipe on an acknowledgement was
    // taken for the quiet end of `| head`.
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
    // Line 2i+1 records event i, line 2i+2 asks for an acknowledgement.
    let line =
        |i: usize| format!("{{\"kind\":\"a.b\",\"payload\":{{\"i\":{i}}}}}\n{{\"op\":\"sync\"}}\n");
    stdin.write_all(line(0).as_bytes()).unwrap();
    let mut ack = String::new();
    stdout.read_line(&mut ack).unwrap();
    assert!(ack.contains("synced"), "{ack}");
    // The reader goes away, as `head -1` does after its line.
    drop(stdout);
    // The rest of the input; record stops reading it at the first acknowledgement it
    // cannot write, so a write may fail.
    let writer = std::thread::spawn(move || {
        for i in 1..5000 {
            if stdin.write_all(line(i).as_bytes()).is_err() {
                break;
            }
        }
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "exit {:?}: {stderr}", out.status);
    assert!(!stderr.contains("panicked"), "{stderr}");
    // "… line N … was the last recorded …": the events of the lines up to N are in the
    // log, and none after.
    let last_line: usize = stderr
        .split("line ")
        .nth(1)
        .and_then(|t| t.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("stderr names the last recorded line: {stderr}"));
    assert!(stderr.contains("last recorded"), "{stderr}");
    let recorded: Vec<u64> = replay_json(&dir, &["--type", "event", "--log-order"])
        .iter()
        .map(|r| r["payload"]["i"].as_u64().unwrap())
        .collect();
    let events_through_line = last_line.div_ceil(2) as u64;
    assert_eq!(
        recorded,
        (0..events_through_line).collect::<Vec<_>>(),
        "{stderr}"
    );
    assert!(events_through_line < 5000, "{stderr}");
    // The log was closed cleanly: it verifies.
    common::ok(&common::blackbox(&["verify", "--dir", s(&dir)]));
}

/// Guards a past bug: a closed stdout while an event's acknowledgement was due ended
/// `record` with exit 0 and nothing on stderr, as if `| head` had had its fill; only a
/// sync's reply stopped it with an error. Every reply goes through one path: the log is
/// closed (every line up to this one recorded, accounted and synced), a sentence says
/// so, and the exit code is 1.
#[test]
fn a_closed_stdout_on_an_event_acknowledgement_stops_record_with_exit_1() {
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
    stdin
        .write_all(b"{\"kind\":\"a.b\",\"payload\":{\"i\":0},\"ack\":true}\n")
        .unwrap();
    let mut ack = String::new();
    stdout.read_line(&mut ack).unwrap();
    assert!(ack.contains("\"seq\""), "{ack}");
    drop(stdout);
    // Line 2 is recorded, then its acknowledgement cannot be written: line 3 never is.
    let _ = stdin.write_all(
        b"{\"kind\":\"a.b\",\"payload\":{\"i\":1},\"ack\":true}\n{\"kind\":\"a.b\",\"payload\":{\"i\":2}}\n",
    );
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(
        stderr.contains("line 2: cannot write its reply (stdout was closed)")
            && stderr.contains("line 2 was the last recorded"),
        "{stderr}"
    );
    let recorded: Vec<u64> = replay_json(&dir, &["--type", "event", "--log-order"])
        .iter()
        .map(|r| r["payload"]["i"].as_u64().unwrap())
        .collect();
    assert_eq!(recorded, [0, 1]);
    // Closed as at the end of input: the last accounting record counts both events.
    let all = replay_json(&dir, &[]);
    let accounting = all.iter().rfind(|r| r["type"] == "accounting").unwrap();
    assert_eq!(accounting["kinds"]["a.b"]["seen"], 2, "{accounting}");
    assert_eq!(accounting["kinds"]["a.b"]["kept"], 2, "{accounting}");
    common::ok(&common::blackbox(&["verify", "--dir", s(&dir)]));
}
