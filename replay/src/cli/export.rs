//! `blackbox export`: events as JSON lines, with a manifest beside the file.

use std::io::{self, Write};
use std::path::PathBuf;

use blackbox::LogReader;

use super::{CliError, DirArg, glob_arg, key_from, line, progress_bar, time_arg, warn_unverified};

/// The export formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// One JSON object a line.
    Jsonl,
}

/// Export events as JSON lines (seq, ts, kind, source, payload, values, weight, tier,
/// hash), and FILE.manifest.json beside the file.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    dir: DirArg,
    /// The file format.
    #[arg(long, value_enum, default_value = "jsonl")]
    format: Format,
    /// Events that happened at or after this time (RFC 3339 or integer ns since the
    /// epoch).
    #[arg(long, value_name = "T", value_parser = time_arg)]
    since: Option<u64>,
    /// Events that happened at or before this time (RFC 3339 or integer ns since the
    /// epoch).
    #[arg(long, value_name = "T", value_parser = time_arg)]
    until: Option<u64>,
    /// Only events whose kind matches this glob (repeatable; `*` crosses dots).
    #[arg(long = "kind", value_name = "GLOB", value_parser = glob_arg)]
    kinds: Vec<String>,
    /// The data file to write (replaced if it exists, never inside a log directory), or
    /// `-` for stdout (then no manifest file is written).
    #[arg(long, value_name = "FILE")]
    out: PathBuf,
    /// Print the manifest as one JSON object instead of a sentence.
    #[arg(long)]
    json: bool,
    /// The chain key file of a keyed log, to verify its chain while reading.
    #[arg(long, value_name = "K")]
    key_file: Option<PathBuf>,
}

/// Runs `blackbox export`.
pub fn run(args: Args) -> Result<(), CliError> {
    let Format::Jsonl = args.format;
    let dir = &args.dir.dir;
    let key = key_from(args.key_file.as_deref())?;
    let query = super::replay::query(args.since, args.until, None, None, &args.kinds)?.key(key);
    blackbox_replay::open_log_dir(dir)?;
    // The bar runs over seqs up to the log's end when the export starts.
    let (verified, end) = match LogReader::open_with(
        dir,
        blackbox_log::ReaderOptions {
            key: query.chain_key().cloned(),
        },
    ) {
        Ok(r) => (
            r.chain_verified(),
            r.digest().ok().flatten().map(|d| d.seq + 1),
        ),
        Err(_) => (true, None),
    };
    if !verified {
        warn_unverified(dir);
    }
    let to_stdout = args.out.as_os_str() == "-";
    let bar = progress_bar(
        end,
        if to_stdout {
            "exporting to stdout".to_owned()
        } else {
            format!("exporting to {}", args.out.display())
        },
    );
    // Cheap: the bar redraws at most a few times a second.
    let mut progress = |seq: u64| bar.set_position(seq);
    let result = if to_stdout {
        let stdout = io::stdout();
        let mut lock = stdout.lock();
        blackbox_replay::export_jsonl_to(dir, &query, &mut lock, &mut progress)
    } else {
        blackbox_replay::export_jsonl(dir, &query, &args.out, &mut progress)
    };
    bar.finish_and_clear();
    let manifest = match result {
        Err(blackbox_replay::Error::Io { source, .. })
            if to_stdout && source.kind() == io::ErrorKind::BrokenPipe =>
        {
            return Err(super::stdout_error(source));
        }
        other => other?,
    };
    let range = match (manifest.first_seq, manifest.last_seq) {
        (Some(a), Some(b)) => format!(" (seq {a}..={b})"),
        _ => String::new(),
    };
    let digest = manifest
        .log_digest
        .map_or_else(|| "none (empty log)".to_owned(), |d| d.to_string());
    if to_stdout {
        // Stdout holds the rows: the summary goes to stderr.
        let _ = writeln!(
            io::stderr().lock(),
            "blackbox: exported {} events{range} to stdout (no manifest file); log digest {digest}",
            manifest.count
        );
        return Ok(());
    }
    let stdout = io::stdout();
    let mut out = stdout.lock();
    if args.json {
        line(&mut out, manifest.to_json())?;
    } else {
        line(
            &mut out,
            format!(
                "exported {} events{range} to {}; manifest {}; log digest {digest}",
                manifest.count,
                manifest.file.display(),
                manifest.manifest_file.display()
            ),
        )?;
    }
    out.flush().map_err(super::stdout_error)
}
