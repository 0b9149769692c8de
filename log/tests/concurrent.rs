//! Readers concurrent with the writer, and the single-writer lock.
//!
//! A `LogReader` promises to see, at the start of each range read, every record the
//! writer has handed to the OS, and to treat a block the writer is still writing as the
//! end of the data, never as damage. These tests read while a writer in `Flush` mode
//! appends with small segments (so segments are sealed and created under the reader's
//! feet) and check that every read is a dense run of seqs with exactly the payloads that
//! were written, that no read ever errors, and that reads reach the last record once the
//! writer is done:
//!
//! - `reader_thread_sees_a_dense_prefix`: writer and reader are threads of one process;
//! - `reader_process_sees_a_dense_prefix`: the reader is another process (this test
//!   binary re-executed, running only `reader_child`).
//!
//! The lock tests check that a second writer is refused with `Error::Locked`, naming the
//! holder's pid, whether the first writer lives in another process (`lock_holder_child`)
//! or in the same one.
#![expect(clippy::unwrap_used, reason = "tests fail loudly on any error")]

mod common;

use common::{Expected, SplitMix64};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use blackbox_log::{Durability, Error, Log, LogOptions, LogReader, LogRecord, Record, Seq, verify};

/// Set in the reader child's environment: the log directory to read.
const READER_CHILD_DIR_ENV: &str = "BLACKBOX_READER_CHILD_DIR";
/// Set in the reader child's environment: the file whose appearance says the writer is
/// done. It lives in a side directory, not in the log directory.
const READER_CHILD_DONE_ENV: &str = "BLACKBOX_READER_CHILD_DONE";
/// Set in the lock holder child's environment: the log directory to hold.
const LOCK_CHILD_DIR_ENV: &str = "BLACKBOX_LOCK_CHILD_DIR";
/// Set in the lock holder child's environment: the file whose appearance releases it.
const LOCK_CHILD_RELEASE_ENV: &str = "BLACKBOX_LOCK_CHILD_RELEASE";

/// Records the writer appends.
const N: u64 = 20_000;
const MAX_BATCH: u64 = 50;
/// Every this many records the writer pauses until the reader has completed two more
/// reads (in the process test: two reads that saw everything written so far), so that
/// reads provably overlap the writing at every stage of it, whatever the scheduling.
const CHECKPOINT_RECORDS: u64 = 2_000;
const MAX_PAYLOAD_BYTES: usize = 200;
const TS_BASE: u64 = 1_700_000_000_000_000_000;
const TS_STEP: u64 = 1_000;
/// How long anything may wait for another thread or process before the test fails.
const DEADLINE: Duration = Duration::from_secs(120);

/// Flush mode (what a reader sees is what was written, no fsync needed) with small
/// segments, blocks and index intervals: about 80 segment rolls in a run, and seeks that
/// go through footers' sparse indexes.
fn options() -> LogOptions {
    LogOptions::new()
        .durability(Durability::Flush)
        .segment_bytes_max(32 << 10)
        .block_bytes_max(2 << 10)
        .index_interval_bytes(4 << 10)
}

/// The record at `seq`, a deterministic function of the seq, so that any reader can
/// check any record it is handed.
fn expected(seq: u64) -> Expected {
    common::expected_record(seq, MAX_PAYLOAD_BYTES, ts_of(seq))
}

/// Nondecreasing, in runs of three equal timestamps.
fn ts_of(seq: u64) -> u64 {
    TS_BASE + seq / 3 * TS_STEP
}

/// The first seq whose timestamp is at least `ts`.
fn first_seq_at_or_after(ts: u64) -> u64 {
    ts.saturating_sub(TS_BASE).div_ceil(TS_STEP) * 3
}

/// Appends `n` records after `log.next_seq()` in one batch; returns the last seq.
fn append_batch(log: &mut Log, n: u64) -> u64 {
    let first = log.next_seq().0;
    let batch: Vec<Expected> = (first..first + n).map(expected).collect();
    let records: Vec<Record<'_>> = batch
        .iter()
        .map(|e| Record::new(e.record_type, e.ts_ns, &e.payload))
        .collect();
    let last = log.append_batch(&records).unwrap().unwrap();
    assert_eq!(last, Seq(first + n - 1));
    last.0
}

