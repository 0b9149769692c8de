//! Interned names, the limits on them, and the per-kind state the hot path reads.
//!
//! Both maps are concurrent hash maps with lock-free reads (papaya): a lookup is a hash
//! probe with no lock and no write to shared memory, so producers on several threads do
//! not contend, and a new name costs one insertion, not a copy of every name known.
//!
//! Names are bounded per log ([`NameLimits`]): every name is in the dictionary that
//! opens each segment (one record), and every kind in the accounting snapshot beside it
//! (another record), so the limits are what guarantee that a log can always be written
//! and reopened.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;
use rustc_hash::FxBuildHasher;

use crate::policy::{Classification, Policy};

/// Names (kinds, sources and value names together) a log may hold at most.
pub const NAMES_PER_LOG_MAX: u32 = 65_536;
/// Numeric values one event may carry at most.
pub const VALUES_PER_EVENT_MAX: usize = 1024;

/// Bytes one dictionary entry may take in a dictionary record's archive, beyond its
/// name's bytes: the id (4) and the archived string (8).
const DICTIONARY_ENTRY_BYTES: usize = 12;
/// Bytes one kind takes in an accounting record's archive: the id, padding and eight
/// counters.
pub(crate) const ACCOUNTING_ENTRY_BYTES: usize = 72;
/// Room for a record's root object, alignment and padding.
const RECORD_OVERHEAD_BYTES: usize = 64;

/// The largest archive of a dictionary record holding `entries` names of `name_bytes`
/// bytes in all (checked against rkyv in the tests).
pub(crate) fn dictionary_record_bytes_max(entries: usize, name_bytes: usize) -> usize {
    RECORD_OVERHEAD_BYTES + entries * DICTIONARY_ENTRY_BYTES + name_bytes
}

/// The largest archive of an accounting record of `kinds` kinds.
pub(crate) fn accounting_record_bytes_max(kinds: usize) -> usize {
    RECORD_OVERHEAD_BYTES + kinds * ACCOUNTING_ENTRY_BYTES
}

/// How many names and kinds one log may hold: [`NAMES_PER_LOG_MAX`] names, as many as
/// keep the whole dictionary within one record, and as many kinds as keep the whole
/// accounting within one record.
#[derive(Debug, Clone, Copy)]
pub(crate) struct NameLimits {
    pub(crate) names_max: u32,
    pub(crate) record_bytes_max: usize,
    pub(crate) kinds_max: u32,
}

impl NameLimits {
    pub(crate) fn for_record_bytes(record_bytes_max: usize) -> NameLimits {
        let kinds = record_bytes_max.saturating_sub(RECORD_OVERHEAD_BYTES) / ACCOUNTING_ENTRY_BYTES;
        debug_assert!(
            record_bytes_max < RECORD_OVERHEAD_BYTES
                || accounting_record_bytes_max(kinds) <= record_bytes_max
        );
        NameLimits {
            names_max: NAMES_PER_LOG_MAX,
            record_bytes_max,
            kinds_max: u32::try_from(kinds)
                .unwrap_or(u32::MAX)
                .min(NAMES_PER_LOG_MAX),
        }
    }
}

impl Default for NameLimits {
    fn default() -> NameLimits {
        NameLimits::for_record_bytes(usize::MAX)
    }
}

/// A name the log has no room for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NameLimitError {
    /// The name refused.
    pub name: String,
    /// Which limit: names per log, kinds per log, or the dictionary's record size.
    pub limit: &'static str,
    /// The limit's value.
    pub max: u64,
}

impl std::fmt::Display for NameLimitError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the log has reached its limit of {} {}: the new name {} is not recorded",
            self.max,
            self.limit,
            blackbox_log::Shown(&self.name)
        )
    }
}

impl std::error::Error for NameLimitError {}

/// Names (kinds, sources, value names) ↔ `u32` ids, from 1.
#[derive(Debug)]
pub(crate) struct Interner {
    ids: papaya::HashMap<Arc<str>, u32, FxBuildHasher>,
    inner: Mutex<InternerInner>,
    limits: NameLimits,
}

#[derive(Debug, Default)]
struct InternerInner {
    /// `names[id - 1]`.
    names: Vec<Arc<str>>,
    /// Bytes of every name, for the dictionary's size.
    name_bytes: usize,
    /// Ids interned since the writer last wrote them to the dictionary.
    pending: Vec<u32>,
}

impl Interner {
    pub(crate) fn new(limits: NameLimits) -> Interner {
        Interner {
            ids: papaya::HashMap::builder().hasher(FxBuildHasher).build(),
            inner: Mutex::new(InternerInner::default()),
            limits,
        }
    }

    /// The id of `name`, if it is interned.
    #[inline]
    pub(crate) fn get(&self, name: &str) -> Option<u32> {
        self.ids.pin().get(name).copied()
    }

