//! The export manifest: what an exported file holds and where it came from, written
//! beside it as `FILE.manifest.json`, and the check that a file still is what its
//! manifest says.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use blackbox::Digest;
use serde_json::{Map, Value, json};

use crate::error::{Error, Result};
use crate::export::PartitionKey;
use crate::json::{counters_json, hex};
use crate::time::format_time;
use crate::weights::{RangeAccounting, Unreconciled};

/// The manifest format's version, in its `manifest_version` field.
pub const MANIFEST_VERSION: u64 = 1;

/// An export's encoding.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ExportFormat {
    /// JSON lines ([`export_jsonl`](crate::export_jsonl)).
    #[default]
    Jsonl,
    /// Parquet ([`export_parquet`](crate::export_parquet)).
    Parquet,
    /// MCAP ([`export_mcap`](crate::export_mcap)), its chunks compressed so.
    Mcap(crate::McapCompression),
}

impl ExportFormat {
    /// The name the manifest's `format` field gives.
    pub fn name(self) -> &'static str {
        match self {
            ExportFormat::Jsonl => "jsonl",
            ExportFormat::Parquet => "parquet",
            ExportFormat::Mcap(_) => "mcap",
        }
    }
}

/// One file an export wrote, as its manifest's `files` list describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportedFile {
    /// Its path: relative to the manifest's directory when it lies there, else absolute.
    pub path: PathBuf,
    /// `events` or `summaries`.
    pub role: &'static str,
    /// The kind of a partition's file (a partition by kind).
    pub kind: Option<String>,
    /// The UTC date of a partition's file (a partition by date), `YYYY-MM-DD`.
    pub date: Option<String>,
    /// Rows.
    pub rows: u64,
    /// Bytes.
    pub bytes: u64,
    /// blake3 of its bytes.
    pub blake3: [u8; 32],
}

/// What [`export_jsonl`](crate::export_jsonl) or
/// [`export_parquet`](crate::export_parquet) wrote, and what [`check_export`] compares
/// an export against.
#[derive(Debug, Clone, PartialEq)]
pub struct ExportManifest {
    /// The encoding.
    pub format: ExportFormat,
    /// What the events' directory is split by (Parquet); empty for one file.
    pub partition: Vec<PartitionKey>,
    /// The robot's name, for a partition by robot.
    pub robot: Option<String>,
    /// Every file written (Parquet: the events' file or files, and the summaries');
    /// empty for JSONL, whose one file is `file`.
    pub files: Vec<ExportedFile>,
    /// The data file, or the partition directory (empty for an export to a stream).
    pub file: PathBuf,
    /// The manifest file, `FILE.manifest.json` (empty for an export to a stream).
    pub manifest_file: PathBuf,
    /// The log directory, as given.
    pub log_dir: PathBuf,
    /// The query's bounds and kind globs, as given.
    pub since_ns: Option<u64>,
    /// See `since_ns`.
    pub until_ns: Option<u64>,
    /// See `since_ns`.
    pub from_seq: Option<u64>,
    /// See `since_ns`.
    pub to_seq: Option<u64>,
    /// See `since_ns`.
    pub kinds: Vec<String>,
    /// Whether the events of summarized and dropped kinds were exported too.
    pub include_unweighted: bool,
    /// Records written besides events (an MCAP export's summaries, incidents,
    /// knowledge-base commits and accounting records; none in the other encodings).
    pub records: u64,
    /// Event rows written.
    pub rows: u64,
    /// Bytes of the events written (a partition directory: of all its files).
    pub bytes: u64,
    /// blake3 of the bytes of the events written (a partition directory: of its
    /// listing, GUIDE.md "Parquet").
    pub blake3: [u8; 32],
    /// Seq of the first row.
    pub first_seq: Option<u64>,
    /// Seq of the last row.
    pub last_seq: Option<u64>,
    /// Content hash of the first row's record.
    pub first_hash: Option<[u8; 32]>,
    /// Content hash of the last row's record.
    pub last_hash: Option<[u8; 32]>,
    /// Per kind: the rows exported and the sum of their weights.
    pub per_kind: BTreeMap<String, KindRows>,
    /// Kinds left out: their rows in the range and why.
    pub excluded: BTreeMap<String, Excluded>,
    /// The accounting of the exported range.
    pub accounting: RangeAccounting,
    /// Intervals whose accounting disagrees with the log's rows (their sample rows keep
    /// nominal weights).
    pub unreconciled: Vec<Unreconciled>,
    /// The last accounting record: rows after it keep nominal weights.
    pub last_accounting_seq: Option<u64>,
    /// Per kind, sampled-out events that no row stands for (no sample row came after
    /// them).
    pub unrepresented: BTreeMap<String, u64>,
    /// The retention policies in force over the rows, in log order: (seq of the policy
    /// record, its TOML text), from the one in force at the first row to the one at the
    /// last, a new entry where the text changes (the seq of the record that changed it;
    /// for the first, the record in force at the first row). Empty without rows.
    pub policies: Vec<(u64, String)>,
    /// Whether the export read around damage ([`ExportOptions::salvage`](crate::ExportOptions)).
    pub salvage: bool,
    /// With `salvage`: each stretch of the log that was lost.
    pub lost: Vec<blackbox::log::Loss>,
    /// With `salvage`: intact records that do not decode (their names were lost), by
    /// seq, and why.
    pub undecodable: Vec<(u64, String)>,
    /// The log's digest when the export started; the export reads no record past it,
    /// so the digest proves the prefix every row came from.
    pub log_digest: Option<Digest>,
    /// Whether every exported row was checked against the hash chain, with the key on a
    /// keyed log (false only for a keyed log read without its key); `rows_chain_checked`
    /// in the JSON. It says nothing of the log outside the rows: a salvage's losses,
    /// where the chain is broken, are in [`lost`](Self::lost).
    pub chain_verified: bool,
    /// When the export ran (ns since the epoch).
    pub created_ns: u64,
}

