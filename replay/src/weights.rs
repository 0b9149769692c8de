//! Export weights: how many recorded events each exported row stands for, computed
//! from the log alone so that, per kind, the weights of a whole-log export add up to the
//! events its accounting says were seen.
//!
//! The rule (ARCHITECTURE.md, "Export weights"):
//!
//! - A kind whose events were summarized or dropped is *unweighted*: the log holds only
//!   the few of its events written around incidents, which stand for nothing but
//!   themselves. Its rows are left out of an export unless asked for (then weight 1).
//! - A `full` or `postroll` row stands for itself: weight 1.
//! - A `preroll` row of a weighted kind is a sampled-out event also written when an
//!   incident fired: the sample rows already stand for it, so it weighs 0.
//! - `sample` rows carry their nominal weight (N for `every = N`, 1/p for `rate = p`),
//!   except the last of each kind between two accounting records, which takes the rest
//!   of that interval's sampled population: the interval's sample rows plus its
//!   `sampled_out` events (the difference of the two accounting records). An interval
//!   with sampled-out events and no sample row adds them to the kind's latest sample row
//!   before it (those events followed it in the sampler). With `every = N`, that makes
//!   each sample row stand for exactly the events it was picked from, the last one of a
//!   session (`every = N` keeps events 0, N, 2N, …) included.
//!
//! Per kind, the weights then add up to `kept + sampled_out` of the last accounting
//! record: `seen` less the events that never reached the log (`overflow`, `lost`).
//! Sampled-out events before a kind's first sample row (a `rate = p` sampler keeps its
//! first event only at about the 1/p-th) go to that row; if the kind has no sample row
//! after them, no row can stand for them and the manifest lists them. An
//! interval whose kept rows disagree with its accounting (a crash lost an accounting
//! record), and rows after the last accounting record, keep nominal weights; the
//! manifest says so.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::Path;

use blackbox::codec::{self, WrittenTier};
use blackbox::log::ReaderOptions;
use blackbox::{ChainKey, Counters, LogReader, LogRecord, Seq};

use crate::decode::{Body, Decoder, Record, RecordType};
use crate::error::{Error, Result};
use crate::query::Query;

/// The weights of a log's events, and what the weighting could not cover.
#[derive(Debug, Clone, Default)]
pub struct Weights {
    /// Sample rows whose weight is not their nominal one.
    adjusted: HashMap<u64, f64>,
    /// The kinds whose events were summarized or dropped, with the counters that say so.
    unweighted: BTreeMap<String, Counters>,
    /// Per kind, the totals of the last accounting record.
    totals: BTreeMap<String, Counters>,
    /// Seq of the last accounting record.
    last_accounting_seq: Option<u64>,
    /// Intervals whose accounting disagrees with the log's rows.
    unreconciled: Vec<Unreconciled>,
    /// The accounting of a range: the totals at the last accounting record before it
    /// and at the first one at or after its end.
    range: RangeAccounting,
    /// Per kind, sampled-out events that came before its first sample row, waiting for
    /// it (a `rate = p` sampler keeps its first event only at about 1/p).
    carry: HashMap<String, u64>,
    /// Per kind, the names of the values its events carry (the columns a typed export
    /// gives them).
    value_names: BTreeMap<String, BTreeSet<String>>,
}

/// The accounting that covers a range of the log: the difference between the totals of
/// the last accounting record before the range (none: the log's start) and of the
/// first one at or after its end (none: the last one). It covers the range, and at its
/// edges up to one accounting interval more.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RangeAccounting {
    /// The accounting record the range's counts start after (`None`: the log's start).
    pub from_seq: Option<u64>,
    /// The accounting record they end at (`None`: there is none).
    pub to_seq: Option<u64>,
    /// Per kind, the counts between the two.
    pub kinds: BTreeMap<String, Counters>,
    start: BTreeMap<String, Counters>,
    end_found: bool,
}

/// An interval between two accounting records where the kept rows of a kind are not
/// what the accounting says: its sample rows keep their nominal weights.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unreconciled {
    /// The kind.
    pub kind: String,
    /// The first seq of the interval.
    pub from_seq: u64,
    /// The accounting record that ends it.
    pub to_seq: u64,
    /// Kept rows found in the log.
    pub rows: u64,
    /// Kept events the accounting counts.
    pub accounted: u64,
}

