//! What a report shows, read from the log: a window's records by kind, its knowledge-base
//! commits and the records they cite, the state at the trigger and the accounting of the
//! window; or, for the overview, each kind's rate over the whole log and its incidents.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use blackbox::codec::{self, WrittenTier};
use blackbox::log::ReaderOptions;
use blackbox::{ChainKey, Counters, LogReader, Seq};
use serde_json::Value;

use crate::decode::{Body, BodyRef, Decoder, Incident, Payload, RecordType};
use crate::error::{Error, Result};
use crate::query::{Order, Query};
use crate::replay::Replay;
use crate::state::{State, fact_json, state_at};

/// Marks a lane draws one by one; past this many, its events are drawn as columns.
pub const MARKS_MAX: usize = 2_000;

/// Points a value's plot draws one by one; past this many, as columns of min, max and mean.
pub const POINTS_MAX: usize = 2_000;

/// Columns a crowded lane or plot is drawn in.
pub const COLUMNS: usize = 500;

/// Lanes a timeline draws: past this many kinds, the busiest are drawn and the others
/// named in a note.
pub const LANES_MAX: usize = 100;

/// Plots a window's page draws (one per kind and value name), at most.
pub const PLOTS_MAX: usize = 60;

/// Records the report lists as cited (the knowledge base's evidence), at most.
pub const CITED_MAX: usize = 200;

/// Longest payload text the report shows of a record.
pub const EXCERPT_CHARS: usize = 240;

/// One event drawn on its lane.
#[derive(Debug, Clone, Copy)]
pub struct Mark {
    pub seq: u64,
    pub ts_ns: u64,
    pub tier: WrittenTier,
}

/// A column of a crowded lane: events counted by tier.
#[derive(Debug, Clone, Copy, Default)]
pub struct Column {
    pub by_tier: [u64; 4],
}

/// One kind's lane: its marks, or its columns once there are too many.
#[derive(Debug, Default)]
pub struct Lane {
    pub marks: Vec<Mark>,
    pub columns: Option<Vec<Column>>,
    /// Events in the window, by written tier.
    pub by_tier: [u64; 4],
    /// Summary windows of the kind in the window: (start, end).
    pub summaries: Vec<(u64, u64, u64)>,
}

/// One value's series in the window.
#[derive(Debug, Default)]
pub struct Series {
    /// Events' values: (time, value, tier), while there are at most [`POINTS_MAX`].
    pub points: Vec<(u64, f64, WrittenTier)>,
    /// Once there are more: per column, (count, min, max, sum).
    pub columns: Option<Vec<(u64, f64, f64, f64)>>,
    /// Events carrying the value.
    pub count: u64,
    /// Of those, values that are not finite numbers (NaN, infinities): counted, not drawn.
    pub not_finite: u64,
    /// Summary windows: (start, end, count, min, max, mean).
    pub summaries: Vec<(u64, u64, u64, f64, f64, f64)>,
}

/// A knowledge-base change in the window: one key of one commit.
#[derive(Debug, Clone)]
pub struct KbChange {
    pub seq: u64,
    pub ts_ns: u64,
    pub version: u64,
    pub op: String,
    pub outcome: String,
    pub key: String,
    /// The key's value before the commit (its fact's), if it had one.
    pub old: Option<Value>,
    /// Its value after, and its status.
    pub new: Option<Value>,
    pub status: String,
    pub confidence: Option<f64>,
    pub message: Option<String>,
    /// The seqs the commit cites.
    pub evidence: Vec<u64>,
}

/// A record the knowledge base cites, in brief.
#[derive(Debug, Clone)]
pub struct Cited {
    pub ts_ns: u64,
    pub kind: String,
    pub excerpt: String,
}

