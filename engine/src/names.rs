//! Interned names and the per-kind state the hot path reads.
//!
//! Both maps are copy-on-write behind an [`ArcSwap`]: a lookup is an atomic load and an
//! Fx hash probe (names come from the host, not from an adversary), with no lock and no
//! write to shared memory, so producers on several threads do not contend. Inserting a new name copies the map under a mutex; names are
//! few and mostly appear in the first seconds of a run.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use arc_swap::ArcSwap;
use parking_lot::Mutex;
use rustc_hash::FxHashMap;

use crate::policy::{Classification, Policy};

/// Names (kinds, sources, value names) ↔ `u32` ids, from 1.
#[derive(Debug, Default)]
pub(crate) struct Interner {
    ids: ArcSwap<FxHashMap<Arc<str>, u32>>,
    inner: Mutex<InternerInner>,
}

#[derive(Debug, Default)]
struct InternerInner {
    /// `names[id - 1]`.
    names: Vec<Arc<str>>,
    /// Ids interned since the writer last wrote them to the dictionary.
    pending: Vec<u32>,
}

impl Interner {
    /// The id of `name`, interning it if new.
    pub(crate) fn intern(&self, name: &str) -> u32 {
        if let Some(&id) = self.ids.load().get(name) {
            return id;
        }
        let mut inner = self.inner.lock();
        if let Some(&id) = self.ids.load().get(name) {
            return id;
        }
        let id = u32::try_from(inner.names.len() + 1).expect("fewer than 4 billion names");
        let name: Arc<str> = Arc::from(name);
        inner.names.push(Arc::clone(&name));
        inner.pending.push(id);
        let mut map = FxHashMap::clone(&self.ids.load());
        map.insert(name, id);
        self.ids.store(Arc::new(map));
        id
    }

    /// Restores an entry read from the log's dictionary (not pending: it is written).
    pub(crate) fn restore(&self, id: u32, name: &str) {
        let mut inner = self.inner.lock();
        let i = usize::try_from(id).unwrap_or(usize::MAX).saturating_sub(1);
        if inner.names.len() <= i {
            inner.names.resize(i + 1, Arc::from(""));
        }
        let name: Arc<str> = Arc::from(name);
        inner.names[i] = Arc::clone(&name);
        let mut map = FxHashMap::clone(&self.ids.load());
        map.insert(name, id);
        self.ids.store(Arc::new(map));
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

/// What the hot path knows about a kind: its id, its classification, and the counters
/// only producers update (events that never reach the writer).
#[derive(Debug)]
pub(crate) struct KindInfo {
    pub(crate) id: u32,
    pub(crate) class: Classification,
    /// Drop-tier events discarded by the producer.
    pub(crate) dropped: AtomicU64,
    /// Events lost because the channel was full (overflow policy `drop`).
    pub(crate) overflow: AtomicU64,
}

/// Kind name → [`KindInfo`], classified once per kind.
#[derive(Debug, Default)]
pub(crate) struct Kinds {
    map: ArcSwap<FxHashMap<Arc<str>, Arc<KindInfo>>>,
    insert: Mutex<()>,
}

impl Kinds {
    /// The current map, to look kinds up without cloning their `Arc` (whose shared
    /// reference count producers on several threads would otherwise all write).
    #[inline]
    pub(crate) fn load(&self) -> arc_swap::Guard<Arc<FxHashMap<Arc<str>, Arc<KindInfo>>>> {
        self.map.load()
    }

    pub(crate) fn insert(&self, kind: &str, policy: &Policy, names: &Interner) -> Arc<KindInfo> {
        let _guard = self.insert.lock();
        if let Some(info) = self.map.load().get(kind) {
            return Arc::clone(info);
        }
        let info = Arc::new(KindInfo {
            id: names.intern(kind),
            class: policy.classify(kind),
            dropped: AtomicU64::new(0),
            overflow: AtomicU64::new(0),
        });
        let mut map = FxHashMap::clone(&self.map.load());
        map.insert(Arc::from(kind), Arc::clone(&info));
        self.map.store(Arc::new(map));
        info
    }

    /// Producer-side counters of every kind: (kind id, dropped, overflow).
    pub(crate) fn producer_counts(&self) -> Vec<(u32, u64, u64)> {
        self.map
            .load()
            .values()
            .map(|k| {
                (
                    k.id,
                    k.dropped.load(Ordering::Relaxed),
                    k.overflow.load(Ordering::Relaxed),
                )
            })
            .collect()
    }
}
