//! The Parquet encoding: one row per event in typed columns (GUIDE.md "Parquet"), in one file or a hive-style directory with one file per kind, and the
//! summary records in a file of their own.
//!
//! The value columns are known before the first row: the weights pass, which reads the
//! log up to the digest before any row is written, also gathers the names of the values
//! each kind's events carry; the file has one column per name carried by a selected
//! kind.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::builder::{
    BinaryBuilder, FixedSizeBinaryBuilder, Float64Builder, StringBuilder, StringDictionaryBuilder,
    TimestampNanosecondBuilder, UInt64Builder,
};
use arrow_array::types::Int32Type;
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema, SchemaRef, TimeUnit};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use serde_json::Value;

use super::partition::{PartitionDir, PartitionKey, escape, utc_date};
use super::{ExportOptions, Hashing, Row, RowPayload, RowSink, export_rows, export_upto};
use crate::error::{Error, Result};
use crate::manifest::{ExportFormat, ExportManifest, ExportedFile};
use crate::output::AtomicFile;
use crate::query::Query;

/// What a Parquet export writes beyond the events of a query.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ParquetOptions {
    /// Write a hive-style directory split by these keys, in this order
    /// (`OUT/robot=<name>/date=<YYYY-MM-DD>/kind=<kind>/part-<seq>.parquet`), instead
    /// of one file; each file is named by the seq of its first row. Empty: one file.
    pub partition: Vec<PartitionKey>,
    /// The robot's name, the value of the [`PartitionKey::Robot`] level.
    pub robot: Option<String>,
    /// Also write the summary records the query selects to this Parquet file.
    pub summaries: Option<PathBuf>,
}

/// Refuses a summaries file that would overwrite the events file, its manifest, or lie
/// inside the partition directory.
fn summaries_apart(summaries: &Path, out: &Path, partitioned: bool) -> Result<()> {
    let absolute = |p: &Path| std::path::absolute(p).unwrap_or_else(|_| p.to_owned());
    let (s, o) = (absolute(summaries), absolute(out));
    let mut manifest = o.clone().into_os_string();
    manifest.push(".manifest.json");
    if s == o || s == Path::new(&manifest) || (partitioned && s.starts_with(&o)) {
        return Err(Error::UnsafeOutput {
            path: summaries.to_owned(),
            reason: format!(
                "as the summaries file it would overwrite the export {} or its manifest: name another file",
                out.display()
            ),
        });
    }
    Ok(())
}

/// The most files a partitioned export keeps open at once (a file descriptor and a
/// batch of column builders each); past it, the least recently used is finished.
const OPEN_FILES_MAX: usize = 64;

/// Rows a batch collects before it is handed to the encoder.
const BATCH_ROWS: usize = 8192;

/// A row group closes at this many rows, or at [`ROW_GROUP_BYTES`] of encoded data,
/// whichever comes first: small enough for a reader to skip by its statistics, large
/// enough to compress well.
const ROW_GROUP_ROWS: usize = 1 << 20;

/// See [`ROW_GROUP_ROWS`].
const ROW_GROUP_BYTES: usize = 64 << 20;

/// The zstd level of the pages: zstd's default, fast enough to keep up with the read.
const ZSTD_LEVEL: i32 = 3;

/// The name of the timezone of every timestamp column.
pub(crate) const UTC: &str = "UTC";

