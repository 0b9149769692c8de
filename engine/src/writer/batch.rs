//! The batch: records encoded into the writer's arena, appended to the log together.

use blackbox_log::{Record, RecordType, Seq};

use super::Writer;
use crate::codec::{self, EventRecord, WrittenTier};
use crate::error::Result;
use crate::shared::EventMsg;

impl Writer {
    pub(super) fn emit_event(&mut self, mut msg: EventMsg, tier: WrittenTier, weight: f64) {
        if tier != WrittenTier::Preroll {
            self.out_kept.push(msg.kind.id);
        }
        let record = EventRecord {
            kind: msg.kind.id,
            source: msg.source,
            event_time_ns: msg.event_time_ns,
            recorded_ns: msg.ts_ns,
            tier: tier as u8,
            weight,
            encoding: msg.encoding as u8,
            payload: std::mem::take(&mut msg.payload),
            values: std::mem::take(&mut msg.values),
        };
        // Encoded straight into the batch buffer, without the padding rkyv archives
        // need: an event record is read with byte copies, at any alignment.
        let at = self.stamp(msg.ts_ns);
        let start = self.arena.len();
        record.encode_with(at, |b| self.arena.extend_from_slice(b));
        self.out
            .push((codec::EVENT, at, start..self.arena.len(), record.kind));
    }

    /// Queues a record encoded straight into the batch buffer, stamped no earlier than
    /// anything before it.
    pub(super) fn emit_encoded<T: codec::Encode>(&mut self, t: RecordType, ts_ns: u64, value: &T) {
        let at = self.stamp(ts_ns);
        let range = codec::encode_append(value, &mut self.arena);
        self.out.push((t, at, range, 0));
    }

    /// Queues a record, stamped no earlier than anything before it.
    pub(super) fn emit_raw(&mut self, t: RecordType, ts_ns: u64, bytes: &[u8]) {
        let at = self.stamp(ts_ns);
        let start = self.arena.len();
        self.arena.extend_from_slice(bytes);
        self.out.push((t, at, start..self.arena.len(), 0));
    }

    /// Appends the batch's encoded records; returns the last seq. On an error nothing
    /// is cleared: `fail` counts the kept events among them as lost.
    pub(super) fn flush_out(&mut self) -> Result<Option<Seq>> {
        if self.out.is_empty() {
            return Ok(None);
        }
        // Before the append: a segment it rolls into must open with every name used.
        if self.preamble_stale {
            self.set_preamble()?;
            self.preamble_stale = false;
        }
        let records: Vec<Record<'_>> = self
            .out
            .iter()
            .map(|(t, ts, range, tag)| {
                Record::new(*t, *ts, &self.arena[range.clone()]).with_tag(*tag)
            })
            .collect();
        let last = self.log.append_batch(&records)?;
        self.dirty = true;
        self.out.clear();
        self.arena.clear();
        self.out_kept.clear();
        Ok(last)
    }
}
