//! Working memory: the current decision window, a cache and never the truth.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::RwLock;
use serde_json::Value;

use crate::clock::Clock;
use crate::error::{Error, Result};

/// A concurrent map from string keys to JSON values. Volatile: it survives a restart
/// only through the log, which [`Recorder::open`](crate::Recorder::open) restores it
/// from.
///
/// In a recorder, every change reaches the log: each `set`, `remove` and `replace` is
/// stamped by the recorder's clock while it is made and queued for the writer thread,
/// which writes it as a working-memory delta record (`codec::WORKING`) in its place
/// among the events, so the memory can be rebuilt as it was at any instant
/// (`blackbox_replay::state_at`). Checkpoints ([`Recorder::checkpoint`](crate::Recorder::checkpoint),
/// timed, at an incident, at close) hold the whole memory and bound how far back a
/// reader must go.
///
/// A checkpoint is one log record holding the whole memory as a JSON object, so the
/// memory is bounded by the log's record limit (less [`DELTA_OVERHEAD_BYTES`], so that
/// any single change also fits a delta record): a [`WorkingMemory::set`] that would make
/// its JSON larger is refused and changes nothing. Every checkpoint therefore fits, and a
/// restart restores the memory whole.
#[derive(Debug)]
pub struct WorkingMemory {
    inner: RwLock<Inner>,
    limit_bytes: usize,
    journal: Option<Journal>,
}

/// Room a delta record takes beyond the memory's own JSON for one change:
/// `{"set":{"k":v}}` is 7 bytes longer than `{"k":v}`, `{"del":["k"]}` shorter than a
/// memory holding `k`.
pub const DELTA_OVERHEAD_BYTES: usize = 16;

#[derive(Debug, Default)]
struct Inner {
    map: BTreeMap<String, Value>,
    /// Bytes of `serde_json::to_vec(&map)`, kept up to date on every change.
    json_bytes: usize,
    /// Changes the writer has not taken yet, in the order they were made: their numbers
    /// increase and their stamps never decrease.
    queue: VecDeque<Change>,
    /// Bytes the queued changes hold: each one's [`Change::held_bytes`].
    queue_bytes: usize,
    /// The number the next change gets.
    next_change: u64,
    /// The stamp of the last change queued.
    last_change_ns: u64,
    /// Whether changes are queued for the log: from the end of the recorder's restore
    /// until it closes or fails.
    journaling: bool,
}

/// A change to the working memory on its way to the log.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Change {
    /// Its place among the changes: they are made, and numbered, under the memory's
    /// lock.
    pub(crate) number: u64,
    /// When it was made, by the recorder's clock: one reading for every change of one
    /// operation (a `replace` is one change of many keys at one time).
    pub(crate) ts_ns: u64,
    pub(crate) key: String,
    /// The value set, as compact JSON text; `None` for a removal. Text, not a
    /// `serde_json::Value`: a tree takes many times the bytes of its text (an array of
    /// small numbers about 16 times), and the queue's bound counts what it holds.
    pub(crate) value: Option<String>,
}

impl Change {
    /// The heap and inline bytes this change holds while it waits: its key, its value's
    /// text and the change itself.
    pub(crate) fn held_bytes(&self) -> usize {
        CHANGE_BYTES + self.key.len() + self.value.as_ref().map_or(0, String::len)
    }
}

/// The bytes a queued change holds beyond its key and value text.
pub const CHANGE_BYTES: usize = std::mem::size_of::<Change>();

/// The recorder's side of a working memory: the clock that stamps changes and the way
/// to tell the writer that some wait.
pub(crate) struct Journal {
    clock: Arc<dyn Clock>,
    /// Set, under the memory's lock and before the clock is read, when a change is
    /// queued; cleared, under the lock, when the writer takes the last one. The writer
    /// reads it without the lock to skip an empty queue.
    queued: AtomicBool,
    /// Tells the writer that the changes up to this number wait: a message through its
    /// channel, sent after the memory's lock is released, so the writer finds each
    /// change at its place among the events of the thread that made it. With `true`,
    /// waits until the writer has taken them.
    notify: Box<dyn Fn(u64, bool) + Send + Sync>,
    /// Bytes of changes that may wait for the writer (`Config::working_queue_bytes_max`)
    /// before a change waits until the writer has taken them.
    queue_bytes_max: usize,
}

