//! `blackbox ship`: one pass that ships the log's sealed segments to object storage.

use std::io::{self, Write};
use std::path::PathBuf;

use blackbox_ship::{Action, Remote, ShipOptions};

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
    /// The chain key file of a keyed log (32 raw bytes or 64 hex digits).
    #[arg(long, value_name = "K")]
    key_file: Option<PathBuf>,
}

/// Runs `blackbox ship`.
pub fn run(args: Args) -> Result<(), CliError> {
    let dir = &args.dir.dir;
    blackbox_replay::open_log_dir(dir).map_err(|e| super::damage::fail(dir, false, e))?;
    let remote = Remote::open(&args.to).map_err(|e| CliError::new(e.to_string()))?;
    let options = ShipOptions {
        key: key_from(args.key_file.as_deref())?,
        ..ShipOptions::default()
    };
    let stdout = io::stdout();
    let mut out = stdout.lock();
    let mut write_error = None;
    let result = blackbox_ship::ship_to(dir, &remote, &options, |s| {
        let what = match s.action {
            Action::Uploaded => "shipped",
            Action::Adopted => "adopted",
            Action::AlreadyShipped => "skipped",
        };
        let why = match s.action {
            Action::Uploaded => "",
            Action::Adopted => ", already whole in the store",
            Action::AlreadyShipped => ", already in the manifest",
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
    out.flush().map_err(super::stdout_error)
}
