//! The batch: records encoded into the writer's arena, appended to the log together.

use blackbox_log::{Record, RecordType, Seq};

use super::Writer;
use crate::codec::{self, WrittenTier};
use crate::error::Result;
use crate::shared::EventMsg;

impl Writer {
    /// Queues an event record: the bytes its producer encoded, appended to the batch
    /// buffer as they are, behind a header that says how it was kept (`tier`,
    /// `weight`) and, when the writer stamps it later than its producer did, when it
    /// was recorded.
    pub(super) fn emit_event(&mut self, msg: EventMsg, tier: WrittenTier, weight: f64) {
        if tier != WrittenTier::Preroll {
            self.out_kept.push(msg.kind.id);
        }
        let at = self.stamp(msg.ts_ns);
        let start = self.arena.len();
        msg.record.restamp(tier, msg.ts_ns, weight, at, |b| {
            self.arena.extend_from_slice(b);
        });
        self.out
            .push((codec::EVENT, at, start..self.arena.len(), msg.kind.id));
    }

    /// Queues a record encoded straight into the batch buffer, stamped no earlier than
    /// anything before it.
    pub(super) fn emit_encoded<T: codec::Encode>(&mut self, t: RecordType, ts_ns: u64, value: &T) {
        let at = self.stamp(ts_ns);
        let range = codec::encode_append(value, &mut self.arena);
        self.out.push((t, at, range, t.index_tag()));
    }

    /// Queues a record, stamped no earlier than anything before it.
    pub(super) fn emit_raw(&mut self, t: RecordType, ts_ns: u64, bytes: &[u8]) {
        let at = self.stamp(ts_ns);
        if t == codec::CHECKPOINT {
            self.queued_deltas = 0;
            self.queued_delta_bytes = 0;
            self.queued_checkpoint_bytes = bytes.len();
        }
        let start = self.arena.len();
        self.arena.extend_from_slice(bytes);
        self.out
            .push((t, at, start..self.arena.len(), t.index_tag()));
    }

    /// Appends the batch's encoded records; returns the last seq. On an error nothing
    /// is cleared: `fail` counts the kept events among them as lost.
    ///
    /// The batch is appended in pieces that end at each checkpoint and working-memory
    /// delta, and the memory the preamble carries is brought up to date after each:
    /// a segment the log starts within the batch opens with the memory as the records
    /// before it left it, no more and no less.
    pub(super) fn flush_out(&mut self) -> Result<Option<Seq>> {
        if self.out.is_empty() {
            return Ok(None);
        }
        // Before the append: a segment it rolls into must open with every name used.
        if self.preamble_stale {
            self.set_preamble()?;
            self.preamble_stale = false;
        }
        let (first_ts, last_ts) = match (self.out.first(), self.out.last()) {
            (Some(first), Some(last)) => (first.1, last.1),
            _ => return Ok(None),
        };
        self.close_pins(first_ts, self.log.next_seq().0);
        let carried = |t: RecordType| t == codec::CHECKPOINT || t == codec::WORKING;
        let mut last = None;
        let mut from = 0;
        while from < self.out.len() {
            let to = self.out[from..]
                .iter()
                .position(|o| carried(o.0))
                .map_or(self.out.len(), |i| from + i + 1);
            let records: Vec<Record<'_>> = self.out[from..to]
                .iter()
                .map(|(t, ts, range, tag)| {
                    Record::new(*t, *ts, &self.arena[range.clone()]).with_tag(*tag)
                })
                .collect();
            last = self.log.append_batch(&records)?.or(last);
            let (t, _, range, _) = &self.out[to - 1];
            if carried(*t) {
                let (t, payload) = (*t, self.arena[range.clone()].to_vec());
                self.carry(t, payload)?;
            }
            from = to;
        }
        if let Some(seq) = last {
            self.after_batch(last_ts, seq.0);
        }
        self.dirty = true;
        self.out.clear();
        self.arena.clear();
        self.out_kept.clear();
        Ok(last)
    }
}