/// One kind's rows in an export.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct KindRows {
    /// Rows exported.
    pub rows: u64,
    /// The sum of their weights.
    pub weight_sum: f64,
}

/// A kind left out of an export.
#[derive(Debug, Clone, PartialEq)]
pub struct Excluded {
    /// Rows of the range left out.
    pub rows: u64,
    /// Why.
    pub reason: String,
}

impl ExportManifest {
    /// The manifest as JSON (the `FILE.manifest.json` format, ARCHITECTURE.md "The
    /// export manifest").
    pub fn to_json(&self) -> Value {
        let per_kind: Map<String, Value> = self
            .per_kind
            .iter()
            .map(|(k, r)| {
                let mut o = Map::new();
                o.insert("rows".into(), r.rows.into());
                o.insert("weight_sum".into(), r.weight_sum.into());
                if let Some(c) = self.accounting.kinds.get(k) {
                    o.insert("accounting".into(), counters_json(c));
                }
                (k.clone(), Value::Object(o))
            })
            .collect();
        let excluded: Map<String, Value> = self
            .excluded
            .iter()
            .map(|(k, e)| {
                (
                    k.clone(),
                    json!({
                        "rows": e.rows,
                        "reason": e.reason,
                        "accounting": self.accounting.kinds.get(k).map(counters_json),
                    }),
                )
            })
            .collect();
        let accounting: Map<String, Value> = self
            .accounting
            .kinds
            .iter()
            .map(|(k, c)| (k.clone(), counters_json(c)))
            .collect();
        let unreconciled: Vec<Value> = self
            .unreconciled
            .iter()
            .map(|u| {
                json!({
                    "kind": u.kind,
                    "from_seq": u.from_seq,
                    "to_seq": u.to_seq,
                    "rows": u.rows,
                    "accounted": u.accounted,
                })
            })
            .collect();
        let file_name = self
            .file
            .file_name()
            .map(|n| n.to_string_lossy().into_owned());
        let mut m = json!({
            "manifest_version": MANIFEST_VERSION,
            "format": self.format.name(),
            "tool": {"name": "blackbox", "version": env!("CARGO_PKG_VERSION")},
            "created_at": format_time(self.created_ns),
            "file": {
                "path": file_name,
                "rows": self.rows,
                "bytes": self.bytes,
                "blake3": hex(&self.blake3),
            },
            "log": {
                "dir": self.log_dir.display().to_string(),
                "digest": self.log_digest.map(|d| d.to_string()),
                "rows_chain_checked": self.chain_verified,
            },
            "query": {
                "since": self.since_ns.map(format_time),
                "until": self.until_ns.map(format_time),
                "since_ns": self.since_ns,
                "until_ns": self.until_ns,
                "from_seq": self.from_seq,
                "to_seq": self.to_seq,
                "kinds": self.kinds,
                "types": ["event"],
                "include_unweighted": self.include_unweighted,
                "salvage": self.salvage,
            },
            "lost": self.lost.iter().map(crate::salvage::loss_json).collect::<Vec<_>>(),
            "undecodable": self
                .undecodable
                .iter()
                .map(|(seq, why)| json!({"seq": seq, "reason": why}))
                .collect::<Vec<_>>(),
            "policy": self
                .policies
                .iter()
                .map(|(seq, toml)| json!({"from_seq": seq, "toml": toml}))
                .collect::<Vec<_>>(),
            "rows": self.rows,
            "first_seq": self.first_seq,
            "last_seq": self.last_seq,
            "first_hash": self.first_hash.map(|h| hex(&h)),
            "last_hash": self.last_hash.map(|h| hex(&h)),
            "weights": {
                "rule": "per kind, over the whole log, the weights add up to the accounting's kept + sampled_out (seen less overflow and lost); ARCHITECTURE.md \"Export weights\"",
                "last_accounting_seq": self.last_accounting_seq,
                "unreconciled": unreconciled,
                "unrepresented": self.unrepresented,
            },
            "kinds": per_kind,
            "excluded": excluded,
            "accounting": {
                "from_accounting_seq": self.accounting.from_seq,
                "to_accounting_seq": self.accounting.to_seq,
                "kinds": accounting,
            },
        });
        if let ExportFormat::Mcap(c) = self.format {
            m["file"]["messages"] = (self.rows + self.records).into();
            m["file"]["compression"] = c.name().into();
            let mut types = vec!["event"];
            types.extend(crate::export::mcap::EXTRA_TYPES.iter().map(|t| t.name()));
            m["query"]["types"] = types.into();
        }
        if self.format == ExportFormat::Parquet {
            m["parquet"] = json!({
                "partition": if self.partition.is_empty() {
                    Value::Null
                } else {
                    self.partition.iter().map(|k| k.name()).collect::<Vec<_>>().into()
                },
                "robot": self.robot,
            });
            m["files"] = self
                .files
                .iter()
                .map(|f| {
                    json!({
                        "path": f.path.display().to_string(),
                        "role": f.role,
                        "kind": f.kind,
                        "date": f.date,
                        "rows": f.rows,
                        "bytes": f.bytes,
                        "blake3": hex(&f.blake3),
                    })
                })
                .collect();
        }
        m
    }
}

