//! `blackbox demo`: records a simulated robot run with an incident, then reviews it.
//!
//! A pick-and-place arm runs for 21 simulated seconds at 200 Hz on a manual clock that
//! starts at the current time, so the run takes about a second and its records carry
//! today's dates. The policy keeps sensors as 1 s summaries, samples the trajectory 1 in
//! 10, keeps actions in full, drops debug noise, and captures 2 s before and 1 s after
//! any `failure.*`. The gripper slips at a random moment (`--seed` repeats a run).
//! Along the way the arm learns the cup's mass from a load reading and revises it when
//! a calibrated reading disagrees; it learns the grip force that holds the cup, and the
//! slip refutes it. The review that follows reads everything back from the log alone.

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::path::Path;
use std::sync::Arc;

use blackbox::kb::{Conditions, Provenance};
use blackbox::{
    Clock, Config, Durability, Event, IncidentPolicy, ManualClock, Policy, Recorder,
    SUMMARY_GRACE_NS, Sampling, Seq, Tier,
};
use blackbox_replay::{Body, Payload, Query, RecordType, Replay, format_time, kb_view, state_at};
use serde_json::json;

use super::{CliError, DirArg, line};

const MS: u64 = 1_000_000;
const SEC: u64 = 1_000 * MS;
/// One control tick: 200 Hz.
const TICK_NS: u64 = 5 * MS;
/// The run's length.
const RUN_NS: u64 = 21 * SEC;
/// One pick-and-place cycle.
const CYCLE_NS: u64 = 5 * SEC;
const PREROLL_NS: u64 = 2 * SEC;
const POSTROLL_NS: u64 = SEC;

/// Record a simulated robot run with an incident in a new log, then review it.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    dir: DirArg,
    /// Seed of the failure's moment (default: from the clock). The same seed gives the
    /// same run.
    #[arg(long, value_name = "N")]
    seed: Option<u64>,
    /// Print the review as one JSON object: the incident, the state at the trigger,
    /// each kind's totals, the knowledge-base commits and the verify result.
    #[arg(long)]
    json: bool,
}

type Res<T> = Result<T, CliError>;

/// Runs `blackbox demo`.
pub fn run(args: Args) -> Res<()> {
    let dir = args.dir.dir;
    check_new(&dir)?;
    let seed = args.seed.unwrap_or_else(|| blackbox::SystemClock.now_ns());
    // The failure comes in the third or fourth cycle, on a tick, while the cup is held
    // (3 s to 4.5 s into the cycle), and its post-roll ends before the run does.
    let mut rng = XorShift::new(seed);
    let cycle_start = (2 + rng.next() % 2) * CYCLE_NS;
    let failure_ns = cycle_start + 3 * SEC + (rng.next() % (1_500 * MS / TICK_NS)) * TICK_NS;
    // On a whole second, like the summary windows, so each window holds the same ticks
    // in every run; the simulated run ends by now (it takes less time than it
    // simulates), so `--since -1m` and `--at now` find it, as they would a real one.
    let t0 = {
        let start = blackbox::SystemClock.now_ns().saturating_sub(RUN_NS + SEC);
        start - start % SEC
    };
    let run = Run {
        t0,
        failure_ns,
        seed,
    };
    let mut out = io::stdout().lock();
    if args.json {
        simulate(&dir, &run)?;
        line(&mut out, review_json(&dir, &run)?)?;
        return out.flush().map_err(super::stdout_error);
    }
    line(
        &mut out,
        format!(
            "Recording a simulated pick-and-place arm into {}: 21 s at 200 Hz (seed {seed}) ...",
            dir.display()
        ),
    )?;
    simulate(&dir, &run)?;
    review(&mut out, &dir, &run)?;
    let report = write_report(&dir)?;
    line(&mut out, "")?;
    line(
        &mut out,
        format!(
            "Report: {} (open it in a browser; `blackbox report --dir {} --incident 1 --out FILE` writes it again)",
            report.display(),
            dir.display()
        ),
    )?;
    out.flush().map_err(super::stdout_error)
}

/// Where the demo writes its report: `DIR-report.html` beside the log.
fn report_path(dir: &Path) -> std::path::PathBuf {
    let dir_abs = std::path::absolute(dir).unwrap_or_else(|_| dir.to_owned());
    let mut name = dir_abs.file_name().unwrap_or("demo".as_ref()).to_owned();
    name.push("-report.html");
    dir_abs.with_file_name(name)
}