impl std::fmt::Debug for Journal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Journal")
            .field("clock", &self.clock)
            .field("queued", &self.queued)
            .finish_non_exhaustive()
    }
}

/// Bytes of changes that may wait for the writer before a change waits until the writer
/// has taken them, by default (`Config::working_queue_bytes_max`): the queue holds each
/// value a second time, and a host setting large values faster than the writer takes
/// them must not grow it without bound.
pub const QUEUE_BYTES_MAX: usize = 64 << 20;

impl Default for WorkingMemory {
    /// A memory without a size limit and without a log (the recorder's has both).
    fn default() -> WorkingMemory {
        WorkingMemory::with_limit(usize::MAX)
    }
}

/// Counts the bytes serde_json writes, without keeping them.
struct CountingWriter(usize);

impl std::io::Write for CountingWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len();
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Bytes of `value` as compact JSON.
pub(crate) fn json_len<T: serde::Serialize + ?Sized>(value: &T) -> usize {
    let mut w = CountingWriter(0);
    // Writing JSON of a `String` or a `Value` into a counter cannot fail.
    let _ = serde_json::to_writer(&mut w, value);
    w.0
}

/// Bytes one entry adds to the object: `"key":value`, and the comma before it unless it
/// is the only one.
fn entry_len(key: &str, value: &Value) -> usize {
    json_len(key) + 1 + json_len(value)
}

/// Bytes of the object of `n` entries whose `key:value` parts take `entries` bytes.
fn object_len(n: usize, entries: usize) -> usize {
    2 + entries + n.saturating_sub(1)
}

impl WorkingMemory {
    /// A memory whose JSON may take at most `limit_bytes`, with no log behind it.
    pub(crate) fn with_limit(limit_bytes: usize) -> WorkingMemory {
        WorkingMemory {
            inner: RwLock::new(Inner {
                json_bytes: 2,
                ..Inner::default()
            }),
            limit_bytes,
            journal: None,
        }
    }

    /// A recorder's memory: changes are stamped by `clock` and, once
    /// [`WorkingMemory::start_journal`] is called, queued for the writer, which `notify`
    /// tells of them.
    pub(crate) fn journaled(
        limit_bytes: usize,
        clock: Arc<dyn Clock>,
        notify: Box<dyn Fn(u64, bool) + Send + Sync>,
        queue_bytes_max: usize,
    ) -> WorkingMemory {
        WorkingMemory {
            journal: Some(Journal {
                clock,
                queued: AtomicBool::new(false),
                notify,
                queue_bytes_max,
            }),
            ..WorkingMemory::with_limit(limit_bytes)
        }
    }

    /// The value under `key`.
    pub fn get(&self, key: &str) -> Option<Value> {
        self.inner.read().map.get(key).cloned()
    }

    /// Sets `key` to `value`, returning the previous value. In a recorder the change is
    /// stamped by its clock and written to the log in its place among the events; it
    /// waits for the writer only while the writer's channel is full, or while more than
    /// `Config::working_queue_bytes_max` bytes of changes (64 MiB by default) wait for
    /// it: the change is made, and `set` returns once the writer has taken the queue.
    ///
    /// # Errors
    ///
    /// [`Error::WorkingMemoryTooLarge`] when the memory as JSON would exceed its limit
    /// (the log's record limit less [`DELTA_OVERHEAD_BYTES`]), so it could no longer be
    /// checkpointed whole; the memory is left as it was.
    pub fn set(&self, key: impl Into<String>, value: Value) -> Result<Option<Value>> {
        let key = key.into();
        // Writing JSON of a `Value` into a string cannot fail.
        let text = serde_json::to_string(&value).unwrap_or_default();
        let added = json_len(&key) + 1 + text.len();
        let mut inner = self.inner.write();
        let n = inner.map.len();
        let entries = inner.json_bytes - object_len(n, 0);
        let (n_after, entries_after) = match inner.map.get(&key) {
            Some(old) => (n, entries - entry_len(&key, old) + added),
            None => (n + 1, entries + added),
        };
        let size_bytes = object_len(n_after, entries_after);
        if size_bytes > self.limit_bytes {
            return Err(Error::WorkingMemoryTooLarge {
                key,
                size_bytes,
                limit_bytes: self.limit_bytes,
            });
        }
        inner.json_bytes = size_bytes;
        let queued = self
            .stamp(&mut inner)
            .map(|ts_ns| self.queue(&mut inner, ts_ns, &key, Some(text)));
        let old = inner.map.insert(key, value);
        drop(inner);
        self.notify(queued);
        Ok(old)
    }