/// Everything a window's report shows.
#[derive(Debug)]
pub struct WindowData {
    pub since_ns: u64,
    pub until_ns: u64,
    /// The incident the window is, if it is one.
    pub incident: Option<Incident>,
    /// Other incidents whose trigger falls in the window.
    pub incidents: Vec<Incident>,
    pub lanes: BTreeMap<String, Lane>,
    /// Kinds with events in the window that have no lane (past [`LANES_MAX`]), with
    /// their counts.
    pub lanes_left_out: Vec<(String, u64)>,
    /// Per kind, per value name (at most [`PLOTS_MAX`] in all).
    pub series: BTreeMap<String, BTreeMap<String, Series>>,
    /// Values left without a plot past [`PLOTS_MAX`].
    pub plots_left_out: usize,
    pub kb_changes: Vec<KbChange>,
    /// The state at the trigger (or at the window's end without one).
    pub state: State,
    /// The facts at that point, as `blackbox state --json` renders them.
    pub facts: BTreeMap<String, Value>,
    /// The records cited by the changes and the facts, by seq (at most [`CITED_MAX`]).
    pub cited: BTreeMap<u64, Option<Cited>>,
    /// Cited seqs left out past [`CITED_MAX`].
    pub cited_left_out: usize,
    /// Per kind, what the accounting counts between `accounting_from` and `accounting_to`.
    pub accounting: BTreeMap<String, Counters>,
    /// The seqs of the accounting records the counts run between (`None`: the log's
    /// start; none after the window).
    pub accounting_from: Option<u64>,
    pub accounting_to: Option<u64>,
    /// Records read for the window.
    pub records_read: u64,
}

/// The column of `ts` in a window of `COLUMNS` columns.
pub fn column_of(ts_ns: u64, since_ns: u64, until_ns: u64) -> usize {
    bucket(
        ts_ns.saturating_sub(since_ns),
        until_ns.saturating_sub(since_ns),
        COLUMNS,
    )
}

/// Which of `n` equal parts of `[0, span]` holds `offset` (the last one past the end).
pub fn bucket(offset: u64, span: u64, n: usize) -> usize {
    let i = u128::from(offset) * n as u128 / u128::from(span.max(1));
    usize::try_from(i).map_or(n - 1, |i| i.min(n - 1))
}

fn tier_index(tier: WrittenTier) -> usize {
    match tier {
        WrittenTier::Full => 0,
        WrittenTier::Sample => 1,
        WrittenTier::Preroll => 2,
        WrittenTier::Postroll => 3,
    }
}

/// The tiers in [`Column::by_tier`]'s order.
pub const TIERS: [WrittenTier; 4] = [
    WrittenTier::Full,
    WrittenTier::Sample,
    WrittenTier::Preroll,
    WrittenTier::Postroll,
];

impl Lane {
    fn add(&mut self, mark: Mark, since_ns: u64, until_ns: u64) {
        self.by_tier[tier_index(mark.tier)] += 1;
        if self.columns.is_none() && self.marks.len() == MARKS_MAX {
            let mut columns = vec![Column::default(); COLUMNS];
            for m in self.marks.drain(..) {
                columns[column_of(m.ts_ns, since_ns, until_ns)].by_tier[tier_index(m.tier)] += 1;
            }
            self.columns = Some(columns);
        }
        match &mut self.columns {
            Some(columns) => {
                columns[column_of(mark.ts_ns, since_ns, until_ns)].by_tier
                    [tier_index(mark.tier)] += 1;
            }
            None => self.marks.push(mark),
        }
    }
}

impl Series {
    fn add(&mut self, ts_ns: u64, value: f64, tier: WrittenTier, since_ns: u64, until_ns: u64) {
        self.count += 1;
        if !value.is_finite() {
            self.not_finite += 1;
            return;
        }
        if self.columns.is_none() && self.points.len() == POINTS_MAX {
            let mut columns = vec![(0, f64::INFINITY, f64::NEG_INFINITY, 0.0); COLUMNS];
            for (t, v, _) in self.points.drain(..) {
                fold(&mut columns[column_of(t, since_ns, until_ns)], v);
            }
            self.columns = Some(columns);
        }
        match &mut self.columns {
            Some(columns) => fold(&mut columns[column_of(ts_ns, since_ns, until_ns)], value),
            None => self.points.push((ts_ns, value, tier)),
        }
    }
}

