//! The speed and size of `blackbox export` in each format, on one log.
//!
//! ```text
//! cargo run --release -p blackbox-benches --bin export_speed -- \
//!     [--events N] [--rounds R] [--dir PATH]
//! ```
//!
//! Defaults: 1 000 000 events, 3 rounds, a temporary directory under the system's
//! temporary directory. The log is recorded once through the `Recorder` (every kind
//! `full`, so every event is exported): the JSON workload of `compare` (8 kinds, about
//! 100 bytes of JSON a payload), each event with two numeric values. Each round exports
//! the whole log once in every format, in turn, through the library functions the
//! command calls (the row source, weights and manifest included), and checks the row
//! count. The report (markdown, on stdout) gives per format the median time, events per
//! second and bytes written (the manifest left out), and the ratios to JSONL.
//!
//! A format is one entry of [`FORMATS`]: its name and the function that exports.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use blackbox::{Config, Durability, Event, Policy, Recorder, Tier};
use blackbox_benches::harness::median;
use blackbox_benches::workload::{KINDS, Variant, Workload};
use blackbox_benches::{BoxError, Result};
use blackbox_replay::{ExportManifest, ExportOptions, ParquetOptions, Query};

const USAGE: &str = "usage: export_speed [--events N] [--rounds R] [--dir PATH]";

/// An export: the log directory, the output path; the manifest it wrote.
type Export = fn(&Path, &Path) -> Result<ExportManifest>;

/// The formats, JSONL first (the baseline of the ratios).
const FORMATS: &[(&str, &str, Export)] = &[
    ("JSONL", "events.jsonl", jsonl),
    ("Parquet", "events.parquet", parquet),
];

fn jsonl(log: &Path, out: &Path) -> Result<ExportManifest> {
    let options = ExportOptions::default();
    Ok(blackbox_replay::export_jsonl(
        log,
        &Query::new(),
        out,
        &options,
        &mut |_| {},
    )?)
}

fn parquet(log: &Path, out: &Path) -> Result<ExportManifest> {
    let options = ExportOptions::default();
    Ok(blackbox_replay::export_parquet(
        log,
        &Query::new(),
        out,
        &options,
        &ParquetOptions::default(),
        &mut |_| {},
    )?)
}

#[derive(Debug)]
struct Args {
    events: u64,
    rounds: u32,
    dir: PathBuf,
}

fn parse_args(mut args: impl Iterator<Item = String>) -> Result<Option<Args>> {
    let mut parsed = Args {
        events: 1_000_000,
        rounds: 3,
        dir: std::env::temp_dir(),
    };
    while let Some(arg) = args.next() {
        let mut value = || {
            args.next()
                .ok_or_else(|| BoxError::from(format!("{arg} needs a value\n{USAGE}")))
        };
        match arg.as_str() {
            "--events" => parsed.events = value()?.replace('_', "").parse()?,
            "--rounds" => parsed.rounds = value()?.parse()?,
            "--dir" => parsed.dir = PathBuf::from(value()?),
            "-h" | "--help" => return Ok(None),
            other => return Err(format!("unknown argument {other:?}\n{USAGE}").into()),
        }
    }
    if parsed.events == 0 || parsed.rounds == 0 {
        return Err(format!("events and rounds must be positive\n{USAGE}").into());
    }
    Ok(Some(parsed))
}

fn main() -> ExitCode {
    blackbox_benches::main_of(
        "export_speed",
        USAGE,
        parse_args(std::env::args().skip(1)),
        run,
    )
}

/// Records the workload into a new log in `dir`.
fn record(dir: &Path, workload: &Workload) -> Result<()> {
    let mut policy = Policy::builder();
    for kind in KINDS {
        policy = policy.rule(kind, Tier::Full);
    }
    let rec = Recorder::open(
        dir,
        Config::new()
            .policy(policy.build()?)
            .durability(Durability::Buffered),
    )?;
    for e in workload.iter() {
        let json = e.json.ok_or("the JSON workload has JSON payloads")?;
        // Two values a row: a float column each in Parquet, an object in JSONL.
        let values = [("x", e.seq as f64 * 0.5), ("kind_id", f64::from(e.kind))];
        rec.record(
            &Event::new(KINDS[usize::from(e.kind)])
                .json(json)
                .values(&values),
        )?;
    }
    rec.close()?;
    Ok(())
}

fn run(args: &Args) -> Result<()> {
    let tmp = tempfile::Builder::new()
        .prefix("export_speed-")
        .tempdir_in(&args.dir)?;
    let log = tmp.path().join("log");
    let workload = Workload::generate(args.events, Variant::Json)?;
    eprintln!("recording {} events into {}", args.events, log.display());
    record(&log, &workload)?;
    let mut secs: Vec<Vec<f64>> = vec![Vec::new(); FORMATS.len()];
    let mut bytes = vec![0u64; FORMATS.len()];
    for round in 0..args.rounds {
        for (i, (name, file, export)) in FORMATS.iter().enumerate() {
            let out = tmp.path().join(file);
            let start = Instant::now();
            let manifest = export(&log, &out)?;
            let took = start.elapsed().as_secs_f64();
            if manifest.rows != args.events {
                return Err(format!(
                    "{name} exported {} rows, not {}",
                    manifest.rows, args.events
                )
                .into());
            }
            bytes[i] = std::fs::metadata(&out)?.len();
            eprintln!("round {}: {name} {took:.3} s", round + 1);
            secs[i].push(took);
        }
    }
    let medians: Vec<f64> = secs
        .iter_mut()
        .map(|s| median(s).unwrap_or(f64::NAN))
        .collect();
    println!(
        "Export of {} events ({} rounds, medians):\n",
        args.events, args.rounds
    );
    println!("| format | time | events/s | bytes | bytes/event | speed vs JSONL | size vs JSONL |");
    println!("|---|---|---|---|---|---|---|");
    for (i, (name, _, _)) in FORMATS.iter().enumerate() {
        let eps = args.events as f64 / medians[i];
        println!(
            "| {name} | {:.3} s | {:.2} M | {} | {:.1} | {:.2}× | {:.2}× |",
            medians[i],
            eps / 1e6,
            bytes[i],
            bytes[i] as f64 / args.events as f64,
            medians[0] / medians[i],
            bytes[i] as f64 / bytes[0] as f64,
        );
    }
    Ok(())
}
