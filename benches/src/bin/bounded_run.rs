//! A bounded run: a recorder at full speed under a disk budget, fed `--factor` times
//! the budget, beside an unbounded recorder fed the same events; then the checks of a
//! week on a fixed disk.
//!
//! ```text
//! cargo run --release -p blackbox-benches --bin bounded_run -- \
//!     [--max-bytes 1GiB] [--factor 10] [--pinned 512MiB] [--segment 64MiB] [--dir PATH] [--keep] [--blackbox PATH]
//! ```
//!
//! Both recorders share one manual clock that moves 100 µs per event, and one policy:
//! 1 KiB raw payloads in five kinds, in turn: `camera.frame`, `arm.state` and
//! `planner.step` in full, `trajectory.pose` sampled 1 in 10, `debug.trace` dropped but
//! kept in the pre-roll ring. A `failure.stop` every `2 × max_bytes / 1 KiB` events
//! fires an incident (2 s of pre-roll, 2 s of post-roll), which is checked and released
//! once 256 MiB more events have been recorded (an operator who reviewed it). A
//! knowledge-base commit every 10 000 events, a working-memory `set` every 1 000. The
//! run stops when the unbounded log holds `factor × max_bytes`.
//!
//! Checked, and the run fails if any does not hold:
//! - after every 10 000 events, the bounded log's segment files and its disk reserve
//!   sum to at most `max_bytes + pinned + one segment + the reserve` (the largest sum is
//!   printed);
//! - every incident's window, when it is released and again at the end for those still
//!   pinned, holds one event record for every event recorded in it (an independent
//!   count: the bench knows when it recorded each event);
//! - `blackbox verify` passes on the bounded log;
//! - `blackbox stats --json` gives the same per-kind totals for both logs;
//! - with the bounded log's knowledge-base view removed (so it is rebuilt from the
//!   retained log alone), `blackbox state --at END --json` gives the same knowledge
//!   base (each fact without the fields that hold seqs, which the bounded log's prune
//!   records shift) and working memory for both logs.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use blackbox::{Clock, Conditions, Config, Event, ManualClock, Policy, Provenance, Recorder, Seq};
use blackbox_benches::{BoxError, Result};
use serde_json::{Value, json};

const USAGE: &str = "usage: bounded_run [--max-bytes SIZE] [--factor N] [--pinned SIZE] [--segment SIZE] [--dir PATH] [--keep] [--blackbox PATH]";
/// The clock at the first event: 2026-01-01T00:00:00Z.
const START_NS: u64 = 1_767_225_600_000_000_000;
/// Clock step per event.
const STEP_NS: u64 = 100_000;
/// Payload bytes of every event.
const PAYLOAD: usize = 1024;
/// The kinds, in turn.
const KINDS: [&str; 5] = [
    "camera.frame",
    "arm.state",
    "planner.step",
    "trajectory.pose",
    "debug.trace",
];
/// Pre-roll and post-roll of an incident.
const ROLL_NS: u64 = 2_000_000_000;
/// Events between knowledge-base commits, and between working-memory sets.
const COMMIT_EVERY: u64 = 10_000;
const SET_EVERY: u64 = 1_000;
/// Events between disk-size checks.
const CHECK_EVERY: u64 = 10_000;
/// The log's disk reserve (`LogOptions::disk_reserve_bytes`, left at its default).
const RESERVE_BYTES: u64 = 2 << 20;
/// Bytes of events recorded after an incident before it is checked and released.
const REVIEW_AFTER_BYTES: u64 = 256 << 20;

const POLICY: &str = r#"
default = "full"

[[rules]]
match = "trajectory.*"
tier = "sample"
every = 10

[[rules]]
match = "debug.*"
tier = "drop"
preroll = true

[incident]
triggers = ["failure.*"]
preroll = "2s"
postroll = "2s"
preroll_bytes_max = "256MiB"
"#;

#[derive(Debug)]
struct Args {
    max_bytes: u64,
    factor: u64,
    pinned: u64,
    segment: u64,
    dir: PathBuf,
    keep: bool,
    blackbox: Option<PathBuf>,
}

