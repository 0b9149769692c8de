//! A long run: a log of `--events` events written through the recorder, then the time
//! of each point-in-time read through the `blackbox` command.
//!
//! ```text
//! cargo run --release -p blackbox-benches --bin long_run -- \
//!     --events N [--runs R] [--dir PATH] [--keep] [--blackbox PATH]
//! ```
//!
//! The log is written by a [`Recorder`] with default options and a manual clock that
//! moves 1 ms per event (so 1 M events span about 17 minutes): 200-byte raw payloads
//! in four kinds, in turn; a knowledge-base commit every 10 000 events (an `assert` on
//! one of 16 keys, citing the event just recorded); a working-memory `set` every 1 000
//! events and a checkpoint every 100 000 (besides the recorder's own, every 60 s of its
//! clock, and its accounting records, every 5 s). `robot.state` events carry two values;
//! a `fault.overheat` event halfway through triggers an incident (2 s of pre-roll, 1 s
//! of post-roll).
//!
//! Then each read is run `--runs` times (default 3) through the release `blackbox`
//! binary (built first with cargo unless `--blackbox` names one), each run timed from
//! spawn to exit, and the median is printed in a markdown table:
//!
//! | read | command |
//! |---|---|
//! | `state --at` | `blackbox state --dir D --at T`, T halfway through the log |
//! | `kb get` | `blackbox kb get KEY --dir D` |
//! | `kb get --at` | `blackbox kb get KEY --dir D --at T` |
//! | `kb history` | `blackbox kb history KEY --dir D` |
//! | `replay` of 1 s | `blackbox replay --dir D --since T --until T+1s` |
//! | `stats` | `blackbox stats --dir D` |
//! | `verify` | `blackbox verify --dir D` |
//! | `report` of the incident | `blackbox report --dir D --incident 1 --out F` |
//! | `report` overview | `blackbox report --dir D --out F` |
//!
//! Every command's output goes to a pipe that is drained (the bytes are counted, so a
//! command cannot print nothing unnoticed); a command that fails stops the bench. The
//! log is removed at the end unless `--keep`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use blackbox::{
    Clock, Conditions, Config, Event, IncidentPolicy, ManualClock, Policy, Provenance, Recorder,
};
use blackbox_benches::{BoxError, Result};
use serde_json::json;

const USAGE: &str = "usage: long_run --events N [--runs R] [--dir PATH] [--keep] [--blackbox PATH]";
/// The recorder's clock at the first event: 2026-01-01T00:00:00Z.
const START_NS: u64 = 1_767_225_600_000_000_000;
/// Clock step per event.
const STEP_NS: u64 = 1_000_000;
/// Events between knowledge-base commits.
const COMMIT_EVERY: u64 = 10_000;
/// Events between working-memory sets.
const SET_EVERY: u64 = 1_000;
/// Events between requested checkpoints.
const CHECKPOINT_EVERY: u64 = 100_000;
/// Payload bytes of every event.
const PAYLOAD: usize = 200;
/// The kinds, in turn.
const KINDS: [&str; 4] = ["robot.state", "camera.meta", "lidar.scan", "planner.step"];
/// Knowledge-base keys, in turn.
const KEYS: u64 = 16;

#[derive(Debug)]
struct Args {
    events: u64,
    runs: usize,
    dir: PathBuf,
    keep: bool,
    blackbox: Option<PathBuf>,
}

fn parse_args(mut args: impl Iterator<Item = String>) -> Result<Option<Args>> {
    let mut parsed = Args {
        events: 0,
        runs: 3,
        dir: std::env::temp_dir(),
        keep: false,
        blackbox: None,
    };
    while let Some(arg) = args.next() {
        let mut value = || {
            args.next()
                .ok_or_else(|| BoxError::from(format!("{arg} needs a value\n{USAGE}")))
        };
        match arg.as_str() {
            "--events" => parsed.events = value()?.parse()?,
            "--runs" => parsed.runs = value()?.parse()?,
            "--dir" => parsed.dir = PathBuf::from(value()?),
            "--blackbox" => parsed.blackbox = Some(PathBuf::from(value()?)),
            "--keep" => parsed.keep = true,
            "-h" | "--help" => return Ok(None),
            other => return Err(format!("unknown argument {other:?}\n{USAGE}").into()),
        }
    }
    if parsed.events == 0 || parsed.runs == 0 {
        return Err(format!("--events and --runs must be at least 1\n{USAGE}").into());
    }
    Ok(Some(parsed))
}

fn main() -> ExitCode {
    blackbox_benches::main_of("long_run", USAGE, parse_args(std::env::args().skip(1)), run)
}

