//! Everything Blackbox creates is private to its owner (directories 0700, files 0600 or
//! read-only 0400), whatever the umask, and a reader killed mid-read leaves nothing
//! anyone else can read, and nothing the next reader does not clean.

#![expect(clippy::unwrap_used, reason = "tests fail loudly on any error")]

mod common;

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Arc;

use blackbox::kb::Provenance;
use blackbox::{Config, Event, ManualClock, Recorder};
use common::{json_lines, ok, s};
use serde_json::json;

/// `blackbox ARGS` under umask 022 (what most shells give), with `TMPDIR` set, and `input`
/// on stdin.
fn under_umask_022(tmpdir: &Path, args: &[&str], input: &str) -> Output {
    let mut child = Command::new("sh")
        .arg("-c")
        .arg("umask 022 && exec \"$0\" \"$@\"")
        .arg(env!("CARGO_BIN_EXE_blackbox"))
        .args(args)
        .env("TMPDIR", tmpdir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), input.as_bytes()).unwrap();
    child.wait_with_output().unwrap()
}

/// Every file and directory under `root` (itself included) whose mode lets its group or
/// others in.
fn not_private(root: &Path) -> Vec<(PathBuf, u32)> {
    let mut open = Vec::new();
    let mut stack = vec![root.to_owned()];
    while let Some(p) = stack.pop() {
        let meta = fs::symlink_metadata(&p).unwrap();
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            open.push((p.clone(), mode));
        }
        if meta.is_dir() {
            for e in fs::read_dir(&p).unwrap() {
                stack.push(e.unwrap().path());
            }
        }
    }
    open
}

fn uid() -> u32 {
    fs::metadata(std::env::temp_dir()).map(|_| ()).unwrap();
    // The owner of a file this process creates.
    let probe = tempfile::NamedTempFile::new().unwrap();
    probe.as_file().metadata().unwrap().uid()
}

#[test]
fn everything_the_command_creates_is_private_whatever_the_umask() {
    // The knowledge base's view (DIR/kb) and the views reads rebuild in
    // /tmp/blackbox-kb-* were 0755 directories of 0644 files, beside 0600 segments.
    let tmp = tempfile::tempdir().unwrap();
    let scratch = tmp.path().join("tmp");
    fs::create_dir(&scratch).unwrap();
    let dir = tmp.path().join("log");
    let d = s(&dir);
    let run = |args: &[&str], input: &str| {
        let out = under_umask_022(&scratch, args, input);
        ok(&out);
    };
    run(
        &["record", "--dir", d, "--segment-bytes", "4KiB"],
        &(0..200)
            .map(|i| format!("{{\"kind\":\"a.b\",\"payload\":{{\"i\":{i}}}}}\n"))
            .collect::<String>(),
    );
    run(&["kb", "put", "k", "1", "--evidence", "1", "--dir", d], "");
    run(&["kb", "get", "k", "--dir", d], "");
    run(&["state", "--dir", d, "--at", "now"], "");
    let out = tmp.path().join("out");
    fs::create_dir(&out).unwrap();
    fs::set_permissions(&out, fs::Permissions::from_mode(0o700)).unwrap();
    run(
        &["export", "--dir", d, "--out", s(&out.join("x.jsonl"))],
        "",
    );
    let demo = tmp.path().join("demo");
    run(&["demo", "--dir", s(&demo), "--seed", "1"], "");
    assert!(dir.join("kb").is_dir(), "the writer's view exists");
    // The reads' views were made in a private per-user directory.
    let base = scratch.join(format!("blackbox-{}", uid()));
    assert!(base.is_dir());
    for root in [&dir, &demo, &out, &base] {
        assert_eq!(not_private(root), Vec::new(), "under {}", root.display());
    }
    assert_eq!(
        fs::read_dir(&base).unwrap().count(),
        0,
        "views removed after use"
    );
}

#[test]
fn a_recorders_knowledge_base_view_is_private_through_the_library() {
    // The umask most shells give, whatever this test was started with (the other tests
    // of this file set it for their own children).
    // SAFETY: umask only sets this process's file-mode creation mask.
    unsafe { libc::umask(0o022) };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    let recorder = Recorder::open(&dir, Config::new()).unwrap();
    let seen = recorder.record_evidence(&Event::new("a.b")).unwrap();
    recorder
        .kb()
        .unwrap()
        .assert(
            "k",
            json!(1),
            0.5,
            &Default::default(),
            Provenance::new([seen]),
        )
        .unwrap();
    recorder.close().unwrap();
    let mode = fs::metadata(dir.join("kb")).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700);
}

