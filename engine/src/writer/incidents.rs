//! Incident capture: the pre-roll ring, the post-roll windows, and what a trigger
//! writes.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::Writer;
use crate::codec::{self, IncidentRecord, WrittenTier};
use crate::error::Result;
use crate::shared::EventMsg;

/// Adds an entry stamped `ts` to a sliding-window minimum (see `Writer::ring_min`).
pub(super) fn push_min(mins: &mut VecDeque<(u64, u64)>, ts: u64, id: u64) {
    while mins.back().is_some_and(|&(t, _)| t >= ts) {
        mins.pop_back();
    }
    mins.push_back((ts, id));
}

/// A sampled-out or summarized event kept for a possible incident.
#[derive(Debug)]
pub(super) struct RingEntry {
    msg: EventMsg,
    /// Its place in the order of arrival, for `Writer::ring_min`.
    id: u64,
}

/// A post-roll window of the triggers taken: `[start_ns, end_ns)`.
#[derive(Debug, Clone, Copy)]
pub(super) struct Span {
    start_ns: u64,
    end_ns: u64,
}

/// Post-roll windows the writer remembers, for events that reach it late.
pub(super) const SPANS_MAX: usize = 1024;

/// Where an event falls relative to the incidents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Phase {
    /// Outside every incident's windows.
    Normal,
    /// Inside a taken trigger's pre-roll window, reaching the writer after it.
    LatePreroll,
    /// Inside a post-roll window.
    Postroll,
}

impl Writer {
    /// Keeps an event that was not written for a possible incident: in the ring, or,
    /// for one stamped inside the pre-roll of a trigger already taken, written at once.
    pub(super) fn hold(&mut self, msg: EventMsg, late_preroll: bool) {
        if late_preroll {
            self.counts(msg.kind.id).preroll += 1;
            self.emit_event(msg, WrittenTier::Preroll, 1.0);
        } else {
            self.push_ring(msg);
        }
    }

    /// Where an event stamped `ts` falls: inside a post-roll (of a trigger taken, or of
    /// one a producer stamped before it that has not reached the writer yet), inside the
    /// pre-roll of a trigger taken, or neither.
    pub(super) fn phase(&mut self, ts: u64) -> Phase {
        if self.shared.triggers_pending.load(Ordering::SeqCst) > 0 {
            self.take_lost_triggers();
            let triggers = self.shared.triggers.lock();
            // Strictly after: an event stamped at the same time as the trigger that
            // reached the writer first was recorded before it.
            if triggers
                .iter()
                .any(|t| ts > t.ts_ns && ts < t.postroll_end_ns)
            {
                return Phase::Postroll;
            }
        }
        let preroll_ns = self.incident.as_ref().map_or(0, |i| i.preroll_ns);
        let mut phase = Phase::Normal;
        for span in self.spans.iter().rev() {
            if ts >= span.end_ns {
                break;
            }
            if ts >= span.start_ns {
                return Phase::Postroll;
            }
            if ts >= span.start_ns.saturating_sub(preroll_ns) {
                phase = Phase::LatePreroll;
            }
        }
        phase
    }

    /// Opens the post-roll of the triggers lost to overflow (they never reach the
    /// writer) and stops counting them as pending.
    pub(super) fn take_lost_triggers(&mut self) {
        let shared = Arc::clone(&self.shared);
        let mut triggers = shared.triggers.lock();
        let mut i = 0;
        while i < triggers.len() {
            if triggers[i].lost {
                let t = triggers.swap_remove(i);
                shared.triggers_pending.fetch_sub(1, Ordering::SeqCst);
                self.add_span(t.ts_ns, t.postroll_end_ns);
            } else {
                i += 1;
            }
        }
    }

    /// Adds a post-roll window, merged with those it overlaps; returns the end of the
    /// merged window holding `start_ns`.
    pub(super) fn add_span(&mut self, start_ns: u64, end_ns: u64) -> u64 {
        let at = self.spans.partition_point(|s| s.start_ns <= start_ns);
        self.spans.insert(at, Span { start_ns, end_ns });
        let mut merged: VecDeque<Span> = VecDeque::with_capacity(self.spans.len());
        for s in self.spans.drain(..) {
            match merged.back_mut() {
                Some(last) if s.start_ns <= last.end_ns => last.end_ns = last.end_ns.max(s.end_ns),
                _ => merged.push_back(s),
            }
        }
        while merged.len() > SPANS_MAX {
            merged.pop_front();
        }
        self.spans = merged;
        self.spans
            .iter()
            .find(|s| s.start_ns <= start_ns && start_ns < s.end_ns)
            .map_or(end_ns, |s| s.end_ns)
    }

