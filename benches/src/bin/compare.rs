//! Side-by-side comparison of Blackbox against peer storage formats.
//!
//! ```text
//! cargo run --release -p blackbox-benches --bin compare -- [--events N] [--runs R] [--dir PATH]
//! ```
//!
//! Every contender writes the same N events (100-byte pseudo-random payload,
//! `u64` nanosecond timestamp) R times, each time into a fresh temporary
//! directory under PATH (default: the system temporary directory), and reads
//! them back. The median write and read rates and the bytes on disk (allocated,
//! and apparent file size) per payload byte are printed as a markdown table on
//! stdout; progress goes to stderr.

use std::path::PathBuf;
use std::process::ExitCode;

use blackbox_benches::blackbox::Blackbox;
use blackbox_benches::peers::{Blake3Chain, Fjall, JsonLines, LengthPrefixed, McapUnchunked};
use blackbox_benches::{
    Contender, PAYLOAD_LEN, Result, Settings, generate_events, markdown_table, measure,
};

const USAGE: &str = "usage: compare [--events N] [--runs R] [--dir PATH]";

#[derive(Debug)]
struct Args {
    events: u64,
    runs: u32,
    dir: PathBuf,
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
        runs: 5,
        dir: std::env::temp_dir(),
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
            "--runs" => parsed.runs = value.parse().map_err(|e| bad(&e))?,
            "--dir" => parsed.dir = PathBuf::from(&value),
            _ => return Err(format!("unknown argument {flag}; {USAGE}").into()),
        }
    }
    if parsed.events == 0 || parsed.runs == 0 {
        return Err(format!("--events and --runs must be at least 1; {USAGE}").into());
    }
    Ok(Command::Run(parsed))
}

fn run(args: &Args) -> Result<()> {
    eprintln!(
        "[compare] generating {} events of {PAYLOAD_LEN} B",
        args.events
    );
    let events = generate_events(args.events)?;
    let settings = Settings {
        runs: args.runs,
        base_dir: args.dir.clone(),
    };

    // The contenders, in report order. Blackbox's own rows go first, here.
    // ------------------------------------------------------------------
    let contenders: Vec<Box<dyn Contender>> = vec![
        // Blackbox contenders: add them here.
        Box::new(Blackbox::BUFFERED),
        Box::new(Blackbox::SYNC_BATCH),
        Box::new(Blackbox::FLUSH_BATCH),
        Box::new(Blackbox::VERIFY),
        Box::new(McapUnchunked),
        Box::new(Fjall),
        Box::new(JsonLines),
        Box::new(LengthPrefixed),
        Box::new(Blake3Chain),
    ];
    // ------------------------------------------------------------------

    let mut rows = Vec::with_capacity(contenders.len());
    for contender in &contenders {
        eprintln!("[compare] running {}", contender.name());
        rows.push(measure(contender.as_ref(), &events, &settings)?);
    }

    println!(
        "{} events x {PAYLOAD_LEN} B payload, median of {} runs, temporary directories under {}\n",
        args.events,
        args.runs,
        args.dir.display()
    );
    print!("{}", markdown_table(&rows));
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
        assert_eq!((args.events, args.runs), (1_000_000, 5));
        let Command::Run(args) = parse(&["--events", "200_000", "--runs", "3", "--dir", "x"])?
        else {
            return Err("expected a run".into());
        };
        assert_eq!((args.events, args.runs), (200_000, 3));
        assert_eq!(args.dir, PathBuf::from("x"));
        assert!(matches!(parse(&["--help"])?, Command::Help));
        Ok(())
    }

    #[test]
    fn bad_arguments_are_errors() {
        assert!(parse(&["--events"]).is_err());
        assert!(parse(&["--events", "many"]).is_err());
        assert!(parse(&["--runs", "0"]).is_err());
        assert!(parse(&["--frobnicate", "1"]).is_err());
    }
}