    /// The id of `name`, interning it if new.
    ///
    /// # Errors
    ///
    /// The log has no room for another name.
    pub(crate) fn intern(&self, name: &str) -> Result<u32, NameLimitError> {
        if let Some(id) = self.get(name) {
            return Ok(id);
        }
        let mut inner = self.inner.lock();
        if let Some(id) = self.get(name) {
            return Ok(id);
        }
        let refuse = |limit: &'static str, max: u64| NameLimitError {
            name: name.to_owned(),
            limit,
            max,
        };
        let count = inner.names.len();
        if count >= self.limits.names_max as usize {
            return Err(refuse(
                "names (kinds, sources and value names)",
                u64::from(self.limits.names_max),
            ));
        }
        let bytes = dictionary_record_bytes_max(count + 1, inner.name_bytes + name.len());
        if bytes > self.limits.record_bytes_max {
            return Err(refuse(
                "bytes of names (the dictionary must fit one record)",
                self.limits.record_bytes_max as u64,
            ));
        }
        let id = u32::try_from(count + 1).unwrap_or(u32::MAX);
        let name: Arc<str> = Arc::from(name);
        inner.names.push(Arc::clone(&name));
        inner.name_bytes += name.len();
        inner.pending.push(id);
        self.ids.pin().insert(name, id);
        Ok(id)
    }

    /// Restores the dictionary read from the log (not pending: it is written). The
    /// entries were checked by [`DictionaryFold`], so the ids are at most
    /// [`NAMES_PER_LOG_MAX`].
    pub(crate) fn restore(&self, fold: &DictionaryFold) {
        let mut inner = self.inner.lock();
        let max = fold.names.keys().copied().max().unwrap_or(0) as usize;
        inner.names = vec![Arc::from(""); max];
        let ids = self.ids.pin();
        for (&id, name) in &fold.names {
            let name: Arc<str> = Arc::from(name.as_str());
            inner.name_bytes += name.len();
            inner.names[id as usize - 1] = Arc::clone(&name);
            ids.insert(name, id);
        }
    }

    /// The name of `id`.
    pub(crate) fn name(&self, id: u32) -> Option<Arc<str>> {
        let i = usize::try_from(id).ok()?.checked_sub(1)?;
        self.inner.lock().names.get(i).cloned()
    }

    /// Takes the ids interned since the last call, with their names.
    pub(crate) fn take_pending(&self) -> Vec<(u32, String)> {
        self.take_pending_upto(u32::MAX)
    }

    /// Takes the pending ids up to `max_id`, with their names. Ids are interned in
    /// increasing order, so what one producer interned before `max_id` comes with it,
    /// and nothing it interned later.
    pub(crate) fn take_pending_upto(&self, max_id: u32) -> Vec<(u32, String)> {
        let mut inner = self.inner.lock();
        let split = inner.pending.partition_point(|&id| id <= max_id);
        let taken: Vec<u32> = inner.pending.drain(..split).collect();
        taken
            .into_iter()
            .map(|id| (id, inner.names[(id - 1) as usize].to_string()))
            .collect()
    }

    /// Every entry, for the segment preamble.
    pub(crate) fn all(&self) -> Vec<(u32, String)> {
        let inner = self.inner.lock();
        inner
            .names
            .iter()
            .enumerate()
            .filter(|(_, n)| !n.is_empty())
            .map(|(i, n)| (u32::try_from(i + 1).unwrap_or(u32::MAX), n.to_string()))
            .collect()
    }
}

/// The first seq of the last segment at or before the one holding `seq` whose first
/// record is a dictionary record, or of the log's first segment: folding the
/// dictionary records from there up to `seq` gives every name in use at `seq`. Every
/// segment the recorder starts opens with its preamble, whose first record is the whole
/// dictionary, so this is usually the segment holding `seq`; a segment that opens
/// otherwise (a log another writer started) is walked back over. The one rule for where
/// the names start, for the recorder restoring a log and for replay's range reads.
/// Reads the first record of each segment it walks back over.
///
/// # Errors
///
/// The log's, reading a segment's first record: damage, I/O.
pub fn dictionary_start(
    reader: &blackbox_log::LogReader,
    segments: &[blackbox_log::SegmentEntry],
    seq: u64,
) -> blackbox_log::Result<u64> {
    let holding = segments
        .partition_point(|s| s.first_seq <= seq)
        .saturating_sub(1);
    for segment in segments.iter().take(holding + 1).skip(1).rev() {
        let first = blackbox_log::Seq(segment.first_seq);
        if let Some(r) = reader.records(first..=first)?.next()
            && r?.record_type() == crate::codec::DICTIONARY
        {
            return Ok(first.0);
        }
    }
    Ok(segments.first().map_or(0, |s| s.first_seq))
}

