//! `blackbox export`: events as JSON lines or Parquet with their weights, and a manifest
//! beside the output; `export --check` proves an export is still what its manifest says.

use std::io::{self, Write};
use std::path::PathBuf;

use blackbox::LogReader;
use blackbox_replay::{
    ExportManifest, ExportOptions, McapCompression, ParquetOptions, PartitionKey, hex,
};
use serde_json::json;

use super::range::{RangeArgs, explain_empty};
use super::{CliError, glob_arg, key_from, line, progress_bar, warn_unverified};

/// The export formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// One JSON object a line.
    Jsonl,
    /// Parquet: typed columns, one row per event (zstd pages).
    Parquet,
    /// MCAP, for Foxglove: a channel per kind, and summaries, incidents, knowledge-base
    /// commits and accounting on channels of their own.
    Mcap,
}

/// How an MCAP export compresses its chunks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Compression {
    /// zstd.
    Zstd,
    /// lz4: faster, larger.
    Lz4,
    /// None.
    None,
}

/// What a Parquet export's files are split by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Partition {
    /// The robot: robot=NAME (the name is --robot's).
    Robot,
    /// The UTC date of the event's time: date=YYYY-MM-DD.
    Date,
    /// The event's kind: kind=KIND (then not a column of the files).
    Kind,
}

impl Partition {
    fn key(self) -> PartitionKey {
        match self {
            Partition::Robot => PartitionKey::Robot,
            Partition::Date => PartitionKey::Date,
            Partition::Kind => PartitionKey::Kind,
        }
    }
}

/// Export events as JSON lines (seq, ts, kind, source, payload, values, weight, tier,
/// hash), as Parquet (the same in typed columns) or as MCAP (for Foxglove), and
/// OUT.manifest.json beside the output; or check an export against its manifest.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The log directory (with --check: also derive the file again from this log).
    #[arg(long, value_name = "DIR", required_unless_present = "check")]
    dir: Option<PathBuf>,
    /// The file format.
    #[arg(long, value_enum, default_value = "jsonl")]
    format: Format,
    /// MCAP: how its chunks are compressed [default: zstd].
    #[arg(long, value_enum)]
    compression: Option<Compression>,
    /// Parquet: write a hive-style directory split by these keys, in this order
    /// (robot,date,kind: OUT/robot=NAME/date=YYYY-MM-DD/kind=KIND/part-SEQ.parquet),
    /// which DuckDB, Spark and Polars read as one dataset; OUT must be absent or empty,
    /// or a URL (s3://BUCKET/PREFIX) that many robots' exports share.
    #[arg(
        long,
        value_enum,
        value_name = "KEYS",
        value_delimiter = ',',
        conflicts_with = "check"
    )]
    partition: Vec<Partition>,
    /// The robot's name, for --partition robot and an export to a URL [default: the
    /// last part of --dir].
    #[arg(long, value_name = "NAME", conflicts_with = "check")]
    robot: Option<String>,
    /// Parquet: also write the summary records the query selects to FILE (one row per
    /// summary window), listed in the same manifest.
    #[arg(long, value_name = "FILE", conflicts_with = "check")]
    summaries: Option<PathBuf>,
    #[command(flatten)]
    range: RangeArgs,
    /// Only records at or after this seq (the next export to a lake starts after the
    /// last seq of the one before).
    #[arg(long, value_name = "SEQ", conflicts_with = "check")]
    from_seq: Option<u64>,
    /// Only records at or before this seq.
    #[arg(long, value_name = "SEQ", conflicts_with = "check")]
    to_seq: Option<u64>,
    /// Only events whose kind matches this glob (repeatable; `*` crosses dots; `!GLOB`
    /// excludes).
    #[arg(long = "kind", value_name = "GLOB", value_parser = glob_arg)]
    kinds: Vec<String>,
    /// Also export the events of summarized and dropped kinds (the log holds only those
    /// written around incidents), at weight 1; left out by default.
    #[arg(long)]
    include_unweighted: bool,
    /// Read a damaged log around its damage: export every intact event, list each lost
    /// stretch (stderr and the manifest), exit 3 if anything was lost.
    #[arg(long)]
    salvage: bool,
    /// The data file to write (replaced if it exists, never inside a log directory), or
    /// `-` for stdout (JSONL; then no manifest file is written); with --partition, the
    /// directory to write (absent or empty), or the URL of a data lake (s3://BUCKET/PREFIX
    /// or file:///PATH: objects there are never replaced, the manifest goes to
    /// URL/_manifests/).
    #[arg(
        long,
        value_name = "FILE",
        required_unless_present = "check",
        conflicts_with = "check"
    )]
    out: Option<PathBuf>,
    /// Check an exported FILE (or its FILE.manifest.json) against its manifest; with
    /// --dir, also derive it again from the log. Exit 0 only if nothing changed.
    #[arg(long, value_name = "FILE")]
    check: Option<PathBuf>,
    /// Print the manifest (or the check's report) as one JSON object.
    #[arg(long)]
    json: bool,
    /// The chain key file of a keyed log, to verify its chain while reading.
    #[arg(long, value_name = "K")]
    key_file: Option<PathBuf>,
}