/// Writes the report of the run's incident beside the log (`DIR-report.html`); returns
/// its path.
fn write_report(dir: &Path) -> Res<std::path::PathBuf> {
    let incident = blackbox_replay::incidents(dir, None, Some(1))?
        .into_iter()
        .next()
        .ok_or_else(|| CliError::new("the demo's run recorded no incident"))?;
    let (since_ns, until_ns) = super::report::incident_window(&incident);
    let out = report_path(dir);
    let command = format!(
        "blackbox report --dir {} --incident 1 --out {}",
        blackbox_replay::shell_word(&dir.display().to_string()),
        blackbox_replay::shell_word(&out.display().to_string())
    );
    let scope = blackbox_replay::ReportScope::Window {
        since_ns,
        until_ns,
        incident: Some(incident),
    };
    let options = blackbox_replay::ReportOptions {
        command,
        ..Default::default()
    };
    Ok(blackbox_replay::write_report(dir, &scope, &options, &out)?.path)
}

/// The demo writes a new log, and its report beside it: a directory that holds anything,
/// or a report file already there, is refused.
fn check_new(dir: &Path) -> Res<()> {
    let report = report_path(dir);
    if std::fs::symlink_metadata(&report).is_ok() {
        return Err(CliError::new(format!(
            "{} exists: the demo writes its report there, beside the log; move it or give another --dir",
            report.display()
        )));
    }
    match std::fs::read_dir(dir) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(CliError::new(format!(
            "cannot read {}: {e}: give a new directory to --dir",
            dir.display()
        ))),
        Ok(mut entries) => match entries.next() {
            None => Ok(()),
            Some(_) => Err(CliError::new(format!(
                "{} is not empty: the demo writes a new log, give it a new or empty directory",
                dir.display()
            ))),
        },
    }
}

struct Run {
    t0: u64,
    failure_ns: u64,
    seed: u64,
}

fn policy() -> Res<Policy> {
    Policy::builder()
        .rule("debug.*", Tier::Drop)
        .rule("sensor.*", Tier::Summary { window_ns: SEC })
        .rule("trajectory.*", Tier::Sample(Sampling::Every(10)))
        .incident(IncidentPolicy {
            preroll_ns: PREROLL_NS,
            postroll_ns: POSTROLL_NS,
            ..IncidentPolicy::new(&["failure.*"])
        })
        .build()
        .map_err(|e| CliError::new(format!("the demo's policy is invalid: {e}")))
}

fn simulate(dir: &Path, run: &Run) -> Res<()> {
    let clock = ManualClock::new(run.t0);
    let recorder = Recorder::open(
        dir,
        Config::new()
            .policy(policy()?)
            .clock(Arc::new(clock.clone()))
            .accounting_interval_ns(SEC)
            .checkpoint_interval_ns(Some(CYCLE_NS))
            .durability(Durability::Buffered),
    )?;
    let mut sim = Sim {
        recorder: &recorder,
        run,
        grip_force: 12.5,
    };
    let mut t = 0;
    let mut tick = 0u64;
    while t < RUN_NS {
        // The simulated clock runs far ahead of the writer thread, which reads the
        // same clock to close summary windows and time its accounting and checkpoint
        // records. Barriers at each full second let it catch up before the clock moves
        // on, so a seed gives the same records, seqs and times in every run; on a real
        // clock the writer lags by microseconds.
        // A second barrier once the summary windows' grace is over, so each window closes
        // at the same point in every run.
        if t % SEC == 0 || t % SEC == SUMMARY_GRACE_NS {
            recorder.sync()?;
            clock.set_ns(run.t0 + t);
            recorder.sync()?;
        }
        clock.set_ns(run.t0 + t);
        sim.tick(t, tick)?;
        t += TICK_NS;
        tick += 1;
    }
    recorder.sync()?;
    clock.set_ns(run.t0 + RUN_NS);
    recorder.close()?;
    Ok(())
}

struct Sim<'a> {
    recorder: &'a Recorder,
    run: &'a Run,
    grip_force: f64,
}