fn fold(c: &mut (u64, f64, f64, f64), v: f64) {
    c.0 += 1;
    c.1 = c.1.min(v);
    c.2 = c.2.max(v);
    c.3 += v;
}

/// A payload as the report shows it: JSON as text, raw bytes by their length and first
/// bytes in hex, cut to [`EXCERPT_CHARS`].
pub fn payload_excerpt(p: &Payload) -> String {
    match p {
        Payload::None => String::new(),
        Payload::Json(v) => excerpt(&v.to_string()),
        Payload::Raw(b) => {
            let head = crate::json::hex(&b[..b.len().min(16)]);
            format!(
                "{} raw bytes: {head}{}",
                b.len(),
                if b.len() > 16 { "…" } else { "" }
            )
        }
    }
}

/// A text cut to [`EXCERPT_CHARS`].
pub fn excerpt(text: &str) -> String {
    match text.char_indices().nth(EXCERPT_CHARS) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_owned(),
    }
}

/// Reads what the report of the window `[since_ns, until_ns]` shows.
///
/// # Errors
///
/// As [`Replay::open`] and [`state_at`]: damage, a record that does not decode, I/O.
pub fn window(
    dir: &Path,
    key: Option<ChainKey>,
    since_ns: u64,
    until_ns: u64,
    incident: Option<Incident>,
) -> Result<WindowData> {
    let range = || {
        Query::new()
            .since(since_ns)
            .until(until_ns)
            .key(key.clone())
            .order(Order::Happened)
    };
    // The knowledge base before the window, to say what each change changed (from the
    // log's start when the window begins before what a disk budget left).
    let before = match state_at(dir, since_ns.saturating_sub(1), key.clone()) {
        Err(Error::PrunedBefore { earliest_ns, .. }) => state_at(dir, earliest_ns, key.clone())?,
        other => other?,
    };
    let mut values: BTreeMap<String, Value> = before
        .kb
        .iter()
        .map(|(k, f)| (k.clone(), f.value.clone()))
        .collect();
    let mut kb_changes = Vec::new();
    let mut incidents = Vec::new();
    let mut records_read = 0u64;
    for r in Replay::open(dir, &range().types([RecordType::Kb, RecordType::Incident]))? {
        let r = r?;
        records_read += 1;
        match r.body {
            Body::Kb(c) => kb_changes.extend(changes(r.seq, r.ts_ns, &c.commit, &mut values)),
            Body::Incident(i) => incidents.push(i),
            _ => {}
        }
    }
    let state_ns = incident.as_ref().map_or(until_ns, |i| i.trigger_ts_ns);
    let state = state_at(dir, state_ns, key.clone())?;
    let facts: BTreeMap<String, Value> = state
        .kb
        .iter()
        .map(|(k, f)| (k.clone(), fact_json(f)))
        .collect();
    // The records cited: by the changes, then by the facts at the trigger.
    let mut wanted: BTreeSet<u64> = BTreeSet::new();
    let mut left_out: BTreeSet<u64> = BTreeSet::new();
    let cites = kb_changes
        .iter()
        .flat_map(|c| c.evidence.iter().copied())
        .chain(state.kb.values().flat_map(|f| {
            f.provenance
                .iter()
                .chain(f.counter_evidence.iter())
                .chain(f.rivals.iter().flat_map(|r| r.provenance.iter()))
                .chain(f.refuted.iter().flat_map(|r| r.counter_evidence.iter()))
                .copied()
        }));
    for seq in cites {
        if wanted.len() < CITED_MAX {
            wanted.insert(seq);
        } else if !wanted.contains(&seq) {
            left_out.insert(seq);
        }
    }
    let mut cited: BTreeMap<u64, Option<Cited>> = wanted.iter().map(|&s| (s, None)).collect();

    let mut lanes: BTreeMap<String, Lane> = BTreeMap::new();
    let mut series: BTreeMap<String, BTreeMap<String, Series>> = BTreeMap::new();
    let mut replay = Replay::open(
        dir,
        &range().types([RecordType::Event, RecordType::Summary]),
    )?;
    while let Some(r) = replay.next_view() {
        let r = r?;
        records_read += 1;
        match &r.body {
            BodyRef::Event(e) => {
                let ts = e.recorded_ns;
                let lane = match lanes.get_mut(e.kind) {
                    Some(l) => l,
                    None => lanes.entry(e.kind.to_owned()).or_default(),
                };
                lane.add(
                    Mark {
                        seq: r.seq,
                        ts_ns: ts,
                        tier: e.tier,
                    },
                    since_ns,
                    until_ns,
                );
                if !e.values.is_empty() {
                    let by_name = match series.get_mut(e.kind) {
                        Some(s) => s,
                        None => series.entry(e.kind.to_owned()).or_default(),
                    };
                    for (name, value) in e.values.iter() {
                        let s = match by_name.get_mut(name) {
                            Some(s) => s,
                            None => by_name.entry(name.to_owned()).or_default(),
                        };
                        s.add(ts, value, e.tier, since_ns, until_ns);
                    }
                }
                if let Some(slot) = cited.get_mut(&r.seq) {
                    *slot = Some(Cited {
                        ts_ns: ts,
                        kind: e.kind.to_owned(),
                        excerpt: payload_excerpt(&e.payload.to_payload()),
                    });
                }
            }
            BodyRef::Summary(s) => {
                lanes.entry(s.kind.clone()).or_default().summaries.push((
                    s.window_start_ns,
                    s.window_end_ns,
                    s.count,
                ));
                let by_name = series.entry(s.kind.clone()).or_default();
                for (name, v) in &s.values {
                    if !(v.min.is_finite() && v.max.is_finite() && v.mean.is_finite()) {
                        by_name.entry(name.clone()).or_default().not_finite += v.count;
                        continue;
                    }
                    by_name.entry(name.clone()).or_default().summaries.push((
                        s.window_start_ns,
                        s.window_end_ns,
                        v.count,
                        v.min,
                        v.max,
                        v.mean,
                    ));
                }
            }
            _ => {}
        }
    }
    // Cited records outside the window: each read by its seq.
    let missing: Vec<u64> = cited
        .iter()
        .filter(|(_, c)| c.is_none())
        .map(|(&s, _)| s)
        .collect();
    read_cited(dir, key.clone(), &missing, &mut cited)?;
    let (accounting, accounting_from, accounting_to) =
        window_accounting(dir, key, &before, &state, until_ns)?;
    let lanes_left_out = keep_busiest(&mut lanes);
    series.retain(|kind, _| lanes.contains_key(kind));
    let mut plots = 0;
    let mut plots_left_out = 0;
    for by_name in series.values_mut() {
        by_name.retain(|_, _| {
            plots += 1;
            if plots > PLOTS_MAX {
                plots_left_out += 1;
            }
            plots <= PLOTS_MAX
        });
    }
    series.retain(|_, by_name| !by_name.is_empty());
    Ok(WindowData {
        since_ns,
        until_ns,
        incident,
        incidents,
        lanes,
        lanes_left_out,
        series,
        plots_left_out,
        kb_changes,
        state,
        facts,
        cited,
        cited_left_out: left_out.len(),
        accounting,
        accounting_from,
        accounting_to,
        records_read,
    })
}

