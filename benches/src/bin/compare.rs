//! Side-by-side comparison of Blackbox against the stores a user would pick instead.
//!
//! ```text
//! cargo run --release -p blackbox-benches --bin compare -- \
//!     [--events N] [--rounds R] [--workload binary|json|both] [--rows ID,...] [--dir PATH]
//! ```
//!
//! Defaults: 1 000 000 events, 3 rounds, both workloads, temporary directories under
//! the system's temporary directory. Every row writes the same events (8 kinds, a
//! nanosecond timestamp, a 100-byte binary or about 100-byte JSON payload), reads them
//! all back, and answers "one kind in a 10 % time window" by its best access path; each
//! read is checked against the workload. The report (markdown, on stdout) has one table
//! per workload with the medians of R alternated rounds, how each row answers the
//! window query, and the ratios that the recorder's targets name (those whose rows ran:
//! `--rows` picks rows by id, for profiling one). Progress goes to stderr.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use blackbox_benches::Result;
use blackbox_benches::harness::{Contender, Expected, Settings, measure};
use blackbox_benches::log_alone::{LogRow, ZSTD_LEVEL};
use blackbox_benches::peers::fjall::Fjall;
use blackbox_benches::peers::flat::LengthPrefixed;
use blackbox_benches::peers::jsonl::JsonLines;
use blackbox_benches::peers::mcap::Mcap;
use blackbox_benches::peers::sqlite::Sqlite;
use blackbox_benches::recorder::RecorderRow;
use blackbox_benches::report::{markdown_table, ratios, window_paths};
use blackbox_benches::workload::{
    LOGICAL_KIND_BYTES, LOGICAL_TS_BYTES, Variant, WINDOW_LEN_PER_MILLE, WINDOW_START_PER_MILLE,
    Workload,
};
use blackbox_log::Compression;

const USAGE: &str = "usage: compare [--events N] [--rounds R] [--workload binary|json|both] \
                     [--rows ID,...] [--dir PATH] [--zstd-level L]";

#[derive(Debug)]
struct Args {
    events: u64,
    rounds: u32,
    variants: Vec<Variant>,
    /// Row ids to run; empty: every row.
    rows: Vec<String>,
    dir: PathBuf,
    /// The zstd level of the rows that compress blocks.
    zstd_level: i32,
}

/// What the command line asked for.
#[derive(Debug)]
enum Command {
    Run(Args),
    Help,
}

fn parse_args(mut args: impl Iterator<Item = String>) -> Result<Command> {
    let mut parsed = Args {
        events: 1_000_000,
        rounds: 3,
        variants: Variant::ALL.to_vec(),
        rows: Vec::new(),
        dir: std::env::temp_dir(),
        zstd_level: ZSTD_LEVEL,
    };
    while let Some(flag) = args.next() {
        if flag == "-h" || flag == "--help" {
            return Ok(Command::Help);
        }
        let value = args
            .next()
            .ok_or_else(|| format!("{flag} needs a value; {USAGE}"))?;
        let bad = |e: &dyn std::fmt::Display| format!("{flag} {value}: {e}; {USAGE}");
        match flag.as_str() {
            "--events" => parsed.events = value.replace('_', "").parse().map_err(|e| bad(&e))?,
            "--rounds" => parsed.rounds = value.parse().map_err(|e| bad(&e))?,
            "--workload" => {
                parsed.variants = match value.as_str() {
                    "binary" => vec![Variant::Binary],
                    "json" => vec![Variant::Json],
                    "both" => Variant::ALL.to_vec(),
                    _ => return Err(bad(&"expected binary, json or both").into()),
                }
            }
            "--rows" => {
                let known: Vec<&str> = contenders(ZSTD_LEVEL)
                    .iter()
                    .map(|c| c.describe().id)
                    .collect();
                for id in value.split(',') {
                    if !known.contains(&id) {
                        let known = known.join(", ");
                        return Err(bad(&format!("no row {id:?}; the rows are {known}")).into());
                    }
                    parsed.rows.push(id.to_owned());
                }
            }
            "--dir" => parsed.dir = PathBuf::from(&value),
            "--zstd-level" => {
                parsed.zstd_level = value.parse().map_err(|e| bad(&e))?;
                let levels = Compression::zstd_levels();
                if parsed.zstd_level == 0 || !levels.contains(&parsed.zstd_level) {
                    let range = format!("expected {} to {}, not 0", levels.start(), levels.end());
                    return Err(bad(&range).into());
                }
            }
            _ => return Err(format!("unknown argument {flag}; {USAGE}").into()),
        }
    }
    if parsed.events < 2 || parsed.rounds == 0 {
        return Err(format!("--events must be at least 2 and --rounds at least 1; {USAGE}").into());
    }
    Ok(Command::Run(parsed))
}

/// The rows, in report order: what users run, the log alone, then the peers.
fn contenders(zstd_level: i32) -> Vec<Box<dyn Contender>> {
    vec![
        Box::new(RecorderRow::BUFFERED),
        Box::new(RecorderRow::buffered_zstd(zstd_level)),
        Box::new(RecorderRow::SYNC),
        Box::new(LogRow::BUFFERED),
        Box::new(LogRow::buffered_zstd(zstd_level)),
        Box::new(LogRow::SYNC),
        Box::new(Mcap::UNCHUNKED),
        Box::new(Mcap::CHUNKED),
        Box::new(Sqlite::NORMAL),
        Box::new(Sqlite::FULL),
        Box::new(Fjall),
        Box::new(LengthPrefixed),
        Box::new(JsonLines),
    ]
}

