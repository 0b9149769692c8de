//! Names on the writer's side: the dictionary records an event needs, and the segment
//! preamble (the whole dictionary, the accounting snapshot, the policy).

use super::Writer;
use crate::codec::{self, DictionaryRecord};
use crate::error::Result;
use crate::shared::EventMsg;
use blackbox_log::RecordType;

impl Writer {
    /// Writes the dictionary entries an event needs that are not written yet, right
    /// before it. Names interned after the event's own (by other producers, for later
    /// events) wait for the event that needs them, so where dictionary records fall
    /// depends on the events alone, not on how the writer's batches happen to be cut.
    pub(super) fn name(&mut self, e: &EventMsg) {
        let need = e.record.names_upto;
        if need <= self.named_upto {
            return;
        }
        let entries = self.shared.names.take_pending_upto(need);
        self.named_upto = need;
        if !entries.is_empty() {
            // Stamped with the event's own time (never before the last stamp): not the
            // clock, which may be ahead of the batch, and not 0 in a new log.
            self.emit_dictionary(entries, e.ts_ns);
        }
    }

    /// Queues a dictionary record; the segment preamble is brought up to date once, by
    /// the next `flush_out`, before anything is appended.
    pub(super) fn emit_dictionary(&mut self, entries: Vec<(u32, String)>, now: u64) {
        self.emit_encoded(codec::DICTIONARY, now, &DictionaryRecord { entries });
        self.preamble_dictionary.clear();
        self.preamble_stale = true;
    }

    /// Sets the segment preamble: the whole dictionary, then the accounting snapshot,
    /// then the policy in force, then the knowledge base's last snapshot and the
    /// commits after it, then the working memory carried (the last checkpoint and the
    /// deltas since).
    pub(super) fn set_preamble(&mut self) -> Result<()> {
        if self.preamble_dictionary.is_empty() {
            self.preamble_dictionary = codec::encode_to_vec(&DictionaryRecord {
                entries: self.shared.names.all(),
            });
        }
        let mut records = vec![(codec::DICTIONARY, self.preamble_dictionary.clone())];
        if let Some(totals) = &self.preamble_accounting {
            records.push((codec::ACCOUNTING, totals.clone()));
        }
        records.push((codec::POLICY, self.policy_toml.clone()));
        records.extend(self.kb_carry.records());
        // The working memory's carry follows: `carry` cuts the preamble back to here
        // before it carries a new checkpoint.
        self.preamble_base_len = records.len();
        if let Some(checkpoint) = &self.carried_checkpoint {
            records.push((codec::CHECKPOINT, checkpoint.clone()));
            for delta in &self.carried_deltas {
                records.push((codec::WORKING, delta.clone()));
            }
        }
        self.log.set_segment_preamble(records)?;
        Ok(())
    }

    /// Carries a checkpoint or a working-memory delta just appended in the preamble: a
    /// checkpoint replaces what was carried, a delta is added after it. Before the log
    /// holds any checkpoint, the memory carried starts empty (as readers fold it).
    pub(super) fn carry(&mut self, t: RecordType, payload: Vec<u8>) -> Result<()> {
        if t == codec::CHECKPOINT {
            self.carried_deltas.clear();
            self.log.truncate_segment_preamble(self.preamble_base_len);
            self.log
                .push_segment_preamble(codec::CHECKPOINT, payload.clone())?;
            self.carried_checkpoint = Some(payload);
            return Ok(());
        }
        if self.carried_checkpoint.is_none() {
            self.carried_checkpoint = Some(b"{}".to_vec());
            self.log.truncate_segment_preamble(self.preamble_base_len);
            self.log
                .push_segment_preamble(codec::CHECKPOINT, b"{}".to_vec())?;
        }
        self.log
            .push_segment_preamble(codec::WORKING, payload.clone())?;
        self.carried_deltas.push(payload);
        Ok(())
    }
}
