//! `blackbox digest`: `SEQ:HASH` of the last record. It checks the log's structure and
//! reads the last segment, not every record: `verify` proves the content.

use std::io::{self, Write};

use blackbox::LogReader;
use blackbox_log::link_to_hex;
use serde_json::json;

use super::{CliError, DirArg, line};

/// Print SEQ:HASH of the last record: keep it, and later check the log against it with
/// `blackbox verify --digest`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    dir: DirArg,
    /// One JSON object: `{"digest", "seq", "hash"}`.
    #[arg(long)]
    json: bool,
}

/// Runs `blackbox digest`.
pub fn run(args: Args) -> Result<(), CliError> {
    let dir = &args.dir.dir;
    blackbox_replay::open_log_dir(dir).map_err(|e| super::damage::fail(dir, args.json, e))?;
    let digest = LogReader::open(dir)
        .and_then(|r| r.digest())
        .map_err(|e| super::damage::fail(dir, args.json, e.into()))?
        .ok_or_else(|| {
            CliError::new(format!(
                "log {} holds no record yet, so it has no digest: record something first",
                dir.display()
            ))
        })?;
    let stdout = io::stdout();
    let mut out = stdout.lock();
    if args.json {
        line(
            &mut out,
            json!({
                "digest": digest.to_string(),
                "seq": digest.seq,
                "hash": link_to_hex(&digest.link),
            }),
        )?;
    } else {
        line(&mut out, digest)?;
        // Said in text mode only: with --json, stdout is the whole answer.
        let what = if blackbox_log::source::is_url(dir) {
            "the structure its manifest lists and the last segment read; run `blackbox verify --dir {}` to check every object"
        } else {
            "structure checked; run `blackbox verify --dir {}` to check every record"
        };
        let _ = writeln!(
            io::stderr().lock(),
            "blackbox: ({})",
            what.replace("{}", &dir.display().to_string())
        );
    }
    out.flush().map_err(super::stdout_error)
}