/// Runs `blackbox export`.
pub fn run(args: Args) -> Result<(), CliError> {
    if let Some(path) = &args.check {
        return check(&args, path);
    }
    if args.format != Format::Parquet && (!args.partition.is_empty() || args.summaries.is_some()) {
        return Err(CliError::new(
            "--partition and --summaries are Parquet options: add --format parquet",
        ));
    }
    if args.format != Format::Mcap && args.compression.is_some() {
        return Err(CliError::new(
            "--compression is an MCAP option (Parquet pages are zstd): add --format mcap",
        ));
    }
    let (Some(dir), Some(out_path)) = (&args.dir, &args.out) else {
        return Err(CliError::new(
            "export needs --dir and --out (or --check FILE): see `blackbox export --help`",
        ));
    };
    let to_url = out_path.to_str().is_some_and(blackbox_ship::is_url);
    let partition = partition_keys(&args.partition)?;
    if to_url && !partition.contains(&PartitionKey::Robot) {
        return Err(CliError::new(
            "an export to a URL is a data lake that many robots share, partitioned by robot: add --format parquet --partition robot,date,kind (robot, and the other keys you want)",
        ));
    }
    if to_url && args.summaries.is_some() {
        return Err(CliError::new(
            "--summaries writes a local file: export the summaries in a run of their own, to a file",
        ));
    }
    if args.robot.is_some() && !to_url && !partition.contains(&PartitionKey::Robot) {
        return Err(CliError::new(
            "--robot names the robot's partition: add robot to --partition",
        ));
    }
    let robot = if to_url || partition.contains(&PartitionKey::Robot) {
        Some(super::lake::robot_name(args.robot.as_deref(), dir)?)
    } else {
        None
    };
    // An export to a lake is written here first, then uploaded.
    let staging = if to_url {
        Some(
            tempfile::Builder::new()
                .prefix(".blackbox-lake-")
                .tempdir()
                .map_err(|e| {
                    CliError::new(format!(
                        "cannot create a temporary directory to stage the export in: {e}"
                    ))
                })?,
        )
    } else {
        None
    };
    let staged_out = staging.as_ref().map(|t| t.path().join(STAGED_NAME));
    let key = key_from(args.key_file.as_deref())?;
    if !args.salvage {
        blackbox_replay::open_log_dir(dir).map_err(|e| super::damage::fail(dir, args.json, e))?;
    }
    let ((since, until), incident) = args.range.resolve_incident(dir, key.as_ref())?;
    let query = super::replay::query(since, until, args.from_seq, args.to_seq, &args.kinds)?
        .key(key.clone());
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
    let options = ExportOptions {
        include_unweighted: args.include_unweighted,
        salvage: args.salvage,
    };
    let to_stdout = out_path.as_os_str() == "-";
    if to_stdout && args.format == Format::Parquet {
        return Err(CliError::new(
            "a Parquet export is written to a file (--out FILE), not to stdout: its footer is written last",
        ));
    }
    let bar = progress_bar(
        end,
        if to_stdout {
            "exporting to stdout".to_owned()
        } else {
            format!("exporting to {}", out_path.display())
        },
    );
    // Cheap: the bar redraws at most a few times a second.
    let mut progress = |seq: u64| bar.set_position(seq);
    let compression = match args.compression.unwrap_or(Compression::Zstd) {
        Compression::Zstd => McapCompression::Zstd,
        Compression::Lz4 => McapCompression::Lz4,
        Compression::None => McapCompression::None,
    };
    let result = if to_stdout && args.format == Format::Mcap {
        let stdout = io::stdout();
        let mut lock = stdout.lock();
        blackbox_replay::export_mcap_to(
            dir,
            &query,
            &options,
            compression,
            &mut lock,
            &mut progress,
        )
    } else if to_stdout {
        let stdout = io::stdout();
        let mut lock = stdout.lock();
        blackbox_replay::export_jsonl_to(dir, &query, &options, &mut lock, &mut progress)
    } else if args.format == Format::Mcap {
        blackbox_replay::export_mcap(dir, &query, out_path, &options, compression, &mut progress)
    } else if args.format == Format::Parquet {
        let parquet = ParquetOptions {
            partition,
            robot: robot.clone(),
            summaries: args.summaries.clone(),
        };
        let out = staged_out.as_deref().unwrap_or(out_path);
        blackbox_replay::export_parquet(dir, &query, out, &options, &parquet, &mut progress)
    } else {
        blackbox_replay::export_jsonl(dir, &query, out_path, &options, &mut progress)
    };
    bar.finish_and_clear();
    let manifest = match result {
        Err(blackbox_replay::Error::Io { source, .. })
            if to_stdout && source.kind() == io::ErrorKind::BrokenPipe =>
        {
            return Err(super::stdout_error(source));
        }
        Err(e) => return Err(super::damage::fail(dir, args.json && !to_stdout, e)),
        Ok(m) => m,
    };
    let (manifest, uploaded) = match (&staging, out_path.to_str()) {
        (Some(staging), Some(url)) => {
            let (m, done) = super::lake::upload(
                manifest,
                staging.path(),
                STAGED_NAME,
                url,
                robot.as_deref().unwrap_or_default(),
            )?;
            (m, Some(done))
        }
        _ => (manifest, None),
    };
    let exported: std::collections::BTreeSet<String> = manifest
        .per_kind
        .keys()
        .chain(manifest.excluded.keys())
        .cloned()
        .collect();
    explain_empty(dir, key, &query, manifest.rows, &exported);
    let mut said = summary(&manifest, to_stdout);
    match uploaded {
        Some(super::lake::Uploaded::Objects { uploaded, kept }) => {
            said.push_str(&format!("; uploaded {uploaded} objects"));
            if kept > 0 {
                said.push_str(&format!(
                    ", kept {kept} already there with the same bytes (an earlier run of this export)"
                ));
            }
        }
        Some(super::lake::Uploaded::AlreadyThere) => {
            said.push_str(
                "; the lake already holds this export (its manifest is there): nothing uploaded",
            );
        }
        Some(super::lake::Uploaded::Nothing) | None => {}
    }
    let lost = report_losses(&manifest);
    if to_stdout {
        // Stdout holds the rows: the summary goes to stderr.
        let _ = writeln!(io::stderr().lock(), "blackbox: {said}");
    } else {
        let stdout = io::stdout();
        let mut out = stdout.lock();
        if args.json {
            let mut json = manifest.to_json();
            if staging.is_some() {
                json["file"]["path"] = manifest.file.display().to_string().into();
                json["manifest"] = manifest.manifest_file.display().to_string().into();
            }
            line(&mut out, json)?;
        } else {
            line(&mut out, said)?;
        }
        out.flush().map_err(super::stdout_error)?;
    }
    if lost {
        return Err(CliError::salvaged());
    }
    // A whole incident exported intact is released: a recorder under a disk budget no
    // longer keeps its window.
    if let Some(trigger_seq) = incident
        && !args.salvage
    {
        super::release::request(dir, trigger_seq)?;
        let _ = writeln!(
            io::stderr().lock(),
            "blackbox: released incident {trigger_seq}: a recorder writing {} stops keeping its window from its next segment on",
            dir.display()
        );
    }
    Ok(())
}