/// Checks one range read: the records must be `first, first + 1, ...` (stopping at
/// `bound` at the latest) with their deterministic content, and no read may fail.
/// Returns the last seq read.
fn check_dense(
    records: impl Iterator<Item = Result<LogRecord, Error>>,
    first: u64,
    bound: Option<u64>,
    what: &str,
) -> Option<u64> {
    let mut want = first;
    for r in records {
        let r = r.unwrap_or_else(|e| panic!("{what}: error at seq {want}: {e}"));
        assert_eq!(
            r.seq(),
            Seq(want),
            "{what}: not a dense run from seq {first}"
        );
        assert!(
            bound.is_none_or(|b| want <= b),
            "{what}: seq {want} is past the end of the range"
        );
        let e = expected(want);
        assert_eq!(r.ts_ns(), e.ts_ns, "{what}: timestamp of seq {want}");
        assert_eq!(r.record_type(), e.record_type, "{what}: type of seq {want}");
        assert!(
            r.payload() == e.payload,
            "{what}: payload of seq {want} differs from what was written"
        );
        want += 1;
    }
    want.checked_sub(1).filter(|&last| last >= first)
}

/// One reader's view across passes.
struct ReadState {
    reader: LogReader,
    rng: SplitMix64,
    /// The highest seq any read has returned: later reads must reach it too.
    highest: Option<u64>,
    passes: u64,
}

impl ReadState {
    fn new(dir: &Path, seed: u64) -> ReadState {
        ReadState {
            reader: LogReader::open(dir).unwrap(),
            rng: SplitMix64(seed),
            highest: None,
            passes: 0,
        }
    }

    /// One range read of a random kind. `written` is a seq known handed to the OS before
    /// the read started (or `None`): the read must reach it, as it must reach whatever an
    /// earlier read returned. Returns the last seq read.
    fn pass(&mut self, written: Option<u64>) -> Option<u64> {
        let known = written.max(self.highest);
        let k = self.rng.below(known.map_or(1, |s| s + 2));
        let kind = self.rng.below(5);
        let (first, bound, end) = match kind {
            0 => {
                let records = self.reader.records(Seq(0)..).unwrap();
                (0, None, check_dense(records, 0, None, "records(0..)"))
            }
            1 => {
                let records = self.reader.records(Seq(k)..).unwrap();
                let what = format!("records({k}..)");
                (k, None, check_dense(records, k, None, &what))
            }
            2 => {
                let records = self.reader.records_by_time(..).unwrap();
                (
                    0,
                    None,
                    check_dense(records, 0, None, "records_by_time(..)"),
                )
            }
            3 => {
                let ts = ts_of(k);
                let first = first_seq_at_or_after(ts);
                let records = self.reader.records_by_time(ts..).unwrap();
                let what = format!("records_by_time({ts}..)");
                (first, None, check_dense(records, first, None, &what))
            }
            _ => {
                let len = 1 + self.rng.below(500);
                let records = self.reader.records(Seq(k)..Seq(k + len)).unwrap();
                let what = format!("records({k}..{})", k + len);
                let bound = Some(k + len - 1);
                (k, bound, check_dense(records, k, bound, &what))
            }
        };
        if let Some(known) = known {
            let must = bound.map_or(known, |b| b.min(known));
            if first <= must {
                assert!(
                    end.is_some_and(|e| e >= must),
                    "read kind {kind} from seq {first} ended at {end:?}, but seq {must} was \
                     already written"
                );
            }
        }
        self.highest = self.highest.max(end);
        self.passes += 1;
        end
    }

    /// After the writer is done: every kind of read must reach the last record.
    fn final_passes(&mut self) {
        let last = N - 1;
        let all = self.reader.records(Seq(0)..).unwrap();
        assert_eq!(check_dense(all, 0, None, "final records(0..)"), Some(last));
        let all = self.reader.records_by_time(..).unwrap();
        assert_eq!(
            check_dense(all, 0, None, "final records_by_time(..)"),
            Some(last)
        );
        let one = self.reader.records(Seq(last)..).unwrap();
        assert_eq!(
            check_dense(one, last, None, "final records(last..)"),
            Some(last)
        );
        let ts = ts_of(last);
        let tail = self.reader.records_by_time(ts..).unwrap();
        let first = first_seq_at_or_after(ts);
        assert_eq!(
            check_dense(tail, first, None, "final records_by_time(last ts..)"),
            Some(last)
        );
        let none = self.reader.records(Seq(N)..).unwrap();
        assert_eq!(check_dense(none, N, None, "final records(N..)"), None);
        for _ in 0..20 {
            self.pass(Some(last));
        }
        self.highest = self.highest.max(Some(last));
    }
}

