//! What a recorder restores when it opens a log: the dictionary, the accounting totals,
//! the working memory and the last stamps, read back from the log's last segments.

use std::collections::BTreeMap;
use std::path::Path;

use blackbox_log::{LogReader, Seq};

use crate::codec::{self, Counters};
use crate::error::{Error, Result};
use crate::names::DictionaryFold;
use crate::shared::Shared;
use crate::writer::kb::{self, KbCarry};

/// What the log says about the state the last session left.
#[derive(Debug, Default)]
pub(crate) struct Restored {
    /// Running totals per kind id, as the log's accounting records fold to.
    pub(crate) totals: Vec<Counters>,
    /// Timestamp of the log's last record.
    pub(crate) last_ts_ns: u64,
    /// The working memory as the log holds it: the last checkpoint and every delta
    /// after it (empty when not restored).
    pub(crate) working: BTreeMap<String, serde_json::Value>,
    /// Whether the log holds any record.
    pub(crate) any_record: bool,
    /// The largest watermark of the accounting records read (0: none).
    pub(crate) watermark_ns: u64,
    /// The knowledge base's last snapshot and the commits after it, as the last
    /// segments hold them.
    pub(crate) kb_carry: KbCarry,
}

/// How many segments, newest first, `restore` looks in for the knowledge base's last
/// snapshot: every segment started after one opens with it (its preamble), so it is in
/// the last one, or in the one before when the last was left empty by a crash.
const KB_CARRY_SEGMENTS: usize = 2;