/// Exports the events `query` selects from the log in `dir` to `out` as Parquet (one
/// row per event; GUIDE.md "Parquet"), with their export weights, as
/// [`export_jsonl`](crate::export_jsonl) does for JSONL: the same rows, read up to the
/// log's digest, and a manifest beside the output (`OUT.manifest.json`) that lists
/// every file written with its rows and blake3.
///
/// With [`ParquetOptions::partition`], `out` is a directory (absent or empty)
/// that appears whole or not at all: it is written under a temporary name beside it
/// and renamed into place.
///
/// # Errors
///
/// As [`export_jsonl`](crate::export_jsonl); [`Error::UnsafeOutput`] for a
/// partition directory that exists and is not empty, or a summaries file that would
/// overwrite the export or its manifest; [`Error::Unexportable`] for a
/// time Parquet's timestamps cannot hold (after the year 2262) or an encoder failure;
/// [`Error::Unexportable`] for a partition that repeats a key, or names the robot
/// without [`ParquetOptions::robot`].
pub fn export_parquet(
    dir: impl AsRef<Path>,
    query: &Query,
    out: &Path,
    options: &ExportOptions,
    parquet: &ParquetOptions,
    progress: &mut dyn FnMut(u64),
) -> Result<ExportManifest> {
    let dir = dir.as_ref();
    check_partition(parquet, out)?;
    if let Some(summaries) = &parquet.summaries {
        summaries_apart(summaries, out, !parquet.partition.is_empty())?;
    }
    let mut written = write(
        dir,
        query,
        out,
        options,
        parquet,
        Naming::FirstSeq,
        &mut |sink| export_rows(dir, query, options, sink, progress),
    )?;
    let manifest_file = super::write_manifest(&mut written.manifest, out)?;
    // The data first: between the renames, the new data sits beside the old manifest,
    // which no longer checks.
    let manifest = written.commit()?;
    manifest_file.commit()?;
    Ok(manifest)
}

/// Refuses a partition that repeats a key, or has a robot level and no robot's name.
fn check_partition(parquet: &ParquetOptions, out: &Path) -> Result<()> {
    let refuse = |reason: String| Error::Unexportable {
        path: out.to_owned(),
        reason,
    };
    for (i, key) in parquet.partition.iter().enumerate() {
        if parquet.partition[..i].contains(key) {
            return Err(refuse(format!("the partition names {} twice", key.name())));
        }
    }
    let by_robot = parquet.partition.contains(&PartitionKey::Robot);
    match parquet.robot.as_deref() {
        None if by_robot => Err(refuse(
            "a partition by robot needs the robot's name".to_owned(),
        )),
        Some("") if by_robot => Err(refuse("the robot's name is empty".to_owned())),
        _ => Ok(()),
    }
}

/// Writes the export as the manifest `m` describes it again, up to `digest`, into a
/// temporary directory beside the manifest, and returns its manifest, after checking
/// that its summaries file (if the export has one) is the one listed.
pub(crate) fn derive_again(
    dir: &Path,
    query: &Query,
    options: &ExportOptions,
    m: &Value,
    manifest_file: &Path,
    digest: Option<blackbox::Digest>,
) -> Result<ExportManifest> {
    let beside = match manifest_file.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let temp = tempfile::Builder::new()
        .prefix(".blackbox-check-")
        .tempdir_in(beside)
        .map_err(|source| Error::Io {
            op: "create a temporary directory beside",
            path: manifest_file.to_owned(),
            source,
        })?;
    let files = m["files"].as_array().cloned().unwrap_or_default();
    let listed_summaries = files.iter().find(|f| f["role"] == "summaries");
    let parquet = ParquetOptions {
        partition: listed_partition(m)?,
        robot: m["parquet"]["robot"].as_str().map(str::to_owned),
        summaries: listed_summaries.map(|_| temp.path().join("summaries.parquet")),
    };
    let out = temp.path().join("events");
    // Exports before files were named by their first seq named each kind's `part-0`.
    let naming = if m["parquet"]["partition"] == "kind" {
        Naming::PartZero
    } else {
        Naming::FirstSeq
    };
    let written = write(dir, query, &out, options, &parquet, naming, &mut |sink| {
        export_upto(dir, query, options, sink, &mut |_| {}, digest)
    })?;
    if let Some(listed) = listed_summaries {
        let again = written
            .manifest
            .files
            .iter()
            .find(|f| f.role == "summaries");
        let listed_hash = listed["blake3"].as_str().unwrap_or("none");
        let again_hash = again.map(|f| crate::hex(&f.blake3)).unwrap_or_default();
        if again_hash != listed_hash {
            return Err(Error::ExportChanged {
                file: PathBuf::from(listed["path"].as_str().unwrap_or("summaries")),
                what: format!(
                    "exporting its summaries from {} up to its digest again gives blake3 {again_hash}, not the listed {listed_hash}",
                    dir.display()
                ),
            });
        }
    }
    Ok(written.manifest)
}

