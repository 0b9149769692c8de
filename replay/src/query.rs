//! Range reads: a [`Query`], the [`Replay`] iterator over typed records, and [`fold`].

use std::collections::BTreeSet;
use std::ops::Bound;
use std::path::Path;

use blackbox::codec;
use blackbox::log::{ReaderOptions, Records, SegmentEntry};
use blackbox::{ChainKey, LogReader, Seq};
use globset::{GlobSet, GlobSetBuilder};

use crate::decode::{Decoder, Record, RecordType};
use crate::error::{Error, Result};

/// What to read: a seq range, a time range, kind globs and record types. Every bound
/// is inclusive; the conditions combine (a record must meet all of them).
///
/// By default a query selects the whole log and every record type except
/// [`RecordType::Dictionary`] (the dictionary is how ids read, not content; ask for it
/// by type to see it). With kind globs, only records that have a kind (events,
/// summaries, and incidents by their trigger's kind) can match.
#[derive(Debug, Clone, Default)]
pub struct Query {
    from_seq: Option<u64>,
    to_seq: Option<u64>,
    since_ns: Option<u64>,
    until_ns: Option<u64>,
    kinds: Vec<String>,
    kind_set: Option<GlobSet>,
    types: Option<BTreeSet<RecordType>>,
    key: Option<ChainKey>,
}

impl Query {
    /// The whole log, every record type but the dictionary.
    pub fn new() -> Query {
        Query::default()
    }

    /// Records from this seq on.
    pub fn from_seq(mut self, seq: u64) -> Self {
        self.from_seq = Some(seq);
        self
    }

    /// Records up to this seq.
    pub fn to_seq(mut self, seq: u64) -> Self {
        self.to_seq = Some(seq);
        self
    }

    /// Records stamped at or after this time (ns since the epoch).
    pub fn since(mut self, ns: u64) -> Self {
        self.since_ns = Some(ns);
        self
    }

    /// Records stamped at or before this time (ns since the epoch).
    pub fn until(mut self, ns: u64) -> Self {
        self.until_ns = Some(ns);
        self
    }

    /// Adds a kind glob (the recorder policy's syntax: `*` crosses dots, `?`, `[...]`,
    /// `{a,b}`, `\` escapes); a record matches when any glob matches its kind.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidGlob`] for a glob that does not compile or that can match no kind
    /// (empty, with whitespace or `/`).
    pub fn kind(mut self, glob: &str) -> Result<Self> {
        self.kinds.push(glob.to_owned());
        let mut set = GlobSetBuilder::new();
        for g in &self.kinds {
            set.add(compile_kind_glob(g)?);
        }
        let set = set.build().map_err(|e| Error::InvalidGlob {
            glob: glob.to_owned(),
            reason: e.to_string(),
        })?;
        self.kind_set = Some(set);
        Ok(self)
    }

    /// Selects exactly these record types (replacing the default).
    pub fn types(mut self, types: impl IntoIterator<Item = RecordType>) -> Self {
        self.types = Some(types.into_iter().collect());
        self
    }

    /// The chain key of a keyed log, so that its chain is verified while reading.
    /// Without it a keyed log is read with every frame checksum checked, but not its
    /// chain ([`Replay::chain_verified`]).
    pub fn key(mut self, key: Option<ChainKey>) -> Self {
        self.key = key;
        self
    }

    /// The chain key given with [`Query::key`].
    pub fn chain_key(&self) -> Option<&ChainKey> {
        self.key.as_ref()
    }

    /// The first seq asked for.
    pub fn from_seq_bound(&self) -> Option<u64> {
        self.from_seq
    }

    /// The last seq asked for.
    pub fn to_seq_bound(&self) -> Option<u64> {
        self.to_seq
    }

    /// The earliest time asked for (ns).
    pub fn since_bound(&self) -> Option<u64> {
        self.since_ns
    }

    /// The latest time asked for (ns).
    pub fn until_bound(&self) -> Option<u64> {
        self.until_ns
    }

    /// The kind globs, as given.
    pub fn kind_globs(&self) -> &[String] {
        &self.kinds
    }

    /// The record types selected.
    pub fn selected_types(&self) -> Vec<RecordType> {
        match &self.types {
            Some(t) => t.iter().copied().collect(),
            None => RecordType::ALL
                .into_iter()
                .filter(|t| *t != RecordType::Dictionary)
                .collect(),
        }
    }

    /// Whether records of this type (`None`: a tag the recorder does not write) are
    /// selected.
    fn type_selected(&self, t: Option<RecordType>) -> bool {
        match (&self.types, t) {
            (None, Some(t)) => t != RecordType::Dictionary,
            (None, None) => true,
            (Some(set), Some(t)) => set.contains(&t),
            (Some(_), None) => false,
        }
    }