/// Restores the dictionary, the accounting totals and the working memory from the log,
/// reading back from the last segment: to the last segment that opens with the
/// dictionary (or the first: [`dictionary_start`](crate::names::dictionary_start)) for
/// the names; to the last segment that holds an
/// accounting snapshot (or the first) for the totals, folding the accounting records
/// from its last snapshot on; and as far as the last checkpoint, whose memory the
/// working-memory deltas after it are then folded into (reading forward from it): the
/// memory is what the log holds, also after a crash that left no checkpoint at the end.
/// Every segment's preamble carries the last checkpoint and the deltas since, so that
/// is usually the last segment, and a log pruned from its front still holds it.
pub(crate) fn restore(dir: &Path, shared: &Shared, restore_working: bool) -> Result<Restored> {
    let segments = blackbox_log::list_segments(dir)?;
    let reader = LogReader::open(dir)?;
    let mut restored = Restored::default();
    let mut dict_done = false;
    let mut accounting_done = false;
    let mut checkpoint_done = !restore_working;
    let mut checkpoint = None;
    let mut kb_done = false;
    // Per segment read for the knowledge base, newest first: its knowledge-base records.
    let mut kb_segments: Vec<Vec<blackbox_log::LogRecord>> = Vec::new();
    // The names are folded from the last segment that opens with the dictionary.
    let dict_start = crate::names::dictionary_start(&reader, &segments, u64::MAX)?;
    // Per segment read, newest first: its dictionary entries and accounting records.
    let mut dict_segments: Vec<Vec<(u64, u32, String)>> = Vec::new();
    let mut accounting_segments: Vec<Vec<blackbox_log::LogRecord>> = Vec::new();
    for (i, seg) in segments.iter().enumerate().rev() {
        if dict_done && accounting_done && checkpoint_done && kb_done {
            break;
        }
        let mut seg_kb = Vec::new();
        let mut holds_kb_snapshot = false;
        let end = segments.get(i + 1).map(|s| s.first_seq);
        let mut seg_dict = Vec::new();
        let mut seg_accounting = Vec::new();
        let mut holds_snapshot = false;
        let mut last_checkpoint = None;
        let range = match end {
            Some(end) => reader.records(Seq(seg.first_seq)..Seq(end))?,
            None => reader.records(Seq(seg.first_seq)..)?,
        };
        for r in range {
            let r = r?;
            let t = r.record_type();
            if t == codec::DICTIONARY && !dict_done {
                let seq = r.seq().0;
                let d =
                    codec::access::<codec::ArchivedDictionaryRecord>(r.payload()).map_err(|e| {
                        Error::Restore {
                            seq,
                            reason: format!("dictionary record: {e}"),
                        }
                    })?;
                for e in d.entries.iter() {
                    seg_dict.push((seq, e.0.to_native(), e.1.as_str().to_owned()));
                }
            } else if t == codec::ACCOUNTING && !accounting_done {
                // A segment this reads back to holds a snapshot or is the first: the
                // last watermark written is among these records (a snapshot carries
                // the watermark of the record it was taken with).
                if let Some(w) = codec::accounting_watermark_ns(r.payload()) {
                    restored.watermark_ns = restored.watermark_ns.max(w);
                }
                if codec::is_accounting_snapshot(r.payload()) == Some(true) {
                    // It holds the fold of the records before it: start from it.
                    seg_accounting.clear();
                    holds_snapshot = true;
                }
                seg_accounting.push(r);
            } else if t == codec::CHECKPOINT && !checkpoint_done {
                last_checkpoint = Some(r);
            } else if (t == codec::KB || t == codec::KB_CARRIED || t == codec::KB_SNAPSHOT)
                && !kb_done
            {
                holds_kb_snapshot |= t == codec::KB_SNAPSHOT;
                seg_kb.push(r);
            }
        }
        if !kb_done {
            kb_segments.push(seg_kb);
            kb_done = holds_kb_snapshot || kb_segments.len() >= KB_CARRY_SEGMENTS;
        }
        if !dict_done {
            dict_segments.push(seg_dict);
            dict_done = seg.first_seq <= dict_start;
        }
        if !accounting_done {
            accounting_segments.push(seg_accounting);
            accounting_done = holds_snapshot || i == 0;
        }
        if let Some(r) = last_checkpoint {
            checkpoint = Some(r);
            checkpoint_done = true;
        }
    }
    if restore_working {
        let (mut memory, from) = match &checkpoint {
            Some(r) => {
                let memory = serde_json::from_slice(r.payload()).map_err(|e| Error::Restore {
                    seq: r.seq().0,
                    reason: format!("checkpoint record: {e}"),
                })?;
                (memory, r.seq().0 + 1)
            }
            None => (serde_json::Map::new(), 0),
        };
        if segments.last().is_some() {
            for r in reader.records(Seq(from)..)? {
                let r = r?;
                if r.record_type() == codec::WORKING {
                    let delta =
                        crate::delta::WorkingDelta::decode(r.payload()).map_err(|reason| {
                            Error::Restore {
                                seq: r.seq().0,
                                reason: format!("working-memory delta record: {reason}"),
                            }
                        })?;
                    delta.apply(&mut memory);
                }
            }
        }
        restored.working = memory.into_iter().collect();
        shared.working.restore(restored.working.clone());
    }
    let mut fold = DictionaryFold::new();
    for (seq, id, name) in dict_segments.into_iter().rev().flatten() {
        fold.add(id, &name).map_err(|reason| Error::Restore {
            seq,
            reason: format!("dictionary record: {reason}"),
        })?;
    }
    let mut totals: BTreeMap<u32, Counters> = BTreeMap::new();
    for r in accounting_segments.into_iter().rev().flatten() {
        let seq = r.seq().0;
        let bad = |e: rkyv::rancor::Error| Error::Restore {
            seq,
            reason: format!("accounting record: {e}"),
        };
        let a = codec::access::<codec::ArchivedAccountingRecord>(r.payload()).map_err(bad)?;
        let mut kinds = Vec::with_capacity(a.kinds.len());
        for e in a.kinds.iter() {
            let kind = e.0.to_native();
            if fold.name(kind).is_none() {
                return Err(Error::Restore {
                    seq,
                    reason: format!(
                        "accounting record: kind id {kind} is named by no dictionary record"
                    ),
                });
            }
            kinds.push((kind, e.1.to_counters()));
        }
        codec::fold_accounting(&mut totals, a.snapshot, kinds);
    }
    for (kind, c) in totals {
        // The id is at most NAMES_PER_LOG_MAX: the dictionary names it.
        let i = kind as usize;
        if restored.totals.len() <= i {
            restored.totals.resize(i + 1, Counters::default());
        }
        restored.totals[i] = c;
    }
    shared.names.restore(&fold);
    restored.kb_carry = kb_carry(kb_segments)?;
    Ok(restored)
}

/// The knowledge-base carry from the knowledge-base records of the last segments
/// (newest segment first): the last snapshot, then every commit after it whose version
/// is above the last one taken (a commit and its carried copy are one commit).
fn kb_carry(segments: Vec<Vec<blackbox_log::LogRecord>>) -> Result<KbCarry> {
    let mut carry = KbCarry::default();
    let mut last = 0;
    for r in segments.into_iter().rev().flatten() {
        let seq = r.seq().0;
        let t = r.record_type();
        let version = kb::version_of(r.payload()).map_err(|e| Error::Restore {
            seq,
            reason: format!("knowledge-base record: {e}"),
        })?;
        if t == codec::KB_SNAPSHOT {
            carry.set_snapshot(r.payload().to_vec());
            last = version;
        } else if carry.has_snapshot() && version > last {
            let carried = if t == codec::KB_CARRIED {
                Some(r.payload().to_vec())
            } else {
                kb::carried_commit(seq, r.ts_ns(), r.payload())
            };
            match carried {
                Some(c) => carry.push_carried(c),
                // Not carried when written: nothing is until the next snapshot.
                None => carry = KbCarry::default(),
            }
            last = version;
        }
    }
    Ok(carry)
}