/// The partition keys a Parquet export's manifest lists: an array of names, or (as
/// exports before the array wrote it) `"kind"`; none for one file.
pub(crate) fn listed_partition(m: &Value) -> Result<Vec<PartitionKey>> {
    let listed = &m["parquet"]["partition"];
    let unknown = |what: &Value| Error::Manifest {
        path: PathBuf::from(m["file"]["path"].as_str().unwrap_or("the export")),
        reason: format!("its partition {what} is not one this version writes"),
    };
    match listed {
        Value::Null => Ok(Vec::new()),
        Value::String(name) if name == "kind" => Ok(vec![PartitionKey::Kind]),
        Value::Array(names) => names
            .iter()
            .map(|n| {
                n.as_str()
                    .and_then(PartitionKey::from_name)
                    .ok_or_else(|| unknown(n))
            })
            .collect(),
        other => Err(unknown(other)),
    }
}

/// An export written under temporary names, not yet in place.
struct Written {
    manifest: ExportManifest,
    events: Output,
    summaries: Option<AtomicFile>,
}

impl Written {
    /// Renames every file into place; returns the manifest.
    fn commit(self) -> Result<ExportManifest> {
        match self.events {
            Output::File(f) => {
                f.commit()?;
            }
            Output::Directory(d) => {
                d.commit()?;
            }
        }
        if let Some(s) = self.summaries {
            s.commit()?;
        }
        Ok(self.manifest)
    }
}

/// Where the events go: one file, or a directory of one file per kind.
enum Output {
    File(AtomicFile),
    Directory(PartitionDir),
}

/// Writes the events (and summaries) under temporary names; `rows` runs the row source
/// into the sink it is given.
/// How a partition's files are named.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Naming {
    /// `part-<seq of its first row>.parquet`.
    FirstSeq,
    /// `part-0.parquet`, as exports partitioned by kind were named before (one file a
    /// kind): to derive such an export again.
    PartZero,
}

fn write(
    dir: &Path,
    query: &Query,
    out: &Path,
    options: &ExportOptions,
    parquet: &ParquetOptions,
    naming: Naming,
    rows: &mut dyn FnMut(&mut dyn RowSink) -> Result<ExportManifest>,
) -> Result<Written> {
    let mut sink = if parquet.partition.is_empty() {
        let file = AtomicFile::create(out)?;
        let path = file.path().to_owned();
        EventsSink::new(Target::File(None, Some(file), path))
    } else {
        EventsSink::new(Target::Directory(
            PartitionDir::create(out)?,
            Partitioning::new(parquet, naming),
            BTreeMap::new(),
        ))
    };
    let mut manifest = rows(&mut sink)?;
    manifest.format = ExportFormat::Parquet;
    manifest.partition.clone_from(&parquet.partition);
    if parquet.partition.contains(&PartitionKey::Robot) {
        manifest.robot.clone_from(&parquet.robot);
    }
    let (events, files) = sink.finish()?;
    let beside = match &events {
        Output::File(f) => f.path().parent().map(Path::to_owned),
        Output::Directory(d) => d.path().parent().map(Path::to_owned),
    }
    .unwrap_or_default();
    manifest.file = match &events {
        Output::File(f) => f.path().to_owned(),
        Output::Directory(d) => d.path().to_owned(),
    };
    let name = manifest
        .file
        .file_name()
        .map(PathBuf::from)
        .unwrap_or_default();
    let (bytes, blake3) = if parquet.partition.is_empty() {
        files.first().map_or((0, [0; 32]), |f| (f.bytes, f.blake3))
    } else {
        listing_digest(&files)
    };
    manifest.bytes = bytes;
    manifest.blake3 = blake3;
    manifest.files = files
        .into_iter()
        .map(|mut f| {
            f.path = name.join(&f.path);
            f
        })
        .collect();
    if parquet.partition.is_empty() {
        // One file: its path is the output's name.
        for f in &mut manifest.files {
            f.path = name.clone();
        }
    }
    let summaries = match &parquet.summaries {
        Some(path) => {
            let (file, entry) = super::summaries::write(dir, query, options, &manifest, path)?;
            let mut entry = entry;
            entry.path = relative_to(&beside, file.path());
            manifest.files.push(entry);
            Some(file)
        }
        None => None,
    };
    Ok(Written {
        manifest,
        events,
        summaries,
    })
}

