//! What to read: a [`Query`] (seq and time bounds, kind globs, record types, order).

use std::collections::BTreeSet;

use blackbox::ChainKey;
use globset::{GlobSet, GlobSetBuilder};

use crate::decode::{Record, RecordType};
use crate::error::{Error, Result};

/// The order in which a [`Replay`](crate::Replay) yields records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Order {
    /// Log order (by seq): the order records were written. One pass over the log.
    #[default]
    Log,
    /// By when each record happened ([`Record::happened_ns`]), then by seq: pre-roll
    /// events, written when their incident was triggered, come where they happened.
    /// Two passes over the range; of the records that reached the log out of time order
    /// (pre-roll runs, events stamped behind later ones), only (happened, seq) is kept
    /// between them, 16 bytes each: the second pass reads them again.
    Happened,
}

/// What to read: a seq range, a time range, kind globs and record types. Every bound
/// is inclusive; the conditions combine (a record must meet all of them).
///
/// Time bounds select records by when they happened ([`Record::happened_ns`]): an
/// event by its recording time, every other record by its timestamp. An event may be
/// written after events that happened later: a pre-roll event when its incident is
/// triggered, up to the pre-roll's length after it happened, and any event stamped by
/// one thread that reaches the writer behind later ones of another. So a read bounded
/// by `until` goes on past `until` to the first accounting record whose watermark is
/// past `until` (every event that happened before the watermark is written before that
/// record), about the pre-roll's length plus one accounting interval later; or to the
/// end of the log, when none follows.
///
/// By default a query selects the whole log and every record type except
/// [`RecordType::Dictionary`] and [`RecordType::Policy`] (how ids read and which policy
/// kept the records, not content; ask for them by type to see them). A kind glob selects the records whose kind matches it; with
/// such globs, only records that have a kind (events, summaries, and incidents by
/// their trigger's kind) can match. A glob written `!GLOB` excludes the records whose
/// kind matches it and leaves records without a kind selected.
#[derive(Debug, Clone, Default)]
pub struct Query {
    pub(crate) from_seq: Option<u64>,
    pub(crate) to_seq: Option<u64>,
    pub(crate) since_ns: Option<u64>,
    pub(crate) until_ns: Option<u64>,
    kinds: Vec<String>,
    include: Option<GlobSet>,
    exclude: Option<GlobSet>,
    types: Option<BTreeSet<RecordType>>,
    pub(crate) key: Option<ChainKey>,
    pub(crate) order: Order,
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

    /// Records that happened at or after this time (ns since the epoch).
    pub fn since(mut self, ns: u64) -> Self {
        self.since_ns = Some(ns);
        self
    }

    /// Records that happened at or before this time (ns since the epoch).
    pub fn until(mut self, ns: u64) -> Self {
        self.until_ns = Some(ns);
        self
    }

    /// Adds a kind glob (the recorder policy's syntax: `*` crosses dots, `?`, `[...]`,
    /// `{a,b}`, `\` escapes). A record is selected when its kind matches any glob
    /// (if any is given) and no glob written `!GLOB`.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidGlob`] for a glob that does not compile or that can match no kind
    /// (empty, with whitespace or `/`).
    pub fn kind(mut self, glob: &str) -> Result<Self> {
        self.kinds.push(glob.to_owned());
        let mut include = GlobSetBuilder::new();
        let mut exclude = GlobSetBuilder::new();
        let (mut includes, mut excludes) = (0, 0);
        for g in &self.kinds {
            match g.strip_prefix('!') {
                Some(negated) => {
                    exclude.add(compile_kind_glob(negated)?);
                    excludes += 1;
                }
                None => {
                    include.add(compile_kind_glob(g)?);
                    includes += 1;
                }
            }
        }
        let build = |set: GlobSetBuilder| {
            set.build().map_err(|e| Error::InvalidGlob {
                glob: glob.to_owned(),
                reason: e.to_string(),
            })
        };
        self.include = (includes > 0).then(|| build(include)).transpose()?;
        self.exclude = (excludes > 0).then(|| build(exclude)).transpose()?;
        Ok(self)
    }