/// The name of the events' directory of an export staged for a lake.
const STAGED_NAME: &str = "export";

/// The keys of `--partition`, each at most once.
fn partition_keys(given: &[Partition]) -> Result<Vec<PartitionKey>, CliError> {
    let mut keys: Vec<PartitionKey> = Vec::with_capacity(given.len());
    for p in given {
        let key = p.key();
        if keys.contains(&key) {
            return Err(CliError::new(format!(
                "--partition names {} twice",
                key.name()
            )));
        }
        keys.push(key);
    }
    Ok(keys)
}

/// Lists a salvage's losses on stderr; returns whether records were lost.
fn report_losses(m: &ExportManifest) -> bool {
    let mut err = io::stderr().lock();
    for loss in &m.lost {
        let _ = writeln!(err, "blackbox: {loss}");
    }
    for (seq, why) in &m.undecodable {
        let _ = writeln!(
            err,
            "blackbox: seq {seq} is intact but cannot be read: {why}"
        );
    }
    m.lost.iter().any(blackbox_replay::loses_records) || !m.undecodable.is_empty()
}

/// The sentence that says what an export wrote.
fn summary(m: &ExportManifest, to_stdout: bool) -> String {
    let range = match (m.first_seq, m.last_seq) {
        (Some(a), Some(b)) => format!(" (seq {a}..={b})"),
        _ => String::new(),
    };
    let digest = match m.log_digest {
        Some(d) => d.to_string(),
        None if m.salvage => "none (a salvaged log proves no prefix)".to_owned(),
        None => "none (empty log)".to_owned(),
    };
    let to = if to_stdout {
        "stdout (no manifest file)".to_owned()
    } else if m.manifest_file.as_os_str().is_empty() {
        format!("{} (nothing uploaded)", m.file.display())
    } else {
        format!(
            "{}; manifest {}",
            m.file.display(),
            m.manifest_file.display()
        )
    };
    let mut s = format!(
        "exported {} events{range} to {to}; log digest {digest}",
        m.rows
    );
    if m.records > 0 {
        s.push_str(&format!(
            "; and {} summaries, incidents, knowledge-base commits and accounting records",
            m.records
        ));
    }
    for f in m.files.iter().filter(|f| f.role == "summaries") {
        s.push_str(&format!(
            "; {} summary records to {}",
            f.rows,
            f.path.display()
        ));
    }
    if !m.excluded.is_empty() {
        let left: Vec<String> = m
            .excluded
            .iter()
            .map(|(k, e)| format!("{k} ({} rows)", e.rows))
            .collect();
        s.push_str(&format!(
            "; left out, summarized or dropped kinds without weights: {} (--include-unweighted exports them)",
            left.join(", ")
        ));
    }
    s
}

