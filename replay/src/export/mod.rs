//! Export for training data: the events a query selects, each with its export weight,
//! in one of the encodings (JSONL, one event a line; Parquet, typed columns), and a
//! manifest beside the output that proves what it holds and where it came from.
//!
//! Everything but the encoding is shared: the rows come from one source (a range read
//! up to the log's digest, or a salvage), weighted by [`Weights`], counted into the
//! manifest; each encoding is a [`RowSink`].

mod hashing;
mod jsonl;
pub(crate) mod mcap;
mod parquet;
mod parquet_check;
mod partition;
mod row;
mod summaries;

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};

use blackbox::LogReader;
use blackbox::log::ReaderOptions;
use serde_json::{Value, json};

use crate::decode::RecordType;

use crate::error::{Error, Result};
use crate::inputs::open_log_dir;
use crate::manifest::{CheckReport, Excluded, ExportManifest, KindRows, manifest_path};
use crate::output::AtomicFile;
use crate::query::{Order, Query};
use crate::replay::Replay;
use crate::salvage::Salvaged;
use crate::weights::Weights;

pub use self::mcap::McapCompression;
pub use self::parquet::{ParquetOptions, export_parquet};
pub(crate) use self::parquet_check::check_parquet;
pub use self::partition::{PartitionKey, escape as partition_value};
pub(crate) use hashing::Hashing;
pub(crate) use row::{Row, RowPayload};

/// How to export, beyond what the [`Query`] selects.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExportOptions {
    /// Also export the events of kinds whose events were summarized or dropped (the
    /// log holds only those written around incidents), each at weight 1. Left out by
    /// default: they are not a sample of their stream, and the manifest says so.
    pub include_unweighted: bool,
    /// Read around damage ([`salvage`](crate::salvage())): every intact event, and the
    /// manifest lists each stretch lost (and has no log digest: a damaged log proves no
    /// prefix).
    pub salvage: bool,
}

/// Where an export's rows go: the encoding. The row source calls [`RowSink::begin`]
/// once, then [`RowSink::row`] for each exported event in log order.
pub(crate) trait RowSink {
    /// Before the first row: the names of the values the rows may carry (every value
    /// name an event of a selected kind carries in the log read).
    fn begin(&mut self, value_names: &BTreeSet<String>) -> Result<()> {
        let _ = value_names;
        Ok(())
    }

    /// One exported event, its export weight and its record's content hash.
    fn row(&mut self, row: &Row<'_>, weight: f64, hash: [u8; 32]) -> Result<()>;

    /// The record types besides events the encoding carries (MCAP's summaries,
    /// incidents, knowledge-base commits and accounting), handed to
    /// [`RowSink::record`] in log order among the events.
    fn extra_types(&self) -> &'static [RecordType] {
        &[]
    }

    /// One record of a type [`RowSink::extra_types`] lists.
    fn record(&mut self, row: &Row<'_>) -> Result<()> {
        let _ = row;
        Ok(())
    }

    /// Before the first row: the manifest so far (the query, the log's digest), for an
    /// encoding that records them in the file.
    fn describe(&mut self, manifest: &ExportManifest) -> Result<()> {
        let _ = manifest;
        Ok(())
    }
}