/// The system's load averages over 1, 5 and 15 minutes, as `/proc/loadavg` gives them.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown".to_owned())
}

fn run(args: &Args) -> Result<()> {
    let started = Instant::now();
    let cores = std::thread::available_parallelism().map_or(0, usize::from);
    let load_before = load_average();
    let settings = Settings {
        rounds: args.rounds,
        base_dir: args.dir.clone(),
    };
    let contenders: Vec<Box<dyn Contender>> = contenders(args.zstd_level)
        .into_iter()
        .filter(|c| args.rows.is_empty() || args.rows.iter().any(|id| id == c.describe().id))
        .collect();

    println!(
        "`compare`: {} events of 8 kinds, median of {} alternated rounds, temporary directories under {}; zstd level {} for the rows with zstd blocks; {cores} cores, load average {load_before} at the start.\n",
        args.events,
        args.rounds,
        args.dir.display(),
        args.zstd_level,
    );
    println!(
        "Logical bytes of an event: its payload + {LOGICAL_TS_BYTES} B of timestamp + {LOGICAL_KIND_BYTES} B of kind id; disk bytes are the blocks allocated (as `du` counts them). The window query asks for one kind from {}.{} % to {}.{} % of the time span. Write: from open to a durable close. Read (every event) and window: from open to the last event, each checked against the workload, right after the write (a warm page cache).\n",
        WINDOW_START_PER_MILLE / 10,
        WINDOW_START_PER_MILLE % 10,
        (WINDOW_START_PER_MILLE + WINDOW_LEN_PER_MILLE) / 10,
        (WINDOW_START_PER_MILLE + WINDOW_LEN_PER_MILLE) % 10,
    );

    let mut rows = Vec::new();
    for &variant in &args.variants {
        eprintln!("[compare] generating {} {variant} events", args.events);
        let workload = Workload::generate(args.events, variant)?;
        let expected = Expected::of(&workload);
        let variant_started = Instant::now();
        rows = measure(&contenders, &workload, &settings, |line| {
            eprintln!("[compare] {variant}: {line}");
        })?;
        let payload = match variant {
            Variant::Binary => "100-byte binary payloads".to_owned(),
            Variant::Json => format!(
                "JSON payloads (a robot's state message, {:.1} B on average)",
                workload.payload_bytes() as f64 / workload.len() as f64
            ),
        };
        println!(
            "### {payload}\n\n{} logical bytes; the window holds {} events of `{}`. Measured in {:.0} s.\n",
            workload.logical_bytes(),
            expected.window.events,
            expected.query.kind_name(),
            variant_started.elapsed().as_secs_f64(),
        );
        print!("{}", markdown_table(&rows));
        println!("\nRatios the targets name:\n");
        print!("{}", ratios(&rows));
        println!();
    }
    println!("How each row answers the window query:\n");
    print!("{}", window_paths(&rows));
    println!(
        "\nWhole run: {:.0} s; load average {} at the end.",
        started.elapsed().as_secs_f64(),
        load_average()
    );
    Ok(())
}

fn main() -> ExitCode {
    let outcome = parse_args(std::env::args().skip(1)).and_then(|command| match command {
        Command::Help => {
            println!("{USAGE}");
            Ok(())
        }
        Command::Run(args) => run(&args),
    });
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // One line, even if an underlying error spans several.
            let message = e.to_string().replace('\n', " ");
            eprintln!("compare: error: {message}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Command> {
        parse_args(args.iter().map(|s| (*s).to_owned()))
    }

    #[test]
    fn defaults_and_flags() -> Result<()> {
        let Command::Run(args) = parse(&[])? else {
            return Err("expected a run".into());
        };
        assert_eq!((args.events, args.rounds), (1_000_000, 3));
        assert_eq!(args.variants, Variant::ALL);
        assert!(args.rows.is_empty());
        let Command::Run(args) = parse(&[
            "--rows",
            "recorder-sync,fjall",
            "--events",
            "200_000",
            "--rounds",
            "5",
            "--workload",
            "json",
            "--dir",
            "x",
        ])?
        else {
            return Err("expected a run".into());
        };
        assert_eq!((args.events, args.rounds), (200_000, 5));
        assert_eq!(args.variants, [Variant::Json]);
        assert_eq!(args.rows, ["recorder-sync", "fjall"]);
        assert_eq!(args.dir, PathBuf::from("x"));
        assert!(matches!(parse(&["--help"])?, Command::Help));
        Ok(())
    }

    #[test]
    fn bad_arguments_are_errors() {
        assert!(parse(&["--events"]).is_err());
        assert!(parse(&["--events", "many"]).is_err());
        assert!(parse(&["--events", "1"]).is_err());
        assert!(parse(&["--rounds", "0"]).is_err());
        assert!(parse(&["--workload", "xml"]).is_err());
        assert!(parse(&["--rows", "recorder-sync,rocksdb"]).is_err());
        assert!(parse(&["--frobnicate", "1"]).is_err());
    }

    #[test]
    fn every_row_has_a_distinct_id_and_the_targets_find_theirs() {
        let rows = contenders(ZSTD_LEVEL);
        let ids: Vec<&str> = rows.iter().map(|c| c.describe().id).collect();
        let mut unique = ids.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), ids.len(), "{ids:?}");
        for target in blackbox_benches::report::TARGETS {
            assert!(ids.contains(&target.row), "{}", target.row);
            for other in target.against {
                assert!(ids.contains(other), "{other}");
            }
        }
    }
}