/// One kind's rows in the current accounting interval.
#[derive(Debug, Default, Clone)]
struct Interval {
    /// Sample rows.
    samples: u64,
    /// Full and post-roll rows.
    kept_others: u64,
    /// The sum of the sample rows' nominal weights.
    nominal_sum: f64,
    /// The last sample row: seq and nominal weight.
    last_sample: Option<(u64, f64)>,
}

impl Weights {
    /// Reads the log in `dir` up to `to_seq` and computes the weights of its events.
    ///
    /// # Errors
    ///
    /// Damage, a record that does not decode, I/O.
    pub fn compute(
        dir: &Path,
        key: Option<ChainKey>,
        to_seq: u64,
        range: &Query,
    ) -> Result<Weights> {
        let reader = LogReader::open_with(dir, ReaderOptions { key })?;
        let records = reader.records(Seq(0)..=Seq(to_seq))?;
        Weights::from_records(records, range, false)
    }

    /// As [`Weights::compute`], from the records a salvage reads around damage. An
    /// interval that lost rows no longer matches its accounting and keeps nominal
    /// weights ([`Weights::unreconciled`]); an event whose kind was named only in a
    /// lost dictionary record is skipped.
    ///
    /// # Errors
    ///
    /// Opening the log (a wrong key).
    pub fn compute_salvaged(dir: &Path, key: Option<ChainKey>, range: &Query) -> Result<Weights> {
        let reader = LogReader::open_with(dir, ReaderOptions { key })?;
        let records = reader.salvage(Seq(0)..)?.filter_map(|item| match item {
            blackbox_log::Salvaged::Record(r) => Some(Ok(r)),
            blackbox_log::Salvaged::Lost(_) => None,
        });
        Weights::from_records(records, range, true)
    }

    fn from_records(
        records: impl Iterator<Item = blackbox_log::Result<LogRecord>>,
        range: &Query,
        salvaged: bool,
    ) -> Result<Weights> {
        let mut decoder = Decoder::new();
        let mut w = Weights::default();
        let mut interval: BTreeMap<String, Interval> = BTreeMap::new();
        let mut interval_start = 0u64;
        let mut latest_sample: HashMap<String, (u64, f64)> = HashMap::new();
        // Per kind id, the ids of the value names its events carry; named at the end.
        let mut value_ids: HashMap<u32, HashSet<u32>> = HashMap::new();
        for raw in records {
            let raw = raw?;
            let seq = raw.seq().0;
            let tag = raw.record_type();
            // A snapshot (a segment preamble's, or one that follows an accounting record
            // with the same totals; flagged so) holds the totals of every
            // kind, those of the interval the next accounting record closes included
            // when that record started the segment: it ends no interval, and the rows
            // before it are reconciled with that record.
            if tag == codec::ACCOUNTING
                && codec::is_accounting_snapshot(raw.payload()) == Some(true)
            {
                continue;
            }
            match RecordType::from_tag(tag) {
                Some(RecordType::Event) => {
                    let fail = |reason: String| Error::Decode {
                        seq,
                        record_type: codec::EVENT.0,
                        reason,
                    };
                    let e = codec::decode_event(raw.payload(), raw.ts_ns())
                        .map_err(|why| fail(format!("not a valid event record: {why}")))?;
                    let kind_id = e.kind;
                    let kind = match decoder.name(kind_id) {
                        Some(kind) => kind,
                        // Its name was in a dictionary record the salvage lost.
                        None if salvaged => continue,
                        None => {
                            return Err(fail(format!(
                                "its kind id {kind_id} is named by no dictionary record before it"
                            )));
                        }
                    };
                    if !e.values.is_empty() {
                        let ids = value_ids.entry(kind_id).or_default();
                        ids.extend(e.values.iter().map(|(name, _)| name));
                    }
                    let tier = e.tier;
                    let i = interval.entry(kind.to_owned()).or_default();
                    match tier {
                        WrittenTier::Sample => {
                            let nominal = e.weight;
                            i.samples += 1;
                            i.nominal_sum += nominal;
                            i.last_sample = Some((seq, nominal));
                            latest_sample.insert(kind.to_owned(), (seq, nominal));
                        }
                        WrittenTier::Full | WrittenTier::Postroll => i.kept_others += 1,
                        WrittenTier::Preroll => {}
                    }
                }
                Some(RecordType::Accounting) => {
                    let a = match decoder.decode(&raw) {
                        Ok(Record {
                            body: Body::Accounting(a),
                            ..
                        }) => a,
                        Ok(_) => continue,
                        Err(_) if salvaged => continue,
                        Err(e) => return Err(e),
                    };
                    w.close_interval(
                        &a.kinds,
                        std::mem::take(&mut interval),
                        interval_start,
                        seq,
                        &latest_sample,
                    );
                    a.fold_into(&mut w.totals);
                    w.last_accounting_seq = Some(seq);
                    interval_start = seq + 1;
                    w.range.see(range, seq, raw.ts_ns(), &w.totals);
                }
                _ => match decoder.learn(&raw) {
                    Err(_) if salvaged => {}
                    other => other?,
                },
            }
        }
        for (kind_id, ids) in value_ids {
            // Both were named before the event that used them; a salvage may have lost
            // the dictionary record of a name, and its events with it.
            let Some(kind) = decoder.name(kind_id) else {
                continue;
            };
            let names = w.value_names.entry(kind.to_owned()).or_default();
            names.extend(
                ids.iter()
                    .filter_map(|id| decoder.name(*id).map(str::to_owned)),
            );
        }
        for (kind, c) in &w.totals {
            if c.summarized > 0 || c.dropped > 0 {
                w.unweighted.insert(kind.clone(), *c);
            }
        }
        if !w.range.end_found {
            w.range.to_seq = w.last_accounting_seq;
            w.range.kinds = difference(&w.totals, &w.range.start);
        }
        Ok(w)
    }

