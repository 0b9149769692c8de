//! The check of a Parquet export against its manifest: every file it lists has its
//! bytes, blake3 and rows (read from the file's footer), a partition directory holds
//! no file the manifest does not list, and the events add up to the manifest's totals.

use std::collections::BTreeSet;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::parquet::{listed_partition, listing_digest};
use crate::error::{Error, Result};
use crate::json::hex;
use crate::manifest::{CheckReport, ExportedFile};

/// Checks the Parquet export `file` (a file or a partition directory) against the
/// manifest `m` read from `manifest_file`.
pub(crate) fn check_parquet(
    file: PathBuf,
    manifest_file: PathBuf,
    m: &Value,
) -> Result<CheckReport> {
    let bad = |reason: String| Error::Manifest {
        path: manifest_file.clone(),
        reason,
    };
    let changed = |path: &Path, what: String| Error::ExportChanged {
        file: path.to_owned(),
        what,
    };
    let beside = match manifest_file.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_owned(),
        _ => PathBuf::from("."),
    };
    let name = m["file"]["path"]
        .as_str()
        .ok_or_else(|| bad("it names no data file".to_owned()))?;
    // A partition directory's files lie a level below its last key's:
    // `<key>=<value>/.../part-<seq>.parquet`.
    let depth = listed_partition(m)?.len() + 1;
    let partitioned = depth > 1;
    let listed = m["files"]
        .as_array()
        .ok_or_else(|| bad("it has no list of files".to_owned()))?;
    let mut events = Vec::new();
    for f in listed {
        let entry = listed_file(f).ok_or_else(|| {
            bad(
                "an entry of its list of files lacks its path, role, rows, bytes or blake3"
                    .to_owned(),
            )
        })?;
        let path = beside.join(&entry.path);
        let (bytes, blake3) = hash_file(&path)?;
        if bytes != entry.bytes || blake3 != entry.blake3 {
            return Err(changed(
                &path,
                format!(
                    "it holds {bytes} bytes with blake3 {}, its manifest says {} bytes with blake3 {}",
                    hex(&blake3),
                    entry.bytes,
                    hex(&entry.blake3)
                ),
            ));
        }
        let rows = footer_rows(&path)?;
        if rows != entry.rows {
            return Err(changed(
                &path,
                format!("it holds {rows} rows, its manifest says {}", entry.rows),
            ));
        }
        if entry.role == "events" {
            events.push(entry);
        }
    }
    let (bytes, blake3) = if partitioned {
        let under: Vec<ExportedFile> = events
            .iter()
            .map(|e| {
                let mut e = e.clone();
                e.path = e
                    .path
                    .strip_prefix(name)
                    .map(Path::to_owned)
                    .unwrap_or(e.path);
                e
            })
            .collect();
        let found = files_under(&file, depth)?;
        let listed: BTreeSet<PathBuf> = under.iter().map(|e| e.path.clone()).collect();
        if let Some(extra) = found.difference(&listed).next() {
            return Err(changed(
                &file,
                format!(
                    "it holds {}, which its manifest does not list (a reader would take its rows)",
                    extra.display()
                ),
            ));
        }
        // A partition by kind: each kind's files add up to the kind's rows.
        let kinds = m["kinds"].as_object().cloned().unwrap_or_default();
        let mut per_kind: std::collections::BTreeMap<&str, u64> = Default::default();
        for e in &under {
            if let Some(kind) = e.kind.as_deref() {
                *per_kind.entry(kind).or_default() += e.rows;
            }
        }
        for (kind, rows) in per_kind {
            if kinds.get(kind).and_then(|k| k["rows"].as_u64()) != Some(rows) {
                return Err(changed(
                    &file,
                    format!("its {kind} partition's {rows} rows are not what its manifest lists"),
                ));
            }
        }
        listing_digest(&under)
    } else {
        match events.as_slice() {
            [one] => (one.bytes, one.blake3),
            _ => return Err(bad("it lists other than one events file".to_owned())),
        }
    };
    let rows: u64 = events.iter().map(|e| e.rows).sum();
    if Some(bytes) != m["file"]["bytes"].as_u64()
        || Some(hex(&blake3).as_str()) != m["file"]["blake3"].as_str()
        || Some(rows) != m["file"]["rows"].as_u64()
    {
        return Err(changed(
            &file,
            format!(
                "its files add up to {rows} rows, {bytes} bytes and blake3 {}, not the manifest's totals",
                hex(&blake3)
            ),
        ));
    }
    Ok(CheckReport {
        file,
        manifest_file,
        rows,
        bytes,
        blake3,
        log_digest: m["log"]["digest"].as_str().map(str::to_owned),
    })
}