/// The path of `file` as the manifest (in `beside`) lists it: relative when it lies in
/// that directory, absolute otherwise.
fn relative_to(beside: &Path, file: &Path) -> PathBuf {
    match file.strip_prefix(beside) {
        Ok(rel) if !rel.as_os_str().is_empty() => rel.to_owned(),
        _ => file.to_owned(),
    }
}

/// The byte count and blake3 of a partitioned export: its files' bytes added up, and
/// the blake3 of its listing, one line `<blake3 hex>  <path under OUT>\n` per file in
/// path order (what `b3sum` prints for the files, sorted).
pub(crate) fn listing_digest(files: &[ExportedFile]) -> (u64, [u8; 32]) {
    let mut sorted: Vec<&ExportedFile> = files.iter().collect();
    sorted.sort_by(|a, b| a.path.cmp(&b.path));
    let mut h = blake3::Hasher::new();
    let mut bytes = 0u64;
    for f in sorted {
        bytes += f.bytes;
        h.update(crate::hex(&f.blake3).as_bytes());
        h.update(b"  ");
        h.update(f.path.to_string_lossy().as_bytes());
        h.update(b"\n");
    }
    (bytes, *h.finalize().as_bytes())
}

/// Where an events sink writes.
enum Target {
    /// One file: its writer once the columns are known, the file until then, and its
    /// path.
    File(Option<Box<FileWriter>>, Option<AtomicFile>, PathBuf),
    /// A partition directory, how rows are split, and a writer per partition (by its
    /// path under the directory).
    Directory(PartitionDir, Partitioning, BTreeMap<String, FileWriter>),
}

/// How a partitioned export finds a row's partition: its keys, and the path of the
/// last row's, kept while the next row's is the same.
struct Partitioning {
    keys: Vec<PartitionKey>,
    /// `robot=<name>`, escaped once.
    robot: String,
    /// The path being built for a row.
    path: String,
    /// The day (since the epoch) whose date `date` holds.
    day: Option<u64>,
    date: String,
    /// Each kind's path segment, escaped once (a row's path is built for every row).
    kinds: HashMap<String, String>,
    naming: Naming,
    /// Rows so far: a writer's `last_row` says how recently it took one.
    rows: u64,
    /// The files closed before the end, to bound the files open at once.
    closed: Vec<ExportedFile>,
}

impl Partitioning {
    fn new(parquet: &ParquetOptions, naming: Naming) -> Partitioning {
        Partitioning {
            keys: parquet.partition.clone(),
            robot: escape(parquet.robot.as_deref().unwrap_or_default()),
            path: String::new(),
            day: None,
            date: String::new(),
            kinds: HashMap::new(),
            naming,
            rows: 0,
            closed: Vec::new(),
        }
    }

    /// Sets `path` to the path under the directory of the partition of an event of
    /// `kind` at `happened_ns`.
    fn path_of(&mut self, kind: &str, happened_ns: u64) {
        use std::fmt::Write as _;
        self.path.clear();
        for key in &self.keys {
            if !self.path.is_empty() {
                self.path.push('/');
            }
            let _ = match key {
                PartitionKey::Robot => write!(self.path, "robot={}", self.robot),
                PartitionKey::Date => {
                    let day = happened_ns / 86_400_000_000_000;
                    if self.day != Some(day) {
                        self.day = Some(day);
                        self.date = utc_date(happened_ns);
                    }
                    write!(self.path, "date={}", self.date)
                }
                PartitionKey::Kind => {
                    if !self.kinds.contains_key(kind) {
                        self.kinds.insert(kind.to_owned(), escape(kind));
                    }
                    write!(self.path, "kind={}", self.kinds[kind])
                }
            };
        }
    }

