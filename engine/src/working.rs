//! Working memory: the current decision window, a cache and never the truth.

use std::collections::BTreeMap;

use parking_lot::RwLock;
use serde_json::Value;

use crate::error::{Error, Result};

/// A concurrent map from string keys to JSON values. Volatile: it survives a restart
/// only through the checkpoints the recorder writes into the log
/// ([`Recorder::checkpoint`](crate::Recorder::checkpoint)), which
/// [`Recorder::open`](crate::Recorder::open) can restore.
///
/// A checkpoint is one log record holding the whole memory as a JSON object, so the
/// memory is bounded by the log's record limit: a [`WorkingMemory::set`] that would make
/// its JSON larger is refused and changes nothing. Every checkpoint (on request, timed,
/// at an incident, at close) therefore fits, and a restart restores the memory whole.
#[derive(Debug)]
pub struct WorkingMemory {
    inner: RwLock<Inner>,
    limit_bytes: usize,
}

#[derive(Debug, Default)]
struct Inner {
    map: BTreeMap<String, Value>,
    /// Bytes of `serde_json::to_vec(&map)`, kept up to date on every change.
    json_bytes: usize,
}

impl Default for WorkingMemory {
    /// A memory without a size limit (the recorder's has the log's record limit).
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
fn json_len<T: serde::Serialize + ?Sized>(value: &T) -> usize {
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
    /// A memory whose JSON may take at most `limit_bytes`.
    pub(crate) fn with_limit(limit_bytes: usize) -> WorkingMemory {
        WorkingMemory {
            inner: RwLock::new(Inner {
                map: BTreeMap::new(),
                json_bytes: 2,
            }),
            limit_bytes,
        }
    }

    /// The value under `key`.
    pub fn get(&self, key: &str) -> Option<Value> {
        self.inner.read().map.get(key).cloned()
    }

    /// Sets `key` to `value`, returning the previous value.
    ///
    /// # Errors
    ///
    /// [`Error::WorkingMemoryTooLarge`] when the memory as JSON would exceed the log's
    /// record limit, so it could no longer be checkpointed whole; the memory is left as
    /// it was.
    pub fn set(&self, key: impl Into<String>, value: Value) -> Result<Option<Value>> {
        let key = key.into();
        let added = entry_len(&key, &value);
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
        Ok(inner.map.insert(key, value))
    }

    /// Removes `key`, returning its value.
    pub fn remove(&self, key: &str) -> Option<Value> {
        let mut inner = self.inner.write();
        let old = inner.map.remove(key)?;
        let n = inner.map.len() + 1;
        let entries = inner.json_bytes - object_len(n, 0) - entry_len(key, &old);
        inner.json_bytes = object_len(n - 1, entries);
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

    /// The most bytes the memory may take as JSON: the log's record limit.
    pub fn limit_bytes(&self) -> usize {
        self.limit_bytes
    }

    /// Replaces the whole content (used to restore a checkpoint, which fitted a record).
    pub fn replace(&self, content: BTreeMap<String, Value>) {
        let entries = content.iter().map(|(k, v)| entry_len(k, v)).sum();
        let mut inner = self.inner.write();
        inner.json_bytes = object_len(content.len(), entries);
        inner.map = content;
    }

    pub(crate) fn to_json_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(&self.inner.read().map).unwrap_or_else(|_| b"{}".to_vec())
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
