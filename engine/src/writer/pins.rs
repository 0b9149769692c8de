//! Incident windows pinned against the log's disk budget: the segments that hold an
//! incident's pre-roll, trigger and post-roll are kept (within the budget's
//! `pinned_max_bytes`) when the log prunes its oldest segments.

use std::collections::VecDeque;

use blackbox_log::Pin;

use super::Writer;

/// The writer's record of recent batches and of the incident windows it pinned.
#[derive(Debug, Default)]
pub(super) struct Pins {
    /// (last stamp, last seq) of recent batches, oldest first: enough of them to find
    /// the first seq stamped at or after the start of a pre-roll.
    batches: VecDeque<(u64, u64)>,
    /// The pins, each with the end of its post-roll (ns): open (`last_seq` `None`)
    /// until a batch starts at or after that end.
    pinned: Vec<(Pin, u64)>,
    /// The log's segment count when the release requests were last read.
    segments_seen: usize,
}

/// The directory, inside the log's, where `blackbox release` (another process) asks a
/// running recorder to release incidents: one empty file per incident, named by its
/// trigger's seq. A dot directory: the log ignores it.
pub const RELEASE_DIR: &str = ".release";

impl Pins {
    /// The first seq a record stamped at or after `start_ns` can have: right after the
    /// last batch that ended before it.
    fn first_seq_from(&self, start_ns: u64) -> u64 {
        self.batches
            .iter()
            .rev()
            .find(|&&(ts, _)| ts < start_ns)
            .map_or(0, |&(_, seq)| seq + 1)
    }
}

impl Writer {
    /// Pins an incident (named by its trigger's seq) from the first record stamped in
    /// its pre-roll, open until its post-roll ends.
    pub(super) fn pin_incident(
        &mut self,
        trigger_seq: u64,
        preroll_start_ns: u64,
        postroll_end_ns: u64,
    ) {
        if !self.retention_bounded {
            return;
        }
        let first_seq = self.pins.first_seq_from(preroll_start_ns);
        self.pins.pinned.push((
            Pin {
                id: trigger_seq,
                first_seq,
                last_seq: None,
            },
            postroll_end_ns,
        ));
        self.log
            .set_pins(self.pins.pinned.iter().map(|(p, _)| *p).collect());
    }

    /// Before a batch whose first record is stamped `first_ts` and gets seq `next_seq`:
    /// closes the pins whose post-roll ended before it.
    pub(super) fn close_pins(&mut self, first_ts: u64, next_seq: u64) {
        let mut changed = false;
        for (pin, end) in &mut self.pins.pinned {
            if pin.last_seq.is_none() && first_ts >= *end {
                pin.last_seq = Some(next_seq.saturating_sub(1).max(pin.first_seq));
                changed = true;
            }
        }
        if changed {
            self.log
                .set_pins(self.pins.pinned.iter().map(|(p, _)| *p).collect());
        }
    }

    /// After a batch that ended at stamp `last_ts` with seq `last_seq`: remembers it,
    /// and drops the pins the log evicted when it pruned.
    pub(super) fn after_batch(&mut self, last_ts: u64, last_seq: u64) {
        if !self.retention_bounded {
            return;
        }
        self.pins.batches.push_back((last_ts, last_seq));
        let keep_ns = self.incident.as_ref().map_or(0, |i| i.preroll_ns);
        let horizon = last_ts.saturating_sub(keep_ns);
        // One batch older than the horizon stays: it bounds the pre-roll's first seq.
        while self.pins.batches.len() > 1 && self.pins.batches[1].0 < horizon {
            self.pins.batches.pop_front();
        }
        // Release requests from other processes are read once per segment: a pin
        // matters only when the log prunes, after a seal.
        let segments = self.log.segment_count();
        if !self.pins.pinned.is_empty() && segments != self.pins.segments_seen {
            self.pins.segments_seen = segments;
            self.read_release_requests();
        }
        let evicted: Vec<u64> = self
            .log
            .take_pruned()
            .into_iter()
            .flat_map(|(_, p)| p.evicted_pins)
            .collect();
        if !evicted.is_empty() {
            self.pins.pinned.retain(|(p, _)| !evicted.contains(&p.id));
        }
    }

    /// Releases the pin of the incident whose trigger has seq `trigger_seq`; whether
    /// it was pinned.
    pub(super) fn release_pin(&mut self, trigger_seq: u64) -> bool {
        let before = self.pins.pinned.len();
        self.pins.pinned.retain(|(p, _)| p.id != trigger_seq);
        let released = self.pins.pinned.len() != before;
        if released {
            self.log
                .set_pins(self.pins.pinned.iter().map(|(p, _)| *p).collect());
        }
        released
    }

    /// Renames the pin `from` to `to` (the trigger's seq, known once its batch is
    /// appended).
    pub(super) fn name_pin(&mut self, from: u64, to: u64) {
        if let Some((p, _)) = self.pins.pinned.iter_mut().find(|(p, _)| p.id == from) {
            p.id = to;
            self.log
                .set_pins(self.pins.pinned.iter().map(|(p, _)| *p).collect());
        }
    }

    /// Releases the incidents `blackbox release` asked for (files in [`RELEASE_DIR`])
    /// and removes the requests it applied. A request for an incident not pinned here
    /// (another session's) is removed too; an unreadable directory is left alone: a
    /// request is a wish, and the budget holds without it.
    fn read_release_requests(&mut self) {
        let dir = self.log.dir().join(RELEASE_DIR);
        let Ok(entries) = std::fs::read_dir(&dir) else {
            return;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(seq) = name.to_str().and_then(|n| n.parse::<u64>().ok()) else {
                continue;
            };
            self.release_pin(seq);
            let _ = std::fs::remove_file(entry.path());
        }
    }
}