    /// Whether a record's kind matches the kind globs (always, without globs).
    pub fn kind_matches(&self, record: &Record) -> bool {
        match &self.kind_set {
            None => true,
            Some(set) => record.kind().is_some_and(|k| set.is_match(k)),
        }
    }

    /// Whether a record meets every condition of the query.
    pub fn matches(&self, record: &Record) -> bool {
        self.from_seq.is_none_or(|s| record.seq >= s)
            && self.to_seq.is_none_or(|s| record.seq <= s)
            && self.since_ns.is_none_or(|t| record.ts_ns >= t)
            && self.until_ns.is_none_or(|t| record.ts_ns <= t)
            && self.type_selected(record.record_type())
            && self.kind_matches(record)
    }
}

/// Compiles a kind glob with the recorder policy's own rules.
fn compile_kind_glob(pattern: &str) -> Result<globset::Glob> {
    blackbox::policy::compile_kind_glob(pattern).map_err(|reason| Error::InvalidGlob {
        glob: pattern.to_owned(),
        reason,
    })
}

/// Checks that `dir` holds a log and lists its segments, without creating or changing
/// anything.
///
/// # Errors
///
/// [`Error::NoSuchDir`]; [`blackbox_log::Error::NotALog`] (as [`Error::Log`]) for a
/// file, a directory holding foreign files, or a directory without any segment.
pub fn open_log_dir(dir: &Path) -> Result<Vec<SegmentEntry>> {
    match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => {
            return Err(blackbox_log::Error::NotALog {
                dir: dir.to_owned(),
                reason: "it is not a directory".to_owned(),
            }
            .into());
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(Error::NoSuchDir {
                dir: dir.to_owned(),
            });
        }
        Err(e) => {
            return Err(Error::Io {
                op: "inspect log directory",
                path: dir.to_owned(),
                source: e,
            });
        }
    }
    let segments = blackbox_log::list_segments(dir)?;
    if segments.is_empty() {
        return Err(blackbox_log::Error::NotALog {
            dir: dir.to_owned(),
            reason: "it holds no segment file".to_owned(),
        }
        .into());
    }
    Ok(segments)
}

/// Reads a chain key file: exactly 32 raw bytes, or 64 hex digits (surrounding
/// whitespace, such as a final newline, is ignored).
///
/// # Errors
///
/// [`Error::InvalidKey`] when the file cannot be read or holds anything else.
pub fn read_key_file(path: &Path) -> Result<ChainKey> {
    let invalid = |reason: String| Error::InvalidKey {
        path: path.to_owned(),
        reason,
    };
    let meta = std::fs::metadata(path).map_err(|e| invalid(format!("cannot read it: {e}")))?;
    if meta.len() > 4096 {
        return Err(invalid(format!(
            "it holds {} bytes; a key file holds 32 raw bytes or 64 hex digits",
            meta.len()
        )));
    }
    let bytes = std::fs::read(path).map_err(|e| invalid(format!("cannot read it: {e}")))?;
    if let Ok(raw) = <[u8; 32]>::try_from(bytes.as_slice()) {
        return Ok(ChainKey::new(raw));
    }
    let text = std::str::from_utf8(&bytes).map(str::trim).unwrap_or("");
    match blackbox_log::link_from_hex(text) {
        Some(key) => Ok(ChainKey::new(key)),
        None => Err(invalid(format!(
            "it holds {} bytes; a key file holds 32 raw bytes or 64 hex digits",
            bytes.len()
        ))),
    }
}

/// An iterator of the typed records a [`Query`] selects, in log order.
///
/// Interned names resolve even when the range starts mid-log: the read starts at the
/// last segment at or before the range's start that opens with the dictionary (every
/// segment the recorder starts does) and folds the dictionary records on the way.
/// Every block read passes its frame checksums and its chain link (unless the log is
/// keyed and the query has no key). The first error ends the iteration.
#[derive(Debug)]
pub struct Replay {
    records: Option<Records>,
    decoder: Decoder,
    query: Query,
    start: u64,
    chain_verified: bool,
    done: bool,
    last_read: Option<(u64, u64)>,
}