impl Sim<'_> {
    fn tick(&mut self, t: u64, tick: u64) -> Res<()> {
        let r = self.recorder;
        let secs = t as f64 / SEC as f64;
        let in_cycle = t % CYCLE_NS;
        let cycle = t / CYCLE_NS + 1;
        let failed = t >= self.run.failure_ns;
        let jolt = if (self.run.failure_ns..self.run.failure_ns + 50 * MS).contains(&t) {
            4.0
        } else {
            0.0
        };
        let holding = (2_500 * MS..4_500 * MS).contains(&in_cycle) && !failed;
        let imu = [
            ("ax", 0.05 * (secs * 2.0).sin() + jolt),
            ("ay", 0.03 * (secs * 3.0).cos()),
            ("az", -9.81 + if holding { 0.2 } else { 0.0 } - jolt),
        ];
        r.record(&Event::new("sensor.imu").source("wrist").values(&imu))?;
        r.record(&Event::new("debug.tick").values(&[("tick", tick as f64)]))?;
        let q = [
            ("q1", 0.3 * (secs * 0.5).sin()),
            ("q2", 1.2 - 0.02 * secs),
            ("q3", 0.05 * (secs * 0.7).cos()),
        ];
        let payload = format!(
            r#"{{"q":[{:.4},{:.4},{:.4}],"cycle":{cycle}}}"#,
            q[0].1, q[1].1, q[2].1
        );
        r.record(
            &Event::new("trajectory.arm")
                .source("planner")
                .json(&payload)
                .values(&q),
        )?;

        if t == self.run.failure_ns {
            return self.fail();
        }
        if failed {
            return self.recover(t);
        }
        let wm = r.working();
        match in_cycle / MS {
            500 => {
                wm.set(
                    "goal",
                    json!({"task": "pick", "object": "cup", "cycle": cycle}),
                )?;
                r.record(
                    &Event::new("action.plan")
                        .source("planner")
                        .json(&format!(r#"{{"object":"cup","cycle":{cycle}}}"#)),
                )?;
            }
            1_000 => r.record(
                &Event::new("action.reach")
                    .source("arm")
                    .json(r#"{"target":[0.42,0.10,0.05]}"#),
            )?,
            2_500 => {
                wm.set(
                    "grip",
                    json!({"state": "closed", "force_n": self.grip_force}),
                )?;
                r.record(&Event::new("action.grasp").source("gripper").json(&format!(
                    r#"{{"force_n":{},"width_m":0.071}}"#,
                    self.grip_force
                )))?;
                // Each grasp that holds is evidence for the grip force.
                let seq = r.record_evidence(
                    &Event::new("observation.grip")
                        .source("gripper")
                        .json(&format!(r#"{{"force_n":{},"held":true}}"#, self.grip_force)),
                )?;
                self.assert(
                    "grip.force_n",
                    json!(self.grip_force),
                    0.7,
                    seq,
                    "the grasp held",
                )?;
            }
            3_000 => {
                r.record(
                    &Event::new("action.lift")
                        .source("arm")
                        .json(r#"{"height_m":0.15}"#),
                )?;
                self.weigh(cycle)?;
            }
            4_500 => {
                wm.set("grip", json!({"state": "open"}))?;
                r.record(
                    &Event::new("action.place")
                        .source("arm")
                        .json(r#"{"target":[0.10,0.40,0.05]}"#),
                )?;
            }
            _ => {}
        }
        Ok(())
    }

    /// The load cell weighs the lifted cup: the first reading is rough, the second
    /// comes from a calibrated cell and revises what was learned.
    fn weigh(&mut self, cycle: u64) -> Res<()> {
        let (mass, confidence, sensor, why) = match cycle {
            1 => (0.31, 0.6, "load_cell", "first weighing"),
            2 => (
                0.42,
                0.9,
                "load_cell_calibrated",
                "calibrated weighing disagrees",
            ),
            _ => (0.42, 0.8, "load_cell_calibrated", "weighed again"),
        };
        let seq = self.recorder.record_evidence(
            &Event::new("observation.load")
                .source(sensor)
                .json(&format!(r#"{{"object":"cup","mass_kg":{mass}}}"#))
                .values(&[("mass_kg", mass)]),
        )?;
        self.assert("cup.mass_kg", json!(mass), confidence, seq, why)
    }

    fn fail(&mut self) -> Res<()> {
        let r = self.recorder;
        r.working().set(
            "grip",
            json!({"state": "slipping", "force_n": self.grip_force}),
        )?;
        r.record(
            &Event::new("failure.gripper_slip")
                .source("gripper")
                .json(&format!(
                    r#"{{"reason":"cup slipped","force_n":{}}}"#,
                    self.grip_force
                )),
        )?;
        r.record(
            &Event::new("action.stop")
                .source("arm")
                .json(r#"{"reason":"failure.gripper_slip"}"#),
        )?;
        Ok(())
    }

    /// A tick after the slip, the robot learns from it.
    fn learn_from_slip(&mut self) -> Res<()> {
        let r = self.recorder;
        // The slip is a counterexample to the grip force that was believed to hold.
        let seq = r.record_evidence(&Event::new("observation.grip").source("gripper").json(
            &format!(r#"{{"force_n":{},"held":false}}"#, self.grip_force),
        ))?;
        let kb = r.kb()?;
        let provenance = Provenance::new([seq])
            .author("demo")
            .message("the cup slipped at this force");
        kb.refute("grip.force_n", &json!(self.grip_force), provenance)
            .map_err(blackbox::Error::from)?;
        Ok(())
    }

    /// After the failure: learn from the slip, then replan with a firmer grip.
    fn recover(&mut self, t: u64) -> Res<()> {
        if t == self.run.failure_ns + TICK_NS {
            return self.learn_from_slip();
        }
        if t != self.run.failure_ns + 500 * MS {
            return Ok(());
        }
        let r = self.recorder;
        self.grip_force = 15.0;
        r.working()
            .set("goal", json!({"task": "recover", "object": "cup"}))?;
        r.record(
            &Event::new("action.replan")
                .source("planner")
                .json(r#"{"object":"cup","grip_force_n":15.0}"#),
        )?;
        let seq = r.record_evidence(
            &Event::new("observation.grip")
                .source("gripper")
                .json(r#"{"force_n":15.0,"held":true,"test":"static hold"}"#),
        )?;
        self.assert(
            "grip.force_n",
            json!(15.0),
            0.6,
            seq,
            "a firmer grip held in a static test",
        )
    }

    fn assert(&self, key: &str, value: serde_json::Value, c: f64, seq: Seq, why: &str) -> Res<()> {
        let provenance = Provenance::new([seq]).author("demo").message(why);
        self.recorder
            .kb()?
            .assert(key, value, c, &Conditions::new(), provenance)
            .map_err(blackbox::Error::from)?;
        Ok(())
    }
}

/// A small deterministic generator for the failure's moment.
struct XorShift(u64);

impl XorShift {
    fn new(seed: u64) -> XorShift {
        XorShift(seed.max(1))
    }

    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

fn rel(ns: u64, origin: u64) -> String {
    let d = ns as i128 - origin as i128;
    format!(
        "{}{:.3} s",
        if d < 0 { "-" } else { "+" },
        d.unsigned_abs() as f64 / 1e9
    )
}

fn short(payload: &Payload) -> String {
    match payload {
        Payload::None => String::new(),
        Payload::Json(v) => {
            let s = v.to_string();
            if s.len() > 60 {
                format!(
                    "{}…",
                    &s[..s.char_indices().nth(59).map_or(s.len(), |c| c.0)]
                )
            } else {
                s
            }
        }
        Payload::Raw(b) => format!("({} raw bytes)", b.len()),
    }
}

/// The review as one JSON object: what the text review prints, read back the same way.
fn review_json(dir: &Path, run: &Run) -> Res<serde_json::Value> {
    let (marker, inc) = incident(dir)?;
    let state = state_at(dir, inc.trigger_ts_ns, None)?;
    let stats = blackbox_replay::stats(dir, None)?;
    let view = kb_view(dir, None)?;
    let commits: Vec<serde_json::Value> = view
        .log(..)?
        .into_iter()
        .map(|c| {
            json!({
                "version": c.record.version,
                "time": format_time(c.time_ns),
                "seq": c.seq,
                "op": c.record.op.to_string(),
                "outcome": c.record.outcome.name(),
                "evidence": c.record.provenance,
                "message": c.record.message,
            })
        })
        .collect();
    let report = blackbox::log::verify(dir, None, None)
        .map_err(|e| CliError::new(super::describe_log(&e)))?;
    Ok(json!({
        "dir": dir.display().to_string(),
        "seed": run.seed,
        "incident": {
            "marker_seq": marker,
            "trigger_seq": inc.trigger_seq,
            "trigger_kind": inc.trigger_kind,
            "trigger_ts": format_time(inc.trigger_ts_ns),
            "trigger_ts_ns": inc.trigger_ts_ns,
            "preroll_start_ns": inc.preroll_start_ns,
            "postroll_end_ns": inc.postroll_end_ns,
            "preroll_events": inc.preroll_events,
        },
        "state_at_trigger": state.to_json(),
        "stats": stats.to_json(),
        "kb_commits": commits,
        "verify": {
            "intact": true,
            "records": report.records,
            "segments": report.segments,
            "digest": report.last.map(|d| d.to_string()),
        },
    }))
}

/// The demo's incident marker: its seq and content.
fn incident(dir: &Path) -> Res<(u64, blackbox_replay::Incident)> {
    Replay::open(dir, &Query::new().types([RecordType::Incident]))?
        .find_map(|r| match r {
            Ok(r) => match r.body {
                Body::Incident(i) => Some(Ok((r.seq, i))),
                _ => None,
            },
            Err(e) => Some(Err(e)),
        })
        .transpose()?
        .ok_or_else(|| {
            CliError::new("the demo's log holds no incident marker: this is a bug in blackbox")
        })
}

fn review(out: &mut impl Write, dir: &Path, run: &Run) -> Res<()> {
    let (marker_seq, inc) = incident(dir)?;
    let trigger_ts = inc.trigger_ts_ns;
    line(out, "")?;
    line(
        out,
        format!(
            "INCIDENT  {} at {} ({} into the run), trigger seq {}, marker seq {marker_seq}",
            inc.trigger_kind,
            format_time(trigger_ts),
            rel(trigger_ts, run.t0).trim_start_matches('+'),
            inc.trigger_seq
        ),
    )?;
    line(
        out,
        format!(
            "          pre-roll from {} ({} events recovered from the ring), post-roll to {}",
            rel(inc.preroll_start_ns, trigger_ts),
            inc.preroll_events,
            rel(inc.postroll_end_ns, trigger_ts)
        ),
    )?;

    // The timeline: every action, observation, failure, checkpoint and commit in the
    // captured window; the high-rate streams as counts per tier.
    line(out, "")?;
    line(
        out,
        "Timeline around the incident (time relative to the trigger)",
    )?;
    let window = Query::new()
        .since(inc.preroll_start_ns)
        .until(inc.postroll_end_ns);
    let mut streams: BTreeMap<(String, &'static str), u64> = BTreeMap::new();
    let mut last_before: Vec<String> = Vec::new();
    for r in Replay::open(dir, &window)? {
        let r = r?;
        // An event's own time: pre-roll events are written when the trigger comes, but
        // were recorded before it.
        let when = match &r.body {
            Body::Event(e) => e.recorded_ns,
            _ => r.ts_ns,
        };
        let at = rel(when, trigger_ts);
        match &r.body {
            Body::Event(e)
                if e.kind.starts_with("sensor.")
                    || e.kind.starts_with("trajectory.")
                    || e.kind.starts_with("debug.") =>
            {
                *streams.entry((e.kind.clone(), e.tier.name())).or_default() += 1;
                if when <= trigger_ts {
                    let vals: Vec<String> = e
                        .values
                        .iter()
                        .map(|(k, v)| format!("{k}={v:.3}"))
                        .collect();
                    last_before.push(format!(
                        "  {at:>9}  seq {:>6}  {:<9} {:<16} {}",
                        r.seq,
                        e.tier.name(),
                        e.kind,
                        vals.join(" ")
                    ));
                    if last_before.len() > 3 {
                        last_before.remove(0);
                    }
                }
            }
            Body::Event(e) => {
                for l in last_before.drain(..) {
                    line(out, l)?;
                }
                let mark = if r.seq == inc.trigger_seq {
                    "  <- trigger"
                } else {
                    ""
                };
                line(
                    out,
                    format!(
                        "  {at:>9}  seq {:>6}  {:<9} {:<20} {}{mark}",
                        r.seq,
                        e.tier.name(),
                        e.kind,
                        short(&e.payload)
                    ),
                )?;
            }
            Body::Incident(_) => {
                line(out, format!("  {at:>9}  seq {:>6}  incident marker", r.seq))?
            }
            Body::Checkpoint(c) => line(
                out,
                format!(
                    "  {at:>9}  seq {:>6}  checkpoint  {}",
                    r.seq,
                    serde_json::Value::Object(c.working.clone())
                ),
            )?,
            Body::Working(d) => {
                for l in last_before.drain(..) {
                    line(out, l)?;
                }
                let mut changes: Vec<String> =
                    d.set.iter().map(|(k, v)| format!("{k} = {v}")).collect();
                changes.extend(d.del.iter().map(|k| format!("del {k}")));
                line(
                    out,
                    format!(
                        "  {at:>9}  seq {:>6}  working   {}",
                        r.seq,
                        changes.join(", ")
                    ),
                )?;
            }
            Body::Kb(k) => {
                let c = &k.commit;
                line(
                    out,
                    format!(
                        "  {at:>9}  seq {:>6}  {:<9} {} {} -> {}",
                        r.seq,
                        format!("kb v{}", c["version"]),
                        c["op"].as_str().unwrap_or("?"),
                        c["key"].as_str().unwrap_or(""),
                        c["outcome"].as_str().unwrap_or("?")
                    ),
                )?;
            }
            _ => {}
        }
    }
    line(
        out,
        "  high-rate streams in the window (records written, by tier):",
    )?;
    for ((kind, tier), n) in &streams {
        line(out, format!("    {kind:<16} {tier:<9} {n}"))?;
    }

    // What the agent believed when it failed.
    let state = state_at(dir, trigger_ts, None)?;
    line(out, "")?;
    line(
        out,
        format!("What the robot believed at the trigger (`blackbox state --at {trigger_ts}`)"),
    )?;
    line(
        out,
        format!(
            "  working memory ({}): {}",
            super::state::working_source(&state),
            serde_json::Value::Object(state.working.clone())
        ),
    )?;
    for f in state.kb.values() {
        line(
            out,
            format!(
                "  fact {} = {}  confidence {:.2}, {}, evidence {}",
                f.key,
                f.value,
                f.confidence,
                f.status.name(),
                f.evidence_count
            ),
        )?;
    }

    // What each tier kept and dropped.
    let stats = blackbox_replay::stats(dir, None)?;
    line(out, "")?;
    line(
        out,
        "What each tier kept and dropped (exact counts, from the last accounting record)",
    )?;
    line(
        out,
        format!(
            "  {:<22} {:>7} {:>7} {:>11} {:>10} {:>7} {:>7}",
            "kind", "seen", "kept", "sampled_out", "summarized", "dropped", "preroll"
        ),
    )?;
    for (kind, c) in &stats.kinds {
        line(
            out,
            format!(
                "  {kind:<22} {:>7} {:>7} {:>11} {:>10} {:>7} {:>7}",
                c.seen, c.kept, c.sampled_out, c.summarized, c.dropped, c.preroll
            ),
        )?;
    }

    // How the knowledge base changed.
    let view = kb_view(dir, None)?;
    line(out, "")?;
    line(out, "Knowledge-base changes (`blackbox kb log`)")?;
    for c in view.log(..)? {
        let r = &c.record;
        let what = r.op.to_string();
        let after: Vec<String> = r
            .changes
            .iter()
            .filter_map(|ch| ch.fact.as_ref())
            .map(|f| format!("{} {:.2}", f.status.name(), f.confidence))
            .collect();
        line(
            out,
            format!(
                "  v{:<2} {:>9}  {what:<36} -> {:<12} [{}]  evidence seq {:?}: {}",
                r.version,
                rel(c.time_ns, run.t0),
                r.outcome.name(),
                after.join(", "),
                r.provenance,
                r.message
            ),
        )?;
    }

    // Integrity.
    let report = blackbox::log::verify(dir, None, None)
        .map_err(|e| CliError::new(super::describe_log(&e)))?;
    line(out, "")?;
    line(
        out,
        format!(
            "Verify: intact. {} records in {} segment(s), {} chain links checked; digest {}",
            report.records,
            report.segments,
            report.blocks,
            report
                .last
                .map_or_else(|| "-".to_owned(), |d| d.to_string())
        ),
    )?;
    let d = dir.display();
    line(out, "")?;
    line(out, "Next:")?;
    line(
        out,
        format!(
            "  blackbox replay --dir {d} --since {} --until {} --kind 'action.*' --kind 'failure.*'",
            inc.preroll_start_ns, inc.postroll_end_ns
        ),
    )?;
    line(
        out,
        format!("  blackbox state  --dir {d} --at {trigger_ts} --json"),
    )?;
    line(out, format!("  blackbox kb history grip.force_n --dir {d}"))?;
    line(
        out,
        format!("  blackbox export --dir {d} --format jsonl --kind 'action.*' --out actions.jsonl"),
    )?;
    line(
        out,
        format!(
            "  (seed {}: `blackbox demo --dir NEW_DIR --seed {}` repeats this run)",
            run.seed, run.seed
        ),
    )?;
    Ok(())
}
