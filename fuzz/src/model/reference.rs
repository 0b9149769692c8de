//! The reference models, plain data with no code of the crates: the log as a `Vec` of
//! records with their durability, and the recorder as the events it keeps and the
//! states of its working memory.

use std::collections::BTreeMap;

use serde_json::Value;

/// One seq of the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    /// A record the host appended.
    Rec { ty: u16, ts: u64, payload: Vec<u8> },
    /// A prune record: the seqs `first_seq..=last_seq` went.
    Prune { first_seq: u64, last_seq: u64 },
}

/// A pin the model asked the log to keep: `(id, first seq, last seq or open)`.
pub type ModelPin = (u64, u64, Option<u64>);

/// The log: every seq it gave, from 0; where it starts after its prunings; the highest
/// seq it acknowledged as durable; the pins set.
#[derive(Debug, Default)]
pub struct LogModel {
    pub entries: Vec<Entry>,
    pub start: u64,
    pub acked: Option<u64>,
    pub pins: Vec<ModelPin>,
    pub pin_ids: u64,
    /// Records appended so far (what payloads are made from).
    pub appended: u64,
}

impl LogModel {
    pub fn next_seq(&self) -> u64 {
        self.entries.len() as u64
    }

    pub fn last_seq(&self) -> Option<u64> {
        self.next_seq().checked_sub(1)
    }

    /// The newest record's time.
    pub fn last_ts(&self) -> u64 {
        self.entries
            .iter()
            .rev()
            .find_map(|e| match e {
                Entry::Rec { ts, .. } => Some(*ts),
                Entry::Prune { .. } => None,
            })
            .unwrap_or(0)
    }

    /// `seq` is acknowledged as durable, and every seq before it.
    pub fn ack(&mut self, seq: Option<u64>) {
        if seq > self.acked {
            self.acked = seq;
        }
    }

    /// Whether `seq` is pinned by a pin the model still holds.
    pub fn pinned(&self, seq: u64) -> bool {
        self.pins
            .iter()
            .any(|&(_, first, last)| first <= seq && last.is_none_or(|l| seq <= l))
    }
}

/// The payload of the `n`th record appended: a pattern of `len` bytes unique to `n`.
pub fn payload(n: u64, len: usize) -> Vec<u8> {
    let n = n.to_le_bytes();
    (0..len)
        .map(|i| n[i % 8] ^ (i.to_le_bytes()[0]).wrapping_mul(31))
        .collect()
}

/// An event the recorder keeps (written to its log).
#[derive(Debug, Clone, PartialEq)]
pub struct KeptEvent {
    pub kind: String,
    pub ts: u64,
    pub payload: Vec<u8>,
    pub values: Vec<(String, f64)>,
    /// The seq, when the recorder gave it (evidence).
    pub seq: Option<u64>,
}

/// What the recorder holds: the events it keeps, in order, and the working memory
/// after every change.
#[derive(Debug, Default)]
pub struct RecorderModel {
    /// Kept events, oldest first; `events_start` of them were pruned or never were.
    pub events: Vec<KeptEvent>,
    pub events_start: usize,
    /// Events the recorder acknowledged as durable (a `sync`, or evidence in `Sync`
    /// mode): a crash keeps at least these.
    pub events_acked: usize,
    /// The working memory after each change (`working[0]` is empty), with the time of
    /// the change.
    pub working: Vec<(u64, BTreeMap<String, Value>)>,
    /// Changes acknowledged as durable.
    pub working_acked: usize,
    /// Working-memory values handed out so far (each value is new, so each state is).
    pub values_given: u64,
}

impl RecorderModel {
    pub fn new() -> RecorderModel {
        RecorderModel {
            working: vec![(0, BTreeMap::new())],
            ..RecorderModel::default()
        }
    }

    /// The working memory now.
    pub fn memory(&self) -> &BTreeMap<String, Value> {
        &self.working[self.working.len() - 1].1
    }

    /// The working memory at time `t`: after every change stamped at or before it.
    pub fn memory_at(&self, t: u64) -> &BTreeMap<String, Value> {
        let i = self
            .working
            .iter()
            .rposition(|(ts, _)| *ts <= t)
            .unwrap_or(0);
        &self.working[i].1
    }
}
