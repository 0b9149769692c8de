//! Accounting on the writer's side: the outcomes it counts, the running totals, and the
//! accounting records.

use std::collections::BTreeMap;

use super::Writer;
use crate::codec::{self, AccountingRecord, Counters};
use crate::error::Result;

impl Writer {
    pub(super) fn counts(&mut self, kind: u32) -> &mut Counters {
        let i = kind as usize;
        if self.counts.len() <= i {
            self.counts.resize(i + 1, Counters::default());
        }
        &mut self.counts[i]
    }

    /// Running totals per kind id: restored base, this session's writer outcomes, and
    /// the producers' counts (`seen`, drops at the producer, overflow).
    pub(super) fn totals(&self) -> Vec<Counters> {
        let producers = self.shared.kinds.producer_counts();
        let len = producers
            .iter()
            .map(|p| p.id as usize + 1)
            .chain([self.base.len(), self.counts.len()])
            .max()
            .unwrap_or(0);
        let mut totals = self.base.clone();
        totals.resize(len, Counters::default());
        for (t, c) in totals.iter_mut().zip(&self.counts) {
            t.add(c);
        }
        for p in producers {
            let t = &mut totals[p.id as usize];
            t.seen += p.dropped + p.overflow + p.sent;
            t.dropped += p.dropped;
            t.overflow += p.overflow;
        }
        totals
    }

    pub(super) fn stats(&self) -> BTreeMap<String, Counters> {
        nonzero(&self.totals())
            .into_iter()
            .map(|(k, c)| {
                let name = self
                    .shared
                    .names
                    .name(k)
                    .map_or_else(|| format!("#{k}"), |n| n.to_string());
                (name, c)
            })
            .collect()
    }

    /// Writes an accounting record of the kinds whose totals changed since the last one
    /// (none is written when neither they nor the watermark changed, unless `always`:
    /// readers learn of a watermark from these records), after naming every kind
    /// still pending (drop-tier kinds never reach the writer otherwise). The segment
    /// preamble's snapshot becomes the whole of these totals before the record is
    /// appended, so a segment that opens from then on starts from them. Once
    /// [`ACCOUNTING_SNAPSHOT_EVERY_NS`](super::ACCOUNTING_SNAPSHOT_EVERY_NS) has passed
    /// since the last one, and the log has grown by
    /// [`ACCOUNTING_SNAPSHOT_RECORDS_PER_KIND`](super::ACCOUNTING_SNAPSHOT_RECORDS_PER_KIND)
    /// records per kind it lists, that snapshot is also written right after the
    /// record: a fold up to any time then starts within about a minute of it.
    pub(super) fn emit_accounting(&mut self, at: u64, always: bool) -> Result<()> {
        let totals = self.totals();
        let changed: Vec<(u32, Counters)> = nonzero(&totals)
            .into_iter()
            .filter(|&(k, c)| self.accounted.get(k as usize) != Some(&c))
            .collect();
        let written_since =
            !self.out.is_empty() || self.log.next_seq().0 != self.accounted_next_seq;
        if changed.is_empty()
            && !always
            && (self.watermark_ns == self.accounted_watermark_ns || !written_since)
        {
            return Ok(());
        }
        let pending = self.shared.names.take_pending();
        if let Some(&(last, _)) = pending.last() {
            self.named_upto = self.named_upto.max(last);
            self.emit_dictionary(pending, at);
        }
        // Everything queued before the record goes first, under the snapshot before it.
        self.flush_out()?;
        let kinds = nonzero(&totals);
        let snapshot_due = at >= self.next_accounting_snapshot_ns
            && self
                .log
                .next_seq()
                .0
                .saturating_sub(self.accounting_snapshot_next_seq)
                >= (kinds.len() as u64).saturating_mul(super::ACCOUNTING_SNAPSHOT_RECORDS_PER_KIND);
        let snapshot = codec::encode_to_vec(&AccountingRecord {
            snapshot: true,
            watermark_ns: self.watermark_ns,
            kinds,
        });
        self.preamble_stale = true;
        self.emit_encoded(
            codec::ACCOUNTING,
            at,
            &AccountingRecord {
                snapshot: false,
                watermark_ns: self.watermark_ns,
                kinds: changed,
            },
        );
        if snapshot_due {
            self.emit_raw(codec::ACCOUNTING, at, &snapshot);
            self.next_accounting_snapshot_ns =
                at.saturating_add(super::ACCOUNTING_SNAPSHOT_EVERY_NS);
        }
        self.preamble_accounting = Some(snapshot);
        self.flush_out()?;
        self.accounted = totals;
        self.accounted_watermark_ns = self.watermark_ns;
        self.accounted_next_seq = self.log.next_seq().0;
        if snapshot_due {
            self.accounting_snapshot_next_seq = self.accounted_next_seq;
        }
        Ok(())
    }
}

/// The non-zero counters of `totals` (indexed by kind id), by id.
pub(super) fn nonzero(totals: &[Counters]) -> Vec<(u32, Counters)> {
    totals
        .iter()
        .enumerate()
        .filter(|(_, c)| **c != Counters::default())
        .map(|(k, c)| (u32::try_from(k).unwrap_or(u32::MAX), *c))
        .collect()
}
