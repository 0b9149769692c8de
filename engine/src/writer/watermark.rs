//! The watermark: the stamp before which every event is in the log, raised as the
//! generations producers count into drain.

use std::sync::atomic::Ordering;

use super::Writer;

impl Writer {
    /// Raises the watermark at the end of a batch, `now` being the clock reading the
    /// caller took for it (no events of this batch are pending after it).
    ///
    /// Producers count each event in the current generation before they read the clock
    /// (`Shared::count_stamp`). The writer closes a generation with a clock reading: it
    /// raises the stamp floor to the reading, then moves the generation on, so an event
    /// counted in a later generation is stamped no earlier than the reading, whatever
    /// the clock does. Once it has received every event counted in the closed
    /// generation, every event stamped before that reading has reached it, and it
    /// closes the next generation (at most one is closing at a time, so the events of
    /// earlier ones were all received before). Under load that never pauses, producers
    /// count into the new generation while the old one drains: the watermark trails the
    /// clock by about a batch or two instead of standing still.
    ///
    /// What reached the writer is in the log by the next record written, but for the
    /// events the pre-roll ring holds, which an incident may still write (with `ring`):
    /// the watermark is the reading or the oldest of those, the largest so far.
    pub(super) fn advance_watermark(&mut self, ring: bool, now: u64) {
        if let Some((generation, at)) = self.closing
            && self.drained(generation)
        {
            self.closing = None;
            self.settle_watermark(ring, at);
        }
        if self.closing.is_none() {
            // IMPORTANT: the floor first, then the generation (see `count_stamp`).
            self.shared.clock.raise_floor(now);
            let closed = self.generation;
            self.generation += 1;
            self.shared
                .generation
                .store(self.generation, Ordering::SeqCst);
            self.closing = Some((closed, now));
            // Quiet producers: the generation may have drained already.
            if self.drained(closed) {
                self.closing = None;
                self.settle_watermark(ring, now);
            }
        }
    }

    /// Whether every event counted in `generation` (closed) has reached the writer.
    /// The count of a parity holds that generation's and the drained ones' before it.
    pub(super) fn drained(&self, generation: u64) -> bool {
        let i = (generation & 1) as usize;
        self.shared.stamped[i].load(Ordering::SeqCst) == self.received[i]
    }

    /// Every event stamped before `at` has reached the writer: the watermark moves to
    /// `at`, or to the oldest event the ring holds (with `ring`). The ring first drops
    /// what no incident can write any more: a trigger yet to reach the writer is
    /// stamped at `at` or later, so its pre-roll starts no earlier than `at` less the
    /// pre-roll's length; what is older would otherwise hold the watermark back for
    /// good when no later event comes to push it out (`evict_ring`).
    pub(super) fn settle_watermark(&mut self, ring: bool, at: u64) {
        if ring && let Some(incident) = &self.incident {
            let horizon = at.saturating_sub(incident.preroll_ns);
            self.evict_ring_before(horizon);
        }
        let held = if ring {
            self.ring_min.front().map(|&(ts, _)| ts)
        } else {
            None
        };
        let w = held.map_or(at, |h| h.min(at));
        self.watermark_ns = self.watermark_ns.max(w);
    }
}