/// An entry of the manifest's `files`.
fn listed_file(f: &Value) -> Option<ExportedFile> {
    let hash = f["blake3"].as_str()?;
    let mut blake3 = [0u8; 32];
    if hash.len() != 64 {
        return None;
    }
    for (i, b) in blake3.iter_mut().enumerate() {
        *b = u8::from_str_radix(hash.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(ExportedFile {
        path: PathBuf::from(f["path"].as_str()?),
        role: match f["role"].as_str()? {
            "events" => "events",
            "summaries" => "summaries",
            _ => return None,
        },
        kind: f["kind"].as_str().map(str::to_owned),
        date: f["date"].as_str().map(str::to_owned),
        rows: f["rows"].as_u64()?,
        bytes: f["bytes"].as_u64()?,
        blake3,
    })
}

/// A file's byte count and blake3.
fn hash_file(path: &Path) -> Result<(u64, [u8; 32])> {
    let io = |op: &'static str| {
        let path = path.to_owned();
        move |source| Error::Io { op, path, source }
    };
    let mut f = std::fs::File::open(path).map_err(io("open"))?;
    let mut h = blake3::Hasher::new();
    let mut buf = vec![0u8; 1 << 16];
    let mut bytes = 0u64;
    loop {
        let n = f.read(&mut buf).map_err(io("read"))?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
        bytes += n as u64;
    }
    Ok((bytes, *h.finalize().as_bytes()))
}

/// The rows a Parquet file's footer counts.
fn footer_rows(path: &Path) -> Result<u64> {
    use parquet::file::reader::{FileReader, SerializedFileReader};
    let not_parquet = |why: String| Error::ExportChanged {
        file: path.to_owned(),
        what: format!("it is not a readable Parquet file: {why}"),
    };
    let f = std::fs::File::open(path).map_err(|source| Error::Io {
        op: "open",
        path: path.to_owned(),
        source,
    })?;
    let reader = SerializedFileReader::new(f).map_err(|e| not_parquet(e.to_string()))?;
    let rows = reader.metadata().file_metadata().num_rows();
    u64::try_from(rows).map_err(|_| not_parquet(format!("its footer counts {rows} rows")))
}

/// The regular files under a partition directory, relative to it; anything else, or
/// anything deeper than a partition's files, is listed as found too (and so is not
/// what the manifest lists).
fn files_under(dir: &Path, depth_of_files: usize) -> Result<BTreeSet<PathBuf>> {
    let mut found = BTreeSet::new();
    let mut stack = vec![(PathBuf::new(), 0usize)];
    while let Some((rel, depth)) = stack.pop() {
        let here = dir.join(&rel);
        let entries = std::fs::read_dir(&here).map_err(|source| Error::Io {
            op: "list",
            path: here.clone(),
            source,
        })?;
        for entry in entries {
            let entry = entry.map_err(|source| Error::Io {
                op: "list",
                path: here.clone(),
                source,
            })?;
            let path = rel.join(entry.file_name());
            let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
            if is_dir && depth + 1 < depth_of_files {
                stack.push((path, depth + 1));
            } else {
                found.insert(path);
            }
        }
    }
    Ok(found)
}