    /// Removes `key`, returning its value. In a recorder the removal reaches the log as
    /// a change does (see [`WorkingMemory::set`]); removing a key that is not there
    /// changes nothing and writes nothing.
    pub fn remove(&self, key: &str) -> Option<Value> {
        let mut inner = self.inner.write();
        let old = inner.map.remove(key)?;
        let n = inner.map.len() + 1;
        let entries = inner.json_bytes - object_len(n, 0) - entry_len(key, &old);
        inner.json_bytes = object_len(n - 1, entries);
        let queued = self
            .stamp(&mut inner)
            .map(|ts_ns| self.queue(&mut inner, ts_ns, key, None));
        drop(inner);
        self.notify(queued);
        Some(old)
    }

    /// Number of keys.
    pub fn len(&self) -> usize {
        self.inner.read().map.len()
    }

    /// Whether the memory is empty.
    pub fn is_empty(&self) -> bool {
        self.inner.read().map.is_empty()
    }

    /// A copy of every key and value.
    pub fn snapshot(&self) -> BTreeMap<String, Value> {
        self.inner.read().map.clone()
    }

    /// Bytes of the memory as a JSON object (what a checkpoint writes).
    pub fn json_bytes(&self) -> usize {
        self.inner.read().json_bytes
    }

    /// The most bytes the memory may take as JSON: the log's record limit less
    /// [`DELTA_OVERHEAD_BYTES`].
    pub fn limit_bytes(&self) -> usize {
        self.limit_bytes
    }

    /// Replaces the whole content, returning the previous one. In a recorder this is one
    /// change at one time: the keys that go and the values that differ reach the log
    /// together.
    ///
    /// # Errors
    ///
    /// [`Error::WorkingMemoryTooLarge`] (naming the largest key) when the content as
    /// JSON exceeds the memory's limit; the memory is left as it was.
    pub fn replace(&self, content: BTreeMap<String, Value>) -> Result<BTreeMap<String, Value>> {
        let entries: usize = content.iter().map(|(k, v)| entry_len(k, v)).sum();
        let size_bytes = object_len(content.len(), entries);
        if size_bytes > self.limit_bytes {
            let key = content
                .iter()
                .max_by_key(|(k, v)| entry_len(k, v))
                .map(|(k, _)| k.clone())
                .unwrap_or_default();
            return Err(Error::WorkingMemoryTooLarge {
                key,
                size_bytes,
                limit_bytes: self.limit_bytes,
            });
        }
        let mut inner = self.inner.write();
        let mut queued = None;
        let gone: Vec<String> = inner
            .map
            .keys()
            .filter(|k| !content.contains_key(*k))
            .cloned()
            .collect();
        let changed: Vec<(&String, &Value)> = content
            .iter()
            .filter(|(k, v)| inner.map.get(*k) != Some(*v))
            .collect();
        // One operation, one time: the clock is read once for all its keys.
        if (!gone.is_empty() || !changed.is_empty())
            && let Some(ts_ns) = self.stamp(&mut inner)
        {
            for key in gone {
                queued = Some(self.queue(&mut inner, ts_ns, &key, None));
            }
            for (key, value) in changed {
                // Writing JSON of a `Value` into a string cannot fail.
                let text = serde_json::to_string(value).unwrap_or_default();
                queued = Some(self.queue(&mut inner, ts_ns, key, Some(text)));
            }
        }
        inner.json_bytes = size_bytes;
        let old = std::mem::replace(&mut inner.map, content);
        drop(inner);
        self.notify(queued);
        Ok(old)
    }