/// A log with enough knowledge-base commits that `kb log` prints more than a pipe holds.
fn many_commits(dir: &Path) {
    let clock = ManualClock::new(1_767_323_045_000_000_000);
    let recorder = Recorder::open(dir, Config::new().clock(Arc::new(clock.clone()))).unwrap();
    let kb = recorder.kb().unwrap();
    for i in 0..1_000u64 {
        clock.advance_ns(1_000_000);
        let seen = recorder.record_evidence(&Event::new("obs.x")).unwrap();
        kb.assert(
            &format!("key.{i}"),
            json!(i),
            0.5,
            &Default::default(),
            Provenance::new([seen]).message("a message long enough to fill a pipe sooner"),
        )
        .unwrap();
    }
    recorder.close().unwrap();
}

#[test]
fn a_reader_killed_mid_read_leaves_nothing_readable_and_the_next_reader_cleans_it() {
    let tmp = tempfile::tempdir().unwrap();
    let scratch = tmp.path().join("tmp");
    fs::create_dir(&scratch).unwrap();
    let dir = tmp.path().join("log");
    many_commits(&dir);
    let base = scratch.join(format!("blackbox-{}", uid()));
    // `kb log` with its stdout never read: once the pipe is full it blocks mid-print,
    // its view open.
    let mut reader = Command::new("sh")
        .arg("-c")
        .arg("umask 022 && exec \"$0\" \"$@\"")
        .arg(env!("CARGO_BIN_EXE_blackbox"))
        .args(["kb", "log", "--dir", s(&dir)])
        .env("TMPDIR", &scratch)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = reader.id();
    let mut stdout = reader.stdout.take().unwrap();
    // Wait for its first output: by then its view is built and it is printing.
    let mut first = [0u8; 1];
    std::io::Read::read_exact(&mut stdout, &mut first).unwrap();
    let views: Vec<PathBuf> = fs::read_dir(&base)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(views.len(), 1, "{views:?}");
    assert!(
        views[0]
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .starts_with(&format!("view-{pid}-")),
        "{views:?}"
    );
    reader.kill().unwrap();
    reader.wait().unwrap();
    drop(stdout);
    // What it left: nothing anyone else can read.
    assert!(views[0].exists(), "SIGKILL left its view");
    assert_eq!(not_private(&base), Vec::new());
    // The next reader removes it.
    let out = under_umask_022(
        &scratch,
        &["kb", "get", "key.1", "--dir", s(&dir), "--json"],
        "",
    );
    let fact = &json_lines(&ok(&out))[0];
    assert_eq!(fact["value"], 1);
    assert!(!views[0].exists(), "the next reader cleaned it");
    assert_eq!(fs::read_dir(&base).unwrap().count(), 0);
}

#[test]
fn without_tmpdir_the_in_memory_base_is_private_and_the_view_is_removed() {
    let shm = Path::new("/dev/shm");
    if !shm.is_dir() {
        eprintln!("skipped: this system has no /dev/shm");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    let recorder = Recorder::open(&dir, Config::new()).unwrap();
    let seen = recorder.record_evidence(&Event::new("a.b")).unwrap();
    let kb = recorder.kb().unwrap();
    kb.assert(
        "k",
        json!(1),
        0.5,
        &Default::default(),
        Provenance::new([seen]),
    )
    .unwrap();
    recorder.close().unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_blackbox"))
        .args(["kb", "get", "k", "--dir", s(&dir)])
        .env_remove("TMPDIR")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let out = child.wait_with_output().unwrap();
    ok(&out);
    let base = shm.join(format!("blackbox-{}", uid()));
    assert!(base.is_dir(), "the view was made under {}", base.display());
    assert_eq!(not_private(&base), Vec::new());
    let left: Vec<_> = fs::read_dir(&base)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(&format!("view-{pid}-")))
        .collect();
    assert_eq!(left, Vec::<String>::new(), "the reader removed its view");
}
