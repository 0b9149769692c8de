//! Hostile directories through the command: segments crafted with valid checksums where a
//! checksum covers the crafted field (huge lengths, lying counts, index entries outside
//! the file, footers that disagree with their blocks), a symbolic link in place of a
//! segment, a segment from another log, and a dictionary whose ids run near `u32::MAX`.
//!
//! Every case runs the reading commands a reviewer would (`verify`, `replay` whole and
//! by time, `stats`, `state --at`) as child processes and measures each one's peak
//! resident memory (`wait4`'s `ru_maxrss`). Each must end with exit 0 or 1 (never a
//! panic's 101, never a signal), and every failure must be one line on stderr that names
//! the file or the record at fault; `verify` of every tampered directory exits non-zero;
//! and no command's peak memory exceeds [`PEAK_RSS_BOUND_KIB`], however large a number
//! on disk claims to be. `--nocapture` prints the figures (docs/RELIABILITY.md keeps a
//! run's).

#![expect(clippy::unwrap_used, reason = "tests fail loudly on any error")]

mod common;

use std::fs::{self, File};
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::process::Stdio;

use blackbox::codec::{DICTIONARY, DictionaryRecord};
use blackbox_log::{Log, LogOptions, Record};
use common::{bin, ok, record, s, segment_files as segments};

/// The most any command may hold resident on these directories: what a small log needs
/// (about 10 MiB of binary, allocator and buffers) with room to spare, and far below
/// any length or count the cases put on disk (1 GiB and up).
const PEAK_RSS_BOUND_KIB: u64 = 64 * 1024;

/// How one command ended, and the most memory it held.
#[derive(Debug)]
struct Run {
    args: String,
    code: Option<i32>,
    stdout: String,
    signal: Option<i32>,
    stderr: String,
    peak_rss_kib: u64,
}

/// The environment variable that makes [`measuring_runner`] run: the command's
/// arguments, separated by U+001F, and the directory for its outputs.
const RUNNER_ARGS_ENV: &str = "BLACKBOX_HOSTILE_RUNNER_ARGS";
const RUNNER_OUT_ENV: &str = "BLACKBOX_HOSTILE_RUNNER_OUT";

/// Runs `blackbox ARGS` and reads its peak resident memory.
///
/// Linux counts in a process's `ru_maxrss` the memory of the process it was started
/// from (an exec keeps the old image's high-water mark), and this test binary holds tens
/// of MiB. So the command is started by a small process of its own: this test binary
/// re-executed with one test thread ([`measuring_runner`]), which starts `blackbox`,
/// reaps it with `wait4` and writes down how it ended and its `ru_maxrss`. The figure
/// includes the few MiB of that starter (its image is where the command's begins).
fn run_measured(args: &[&str]) -> Run {
    let out_dir = tempfile::tempdir().unwrap();
    let status = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "measuring_runner",
            "--ignored",
            "--test-threads=1",
            "-q",
        ])
        .env(RUNNER_ARGS_ENV, args.join("\u{1f}"))
        .env(RUNNER_OUT_ENV, out_dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(
        status.success(),
        "the measuring runner failed for `{}`",
        args.join(" ")
    );
    let result = fs::read_to_string(out_dir.path().join("result")).unwrap();
    let fields: Vec<i64> = result
        .split_whitespace()
        .map(|f| f.parse().unwrap())
        .collect();
    let [code, signal, peak] = fields[..] else {
        panic!("the runner wrote {result:?}");
    };
    Run {
        args: args.join(" "),
        code: (signal < 0).then(|| i32::try_from(code).unwrap()),
        signal: (signal >= 0).then(|| i32::try_from(signal).unwrap()),
        stdout: fs::read_to_string(out_dir.path().join("stdout")).unwrap(),
        stderr: fs::read_to_string(out_dir.path().join("stderr")).unwrap(),
        peak_rss_kib: u64::try_from(peak).unwrap(),
    }
}