/// The manifest's path for a data file: `FILE.manifest.json`.
pub(crate) fn manifest_path(out: &Path) -> PathBuf {
    let mut name = out.as_os_str().to_owned();
    name.push(".manifest.json");
    PathBuf::from(name)
}

/// The longest row an export writes: a 16 MiB record whose payload JSON prints every
/// byte as a 6-byte escape, with room to spare.
const ROW_BYTES_MAX: u64 = 128 << 20;

/// A manifest is small; a larger file is not one.
const MANIFEST_BYTES_MAX: u64 = 64 << 20;

/// What [`check_export`] found: the file matches its manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckReport {
    /// The data file checked.
    pub file: PathBuf,
    /// The manifest it was checked against.
    pub manifest_file: PathBuf,
    /// Rows.
    pub rows: u64,
    /// Bytes.
    pub bytes: u64,
    /// blake3 of the file.
    pub blake3: [u8; 32],
    /// The log digest the manifest names.
    pub log_digest: Option<String>,
}

/// The data file and manifest `path` names: a manifest (`*.manifest.json`, naming its
/// data file beside it) or a data file (its manifest is `FILE.manifest.json`).
pub(crate) fn resolve_check_paths(path: &Path) -> Result<(PathBuf, PathBuf, Value)> {
    let is_manifest = path
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.ends_with(".manifest.json"));
    let manifest_file = if is_manifest {
        path.to_owned()
    } else {
        manifest_path(path)
    };
    let manifest = read_manifest(&manifest_file)?;
    let file = if is_manifest {
        let name = manifest["file"]["path"].as_str().ok_or_else(|| Error::Manifest {
            path: manifest_file.clone(),
            reason: "it names no data file (an export to stdout): check it against the file with --check FILE".to_owned(),
        })?;
        manifest_file.with_file_name(name)
    } else {
        path.to_owned()
    };
    Ok((file, manifest_file, manifest))
}

