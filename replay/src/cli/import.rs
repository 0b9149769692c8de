//! `blackbox import --mcap FILE`: an MCAP recording into a log, through a policy.

use std::io::{self, Write};
use std::path::PathBuf;

use blackbox::policy::Policy;
use blackbox::{Config, Durability};
use blackbox_replay::import_mcap::{McapImport, import_mcap};
use serde_json::{Value, json};

use super::{CliError, line, progress_bar};

/// Import an MCAP recording (ROS 2's default format, Foxglove's) into a log through a
/// retention policy: each message becomes an event at its log time, of the kind its
/// topic names (`/robot/imu` → `robot.imu`); JSON messages keep their JSON (its
/// top-level numbers become values), other encodings are kept as raw bytes with the
/// encoding and schema name as the source. A damaged file stops the import with what
/// was recorded before kept.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The MCAP file to import.
    #[arg(long, value_name = "FILE")]
    mcap: PathBuf,
    /// The log directory (created if needed; an existing log is appended to).
    #[arg(long, value_name = "DIR")]
    dir: PathBuf,
    /// The retention policy (TOML); without it, every event is kept.
    #[arg(long, value_name = "P.toml")]
    policy: Option<PathBuf>,
    /// Print the summary as one JSON object.
    #[arg(long)]
    json: bool,
}

/// Runs `blackbox import`.
pub fn run(args: Args) -> Result<(), CliError> {
    let mut config = Config::new().durability(Durability::Buffered);
    if let Some(path) = &args.policy {
        let policy = Policy::from_toml_file(path)
            .map_err(|e| CliError::new(format!("{e}: fix the policy file")))?;
        config = config.policy(policy);
    }
    let len = std::fs::metadata(&args.mcap).ok().map(|m| m.len());
    let bar = progress_bar(len, format!("importing {}", args.mcap.display()));
    let result = import_mcap(&args.mcap, &args.dir, config, &mut |offset| {
        bar.set_position(offset)
    });
    bar.finish_and_clear();
    let done = match result {
        Ok(done) => done,
        Err(failed) => {
            let kept = if failed.recorded.messages > 0 {
                format!(
                    "; the {} messages recorded before it are kept in {}",
                    failed.recorded.messages,
                    args.dir.display()
                )
            } else {
                String::new()
            };
            return Err(CliError::new(format!(
                "{}{kept}",
                super::describe(&failed.error)
            )));
        }
    };
    let stdout = io::stdout();
    let mut out = stdout.lock();
    if args.json {
        line(&mut out, summary_json(&args, &done))?;
    } else {
        line(&mut out, summary(&args, &done))?;
    }
    out.flush().map_err(super::stdout_error)
}

fn summary(args: &Args, d: &McapImport) -> String {
    let span = match (d.first_log_ns, d.last_log_ns) {
        (Some(a), Some(b)) => format!(
            " from {} to {}",
            blackbox_replay::format_time(a),
            blackbox_replay::format_time(b)
        ),
        _ => String::new(),
    };
    format!(
        "imported {} messages{span} ({} kinds, {} with raw payloads) from {} into {} through its policy (`blackbox stats --dir {}` shows what each kind kept)",
        d.messages,
        d.per_kind.len(),
        d.raw,
        args.mcap.display(),
        args.dir.display(),
        args.dir.display()
    )
}

fn summary_json(args: &Args, d: &McapImport) -> Value {
    json!({
        "file": args.mcap.display().to_string(),
        "dir": args.dir.display().to_string(),
        "messages": d.messages,
        "raw": d.raw,
        "bytes": d.bytes,
        "first_log_ns": d.first_log_ns,
        "last_log_ns": d.last_log_ns,
        "kinds": d.per_kind,
        "counters": d.counters.iter().map(|(k, c)| (k.clone(), json!({
            "seen": c.seen, "kept": c.kept, "sampled_out": c.sampled_out,
            "summarized": c.summarized, "dropped": c.dropped,
        }))).collect::<serde_json::Map<String, Value>>(),
    })
}