    /// Closes one accounting interval: reconciles each kind's rows with the accounting
    /// and hands the sampled population to the sample rows.
    fn close_interval(
        &mut self,
        now: &BTreeMap<String, Counters>,
        rows: BTreeMap<String, Interval>,
        from_seq: u64,
        to_seq: u64,
        latest_sample: &HashMap<String, (u64, f64)>,
    ) {
        let zero = Counters::default();
        let mut kinds: Vec<&String> = now.keys().collect();
        kinds.extend(rows.keys().filter(|k| !now.contains_key(*k)));
        for kind in kinds {
            let before = self.totals.get(kind).unwrap_or(&zero);
            // Kinds an accounting record leaves out have not changed since the last one.
            let after = now.get(kind).unwrap_or(before);
            let i = rows.get(kind).cloned().unwrap_or_default();
            let kept = after.kept.checked_sub(before.kept);
            let sampled_out = after.sampled_out.checked_sub(before.sampled_out);
            let (Some(kept), Some(sampled_out)) = (kept, sampled_out) else {
                self.unreconciled.push(Unreconciled {
                    kind: kind.clone(),
                    from_seq,
                    to_seq,
                    rows: i.samples + i.kept_others,
                    accounted: after.kept,
                });
                continue;
            };
            if kept != i.samples + i.kept_others {
                self.unreconciled.push(Unreconciled {
                    kind: kind.clone(),
                    from_seq,
                    to_seq,
                    rows: i.samples + i.kept_others,
                    accounted: kept,
                });
                continue;
            }
            match i.last_sample {
                Some((seq, nominal)) => {
                    let carried = self.carry.remove(kind).unwrap_or(0);
                    let population = i.samples as f64 + sampled_out as f64 + carried as f64;
                    let rest = population - (i.nominal_sum - nominal);
                    self.set(seq, rest);
                }
                None if sampled_out > 0 => match latest_sample.get(kind) {
                    // The kind's latest sample row lies in an earlier interval, whose
                    // close set its weight (or left it nominal, if unreconciled): these
                    // events followed it in the sampler.
                    Some(&(seq, nominal)) => {
                        let base = self.adjusted.get(&seq).copied().unwrap_or(nominal);
                        self.set(seq, base + sampled_out as f64);
                    }
                    // No sample row yet: the next one stands for them.
                    None => *self.carry.entry(kind.clone()).or_default() += sampled_out,
                },
                None => {}
            }
        }
    }

    fn set(&mut self, seq: u64, weight: f64) {
        self.adjusted.insert(seq, weight);
    }