fn run(args: &Args) -> Result<()> {
    let blackbox = match &args.blackbox {
        Some(path) => path.clone(),
        None => blackbox_benches::build_blackbox()?,
    };
    let parent = tempfile::Builder::new()
        .prefix("long-run-")
        .tempdir_in(&args.dir)?;
    let dir = parent.path().join("log");
    let started = Instant::now();
    let end_ns = write_log(&dir, args.events)?;
    let write_s = started.elapsed().as_secs_f64();
    let bytes = log_bytes(&dir)?;
    println!(
        "{} events written in {write_s:.1} s: {:.0} MB in {} segments",
        args.events,
        bytes as f64 / 1e6,
        segments(&dir)?
    );
    let mid_ns = START_NS + (end_ns - START_NS) / 2;
    let d = dir.to_string_lossy().into_owned();
    let mid = mid_ns.to_string();
    let mid_end = (mid_ns + 1_000_000_000).to_string();
    let key = "key.0".to_owned();
    let incident_html = parent
        .path()
        .join("incident.html")
        .to_string_lossy()
        .into_owned();
    let overview_html = parent
        .path()
        .join("overview.html")
        .to_string_lossy()
        .into_owned();
    let reads: Vec<(&str, Vec<String>)> = vec![
        ("state --at", argv(&["state", "--dir", &d, "--at", &mid])),
        ("kb get", argv(&["kb", "get", &key, "--dir", &d])),
        (
            "kb get --at",
            argv(&["kb", "get", &key, "--dir", &d, "--at", &mid]),
        ),
        ("kb history", argv(&["kb", "history", &key, "--dir", &d])),
        (
            "replay of 1 s",
            argv(&["replay", "--dir", &d, "--since", &mid, "--until", &mid_end]),
        ),
        ("stats", argv(&["stats", "--dir", &d])),
        ("verify", argv(&["verify", "--dir", &d])),
        (
            "report of the incident",
            argv(&[
                "report",
                "--dir",
                &d,
                "--incident",
                "1",
                "--out",
                &incident_html,
            ]),
        ),
        (
            "report overview",
            argv(&["report", "--dir", &d, "--out", &overview_html]),
        ),
    ];
    println!();
    println!(
        "| log | {} |",
        reads
            .iter()
            .map(|(n, _)| format!("`{n}`"))
            .collect::<Vec<_>>()
            .join(" | ")
    );
    println!("|---|{}", "---:|".repeat(reads.len()));
    let mut row = format!(
        "| {} events, {:.0} MB |",
        human(args.events),
        bytes as f64 / 1e6
    );
    for (name, argv) in &reads {
        let mut times = Vec::with_capacity(args.runs);
        for _ in 0..args.runs {
            times.push(time_command(&blackbox, argv).map_err(|e| format!("{name}: {e}"))?);
        }
        times.sort_by(f64::total_cmp);
        let median = times.get(times.len() / 2).copied().unwrap_or(f64::NAN);
        row.push_str(&format!(" {} |", seconds(median)));
    }
    println!("{row}");
    if args.keep {
        let kept = parent.keep();
        println!("log kept in {}", kept.join("log").display());
    }
    Ok(())
}

fn argv(parts: &[&str]) -> Vec<String> {
    parts.iter().map(|&s| s.to_owned()).collect()
}

fn human(n: u64) -> String {
    if n >= 1_000_000 && n.is_multiple_of(1_000_000) {
        format!("{} M", n / 1_000_000)
    } else if n >= 1_000 && n.is_multiple_of(1_000) {
        format!("{} k", n / 1_000)
    } else {
        n.to_string()
    }
}

fn seconds(s: f64) -> String {
    if s < 0.1 {
        format!("{:.0} ms", s * 1e3)
    } else {
        format!("{s:.2} s")
    }
}

/// Writes the log; returns the clock's reading after the last event.
fn write_log(dir: &Path, events: u64) -> Result<u64> {
    let clock = ManualClock::new(START_NS);
    let policy = Policy::builder()
        .incident(IncidentPolicy {
            preroll_ns: 2_000_000_000,
            postroll_ns: 1_000_000_000,
            ..IncidentPolicy::new(&["fault.*"])
        })
        .build()?;
    let recorder = Recorder::open(
        dir,
        Config::new().policy(policy).clock(Arc::new(clock.clone())),
    )?;
    let kb = recorder.kb()?;
    let mut payload = [0u8; PAYLOAD];
    for (i, b) in payload.iter_mut().enumerate() {
        *b = u8::try_from(i % 251).unwrap_or(0);
    }
    for i in 0..events {
        payload[..8].copy_from_slice(&i.to_le_bytes());
        let kind = KINDS[usize::try_from(i % 4).unwrap_or(0)];
        let t = i as f64 / 1000.0;
        let values = [("x", t.sin()), ("v", (t * 0.3).cos())];
        let mut event = Event::new(kind).source("bench").raw(&payload);
        if kind == "robot.state" {
            event = event.values(&values);
        }
        if i == events / 2 {
            recorder.record(&Event::new("fault.overheat").source("bench"))?;
        }
        if (i + 1).is_multiple_of(COMMIT_EVERY) {
            let seq = recorder.record_evidence(&event)?;
            let n = i / COMMIT_EVERY;
            kb.assert(
                &format!("key.{}", n % KEYS),
                json!(n),
                0.6,
                &Conditions::new(),
                Provenance::new([seq]),
            )?;
        } else {
            recorder.record(&event)?;
        }
        if (i + 1).is_multiple_of(SET_EVERY) {
            recorder
                .working()
                .set(format!("slot.{}", (i / SET_EVERY) % 32), json!(i))?;
        }
        if (i + 1).is_multiple_of(CHECKPOINT_EVERY) {
            recorder.checkpoint()?;
        }
        clock.advance_ns(STEP_NS);
    }
    recorder.close()?;
    Ok(clock.now_ns())
}

fn log_bytes(dir: &Path) -> Result<u64> {
    let mut total = 0;
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        if entry.file_type()?.is_file() {
            total += entry.metadata()?.len();
        }
    }
    Ok(total)
}

fn segments(dir: &Path) -> Result<usize> {
    Ok(blackbox_log::list_segments(dir)?.len())
}

/// Runs `blackbox ARGV` once; returns its wall time in seconds.
fn time_command(blackbox: &Path, argv: &[String]) -> Result<f64> {
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    let (out, elapsed) = blackbox_benches::run_blackbox(blackbox, &argv)?;
    if out.is_empty() {
        return Err(format!("blackbox {} printed nothing", argv.join(" ")).into());
    }
    Ok(elapsed)
}