/// Exports the events `query` selects (whatever its record types) from the log in
/// `dir` to `out` as JSONL, one event a line as [`to_json`](crate::to_json) renders
/// it, with `weight` its export weight (ARCHITECTURE.md "Export weights"), and writes
/// the manifest beside it as `FILE.manifest.json`.
///
/// The log's digest is taken first and the export reads no record past it, so the
/// manifest's digest covers every row, also while a writer appends. `out` may not lie
/// inside a log directory nor name anything but a regular file
/// ([`check_output`](crate::check_output)); each file is written under a temporary
/// name and renamed into place when complete, so a failed export leaves no partial
/// file. `progress` is called with the seq of each event read.
///
/// # Errors
///
/// [`Error::UnsafeOutput`]; as [`Replay::open`]; damage or a record that does not
/// decode; I/O errors writing either file.
pub fn export_jsonl(
    dir: impl AsRef<Path>,
    query: &Query,
    out: &Path,
    options: &ExportOptions,
    progress: &mut dyn FnMut(u64),
) -> Result<ExportManifest> {
    let mut data = AtomicFile::create(out)?;
    let mut sink = jsonl::JsonlSink::new(data.writer());
    let mut manifest = export_rows(dir.as_ref(), query, options, &mut sink, progress)?;
    (manifest.bytes, manifest.blake3) = sink.finish();
    manifest.file = data.path().to_owned();
    let manifest_file = write_manifest(&mut manifest, out)?;
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
    options: &ExportOptions,
    out: &mut dyn Write,
    progress: &mut dyn FnMut(u64),
) -> Result<ExportManifest> {
    let mut w = std::io::BufWriter::new(out);
    let mut sink = jsonl::JsonlSink::new(&mut w);
    let mut manifest = export_rows(dir.as_ref(), query, options, &mut sink, progress)?;
    let stdout = Path::new("-");
    (manifest.bytes, manifest.blake3) = sink.finish();
    w.flush().map_err(|e| io("write export to", stdout, e))?;
    Ok(manifest)
}

/// Exports as [`export_jsonl`] does, as MCAP (GUIDE.md, "Opening an export in
/// Foxglove", gives the layout): besides the
/// events, the summaries, incidents, knowledge-base commits and accounting records the
/// query selects, on channels of their own; chunks compressed with `compression`.
///
/// # Errors
///
/// As [`export_jsonl`].
pub fn export_mcap(
    dir: impl AsRef<Path>,
    query: &Query,
    out: &Path,
    options: &ExportOptions,
    compression: McapCompression,
    progress: &mut dyn FnMut(u64),
) -> Result<ExportManifest> {
    let mut data = AtomicFile::create(out)?;
    let mut sink = mcap::McapSink::new(Hashing::new(data.writer()), compression)?;
    let mut manifest = export_rows(dir.as_ref(), query, options, &mut sink, progress)?;
    (manifest.bytes, manifest.blake3) = sink.finish()?;
    drop(sink);
    manifest.format = crate::manifest::ExportFormat::Mcap(compression);
    manifest.file = data.path().to_owned();
    let manifest_file = write_manifest(&mut manifest, out)?;
    data.commit()?;
    manifest_file.commit()?;
    Ok(manifest)
}

/// Exports as [`export_mcap`] does, into `out` (stdout, a pipe: the MCAP writer never
/// seeks), without a manifest file.
///
/// # Errors
///
/// As [`export_mcap`], and the errors of `out`.
pub fn export_mcap_to(
    dir: impl AsRef<Path>,
    query: &Query,
    options: &ExportOptions,
    compression: McapCompression,
    out: &mut dyn Write,
    progress: &mut dyn FnMut(u64),
) -> Result<ExportManifest> {
    let mut w = std::io::BufWriter::new(out);
    let mut sink = mcap::McapSink::new(Hashing::new(&mut w), compression)?;
    let mut manifest = export_rows(dir.as_ref(), query, options, &mut sink, progress)?;
    (manifest.bytes, manifest.blake3) = sink.finish()?;
    drop(sink);
    manifest.format = crate::manifest::ExportFormat::Mcap(compression);
    w.flush()
        .map_err(|e| io("write export to", Path::new("-"), e))?;
    Ok(manifest)
}

/// Creates the manifest file of the output `out` (`OUT.manifest.json`, under its
/// temporary name) and writes `manifest` into it, its `manifest_file` set.
pub(crate) fn write_manifest(manifest: &mut ExportManifest, out: &Path) -> Result<AtomicFile> {
    let mut file = AtomicFile::create(&manifest_path(out))?;
    manifest.manifest_file = file.path().to_owned();
    let mut text = serde_json::to_vec_pretty(&manifest.to_json())
        .map_err(|e| io("write manifest", &manifest.manifest_file, e.into()))?;
    text.push(b'\n');
    file.writer()
        .write_all(&text)
        .map_err(|e| io("write manifest", &manifest.manifest_file, e))?;
    Ok(file)
}