/// Keeps the [`LANES_MAX`] busiest lanes; returns the others' kinds and counts, busiest
/// first.
fn keep_busiest(lanes: &mut BTreeMap<String, Lane>) -> Vec<(String, u64)> {
    if lanes.len() <= LANES_MAX {
        return Vec::new();
    }
    let mut counts: Vec<(u64, String)> = lanes
        .iter()
        .map(|(k, l)| {
            (
                l.by_tier.iter().sum::<u64>() + l.summaries.len() as u64,
                k.clone(),
            )
        })
        .collect();
    counts.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    counts
        .split_off(LANES_MAX)
        .into_iter()
        .filter_map(|(_, kind)| {
            let lane = lanes.remove(&kind)?;
            Some((kind, lane.by_tier.iter().sum::<u64>()))
        })
        .collect()
}

/// The changes of one commit record, each key's value before and after it; `values`
/// is brought up to date.
fn changes(
    seq: u64,
    ts_ns: u64,
    commit: &Value,
    values: &mut BTreeMap<String, Value>,
) -> Vec<KbChange> {
    let text = |v: &Value| v.as_str().map(str::to_owned);
    let evidence: Vec<u64> = commit["provenance"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_u64).collect())
        .unwrap_or_default();
    let mut out = Vec::new();
    for change in commit["changes"].as_array().into_iter().flatten() {
        let Some(key) = change["key"].as_str() else {
            continue;
        };
        let fact = &change["fact"];
        let new = (!fact.is_null()).then(|| fact["value"].clone());
        let old = match &new {
            Some(v) => values.insert(key.to_owned(), v.clone()),
            None => values.remove(key),
        };
        out.push(KbChange {
            seq,
            ts_ns,
            version: commit["version"].as_u64().unwrap_or(0),
            op: text(&commit["op"]).unwrap_or_default(),
            outcome: text(&commit["outcome"]).unwrap_or_default(),
            key: key.to_owned(),
            old,
            new,
            status: text(&fact["status"]).unwrap_or_else(|| "retracted".to_owned()),
            confidence: fact["confidence"].as_f64(),
            message: text(&commit["message"]),
            evidence: evidence.clone(),
        });
    }
    out
}