/// Appends the N records in random batches, calling `published` after every batch and
/// `checkpoint` every `CHECKPOINT_RECORDS` records, both with the last seq written.
fn write_all(
    log: &mut Log,
    seed: u64,
    mut published: impl FnMut(u64),
    mut checkpoint: impl FnMut(u64),
) {
    let mut rng = SplitMix64(seed);
    let mut next_checkpoint = CHECKPOINT_RECORDS;
    while log.next_seq().0 < N {
        let n = (1 + rng.below(MAX_BATCH)).min(N - log.next_seq().0);
        let last = append_batch(log, n);
        assert_eq!(
            log.written_seq(),
            Some(Seq(last)),
            "Flush mode writes every call"
        );
        published(last);
        if last + 1 >= next_checkpoint && last + 1 < N {
            checkpoint(last);
            next_checkpoint += CHECKPOINT_RECORDS;
        }
    }
}

#[test]
fn reader_thread_sees_a_dense_prefix() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    // The log exists (with its first segment) before the reader starts.
    let (mut log, _) = Log::open(&dir, options()).unwrap();

    // The seq after the last one the writer has handed to the OS (0: none yet).
    let written = Arc::new(AtomicU64::new(0));
    let writer_done = Arc::new(AtomicBool::new(false));
    let passes = Arc::new(AtomicU64::new(0));
    let reader_alive = Arc::new(AtomicBool::new(true));

    let reader = {
        let (dir, written, writer_done, passes, reader_alive) = (
            dir.clone(),
            Arc::clone(&written),
            Arc::clone(&writer_done),
            Arc::clone(&passes),
            Arc::clone(&reader_alive),
        );
        thread::spawn(move || {
            /// Tells the writer to stop waiting for a reader that has failed.
            struct Alive(Arc<AtomicBool>);
            impl Drop for Alive {
                fn drop(&mut self) {
                    self.0.store(false, Ordering::Release);
                }
            }
            let _alive = Alive(reader_alive);
            let mut state = ReadState::new(&dir, 0x0005_EED0_F00D);
            let mut partial_reads = 0u64;
            loop {
                // Loaded before the read starts: what the read must at least see.
                let done = writer_done.load(Ordering::Acquire);
                let floor = written.load(Ordering::Acquire).checked_sub(1);
                let end = state.pass(floor);
                if end < Some(N - 1) {
                    partial_reads += 1;
                }
                passes.fetch_add(1, Ordering::Release);
                if done {
                    state.final_passes();
                    return (state.passes, partial_reads);
                }
            }
        })
    };

    let writer = {
        let (written, passes) = (Arc::clone(&written), Arc::clone(&passes));
        thread::spawn(move || {
            write_all(
                &mut log,
                0x0BA7_C4E5,
                |last| written.store(last + 1, Ordering::Release),
                |_| {
                    // At least one whole read runs after this point.
                    let target = passes.load(Ordering::Acquire) + 2;
                    let started = Instant::now();
                    while passes.load(Ordering::Acquire) < target {
                        assert!(
                            reader_alive.load(Ordering::Acquire),
                            "the reader thread failed"
                        );
                        assert!(started.elapsed() < DEADLINE, "the reader made no progress");
                        thread::sleep(Duration::from_millis(1));
                    }
                },
            );
            log.close().unwrap();
            writer_done.store(true, Ordering::Release);
        })
    };

    writer.join().unwrap();
    let (reads, partial_reads) = reader.join().unwrap();
    let report = verify(&dir, None, None).unwrap();
    assert_eq!(report.records, N);
    println!(
        "{reads} reads, {partial_reads} of them while the writer was appending, across {} \
         segments",
        report.segments
    );
    assert!(
        partial_reads >= 2 * (N / CHECKPOINT_RECORDS - 1),
        "the reads did not overlap the writing"
    );
}

/// The reader process: reads in a loop until the `DONE` file appears, then reads once
/// more, prints the highest seq it saw and `OK`. Any error or non-dense read panics,
/// which the parent sees as a failed exit. Returns at once in a normal test run.
#[test]
fn reader_child() {
    let Some(dir) = std::env::var_os(READER_CHILD_DIR_ENV) else {
        return;
    };
    let done = PathBuf::from(std::env::var_os(READER_CHILD_DONE_ENV).unwrap());
    let started = Instant::now();
    let mut state = ReadState::new(Path::new(&dir), u64::from(std::process::id()));
    let mut out = std::io::stdout().lock();
    loop {
        // Checked before the read: if the writer was done then, this read sees it all.
        let writer_done = done.exists();
        let end = state.pass(None);
        let end = end.map_or_else(|| "none".to_owned(), |e| e.to_string());
        writeln!(out, "PASS {} END {end}", state.passes).unwrap();
        out.flush().unwrap();
        if writer_done {
            state.final_passes();
            writeln!(out, "HIGHEST {}", state.highest.unwrap()).unwrap();
            writeln!(out, "OK").unwrap();
            out.flush().unwrap();
            return;
        }
        assert!(started.elapsed() < DEADLINE, "the writer never finished");
    }
}

