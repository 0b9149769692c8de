//! SIGKILL crash test: the promise of `Durability::Sync` checked against real process
//! deaths, not simulated ones.
//!
//! A child process (this test binary re-executed, running only `crash_child`) appends
//! batches in `Sync` mode and prints `ACK <last_seq>` after every `append_batch` that
//! returned Ok. The parent kills it with SIGKILL at a random moment, reaps it, and checks
//! what recovery makes of the directory:
//!
//! - `Log::open` succeeds (a torn tail is cut, never refused);
//! - every acknowledged seq is there, with exactly the payload, timestamp and type the
//!   child wrote (all three are deterministic functions of the seq);
//! - records past the highest ACK (written, not yet acknowledged) may exist, but every
//!   record read matches that function too: recovery never keeps garbage;
//! - `verify` passes and still matches the digest of the previous iteration, so nothing
//!   recovered earlier was changed;
//! - the next child continues on the same directory, starting at the reopened log's
//!   `next_seq`.
//!
//! Segments are small (64 KiB) so that kills also land while a segment is being sealed
//! or the next one created, and in the child's own recovery on open.
//!
//! `crash_loop` runs 50 iterations (override with `BLACKBOX_CRASH_ITERATIONS`, change the
//! seed with `BLACKBOX_CRASH_SEED`). The long run, 1000 iterations:
//!
//! ```text
//! cargo test -p blackbox-log --release --test crash -- --ignored crash_loop_long
//! ```
#![expect(clippy::unwrap_used, reason = "tests fail loudly on any error")]

mod common;

use common::{Expected, FailureContext, SplitMix64};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use blackbox_log::format::{SEGMENT_HEADER_LEN, TRAILER_MAGIC};
use blackbox_log::{
    Digest, Durability, Log, LogOptions, LogReader, Record, Seq, list_segments, verify,
};

/// Set in the child's environment: the log directory to append to.
const CHILD_DIR_ENV: &str = "BLACKBOX_CRASH_CHILD_DIR";
/// Set in the child's environment: the seed of its batch sizes.
const CHILD_SEED_ENV: &str = "BLACKBOX_CRASH_CHILD_SEED";
const ITERATIONS_ENV: &str = "BLACKBOX_CRASH_ITERATIONS";
const SEED_ENV: &str = "BLACKBOX_CRASH_SEED";

const DEFAULT_ITERATIONS: u64 = 50;
const LONG_ITERATIONS: u64 = 1000;
const DEFAULT_SEED: u64 = 0x5EED_B1AC_B0C5;

const MAX_PAYLOAD_BYTES: usize = 600;
const MAX_BATCH: u64 = 20;
const TS_BASE: u64 = 1_700_000_000_000_000_000;
const SIGKILL: i32 = 9;

/// The child gives up if it has not been killed by then (an orphan must not append
/// forever).
const CHILD_DEADLINE: Duration = Duration::from_secs(60);

/// The options of both the child and the parent: small segments, blocks and index
/// intervals so that seals, multi-block batches and footer indexes are all on the path.
fn options() -> LogOptions {
    LogOptions::new()
        .durability(Durability::Sync)
        .segment_bytes_max(64 << 10)
        .block_bytes_max(4 << 10)
        .index_interval_bytes(8 << 10)
}

/// The record the child writes at `seq`: a deterministic function of the seq alone, so
/// that the parent can check any record without knowing which child run wrote it.
fn expected(seq: u64) -> Expected {
    common::expected_record(seq, MAX_PAYLOAD_BYTES, TS_BASE + seq / 3 * 1_000)
}

/// The child: appends forever until SIGKILL. Returns at once in a normal test run.
#[test]
fn crash_child() {
    let Some(dir) = std::env::var_os(CHILD_DIR_ENV) else {
        return;
    };
    let seed: u64 = std::env::var(CHILD_SEED_ENV)
        .map(|s| s.parse().unwrap())
        .unwrap_or(1);
    let mut rng = SplitMix64(seed);
    let started = Instant::now();
    let (mut log, _) = Log::open(&dir, options()).unwrap();
    let mut out = std::io::stdout().lock();
    let mut say = |line: String| {
        // A closed pipe means the parent is gone: stop rather than append forever.
        if writeln!(out, "{line}").and_then(|()| out.flush()).is_err() {
            std::process::exit(3);
        }
    };
    say(format!("START {}", log.next_seq().0));
    loop {
        assert!(
            started.elapsed() < CHILD_DEADLINE,
            "crash child was never killed"
        );
        let first = log.next_seq().0;
        let n = 1 + rng.below(MAX_BATCH);
        let batch: Vec<Expected> = (first..first + n).map(expected).collect();
        let records: Vec<Record<'_>> = batch
            .iter()
            .map(|e| Record::new(e.record_type, e.ts_ns, &e.payload))
            .collect();
        let last = log.append_batch(&records).unwrap().unwrap();
        assert_eq!(last, Seq(first + n - 1));
        say(format!("ACK {}", last.0));
    }
}

