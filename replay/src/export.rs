//! Export for training data: JSONL, one event a line, and a manifest beside it.

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use blackbox::log::ReaderOptions;
use blackbox::{Digest, LogReader};
use serde_json::{Value, json};

use crate::decode::RecordType;
use crate::error::{Error, Result};
use crate::inputs::open_log_dir;
use crate::json::{hex, to_json};
use crate::output::AtomicFile;
use crate::query::Query;
use crate::replay::Replay;
use crate::time::format_time;

/// What [`export_jsonl`] wrote: the manifest, also written beside the data file as
/// `FILE.manifest.json`.
#[derive(Debug, Clone, PartialEq)]
pub struct ExportManifest {
    /// The data file.
    pub file: PathBuf,
    /// The manifest file (`FILE.manifest.json`).
    pub manifest_file: PathBuf,
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
    /// Events written.
    pub count: u64,
    /// Seq of the first event written.
    pub first_seq: Option<u64>,
    /// Seq of the last event written.
    pub last_seq: Option<u64>,
    /// Content hash of the first event written.
    pub first_hash: Option<[u8; 32]>,
    /// Content hash of the last event written.
    pub last_hash: Option<[u8; 32]>,
    /// The log's digest when the export started; the export reads no record past it,
    /// so the digest proves the prefix every exported row came from.
    pub log_digest: Option<Digest>,
    /// When the export ran (ns since the epoch).
    pub created_ns: u64,
}

impl ExportManifest {
    /// The manifest as JSON: `format`, `file`, `created_at`, `range` (`since`, `until`,
    /// `since_ns`, `until_ns`, `from_seq`, `to_seq`), `filters` (`kinds`, `types`),
    /// `count`, `first_seq`, `last_seq`, `first_hash`, `last_hash` and `log_digest`
    /// (`SEQ:HASH`, as `blackbox digest` prints it).
    pub fn to_json(&self) -> Value {
        json!({
            "format": "jsonl",
            "file": self.file.display().to_string(),
            "created_at": format_time(self.created_ns),
            "range": {
                "since": self.since_ns.map(format_time),
                "until": self.until_ns.map(format_time),
                "since_ns": self.since_ns,
                "until_ns": self.until_ns,
                "from_seq": self.from_seq,
                "to_seq": self.to_seq,
            },
            "filters": {
                "kinds": self.kinds,
                "types": [RecordType::Event.name()],
            },
            "count": self.count,
            "first_seq": self.first_seq,
            "last_seq": self.last_seq,
            "first_hash": self.first_hash.map(|h| hex(&h)),
            "last_hash": self.last_hash.map(|h| hex(&h)),
            "log_digest": self.log_digest.map(|d| d.to_string()),
        })
    }
}

/// The manifest's path for a data file: `FILE.manifest.json`.
pub(crate) fn manifest_path(out: &Path) -> PathBuf {
    let mut name = out.as_os_str().to_owned();
    name.push(".manifest.json");
    PathBuf::from(name)
}

/// Exports the events `query` selects (whatever its record types) from the log in
/// `dir` to `out` as JSONL, one event a line as [`to_json`] renders it (seq, ts,
/// ts_ns, kind, source, payload, values, weight, tier, hash, ...), and writes the
/// manifest beside it as `FILE.manifest.json`.
///
/// The log's digest is taken first and the export reads no record past it, so the
/// manifest's digest covers every row, also while a writer appends. `out` may not lie
/// inside a log directory nor name anything but a regular file
/// ([`check_output`](crate::check_output)); each file is written under a temporary
/// name and renamed into place when complete, so a failed export leaves no partial
/// file. `progress` is called with the seq of each event written.
///
/// # Errors
///
/// [`Error::UnsafeOutput`]; as [`Replay::open`]; damage or a record that does not
/// decode in the range; I/O errors writing either file.
pub fn export_jsonl(
    dir: impl AsRef<Path>,
    query: &Query,
    out: &Path,
    progress: &mut dyn FnMut(u64),
) -> Result<ExportManifest> {
    let manifest_out = manifest_path(out);
    let mut data = AtomicFile::create(out)?;
    let mut manifest_file = AtomicFile::create(&manifest_out)?;
    let mut manifest = export_rows(dir.as_ref(), query, data.writer(), progress)?;
    manifest.file = data.path().to_owned();
    manifest.manifest_file = manifest_file.path().to_owned();
    let mut text = serde_json::to_vec_pretty(&manifest.to_json())
        .map_err(|e| io("write manifest", &manifest.manifest_file, e.into()))?;
    text.push(b'\n');
    manifest_file
        .writer()
        .write_all(&text)
        .map_err(|e| io("write manifest", &manifest.manifest_file, e))?;
    // The data first: between the two renames, the new data sits beside the old
    // manifest, which no longer checks: a mismatch is seen, never a silent one.
    data.commit()?;
    manifest_file.commit()?;
    Ok(manifest)
}

/// Exports as [`export_jsonl`] does, into `out` (stdout, a pipe), without a manifest
/// file: the manifest is returned, with `file` and `manifest_file` empty.
///
/// # Errors
///
/// As [`export_jsonl`], and the errors of `out`.
pub fn export_jsonl_to(
    dir: impl AsRef<Path>,
    query: &Query,
    out: &mut dyn Write,
    progress: &mut dyn FnMut(u64),
) -> Result<ExportManifest> {
    let mut w = BufWriter::new(out);
    let manifest = export_rows(dir.as_ref(), query, &mut w, progress)?;
    w.flush()
        .map_err(|e| io("write export to", Path::new("-"), e))?;
    Ok(manifest)
}

fn export_rows(
    dir: &Path,
    query: &Query,
    w: &mut dyn Write,
    progress: &mut dyn FnMut(u64),
) -> Result<ExportManifest> {
    open_log_dir(dir)?;
    let reader = LogReader::open_with(
        dir,
        ReaderOptions {
            key: query.chain_key().cloned(),
        },
    )?;
    let log_digest = reader.digest()?;
    let mut manifest = ExportManifest {
        file: PathBuf::new(),
        manifest_file: PathBuf::new(),
        since_ns: query.since_bound(),
        until_ns: query.until_bound(),
        from_seq: query.from_seq_bound(),
        to_seq: query.to_seq_bound(),
        kinds: query.kind_globs().to_vec(),
        count: 0,
        first_seq: None,
        last_seq: None,
        first_hash: None,
        last_hash: None,
        log_digest,
        created_ns: now_ns(),
    };
    let target = Path::new("export file");
    if let Some(digest) = log_digest {
        let bound = query
            .to_seq_bound()
            .map_or(digest.seq, |s| s.min(digest.seq));
        let q = query.clone().types([RecordType::Event]).to_seq(bound);
        for r in Replay::open(dir, &q)? {
            let r = r?;
            serde_json::to_writer(&mut *w, &to_json(&r))
                .map_err(|e| io("write", target, e.into()))?;
            w.write_all(b"\n").map_err(|e| io("write", target, e))?;
            manifest.count += 1;
            if manifest.first_seq.is_none() {
                manifest.first_seq = Some(r.seq);
                manifest.first_hash = Some(r.hash);
            }
            manifest.last_seq = Some(r.seq);
            manifest.last_hash = Some(r.hash);
            progress(r.seq);
        }
    }
    Ok(manifest)
}

fn io(op: &'static str, path: &Path, source: std::io::Error) -> Error {
    Error::Io {
        op,
        path: path.to_owned(),
        source,
    }
}

fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}
