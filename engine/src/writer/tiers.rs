//! The retention tiers on the writer's side: where an event goes by its kind's tier,
//! sampling, and the summary windows.

use std::collections::BTreeMap;

use super::Writer;
use super::incidents::Phase;
use crate::codec::{self, SummaryRecord, ValueStats, WrittenTier};
use crate::error::Result;
use crate::policy::{Sampling, Tier};
use crate::shared::EventMsg;
use crate::sum::WideSum;

/// How long a summary window stays open after its end, by the recorder's clock, for
/// events stamped inside it that reach the writer late. An event later still adds a
/// further summary record for the same window: readers add records of one (kind,
/// window) together.
pub const SUMMARY_GRACE_NS: u64 = 100_000_000;

/// The open summary window of one kind.
#[derive(Debug)]
pub(super) struct Window {
    start_ns: u64,
    pub(super) end_ns: u64,
    pub(super) count: u64,
    values: BTreeMap<u32, ValueAcc>,
}

/// One value's aggregates in an open summary window.
#[derive(Debug)]
pub(super) struct ValueAcc {
    count: u64,
    min: f64,
    max: f64,
    sum: WideSum,
    last: f64,
}

/// Sampling state of one kind.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Sampler {
    /// Events of the kind seen by the sampler so far.
    n: u64,
}

impl Sampler {
    /// Deterministic: `Every(N)` keeps events 0, N, 2N, ...; `Rate(p)` keeps event n when
    /// `floor((n + 1) p) > floor(n p)`, exactly p of them over any prefix, to within one.
    pub(super) fn keep(&mut self, sampling: Sampling) -> bool {
        let n = self.n;
        self.n += 1;
        match sampling {
            Sampling::Every(every) => n.is_multiple_of(every.max(1)),
            Sampling::Rate(p) => ((n + 1) as f64 * p).floor() > (n as f64 * p).floor(),
        }
    }
}

impl Writer {
    pub(super) fn on_event(&mut self, msg: EventMsg) -> Result<()> {
        let ts = msg.ts_ns;
        self.evict_ring(ts);
        let kind = msg.kind.id;
        let class = msg.kind.class.clone();
        if class.trigger && self.incident.is_some() {
            return self.on_trigger(msg).map(|_| ());
        }
        if class.tier == Tier::Full {
            self.counts(kind).kept += 1;
            self.emit_event(msg, WrittenTier::Full, 1.0);
            return Ok(());
        }
        let phase = self.phase(ts);
        if phase == Phase::Postroll {
            self.counts(kind).kept += 1;
            self.emit_event(msg, WrittenTier::Postroll, 1.0);
            return Ok(());
        }
        let late = phase == Phase::LatePreroll;
        match class.tier {
            Tier::Sample(sampling) => {
                let i = kind as usize;
                if self.samplers.len() <= i {
                    self.samplers.resize(i + 1, Sampler::default());
                }
                if self.samplers[i].keep(sampling) {
                    self.counts(kind).kept += 1;
                    self.emit_event(msg, WrittenTier::Sample, sampling.weight());
                } else {
                    self.counts(kind).sampled_out += 1;
                    self.hold(msg, late);
                }
            }
            Tier::Summary { window_ns } => {
                self.summarize(&msg, window_ns);
                self.counts(kind).summarized += 1;
                self.hold(msg, late);
            }
            Tier::Drop | Tier::Full => {
                // A drop-tier event reaches the writer when a producer saw a post-roll
                // open, or when its rule keeps it for the pre-roll.
                self.counts(kind).dropped += 1;
                if class.preroll {
                    self.hold(msg, late);
                }
            }
        }
        Ok(())
    }

    pub(super) fn summarize(&mut self, msg: &EventMsg, window_ns: u64) {
        let kind = msg.kind.id;
        let start = msg.ts_ns - msg.ts_ns % window_ns;
        // Several windows of a kind may be open at once: one that has ended stays open
        // for SUMMARY_GRACE_NS, so an event stamped before the boundary by one thread but
        // queued behind later events of another still lands in its own window.
        let w = self.windows.entry((kind, start)).or_insert_with(|| Window {
            start_ns: start,
            end_ns: start.saturating_add(window_ns),
            count: 0,
            values: BTreeMap::new(),
        });
        w.count += 1;
        for (name, v) in msg.record.values().iter() {
            let s = w.values.entry(name).or_insert(ValueAcc {
                count: 0,
                min: v,
                max: v,
                sum: WideSum::default(),
                last: v,
            });
            s.count += 1;
            s.min = s.min.min(v);
            s.max = s.max.max(v);
            s.sum.add(v);
            s.last = v;
        }
    }

    /// The length of an open window.
    pub(super) fn window_ns(&self, key: (u32, u64)) -> u64 {
        self.windows
            .get(&key)
            .map_or(0, |w| w.end_ns.saturating_sub(w.start_ns))
    }

    pub(super) fn close_window(&mut self, key: (u32, u64), at: u64) {
        let Some(w) = self.windows.remove(&key) else {
            return;
        };
        let kind = key.0;
        let record = SummaryRecord {
            kind,
            window_start_ns: w.start_ns,
            window_end_ns: w.end_ns,
            count: w.count,
            values: w
                .values
                .into_iter()
                .map(|(name, a)| ValueStats {
                    name,
                    count: a.count,
                    min: a.min,
                    max: a.max,
                    sum: a.sum.sum(),
                    last: a.last,
                    mean: a.sum.mean(a.count, a.min, a.max),
                })
                .collect(),
        };
        self.emit_encoded(codec::SUMMARY, at, &record);
    }
}
