//! Where `blackbox export` may write: never inside a log directory, never over anything
//! but a regular file, and never a partial file.

#![expect(clippy::unwrap_used, reason = "tests fail loudly on any error")]

mod common;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use common::{Recording, blackbox, fails, ok, record, s};

fn export(dir: &Path, out: &str) -> std::process::Output {
    blackbox(&["export", "--dir", s(dir), "--out", out])
}

fn small_log(dir: &Path) {
    let input: String = (0..20)
        .map(|i| format!("{{\"kind\":\"a.b\",\"payload\":{{\"i\":{i}}}}}\n"))
        .collect();
    ok(&record(dir, &input, &[]));
}

/// Every file under `dir` with its bytes, to prove nothing changed.
fn snapshot(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let t = e.file_type().unwrap();
            if t.is_dir() {
                stack.push(e.path());
            } else if t.is_file() {
                files.push((e.path().display().to_string(), fs::read(e.path()).unwrap()));
            }
        }
    }
    files.sort();
    files
}

#[test]
fn export_refuses_outputs_inside_any_log_directory_and_leaves_the_log_untouched() {
    // `export --out` once overwrote the log's own first segment: its records were gone
    // and verify failed.
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    small_log(&dir);
    let other = tmp.path().join("other");
    small_log(&other);
    fs::create_dir(dir.join("sub")).unwrap();
    fs::create_dir(tmp.path().join("elsewhere")).unwrap();
    std::os::unix::fs::symlink(&dir, tmp.path().join("link")).unwrap();
    let before = snapshot(&dir);
    let segment = blackbox_log::list_segments(&dir).unwrap()[0].path.clone();
    let outputs = [
        segment.display().to_string(),
        dir.join("new.jsonl").display().to_string(),
        dir.join("sub/x.jsonl").display().to_string(),
        other.join("x.jsonl").display().to_string(),
        tmp.path()
            .join("elsewhere/../log/x.jsonl")
            .display()
            .to_string(),
        tmp.path().join("link/x.jsonl").display().to_string(),
    ];
    for out in &outputs {
        let err = fails(&export(&dir, out));
        assert!(
            err.contains("refusing to write") && err.contains("inside the log directory"),
            "{out}: {err}"
        );
    }
    assert_eq!(snapshot(&dir), before, "the log is untouched");
    assert!(!dir.join("new.jsonl").exists());
    ok(&blackbox(&["verify", "--dir", s(&dir)]));
}

#[test]
fn export_refuses_the_lock_of_a_running_writer() {
    // `export --out DIR/LOCK` while `record` ran replaced the lock file, and a second
    // writer was then accepted.
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    let mut rec = Recording::start(&dir, &[]);
    rec.send(&["{\"kind\":\"a.b\"}".to_owned()]);
    rec.sync();
    let lock = dir.join("LOCK");
    let before = fs::read(&lock).unwrap();
    let err = fails(&export(&dir, s(&lock)));
    assert!(err.contains("inside the log directory"), "{err}");
    assert_eq!(fs::read(&lock).unwrap(), before);
    // The lock still keeps a second writer out.
    let err = fails(&record(&dir, "{\"kind\":\"c.d\"}\n", &[]));
    assert!(err.contains("locked"), "{err}");
    let (_, status, stderr) = rec.finish();
    assert!(status.success(), "{stderr}");
}

#[test]
fn export_refuses_names_taken_by_anything_but_a_regular_file() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    small_log(&dir);
    let target = tmp.path().join("target.txt");
    fs::write(&target, "keep me").unwrap();
    let link = tmp.path().join("link.jsonl");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let subdir = tmp.path().join("adir");
    fs::create_dir(&subdir).unwrap();
    for (out, what) in [
        ("/dev/null".to_owned(), "a device"),
        (s(&link).to_owned(), "a symbolic link"),
        (s(&subdir).to_owned(), "a directory"),
    ] {
        let err = fails(&export(&dir, &out));
        assert!(err.contains(what), "{out}: {err}");
    }
    assert_eq!(fs::read_to_string(&target).unwrap(), "keep me");
    assert!(
        fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
}

#[test]
fn a_failed_export_leaves_the_previous_file_whole_and_no_temporary_file() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    let mut input = String::new();
    for i in 0..300 {
        input.push_str(&format!("{{\"kind\":\"a.b\",\"payload\":{{\"i\":{i}}}}}\n"));
    }
    ok(&record(&dir, &input, &["--segment-bytes", "4KiB"]));
    let out = tmp.path().join("x.jsonl");
    fs::write(&out, "the previous export\n").unwrap();
    // Damage in a middle segment: the export fails part-way.
    let segments = blackbox_log::list_segments(&dir).unwrap();
    let victim = &segments[segments.len() / 2].path;
    fs::set_permissions(victim, fs::Permissions::from_mode(0o600)).unwrap();
    let mut bytes = fs::read(victim).unwrap();
    bytes[300] ^= 0x5a;
    fs::write(victim, &bytes).unwrap();
    fails(&export(&dir, s(&out)));
    assert_eq!(fs::read_to_string(&out).unwrap(), "the previous export\n");
    let names: Vec<String> = fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        names.iter().all(|n| !n.contains(".tmp")),
        "no temporary file left: {names:?}"
    );
    assert!(!tmp.path().join("x.jsonl.manifest.json").exists());
}