fn read_manifest(path: &Path) -> Result<Value> {
    let bad = |reason: String| Error::Manifest {
        path: path.to_owned(),
        reason,
    };
    let f = std::fs::File::open(path).map_err(|source| Error::Io {
        op: "open the manifest",
        path: path.to_owned(),
        source,
    })?;
    let mut text = Vec::new();
    f.take(MANIFEST_BYTES_MAX + 1)
        .read_to_end(&mut text)
        .map_err(|source| Error::Io {
            op: "read the manifest",
            path: path.to_owned(),
            source,
        })?;
    if text.len() as u64 > MANIFEST_BYTES_MAX {
        return Err(bad(format!(
            "it is larger than {MANIFEST_BYTES_MAX} bytes, which no manifest is"
        )));
    }
    let v: Value = serde_json::from_slice(&text).map_err(|e| {
        bad(format!(
            "it is not JSON (at line {}, column {})",
            e.line(),
            e.column()
        ))
    })?;
    if v["manifest_version"].as_u64() != Some(MANIFEST_VERSION)
        || !(v["format"] == "jsonl" || v["format"] == "parquet" || v["format"] == "mcap")
    {
        return Err(bad(format!(
            "it is not a version {MANIFEST_VERSION} manifest of a JSONL, Parquet or MCAP export"
        )));
    }
    Ok(v)
}

/// What a JSONL file holds, read back: what its manifest describes.
#[derive(Debug, Default)]
pub(crate) struct FileSummary {
    pub rows: u64,
    pub bytes: u64,
    pub blake3: [u8; 32],
    pub first: Option<(u64, String)>,
    pub last: Option<(u64, String)>,
    pub per_kind: BTreeMap<String, KindRows>,
    /// The first row that is not an exported event, by number.
    pub bad_row: Option<(u64, String)>,
}

/// Reads a JSONL export: its bytes, hash, rows and per-kind weights.
pub(crate) fn summarize_file(path: &Path) -> Result<FileSummary> {
    use std::io::BufRead;
    let f = std::fs::File::open(path).map_err(|source| Error::Io {
        op: "open",
        path: path.to_owned(),
        source,
    })?;
    let mut r = std::io::BufReader::new(f);
    let mut hasher = blake3::Hasher::new();
    let mut s = FileSummary::default();
    let mut line = Vec::new();
    loop {
        line.clear();
        // A row is bounded by the largest record the log holds; a longer line is read
        // in pieces (and is not a row anyway).
        let n = (&mut r)
            .take(ROW_BYTES_MAX)
            .read_until(b'\n', &mut line)
            .map_err(|source| Error::Io {
                op: "read",
                path: path.to_owned(),
                source,
            })?;
        if n == 0 {
            break;
        }
        hasher.update(&line);
        s.bytes += n as u64;
        if line.last() != Some(&b'\n') {
            // A final line without its newline, or a piece of an overlong one.
            s.bad_row.get_or_insert((
                s.rows + 1,
                "it does not end with a newline or is longer than any row".to_owned(),
            ));
            continue;
        }
        s.rows += 1;
        let row: Option<Value> = serde_json::from_slice(&line).ok();
        let parsed = row.as_ref().and_then(|v| {
            Some((
                v["seq"].as_u64()?,
                v["hash"].as_str()?.to_owned(),
                v["kind"].as_str()?.to_owned(),
                v["weight"].as_f64()?,
            ))
        });
        match parsed {
            Some((seq, hash, kind, weight)) => {
                if s.first.is_none() {
                    s.first = Some((seq, hash.clone()));
                }
                s.last = Some((seq, hash));
                let k = s.per_kind.entry(kind).or_default();
                k.rows += 1;
                k.weight_sum += weight;
            }
            None => {
                s.bad_row.get_or_insert((
                    s.rows,
                    "it is not an exported event (JSON with seq, hash, kind and weight)".to_owned(),
                ));
            }
        }
    }
    s.blake3 = *hasher.finalize().as_bytes();
    Ok(s)
}