fn parse_args(mut args: impl Iterator<Item = String>) -> Result<Option<Args>> {
    let mut parsed = Args {
        max_bytes: 1 << 30,
        factor: 10,
        pinned: 512 << 20,
        segment: 64 << 20,
        dir: std::env::temp_dir(),
        keep: false,
        blackbox: None,
    };
    let size = |s: String| blackbox::policy::parse_size(&s).map_err(BoxError::from);
    while let Some(arg) = args.next() {
        let mut value = || {
            args.next()
                .ok_or_else(|| BoxError::from(format!("{arg} needs a value\n{USAGE}")))
        };
        match arg.as_str() {
            "--max-bytes" => parsed.max_bytes = size(value()?)?,
            "--factor" => parsed.factor = value()?.parse()?,
            "--pinned" => parsed.pinned = size(value()?)?,
            "--segment" => parsed.segment = size(value()?)?,
            "--dir" => parsed.dir = PathBuf::from(value()?),
            "--blackbox" => parsed.blackbox = Some(PathBuf::from(value()?)),
            "--keep" => parsed.keep = true,
            "-h" | "--help" => return Ok(None),
            other => return Err(format!("unknown argument {other:?}\n{USAGE}").into()),
        }
    }
    if parsed.factor == 0 {
        return Err(format!("--factor must be at least 1\n{USAGE}").into());
    }
    Ok(Some(parsed))
}

fn main() -> ExitCode {
    blackbox_benches::main_of(
        "bounded_run",
        USAGE,
        parse_args(std::env::args().skip(1)),
        run,
    )
}

/// An incident the bench fired: its trigger's seq in the bounded log and when.
#[derive(Debug)]
struct Incident {
    trigger_seq: Seq,
    at_ns: u64,
    /// Events recorded (by the bench's own count) in the window checked.
    expected: u64,
    /// The event index at which it is reviewed and released.
    review_at: u64,
    released: bool,
}