/// The dictionary in force, folded from dictionary records in log order, with the
/// rules every reader applies (the recorder restoring its state on open, and replay's
/// decoder): an id is from 1 to [`NAMES_PER_LOG_MAX`], a name is 1 to 256 bytes, and
/// neither an id nor a name is ever given to another.
#[derive(Debug, Default, Clone)]
pub struct DictionaryFold {
    names: HashMap<u32, String>,
    ids: HashMap<String, u32>,
}

impl DictionaryFold {
    /// An empty dictionary.
    pub fn new() -> DictionaryFold {
        DictionaryFold::default()
    }

    /// Adds one entry.
    ///
    /// # Errors
    ///
    /// A sentence saying which rule the entry breaks; the dictionary is unchanged.
    pub fn add(&mut self, id: u32, name: &str) -> Result<(), String> {
        if id == 0 || id > NAMES_PER_LOG_MAX {
            return Err(format!(
                "it gives id {id} to {name:?}: ids are from 1 to {NAMES_PER_LOG_MAX}"
            ));
        }
        if name.is_empty() || name.len() > 256 {
            return Err(format!(
                "it gives id {id} a name of {} bytes: names are 1 to 256 bytes",
                name.len()
            ));
        }
        if let Some(old) = self.names.get(&id) {
            if old != name {
                return Err(format!("it renames id {id} from {old:?} to {name:?}"));
            }
            return Ok(());
        }
        if let Some(&other) = self.ids.get(name) {
            return Err(format!(
                "it gives {name:?} id {id}, but it already has id {other}"
            ));
        }
        self.names.insert(id, name.to_owned());
        self.ids.insert(name.to_owned(), id);
        Ok(())
    }

    /// The name of `id`, if an entry gave it one.
    pub fn name(&self, id: u32) -> Option<&str> {
        self.names.get(&id).map(String::as_str)
    }

    /// Every entry folded so far, (id, name), in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (u32, &str)> {
        self.names.iter().map(|(&id, name)| (id, name.as_str()))
    }

    /// Entries folded so far.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// Whether no entry was folded.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }
}

/// What the hot path knows about a kind: its id, its classification, and the counters
/// only producers update.
#[derive(Debug)]
pub(crate) struct KindInfo {
    pub(crate) id: u32,
    pub(crate) class: Classification,
    /// Drop-tier events discarded by the producer.
    pub(crate) dropped: AtomicU64,
    /// Events lost because the channel was full (overflow policy `drop`).
    pub(crate) overflow: AtomicU64,
    /// Events handed to the writer (sent on the channel). With `dropped` and
    /// `overflow`, every event `record()` accepted is counted here, once, by the
    /// producer: their sum is the kind's `seen`, and the writer accounts an outcome for
    /// each event it receives.
    pub(crate) sent: AtomicU64,
}

/// Kind name → [`KindInfo`], classified once per kind.
#[derive(Debug)]
pub(crate) struct Kinds {
    map: papaya::HashMap<Arc<str>, Arc<KindInfo>, FxBuildHasher>,
    insert: Mutex<KindCount>,
    kinds_max: u32,
}

/// The kinds the log's accounting holds: those restored from it, and those new this
/// session.
#[derive(Debug, Default)]
struct KindCount {
    restored: std::collections::HashSet<u32>,
    new: usize,
}

impl Kinds {
    pub(crate) fn new(limits: NameLimits) -> Kinds {
        Kinds {
            map: papaya::HashMap::builder().hasher(FxBuildHasher).build(),
            insert: Mutex::new(KindCount::default()),
            kinds_max: limits.kinds_max,
        }
    }

    /// The ids of the kinds the log's accounting already holds (restored on open): they
    /// count against the kinds limit whether or not they are recorded again.
    pub(crate) fn set_restored(&self, ids: impl IntoIterator<Item = u32>) {
        self.insert.lock().restored = ids.into_iter().collect();
    }

    /// The map, pinned for lookups (lock-free; the guard keeps what it returns alive).
    #[inline]
    pub(crate) fn pin(
        &self,
    ) -> papaya::HashMapRef<'_, Arc<str>, Arc<KindInfo>, FxBuildHasher, papaya::LocalGuard<'_>>
    {
        self.map.pin()
    }

