//! `export`: a log's events to Parquet, JSONL or MCAP, with the manifest beside the
//! file, as `blackbox export` writes them.

use std::path::PathBuf;

use blackbox_replay::{ExportOptions, McapCompression, ParquetOptions, PartitionKey};
use pyo3::prelude::*;

use crate::convert::{InvalidInput, replay_error, to_py};
use crate::read::query;

/// Writes the events a query selects to `path` in `format` (`parquet`, `jsonl` or
/// `mcap`) and `path.manifest.json` beside it; returns the manifest as
/// `blackbox export --json` prints it.
#[pyfunction]
#[pyo3(signature = (dir, path, format="parquet", since=None, until=None, kind=None, *, from_seq=None, to_seq=None, include_unweighted=false, salvage=false, partition=None, summaries=None, compression=None, key_file=None))]
#[allow(clippy::too_many_arguments)]
pub fn export<'py>(
    py: Python<'py>,
    dir: PathBuf,
    path: PathBuf,
    format: &str,
    since: Option<&Bound<'_, PyAny>>,
    until: Option<&Bound<'_, PyAny>>,
    kind: Option<&Bound<'_, PyAny>>,
    from_seq: Option<u64>,
    to_seq: Option<u64>,
    include_unweighted: bool,
    salvage: bool,
    partition: Option<&str>,
    summaries: Option<PathBuf>,
    compression: Option<&str>,
    key_file: Option<PathBuf>,
) -> PyResult<Bound<'py, PyAny>> {
    if path
        .to_str()
        .is_some_and(|p| p.starts_with("s3://") || p.starts_with("file://"))
    {
        return Err(InvalidInput::new_err(format!(
            "{} is a URL: an export to a data lake is `blackbox export --partition robot,... --out URL`; here, give a local path",
            path.display()
        )));
    }
    let format = match format {
        "parquet" | "jsonl" | "mcap" => format,
        other => {
            return Err(InvalidInput::new_err(format!(
                "format {other:?} is not one of \"parquet\", \"jsonl\", \"mcap\""
            )));
        }
    };
    if format != "parquet" && (partition.is_some() || summaries.is_some()) {
        return Err(InvalidInput::new_err(
            "partition and summaries are Parquet options: give format=\"parquet\"",
        ));
    }
    // The robot's level needs the robot's name: `blackbox export --partition robot`.
    let partition = match partition {
        None => Vec::new(),
        Some(text) => {
            let keys: Option<Vec<PartitionKey>> = text
                .split(',')
                .map(|k| PartitionKey::from_name(k.trim()).filter(|k| *k != PartitionKey::Robot))
                .collect();
            match keys {
                Some(keys) if !keys.iter().enumerate().any(|(i, k)| keys[..i].contains(k)) => keys,
                _ => {
                    return Err(InvalidInput::new_err(format!(
                        "partition {text:?} is not one a Parquet export knows: give \"kind\", \"date\", \"date,kind\" or \"kind,date\""
                    )));
                }
            }
        }
    };
    let compression = match (format, compression) {
        (_, None) | ("mcap", Some("zstd")) => McapCompression::Zstd,
        ("mcap", Some("lz4")) => McapCompression::Lz4,
        ("mcap", Some("none")) => McapCompression::None,
        ("mcap", Some(other)) => {
            return Err(InvalidInput::new_err(format!(
                "compression {other:?} is not one of \"zstd\", \"lz4\", \"none\""
            )));
        }
        (_, Some(_)) => {
            return Err(InvalidInput::new_err(
                "compression is an MCAP option (Parquet pages are always zstd, JSON lines never compressed): give format=\"mcap\"",
            ));
        }
    };
    let q = query(since, until, kind, None, from_seq, to_seq, key_file)?;
    let options = ExportOptions {
        include_unweighted,
        salvage,
    };
    let manifest = py
        .detach(|| {
            if !salvage {
                blackbox_replay::open_log_dir(&dir)?;
            }
            let mut progress = |_seq: u64| {};
            match format {
                "mcap" => blackbox_replay::export_mcap(
                    &dir,
                    &q,
                    &path,
                    &options,
                    compression,
                    &mut progress,
                ),
                "jsonl" => blackbox_replay::export_jsonl(&dir, &q, &path, &options, &mut progress),
                _ => {
                    let parquet = ParquetOptions {
                        partition,
                        robot: None,
                        summaries,
                    };
                    blackbox_replay::export_parquet(
                        &dir,
                        &q,
                        &path,
                        &options,
                        &parquet,
                        &mut progress,
                    )
                }
            }
        })
        .map_err(|e| replay_error(&e))?;
    to_py(py, &manifest.to_json())
}