/// The counts between the last accounting record before the window (from `before`) and
/// the first one at or after its end (the last one in the log if none is).
/// A window's accounting: per kind, the counts; the seqs of the accounting records
/// they run from and to.
type WindowAccounting = (BTreeMap<String, Counters>, Option<u64>, Option<u64>);

fn window_accounting(
    dir: &Path,
    key: Option<ChainKey>,
    before: &State,
    within: &State,
    until_ns: u64,
) -> Result<WindowAccounting> {
    // From the running totals at a point inside the window, the accounting records
    // after it up to the first at or after the window's end, folded in.
    let q = Query::new()
        .since(within.at_ns)
        .types([RecordType::Accounting])
        .key(key)
        .order(Order::Log);
    let mut totals = within.kinds.clone();
    let mut to = within.accounting_seq;
    for r in Replay::open(dir, &q)? {
        let r = r?;
        if let Body::Accounting(a) = r.body {
            a.fold_into(&mut totals);
            to = Some(r.seq);
            if r.ts_ns >= until_ns {
                break;
            }
        }
    }
    let kinds = crate::weights::difference(&totals, &before.kinds);
    Ok((kinds, before.accounting_seq, to))
}

/// Reads the events at `seqs` (ascending) into `cited`, with one reader opened once:
/// for the seqs of one segment, the names from the dictionary records before the last
/// of them (the blocks that hold none passed over by the tag index), then each
/// record's block alone, found through the footer's sparse index and checked against
/// the chain from the link stored before it. A seq no longer in the log (pruned) is
/// left out.
fn read_cited(
    dir: &Path,
    key: Option<ChainKey>,
    seqs: &[u64],
    cited: &mut BTreeMap<u64, Option<Cited>>,
) -> Result<()> {
    if seqs.is_empty() {
        return Ok(());
    }
    let segments = crate::inputs::open_log_dir(dir)?;
    let reader = LogReader::open_with(dir, ReaderOptions { key })?;
    let first = segments.first().map_or(0, |s| s.first_seq);
    // The names of the segment being read: (its dictionary's start, names learned up
    // to this seq, the decoder).
    let mut names: Option<(u64, u64, Decoder)> = None;
    for &seq in seqs.iter().filter(|&&s| s >= first) {
        let start = blackbox::dictionary_start(&reader, &segments, seq)?;
        let (_, learned, decoder) = match &mut names {
            Some(n) if n.0 == start => n,
            other => other.insert((start, start, Decoder::new())),
        };
        if *learned < seq {
            let dictionary = [codec::DICTIONARY.index_tag()];
            for raw in reader
                .records(Seq(*learned)..Seq(seq))?
                .with_tags(dictionary)
            {
                let raw = raw?;
                if raw.record_type() == codec::DICTIONARY {
                    decoder.learn(&raw)?;
                }
            }
            *learned = seq;
        }
        let Some(raw) = reader.records(Seq(seq)..=Seq(seq))?.next() else {
            continue;
        };
        let raw = raw?;
        if let (Some(slot), BodyRef::Event(e)) = (cited.get_mut(&seq), decoder.view(&raw)?.body) {
            *slot = Some(Cited {
                ts_ns: e.recorded_ns,
                kind: e.kind.to_owned(),
                excerpt: payload_excerpt(&e.payload.to_payload()),
            });
        }
    }
    Ok(())
}

