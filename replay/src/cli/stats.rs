//! `blackbox stats`: size, time span and per-kind totals.

use std::io::{self, Write};
use std::path::PathBuf;

use blackbox_replay::format_time;

use super::{CliError, DirArg, human_bytes, key_from, line, warn_unverified};

/// Print the log's size, time span and per-kind totals (from the last accounting
/// record: running totals since the log was created).
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    dir: DirArg,
    /// One JSON object.
    #[arg(long)]
    json: bool,
    /// The chain key file of a keyed log, to verify the chain of what is read.
    #[arg(long, value_name = "K")]
    key_file: Option<PathBuf>,
}

/// Runs `blackbox stats`.
pub fn run(args: Args) -> Result<(), CliError> {
    let key = key_from(args.key_file.as_deref())?;
    let stats = blackbox_replay::stats(&args.dir.dir, key.clone())
        .map_err(|e| super::damage::fail(&args.dir.dir, args.json, e))?;
    if key.is_none() && blackbox::LogReader::open(&args.dir.dir).is_ok_and(|r| !r.chain_verified())
    {
        warn_unverified(&args.dir.dir);
    }
    let stdout = io::stdout();
    let mut out = stdout.lock();
    if args.json {
        line(&mut out, stats.to_json())?;
        return out.flush().map_err(super::stdout_error);
    }
    let seqs = match stats.last_seq {
        Some(last) => format!(" (seq {}..={last})", stats.first_seq.unwrap_or(0)),
        None => String::new(),
    };
    line(&mut out, format!("records   {}{seqs}", stats.records))?;
    if let Some(cut) = stats.pruned_up_to_seq {
        line(
            &mut out,
            format!(
                "pruned    up to seq {cut} (the totals below still count every event since the log was created)"
            ),
        )?;
    }
    line(
        &mut out,
        format!(
            "segments  {} ({})",
            stats.segments,
            human_bytes(stats.bytes)
        ),
    )?;
    let time = |t: Option<u64>| t.map_or_else(|| "-".to_owned(), format_time);
    line(&mut out, format!("first     {}", time(stats.first_ts_ns)))?;
    line(&mut out, format!("last      {}", time(stats.last_ts_ns)))?;
    match stats.accounting_seq {
        None => line(&mut out, "kinds     no accounting record yet")?,
        Some(seq) => {
            line(
                &mut out,
                format!("kinds     running totals of the accounting record at seq {seq}"),
            )?;
            let width = stats
                .kinds
                .keys()
                .map(String::len)
                .max()
                .unwrap_or(4)
                .max(4);
            line(
                &mut out,
                format!(
                    "  {:<width$}  {:>10}  {:>10}  {:>11}  {:>10}  {:>10}  {:>10}  {:>10}",
                    "kind",
                    "seen",
                    "kept",
                    "sampled_out",
                    "summarized",
                    "dropped",
                    "overflow",
                    "preroll"
                ),
            )?;
            for (kind, c) in &stats.kinds {
                line(
                    &mut out,
                    format!(
                        "  {kind:<width$}  {:>10}  {:>10}  {:>11}  {:>10}  {:>10}  {:>10}  {:>10}",
                        c.seen,
                        c.kept,
                        c.sampled_out,
                        c.summarized,
                        c.dropped,
                        c.overflow,
                        c.preroll
                    ),
                )?;
            }
        }
    }
    out.flush().map_err(super::stdout_error)
}
