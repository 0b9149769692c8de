//! The time range `replay` and `export` take: `--since`/`--until` (absolute or relative
//! to now), or `--around` a record or an incident with a `--window`; and the notes that
//! say why a range selected nothing.

use std::io::{self, Write};
use std::path::Path;

use blackbox::ChainKey;
use blackbox_replay::{Body, Order, Query, RecordType, Replay, format_time};

use super::{CliError, time_arg};

/// What `--around` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Around {
    /// The record at this seq.
    Seq(u64),
    /// The N-th incident from 1, or from the end when negative (-1: the last).
    Incident(i64),
}

/// Value parser: `SEQ`, `incident`, `incident:N`.
pub fn around_arg(text: &str) -> Result<Around, String> {
    let expected = "expected a seq (like 1093), `incident` (the last one) or `incident:N` (the N-th from 1, or -N from the end)";
    if let Ok(seq) = text.parse::<u64>() {
        return Ok(Around::Seq(seq));
    }
    match text.strip_prefix("incident") {
        Some("") => Ok(Around::Incident(-1)),
        Some(rest) => match rest.strip_prefix(':').and_then(|n| n.parse::<i64>().ok()) {
            Some(n) if n != 0 => Ok(Around::Incident(n)),
            _ => Err(expected.to_owned()),
        },
        None => Err(expected.to_owned()),
    }
}

/// Value parser: a duration (`10s`, `250ms`).
pub fn duration_arg(text: &str) -> Result<u64, String> {
    blackbox_replay::parse_duration(text).map_err(|e| match e {
        blackbox_replay::Error::InvalidDuration { reason, .. } => reason,
        other => other.to_string(),
    })
}

/// The time range options.
#[derive(Debug, Clone, clap::Args)]
pub struct RangeArgs {
    /// Records that happened at or after this time: RFC 3339, integer ns since the
    /// epoch, `now`, or a duration before now (`-5m`).
    #[arg(long, value_name = "T", value_parser = time_arg, allow_hyphen_values = true)]
    pub since: Option<u64>,
    /// Records that happened at or before this time: RFC 3339, integer ns since the
    /// epoch, `now`, or a duration before now (`-5m`).
    #[arg(long, value_name = "T", value_parser = time_arg, allow_hyphen_values = true)]
    pub until: Option<u64>,
    /// The range around a record: its seq, `incident` (the last incident's trigger) or
    /// `incident:N` (the N-th from 1; -N counts from the end).
    #[arg(
        long,
        value_name = "SEQ|incident[:N]",
        value_parser = around_arg,
        conflicts_with_all = ["since", "until"],
        allow_hyphen_values = true
    )]
    pub around: Option<Around>,
    /// With --around, how far on each side (default: 10s around a seq; around an
    /// incident, its own pre-roll and post-roll).
    #[arg(
        long,
        value_name = "D",
        value_parser = duration_arg,
        requires = "around",
        conflicts_with_all = ["since", "until"]
    )]
    pub window: Option<u64>,
}

/// A range of times (ns), each end optional.
pub type TimeRange = (Option<u64>, Option<u64>);

/// The default `--window` around a seq.
const WINDOW_DEFAULT_NS: u64 = 10_000_000_000;

impl RangeArgs {
    /// The (since, until) the options name, reading the log for `--around`.
    pub fn resolve(
        &self,
        dir: &Path,
        key: Option<&ChainKey>,
    ) -> Result<(Option<u64>, Option<u64>), CliError> {
        self.resolve_incident(dir, key).map(|(range, _)| range)
    }