    /// The kind's info, classifying and interning it if new.
    ///
    /// # Errors
    ///
    /// The log has no room for another kind or name.
    pub(crate) fn insert(
        &self,
        kind: &str,
        policy: &Policy,
        names: &Interner,
    ) -> Result<Arc<KindInfo>, NameLimitError> {
        let mut count = self.insert.lock();
        let map = self.map.pin();
        if let Some(info) = map.get(kind) {
            return Ok(Arc::clone(info));
        }
        let restored = names
            .get(kind)
            .is_some_and(|id| count.restored.contains(&id));
        if !restored && count.restored.len() + count.new >= self.kinds_max as usize {
            return Err(NameLimitError {
                name: kind.to_owned(),
                limit: "kinds (the accounting must fit one record)",
                max: u64::from(self.kinds_max),
            });
        }
        let info = Arc::new(KindInfo {
            id: names.intern(kind)?,
            class: policy.classify(kind),
            dropped: AtomicU64::new(0),
            overflow: AtomicU64::new(0),
            sent: AtomicU64::new(0),
        });
        map.insert(Arc::from(kind), Arc::clone(&info));
        if !restored {
            count.new += 1;
        }
        Ok(info)
    }

    /// Producer-side counters of every kind.
    pub(crate) fn producer_counts(&self) -> Vec<ProducerCounts> {
        self.map
            .pin()
            .values()
            .map(|k| ProducerCounts {
                id: k.id,
                dropped: k.dropped.load(Ordering::SeqCst),
                overflow: k.overflow.load(Ordering::SeqCst),
                sent: k.sent.load(Ordering::SeqCst),
            })
            .collect()
    }

    /// Events handed to the writer, over every kind.
    pub(crate) fn sent_total(&self) -> u64 {
        self.map
            .pin()
            .values()
            .map(|k| k.sent.load(Ordering::SeqCst))
            .sum()
    }
}

/// A kind's producer-side counters, read at one moment.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ProducerCounts {
    pub(crate) id: u32,
    pub(crate) dropped: u64,
    pub(crate) overflow: u64,
    pub(crate) sent: u64,
}

#[cfg(test)]
mod tests {
    #![expect(clippy::unwrap_used, reason = "tests fail loudly on any error")]

    use proptest::prelude::*;

    use super::*;
    use crate::codec::{self, AccountingRecord, Counters, DictionaryRecord};

    proptest! {
        /// The size bounds the limits rely on hold for rkyv's real archives.
        #[test]
        fn records_fit_their_size_bounds(
            names in prop::collection::vec("[a-z.]{1,256}", 0..64),
            kinds in 0usize..300,
        ) {
            let entries: Vec<(u32, String)> = names
                .iter()
                .enumerate()
                .map(|(i, n)| (u32::try_from(i).unwrap() + 1, n.clone()))
                .collect();
            let name_bytes = names.iter().map(String::len).sum();
            let bytes = codec::encode_to_vec(&DictionaryRecord { entries });
            prop_assert!(bytes.len() <= dictionary_record_bytes_max(names.len(), name_bytes));
            let full = Counters { seen: u64::MAX, ..Counters::default() };
            let record = AccountingRecord {
                snapshot: true,
                watermark_ns: u64::MAX,
                kinds: (1..=u32::try_from(kinds).unwrap()).map(|k| (k, full)).collect(),
            };
            let bytes = codec::encode_to_vec(&record);
            prop_assert!(bytes.len() <= accounting_record_bytes_max(kinds));
        }
    }

    #[test]
    fn the_dictionary_fold_refuses_what_no_recorder_writes() {
        let mut d = DictionaryFold::new();
        d.add(1, "a").unwrap();
        d.add(1, "a").unwrap();
        assert!(d.add(0, "b").unwrap_err().contains("from 1"));
        assert!(
            d.add(NAMES_PER_LOG_MAX + 1, "b")
                .unwrap_err()
                .contains("from 1")
        );
        assert!(d.add(u32::MAX, "b").is_err());
        assert!(d.add(1, "b").unwrap_err().contains("renames id 1"));
        assert!(d.add(2, "a").unwrap_err().contains("already has id 1"));
        assert!(d.add(2, "").is_err());
        assert_eq!((d.len(), d.name(1)), (1, Some("a")));
    }

    #[test]
    fn a_name_past_a_limit_is_refused_and_the_limit_named() {
        let limits = NameLimits {
            names_max: 2,
            ..NameLimits::default()
        };
        let names = Interner::new(limits);
        assert_eq!(names.intern("a").unwrap(), 1);
        assert_eq!(names.intern("b").unwrap(), 2);
        assert_eq!(names.intern("a").unwrap(), 1);
        let err = names.intern("c").unwrap_err();
        assert_eq!(err.name, "c");
        assert!(err.to_string().contains("limit of 2 names"), "{err}");

        let small = Interner::new(NameLimits::for_record_bytes(200));
        let err = (0..100)
            .map(|i| small.intern(&format!("name.{i:04}")))
            .find_map(Result::err)
            .unwrap();
        assert!(err.limit.contains("dictionary"), "{err}");
        let all = small.all();
        let bytes = codec::encode_to_vec(&DictionaryRecord { entries: all });
        assert!(bytes.len() <= 200, "{}", bytes.len());
    }
}
