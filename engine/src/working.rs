//! Working memory: the current decision window, a cache and never the truth.

use std::collections::BTreeMap;

use parking_lot::RwLock;
use serde_json::Value;

/// A concurrent map from string keys to JSON values. Volatile: it survives a restart
/// only through the checkpoints the recorder writes into the log
/// ([`Recorder::checkpoint`](crate::Recorder::checkpoint)), which
/// [`Recorder::open`](crate::Recorder::open) can restore.
#[derive(Debug, Default)]
pub struct WorkingMemory {
    map: RwLock<BTreeMap<String, Value>>,
}

impl WorkingMemory {
    /// The value under `key`.
    pub fn get(&self, key: &str) -> Option<Value> {
        self.map.read().get(key).cloned()
    }

    /// Sets `key` to `value`, returning the previous value.
    pub fn set(&self, key: impl Into<String>, value: Value) -> Option<Value> {
        self.map.write().insert(key.into(), value)
    }

    /// Removes `key`, returning its value.
    pub fn remove(&self, key: &str) -> Option<Value> {
        self.map.write().remove(key)
    }

    /// Number of keys.
    pub fn len(&self) -> usize {
        self.map.read().len()
    }

    /// Whether the memory is empty.
    pub fn is_empty(&self) -> bool {
        self.map.read().is_empty()
    }

    /// A copy of every key and value.
    pub fn snapshot(&self) -> BTreeMap<String, Value> {
        self.map.read().clone()
    }

    /// Replaces the whole content (used to restore a checkpoint).
    pub fn replace(&self, content: BTreeMap<String, Value>) {
        *self.map.write() = content;
    }

    pub(crate) fn to_json_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(&*self.map.read()).unwrap_or_else(|_| b"{}".to_vec())
    }
}