/// Kills a child if the parent fails while it runs.
struct ChildGuard(Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if self.0.try_wait().ok().flatten().is_none() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// Spawns this test binary running only `test_name`, with `env` set.
fn spawn_self(test_name: &str, env: &[(&str, &Path)]) -> ChildGuard {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([test_name, "--exact", "--nocapture", "--test-threads=1"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    ChildGuard(cmd.spawn().unwrap())
}

/// Sends the child's stdout words, line by line, over a channel. The test harness may
/// print `test NAME ... ` before the first line, so lines are split into words.
fn stdout_lines(child: &mut ChildGuard) -> (mpsc::Receiver<Vec<String>>, JoinHandle<()>) {
    let stdout = child.0.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    let handle = thread::spawn(move || {
        for line in BufReader::new(stdout)
            .lines()
            .map_while(std::result::Result::ok)
        {
            let words: Vec<String> = line.split_whitespace().map(str::to_owned).collect();
            if tx.send(words).is_err() {
                return;
            }
        }
    });
    (rx, handle)
}

fn stderr_text(child: &mut ChildGuard) -> JoinHandle<String> {
    let mut stderr = child.0.stderr.take().unwrap();
    thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    })
}

/// The word after `key` in `words`, if any.
fn word_after<'a>(words: &'a [String], key: &str) -> Option<&'a str> {
    let at = words.iter().position(|w| w == key)?;
    words.get(at + 1).map(String::as_str)
}

/// What the reader child reported.
#[derive(Debug, Default)]
struct ChildReads {
    passes: u64,
    /// Reads that ended before the last record.
    partial: u64,
    highest: Option<u64>,
    ok: bool,
}

impl ChildReads {
    /// Takes in one line; for a `PASS` line returns the last seq that read saw.
    fn absorb(&mut self, words: &[String]) -> Option<Option<u64>> {
        if let Some(h) = word_after(words, "HIGHEST") {
            self.highest = Some(h.parse().unwrap());
        }
        self.ok |= words.last().is_some_and(|w| w == "OK");
        let n = word_after(words, "PASS")?;
        self.passes = n.parse().unwrap();
        let end = match word_after(words, "END").unwrap() {
            "none" => None,
            e => Some(e.parse().unwrap()),
        };
        if end < Some(N - 1) {
            self.partial += 1;
        }
        Some(end)
    }
}

#[test]
fn reader_process_sees_a_dense_prefix() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    // Beside the log, not in it: the log directory holds only the log.
    let side = tempfile::tempdir().unwrap();
    let done = side.path().join("DONE");
    let (mut log, _) = Log::open(&dir, options()).unwrap();

    let mut child = spawn_self(
        "reader_child",
        &[(READER_CHILD_DIR_ENV, &dir), (READER_CHILD_DONE_ENV, &done)],
    );
    let stderr = stderr_text(&mut child);
    let (lines, stdout) = stdout_lines(&mut child);
    let mut seen = ChildReads::default();

    write_all(
        &mut log,
        0x0D15_C0DE,
        |_| {},
        |last| {
            // Lines already queued tell of reads that may predate this point: wait for
            // two reads that saw everything written so far.
            for words in lines.try_iter() {
                seen.absorb(&words);
            }
            let mut caught_up = 0;
            let started = Instant::now();
            while caught_up < 2 {
                match lines.recv_timeout(DEADLINE.saturating_sub(started.elapsed())) {
                    Ok(words) => {
                        if seen.absorb(&words) == Some(Some(last)) {
                            caught_up += 1;
                        }
                    }
                    Err(e) => panic!("the reader child made no progress ({e})"),
                }
            }
        },
    );
    log.close().unwrap();
    std::fs::File::create(&done).unwrap();

    let status = child.0.wait().unwrap();
    stdout.join().unwrap();
    for words in lines.try_iter() {
        seen.absorb(&words);
    }
    let errors = stderr.join().unwrap();
    assert!(
        status.success(),
        "the reader child failed ({status}):\n{errors}"
    );
    assert_eq!(
        seen.highest,
        Some(N - 1),
        "the reader child did not see the last record"
    );
    assert!(seen.ok, "the reader child did not finish its reads");
    println!(
        "the reader child made {} reads, {} of them while the writer was appending",
        seen.passes, seen.partial
    );
    assert!(
        seen.partial >= 2 * (N / CHECKPOINT_RECORDS - 1),
        "the reads did not overlap the writing"
    );
    assert_eq!(verify(&dir, None, None).unwrap().records, N);
    assert!(
        std::fs::read_dir(&dir)
            .unwrap()
            .all(|e| e.unwrap().file_name() != "DONE"),
        "the log directory holds only the log"
    );
}