/// Checks an export as [`check_export`](crate::check_export) does, then derives it
/// again from the log in `dir`: the log must still hold the prefix of the manifest's
/// digest (every checksum and the chain verified), and exporting the manifest's query
/// up to that digest must give the same bytes. This catches a file whose manifest was
/// edited along with it.
///
/// # Errors
///
/// As [`check_export`](crate::check_export); [`Error::ExportChanged`] when the log
/// gives other bytes; the log's errors (damage, a digest it no longer holds).
pub fn check_export_against_log(
    path: &Path,
    dir: &Path,
    key: Option<blackbox::ChainKey>,
) -> Result<CheckReport> {
    let report = crate::manifest::check_export(path)?;
    let (_, manifest_file, m) = crate::manifest::resolve_check_paths(path)?;
    let bad = |reason: &str| Error::Manifest {
        path: manifest_file.clone(),
        reason: reason.to_owned(),
    };
    let digest: Option<blackbox::Digest> = match m["log"]["digest"].as_str() {
        Some(text) => Some(
            text.parse()
                .map_err(|_| bad("its log digest is not SEQ:HASH"))?,
        ),
        None => None,
    };
    let options = ExportOptions {
        include_unweighted: m["query"]["include_unweighted"].as_bool().unwrap_or(false),
        salvage: m["query"]["salvage"].as_bool().unwrap_or(false),
    };
    if !options.salvage {
        open_log_dir(dir)?;
        blackbox_log::verify(dir, key.as_ref(), digest.as_ref())?;
    }
    let q = &m["query"];
    let mut query = Query::new().key(key);
    if let Some(t) = q["since_ns"].as_u64() {
        query = query.since(t);
    }
    if let Some(t) = q["until_ns"].as_u64() {
        query = query.until(t);
    }
    if let Some(s) = q["from_seq"].as_u64() {
        query = query.from_seq(s);
    }
    if let Some(s) = q["to_seq"].as_u64() {
        query = query.to_seq(s);
    }
    for g in q["kinds"].as_array().into_iter().flatten() {
        query = query.kind(g.as_str().ok_or_else(|| bad("a kind glob is not text"))?)?;
    }
    let again = if m["format"] == "parquet" {
        self::parquet::derive_again(dir, &query, &options, &m, &manifest_file, digest)?
    } else if m["format"] == "mcap" {
        let name = m["file"]["compression"].as_str().unwrap_or("");
        let compression = McapCompression::parse(name)
            .ok_or_else(|| bad("its MCAP compression is not zstd, lz4 or none"))?;
        let mut out = std::io::sink();
        let mut sink = mcap::McapSink::new(Hashing::new(&mut out), compression)?;
        let mut again = export_upto(dir, &query, &options, &mut sink, &mut |_| {}, digest)?;
        (again.bytes, again.blake3) = sink.finish()?;
        again
    } else {
        let mut out = std::io::sink();
        let mut sink = jsonl::JsonlSink::new(&mut out);
        let mut again = export_upto(dir, &query, &options, &mut sink, &mut |_| {}, digest)?;
        (again.bytes, again.blake3) = sink.finish();
        again
    };
    // What the manifest says of the log beside the file (per-kind rows and weights,
    // the kinds left out, the accounting, the policies, the losses) must be what the
    // log says again: the data file's own check cannot see an edit of those.
    let derived = again.to_json();
    for key in [
        "kinds",
        "excluded",
        "accounting",
        "policy",
        "weights",
        "lost",
        "undecodable",
        "first_seq",
        "last_seq",
        "first_hash",
        "last_hash",
    ] {
        if derived[key] != m[key] {
            return Err(Error::ExportChanged {
                file: report.file.clone(),
                what: format!(
                    "its manifest's \"{key}\" is not what exporting its query from {} up to its digest again gives",
                    dir.display()
                ),
            });
        }
    }
    let roles = |files: &Value| -> Vec<Value> {
        files
            .as_array()
            .into_iter()
            .flatten()
            .map(|f| json!([f["role"], f["kind"], f["rows"], f["blake3"]]))
            .collect()
    };
    if roles(&derived["files"]) != roles(&m["files"]) {
        return Err(Error::ExportChanged {
            file: report.file.clone(),
            what: format!(
                "its manifest's files are not what exporting its query from {} up to its digest again gives",
                dir.display()
            ),
        });
    }
    if again.blake3 != report.blake3 || again.rows != report.rows {
        return Err(Error::ExportChanged {
            file: report.file.clone(),
            what: format!(
                "exporting its query from {} up to its digest again gives {} rows with blake3 {}, not the file's {} rows with blake3 {}",
                dir.display(),
                again.rows,
                crate::hex(&again.blake3),
                report.rows,
                crate::hex(&report.blake3)
            ),
        });
    }
    Ok(report)
}