    /// Closes the file that took a row least recently (a past day's, when rows come in
    /// time order): a later row of its partition starts a file of its own, named by its
    /// seq.
    fn close_least_recent(&mut self, writers: &mut BTreeMap<String, FileWriter>) -> Result<()> {
        let Some(oldest) = writers
            .iter()
            .min_by_key(|(_, w)| w.last_row)
            .map(|(k, _)| k.clone())
        else {
            return Ok(());
        };
        if let Some(w) = writers.remove(&oldest) {
            let (file, entry) = w.close()?;
            file.commit()?;
            self.closed.push(entry);
        }
        Ok(())
    }

    /// Whether the files hold the kind as a column (it is not in their path).
    fn with_kind(&self) -> bool {
        !self.keys.contains(&PartitionKey::Kind)
    }

    fn date(&self) -> Option<String> {
        self.keys
            .contains(&PartitionKey::Date)
            .then(|| self.date.clone())
    }
}

/// The Parquet events encoding: rows into column builders, batches into one or more
/// files.
struct EventsSink {
    target: Target,
    /// The value columns, in schema order, and each name's index.
    value_names: Vec<String>,
    value_index: HashMap<String, usize>,
    /// A value slot per column, reused for each row.
    slots: Vec<Option<f64>>,
    /// Rows since a partition directory's memory was last checked.
    rows_since_check: usize,
}

impl EventsSink {
    fn new(target: Target) -> EventsSink {
        EventsSink {
            target,
            value_names: Vec::new(),
            value_index: HashMap::new(),
            slots: Vec::new(),
            rows_since_check: 0,
        }
    }

    /// Closes every file and returns the output with its files (paths relative to the
    /// output: `<key>=<value>/.../part-<seq>.parquet`; for one file, empty).
    fn finish(self) -> Result<(Output, Vec<ExportedFile>)> {
        match self.target {
            Target::File(writer, file, path) => {
                let writer = match (writer, file) {
                    (Some(w), _) => *w,
                    // No row came: the file has the columns all the same.
                    (None, Some(file)) => {
                        FileWriter::new(file, path, &self.value_names, true, None)?
                    }
                    (None, None) => unreachable!("a file target holds its file or its writer"),
                };
                let (file, mut entry) = writer.close()?;
                entry.path = PathBuf::new();
                Ok((Output::File(file), vec![entry]))
            }
            Target::Directory(partitions, split, writers) => {
                let mut files = split.closed;
                for (_, w) in writers {
                    let (file, entry) = w.close()?;
                    // Renamed into place inside the temporary directory: the directory
                    // appears whole when it is renamed.
                    file.commit()?;
                    files.push(entry);
                }
                Ok((Output::Directory(partitions), files))
            }
        }
    }
}

impl RowSink for EventsSink {
    fn begin(&mut self, value_names: &BTreeSet<String>) -> Result<()> {
        self.value_names = value_names.iter().cloned().collect();
        self.value_index = self
            .value_names
            .iter()
            .enumerate()
            .map(|(i, n)| (n.clone(), i))
            .collect();
        self.slots = vec![None; self.value_names.len()];
        if let Target::File(writer, file, path) = &mut self.target
            && let Some(file) = file.take()
        {
            *writer = Some(Box::new(FileWriter::new(
                file,
                path.clone(),
                &self.value_names,
                true,
                None,
            )?));
        }
        Ok(())
    }