/// Kills the child if the parent fails while it runs, so no orphan keeps appending.
struct ChildGuard(Option<Child>);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if let Some(child) = self.0.as_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// What the child printed before it died.
#[derive(Debug, Default)]
struct ChildReport {
    start: Option<u64>,
    acks: Vec<u64>,
}

fn parse_child_output(lines: &[String]) -> ChildReport {
    let mut report = ChildReport::default();
    for line in lines {
        // The test harness may print `test crash_child ... ` before the first line.
        let mut words = line.split_whitespace();
        while let Some(word) = words.next() {
            match word {
                "START" => report.start = Some(words.next().unwrap().parse().unwrap()),
                "ACK" => report.acks.push(words.next().unwrap().parse().unwrap()),
                _ => {}
            }
        }
    }
    report
}

fn read_lines(pipe: impl Read + Send + 'static) -> JoinHandle<Vec<String>> {
    thread::spawn(move || {
        BufReader::new(pipe)
            .lines()
            .map_while(std::result::Result::ok)
            .collect()
    })
}

fn read_all(mut pipe: impl Read + Send + 'static) -> JoinHandle<String> {
    thread::spawn(move || {
        let mut text = String::new();
        let _ = pipe.read_to_string(&mut text);
        text
    })
}

/// Checks that the records from `from` to the end of the log are exactly
/// `from..next_seq`, each with its deterministic content.
fn check_records(dir: &Path, from: u64, next_seq: u64) {
    let reader = LogReader::open(dir).unwrap();
    let mut want = from;
    for r in reader.records(Seq(from)..).unwrap() {
        let r = r.unwrap_or_else(|e| panic!("reading seq {want}: {e}"));
        assert_eq!(r.seq(), Seq(want), "records are not dense");
        let e = expected(want);
        assert_eq!(r.ts_ns(), e.ts_ns, "timestamp of seq {want}");
        assert_eq!(r.record_type(), e.record_type, "type of seq {want}");
        assert!(r.payload() == e.payload, "payload of seq {want} is garbage");
        want += 1;
    }
    assert_eq!(
        want, next_seq,
        "the reader ends at a different seq than recovery"
    );
}

/// Where in the segment life cycle a kill landed, read from the last segment file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum KillSite {
    /// No segment yet: killed before the first one was created.
    NoSegment,
    /// The last segment has no complete header: killed while creating it.
    CreatingSegment,
    /// The last segment ends with a footer: killed after a seal, before the next segment.
    AfterSeal,
    /// Anywhere else: appending, syncing, or in the child's own open.
    Appending,
}

fn kill_site(dir: &Path) -> KillSite {
    if !dir.exists() {
        return KillSite::NoSegment;
    }
    let Some(last) = list_segments(dir).unwrap().pop() else {
        return KillSite::NoSegment;
    };
    let bytes = std::fs::read(&last.path).unwrap();
    if bytes.len() < SEGMENT_HEADER_LEN || bytes[..SEGMENT_HEADER_LEN].iter().all(|&b| b == 0) {
        KillSite::CreatingSegment
    } else if bytes.ends_with(&TRAILER_MAGIC) {
        KillSite::AfterSeal
    } else {
        KillSite::Appending
    }
}

#[derive(Debug, Default)]
struct Stats {
    acked_runs: u64,
    acks: u64,
    torn_runs: u64,
    torn_bytes: u64,
    unacked_records: u64,
    creating_segment: u64,
    after_seal: u64,
    checking: Duration,
}