/// `export --check FILE [--dir D]`.
fn check(args: &Args, path: &std::path::Path) -> Result<(), CliError> {
    if path.to_str().is_some_and(blackbox_ship::is_url) {
        return Err(CliError::new(format!(
            "export --check reads a local export, not {}: an export to a lake lists each object's blake3 in its manifest under _manifests/",
            path.display()
        )));
    }
    let key = key_from(args.key_file.as_deref())?;
    let report = match &args.dir {
        Some(dir) => {
            // The check verifies the whole log first, on this machine.
            super::local_only(dir, "export --check --dir")?;
            blackbox_replay::check_export_against_log(path, dir, key)?
        }
        None => blackbox_replay::check_export(path)?,
    };
    let stdout = io::stdout();
    let mut out = stdout.lock();
    if args.json {
        line(
            &mut out,
            json!({
                "matches": true,
                "file": report.file.display().to_string(),
                "manifest": report.manifest_file.display().to_string(),
                "rows": report.rows,
                "bytes": report.bytes,
                "blake3": hex(&report.blake3),
                "log_digest": report.log_digest,
                "derived_from_log": args.dir.as_ref().map(|d| d.display().to_string()),
            }),
        )?;
    } else {
        let mut s = format!(
            "{} matches its manifest {}: {} rows, {} bytes, blake3 {}",
            report.file.display(),
            report.manifest_file.display(),
            report.rows,
            report.bytes,
            hex(&report.blake3)
        );
        if let Some(dir) = &args.dir {
            s.push_str(&format!(
                "; derived again from {} up to digest {}, identical",
                dir.display(),
                report.log_digest.as_deref().unwrap_or("none")
            ));
        }
        line(&mut out, s)?;
    }
    out.flush().map_err(super::stdout_error)
}