    fn row(&mut self, row: &Row<'_>, weight: f64, hash: [u8; 32]) -> Result<()> {
        let Some((kind, tier, _)) = row.event() else {
            return Ok(());
        };
        self.slots.fill(None);
        let mut unknown = None;
        row.for_each_value(|name, v| match self.value_index.get(name) {
            Some(&i) => self.slots[i] = Some(v),
            None => unknown = Some(name.to_owned()),
        });
        let writer = match &mut self.target {
            Target::File(Some(w), _, _) => w,
            Target::File(None, _, path) => {
                return Err(Error::Unexportable {
                    path: path.clone(),
                    reason: "a row came before the columns were known".to_owned(),
                });
            }
            Target::Directory(partitions, split, writers) => {
                split.path_of(kind, row.happened_ns());
                split.rows += 1;
                match writers.get_mut(split.path.as_str()) {
                    Some(w) => {
                        w.last_row = split.rows;
                        w
                    }
                    None => {
                        // (Files named `part-0` are one a partition: all stay open.)
                        if writers.len() >= OPEN_FILES_MAX && split.naming == Naming::FirstSeq {
                            split.close_least_recent(writers)?;
                        }
                        let first_seq = match split.naming {
                            Naming::FirstSeq => row.seq(),
                            Naming::PartZero => 0,
                        };
                        let (file, rel) = partitions.file_for(&split.path, first_seq)?;
                        let path = file.path().to_owned();
                        let with_kind = split.with_kind();
                        let mut w =
                            FileWriter::new(file, path, &self.value_names, with_kind, Some(rel))?;
                        w.date = split.date();
                        w.last_row = split.rows;
                        writers.entry(split.path.clone()).or_insert(w)
                    }
                }
            }
        };
        if let Some(name) = unknown {
            return Err(Error::Unexportable {
                path: writer.path.clone(),
                reason: format!(
                    "the event at seq {} carries the value {name:?}, which the log read before it does not name",
                    row.seq()
                ),
            });
        }
        writer.push(row, kind, tier.name(), weight, &hash, &self.slots)?;
        writer.rows += 1;
        if writer.kind.is_none() {
            writer.kind = Some(kind.to_owned());
        }
        if let Target::Directory(_, _, writers) = &mut self.target {
            self.rows_since_check += 1;
            if self.rows_since_check >= BATCH_ROWS {
                self.rows_since_check = 0;
                bound_memory(writers)?;
            }
        }
        Ok(())
    }
}

/// Keeps the row groups a partition directory's writers hold in memory under
/// [`ROW_GROUP_BYTES`] in all: each file's row group would otherwise grow to that size,
/// once per kind. The largest are closed first.
fn bound_memory(writers: &mut BTreeMap<String, FileWriter>) -> Result<()> {
    let mut sizes = Vec::with_capacity(writers.len());
    for (kind, w) in writers.iter_mut() {
        w.write_batch()?;
        sizes.push((w.writer.in_progress_size(), kind.clone()));
    }
    let mut total: usize = sizes.iter().map(|(n, _)| n).sum();
    sizes.sort_unstable_by(|a, b| b.cmp(a));
    for (n, kind) in sizes {
        if total <= ROW_GROUP_BYTES {
            break;
        }
        if let Some(w) = writers.get_mut(&kind) {
            w.writer.flush().map_err(|e| encode_error(&w.path, e))?;
        }
        total -= n;
    }
    Ok(())
}

/// The event columns' schema: the fixed columns (`kind` left out of a partition's
/// files, whose path holds it), then one float64 column per value name.
pub(crate) fn events_schema(value_names: &[String], with_kind: bool) -> SchemaRef {
    let ts = DataType::Timestamp(TimeUnit::Nanosecond, Some(UTC.into()));
    let dict = DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8));
    let mut fields = vec![
        Field::new("seq", DataType::UInt64, false),
        Field::new("ts", ts.clone(), false),
        Field::new("written", ts.clone(), false),
    ];
    if with_kind {
        fields.push(Field::new("kind", dict.clone(), false));
    }
    fields.extend([
        Field::new("source", dict.clone(), true),
        Field::new("tier", dict, false),
        Field::new("weight", DataType::Float64, false),
        Field::new("event_time", ts, true),
        Field::new("payload_json", DataType::Utf8, true),
        Field::new("payload_raw", DataType::Binary, true),
        Field::new("hash", DataType::FixedSizeBinary(32), false),
    ]);
    fields.extend(
        value_names
            .iter()
            .map(|n| Field::new(format!("value_{n}"), DataType::Float64, true)),
    );
    Arc::new(Schema::new(fields))
}

