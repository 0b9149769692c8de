//! `blackbox ship`: ships the log's sealed segments to object storage, in one pass or,
//! with `--follow`, as they are sealed.

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use blackbox_ship::{Action, Remote, ShipOptions, ShipReport};

use super::{CliError, DirArg, human_bytes, key_from, line};

/// Ship the log's sealed segments to object storage (S3 or a directory), with a
/// manifest beside them; a pass resumes where an interrupted one stopped.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    dir: DirArg,
    /// Where to: `s3://BUCKET/PREFIX` (credentials, region and endpoint from the
    /// environment as AWS tools read them: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
    /// AWS_REGION, AWS_ENDPOINT_URL), `file:///PATH` or a directory.
    #[arg(long, value_name = "URL")]
    to: String,
    /// Keep shipping: after the first pass, ship each segment as it is sealed, until
    /// SIGINT or SIGTERM (a pass under way finishes first).
    #[arg(long)]
    follow: bool,
    /// How often `--follow` looks for a newly sealed segment (like 1s, 250ms).
    #[arg(long, value_name = "D", value_parser = duration_arg, default_value = "1s", requires = "follow")]
    interval: u64,
    /// The chain key file of a keyed log (32 raw bytes or 64 hex digits).
    #[arg(long, value_name = "K")]
    key_file: Option<PathBuf>,
}

/// Value parser: a duration (`1s`, `250ms`), more than zero.
fn duration_arg(text: &str) -> Result<u64, String> {
    match blackbox_replay::parse_duration(text) {
        Ok(0) => Err("expected a duration longer than zero".to_owned()),
        Ok(ns) => Ok(ns),
        Err(e) => Err(e.to_string()),
    }
}

/// Set by SIGINT or SIGTERM while `--follow` runs.
static STOP: AtomicBool = AtomicBool::new(false);

/// Runs `blackbox ship`.
pub fn run(args: Args) -> Result<(), CliError> {
    let dir = &args.dir.dir;
    super::local_only(dir, "ship")?;
    blackbox_replay::open_log_dir(dir).map_err(|e| super::damage::fail(dir, false, e))?;
    let remote = Remote::open(&args.to).map_err(|e| CliError::new(e.to_string()))?;
    let options = ShipOptions {
        key: key_from(args.key_file.as_deref())?,
        ..ShipOptions::default()
    };
    if !args.follow {
        pass(dir, &remote, &options, true)?;
        return Ok(());
    }
    // A signal only asks the loop to stop: a pass under way finishes, so the manifest
    // is never left behind an upload that could have been recorded.
    ctrlc::set_handler(|| STOP.store(true, Ordering::SeqCst)).map_err(|e| {
        CliError::new(format!(
            "cannot install the SIGINT and SIGTERM handler that lets --follow stop between passes: {e}"
        ))
    })?;
    let interval = Duration::from_nanos(args.interval);
    let mut seen = segment_count(dir)?;
    pass(dir, &remote, &options, true)?;
    while !STOP.load(Ordering::SeqCst) {
        // A new segment file means the one before it was sealed.
        let deadline = Instant::now() + interval;
        while !STOP.load(Ordering::SeqCst) && Instant::now() < deadline {
            std::thread::sleep(interval.min(Duration::from_millis(100)));
        }
        if STOP.load(Ordering::SeqCst) {
            break;
        }
        let now = segment_count(dir)?;
        if now != seen {
            seen = now;
            pass(dir, &remote, &options, false)?;
        }
    }
    let stdout = io::stdout();
    let mut out = stdout.lock();
    line(
        &mut out,
        format!(
            "stopped following {}: every sealed segment found was shipped",
            dir.display()
        ),
    )?;
    out.flush().map_err(super::stdout_error)
}

/// The number of segment files in the log directory.
fn segment_count(dir: &Path) -> Result<usize, CliError> {
    blackbox_log::list_segments(dir)
        .map(|s| s.len())
        .map_err(|e| CliError::new(super::describe_log(&e)))
}

/// One pass: a line per segment shipped or adopted (and, in the first pass, per
/// segment already shipped), and a summary when it shipped something or is the first.
fn pass(
    dir: &Path,
    remote: &Remote,
    options: &ShipOptions,
    first: bool,
) -> Result<ShipReport, CliError> {
    let stdout = io::stdout();
    let mut out = stdout.lock();
    let mut write_error = None;
    let result = blackbox_ship::ship_to(dir, remote, options, |s| {
        let (what, why) = match s.action {
            Action::Uploaded => ("shipped", ""),
            Action::Adopted => ("adopted", ", already whole in the store"),
            Action::AlreadyShipped if first => ("skipped", ", already in the manifest"),
            Action::AlreadyShipped => return,
        };
        let text = format!(
            "{what} {} (seqs {}..={}, {}{why})",
            s.name,
            s.first_seq,
            s.last_seq,
            human_bytes(s.bytes)
        );
        if write_error.is_none()
            && let Err(e) = line(&mut out, text)
        {
            write_error = Some(e);
        }
    });
    if let Some(e) = write_error {
        return Err(e);
    }
    let report = result.map_err(|e| CliError::new(e.to_string()))?;
    let shipped = report.count(Action::Uploaded);
    let adopted = report.count(Action::Adopted);
    if !first && shipped + adopted == 0 {
        return Ok(report);
    }
    let mut summary = format!(
        "shipped {shipped} segment{} ({}) to {}",
        if shipped == 1 { "" } else { "s" },
        human_bytes(report.bytes_uploaded),
        remote.url()
    );
    if adopted > 0 {
        summary.push_str(&format!(", adopted {adopted} already in the store"));
    }
    summary.push_str(&format!(
        ", skipped {} already shipped",
        report.count(Action::AlreadyShipped)
    ));
    match report.shipped_through_seq {
        Some(seq) => summary.push_str(&format!(
            "; the manifest holds {} segment{} through seq {seq}",
            report.shipped_segments,
            if report.shipped_segments == 1 {
                ""
            } else {
                "s"
            }
        )),
        None => summary.push_str(
            "; nothing is shipped yet: the log has no sealed segment (only the active one)",
        ),
    }
    line(&mut out, summary)?;
    out.flush().map_err(super::stdout_error)?;
    Ok(report)
}
