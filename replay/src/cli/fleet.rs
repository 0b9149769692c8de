//! `blackbox fleet verify URL`: every robot's log shipped under a prefix, verified, one
//! line per robot.

use std::io::{self, Write};
use std::path::PathBuf;

use blackbox_ship::{FleetLog, Remote, RemoteVerifyReport};
use serde_json::json;

use super::{CliError, human_bytes, key_from, line};

/// The logs of a fleet in object storage: one prefix per robot, each shipped with
/// `blackbox ship --to FLEET/ROBOT`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: FleetCommand,
}

#[derive(Debug, clap::Subcommand)]
enum FleetCommand {
    /// Verify every robot's log under FLEET (as `verify --dir FLEET/ROBOT` does) and
    /// print one line per robot; exit 0 only if every one is intact.
    Verify {
        /// The fleet: `s3://BUCKET/PREFIX`, `file:///PATH` or a directory, holding one
        /// prefix per robot.
        #[arg(value_name = "FLEET")]
        url: String,
        /// How many logs are verified at once.
        #[arg(long, value_name = "N", default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..=256))]
        jobs: u16,
        /// The chain key file of the fleet's keyed logs (32 raw bytes or 64 hex digits).
        #[arg(long, value_name = "K")]
        key_file: Option<PathBuf>,
        /// One JSON object per robot, then one for the fleet.
        #[arg(long)]
        json: bool,
    },
}

/// Runs `blackbox fleet`.
pub fn run(args: Args) -> Result<(), CliError> {
    match args.command {
        FleetCommand::Verify {
            url,
            jobs,
            key_file,
            json,
        } => verify(&url, usize::from(jobs), key_file, json),
    }
}

fn verify(url: &str, jobs: usize, key_file: Option<PathBuf>, json: bool) -> Result<(), CliError> {
    let key = key_from(key_file.as_deref())?;
    let fleet = Remote::open_existing(url).map_err(|e| CliError::new(e.to_string()))?;
    let logs = blackbox_ship::list_fleet(&fleet).map_err(|e| CliError::new(e.to_string()))?;
    let bar = super::progress_bar(
        Some(logs.len() as u64),
        format!("verifying {} logs under {}", logs.len(), fleet.url()),
    );
    let results = blackbox_ship::verify_fleet(&logs, key.as_ref(), jobs, |_, _| bar.inc(1));
    bar.finish_and_clear();
    let stdout = io::stdout();
    let mut out = stdout.lock();
    let mut failed = Vec::new();
    for (log, result) in logs.iter().zip(&results) {
        if result.is_err() {
            failed.push(log.name.as_str());
        }
        if json {
            line(&mut out, log_json(log, result))?;
        } else {
            line(&mut out, log_line(log, result))?;
        }
    }
    let intact = logs.len() - failed.len();
    if json {
        line(
            &mut out,
            json!({
                "fleet": fleet.url(),
                "logs": logs.len(),
                "intact": intact,
                "failed": failed,
            }),
        )?;
    } else if failed.is_empty() {
        line(
            &mut out,
            if logs.len() == 1 {
                format!("fleet {}: its one log is intact", fleet.url())
            } else {
                format!("fleet {}: all {} logs intact", fleet.url(), logs.len())
            },
        )?;
    }
    out.flush().map_err(super::stdout_error)?;
    if failed.is_empty() {
        return Ok(());
    }
    Err(CliError::new(format!(
        "{} of the {} logs under {} failed verification: {}",
        failed.len(),
        logs.len(),
        fleet.url(),
        failed.join(", ")
    )))
}

/// A robot's line: intact with its size and last digest, or the one sentence that
/// says what failed.
fn log_line(log: &FleetLog, result: &blackbox_ship::Result<RemoteVerifyReport>) -> String {
    match result {
        Ok(report) => {
            let n = report.log.segments;
            let mut text = format!(
                "{}: intact: {} records in {n} segment{} ({})",
                log.name,
                report.log.records,
                if n == 1 { "" } else { "s" },
                human_bytes(report.log.bytes)
            );
            if let Some(last) = report.log.last {
                text.push_str(&format!(", last {last}"));
            }
            text
        }
        Err(e) => format!("{}: FAILED: {e}", log.name),
    }
}

/// A robot's JSON object.
fn log_json(
    log: &FleetLog,
    result: &blackbox_ship::Result<RemoteVerifyReport>,
) -> serde_json::Value {
    match result {
        Ok(report) => json!({
            "robot": log.name,
            "url": log.remote.url(),
            "intact": true,
            "records": report.log.records,
            "segments": report.log.segments,
            "bytes": report.log.bytes,
            "last": report.log.last.map(|d| d.to_string()),
        }),
        Err(e) => json!({
            "robot": log.name,
            "url": log.remote.url(),
            "intact": false,
            "error": e.to_string(),
        }),
    }
}