/// The writer properties of every file an export writes: zstd pages, row groups split
/// by rows and by size, statistics per page (chunk statistics for the payloads and the
/// hash, which no query ranges over).
pub(crate) fn writer_properties() -> Result<WriterProperties> {
    let level = ZstdLevel::try_new(ZSTD_LEVEL).map_err(|e| Error::Unexportable {
        path: PathBuf::from("-"),
        reason: format!("zstd level {ZSTD_LEVEL}: {e}"),
    })?;
    let chunk_only = |name: &str| {
        (
            parquet::schema::types::ColumnPath::from(name),
            EnabledStatistics::Chunk,
        )
    };
    let mut b = WriterProperties::builder()
        .set_compression(Compression::ZSTD(level))
        .set_max_row_group_row_count(Some(ROW_GROUP_ROWS))
        .set_max_row_group_bytes(Some(ROW_GROUP_BYTES))
        .set_statistics_enabled(EnabledStatistics::Page);
    for (col, stats) in [
        chunk_only("payload_json"),
        chunk_only("payload_raw"),
        chunk_only("hash"),
    ] {
        b = b.set_column_statistics_enabled(col, stats);
    }
    Ok(b.build())
}

/// A nanosecond time as Parquet's timestamp (signed 64-bit nanoseconds): up to the
/// year 2262.
pub(crate) fn timestamp(ns: u64, seq: u64, what: &str, path: &Path) -> Result<i64> {
    i64::try_from(ns).map_err(|_| Error::Unexportable {
        path: path.to_owned(),
        reason: format!(
            "the {what} of seq {seq} ({ns} ns) is after 2262-04-11, beyond Parquet's timestamp(ns)"
        ),
    })
}

/// An encoder failure as an error naming the file.
pub(crate) fn encode_error(path: &Path, e: impl std::fmt::Display) -> Error {
    Error::Unexportable {
        path: path.to_owned(),
        reason: format!("the Parquet encoder failed: {e}"),
    }
}

/// One Parquet file of events being written: the column builders of the batch being
/// collected, and the encoder.
struct FileWriter {
    writer: ArrowWriter<Hashing<AtomicFile>>,
    schema: SchemaRef,
    path: PathBuf,
    /// The path under the partition directory, for a partition's file.
    rel: Option<PathBuf>,
    with_kind: bool,
    rows: u64,
    kind: Option<String>,
    /// The date of a file of a partition by date.
    date: Option<String>,
    /// The partitioning's row count when this file last took a row.
    last_row: u64,
    batch: EventColumns,
}

/// The builders of one batch of event columns.
struct EventColumns {
    len: usize,
    seq: UInt64Builder,
    ts: TimestampNanosecondBuilder,
    written: TimestampNanosecondBuilder,
    kind: StringDictionaryBuilder<Int32Type>,
    source: StringDictionaryBuilder<Int32Type>,
    tier: StringDictionaryBuilder<Int32Type>,
    weight: Float64Builder,
    event_time: TimestampNanosecondBuilder,
    payload_json: StringBuilder,
    payload_raw: BinaryBuilder,
    hash: FixedSizeBinaryBuilder,
    values: Vec<Float64Builder>,
}

impl EventColumns {
    fn new(values: usize) -> EventColumns {
        let ts = || TimestampNanosecondBuilder::with_capacity(BATCH_ROWS).with_timezone(UTC);
        EventColumns {
            len: 0,
            seq: UInt64Builder::with_capacity(BATCH_ROWS),
            ts: ts(),
            written: ts(),
            kind: StringDictionaryBuilder::new(),
            source: StringDictionaryBuilder::new(),
            tier: StringDictionaryBuilder::new(),
            weight: Float64Builder::with_capacity(BATCH_ROWS),
            event_time: ts(),
            payload_json: StringBuilder::new(),
            payload_raw: BinaryBuilder::new(),
            hash: FixedSizeBinaryBuilder::with_capacity(BATCH_ROWS, 32),
            values: (0..values)
                .map(|_| Float64Builder::with_capacity(BATCH_ROWS))
                .collect(),
        }
    }