/// Rate columns of the overview: the log's span in this many.
pub const RATE_COLUMNS: usize = 200;

/// Everything the overview shows.
#[derive(Debug)]
pub struct OverviewData {
    pub first_ns: u64,
    pub last_ns: u64,
    /// Per kind, events per column of the log's span.
    pub rates: BTreeMap<String, Vec<u64>>,
    /// Per kind, events in the log.
    pub events: BTreeMap<String, u64>,
    pub incidents: Vec<(u64, Incident)>,
    pub kb_commits: u64,
    pub records_read: u64,
    /// Kinds whose rates are not drawn (past [`LANES_MAX`], the least busy).
    pub rates_left_out: usize,
}

/// Reads the overview's rates and incidents: one pass over the log's events, incidents
/// and commits.
///
/// # Errors
///
/// As [`Replay::open`].
pub fn overview(
    dir: &Path,
    key: Option<ChainKey>,
    first_ns: u64,
    last_ns: u64,
) -> Result<OverviewData> {
    let q = Query::new()
        .types([RecordType::Event, RecordType::Incident, RecordType::Kb])
        .key(key)
        .order(Order::Log);
    let mut replay = Replay::open(dir, &q)?;
    let mut rates: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    let mut events: BTreeMap<String, u64> = BTreeMap::new();
    let mut incidents = Vec::new();
    let mut kb_commits = 0;
    let mut records_read = 0;
    let span = last_ns.saturating_sub(first_ns);
    while let Some(r) = replay.next_view() {
        let r = r?;
        records_read += 1;
        match &r.body {
            BodyRef::Event(e) => {
                let col = bucket(e.recorded_ns.saturating_sub(first_ns), span, RATE_COLUMNS);
                let row = match rates.get_mut(e.kind) {
                    Some(row) => row,
                    None => rates
                        .entry(e.kind.to_owned())
                        .or_insert_with(|| vec![0; RATE_COLUMNS]),
                };
                row[col] += 1;
                match events.get_mut(e.kind) {
                    Some(n) => *n += 1,
                    None => {
                        events.insert(e.kind.to_owned(), 1);
                    }
                }
            }
            BodyRef::Incident(i) => incidents.push((r.seq, i.clone())),
            BodyRef::Kb(_) => kb_commits += 1,
            _ => {}
        }
    }
    incidents.sort_by_key(|(_, i)| i.trigger_ts_ns);
    let mut rates_left_out = 0;
    if rates.len() > LANES_MAX {
        let mut busiest: Vec<(u64, &String)> = events.iter().map(|(k, &n)| (n, k)).collect();
        busiest.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(b.1)));
        let drawn: BTreeSet<String> = busiest
            .into_iter()
            .take(LANES_MAX)
            .map(|(_, k)| k.clone())
            .collect();
        rates.retain(|k, _| drawn.contains(k));
        rates_left_out = events.len() - rates.len();
    }
    Ok(OverviewData {
        first_ns,
        last_ns,
        rates,
        events,
        incidents,
        kb_commits,
        records_read,
        rates_left_out,
    })
}