    /// Selects exactly these record types (replacing the default).
    pub fn types(mut self, types: impl IntoIterator<Item = RecordType>) -> Self {
        self.types = Some(types.into_iter().collect());
        self
    }

    /// The chain key of a keyed log, so that its chain is verified while reading.
    /// Without it a keyed log is read with every frame checksum checked, but not its
    /// chain ([`Replay::chain_verified`](crate::Replay::chain_verified)).
    pub fn key(mut self, key: Option<ChainKey>) -> Self {
        self.key = key;
        self
    }

    /// The order records are yielded in (default: [`Order::Log`]).
    pub fn order(mut self, order: Order) -> Self {
        self.order = order;
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

    /// The kind globs, as given (`!GLOB` for an exclusion).
    pub fn kind_globs(&self) -> &[String] {
        &self.kinds
    }

    /// The order asked for.
    pub fn selected_order(&self) -> Order {
        self.order
    }

    /// The record types selected.
    pub fn selected_types(&self) -> Vec<RecordType> {
        match &self.types {
            Some(t) => t.iter().copied().collect(),
            None => RecordType::ALL
                .into_iter()
                .filter(|t| !t.hidden_by_default())
                .collect(),
        }
    }

    /// Whether records of this type (`None`: a tag the recorder does not write) are
    /// selected.
    pub(crate) fn type_selected(&self, t: Option<RecordType>) -> bool {
        match (&self.types, t) {
            (None, Some(t)) => !t.hidden_by_default(),
            (None, None) => true,
            (Some(set), Some(t)) => set.contains(&t),
            (Some(_), None) => false,
        }
    }

    /// Whether a kind (`None` for a record without one) passes the kind globs.
    pub fn kind_selected(&self, kind: Option<&str>) -> bool {
        let included = match (&self.include, kind) {
            (None, _) => true,
            (Some(set), Some(k)) => set.is_match(k),
            (Some(_), None) => false,
        };
        let excluded = match (&self.exclude, kind) {
            (Some(set), Some(k)) => set.is_match(k),
            _ => false,
        };
        included && !excluded
    }

    /// Whether the query selects by kind (has a kind glob).
    pub(crate) fn selects_by_kind(&self) -> bool {
        self.include.is_some() || self.exclude.is_some()
    }

    /// Whether the query names the record types it selects.
    pub(crate) fn selects_by_type(&self) -> bool {
        self.types.is_some()
    }

    /// Whether a record's kind passes the kind globs.
    pub fn kind_matches(&self, record: &Record) -> bool {
        self.kind_selected(record.kind())
    }

    /// Whether a time (when a record happened) is inside the time bounds.
    pub(crate) fn time_selected(&self, happened_ns: u64) -> bool {
        self.since_ns.is_none_or(|t| happened_ns >= t)
            && self.until_ns.is_none_or(|t| happened_ns <= t)
    }

    /// Whether a record meets every condition of the query.
    pub fn matches(&self, record: &Record) -> bool {
        self.from_seq.is_none_or(|s| record.seq >= s)
            && self.to_seq.is_none_or(|s| record.seq <= s)
            && self.time_selected(record.happened_ns())
            && self.type_selected(record.record_type())
            && self.kind_matches(record)
    }

    /// Whether the bounds exclude everything by themselves (`to < from`, `until <
    /// since`).
    pub(crate) fn empty_by_bounds(&self) -> bool {
        matches!((self.from_seq, self.to_seq), (Some(f), Some(t)) if t < f)
            || matches!((self.since_ns, self.until_ns), (Some(s), Some(u)) if u < s)
    }
}

/// Compiles a kind glob with the recorder policy's own rules.
fn compile_kind_glob(pattern: &str) -> Result<globset::Glob> {
    blackbox::policy::compile_kind_glob(pattern).map_err(|reason| Error::InvalidGlob {
        glob: pattern.to_owned(),
        reason,
    })
}