/// Checks that the export `path` names (a data file, or its manifest) is what its
/// manifest says: byte count, blake3, rows, first and last record, and each kind's rows
/// and weights.
///
/// # Errors
///
/// [`Error::ExportChanged`] naming the first difference; [`Error::Manifest`] for a
/// manifest that cannot be read as one; [`Error::Io`].
pub fn check_export(path: &Path) -> Result<CheckReport> {
    let (file, manifest_file, m) = resolve_check_paths(path)?;
    if m["format"] == "parquet" {
        return crate::export::check_parquet(file, manifest_file, &m);
    }
    let found = if m["format"] == "mcap" {
        match crate::export::mcap::summarize_mcap(&file) {
            Err(Error::Mcap { offset, reason, .. }) => {
                return Err(Error::ExportChanged {
                    file,
                    what: format!("it no longer reads as MCAP (at byte {offset}): {reason}"),
                });
            }
            other => other?,
        }
    } else {
        summarize_file(&file)?
    };
    let changed = |what: String| Error::ExportChanged {
        file: file.clone(),
        what,
    };
    let expect_u64 = |v: &Value| v.as_u64();
    if Some(found.bytes) != expect_u64(&m["file"]["bytes"]) {
        return Err(changed(format!(
            "it holds {} bytes, its manifest says {}",
            found.bytes, m["file"]["bytes"]
        )));
    }
    if Some(found.rows) != expect_u64(&m["file"]["rows"]) {
        return Err(changed(format!(
            "it holds {} rows, its manifest says {}",
            found.rows, m["file"]["rows"]
        )));
    }
    let hash = hex(&found.blake3);
    if m["file"]["blake3"].as_str() != Some(hash.as_str()) {
        return Err(changed(format!(
            "its blake3 is {hash}, its manifest says {}",
            m["file"]["blake3"].as_str().unwrap_or("none")
        )));
    }
    if let Some((row, why)) = &found.bad_row {
        return Err(changed(format!("row {row}: {why}")));
    }
    let first = found.first.as_ref().map(|(_, h)| Value::from(h.as_str()));
    let last = found.last.as_ref().map(|(_, h)| Value::from(h.as_str()));
    if first.unwrap_or(Value::Null) != m["first_hash"]
        || last.unwrap_or(Value::Null) != m["last_hash"]
    {
        return Err(changed(
            "its first or last row is not the record its manifest names".to_owned(),
        ));
    }
    let kinds = m["kinds"].as_object().cloned().unwrap_or_default();
    for (kind, k) in &found.per_kind {
        let listed = kinds.get(kind);
        let rows = listed.and_then(|v| v["rows"].as_u64());
        let sum = listed.and_then(|v| v["weight_sum"].as_f64());
        if rows != Some(k.rows) || sum.is_none_or(|s| !same_sum(s, k.weight_sum)) {
            return Err(changed(format!(
                "its {kind} rows ({}, weights adding up to {}) are not what its manifest lists",
                k.rows, k.weight_sum
            )));
        }
    }
    if let Some(kind) = kinds.keys().find(|k| !found.per_kind.contains_key(*k)) {
        return Err(changed(format!(
            "it holds no {kind} row, its manifest lists some"
        )));
    }
    Ok(CheckReport {
        file,
        manifest_file,
        rows: found.rows,
        bytes: found.bytes,
        blake3: found.blake3,
        log_digest: m["log"]["digest"].as_str().map(str::to_owned),
    })
}

/// Two sums of the same weights, added in the same order, are equal; JSON's decimal
/// round trip keeps every bit.
fn same_sum(a: f64, b: f64) -> bool {
    a == b || (a - b).abs() <= 1e-9 * a.abs().max(b.abs())
}