impl Replay {
    /// Opens the log in `dir` for reading the records `query` selects.
    ///
    /// # Errors
    ///
    /// [`Error::NoSuchDir`], not a log, a wrong key, damage met while locating the
    /// range's start, I/O.
    pub fn open(dir: impl AsRef<Path>, query: &Query) -> Result<Replay> {
        let dir = dir.as_ref();
        let segments = open_log_dir(dir)?;
        let reader = LogReader::open_with(
            dir,
            ReaderOptions {
                key: query.key.clone(),
            },
        )?;
        let chain_verified = reader.chain_verified();
        let mut replay = Replay {
            records: None,
            decoder: Decoder::new(),
            query: query.clone(),
            start: query.from_seq.unwrap_or(0),
            chain_verified,
            done: false,
            last_read: None,
        };
        if query.to_seq.is_some_and(|to| to < replay.start)
            || matches!((query.since_ns, query.until_ns), (Some(s), Some(u)) if u < s)
        {
            replay.done = true;
            return Ok(replay);
        }
        if let Some(since) = query.since_ns {
            // Timestamps never decrease: the time range starts at the first record
            // stamped at or after `since`.
            match reader.records_by_time(since..)?.next() {
                Some(r) => replay.start = replay.start.max(r?.seq().0),
                None => {
                    replay.done = true;
                    return Ok(replay);
                }
            }
        }
        let dict_start = dictionary_start(&reader, &segments, replay.start)?;
        let hi = match query.to_seq {
            Some(to) => Bound::Included(Seq(to)),
            None => Bound::Unbounded,
        };
        replay.records = Some(reader.records((Bound::Included(Seq(dict_start)), hi))?);
        Ok(replay)
    }

    /// Whether the records are checked against the hash chain (false only for a keyed
    /// log read without its key; frame checksums are checked either way).
    pub fn chain_verified(&self) -> bool {
        self.chain_verified
    }

    /// The seq and timestamp of the last record read inside the range, selected or not.
    pub fn last_read(&self) -> Option<(u64, u64)> {
        self.last_read
    }

    fn next_record(&mut self) -> Result<Option<Record>> {
        let Some(records) = self.records.as_mut() else {
            return Ok(None);
        };
        for raw in records.by_ref() {
            let raw = raw?;
            let seq = raw.seq().0;
            if seq < self.start {
                self.decoder.learn(&raw)?;
                continue;
            }
            if self.query.until_ns.is_some_and(|u| raw.ts_ns() > u) {
                return Ok(None);
            }
            self.last_read = Some((seq, raw.ts_ns()));
            if !self
                .query
                .type_selected(RecordType::from_tag(raw.record_type()))
            {
                self.decoder.learn(&raw)?;
                continue;
            }
            let record = self.decoder.decode(&raw)?;
            if self.query.kind_matches(&record) {
                return Ok(Some(record));
            }
        }
        Ok(None)
    }
}

impl Iterator for Replay {
    type Item = Result<Record>;

    fn next(&mut self) -> Option<Result<Record>> {
        if self.done {
            return None;
        }
        match self.next_record() {
            Ok(Some(r)) => Some(Ok(r)),
            Ok(None) => {
                self.done = true;
                None
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}

/// The first seq of the last segment at or before the one holding `start` that opens
/// with a dictionary record (or of the first segment): reading from there resolves
/// every name in use at `start`.
fn dictionary_start(reader: &LogReader, segments: &[SegmentEntry], start: u64) -> Result<u64> {
    let holding = segments
        .partition_point(|s| s.first_seq <= start)
        .saturating_sub(1);
    for j in (1..=holding).rev() {
        let first = segments[j].first_seq;
        if let Some(r) = reader.records(Seq(first)..=Seq(first))?.next() {
            let r = r?;
            if r.record_type() == codec::DICTIONARY {
                return Ok(first);
            }
        }
    }
    Ok(segments.first().map_or(0, |s| s.first_seq))
}

/// Folds the records `query` selects, in log order, into a derived state: `f(state,
/// record)` for each. The state at any point in the log is the fold up to there.
///
/// # Errors
///
/// As [`Replay::open`], and the first error the iteration meets (damage, a record
/// that does not decode).
///
/// ```
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use blackbox::{Config, Event, Recorder};
/// use blackbox_replay::{Body, Query, RecordType, fold};
///
/// let dir = tempfile::tempdir()?;
/// let recorder = Recorder::open(dir.path(), Config::new())?;
/// for x in [1.0, 2.0, 4.0] {
///     recorder.record(&Event::new("arm.move").values(&[("dx", x)]))?;
/// }
/// recorder.close()?;
///
/// // The arm's position: the sum of its moves.
/// let query = Query::new().types([RecordType::Event]).kind("arm.*")?;
/// let x = fold(dir.path(), &query, 0.0, |x, r| match r.body {
///     Body::Event(e) => x + e.values.iter().map(|(_, v)| v).sum::<f64>(),
///     _ => x,
/// })?;
/// assert_eq!(x, 7.0);
/// # Ok(())
/// # }
/// ```
pub fn fold<T>(
    dir: impl AsRef<Path>,
    query: &Query,
    init: T,
    mut f: impl FnMut(T, Record) -> T,
) -> Result<T> {
    let mut state = init;
    for record in Replay::open(dir, query)? {
        state = f(state, record?);
    }
    Ok(state)
}
