//! `blackbox verify`: every checksum and the whole hash chain; exit 0 only if intact.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use blackbox::Digest;
use blackbox_replay::format_time;

use super::{CliError, DirArg, describe_log, human_bytes, key_from, line, progress_bar};

/// Check every checksum and the hash chain; exit 0 only if the log is intact. `--dir`
/// may be the URL a log was shipped to (`s3://…`, `file:///…`).
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    dir: DirArg,
    /// Also prove the log still holds the prefix this digest (from `blackbox digest`)
    /// was taken from: catches a cut tail.
    #[arg(long, value_name = "SEQ:HASH")]
    digest: Option<String>,
    /// The chain key file of a keyed log (32 raw bytes or 64 hex digits).
    #[arg(long, value_name = "K")]
    key_file: Option<PathBuf>,
    /// One JSON object with the report.
    #[arg(long)]
    json: bool,
}

/// Runs `blackbox verify`.
pub fn run(args: Args) -> Result<(), CliError> {
    let dir = &args.dir.dir;
    let digest: Option<Digest> = args
        .digest
        .as_deref()
        .map(str::parse)
        .transpose()
        .map_err(|e: blackbox_log::Error| CliError::new(describe_log(&e)))?;
    // A URL, or a directory a log was shipped to (`ship --to PATH`): a shipped log.
    if let Some(url) = dir
        .to_str()
        .filter(|d| blackbox_ship::is_url(d) || blackbox_replay::is_shipped_dir(Path::new(d)))
    {
        return super::verify_remote::run(
            url,
            args.key_file.as_deref(),
            digest.as_ref(),
            args.json,
        );
    }
    let segments =
        blackbox_replay::open_log_dir(dir).map_err(|e| super::damage::fail(dir, args.json, e))?;
    let key = key_from(args.key_file.as_deref())?;
    let total: u64 = segments
        .iter()
        .filter_map(|s| std::fs::metadata(&s.path).ok())
        .map(|m| m.len())
        .sum();
    // The log's verify reports no progress as it goes: a spinner says it is working.
    let bar = progress_bar(
        None,
        format!(
            "verifying {} segments ({})",
            segments.len(),
            human_bytes(total)
        ),
    );
    let result = blackbox_log::verify(dir, key.as_ref(), digest.as_ref());
    bar.finish_and_clear();
    let stdout = io::stdout();
    let mut out = stdout.lock();
    let report = match result {
        Ok(report) => report,
        // The report of a damaged log is the answer, as JSON like an intact one's.
        Err(e) if args.json => return Err(super::damage::fail(dir, true, e.into())),
        Err(e) => return Err(CliError::new(describe_log(&e))),
    };
    if args.json {
        line(
            &mut out,
            blackbox_replay::verify_json(&report, key.is_some(), digest.as_ref()),
        )?;
    } else {
        let mut text = format!(
            "log {} is intact: {} records in {} segment{} ({} blocks, {}), every checksum and the hash chain verified",
            dir.display(),
            report.records,
            report.segments,
            if report.segments == 1 { "" } else { "s" },
            report.blocks,
            human_bytes(report.bytes)
        );
        if let Some(d) = &digest {
            if report.digest_pruned {
                text.push_str(&format!(
                    "; digest {d} is older than the cut: the records it covers were pruned, so it can be neither matched nor refuted"
                ));
            } else {
                text.push_str(&format!("; it holds the prefix of digest {d}"));
            }
        }
        line(&mut out, text)?;
        if let Some(p) = &report.pruned {
            line(
                &mut out,
                format!(
                    "pruned up to seq {} at {} (by the log's disk budget, on the record at seq {}; the retained log's chain is verified from the cut)",
                    p.up_to_seq,
                    format_time(p.at_ns),
                    p.record_seq
                ),
            )?;
        }
        if let Some(last) = report.last {
            line(&mut out, format!("last: {last}"))?;
        }
        if let Some((path, offset, len)) = &report.torn_tail {
            line(
                &mut out,
                format!(
                    "note: {len} bytes at byte {offset} of segment {} are a torn tail (a crash, or a writer still writing); the records before them are intact and the next writer cuts them",
                    path.display()
                ),
            )?;
        }
    }
    out.flush().map_err(super::stdout_error)
}