/// Not a test of its own: the small process [`run_measured`] starts (ignored, so it runs
/// only when asked for by name). Writes `CODE SIGNAL PEAK_KIB` (-1 for the one that does
/// not apply) to `result` in the directory it is given, the command's stderr beside it.
#[test]
#[ignore = "started by run_measured, with its arguments in the environment"]
fn measuring_runner() {
    let args = std::env::var(RUNNER_ARGS_ENV).unwrap();
    let out = PathBuf::from(std::env::var_os(RUNNER_OUT_ENV).unwrap());
    let child = bin()
        .args(args.split('\u{1f}'))
        .stdin(Stdio::null())
        .stdout(File::create(out.join("stdout")).unwrap())
        .stderr(File::create(out.join("stderr")).unwrap())
        .spawn()
        .unwrap();
    let pid = libc::pid_t::try_from(child.id()).unwrap();
    let mut status: libc::c_int = 0;
    // SAFETY: an all-zero `rusage` is a valid value of the plain C struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `pid` is our own child, not yet reaped (the `Child` is never waited on);
    // `status` and `usage` are valid for writes for the duration of the call.
    let reaped = unsafe { libc::wait4(pid, &raw mut status, 0, &raw mut usage) };
    assert_eq!(
        reaped,
        pid,
        "wait4 failed: {}",
        std::io::Error::last_os_error()
    );
    drop(child);
    let (code, signal) = if libc::WIFEXITED(status) {
        (libc::WEXITSTATUS(status), -1)
    } else {
        (-1, libc::WTERMSIG(status))
    };
    fs::write(
        out.join("result"),
        format!("{code} {signal} {}", usage.ru_maxrss),
    )
    .unwrap();
}

/// A log of 600 events over 4 KiB segments, from `record`: payloads `{"i": base + i}`
/// (`base` of four digits gives two logs the same segment boundaries).
fn real_log(dir: &Path, base: u32) {
    let input: String = (0..600)
        .map(|i| {
            let i = base + i;
            format!(
                "{{\"kind\":\"robot.arm\",\"payload\":{{\"i\":{i}}},\"values\":{{\"v\":{i}}}}}\n"
            )
        })
        .collect();
    ok(&record(dir, &input, &["--segment-bytes", "4KiB"]));
}

fn crc(parts: &[&[u8]]) -> u32 {
    parts.iter().fold(0, |c, p| crc32c::crc32c_append(c, p))
}

fn rewrite(path: &Path, edit: impl FnOnce(&mut Vec<u8>)) {
    fs::set_permissions(path, fs::Permissions::from_mode(0o600)).unwrap();
    let mut bytes = fs::read(path).unwrap();
    edit(&mut bytes);
    fs::write(path, &bytes).unwrap();
}

/// Sets the first block's `stored_len` (after the 96-byte segment header) and recomputes
/// the block header's crc (bytes 0..12 and 16..72), as FORMAT.md lays them out.
fn set_first_block_len(bytes: &mut [u8], stored_len: u32) {
    let h = &mut bytes[96..96 + 72];
    h[4..8].copy_from_slice(&stored_len.to_le_bytes());
    let c = crc(&[&h[0..12], &h[16..72]]);
    h[12..16].copy_from_slice(&c.to_le_bytes());
}

/// Edits a sealed segment's footer body and recomputes the trailer's crc.
fn patch_footer(bytes: &mut [u8], edit: impl FnOnce(&mut [u8])) {
    let len = bytes.len();
    let body_len = usize::try_from(u32::from_le_bytes(
        bytes[len - 16..len - 12].try_into().unwrap(),
    ))
    .unwrap();
    let (b, t) = (len - 16 - body_len, len - 16);
    edit(&mut bytes[b..t]);
    let c = crc(&[&bytes[b..t]]);
    bytes[t + 4..t + 8].copy_from_slice(&c.to_le_bytes());
}

fn put_u64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

fn put_u32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

/// Where a footer body's index entries start: after the header fields (96 bytes) and
/// its T per-type counts of 16 bytes each.
fn index_at(body: &[u8]) -> usize {
    96 + 16 * usize::try_from(u32::from_le_bytes(body[88..92].try_into().unwrap())).unwrap()
}

/// The reviewer's commands on `dir`: `verify`, `replay` of the whole log, `replay` of
/// `window` (`--since`, `--until`: the segments the cases edit), `stats`, `state --at`.
fn commands(dir: &Path, window: (u64, u64)) -> Vec<Run> {
    let d = s(dir);
    let (since, until) = (window.0.to_string(), window.1.to_string());
    vec![
        run_measured(&["verify", "--dir", d]),
        run_measured(&["replay", "--dir", d]),
        run_measured(&["replay", "--dir", d, "--since", &since, "--until", &until]),
        run_measured(&["stats", "--dir", d]),
        run_measured(&["state", "--dir", d, "--at", &since]),
    ]
}

