//! A robot arm's control loop, recorded and then read back.
//!
//! ```text
//! cargo run --release -p blackbox --example robot [-- LOG_DIR]
//! ```
//!
//! Six seconds of a 200 Hz loop run on a [`ManualClock`], so the run takes well under a
//! second and its counts are the same every time. The policy:
//!
//! - `sensor.*`: summary, 1 s windows (the IMU at 200 Hz, with values);
//! - `trajectory.*`: sample, 1 in 10 (the arm's set points at 100 Hz);
//! - `debug.*`: drop (a per-tick trace);
//! - everything else, `action.*` included: full;
//! - incident capture on `failure.*`: 2 s of pre-roll, 1 s of post-roll.
//!
//! The arm plans, reaches, grasps a cup and lifts it; the working memory holds the
//! `goal` and the `grip`, checkpointed once the cup is lifted. At 4.2 s the gripper
//! slips (`failure.gripper`). After `close()`, the log is read back with
//! [`LogReader`] and [`blackbox::codec::access`], and the example prints what each tier
//! kept, the incident, a few summary windows, and the result of
//! [`blackbox::log::verify`].
//!
//! Without `LOG_DIR`, the log goes to a temporary directory that is removed at the end.
//! A `LOG_DIR` that already holds a log is appended to: the recorder restores its
//! running totals, so the report then counts every run in it.

use std::collections::{BTreeMap, HashMap};
use std::error::Error;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use blackbox::codec::{
    self, ArchivedAccountingRecord, ArchivedDictionaryRecord, ArchivedIncidentRecord,
    ArchivedSummaryRecord, Counters,
};
use blackbox::{
    Config, Durability, Event, IncidentPolicy, LogReader, ManualClock, Policy, Recorder, Sampling,
    Tier,
};

type BoxError = Box<dyn Error + Send + Sync + 'static>;

/// Start of the simulated run: 2023-11-14T22:13:20Z.
const T0_NS: u64 = 1_700_000_000_000_000_000;
const MS: u64 = 1_000_000;
const SEC: u64 = 1_000 * MS;
/// One control tick: 200 Hz.
const TICK_NS: u64 = 5 * MS;
/// The run's length.
const RUN_NS: u64 = 6 * SEC;
/// When the gripper slips.
const FAILURE_AT_NS: u64 = 4_200 * MS;

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("robot example failed: {e}");
            let mut source = e.source();
            while let Some(s) = source {
                eprintln!("  caused by: {s}");
                source = s.source();
            }
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), BoxError> {
    let policy = Policy::builder()
        .rule("debug.*", Tier::Drop)
        .rule("sensor.*", Tier::Summary { window_ns: SEC })
        .rule("trajectory.*", Tier::Sample(Sampling::Every(10)))
        .incident(IncidentPolicy {
            preroll_ns: 2 * SEC,
            postroll_ns: SEC,
            ..IncidentPolicy::new(&["failure.*"])
        })
        .build()?;

    let temp;
    let dir = match std::env::args_os().nth(1) {
        Some(d) => std::path::PathBuf::from(d),
        None => {
            temp = tempfile::Builder::new()
                .prefix("blackbox-robot-")
                .tempdir()?;
            temp.path().join("log")
        }
    };

    simulate(&dir, policy.clone())?;
    let log = read_back(&dir)?;
    print_report(&dir, &policy, &log)?;
    Ok(())
}

/// Runs the control loop and closes the recorder.
fn simulate(dir: &Path, policy: Policy) -> Result<(), BoxError> {
    let clock = ManualClock::new(T0_NS);
    let recorder = Recorder::open(
        dir,
        Config::new()
            .policy(policy)
            .clock(Arc::new(clock.clone()))
            .accounting_interval_ns(SEC)
            // A simulation: batches reach the OS when the write buffer fills and at
            // every barrier, not at the end of each of the writer's batches.
            .durability(Durability::Buffered),
    )?;

    let mut t = 0u64;
    let mut tick = 0u64;
    while t < RUN_NS {
        // The simulated clock runs far ahead of the writer thread, which reads the same
        // clock to close summary windows (after a short grace) and to time accounting
        // records, and which snapshots the working memory when it handles a trigger.
        // Barriers let the writer catch up before the clock moves on: at each full
        // second, before the clock gets there (the window's events are all in) and
        // right after (the writer writes its accounting record there), and after the
        // failure's tick (the incident's checkpoint holds the memory of that moment).
        // So the counts below are the same on every run; only seqs may move by a
        // record or two, as dictionary records follow the writer's batches. (On a real
        // clock the writer lags by microseconds, not seconds.)
        if t.is_multiple_of(SEC) {
            recorder.sync()?;
            clock.set_ns(T0_NS + t);
            recorder.sync()?;
        }
        clock.set_ns(T0_NS + t);
        control_tick(&recorder, t, tick)?;
        if t == FAILURE_AT_NS {
            recorder.sync()?;
        }
        t += TICK_NS;
        tick += 1;
    }
    clock.set_ns(T0_NS + RUN_NS);
    recorder.close()?;
    Ok(())
}