fn run(args: &Args) -> Result<()> {
    let blackbox = match &args.blackbox {
        Some(path) => path.clone(),
        None => blackbox_benches::build_blackbox()?,
    };
    let parent = tempfile::Builder::new()
        .prefix("bounded-run-")
        .tempdir_in(&args.dir)?;
    let bounded_dir = parent.path().join("bounded");
    let unbounded_dir = parent.path().join("unbounded");
    let clock = ManualClock::new(START_NS);
    let policy = Policy::from_toml_str(POLICY)?;
    let config = || {
        Config::new()
            .clock(Arc::new(clock.clone()))
            .policy(policy.clone())
            .log_options(blackbox::LogOptions::default().segment_bytes_max(args.segment))
    };
    let bounded = Recorder::open(
        &bounded_dir,
        config().retention(blackbox_log::Retention {
            max_bytes: Some(args.max_bytes),
            max_age_ns: None,
            pinned_max_bytes: args.pinned,
        }),
    )?;
    let unbounded = Recorder::open(&unbounded_dir, config())?;
    // The log writes segments of at most an eighth of the budget.
    let segment = blackbox::LogOptions::default()
        .segment_bytes_max(args.segment)
        .retention(blackbox_log::Retention {
            max_bytes: Some(args.max_bytes),
            max_age_ns: None,
            pinned_max_bytes: args.pinned,
        })
        .effective_segment_bytes_max();
    let limit = args.max_bytes + args.pinned + segment + RESERVE_BYTES;
    let target = args.factor * args.max_bytes;
    let incident_every = 2 * args.max_bytes / PAYLOAD as u64;
    let review_after = REVIEW_AFTER_BYTES / PAYLOAD as u64;
    let mut payload = [0u8; PAYLOAD];
    for (i, b) in payload.iter_mut().enumerate() {
        *b = u8::try_from(i % 251).unwrap_or(0);
    }
    let mut incidents: Vec<Incident> = Vec::new();
    let mut largest = 0u64;
    let started = Instant::now();
    let mut i = 0u64;
    loop {
        payload[..8].copy_from_slice(&i.to_le_bytes());
        let now = clock.now_ns();
        if i > 0 && i.is_multiple_of(incident_every) {
            let event = Event::new("failure.stop").source("bench").raw(&payload);
            let trigger_seq = bounded.record_evidence(&event)?;
            unbounded.record_evidence(&event)?;
            // Every event in the window, the trigger included, is written in full: the
            // pre-roll from the ring, the post-roll as it comes. Counted one step inside
            // each edge.
            let steps = (ROLL_NS - STEP_NS) / STEP_NS;
            incidents.push(Incident {
                trigger_seq,
                at_ns: now,
                expected: 2 * steps + 1,
                review_at: i + review_after,
                released: false,
            });
        } else {
            let kind = KINDS[usize::try_from(i % KINDS.len() as u64).unwrap_or(0)];
            let event = Event::new(kind).source("bench").raw(&payload);
            if (i + 1).is_multiple_of(COMMIT_EVERY) {
                let a = bounded.record_evidence(&event)?;
                let b = unbounded.record_evidence(&event)?;
                let n = i / COMMIT_EVERY;
                let key = format!("key.{}", n % 16);
                bounded.kb()?.assert(
                    &key,
                    json!(n),
                    0.6,
                    &Conditions::new(),
                    Provenance::new([a]),
                )?;
                unbounded.kb()?.assert(
                    &key,
                    json!(n),
                    0.6,
                    &Conditions::new(),
                    Provenance::new([b]),
                )?;
            } else {
                bounded.record(&event)?;
                unbounded.record(&event)?;
            }
        }
        if (i + 1).is_multiple_of(SET_EVERY) {
            let slot = format!("slot.{}", (i / SET_EVERY) % 32);
            bounded.working().set(slot.clone(), json!(i))?;
            unbounded.working().set(slot, json!(i))?;
        }
        clock.advance_ns(STEP_NS);
        i += 1;
        if i.is_multiple_of(CHECK_EVERY) {
            let bytes = log_bytes(&bounded_dir)?;
            largest = largest.max(bytes);
            if bytes > limit {
                return Err(format!(
                    "the bounded log holds {bytes} bytes after {i} events: more than {limit}"
                )
                .into());
            }
            for incident in incidents
                .iter_mut()
                .filter(|x| !x.released && x.review_at <= i)
            {
                bounded.sync()?;
                check_window(&bounded_dir, incident)?;
                bounded.release(incident.trigger_seq)?;
                incident.released = true;
            }
            if log_bytes(&unbounded_dir)? >= target {
                break;
            }
        }
    }
    bounded.close()?;
    unbounded.close()?;
    let end_ns = clock.now_ns();
    let write_s = started.elapsed().as_secs_f64();
    for incident in incidents.iter().filter(|x| !x.released) {
        check_window(&bounded_dir, incident)?;
    }
    let unbounded_bytes = log_bytes(&unbounded_dir)?;
    println!(
        "{i} events ({:.2} GiB of payload) in {write_s:.0} s, twice: the unbounded log holds {:.2} GiB",
        (i * PAYLOAD as u64) as f64 / f64::from(1u32 << 30),
        unbounded_bytes as f64 / f64::from(1u32 << 30),
    );
    println!(
        "the bounded log: largest {:.3} GiB (limit {:.3} GiB = max_bytes + pinned + one segment + the reserve), {:.3} GiB at the end",
        largest as f64 / f64::from(1u32 << 30),
        limit as f64 / f64::from(1u32 << 30),
        log_bytes(&bounded_dir)? as f64 / f64::from(1u32 << 30),
    );
    println!(
        "{} incidents, every window whole when reviewed ({} released)",
        incidents.len(),
        incidents.iter().filter(|x| x.released).count()
    );
    let bounded_s = bounded_dir.to_string_lossy().into_owned();
    let unbounded_s = unbounded_dir.to_string_lossy().into_owned();
    let verify = output(&blackbox, &["verify", "--dir", &bounded_s])?;
    println!("verify: {}", verify.lines().next().unwrap_or_default());
    let stats = |d: &str| -> Result<Value> {
        let v: Value = serde_json::from_str(&output(&blackbox, &["stats", "--dir", d, "--json"])?)?;
        Ok(v.get("kinds").cloned().unwrap_or(Value::Null))
    };
    if stats(&bounded_s)? != stats(&unbounded_s)? {
        return Err("the per-kind totals of the two logs differ".into());
    }
    println!("stats: the per-kind totals of both logs are equal");
    std::fs::remove_dir_all(bounded_dir.join(blackbox::KB_DIR))?;
    let at = end_ns.to_string();
    let state = |d: &str| -> Result<(Value, Value)> {
        let v: Value = serde_json::from_str(&output(
            &blackbox,
            &["state", "--dir", d, "--at", &at, "--json"],
        )?)?;
        Ok((
            v.get("kb").cloned().unwrap_or(Value::Null),
            v.get("working").cloned().unwrap_or(Value::Null),
        ))
    };
    let (kb_b, working_b) = state(&bounded_s)?;
    let (kb_u, working_u) = state(&unbounded_s)?;
    // Seqs differ between the two logs (the bounded one's prune records take seqs), so
    // facts are compared without the fields that hold seqs (provenance, counter-evidence,
    // rivals' and refuted values' evidence).
    let (kb_b, kb_u) = (without_seqs(&kb_b), without_seqs(&kb_u));
    if working_b != working_u {
        return Err("the working memory at the end differs between the two logs".into());
    }
    if kb_b != kb_u {
        return Err(
            "the knowledge base rebuilt from the bounded log differs from the unbounded one".into(),
        );
    }
    println!(
        "state at the end: the knowledge base rebuilt from the retained log and the working memory equal the unbounded run's"
    );
    if args.keep {
        let kept = parent.keep();
        println!("logs kept in {}", kept.display());
    }
    Ok(())
}