    /// As [`RangeArgs::resolve`], and the trigger seq of the incident the range is,
    /// when it is `--around` an incident without `--window`: its whole window.
    pub fn resolve_incident(
        &self,
        dir: &Path,
        key: Option<&ChainKey>,
    ) -> Result<(TimeRange, Option<u64>), CliError> {
        let Some(around) = self.around else {
            return Ok(((self.since, self.until), None));
        };
        let mut incident = None;
        let key = key.cloned();
        let (center, default) = match around {
            Around::Seq(seq) => {
                let q = Query::new()
                    .from_seq(seq)
                    .to_seq(seq)
                    .types(RecordType::ALL)
                    .key(key.clone());
                match Replay::open(dir, &q)?.next().transpose()? {
                    Some(r) => (r.happened_ns(), None),
                    None => {
                        let last = blackbox::LogReader::open(dir)
                            .and_then(|r| r.digest())
                            .ok()
                            .flatten()
                            .map_or_else(
                                || "it holds no record".to_owned(),
                                |d| format!("its last seq is {}", d.seq),
                            );
                        return Err(CliError::new(format!(
                            "--around {seq}: the log has no record at seq {seq} ({last}): give a seq the log holds"
                        )));
                    }
                }
            }
            Around::Incident(n) => {
                let q = Query::new()
                    .types([RecordType::Incident])
                    .key(key.clone())
                    .order(Order::Log);
                let mut incidents = Vec::new();
                for r in Replay::open(dir, &q)? {
                    if let Body::Incident(i) = r?.body {
                        incidents.push(i);
                        if n > 0 && incidents.len() as i64 == n {
                            break;
                        }
                    }
                }
                let count = incidents.len();
                let index = if n > 0 {
                    usize::try_from(n - 1).ok()
                } else {
                    // -i64::MIN does not exist: no log holds that many incidents.
                    n.checked_neg()
                        .and_then(|k| usize::try_from(k).ok())
                        .and_then(|k| count.checked_sub(k))
                };
                let Some(i) = index.and_then(|i| incidents.get(i)) else {
                    let which = match n {
                        -1 => "incident".to_owned(),
                        n => format!("incident:{n}"),
                    };
                    return Err(CliError::new(format!(
                        "--around {which}: the log holds {count} incident{} (counting up to the one asked for): list them with `blackbox replay --type incident`",
                        if count == 1 { "" } else { "s" }
                    )));
                };
                incident = Some(i.trigger_seq);
                (
                    i.trigger_ts_ns,
                    Some((i.preroll_start_ns, i.postroll_end_ns)),
                )
            }
        };
        Ok(match (self.window, default) {
            (None, Some((from, to))) => ((Some(from), Some(to)), incident),
            (w, _) => {
                let w = w.unwrap_or(WINDOW_DEFAULT_NS);
                (
                    (
                        Some(center.saturating_sub(w)),
                        Some(center.saturating_add(w)),
                    ),
                    None,
                )
            }
        })
    }
}

/// Says on stderr why a query selects nothing, when it can tell: bounds that exclude
/// each other, a range outside the log, a kind glob that no kind of the log matches.
/// `matched` holds the kinds of the records that were selected.
pub fn explain_empty(
    dir: &Path,
    key: Option<ChainKey>,
    query: &Query,
    selected: u64,
    matched: &std::collections::BTreeSet<String>,
) {
    let mut notes = Vec::new();
    if let (Some(f), Some(t)) = (query.from_seq_bound(), query.to_seq_bound())
        && t < f
    {
        notes.push(format!(
            "--to-seq {t} is before --from-seq {f}: nothing can match"
        ));
    }
    if let (Some(s), Some(u)) = (query.since_bound(), query.until_bound())
        && u < s
    {
        notes.push(format!(
            "the range ends ({}) before it starts ({}): nothing can match",
            format_time(u),
            format_time(s)
        ));
    }
    let includes: Vec<&String> = query
        .kind_globs()
        .iter()
        .filter(|g| !g.starts_with('!'))
        .collect();
    let unmatched: Vec<&String> = includes
        .into_iter()
        .filter(|g| {
            let one = Query::new().kind(g).ok();
            !matched
                .iter()
                .any(|k| one.as_ref().is_some_and(|q| q.kind_selected(Some(k))))
        })
        .collect();
    if notes.is_empty()
        && (selected == 0 || !unmatched.is_empty())
        && let Ok(stats) = blackbox_replay::stats(dir, key)
    {
        if selected == 0 {
            if let (Some(f), Some(last)) = (query.from_seq_bound(), stats.last_seq)
                && f > last
            {
                notes.push(format!(
                    "--from-seq {f} is past the log's last seq {last}: nothing can match"
                ));
            }
            if let (Some(s), Some(last)) = (query.since_bound(), stats.last_ts_ns)
                && s > last
            {
                notes.push(format!(
                    "the range starts ({}) after the log's last record ({}): nothing can match",
                    format_time(s),
                    format_time(last)
                ));
            }
            if let (Some(u), Some(first)) = (query.until_bound(), stats.first_ts_ns)
                && u < first
            {
                notes.push(format!(
                    "the range ends ({}) before the log's first record ({}): nothing can match",
                    format_time(u),
                    format_time(first)
                ));
            }
        }
        for g in unmatched {
            let one = Query::new().kind(g).ok();
            let known = stats
                .kinds
                .keys()
                .any(|k| one.as_ref().is_some_and(|q| q.kind_selected(Some(k))));
            if !known {
                let kinds: Vec<&str> = stats.kinds.keys().map(String::as_str).take(8).collect();
                notes.push(format!(
                    "no kind the log has counted matches --kind {g} (it counts {}{})",
                    kinds.join(", "),
                    if stats.kinds.len() > kinds.len() {
                        ", …"
                    } else {
                        ""
                    }
                ));
            }
        }
    }
    let mut err = io::stderr().lock();
    for n in notes {
        let _ = writeln!(err, "blackbox: note: {n}");
    }
}
