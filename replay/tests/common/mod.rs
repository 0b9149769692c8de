//! Helpers of the command's tests: run the real `blackbox` binary and read its output.

#![allow(
    dead_code,
    reason = "each test binary uses a different part of these helpers"
)]

pub mod browser;
pub mod python;

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Output, Stdio};

use serde_json::Value;

/// The binary under test.
pub fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_blackbox"))
}

/// Runs `blackbox ARGS` with no stdin.
pub fn blackbox(args: &[&str]) -> Output {
    bin()
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run blackbox")
}

/// Runs `blackbox record --dir DIR EXTRA...` with `input` on stdin.
pub fn record(dir: &Path, input: &str, extra: &[&str]) -> Output {
    let mut child = bin()
        .arg("record")
        .arg("--dir")
        .arg(dir)
        .args(extra)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn blackbox record");
    // A run that refuses to start closes its stdin early: that is for the caller to see
    // in the output, not a failure to write.
    let _ = child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input.as_bytes());
    child.wait_with_output().expect("wait for blackbox record")
}

/// Runs `blackbox record --dir DIR EXTRA...` with `input`, any bytes, on stdin.
pub fn record_bytes(dir: &Path, input: &[u8], extra: &[&str]) -> Output {
    let mut child = bin()
        .arg("record")
        .arg("--dir")
        .arg(dir)
        .args(extra)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn blackbox record");
    let _ = child.stdin.take().expect("stdin").write_all(input);
    child.wait_with_output().expect("wait for blackbox record")
}

/// The stdout of a run that must have succeeded.
pub fn ok(out: &Output) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "blackbox failed ({:?}): {stderr}",
        out.status
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    String::from_utf8(out.stdout.clone()).expect("UTF-8 stdout")
}

/// The stderr of a run that must have failed: exit code non-zero, one line, no panic.
pub fn fails(out: &Output) -> String {
    let stderr = String::from_utf8(out.stderr.clone()).expect("UTF-8 stderr");
    assert!(
        !out.status.success(),
        "blackbox succeeded but should have failed; stdout: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(!stderr.contains("panicked"), "a panic: {stderr}");
    assert!(!stderr.contains("RUST_BACKTRACE"), "a backtrace: {stderr}");
    assert_eq!(
        stderr.trim_end().lines().count(),
        1,
        "the error is one line: {stderr:?}"
    );
    assert!(stderr.starts_with("blackbox: "), "{stderr}");
    stderr
}

/// Every line of `text` as JSON.
pub fn json_lines(text: &str) -> Vec<Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

/// `blackbox replay --dir DIR --json EXTRA...`, parsed.
pub fn replay_json(dir: &Path, extra: &[&str]) -> Vec<Value> {
    let mut args = vec![
        "replay",
        "--dir",
        dir.to_str().expect("UTF-8 path"),
        "--json",
    ];
    args.extend_from_slice(extra);
    json_lines(&ok(&blackbox(&args)))
}

/// The string form of a path, for arguments.
pub fn s(p: &Path) -> &str {
    p.to_str().expect("UTF-8 path")
}

/// A `blackbox record` process fed line by line, for tests that wait between lines,
/// read acknowledgements, or kill it.
#[derive(Debug)]
pub struct Recording {
    pub child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
}

impl Recording {
    pub fn start(dir: &Path, extra: &[&str]) -> Recording {
        let mut child = bin()
            .arg("record")
            .arg("--dir")
            .arg(dir)
            .args(extra)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn blackbox record");
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().expect("stdout"));
        Recording {
            child,
            stdin,
            stdout,
        }
    }

    /// Writes lines (each gets a newline).
    pub fn send(&mut self, lines: &[String]) {
        let stdin = self.stdin.as_mut().expect("stdin still open");
        for l in lines {
            writeln!(stdin, "{l}").expect("write a line");
        }
        stdin.flush().expect("flush stdin");
    }

    /// Sends `{"op":"sync"}` and returns the acknowledged seq.
    pub fn sync(&mut self) -> u64 {
        self.send(&[r#"{"op":"sync"}"#.to_owned()]);
        let mut line = String::new();
        self.stdout.read_line(&mut line).expect("read the ack");
        let v: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("the ack is JSON ({e}): {line:?}"));
        v["synced"].as_u64().expect("a synced seq")
    }

    /// Reads the next reply line (an ack, an error, a sync) as JSON.
    pub fn reply(&mut self) -> Value {
        let mut line = String::new();
        self.stdout.read_line(&mut line).expect("read a reply");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("a reply is JSON ({e}): {line:?}"))
    }

    /// Closes stdin and waits; returns the rest of stdout and the status.
    pub fn finish(mut self) -> (String, std::process::ExitStatus, String) {
        drop(self.stdin.take());
        let mut rest = String::new();
        std::io::Read::read_to_string(&mut self.stdout, &mut rest).expect("read stdout");
        let out = self.child.wait_with_output().expect("wait");
        (
            rest,
            out.status,
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// SIGKILL, then wait.
    pub fn kill(mut self) {
        self.child.kill().expect("SIGKILL");
        let _ = self.child.wait();
    }
}

/// The segment files of a log directory, by first seq (their names sort by it).
pub fn segment_files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut v: Vec<std::path::PathBuf> = std::fs::read_dir(dir)
        .expect("read the log directory")
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "bbx"))
        .collect();
    v.sort();
    v
}