/// The lock holder: opens the log as its writer, appends one record, prints `LOCKED`
/// and holds the log until the release file appears. Returns at once in a normal run.
#[test]
fn lock_holder_child() {
    let Some(dir) = std::env::var_os(LOCK_CHILD_DIR_ENV) else {
        return;
    };
    let release = PathBuf::from(std::env::var_os(LOCK_CHILD_RELEASE_ENV).unwrap());
    let (mut log, _) = Log::open(&dir, options()).unwrap();
    append_batch(&mut log, 1);
    println!("LOCKED");
    std::io::stdout().flush().unwrap();
    let started = Instant::now();
    while !release.exists() {
        assert!(started.elapsed() < DEADLINE, "never released");
        thread::sleep(Duration::from_millis(5));
    }
    log.close().unwrap();
}

#[test]
fn second_writer_in_another_process_is_refused_with_holder_pid() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    let side = tempfile::tempdir().unwrap();
    let release = side.path().join("RELEASE");
    let mut child = spawn_self(
        "lock_holder_child",
        &[
            (LOCK_CHILD_DIR_ENV, &dir),
            (LOCK_CHILD_RELEASE_ENV, &release),
        ],
    );
    let stderr = stderr_text(&mut child);
    let (lines, stdout) = stdout_lines(&mut child);
    loop {
        match lines.recv_timeout(DEADLINE) {
            Ok(words) if words.iter().any(|w| w == "LOCKED") => break,
            Ok(_) => {}
            Err(e) => panic!(
                "the lock holder never took the lock ({e}):\n{}",
                stderr.join().unwrap()
            ),
        }
    }

    match Log::open(&dir, options()) {
        Err(Error::Locked { holder_pid, .. }) => {
            assert_eq!(holder_pid, Some(child.0.id()), "the lock names its holder");
        }
        other => panic!(
            "a second writer must be refused while another process holds the log, got {other:?}"
        ),
    }
    // Readers take no lock: the holder's record is readable meanwhile.
    let reader = LogReader::open(&dir).unwrap();
    assert_eq!(
        check_dense(reader.records(..).unwrap(), 0, None, "read beside a writer"),
        Some(0)
    );

    std::fs::File::create(&release).unwrap();
    let status = child.0.wait().unwrap();
    stdout.join().unwrap();
    let errors = stderr.join().unwrap();
    assert!(
        status.success(),
        "the lock holder failed ({status}):\n{errors}"
    );
    // The holder is gone: its lock went with it.
    let (log, recovery) = Log::open(&dir, options()).unwrap();
    assert_eq!(recovery.last_seq, Some(Seq(0)));
    log.close().unwrap();
}

#[test]
fn second_writer_in_the_same_process_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    let (mut log, _) = Log::open(&dir, options()).unwrap();
    match Log::open(&dir, options()) {
        Err(Error::Locked { holder_pid, .. }) => {
            assert_eq!(holder_pid, Some(std::process::id()));
        }
        other => panic!("a second writer must be refused while the first is open, got {other:?}"),
    }
    // The refused open disturbed nothing: the first writer goes on.
    assert_eq!(append_batch(&mut log, 3), 2);
    log.close().unwrap();

    // Closed, the log can be opened again. Other tests of this binary spawn processes:
    // a child between fork and exec briefly shares the lock file's open description,
    // and with it the lock, so a refusal is retried for a moment.
    let started = Instant::now();
    let (log, recovery) = loop {
        match Log::open(&dir, options()) {
            Err(Error::Locked { .. }) if started.elapsed() < Duration::from_secs(2) => {
                thread::sleep(Duration::from_millis(10));
            }
            other => break other.unwrap(),
        }
    };
    assert_eq!(recovery.last_seq, Some(Seq(2)));
    log.close().unwrap();
}