/// The export of `query` from the log in `dir` into `sink`, up to the log's digest when
/// the export starts (a salvage: everything intact).
pub(crate) fn export_rows(
    dir: &Path,
    query: &Query,
    options: &ExportOptions,
    sink: &mut dyn RowSink,
    progress: &mut dyn FnMut(u64),
) -> Result<ExportManifest> {
    if !options.salvage {
        open_log_dir(dir)?;
    }
    let reader = LogReader::open_with(
        dir,
        ReaderOptions {
            key: query.chain_key().cloned(),
        },
    )?;
    // A damaged log has no digest to prove a prefix with: a salvage reads it all and
    // lists what it lost instead.
    let digest = if options.salvage {
        None
    } else {
        reader.digest()?
    };
    export_upto(dir, query, options, sink, progress, digest)
}

/// The export of `query` from the records up to `digest`.
pub(crate) fn export_upto(
    dir: &Path,
    query: &Query,
    options: &ExportOptions,
    sink: &mut dyn RowSink,
    progress: &mut dyn FnMut(u64),
    digest: Option<blackbox::Digest>,
) -> Result<ExportManifest> {
    let mut manifest = ExportManifest {
        format: crate::manifest::ExportFormat::Jsonl,
        partition: Vec::new(),
        robot: None,
        files: Vec::new(),
        file: PathBuf::new(),
        manifest_file: PathBuf::new(),
        log_dir: dir.to_owned(),
        since_ns: query.since_bound(),
        until_ns: query.until_bound(),
        from_seq: query.from_seq_bound(),
        to_seq: query.to_seq_bound(),
        kinds: query.kind_globs().to_vec(),
        include_unweighted: options.include_unweighted,
        rows: 0,
        records: 0,
        bytes: 0,
        blake3: [0; 32],
        first_seq: None,
        last_seq: None,
        first_hash: None,
        last_hash: None,
        per_kind: BTreeMap::new(),
        excluded: BTreeMap::new(),
        accounting: Default::default(),
        unreconciled: Vec::new(),
        last_accounting_seq: None,
        unrepresented: BTreeMap::new(),
        policies: Vec::new(),
        lost: Vec::new(),
        undecodable: Vec::new(),
        salvage: options.salvage,
        log_digest: digest,
        chain_verified: true,
        created_ns: now_ns(),
    };
    sink.describe(&manifest)?;
    let types: Vec<RecordType> = std::iter::once(RecordType::Event)
        .chain(sink.extra_types().iter().copied())
        .collect();
    // What the rows come from: a range read up to the digest, or a salvage around
    // damage (whose losses the manifest lists).
    let (weights, mut source) = if options.salvage {
        let weights = Weights::compute_salvaged(dir, query.chain_key().cloned(), query)?;
        let q = query.clone().types(types.iter().copied());
        let s = crate::salvage::salvage(dir, &q)?;
        manifest.chain_verified = s.chain_verified();
        (weights, Rows::Salvage(Box::new(s)))
    } else if let Some(digest) = digest {
        let weights = Weights::compute(dir, query.chain_key().cloned(), digest.seq, query)?;
        let bound = query
            .to_seq_bound()
            .map_or(digest.seq, |s| s.min(digest.seq));
        let q = query
            .clone()
            .types(types.iter().copied())
            .to_seq(bound)
            .order(Order::Log);
        let replay = Replay::open(dir, &q)?;
        manifest.chain_verified = replay.chain_verified();
        (weights, Rows::Replay(Box::new(replay)))
    } else {
        (Weights::default(), Rows::None)
    };
    sink.begin(&weights.value_names(query, options.include_unweighted))?;
    loop {
        // A range read's rows are decoded in place; a salvage's are owned.
        let owned;
        let r = match &mut source {
            Rows::Replay(replay) => match replay.next_view() {
                Some(r) => Row::View(r?),
                None => break,
            },
            Rows::Salvage(salvage) => match salvage.next() {
                Some(Salvaged::Record(r)) => {
                    owned = r;
                    Row::Owned(&owned)
                }
                Some(Salvaged::Lost(loss)) => {
                    manifest.lost.push(loss);
                    continue;
                }
                Some(Salvaged::Undecodable { seq, reason }) => {
                    manifest.undecodable.push((seq, reason));
                    continue;
                }
                None => break,
            },
            Rows::None => break,
        };
        let seq = r.seq();
        progress(seq);
        let Some((kind, tier, recorded_weight)) = r.event() else {
            sink.record(&r)?;
            manifest.records += 1;
            continue;
        };
        let weight = match weights.weight(seq, kind, tier, recorded_weight) {
            Some(w) => w,
            None if options.include_unweighted => 1.0,
            None => {
                match manifest.excluded.get_mut(kind) {
                    Some(x) => x.rows += 1,
                    None => {
                        let reason = unweighted_reason(weights.unweighted().get(kind));
                        manifest
                            .excluded
                            .insert(kind.to_owned(), Excluded { rows: 1, reason });
                    }
                }
                continue;
            }
        };
        let hash = r.hash();
        sink.row(&r, weight, hash)?;
        manifest.rows += 1;
        if manifest.first_seq.is_none() {
            manifest.first_seq = Some(seq);
            manifest.first_hash = Some(hash);
        }
        manifest.last_seq = Some(seq);
        manifest.last_hash = Some(hash);
        match manifest.per_kind.get_mut(kind) {
            Some(k) => {
                k.rows += 1;
                k.weight_sum += weight;
            }
            None => {
                manifest.per_kind.insert(
                    kind.to_owned(),
                    KindRows {
                        rows: 1,
                        weight_sum: weight,
                    },
                );
            }
        }
        // Each segment repeats the policy in its preamble: a new entry only when the
        // text changes.
        if let Some((seq, toml)) = source.policy()
            && manifest.policies.last().is_none_or(|(_, t)| t != toml)
        {
            manifest.policies.push((seq, toml.to_owned()));
        }
    }
    manifest.accounting = weights.range_accounting().clone();
    manifest.unreconciled = weights.unreconciled().to_vec();
    manifest.last_accounting_seq = weights.last_accounting_seq();
    manifest.unrepresented = weights.unrepresented();
    Ok(manifest)
}