/// `kb` (as `state --json` prints it) with each fact's seq-holding fields left out.
fn without_seqs(kb: &Value) -> Value {
    const SEQ_FIELDS: [&str; 4] = ["provenance", "counter_evidence", "rivals", "refuted"];
    let mut kb = kb.clone();
    if let Some(facts) = kb.as_object_mut() {
        for fact in facts.values_mut().filter_map(Value::as_object_mut) {
            for field in SEQ_FIELDS {
                fact.remove(field);
            }
        }
    }
    kb
}

/// Counts the event records of the bounded log stamped inside the incident's window,
/// one step in from each edge, and compares with the events the bench recorded there.
fn check_window(dir: &Path, incident: &Incident) -> Result<()> {
    let since = incident.at_ns - ROLL_NS + STEP_NS;
    let until = incident.at_ns + ROLL_NS - STEP_NS;
    let query = blackbox_replay::Query::new()
        .since(since)
        .until(until)
        .types([blackbox_replay::RecordType::Event]);
    let mut found = 0u64;
    for record in blackbox_replay::Replay::open(dir, &query)? {
        let record = record?;
        if matches!(record.body, blackbox_replay::Body::Event(_))
            && (since..=until).contains(&record.happened_ns())
        {
            found += 1;
        }
    }
    if found != incident.expected {
        return Err(format!(
            "the incident whose trigger is seq {} holds {found} events in its window, not {}",
            incident.trigger_seq.0, incident.expected
        )
        .into());
    }
    Ok(())
}

/// The bytes of the log's files: its segments and its disk reserve (the knowledge
/// base's view, a cache beside them, is not counted).
fn log_bytes(dir: &Path) -> Result<u64> {
    let mut total = 0;
    let reserve = dir.join(blackbox_log::RESERVE_FILE_NAME);
    let segments = blackbox_log::list_segments(dir)?;
    for path in segments.iter().map(|s| &s.path).chain([&reserve]) {
        // A segment pruned between the listing and this look is no longer on the disk.
        if let Ok(meta) = std::fs::metadata(path) {
            total += meta.len();
        }
    }
    Ok(total)
}

/// Runs `blackbox ARGV`; returns what it printed, or an error with its stderr.
fn output(blackbox: &Path, argv: &[&str]) -> Result<String> {
    let (out, _) = blackbox_benches::run_blackbox(blackbox, argv)?;
    Ok(String::from_utf8(out)?)
}