    /// Sets the content the log holds (the recorder's restore on open): not queued for
    /// the log, which has it, and not checked against the limit, since the log's records
    /// held it.
    pub(crate) fn restore(&self, content: BTreeMap<String, Value>) {
        let entries = content.iter().map(|(k, v)| entry_len(k, v)).sum();
        let mut inner = self.inner.write();
        inner.json_bytes = object_len(content.len(), entries);
        inner.map = content;
    }

    /// The memory as a JSON object.
    #[cfg(test)]
    fn to_json_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(&self.inner.read().map).unwrap_or_else(|_| b"{}".to_vec())
    }

    /// The time of an operation about to queue changes for the log, if this memory
    /// keeps one: one clock reading, whatever number of keys the operation changes.
    ///
    /// IMPORTANT: `queued` is set before the clock is read, both under the memory's
    /// lock. The writer, before it stamps a record with a time later than any before it,
    /// takes the queued changes stamped before that time ([`WorkingMemory::take_before`]);
    /// a change not yet queued then reads the clock after the writer looked, so it is
    /// stamped no earlier than that record, and the log's timestamps stay the changes'
    /// own.
    fn stamp(&self, inner: &mut Inner) -> Option<u64> {
        let journal = self.journal.as_ref()?;
        if !inner.journaling {
            return None;
        }
        journal.queued.store(true, Ordering::SeqCst);
        let ts_ns = journal.clock.now_ns().max(inner.last_change_ns);
        inner.last_change_ns = ts_ns;
        Some(ts_ns)
    }

    /// Queues a change stamped `ts_ns` (by [`WorkingMemory::stamp`]): returns its number
    /// and whether more bytes than the bound now wait.
    fn queue(
        &self,
        inner: &mut Inner,
        ts_ns: u64,
        key: &str,
        value: Option<String>,
    ) -> (u64, bool) {
        let number = inner.next_change;
        inner.next_change += 1;
        let change = Change {
            number,
            ts_ns,
            key: key.to_owned(),
            value,
        };
        inner.queue_bytes += change.held_bytes();
        inner.queue.push_back(change);
        let max = self
            .journal
            .as_ref()
            .map_or(usize::MAX, |j| j.queue_bytes_max);
        (number, inner.queue_bytes > max)
    }

    /// Tells the writer of a queued change (outside the memory's lock: the writer takes
    /// it to drain the queue).
    fn notify(&self, queued: Option<(u64, bool)>) {
        if let (Some(journal), Some((number, wait))) = (&self.journal, queued) {
            (journal.notify)(number, wait);
        }
    }

    /// Starts queueing changes for the log (after the recorder restored the memory).
    pub(crate) fn start_journal(&self) {
        self.inner.write().journaling = true;
    }

    /// Stops queueing changes (the recorder closed or failed) and returns those still
    /// queued.
    pub(crate) fn stop_journal(&self) -> Vec<Change> {
        let mut inner = self.inner.write();
        inner.journaling = false;
        self.take(&mut inner, |_| true)
    }

    /// Takes the queued changes stamped before `ts_ns`.
    pub(crate) fn take_before(&self, ts_ns: u64) -> Vec<Change> {
        match &self.journal {
            Some(j) if j.queued.load(Ordering::SeqCst) => {
                let mut inner = self.inner.write();
                self.take(&mut inner, |c| c.ts_ns < ts_ns)
            }
            _ => Vec::new(),
        }
    }

    /// Takes the queued changes up to number `last` (those already taken are gone).
    pub(crate) fn take_through(&self, last: u64) -> Vec<Change> {
        match &self.journal {
            Some(j) if j.queued.load(Ordering::SeqCst) => {
                let mut inner = self.inner.write();
                self.take(&mut inner, |c| c.number <= last)
            }
            _ => Vec::new(),
        }
    }

    /// Takes the queue's longest prefix whose changes all pass `take`.
    fn take(&self, inner: &mut Inner, take: impl Fn(&Change) -> bool) -> Vec<Change> {
        let n = inner.queue.iter().take_while(|c| take(c)).count();
        let taken: Vec<Change> = inner.queue.drain(..n).collect();
        for c in &taken {
            inner.queue_bytes -= c.held_bytes();
        }
        if inner.queue.is_empty()
            && let Some(j) = &self.journal
        {
            j.queued.store(false, Ordering::SeqCst);
        }
        taken
    }
}