    /// Writes the pre-roll, the trigger, the incident marker and the checkpoint; returns
    /// the trigger's seq.
    pub(super) fn on_trigger(&mut self, msg: EventMsg) -> Result<u64> {
        let Some(incident) = self.incident.clone() else {
            return Ok(0);
        };
        let ts = msg.ts_ns;
        // Taken: no longer pending for the events that follow.
        self.shared.trigger_withdrawn(ts);
        let tier = if self.phase(ts) == Phase::Postroll {
            WrittenTier::Postroll
        } else {
            WrittenTier::Full
        };
        let preroll_start = ts.saturating_sub(incident.preroll_ns);
        let mut preroll_events = 0u64;
        let mut later = VecDeque::new();
        self.ring_min.clear();
        while let Some(entry) = self.ring.pop_front() {
            let t = entry.msg.ts_ns;
            if t > ts {
                // Stamped after the trigger: not its pre-roll.
                later.push_back(entry);
                continue;
            }
            self.ring_bytes -= entry.msg.size_bytes();
            if t >= preroll_start {
                let kind = entry.msg.kind.id;
                self.counts(kind).preroll += 1;
                self.emit_event(entry.msg, WrittenTier::Preroll, 1.0);
                preroll_events += 1;
            }
        }
        for e in &later {
            push_min(&mut self.ring_min, e.msg.ts_ns, e.id);
        }
        self.ring = later;
        let kind = msg.kind.id;
        self.counts(kind).kept += 1;
        self.emit_event(msg, tier, 1.0);
        let trigger_seq = self.flush_out()?.map_or(0, |s| s.0);
        let postroll_end = self.add_span(ts, ts.saturating_add(incident.postroll_ns));
        let marker = IncidentRecord {
            trigger_seq,
            trigger_kind: kind,
            trigger_ts_ns: ts,
            preroll_start_ns: preroll_start,
            postroll_end_ns: postroll_end,
            preroll_events,
        };
        let at = self.stamp(ts);
        self.emit_encoded(codec::INCIDENT, at, &marker);
        // The memory as the log holds it at the trigger: every change made before the
        // trigger was written before it. The memory refuses a `set` that would not fit
        // a record; checked all the same.
        if let Ok(snapshot) = self.snapshot() {
            self.emit_raw(codec::CHECKPOINT, at, &snapshot);
        }
        Ok(trigger_seq)
    }

    pub(super) fn push_ring(&mut self, msg: EventMsg) {
        let Some(incident) = &self.incident else {
            return;
        };
        let max = usize::try_from(incident.preroll_bytes_max).unwrap_or(usize::MAX);
        self.ring_bytes += msg.size_bytes();
        let id = self.ring_next_id;
        self.ring_next_id += 1;
        push_min(&mut self.ring_min, msg.ts_ns, id);
        self.ring.push_back(RingEntry { msg, id });
        while self.ring_bytes > max {
            if self.ring_pop_front().is_none() {
                break;
            }
        }
    }

    /// Takes the ring's first entry, keeping `ring_bytes` and `ring_min` with it.
    pub(super) fn ring_pop_front(&mut self) -> Option<RingEntry> {
        let e = self.ring.pop_front()?;
        self.ring_bytes -= e.msg.size_bytes();
        if self.ring_min.front().is_some_and(|&(_, id)| id == e.id) {
            self.ring_min.pop_front();
        }
        Some(e)
    }

    /// Drops every ring event stamped before `horizon_ns`, wherever it is in the ring
    /// (an event may reach the writer behind a later one).
    pub(super) fn evict_ring_before(&mut self, horizon_ns: u64) {
        while self.ring.front().is_some_and(|e| e.msg.ts_ns < horizon_ns) {
            self.ring_pop_front();
        }
        if self
            .ring_min
            .front()
            .is_none_or(|&(ts, _)| ts >= horizon_ns)
        {
            return;
        }
        // An older one behind the front: rebuild the ring without them (rare: events
        // reach the writer nearly in stamp order).
        let kept: VecDeque<RingEntry> = std::mem::take(&mut self.ring)
            .into_iter()
            .filter(|e| e.msg.ts_ns >= horizon_ns)
            .collect();
        self.ring_min.clear();
        self.ring_bytes = 0;
        for e in &kept {
            self.ring_bytes += e.msg.size_bytes();
            push_min(&mut self.ring_min, e.msg.ts_ns, e.id);
        }
        self.ring = kept;
    }

    /// Drops ring events older than the pre-roll window of an event stamped `now_ns`.
    /// Not while a trigger is pending: an event stamped after that trigger, reaching
    /// the writer first, must not push the trigger's own pre-roll out.
    pub(super) fn evict_ring(&mut self, now_ns: u64) {
        let Some(incident) = &self.incident else {
            return;
        };
        if self.shared.triggers_pending.load(Ordering::SeqCst) > 0 {
            return;
        }
        let horizon = now_ns.saturating_sub(incident.preroll_ns);
        while self.ring.front().is_some_and(|e| e.msg.ts_ns < horizon) {
            self.ring_pop_front();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;

    use super::push_min;

    #[test]
    fn the_sliding_minimum_is_the_oldest_stamp_of_the_window() {
        // The ring's entries arrive in any stamp order and leave from the front; the
        // minimum's front must be the window's smallest stamp, by hand (a scan).
        let mut window: VecDeque<(u64, u64)> = VecDeque::new();
        let mut mins = VecDeque::new();
        let mut x = 12_345u64;
        for id in 0..5_000u64 {
            // A small linear congruential generator: arrival times that wander.
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            let ts = 1_000 + id + (x >> 54);
            push_min(&mut mins, ts, id);
            window.push_back((ts, id));
            if (x >> 40).is_multiple_of(3) {
                for _ in 0..((x >> 20) % 4) {
                    if let Some((_, gone)) = window.pop_front()
                        && mins.front().is_some_and(|&(_, m)| m == gone)
                    {
                        mins.pop_front();
                    }
                }
            }
            let by_hand = window.iter().map(|&(t, _)| t).min();
            assert_eq!(mins.front().map(|&(t, _)| t), by_hand, "after {id}");
        }
    }
}
