//! The kill -9 loop through the real binary: `blackbox record --durability sync` fed
//! JSON lines, killed with SIGKILL at a random point of its stream, again and again on
//! the same directory.
//!
//! Each cycle starts `record`, feeds it lines from a thread (events sent with `"ack":
//! true` and without, `kb.put` operations citing the run's first line, and
//! `{"op":"sync"}`), reads its replies, and after a random number of them (none: a kill
//! during its start and recovery) kills it. Then, on the directory as the kill left it:
//!
//! - `blackbox verify --json` exits 0 (a torn tail is reported, not an error);
//! - `blackbox replay --json` from the cycle's first seq: every acknowledged event is at
//!   the seq its reply named, exactly as sent (kind, payload, values); every
//!   acknowledged knowledge-base commit is at its seq; every `synced` seq is there;
//!   every event of the run in the log, acknowledged or not, is exactly a line that was
//!   sent, in the order sent;
//! - the next cycle's run starts after everything the replay found (nothing readable
//!   is lost to the next recovery).
//!
//! A last run ends its input normally: it exits 0, `verify` finds no torn tail, and the
//! whole log holds every acknowledged event of every cycle at its seq.
//!
//! `kill_loop` runs 20 cycles (`BLACKBOX_KILL_CYCLES` overrides, `BLACKBOX_KILL_SEED`
//! changes the seed). The long run, 1000 cycles:
//!
//! ```text
//! cargo test -p blackbox-replay --release --test kill_loop -- --ignored kill_loop_long --nocapture
//! ```
#![expect(clippy::unwrap_used, reason = "tests fail loudly on any error")]

mod common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Child, Stdio};
use std::thread::{self, JoinHandle};
use std::time::Instant;

use common::{bin, blackbox, json_lines, s};
use serde_json::{Value, json};

const CYCLES_ENV: &str = "BLACKBOX_KILL_CYCLES";
const SEED_ENV: &str = "BLACKBOX_KILL_SEED";
const DEFAULT_CYCLES: u64 = 20;
const LONG_CYCLES: u64 = 1000;
const DEFAULT_SEED: u64 = 0x0B1A_C0B0_C5C1_0001;
/// Lines a feeder writes at most (the run is killed long before).
const MAX_LINES: u64 = 20_000;
const SIGKILL: i32 = 9;

/// splitmix64.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// What line `n` (from 1) of run `run` is: a function of both alone, so the feeder and
/// the checks agree without sharing anything.
#[derive(Debug, Clone, PartialEq)]
enum Sent {
    Event {
        kind: String,
        payload: Value,
        values: Value,
        ack: bool,
    },
    KbPut {
        key: String,
    },
    Sync,
}

fn sent(run: u64, n: u64) -> Sent {
    let h = mix(run.wrapping_mul(0x1_0000_0001) ^ n);
    let event = |ack: bool| Sent::Event {
        kind: format!("obs.k{}", n % 4),
        payload: json!({"run": run, "line": n, "pad": "x".repeat(usize::try_from(h % 300).unwrap())}),
        values: json!({"v": n as f64}),
        ack,
    };
    if n == 1 {
        return event(true);
    }
    match h % 10 {
        0..=4 => event(true),
        5 | 6 => event(false),
        7 => Sent::KbPut {
            key: format!("k.r{run}.l{n}"),
        },
        _ => Sent::Sync,
    }
}

fn line_text(run: u64, n: u64) -> String {
    match sent(run, n) {
        Sent::Event {
            kind,
            payload,
            values,
            ack,
        } => json!({"kind": kind, "payload": payload, "values": values, "ack": ack}).to_string(),
        Sent::KbPut { key } => {
            json!({"op": "kb.put", "key": key, "value": n, "evidence": ["line:1"]}).to_string()
        }
        Sent::Sync => r#"{"op":"sync"}"#.to_owned(),
    }
}