/// Runs the reviewer's commands on `log.dir` and checks how each ended. `tampered`:
/// `verify` must exit non-zero. `names`: what every failure's message must name (a
/// file, a record). A reader that succeeds must print exactly what it printed on the
/// log before it was edited: a lying footer or index may not change an answer silently.
/// Returns the runs, for the figures.
fn review(case: &str, log: &Case, tampered: bool, names: &str) -> Vec<Run> {
    let d = s(&log.dir);
    let runs = commands(&log.dir, log.window);
    for (run, intact) in runs.iter().zip(&log.intact).skip(1) {
        if run.code == Some(0) {
            assert_eq!(
                run.stdout, intact.stdout,
                "{case}: `{}` succeeded with another answer than on the intact log",
                run.args
            );
        }
    }
    for run in &runs {
        eprintln!(
            "{case:<34} {:<60} exit {:>4} peak {:>6} KiB",
            run.args.replace(d, "D"),
            run.code
                .map_or_else(|| format!("sig{:?}", run.signal), |c| c.to_string()),
            run.peak_rss_kib
        );
        assert_eq!(
            run.signal, None,
            "{case}: `{}` was killed by a signal",
            run.args
        );
        assert!(
            matches!(run.code, Some(0 | 1)),
            "{case}: `{}` exited {:?} (a panic is 101): {}",
            run.args,
            run.code,
            run.stderr
        );
        assert!(
            !run.stderr.contains("panicked"),
            "{case}: `{}` panicked: {}",
            run.args,
            run.stderr
        );
        assert!(
            run.peak_rss_kib <= PEAK_RSS_BOUND_KIB,
            "{case}: `{}` held {} KiB at its peak, above the bound of {PEAK_RSS_BOUND_KIB} KiB",
            run.args,
            run.peak_rss_kib
        );
        if run.code == Some(1) {
            let first = run.stderr.lines().next().unwrap_or_default();
            assert!(
                first.contains(names),
                "{case}: `{}` failed without naming {names}: {}",
                run.args,
                run.stderr
            );
        }
    }
    if tampered {
        assert_eq!(
            runs[0].code,
            Some(1),
            "{case}: verify of a tampered log must exit 1: {}",
            runs[0].stderr
        );
    }
    runs
}

/// A log a case edited, with what the commands said before the edit.
struct Case {
    dir: PathBuf,
    window: (u64, u64),
    intact: Vec<Run>,
}

/// A fresh log in `root/NAME`, the commands' answers on it, then `edit` applied to it.
/// The window runs from the first event of the second segment to the first of the
/// fourth: the segments the cases edit.
fn case(root: &Path, name: &str, edit: impl FnOnce(&Path)) -> Case {
    let dir = root.join(name);
    real_log(&dir, 1000);
    let firsts: Vec<u64> = segments(&dir)
        .iter()
        .map(|p| file_name(p).trim_end_matches(".bbx").parse().unwrap())
        .collect();
    let events = common::replay_json(&dir, &["--type", "event", "--log-order"]);
    let time_from = |seq: u64| {
        events
            .iter()
            .find(|e| e["seq"].as_u64().unwrap() >= seq)
            .unwrap()["ts_ns"]
            .as_u64()
            .unwrap()
    };
    let window = (time_from(firsts[1]), time_from(firsts[3]));
    let intact = commands(&dir, window);
    for run in &intact {
        eprintln!(
            "{:<34} {:<60} exit    0 peak {:>6} KiB",
            format!("intact ({name})"),
            run.args.replace(s(&dir), "D"),
            run.peak_rss_kib
        );
        assert_eq!(
            run.code,
            Some(0),
            "the intact log: `{}`: {}",
            run.args,
            run.stderr
        );
    }
    edit(&dir);
    Case {
        dir,
        window,
        intact,
    }
}

fn file_name(p: &Path) -> String {
    p.file_name().unwrap().to_str().unwrap().to_owned()
}

#[test]
fn a_block_claiming_two_gib_is_refused_naming_its_segment() {
    let root = tempfile::tempdir().unwrap();
    let mut named = String::new();
    let log = case(root.path(), "huge_block", |dir| {
        let seg = segments(dir)[1].clone();
        named = file_name(&seg);
        rewrite(&seg, |b| set_first_block_len(b, 0x7fff_fff8));
    });
    review("block stored_len 2 GiB", &log, true, &named);
}

#[test]
fn a_block_claiming_one_gib_past_the_end_of_a_sealed_segment_is_refused() {
    let root = tempfile::tempdir().unwrap();
    let mut named = String::new();
    let log = case(root.path(), "long_block", |dir| {
        let seg = segments(dir)[2].clone();
        named = file_name(&seg);
        // The largest length the format allows (1 GiB + 16), in a 4 KiB file.
        rewrite(&seg, |b| set_first_block_len(b, (1 << 30) + 16));
    });
    review("block stored_len 1 GiB + 16", &log, true, &named);
}

#[test]
fn a_footer_counting_more_records_than_its_file_can_hold_is_refused() {
    let root = tempfile::tempdir().unwrap();
    let mut named = String::new();
    let log = case(root.path(), "lying_count", |dir| {
        let seg = segments(dir)[1].clone();
        named = file_name(&seg);
        rewrite(&seg, |b| {
            patch_footer(b, |body| put_u64(body, 8, u64::MAX / 2))
        });
    });
    review("footer record count 2^63", &log, true, &named);
}

