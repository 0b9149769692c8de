//! Inputs are bounded while they are read: an endless or enormous input is refused
//! once it passes its limit, with an error naming it, never read whole into memory.

#![expect(clippy::unwrap_used, reason = "tests fail loudly on any error")]

mod common;

use std::io::Write;
use std::process::Stdio;
use std::time::Duration;

use common::{bin, fails, ok, record, s};

/// Waits for a child to exit by itself, up to a deadline (a guard against a hang, not a
/// synchronization: past it, the child is killed and the test fails). Returns the
/// child's output.
fn wait_or_kill(child: std::process::Child, deadline: Duration) -> std::process::Output {
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(deadline) {
        Ok(out) => out.unwrap(),
        Err(_) => {
            // SAFETY: kill only sends a signal to the pid of a child this test spawned
            // and has not reaped.
            unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
            panic!("the command did not stop by itself within {deadline:?}");
        }
    }
}

/// The largest resident set of this process's waited-for children, in KiB.
fn children_max_rss_kib() -> i64 {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage writes a rusage into the pointer it is given, which points to a
    // zeroed, properly aligned rusage that lives across the call.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, usage.as_mut_ptr()) };
    assert_eq!(rc, 0);
    // SAFETY: getrusage succeeded, so it initialized the struct (which was zeroed
    // besides).
    unsafe { usage.assume_init() }.ru_maxrss
}

#[test]
fn an_endless_record_line_is_refused_at_its_limit_without_reading_on() {
    // A line of 1 GiB of zeros once grew `record` to about 1 GB before it was refused.
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    let mut child = bin()
        .args(["record", "--dir", s(&dir)])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let feeder = std::thread::spawn(move || {
        // A good line, then zeros without a newline, up to 256 MiB or until `record`
        // stops reading (the pipe breaks).
        stdin.write_all(b"{\"kind\":\"a.b\"}\n").unwrap();
        let chunk = vec![b'0'; 1 << 20];
        let mut written = 0u64;
        while written < 256 << 20 {
            if stdin.write_all(&chunk).is_err() {
                break;
            }
            written += chunk.len() as u64;
        }
        written
    });
    let out = wait_or_kill(child, Duration::from_secs(120));
    let written = feeder.join().unwrap();
    let err = fails(&out);
    assert!(
        err.contains("line 2") && err.contains("longer than"),
        "{err}"
    );
    // It stopped reading at its limit (32 MiB), not at the end of the input.
    assert!(
        written < 48 << 20,
        "{written} bytes were written before it stopped"
    );
    assert!(
        children_max_rss_kib() < 160 * 1024,
        "a child grew to {} KiB",
        children_max_rss_kib()
    );
    // The line before it was recorded.
    let events = common::replay_json(&dir, &["--type", "event"]);
    assert_eq!(events.len(), 1);
}

#[test]
fn an_overlong_line_is_skipped_with_skip_invalid_and_the_next_one_recorded() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    let mut input = String::from("{\"kind\":\"a.one\"}\n");
    input.push_str(&"x".repeat((32 << 20) + 10));
    input.push_str("\n{\"kind\":\"a.two\"}\n");
    let out = record(&dir, &input, &["--skip-invalid"]);
    let stdout = ok(&out);
    assert!(stdout.contains("\"skipped\":1"), "{stdout}");
    let kinds: Vec<String> = common::replay_json(&dir, &["--type", "event"])
        .iter()
        .map(|r| r["kind"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(kinds, ["a.one", "a.two"]);
}

#[test]
fn an_endless_key_file_is_refused_without_reading_it_whole() {
    // `verify --key-file /dev/zero` was killed at 24 GB.
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    ok(&record(&dir, "{\"kind\":\"a.b\"}\n", &[]));
    for sub in [
        vec!["verify", "--dir", s(&dir), "--key-file", "/dev/zero"],
        vec!["replay", "--dir", s(&dir), "--key-file", "/dev/zero"],
        vec!["record", "--dir", s(&dir), "--key-file", "/dev/zero"],
    ] {
        let child = bin()
            .args(&sub)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let out = wait_or_kill(child, Duration::from_secs(60));
        let err = fails(&out);
        assert!(
            err.contains("/dev/zero") && err.contains("key"),
            "{sub:?}: {err}"
        );
    }
}