/// Kills the child if the test fails while it runs.
struct ChildGuard(Option<Child>);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if let Some(child) = self.0.as_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// On a failure, prints the cycle and seed and keeps the log directory.
struct FailureContext {
    dir: Option<tempfile::TempDir>,
    what: String,
}

impl Drop for FailureContext {
    fn drop(&mut self) {
        if thread::panicking() {
            let kept = self.dir.take().map(tempfile::TempDir::keep);
            eprintln!(
                "kill loop failed at {}; log directory kept at {kept:?}",
                self.what
            );
        }
    }
}

/// What one run acknowledged.
#[derive(Debug, Default)]
struct Acks {
    /// (line, seq) of acknowledged events.
    events: Vec<(u64, u64)>,
    /// (line, seq) of committed `kb.put`s.
    kb: Vec<(u64, u64)>,
    /// The highest `synced` seq.
    synced: Option<u64>,
    replies: u64,
}

impl Acks {
    fn take(&mut self, reply: &Value) {
        self.replies += 1;
        if let Some(seq) = reply["synced"].as_u64() {
            self.synced = self.synced.max(Some(seq));
            return;
        }
        assert!(reply.get("error").is_none(), "a line was refused: {reply}");
        let line = reply["line"].as_u64().unwrap();
        let seq = reply["seq"].as_u64().unwrap();
        if reply.get("version").is_some() {
            self.kb.push((line, seq));
        } else {
            self.events.push((line, seq));
        }
    }
}

/// Writes the lines of run `run` until the pipe closes (the run was killed or ended).
fn feed(mut stdin: impl Write + Send + 'static, run: u64, lines: u64) -> JoinHandle<()> {
    thread::spawn(move || {
        for n in 1..=lines {
            if writeln!(stdin, "{}", line_text(run, n)).is_err() {
                return;
            }
        }
        let _ = stdin.flush();
    })
}

fn read_all(mut pipe: impl Read + Send + 'static) -> JoinHandle<String> {
    thread::spawn(move || {
        let mut text = String::new();
        let _ = pipe.read_to_string(&mut text);
        text
    })
}