    /// The batch's columns in schema order; the builders start over.
    fn finish(&mut self, with_kind: bool) -> Vec<ArrayRef> {
        self.len = 0;
        let mut cols: Vec<ArrayRef> = vec![
            Arc::new(self.seq.finish()),
            Arc::new(self.ts.finish()),
            Arc::new(self.written.finish()),
        ];
        let kind = self.kind.finish();
        if with_kind {
            cols.push(Arc::new(kind));
        }
        cols.push(Arc::new(self.source.finish()));
        cols.push(Arc::new(self.tier.finish()));
        cols.push(Arc::new(self.weight.finish()));
        cols.push(Arc::new(self.event_time.finish()));
        cols.push(Arc::new(self.payload_json.finish()));
        cols.push(Arc::new(self.payload_raw.finish()));
        cols.push(Arc::new(self.hash.finish()));
        for v in &mut self.values {
            cols.push(Arc::new(v.finish()));
        }
        cols
    }
}

impl FileWriter {
    fn new(
        file: AtomicFile,
        path: PathBuf,
        value_names: &[String],
        with_kind: bool,
        rel: Option<PathBuf>,
    ) -> Result<FileWriter> {
        let schema = events_schema(value_names, with_kind);
        let writer = ArrowWriter::try_new(
            Hashing::new(file),
            schema.clone(),
            Some(writer_properties()?),
        )
        .map_err(|e| encode_error(&path, e))?;
        Ok(FileWriter {
            writer,
            schema,
            path,
            rel,
            with_kind,
            rows: 0,
            kind: None,
            date: None,
            last_row: 0,
            batch: EventColumns::new(value_names.len()),
        })
    }

    fn push(
        &mut self,
        row: &Row<'_>,
        kind: &str,
        tier: &str,
        weight: f64,
        hash: &[u8; 32],
        values: &[Option<f64>],
    ) -> Result<()> {
        let seq = row.seq();
        let b = &mut self.batch;
        b.seq.append_value(seq);
        b.ts.append_value(timestamp(row.happened_ns(), seq, "time", &self.path)?);
        b.written
            .append_value(timestamp(row.written_ns(), seq, "write time", &self.path)?);
        b.kind.append_value(kind);
        b.source.append_option(row.source());
        b.tier.append_value(tier);
        b.weight.append_value(weight);
        match row.event_time_ns() {
            Some(t) => b
                .event_time
                .append_value(timestamp(t, seq, "event time", &self.path)?),
            None => b.event_time.append_null(),
        }
        match row.payload() {
            RowPayload::None => {
                b.payload_json.append_null();
                b.payload_raw.append_null();
            }
            RowPayload::Json(text) => {
                b.payload_json.append_value(text);
                b.payload_raw.append_null();
            }
            RowPayload::Raw(bytes) => {
                b.payload_json.append_null();
                b.payload_raw.append_value(bytes);
            }
        }
        b.hash
            .append_value(hash)
            .map_err(|e| encode_error(&self.path, e))?;
        for (builder, v) in b.values.iter_mut().zip(values) {
            builder.append_option(*v);
        }
        b.len += 1;
        if b.len >= BATCH_ROWS {
            self.write_batch()?;
        }
        Ok(())
    }

    /// Hands the collected batch to the encoder.
    fn write_batch(&mut self) -> Result<()> {
        if self.batch.len == 0 {
            return Ok(());
        }
        let cols = self.batch.finish(self.with_kind);
        let batch = RecordBatch::try_new(self.schema.clone(), cols)
            .map_err(|e| encode_error(&self.path, e))?;
        self.writer
            .write(&batch)
            .map_err(|e| encode_error(&self.path, e))
    }

    /// Writes the last batch and the footer; returns the file (not yet in place) and
    /// what the manifest says of it.
    fn close(mut self) -> Result<(AtomicFile, ExportedFile)> {
        self.write_batch()?;
        let path = self.path.clone();
        let mut hashing = self
            .writer
            .into_inner()
            .map_err(|e| encode_error(&path, e))?;
        hashing.flush().map_err(|source| Error::Io {
            op: "write",
            path: path.clone(),
            source,
        })?;
        let (bytes, blake3) = hashing.digest();
        Ok((
            hashing.inner,
            ExportedFile {
                path: self.rel.unwrap_or_default(),
                role: "events",
                kind: if self.with_kind { None } else { self.kind },
                date: self.date,
                rows: self.rows,
                bytes,
                blake3,
            },
        ))
    }
}