fn run_crash_loop(iterations: u64) {
    let base_seed = std::env::var(SEED_ENV).map_or(DEFAULT_SEED, |s| s.parse().unwrap());
    let exe = std::env::current_exe().unwrap();
    let tmp = tempfile::Builder::new()
        .prefix("blackbox-crash")
        .tempdir()
        .unwrap();
    let dir = tmp.path().join("log");
    let mut ctx = FailureContext {
        test: "crash test",
        dir: Some(tmp),
        what: String::new(),
    };
    let started = Instant::now();
    let mut stats = Stats::default();
    // What the previous recovery left: where the next child must start, and the digest
    // the log must keep matching.
    let mut next_seq = 0u64;
    let mut prev_digest: Option<Digest> = None;

    for i in 0..iterations {
        let seed = SplitMix64(base_seed ^ i.wrapping_mul(0xA076_1D64_78BD_642F)).next_u64();
        ctx.what = format!(
            "iteration {i} (seed {seed:#018x}; rerun with {SEED_ENV}={base_seed}), dir {}",
            dir.display()
        );
        let mut rng = SplitMix64(seed);
        let delay = Duration::from_millis(5 + rng.below(55));
        let child_seed = rng.next_u64();

        let mut child = Command::new(&exe)
            .args(["crash_child", "--exact", "--nocapture", "--test-threads=1"])
            .env(CHILD_DIR_ENV, &dir)
            .env(CHILD_SEED_ENV, child_seed.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = read_lines(child.stdout.take().unwrap());
        let stderr = read_all(child.stderr.take().unwrap());
        let mut guard = ChildGuard(Some(child));
        thread::sleep(delay);
        let mut child = guard.0.take().unwrap();
        child.kill().unwrap();
        // Reaped before anything opens the log: the lock is released at process death.
        let status = child.wait().unwrap();
        let lines = stdout.join().unwrap();
        let errors = stderr.join().unwrap();
        assert_eq!(
            status.signal(),
            Some(SIGKILL),
            "the child died before it was killed ({status}); stdout:\n{}\nstderr:\n{errors}",
            lines.join("\n")
        );
        let report = parse_child_output(&lines);
        if let Some(start) = report.start {
            assert_eq!(
                start, next_seq,
                "the child did not start where the last recovery left the log"
            );
        }
        let mut prev_ack = report.start.unwrap_or(next_seq).checked_sub(1);
        for &ack in &report.acks {
            assert!(
                prev_ack.is_none_or(|p| ack > p),
                "ACKs out of order: {ack} after {prev_ack:?}"
            );
            prev_ack = Some(ack);
        }
        let highest_ack = report.acks.last().copied();
        match kill_site(&dir) {
            KillSite::CreatingSegment => stats.creating_segment += 1,
            KillSite::AfterSeal => stats.after_seal += 1,
            KillSite::NoSegment | KillSite::Appending => {}
        }

        let checks_started = Instant::now();

        // Every other open also verifies the sealed segments' content on open.
        let opts = options().verify_on_open(i % 2 == 1);
        let (log, recovery) =
            Log::open(&dir, opts).unwrap_or_else(|e| panic!("open after SIGKILL failed: {e}"));
        let new_next = log.next_seq().0;
        assert_eq!(
            recovery.last_seq.map_or(0, |s| s.0 + 1),
            new_next,
            "recovery and writer disagree"
        );
        assert!(
            new_next >= next_seq,
            "recovery lost records of an earlier run: the log ends at {new_next}, it held {next_seq}"
        );
        if let Some(ack) = highest_ack {
            assert!(
                new_next > ack,
                "acknowledged seq {ack} lost: the recovered log ends before seq {new_next}"
            );
            stats.acked_runs += 1;
            stats.acks += ack + 1 - report.start.unwrap_or(next_seq);
            stats.unacked_records += new_next - ack - 1;
        }
        if recovery.torn_bytes_cut > 0 {
            stats.torn_runs += 1;
            stats.torn_bytes += recovery.torn_bytes_cut;
            println!(
                "iteration {i}: recovery cut {} torn bytes ({})",
                recovery.torn_bytes_cut,
                recovery.torn_detail.as_deref().unwrap_or("no detail")
            );
        }

        // Content of everything this run added (and of any unacknowledged tail). The
        // earlier prefix is proven unchanged by `verify` against the previous digest.
        check_records(&dir, next_seq, new_next);
        let digest = log.digest();
        let verified = verify(&dir, None, prev_digest.as_ref())
            .unwrap_or_else(|e| panic!("verify after recovery failed: {e}"));
        assert_eq!(verified.records, new_next);
        assert_eq!(verified.last, digest);
        assert_eq!(verified.torn_tail, None, "recovery left a torn tail");
        assert_eq!(verified.digest_matched, prev_digest.is_some());

        // Released before the next child starts.
        drop(log);
        stats.checking += checks_started.elapsed();
        next_seq = new_next;
        prev_digest = digest;
    }

    ctx.what = format!("the final full read, dir {}", dir.display());
    check_records(&dir, 0, next_seq);
    let segments = list_segments(&dir).unwrap().len();
    println!(
        "{iterations} SIGKILLs in {:.1?} ({:.1?} in recovery checks): {} records in \
         {segments} segments; {} runs acknowledged {} records ({} more written \
         unacknowledged); {} recoveries cut {} torn bytes; {} kills while creating a \
         segment, {} between a seal and the next segment",
        started.elapsed(),
        stats.checking,
        next_seq,
        stats.acked_runs,
        stats.acks,
        stats.unacked_records,
        stats.torn_runs,
        stats.torn_bytes,
        stats.creating_segment,
        stats.after_seal,
    );
    assert!(
        stats.acks > 0,
        "no child ever acknowledged a batch: the test checked nothing"
    );
}

#[test]
fn crash_loop() {
    let iterations =
        std::env::var(ITERATIONS_ENV).map_or(DEFAULT_ITERATIONS, |s| s.parse().unwrap());
    run_crash_loop(iterations);
}

/// The long run: `cargo test -p blackbox-log --release --test crash -- --ignored crash_loop_long`.
#[test]
#[ignore = "long: 1000 SIGKILLs, run by hand in release"]
fn crash_loop_long() {
    run_crash_loop(LONG_ITERATIONS);
}