#[cfg(test)]
mod tests {
    #![expect(clippy::unwrap_used, reason = "tests fail loudly on any error")]

    use proptest::prelude::*;
    use serde_json::json;

    use super::*;

    fn value() -> impl Strategy<Value = Value> {
        prop_oneof![
            any::<i64>().prop_map(|n| json!(n)),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(|f| json!(f)),
            ".{0,12}".prop_map(|s| json!(s)),
            prop::collection::vec(any::<u8>(), 0..4).prop_map(|v| json!(v)),
            Just(json!({"a": [1, "\u{1}\"\\"], "b": null})),
        ]
    }

    proptest! {
        /// The size kept up to date equals the length of the JSON serde_json writes,
        /// after any sequence of sets and removes.
        #[test]
        fn the_tracked_size_is_the_json_length(
            ops in prop::collection::vec((0..6usize, ".{0,6}", value(), any::<bool>()), 0..40)
        ) {
            let memory = WorkingMemory::default();
            for (_, key, value, remove) in ops {
                if remove {
                    memory.remove(&key);
                } else {
                    memory.set(key, value).unwrap();
                }
                prop_assert_eq!(memory.json_bytes(), memory.to_json_bytes().len());
            }
        }
    }

    /// Guards a past bug: the queue of changes waiting for the writer held each value as
    /// a `serde_json::Value` tree while its bound counted the value's JSON text, so an
    /// array of small numbers took about 14 times the bound. A queued change holds the
    /// text, and the bound counts what the change holds: with a writer that takes
    /// nothing, the change that takes the queue over the bound is the one told to wait.
    #[test]
    fn queued_changes_hold_json_text_and_the_bound_counts_their_bytes() {
        let waits = Arc::new(parking_lot::Mutex::new(Vec::new()));
        let seen = Arc::clone(&waits);
        // Each change below holds the key "k" (1 byte), the text of 1000 zeros (2001
        // bytes: "[", 999 times "0,", "0]") and its own bookkeeping.
        let per_change = 1 + 2001 + CHANGE_BYTES;
        let memory = WorkingMemory::journaled(
            usize::MAX,
            Arc::new(crate::ManualClock::new(7)),
            Box::new(move |number, wait| seen.lock().push((number, wait))),
            3 * per_change,
        );
        memory.start_journal();
        let zeros = json!(vec![0; 1000]);
        for _ in 0..4 {
            memory.set("k", zeros.clone()).unwrap();
        }
        // The fourth change takes the queue past three changes' bytes.
        assert_eq!(
            *waits.lock(),
            [(0, false), (1, false), (2, false), (3, true)]
        );
        let text = format!("[{}0]", "0,".repeat(999));
        let inner = memory.inner.read();
        assert_eq!(inner.queue.len(), 4);
        assert!(
            inner
                .queue
                .iter()
                .all(|c| c.value.as_deref() == Some(text.as_str()) && c.ts_ns == 7)
        );
        assert_eq!(inner.queue_bytes, 4 * per_change);
    }

    #[test]
    fn a_set_over_the_limit_is_refused_and_changes_nothing() {
        let memory = WorkingMemory::with_limit(32);
        memory.set("goal", json!("cup")).unwrap();
        let before = memory.snapshot();
        let err = memory.set("transcript", json!("x".repeat(64))).unwrap_err();
        assert!(
            matches!(&err, Error::WorkingMemoryTooLarge { key, limit_bytes: 32, .. } if key == "transcript"),
            "{err:?}"
        );
        assert_eq!(memory.snapshot(), before);
        assert_eq!(memory.json_bytes(), memory.to_json_bytes().len());
        // Exactly at the limit is accepted: {"goal":"cup","k":"xxxx..."} of 32 bytes.
        let fill = 32 - br#"{"goal":"cup","k":""}"#.len();
        memory.set("k", json!("x".repeat(fill))).unwrap();
        assert_eq!(memory.to_json_bytes().len(), 32);
    }
}
