//! What counts as a log directory, and what counts as a segment in one.
//!
//! Only regular files are segments: a FIFO, a symbolic link or a directory named like a
//! segment is an error naming it, for the writer, the readers and `verify` alike (a
//! FIFO must not hang them, a link must not lead them out of the log). A directory
//! without a segment is a new log only when it is empty or holds nothing but the lock
//! file: `Log::open` refuses anything else (a home directory, say) and leaves it as it
//! is. Beside segments, subdirectories and dotfiles (the layers above keep state there)
//! are left alone.
#![expect(clippy::unwrap_used, reason = "tests fail loudly on any error")]

use std::collections::BTreeMap;
use std::ffi::{CString, OsString};
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use blackbox_log::format;
use blackbox_log::{
    CorruptionKind, Durability, Error, LOCK_FILE_NAME, Log, LogOptions, LogReader, Record,
    RecordType, Seq, verify,
};

fn options() -> LogOptions {
    LogOptions::new()
        .segment_bytes_max(4096)
        .durability(Durability::Flush)
}

/// A log of a few segments.
fn build() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) = Log::open(dir.path(), options()).unwrap();
    for i in 0..150u64 {
        log.append(Record::new(
            RecordType(1),
            i,
            &[u8::try_from(i % 251).unwrap(); 40],
        ))
        .unwrap();
    }
    log.close().unwrap();
    assert!(blackbox_log::list_segments(dir.path()).unwrap().len() >= 3);
    dir
}

fn segments(dir: &Path) -> Vec<PathBuf> {
    blackbox_log::list_segments(dir)
        .unwrap()
        .into_iter()
        .map(|s| s.path)
        .collect()
}

fn first_seq_of(path: &Path) -> u64 {
    format::parse_segment_file_name(path.file_name().unwrap().to_str().unwrap()).unwrap()
}

/// Every entry of `dir` with its bytes (directories and links as markers).
fn snapshot(dir: &Path) -> BTreeMap<OsString, Option<Vec<u8>>> {
    fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let t = e.file_type().unwrap();
            (
                e.file_name(),
                t.is_file().then(|| fs::read(e.path()).unwrap()),
            )
        })
        .collect()
}

/// The operations every command is built on, each of which must refuse `dir` with an
/// error that `check` accepts, and within a deadline. On a timeout, `unblock` is run
/// so that no thread stays stuck, and the test fails.
fn every_path_refuses(dir: &Path, check: impl Fn(&str, &Error), unblock: impl Fn()) {
    type Op = fn(&Path) -> Result<(), Error>;
    let ops: [(&str, Op); 6] = [
        ("verify", |d| verify(d, None, None).map(|_| ())),
        ("open", |d| Log::open(d, options()).map(|_| ())),
        ("read by seq", |d| {
            LogReader::open(d)?
                .records(Seq(0)..)?
                .try_for_each(|r| r.map(|_| ()))
        }),
        ("read by time", |d| {
            LogReader::open(d)?
                .records_by_time(0..)?
                .try_for_each(|r| r.map(|_| ()))
        }),
        ("digest", |d| LogReader::open(d)?.digest().map(|_| ())),
        ("structure", |d| LogReader::open(d)?.structure().map(|_| ())),
    ];
    for (name, op) in ops {
        let (tx, rx) = mpsc::channel();
        let d = dir.to_owned();
        std::thread::spawn(move || {
            let _ = tx.send(op(&d));
        });
        match rx.recv_timeout(Duration::from_secs(20)) {
            Ok(Ok(())) => panic!("{name} accepted the directory"),
            Ok(Err(e)) => check(name, &e),
            Err(_) => {
                unblock();
                panic!("{name} did not return within 20 s");
            }
        }
    }
}

fn is_not_a_regular_file(e: &Error, path: &Path, what: &str) -> bool {
    matches!(e, Error::Corrupt(c)
        if c.segment == path && c.kind == CorruptionKind::NotARegularFile { found: match what {
            "a FIFO" => "a FIFO",
            "a symbolic link" => "a symbolic link",
            _ => "a directory",
        } })
}

