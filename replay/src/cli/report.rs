//! `blackbox report`: an incident, a window or the whole log as one self-contained HTML
//! page.

use std::io::{self, Write};
use std::path::PathBuf;

use blackbox_replay::{Incident, ReportOptions, ReportScope, format_time, shell_word};

use super::range::duration_arg;
use super::{CliError, DirArg, key_from, line, time_arg};

/// The window around `--around` when no `--window` is given: each side.
const WINDOW_DEFAULT_NS: u64 = 15_000_000_000;

/// Write one self-contained HTML page (no network, no script) to review an incident, a
/// window of time, or (with neither) the whole log: timeline, values, knowledge base,
/// working memory, accounting, integrity.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    dir: DirArg,
    /// The incident to show: N-th from 1, or -N from the end (-1: the last).
    #[arg(
        long,
        value_name = "N",
        allow_hyphen_values = true,
        conflicts_with = "around"
    )]
    incident: Option<i64>,
    /// Show the window around this time instead (RFC 3339, integer ns, `now`, `-5m`).
    #[arg(long, value_name = "T", value_parser = time_arg, allow_hyphen_values = true)]
    around: Option<u64>,
    /// How far on each side of --around (default 15s), or of the incident's trigger
    /// (default: its own pre-roll and post-roll, and a quarter of their span beyond).
    #[arg(long, value_name = "D", value_parser = duration_arg, allow_hyphen_values = true)]
    window: Option<u64>,
    /// Verify the whole log first, every record (the overview always does; a window's
    /// report checks the log's structure and every block it reads).
    #[arg(long)]
    verify: bool,
    /// The HTML file to write (replaced if it exists; never inside a log directory).
    #[arg(long, value_name = "FILE")]
    out: PathBuf,
    /// The chain key file of a keyed log.
    #[arg(long, value_name = "K")]
    key_file: Option<PathBuf>,
}

/// An incident's window as its report shows it: its pre-roll and post-roll, and a
/// quarter of their span on each side for what came before and after at the policy's
/// usual fidelity.
pub fn incident_window(incident: &Incident) -> (u64, u64) {
    let margin = incident
        .postroll_end_ns
        .saturating_sub(incident.preroll_start_ns)
        / 4;
    (
        incident.preroll_start_ns.saturating_sub(margin),
        incident.postroll_end_ns.saturating_add(margin),
    )
}

/// Refuses a window that holds no instant of the log's span (from its first record's
/// time to its last's), saying what the span is: its page would be empty.
fn outside_the_log(
    dir: &std::path::Path,
    key: Option<blackbox::ChainKey>,
    since_ns: u64,
    until_ns: u64,
) -> Result<(), CliError> {
    let stats = blackbox_replay::stats(dir, key).map_err(|e| super::damage::fail(dir, false, e))?;
    let (Some(first), Some(last)) = (stats.first_ts_ns, stats.last_ts_ns) else {
        return Ok(());
    };
    let side = if until_ns < first {
        "before"
    } else if since_ns > last {
        "after"
    } else {
        return Ok(());
    };
    Err(CliError::new(format!(
        "--around: the window {} to {} lies {side} {}, whose records run from {} to {}: give --around a time between them",
        format_time(since_ns),
        format_time(until_ns),
        dir.display(),
        format_time(first),
        format_time(last)
    )))
}

/// Runs `blackbox report`.
pub fn run(args: Args) -> Result<(), CliError> {
    let dir = &args.dir.dir;
    let key = key_from(args.key_file.as_deref())?;
    // Its verify section reads every record.
    super::local_only(dir, "report")?;
    blackbox_replay::open_log_dir(dir).map_err(|e| super::damage::fail(dir, false, e))?;
    if args.window.is_some() && args.incident.is_none() && args.around.is_none() {
        return Err(CliError::new(
            "--window is the width around --incident or --around: give one of them",
        ));
    }
    if args.out.as_os_str() == "-" {
        return Err(CliError::new(
            "a report is an HTML file: give --out FILE.html (it is not written to stdout)",
        ));
    }
    let mut command = format!(
        "blackbox report --dir {}",
        shell_word(&dir.display().to_string())
    );
    let scope = if let Some(n) = args.incident {
        // The N-th from the start needs the first N only.
        let limit = usize::try_from(n).ok().filter(|&n| n > 0);
        let all = blackbox_replay::incidents(dir, key.clone(), limit)
            .map_err(|e| super::damage::fail(dir, false, e))?;
        let index = if n > 0 {
            usize::try_from(n - 1).ok()
        } else {
            usize::try_from(n.unsigned_abs())
                .ok()
                .and_then(|back| all.len().checked_sub(back))
        };
        let Some(incident) = index.and_then(|i| all.get(i)).cloned().filter(|_| n != 0) else {
            if all.is_empty() {
                return Err(CliError::new(format!(
                    "--incident {n}: {} holds no incident: leave --incident out for the whole log, or give --around a time",
                    dir.display()
                )));
            }
            return Err(CliError::new(format!(
                "--incident {n}: {} holds {} incident{}: give 1 to {} (or -1 for the last)",
                dir.display(),
                all.len(),
                if all.len() == 1 { "" } else { "s" },
                all.len()
            )));
        };
        command.push_str(&format!(" --incident {n}"));
        let (since_ns, until_ns) = match args.window {
            Some(w) => {
                command.push_str(&format!(" --window {}ns", w));
                (
                    incident.trigger_ts_ns.saturating_sub(w),
                    incident.trigger_ts_ns.saturating_add(w),
                )
            }
            None => incident_window(&incident),
        };
        ReportScope::Window {
            since_ns,
            until_ns,
            incident: Some(incident),
        }
    } else if let Some(t) = args.around {
        let w = args.window.unwrap_or(WINDOW_DEFAULT_NS);
        command.push_str(&format!(" --around {t} --window {w}ns"));
        let (since_ns, until_ns) = (t.saturating_sub(w), t.saturating_add(w));
        outside_the_log(dir, key.clone(), since_ns, until_ns)?;
        ReportScope::Window {
            since_ns,
            until_ns,
            incident: None,
        }
    } else {
        ReportScope::Overview
    };
    if args.verify {
        command.push_str(" --verify");
    }
    if let Some(path) = &args.key_file {
        command.push_str(&format!(
            " --key-file {}",
            shell_word(&path.display().to_string())
        ));
    }
    command.push_str(&format!(
        " --out {}",
        shell_word(&args.out.display().to_string())
    ));
    let options = ReportOptions {
        key,
        command,
        key_file: args.key_file.clone(),
        verify_whole_log: args.verify,
    };
    let written = blackbox_replay::write_report(dir, &scope, &options, &args.out)
        .map_err(|e| super::damage::fail(dir, false, e))?;
    let what = match &scope {
        ReportScope::Overview => "the log's overview".to_owned(),
        ReportScope::Window {
            incident: Some(i), ..
        } => format!(
            "incident {} at {}",
            i.trigger_kind,
            format_time(i.trigger_ts_ns)
        ),
        ReportScope::Window {
            since_ns, until_ns, ..
        } => format!("{} to {}", format_time(*since_ns), format_time(*until_ns)),
    };
    let stdout = io::stdout();
    let mut out = stdout.lock();
    line(
        &mut out,
        format!(
            "wrote {} ({} KiB): {what}",
            written.path.display(),
            written.bytes.div_ceil(1024)
        ),
    )?;
    out.flush().map_err(super::stdout_error)
}