    /// The export weight of an event row: `None` for a kind that is unweighted (its
    /// events were summarized or dropped).
    pub fn weight(&self, seq: u64, kind: &str, tier: WrittenTier, nominal: f64) -> Option<f64> {
        if self.unweighted.contains_key(kind) {
            return None;
        }
        Some(match tier {
            WrittenTier::Full | WrittenTier::Postroll => 1.0,
            WrittenTier::Preroll => 0.0,
            WrittenTier::Sample => self.adjusted.get(&seq).copied().unwrap_or(nominal),
        })
    }

    /// The names of the values that the events of the kinds `query` selects carry
    /// (anywhere in the log read, not only in the query's range); without
    /// `include_unweighted`, of weighted kinds only (an export leaves the others out).
    pub fn value_names(&self, query: &Query, include_unweighted: bool) -> BTreeSet<String> {
        self.value_names
            .iter()
            .filter(|(kind, _)| query.kind_selected(Some(kind)))
            .filter(|(kind, _)| include_unweighted || !self.unweighted.contains_key(*kind))
            .flat_map(|(_, names)| names.iter().cloned())
            .collect()
    }

    /// The kinds whose events were summarized or dropped, with their totals.
    pub fn unweighted(&self) -> &BTreeMap<String, Counters> {
        &self.unweighted
    }

    /// Per kind, the totals of the last accounting record read.
    pub fn totals(&self) -> &BTreeMap<String, Counters> {
        &self.totals
    }

    /// The seq of the last accounting record read.
    pub fn last_accounting_seq(&self) -> Option<u64> {
        self.last_accounting_seq
    }

    /// The intervals whose rows disagree with their accounting.
    pub fn unreconciled(&self) -> &[Unreconciled] {
        &self.unreconciled
    }

    /// Per kind, sampled-out events that no row stands for: the kind has no sample row
    /// at or after them (a `rate = p` kind that saw fewer than about 1/p events).
    pub fn unrepresented(&self) -> BTreeMap<String, u64> {
        self.carry
            .iter()
            .filter(|(_, n)| **n > 0)
            .map(|(k, n)| (k.clone(), *n))
            .collect()
    }

    /// The accounting of the range given to [`Weights::compute`].
    pub fn range_accounting(&self) -> &RangeAccounting {
        &self.range
    }
}

impl RangeAccounting {
    /// Notes an accounting record (seq, timestamp) and the running totals after it.
    fn see(&mut self, range: &Query, seq: u64, ts_ns: u64, totals: &BTreeMap<String, Counters>) {
        if self.end_found {
            return;
        }
        let before = range.from_seq_bound().is_some_and(|f| seq < f)
            || range.since_bound().is_some_and(|s| ts_ns < s);
        if before {
            self.from_seq = Some(seq);
            self.start = totals.clone();
            return;
        }
        let bounded = range.to_seq_bound().is_some() || range.until_bound().is_some();
        let at_end = bounded
            && range.to_seq_bound().is_none_or(|t| seq >= t)
            && range.until_bound().is_none_or(|u| ts_ns >= u);
        if at_end {
            self.to_seq = Some(seq);
            self.kinds = difference(totals, &self.start);
            self.end_found = true;
        }
    }
}

/// `end - start` per kind, counter by counter (0 where a counter went down, which an
/// intact log never shows).
pub(crate) fn difference(
    end: &BTreeMap<String, Counters>,
    start: &BTreeMap<String, Counters>,
) -> BTreeMap<String, Counters> {
    let zero = Counters::default();
    end.iter()
        .map(|(kind, e)| {
            let s = start.get(kind).unwrap_or(&zero);
            let c = Counters {
                seen: e.seen.saturating_sub(s.seen),
                kept: e.kept.saturating_sub(s.kept),
                sampled_out: e.sampled_out.saturating_sub(s.sampled_out),
                summarized: e.summarized.saturating_sub(s.summarized),
                dropped: e.dropped.saturating_sub(s.dropped),
                overflow: e.overflow.saturating_sub(s.overflow),
                preroll: e.preroll.saturating_sub(s.preroll),
                lost: e.lost.saturating_sub(s.lost),
            };
            (kind.clone(), c)
        })
        .filter(|(_, c)| *c != zero)
        .collect()
}