#[test]
fn a_fifo_named_like_a_segment_is_refused_without_hanging() {
    // Regression: opening a FIFO for reading blocks until a writer comes, so a FIFO
    // named like a segment hung every command.
    let dir = build();
    let segs = segments(dir.path());
    for (where_, seq) in [
        ("among the segments", first_seq_of(&segs[1]) + 1),
        ("past the end", 1_000_000),
    ] {
        let fifo = dir.path().join(format::segment_file_name(seq));
        let c_path = CString::new(fifo.as_os_str().as_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path; mkfifo reads nothing else of ours.
        assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
        let unblock = || {
            // A writer that opens the FIFO releases a reader blocked in its open.
            let _ = fs::OpenOptions::new()
                .write(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(&fifo);
        };
        every_path_refuses(
            dir.path(),
            |name, e| {
                assert!(
                    is_not_a_regular_file(e, &fifo, "a FIFO"),
                    "{where_}: {name}: {e}"
                );
            },
            unblock,
        );
        fs::remove_file(&fifo).unwrap();
    }
}

#[test]
fn a_symbolic_link_named_like_a_segment_is_never_followed() {
    // Regression: a segment replaced by a link to a copy outside the log was read
    // through the link, and verify passed.
    let dir = build();
    let outside = tempfile::tempdir().unwrap();
    let segs = segments(dir.path());
    let target = outside.path().join("elsewhere.bbx");
    fs::copy(&segs[1], &target).unwrap();
    fs::remove_file(&segs[1]).unwrap();
    std::os::unix::fs::symlink(&target, &segs[1]).unwrap();
    let before = fs::read(&target).unwrap();
    every_path_refuses(
        dir.path(),
        |name, e| {
            assert!(
                is_not_a_regular_file(e, &segs[1], "a symbolic link"),
                "{name}: {e}"
            );
        },
        || {},
    );
    assert_eq!(fs::read(&target).unwrap(), before);
}

#[test]
fn a_directory_named_like_a_segment_is_refused() {
    // Regression: a directory named like a segment was skipped, and verify passed.
    let dir = build();
    let segs = segments(dir.path());
    let named = dir
        .path()
        .join(format::segment_file_name(first_seq_of(&segs[1]) + 2));
    fs::create_dir(&named).unwrap();
    every_path_refuses(
        dir.path(),
        |name, e| {
            assert!(
                is_not_a_regular_file(e, &named, "a directory"),
                "{name}: {e}"
            );
        },
        || {},
    );
}

#[test]
fn a_directory_without_segments_is_a_new_log_only_if_empty() {
    // Regression: open wrote a log into any directory holding only dotfiles and
    // subdirectories, such as a home directory.
    let home_like: [&[(&str, bool)]; 4] = [
        &[(".bashrc", false), ("Documents", true)],
        &[(".hidden", false)],
        &[("kb", true)],
        &[(LOCK_FILE_NAME, false), ("projects", true)],
    ];
    for entries in home_like {
        let dir = tempfile::tempdir().unwrap();
        for (name, is_dir) in entries {
            let path = dir.path().join(name);
            if *is_dir {
                fs::create_dir(&path).unwrap();
            } else {
                fs::write(&path, b"someone's file\n").unwrap();
            }
        }
        let before = snapshot(dir.path());
        let err = Log::open(dir.path(), options()).map(|_| ()).unwrap_err();
        assert!(matches!(err, Error::NotALog { .. }), "{entries:?}: {err}");
        assert_eq!(snapshot(dir.path()), before, "{entries:?}: {err}");
    }
    // What a new log may start in: nothing, an empty directory, or one that holds
    // only the lock file of a writer that stopped before its first segment.
    let parent = tempfile::tempdir().unwrap();
    let missing = parent.path().join("new");
    let empty = tempfile::tempdir().unwrap();
    let lock_only = tempfile::tempdir().unwrap();
    fs::write(lock_only.path().join(LOCK_FILE_NAME), b"12345\n").unwrap();
    for dir in [missing.as_path(), empty.path(), lock_only.path()] {
        let (log, recovery) = Log::open(dir, options()).unwrap();
        assert!(recovery.created, "{}", dir.display());
        log.close().unwrap();
        verify(dir, None, None).unwrap();
    }
}

#[test]
fn subdirectories_and_dotfiles_beside_segments_are_left_alone() {
    let dir = build();
    fs::create_dir(dir.path().join("kb")).unwrap();
    fs::write(dir.path().join("kb").join("view"), b"layer state").unwrap();
    fs::write(dir.path().join(".keep"), b"").unwrap();
    let (mut log, _) = Log::open(dir.path(), options()).unwrap();
    log.append(Record::new(RecordType(1), 1_000, b"more"))
        .unwrap();
    log.close().unwrap();
    let report = verify(dir.path(), None, None).unwrap();
    assert_eq!(report.records, 151);
    assert_eq!(
        fs::read(dir.path().join("kb").join("view")).unwrap(),
        b"layer state"
    );
    assert!(dir.path().join(".keep").exists());
}

#[test]
fn a_lock_file_that_is_a_symbolic_link_is_refused_and_its_target_kept() {
    // Regression: the writer opened LOCK through a link, truncated the file it pointed
    // at and wrote its pid there.
    let dir = build();
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("precious.txt");
    fs::write(&target, b"do not truncate me\n").unwrap();
    let lock = dir.path().join(LOCK_FILE_NAME);
    fs::remove_file(&lock).unwrap();
    std::os::unix::fs::symlink(&target, &lock).unwrap();
    let err = Log::open(dir.path(), options()).map(|_| ()).unwrap_err();
    assert!(
        matches!(&err, Error::NotALog { reason, .. } if reason.contains("symbolic link")),
        "{err}"
    );
    assert_eq!(fs::read(&target).unwrap(), b"do not truncate me\n");
}