/// One 5 ms tick of the controller.
fn control_tick(recorder: &Recorder, t: u64, tick: u64) -> Result<(), BoxError> {
    let secs = t as f64 / SEC as f64;
    let lifted = (3_000 * MS..FAILURE_AT_NS).contains(&t);
    // The IMU on the wrist: gravity, a slow sway, and a jolt when the cup slips.
    let jolt = if (FAILURE_AT_NS..FAILURE_AT_NS + 50 * MS).contains(&t) {
        4.0
    } else {
        0.0
    };
    let imu = [
        ("ax", 0.05 * (secs * 2.0).sin() + jolt),
        ("ay", 0.03 * (secs * 3.0).cos()),
        ("az", -9.81 + if lifted { 0.2 } else { 0.0 } - jolt),
        ("gz", 0.01 * (tick % 7) as f64),
    ];
    recorder.record(&Event::new("sensor.imu").source("wrist").values(&imu))?;
    recorder.record(&Event::new("debug.tick"))?;

    if tick.is_multiple_of(2) {
        let q = [
            ("q1", 0.3 * (secs * 0.5).sin()),
            ("q2", 1.2 - 0.1 * secs),
            ("q3", 0.05 * secs),
        ];
        let payload = format!(
            r#"{{"q":[{:.4},{:.4},{:.4}],"v":0.12}}"#,
            q[0].1, q[1].1, q[2].1
        );
        recorder.record(
            &Event::new("trajectory.arm")
                .source("planner")
                .json(&payload)
                .values(&q),
        )?;
    }

    let wm = recorder.working();
    match t / MS {
        500 => {
            wm.set("goal", serde_json::json!({"task": "pick", "object": "cup"}))?;
            recorder.record(
                &Event::new("action.plan")
                    .source("planner")
                    .json(r#"{"object":"cup","waypoints":12}"#),
            )?;
        }
        1_000 => recorder.record(
            &Event::new("action.reach")
                .source("arm")
                .json(r#"{"target":[0.42,0.10,0.05]}"#),
        )?,
        2_500 => {
            wm.set(
                "grip",
                serde_json::json!({"state": "closed", "force_n": 12.5}),
            )?;
            recorder.record(
                &Event::new("action.grasp")
                    .source("gripper")
                    .json(r#"{"force_n":12.5,"width_m":0.071}"#),
            )?;
        }
        3_000 => {
            recorder.record(
                &Event::new("action.lift")
                    .source("arm")
                    .json(r#"{"height_m":0.15}"#),
            )?;
            recorder.checkpoint()?;
        }
        4_200 => {
            wm.set(
                "grip",
                serde_json::json!({"state": "slipping", "force_n": 3.1}),
            )?;
            recorder.record(
                &Event::new("failure.gripper")
                    .source("gripper")
                    .json(r#"{"reason":"object slipped","force_n":3.1}"#),
            )?;
        }
        4_205 => recorder.record(
            &Event::new("action.stop")
                .source("arm")
                .json(r#"{"reason":"failure.gripper"}"#),
        )?,
        5_000 => {
            wm.set(
                "goal",
                serde_json::json!({"task": "recover", "object": "cup"}),
            )?;
            wm.remove("grip");
            recorder.record(
                &Event::new("action.replan")
                    .source("planner")
                    .json(r#"{"object":"cup","retry":1}"#),
            )?;
        }
        _ => {}
    }
    Ok(())
}

/// One value's aggregates over a summary window.
#[derive(Debug, Clone, Copy)]
struct Aggregate {
    count: u64,
    min: f64,
    max: f64,
    sum: f64,
}

/// A summary window of one kind, decoded. An event that reaches the writer after its
/// window was closed adds a further summary record for the same window; the reader
/// adds them together.
#[derive(Debug, Default)]
struct Window {
    /// Summary records of this (kind, window).
    records: u64,
    count: u64,
    values: BTreeMap<String, Aggregate>,
}

/// An incident marker, decoded.
#[derive(Debug)]
struct Incident {
    kind: String,
    trigger_seq: u64,
    trigger_ts_ns: u64,
    preroll_start_ns: u64,
    postroll_end_ns: u64,
    preroll_events: u64,
}

/// What the log holds, folded into names.
#[derive(Debug, Default)]
struct LogContents {
    /// Records per record type name.
    records: BTreeMap<&'static str, u64>,
    /// Event records written, per kind and written tier.
    written: BTreeMap<String, BTreeMap<&'static str, u64>>,
    /// The running totals per kind, folded from the accounting records.
    accounting: BTreeMap<String, Counters>,
    /// By (kind, window start).
    windows: BTreeMap<(String, u64), Window>,
    incidents: Vec<Incident>,
    /// (seq, ts, JSON) of every checkpoint.
    checkpoints: Vec<(u64, u64, String)>,
}

fn name_of(dict: &HashMap<u32, String>, id: u32) -> String {
    dict.get(&id).cloned().unwrap_or_else(|| format!("#{id}"))
}

/// Reads the whole log, decoding every record in place.
fn read_back(dir: &Path) -> Result<LogContents, BoxError> {
    let reader = LogReader::open(dir)?;
    let mut dict: HashMap<u32, String> = HashMap::new();
    let mut out = LogContents::default();
    for record in reader.records(..)? {
        let record = record?;
        let seq = record.seq().0;
        let t = record.record_type();
        let bytes = record.payload();
        let type_name = match t {
            codec::DICTIONARY => {
                let d = codec::access::<ArchivedDictionaryRecord>(bytes)?;
                for e in d.entries.iter() {
                    dict.insert(e.0.to_native(), e.1.as_str().to_owned());
                }
                "dictionary"
            }
            codec::EVENT => {
                let e = codec::decode_event(bytes, record.ts_ns())?;
                let tier = e.tier.name();
                *out.written
                    .entry(name_of(&dict, e.kind))
                    .or_default()
                    .entry(tier)
                    .or_default() += 1;
                "event"
            }
            codec::SUMMARY => {
                let s = codec::access::<ArchivedSummaryRecord>(bytes)?;
                let key = (
                    name_of(&dict, s.kind.to_native()),
                    s.window_start_ns.to_native(),
                );
                let w = out.windows.entry(key).or_default();
                w.records += 1;
                w.count += s.count.to_native();
                for v in s.values.iter() {
                    let new = Aggregate {
                        count: v.count.to_native(),
                        min: v.min.to_native(),
                        max: v.max.to_native(),
                        sum: v.sum.to_native(),
                    };
                    w.values
                        .entry(name_of(&dict, v.name.to_native()))
                        .and_modify(|a| {
                            a.count += new.count;
                            a.min = a.min.min(new.min);
                            a.max = a.max.max(new.max);
                            a.sum += new.sum;
                        })
                        .or_insert(new);
                }
                "summary"
            }
            codec::ACCOUNTING => {
                let a = codec::access::<ArchivedAccountingRecord>(bytes)?;
                // A record lists the kinds that changed since the one before: fold them.
                for e in a.kinds.iter() {
                    out.accounting
                        .insert(name_of(&dict, e.0.to_native()), e.1.to_counters());
                }
                "accounting"
            }
            codec::INCIDENT => {
                let i = codec::access::<ArchivedIncidentRecord>(bytes)?;
                out.incidents.push(Incident {
                    kind: name_of(&dict, i.trigger_kind.to_native()),
                    trigger_seq: i.trigger_seq.to_native(),
                    trigger_ts_ns: i.trigger_ts_ns.to_native(),
                    preroll_start_ns: i.preroll_start_ns.to_native(),
                    postroll_end_ns: i.postroll_end_ns.to_native(),
                    preroll_events: i.preroll_events.to_native(),
                });
                "incident"
            }
            codec::CHECKPOINT => {
                let json = String::from_utf8_lossy(bytes).into_owned();
                out.checkpoints.push((seq, record.ts_ns(), json));
                "checkpoint"
            }
            _ => "other",
        };
        *out.records.entry(type_name).or_default() += 1;
    }
    Ok(out)
}

/// Seconds since the start of the run.
fn secs(ts_ns: u64) -> f64 {
    ts_ns.saturating_sub(T0_NS) as f64 / SEC as f64
}

fn tier_label(tier: &Tier) -> String {
    match tier {
        Tier::Full => "full".to_owned(),
        Tier::Sample(Sampling::Every(n)) => format!("sample 1/{n}"),
        Tier::Sample(Sampling::Rate(p)) => format!("sample {p}"),
        Tier::Summary { window_ns } => format!("summary {}s", *window_ns as f64 / SEC as f64),
        Tier::Drop => "drop".to_owned(),
    }
}

fn print_report(dir: &Path, policy: &Policy, log: &LogContents) -> Result<(), BoxError> {
    println!(
        "Blackbox robot example: {:.1} s of a 200 Hz control loop on a simulated clock",
        secs(T0_NS + RUN_NS)
    );
    println!("log: {}", dir.display());
    let total: u64 = log.records.values().sum();
    let by_type: Vec<String> = log
        .records
        .iter()
        .map(|(t, n)| format!("{t} {n}"))
        .collect();
    println!("records: {total} ({})", by_type.join(", "));

    println!();
    println!("Retention, folded from the accounting records (running totals per kind):");
    println!(
        "  {:<13} {:<16} {:>6} {:>6} {:>11} {:>10} {:>7} {:>8} {:>7}  written as",
        "tier",
        "kind",
        "seen",
        "kept",
        "sampled_out",
        "summarized",
        "dropped",
        "overflow",
        "preroll"
    );
    // Kinds grouped by tier, in the policy's order: full, sample, summary, drop.
    let mut rows: Vec<(usize, String, &String, &Counters)> = log
        .accounting
        .iter()
        .map(|(kind, c)| {
            let class = policy.classify(kind);
            let rank = match class.tier {
                Tier::Full => 0,
                Tier::Sample(_) => 1,
                Tier::Summary { .. } => 2,
                Tier::Drop => 3,
            };
            let mut label = tier_label(&class.tier);
            if class.trigger {
                label.push_str(" (trig)");
            }
            (rank, label, kind, c)
        })
        .collect();
    rows.sort_by(|a, b| (a.0, a.2).cmp(&(b.0, b.2)));
    for (_, label, kind, c) in &rows {
        let written = log.written.get(*kind).map_or_else(
            || "-".to_owned(),
            |w| {
                w.iter()
                    .map(|(t, n)| format!("{t} {n}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            },
        );
        let balance = if c.balanced() { "" } else { "  UNBALANCED" };
        println!(
            "  {:<13} {:<16} {:>6} {:>6} {:>11} {:>10} {:>7} {:>8} {:>7}  {written}{balance}",
            label,
            kind,
            c.seen,
            c.kept,
            c.sampled_out,
            c.summarized,
            c.dropped,
            c.overflow,
            c.preroll
        );
    }

    println!();
    if log.incidents.is_empty() {
        println!("Incidents: none");
    }
    for i in &log.incidents {
        println!(
            "Incident: {} at seq {}, t = {:.3} s",
            i.kind,
            i.trigger_seq,
            secs(i.trigger_ts_ns)
        );
        let preroll: Vec<String> = log
            .written
            .iter()
            .filter_map(|(k, w)| w.get("preroll").map(|n| format!("{k} {n}")))
            .collect();
        println!(
            "  pre-roll:  {:.3} s .. {:.3} s, {} events written from the ring ({})",
            secs(i.preroll_start_ns),
            secs(i.trigger_ts_ns),
            i.preroll_events,
            preroll.join(", ")
        );
        let postroll: Vec<String> = log
            .written
            .iter()
            .filter_map(|(k, w)| w.get("postroll").map(|n| format!("{k} {n}")))
            .collect();
        println!(
            "  post-roll: {:.3} s .. {:.3} s, every event kept in full ({})",
            secs(i.trigger_ts_ns),
            secs(i.postroll_end_ns),
            postroll.join(", ")
        );
        if let Some((seq, _, json)) = log
            .checkpoints
            .iter()
            .find(|(seq, _, _)| *seq > i.trigger_seq)
        {
            println!("  working memory at the incident (checkpoint seq {seq}): {json}");
        }
    }

    println!();
    println!("Checkpoints:");
    for (seq, ts, json) in &log.checkpoints {
        println!("  seq {seq:>5}  t = {:.3} s  {json}", secs(*ts));
    }

    println!();
    println!("Summary windows (min / mean / max):");
    for ((kind, start_ns), w) in log
        .windows
        .iter()
        .filter(|((_, start), _)| (3..=5).contains(&(start.saturating_sub(T0_NS) / SEC)))
    {
        let records = if w.records > 1 {
            format!(" ({} summary records)", w.records)
        } else {
            String::new()
        };
        println!(
            "  {kind} [{:.0} s, {:.0} s): {} events{records}",
            secs(*start_ns),
            secs(*start_ns) + 1.0,
            w.count
        );
        for (name, a) in &w.values {
            let mean = if a.count == 0 {
                0.0
            } else {
                a.sum / a.count as f64
            };
            println!(
                "    {name:<3} {:>9.4} / {mean:>9.4} / {:>9.4}",
                a.min, a.max
            );
        }
    }
    let windows: BTreeMap<&str, usize> =
        log.windows
            .keys()
            .fold(BTreeMap::new(), |mut m, (kind, _)| {
                *m.entry(kind.as_str()).or_default() += 1;
                m
            });
    for (kind, n) in windows {
        println!("  ({n} windows of {kind} in all)");
    }

    println!();
    let report = blackbox::log::verify(dir, None, None)?;
    println!(
        "verify: ok: {} records in {} blocks, {} segment(s), {} bytes; chain head at seq {}{}",
        report.records,
        report.blocks,
        report.segments,
        report.bytes,
        report
            .last
            .as_ref()
            .map_or_else(|| "-".to_owned(), |d| d.seq.to_string()),
        if report.torn_tail.is_some() {
            ", torn tail"
        } else {
            ""
        }
    );
    Ok(())
}