/// Where an export's rows come from: a range read, a salvage, or nothing (an empty log).
enum Rows {
    Replay(Box<Replay>),
    Salvage(Box<crate::salvage::Salvage>),
    None,
}

impl Rows {
    /// The policy in force at the last row read.
    fn policy(&self) -> Option<(u64, &str)> {
        match self {
            Rows::Replay(r) => r.policy(),
            Rows::Salvage(s) => s.policy(),
            Rows::None => None,
        }
    }
}

/// Why an unweighted kind's rows are left out.
fn unweighted_reason(c: Option<&blackbox::Counters>) -> String {
    let Some(c) = c else {
        return "its events were summarized or dropped".to_owned();
    };
    let mut what = Vec::new();
    if c.summarized > 0 {
        what.push(format!("{} summarized", c.summarized));
    }
    if c.dropped > 0 {
        what.push(format!("{} dropped", c.dropped));
    }
    format!(
        "of its {} events, {}: the log holds only those written around incidents, which are not a sample of the stream (--include-unweighted exports them at weight 1)",
        c.seen,
        what.join(" and ")
    )
}

pub(crate) fn io(op: &'static str, path: &Path, source: std::io::Error) -> Error {
    Error::Io {
        op,
        path: path.to_owned(),
        source,
    }
}

pub(crate) fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}