fn start(dir: &Path) -> Child {
    bin()
        .args([
            "record",
            "--dir",
            s(dir),
            "--durability",
            "sync",
            "--segment-bytes",
            "64KiB",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// `blackbox verify --json`: must exit 0; returns the torn tail's bytes, if any.
fn verify(dir: &Path) -> Option<u64> {
    let out = blackbox(&["verify", "--dir", s(dir), "--json"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "verify failed ({:?}): {stdout}{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_str(stdout.trim()).unwrap();
    report["torn_tail"]["bytes"].as_u64()
}

/// The log's records from `from`, by seq.
fn replay_from(dir: &Path, from: u64) -> BTreeMap<u64, Value> {
    let from = from.to_string();
    let out = blackbox(&["replay", "--dir", s(dir), "--json", "--from-seq", &from]);
    assert!(
        out.status.success(),
        "replay failed ({:?}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    json_lines(&String::from_utf8(out.stdout).unwrap())
        .into_iter()
        .map(|r| (r["seq"].as_u64().unwrap(), r))
        .collect()
}

/// Checks that `record` is the event line `line` of run `run` sent, exactly.
fn check_event(record: &Value, run: u64, line: u64) {
    let Sent::Event {
        kind,
        payload,
        values,
        ..
    } = sent(run, line)
    else {
        panic!("line {line} of run {run} is not an event, yet an event claims it: {record}");
    };
    assert_eq!(record["type"], "event", "{record}");
    assert_eq!(
        record["kind"],
        kind.as_str(),
        "kind of line {line}: {record}"
    );
    assert_eq!(
        record["payload"], payload,
        "payload of line {line}: {record}"
    );
    assert_eq!(record["values"], values, "values of line {line}: {record}");
}

#[derive(Debug, Default)]
struct Stats {
    kills: u64,
    kills_before_a_reply: u64,
    acked_events: u64,
    acked_kb: u64,
    syncs: u64,
    unacked_intact: u64,
    torn_tails: u64,
    torn_bytes: u64,
}

/// Every acknowledged event of every run, by seq: (run, line).
type AllAcked = BTreeMap<u64, (u64, u64)>;

/// One cycle: run `run` from the log's `next` seq, killed after `kill_after` replies.
/// Returns the seq after the last record the killed state holds.
fn cycle(
    dir: &Path,
    run: u64,
    next: u64,
    kill_after: u64,
    stats: &mut Stats,
    all: &mut AllAcked,
) -> u64 {
    let mut child = start(dir);
    let feeder = feed(child.stdin.take().unwrap(), run, MAX_LINES);
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let stderr = read_all(child.stderr.take().unwrap());
    let mut guard = ChildGuard(Some(child));
    let mut acks = Acks::default();
    let mut line = String::new();
    while acks.replies < kill_after {
        line.clear();
        let n = stdout.read_line(&mut line).unwrap();
        assert!(n > 0, "record ended before it was killed: {}", {
            let mut child = guard.0.take().unwrap();
            let _ = child.kill();
            let status = child.wait().unwrap();
            format!("{status}; stderr: {}", stderr.join().unwrap())
        });
        acks.take(&serde_json::from_str(&line).unwrap());
    }
    let mut child = guard.0.take().unwrap();
    child.kill().unwrap();
    let status = child.wait().unwrap();
    // Replies printed before the kill, read now: they are acknowledgements too.
    let mut rest = String::new();
    let _ = stdout.read_to_string(&mut rest);
    for l in rest.lines() {
        acks.take(&serde_json::from_str(l).unwrap());
    }
    feeder.join().unwrap();
    let errors = stderr.join().unwrap();
    assert_eq!(
        status.signal(),
        Some(SIGKILL),
        "record died before it was killed ({status}): {errors}"
    );
    stats.kills += 1;
    if acks.replies == 0 {
        stats.kills_before_a_reply += 1;
    }

    if !dir.exists() {
        // Killed before it made the directory: nothing was written, nor acknowledged.
        assert_eq!(acks.replies, 0);
        return next;
    }
    if let Some(bytes) = verify(dir) {
        stats.torn_tails += 1;
        stats.torn_bytes += bytes;
    }
    let records = replay_from(dir, next);
    let end = records.keys().next_back().map_or(next, |s| s + 1);
    for &(line, seq) in &acks.events {
        assert!(
            seq >= next,
            "run {run} acknowledged seq {seq}, before its start {next}"
        );
        let record = records
            .get(&seq)
            .unwrap_or_else(|| panic!("acknowledged line {line} (seq {seq}) is lost"));
        check_event(record, run, line);
        all.insert(seq, (run, line));
    }
    for &(line, seq) in &acks.kb {
        let record = records
            .get(&seq)
            .unwrap_or_else(|| panic!("acknowledged kb.put of line {line} (seq {seq}) is lost"));
        let Sent::KbPut { key } = sent(run, line) else {
            panic!("line {line} is not a kb.put, yet a commit claims it");
        };
        assert!(
            record.to_string().contains(&key),
            "the commit at seq {seq} does not name key {key}: {record}"
        );
    }
    if let Some(synced) = acks.synced {
        assert!(
            end > synced,
            "synced seq {synced} lost: the log ends at {end}"
        );
    }
    // Every event of this run in the log is a line sent, in order.
    let acked: std::collections::BTreeSet<u64> = acks.events.iter().map(|&(l, _)| l).collect();
    let mut last_line = 0;
    for record in records.values() {
        if record["type"] == "event" && record["payload"]["run"] == run {
            let line = record["payload"]["line"].as_u64().unwrap();
            assert!(line > last_line, "line {line} after line {last_line}");
            last_line = line;
            check_event(record, run, line);
            if !acked.contains(&line) {
                stats.unacked_intact += 1;
            }
        }
    }
    stats.acked_events += acks.events.len() as u64;
    stats.acked_kb += acks.kb.len() as u64;
    stats.syncs += u64::from(acks.synced.is_some());
    end
}

fn run_loop(cycles: u64) {
    let base = std::env::var(SEED_ENV).map_or(DEFAULT_SEED, |s| s.parse().unwrap());
    let tmp = tempfile::Builder::new()
        .prefix("blackbox-kill")
        .tempdir()
        .unwrap();
    let dir = tmp.path().join("log");
    let mut ctx = FailureContext {
        dir: Some(tmp),
        what: String::new(),
    };
    let started = Instant::now();
    let mut stats = Stats::default();
    let mut all = AllAcked::new();
    let mut next = 0;
    for run in 0..cycles {
        let seed = mix(base ^ run.wrapping_mul(0xA076_1D64_78BD_642F));
        // One kill in ten before any reply (during start and recovery), the others
        // after up to 150 replies.
        let kill_after = if seed.is_multiple_of(10) {
            0
        } else {
            1 + seed / 10 % 150
        };
        ctx.what = format!(
            "cycle {run} (seed {seed:#018x}, killed after {kill_after} replies; rerun with \
             {SEED_ENV}={base}), dir {}",
            dir.display()
        );
        let end = cycle(&dir, run, next, kill_after, &mut stats, &mut all);
        assert!(end >= next, "the log lost records of an earlier run");
        next = end;
    }

    // A run that ends its input: it recovers what the last kill left and closes.
    ctx.what = format!("the last run, dir {}", dir.display());
    let run = cycles;
    let mut child = start(&dir);
    let lines = 40;
    feed(child.stdin.take().unwrap(), run, lines)
        .join()
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "the last run failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let replies = json_lines(&String::from_utf8(out.stdout).unwrap());
    let mut first_seq = None;
    for reply in &replies {
        if let (Some(line), Some(seq)) = (reply["line"].as_u64(), reply["seq"].as_u64())
            && reply.get("version").is_none()
        {
            first_seq = first_seq.or(Some(seq));
            all.insert(seq, (run, line));
        }
    }
    assert!(
        first_seq.unwrap() >= next,
        "the last run wrote over records the killed ones left"
    );
    assert_eq!(verify(&dir), None, "a torn tail after a clean close");
    let records = replay_from(&dir, 0);
    for (&seq, &(run, line)) in &all {
        let record = records
            .get(&seq)
            .unwrap_or_else(|| panic!("acknowledged seq {seq} (run {run}, line {line}) is lost"));
        check_event(record, run, line);
    }
    println!(
        "{} SIGKILLs of `blackbox record --durability sync` in {:.1?} ({} before any \
         reply): {} events and {} kb.put commits acknowledged, all found as sent ({} \
         acknowledged events checked again at the end); {} runs replied to a sync; {} \
         events written but not acknowledged found intact; {} torn tails ({} bytes) \
         reported by verify and cut by the next run; {} records in the log",
        stats.kills,
        started.elapsed(),
        stats.kills_before_a_reply,
        stats.acked_events,
        stats.acked_kb,
        all.len(),
        stats.syncs,
        stats.unacked_intact,
        stats.torn_tails,
        stats.torn_bytes,
        records.len(),
    );
    assert!(stats.acked_events > 0, "nothing was acknowledged");
}

#[test]
fn kill_loop() {
    let cycles = std::env::var(CYCLES_ENV).map_or(DEFAULT_CYCLES, |s| s.parse().unwrap());
    run_loop(cycles);
}

/// The long run: `cargo test -p blackbox-replay --release --test kill_loop -- --ignored
/// kill_loop_long --nocapture`.
#[test]
#[ignore = "long: 1000 SIGKILLs of the binary, run by hand in release"]
fn kill_loop_long() {
    run_loop(LONG_CYCLES);
}