#[test]
fn a_footer_claiming_a_million_index_entries_is_refused() {
    let root = tempfile::tempdir().unwrap();
    let mut named = String::new();
    let log = case(root.path(), "lying_index_count", |dir| {
        let seg = segments(dir)[1].clone();
        named = file_name(&seg);
        rewrite(&seg, |b| patch_footer(b, |body| put_u32(body, 92, 1 << 20)));
    });
    review("footer index count 2^20", &log, true, &named);
}

#[test]
fn an_index_entry_outside_the_file_is_refused() {
    let root = tempfile::tempdir().unwrap();
    let mut named = String::new();
    let log = case(root.path(), "index_outside", |dir| {
        let seg = segments(dir)[1].clone();
        named = file_name(&seg);
        rewrite(&seg, |b| {
            patch_footer(b, |body| {
                let at = index_at(body);
                put_u64(body, at + 16, u64::MAX - 7);
            });
        });
    });
    review("index entry offset u64::MAX - 7", &log, true, &named);
}

#[test]
fn a_footer_that_disagrees_with_its_blocks_is_refused() {
    let root = tempfile::tempdir().unwrap();
    for (what, field, delta) in [
        ("footer last seq + 1", 32, 1_u64),
        ("footer first ts + 1", 40, 1),
        ("footer block count + 1", 16, 1),
    ] {
        let mut named = String::new();
        let log = case(root.path(), &format!("footer_{field}"), |dir| {
            let seg = segments(dir)[1].clone();
            named = file_name(&seg);
            rewrite(&seg, |b| {
                patch_footer(b, |body| {
                    let v = u64::from_le_bytes(body[field..field + 8].try_into().unwrap());
                    put_u64(body, field, v.wrapping_add(delta));
                });
            });
        });
        review(what, &log, true, &named);
    }
}

#[test]
fn a_symbolic_link_in_place_of_a_segment_is_refused_naming_it() {
    let root = tempfile::tempdir().unwrap();
    for (what, target) in [
        ("symlink to a copy", None),
        ("symlink to /dev/zero", Some("/dev/zero")),
    ] {
        let mut named = String::new();
        let log = case(
            root.path(),
            &format!("symlink_{}", target.is_some()),
            |dir| {
                let seg = segments(dir)[1].clone();
                named = file_name(&seg);
                let aside = root.path().join(format!("aside_{}", target.is_some()));
                fs::rename(&seg, &aside).unwrap();
                symlink(target.map_or(aside, PathBuf::from), &seg).unwrap();
            },
        );
        review(what, &log, true, &named);
    }
}

#[test]
fn a_segment_from_another_log_is_refused_naming_it() {
    let root = tempfile::tempdir().unwrap();
    let other = root.path().join("other");
    real_log(&other, 2000);
    let mut named = String::new();
    let log = case(root.path(), "foreign", |dir| {
        // Our second segment out, the other log's second segment in, under its own name
        // (the same name when batching cut both logs alike, a neighbouring one when not).
        let ours = segments(dir)[1].clone();
        let theirs = segments(&other)[1].clone();
        named = file_name(&theirs);
        fs::set_permissions(&ours, fs::Permissions::from_mode(0o600)).unwrap();
        fs::remove_file(&ours).unwrap();
        fs::copy(&theirs, dir.join(&named)).unwrap();
    });
    review("a segment of another log", &log, true, &named);
}

#[test]
fn a_dictionary_with_ids_near_u32_max_is_refused_naming_its_record() {
    let root = tempfile::tempdir().unwrap();
    let log = case(root.path(), "dictionary", |dir| {
        // A record the recorder would never write, appended through the log itself so
        // its checksums and link are valid: only the reader of names can refuse it.
        let (mut log, _) = Log::open(dir, LogOptions::default()).unwrap();
        let record = DictionaryRecord {
            entries: vec![
                (u32::MAX - 1, "robot.huge".to_owned()),
                (u32::MAX, "robot.huger".to_owned()),
            ],
        };
        let bytes = rkyv::to_bytes::<rkyv::rancor::Error>(&record).unwrap();
        let ts = u64::try_from(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos(),
        )
        .unwrap();
        log.append(Record::new(DICTIONARY, ts, &bytes)).unwrap();
        log.close().unwrap();
    });
    let runs = review(
        "dictionary ids u32::MAX - 1, u32::MAX",
        &log,
        false,
        "dictionary record at seq",
    );
    // The log is intact (the record's checksums and link are valid): verify accepts it,
    // and the readers that fold names refuse it.
    assert_eq!(runs[0].code, Some(0), "{}", runs[0].stderr);
    assert_eq!(
        runs[1].code,
        Some(1),
        "replay must refuse the names: {}",
        runs[1].stderr
    );
}
