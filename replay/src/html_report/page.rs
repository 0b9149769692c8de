//! The report's page: one HTML file with its style inline, no script, no fetch. It
//! reads the same on screen, printed, and in a browser with scripts off.

use blackbox::Counters;
use blackbox_log::VerifyReport;
use maud::{DOCTYPE, Markup, PreEscaped, html};
use serde_json::Value;

use super::gather::{
    CITED_MAX, COLUMNS, LANES_MAX, MARKS_MAX, OverviewData, PLOTS_MAX, POINTS_MAX, RATE_COLUMNS,
    WindowData,
};
use super::svg::{self, Scale, relative, trim};
use crate::decode::Incident;
use crate::time::format_time;

/// The style: print-friendly, no external font.
const STYLE: &str = r#"
:root { --ink: #1b1f24; --muted: #5b6470; --rule: #d7dce2; --full: #1f4e79; --sample: #6fa8dc;
  --preroll: #d9822b; --postroll: #b08800; --trigger: #c0392b; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--ink);
  margin: 0 auto; max-width: 1180px; padding: 24px; }
h1 { font-size: 22px; margin: 0 0 4px; } h2 { font-size: 17px; margin: 28px 0 8px;
  border-bottom: 1px solid var(--rule); padding-bottom: 4px; } h3 { font-size: 14px; margin: 14px 0 4px; }
p.sub, .note { color: var(--muted); } .note { font-size: 12.5px; }
nav a { margin-right: 14px; } code, .mono { font-family: ui-monospace, Menlo, Consolas, monospace; font-size: 12.5px; }
table { border-collapse: collapse; width: 100%; margin: 6px 0; } th, td { text-align: left; padding: 3px 8px;
  border-bottom: 1px solid var(--rule); vertical-align: top; } th { font-weight: 600; background: #f4f6f8; }
td.n, th.n { text-align: right; font-variant-numeric: tabular-nums; }
.facts dt { font-weight: 600; } .kv td:first-child { white-space: nowrap; }
.ok { color: #1e7b34; font-weight: 600; } .bad { color: var(--trigger); font-weight: 600; }
.legend span { display: inline-block; margin-right: 14px; } .sw { display: inline-block; width: 10px; height: 10px;
  margin-right: 4px; vertical-align: -1px; }
svg { width: 100%; height: auto; display: block; }
svg text { font: 11px system-ui, sans-serif; fill: var(--ink); } svg .axis text, svg .y-label { fill: var(--muted); }
svg .grid { stroke: #eef0f3; } svg .lane-rule { stroke: var(--rule); }
.t-full { fill: var(--full); background: var(--full); } .t-sample { fill: var(--sample); background: var(--sample); }
.t-preroll { fill: var(--preroll); background: var(--preroll); } .t-postroll { fill: var(--postroll); background: var(--postroll); }
svg .summary { fill: #c9ced6; opacity: .55; } svg .band { fill: #9fb7d1; opacity: .45; }
svg .mean { stroke: #2d4f73; stroke-width: 1.2; } svg .column { stroke: #6f89a6; stroke-width: 1; }
.preroll-band { fill: #fbe3cc; background: #fbe3cc; } .postroll-band { fill: #f5ecc4; background: #f5ecc4; }
svg .trigger { stroke: var(--trigger); stroke-width: 1.6; } svg .other-trigger { stroke: var(--trigger); stroke-dasharray: 3 3; }
svg .kb-mark { fill: #6a3d9a; } svg .cited { stroke: #6a3d9a; stroke-width: 1; } svg .outcome-rejected, svg .outcome-contradicted { fill: var(--trigger); }
.missing { background: #fff6e5; border-left: 3px solid var(--preroll); padding: 6px 10px; }
section { break-inside: auto; } svg, table, .missing { break-inside: avoid; }
@media print { body { max-width: none; padding: 0; font-size: 11px; } nav { display: none; } a { color: inherit; text-decoration: none; } }
"#;

/// The page around a report's sections.
fn page(title: &str, subtitle: Markup, nav: &[(&str, &str)], body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) }
                style { (PreEscaped(STYLE)) }
            }
            body {
                header {
                    h1 { (title) }
                    p class="sub" { (subtitle) }
                    nav { @for (id, name) in nav { a href=(format!("#{id}")) { (name) } } }
                }
                (body)
            }
        }
    }
}

fn legend() -> Markup {
    html! {
        p class="legend note" {
            span { i class="sw t-full" {} "full" }
            span { i class="sw t-sample" {} "sampled (each stands for its weight)" }
            span { i class="sw t-preroll" {} "pre-roll (held, written at the trigger)" }
            span { i class="sw t-postroll" {} "post-roll" }
            span { i class="sw" style="background:#c9ced6" {} "summary window" }
            span { i class="sw preroll-band" {} "pre-roll window" }
            span { i class="sw postroll-band" {} "post-roll window" }
        }
    }
}

/// A JSON value in a line, as JSON (a string quoted, control characters escaped), cut
/// to the report's excerpt length.
fn json_text(v: &Value) -> String {
    super::gather::excerpt(&v.to_string())
}

/// Rows a table of the page lists at most (knowledge-base changes, facts, working
/// memory, incidents, kinds); a note says how many more there are.
const ROWS_MAX: usize = 500;

/// A link to a cited record's row, or its seq alone when the page does not list it.
fn seq_link(
    seq: u64,
    cited: &std::collections::BTreeMap<u64, Option<super::gather::Cited>>,
) -> Markup {
    html! {
        @if cited.contains_key(&seq) {
            a href=(format!("#rec-{seq}")) { "seq " (seq) }
        } @else {
            "seq " (seq)
        }
    }
}

/// A note that a table lists `ROWS_MAX` of `n` rows.
fn more_rows(n: usize, what: &str) -> Markup {
    html! {
        @if n > ROWS_MAX {
            p class="note" { (n - ROWS_MAX) " more " (what) " are not listed (at most " (ROWS_MAX) " a table)." }
        }
    }
}

/// `n thing` or `n things`.
fn count(n: impl Into<u64>, thing: &str) -> String {
    let n = n.into();
    if n == 1 {
        format!("1 {thing}")
    } else {
        format!("{n} {thing}s")
    }
}

fn accounting_table(kinds: &std::collections::BTreeMap<String, Counters>) -> Markup {
    let total = kinds.values().fold(Counters::default(), |mut t, c| {
        t.add(c);
        t
    });
    html! {
        table class="accounting" {
            thead { tr {
                th { "kind" } th class="n" { "seen" } th class="n" { "kept" } th class="n" { "sampled out" }
                th class="n" { "summarized" } th class="n" { "dropped" } th class="n" { "overflow" }
                th class="n" { "pre-roll" } th class="n" { "lost" }
            } }
            tbody {
                @for (kind, c) in kinds {
                    tr data-kind=(kind) {
                        td { code { (kind) } } td class="n" { (c.seen) } td class="n" { (c.kept) }
                        td class="n" { (c.sampled_out) } td class="n" { (c.summarized) } td class="n" { (c.dropped) }
                        td class="n" { (c.overflow) } td class="n" { (c.preroll) } td class="n" { (c.lost) }
                    }
                }
                tr class="total" {
                    th { "all kinds" } th class="n" { (total.seen) } th class="n" { (total.kept) }
                    th class="n" { (total.sampled_out) } th class="n" { (total.summarized) } th class="n" { (total.dropped) }
                    th class="n" { (total.overflow) } th class="n" { (total.preroll) } th class="n" { (total.lost) }
                }
            }
        }
        @let outcomes = total.sampled_out + total.summarized + total.dropped + total.overflow + total.lost;
        // Events counted as sampled out, summarized or dropped that the pre-roll ring
        // wrote in full anyway are in the log.
        @let missing = outcomes.saturating_sub(total.preroll);
        p class="missing" {
            @if missing == 0 {
                "Every event seen here is in the log."
            } @else {
                strong { (missing) " of " (total.seen) " events seen are not in the log as events." }
                " The recorder sampled out " (total.sampled_out) " (the kept samples stand for them by their weight), summarized "
                (total.summarized) " (their values live on in the summary windows: count, min, max, mean) and dropped "
                (total.dropped) " by policy"
                @if total.preroll > 0 {
                    "; " (total.preroll) " of those were written in full anyway, from the pre-roll ring, and are in the log"
                }
                "; " (total.overflow) " were lost to overflow (the writer could not keep up) and "
                (total.lost) " after a write failure."
            }
        }
    }
}

/// What was checked before a page was written.
#[derive(Debug)]
pub enum Checked {
    /// The whole log: `verify`'s report.
    Whole(Box<VerifyReport>),
    /// The log's structure (every segment's header and footer, in sequence; the last
    /// segment read in full, as `blackbox digest` does), and every block the report
    /// read; `chain` says whether those blocks' hash chain was checked (a keyed log
    /// read without its key: not).
    Window { records_read: u64, chain: bool },
}

fn integrity(checked: &Checked, digest: Option<&str>, command: &str, dir_arg: &str) -> Markup {
    html! {
        section id="integrity" {
            h2 { "Integrity, and how to reproduce this report" }
            table class="kv" {
                @match checked {
                    Checked::Whole(verify) => {
                        tr { td { "verify" } td {
                            span class="ok" { "intact" }
                            " — " (count(verify.records, "record")) " in " (count(verify.segments as u64, "segment")) ", " (count(verify.blocks, "block"))
                            ": every checksum and the hash chain checked"
                            @if let Some((path, offset, len)) = &verify.torn_tail {
                                "; a torn tail of " (len) " bytes at offset " (offset) " of " code { (path.display()) }
                                " (an unfinished write: the records before it are intact)"
                            }
                        } }
                    }
                    Checked::Window { records_read, chain } => {
                        tr { td { "checked" } td {
                            span class="ok" { "intact where read" }
                            " — the " (records_read) " records this report read: their blocks' checksums"
                            @if *chain { " and hash chain" } @else { " (not the hash chain: the log is keyed and no key was given)" }
                            "; the log's structure: every segment's header and footer, in sequence, and its last segment in full. "
                            "The rest of the log was not read: " code { "blackbox verify --dir " (dir_arg) } " checks every record, "
                            "as does this report with " code { "--verify" } "."
                        } }
                    }
                }
                tr { td { "digest" } td { code class="digest" { (digest.unwrap_or("(empty log)")) } } }
                tr { td { "check it later" } td { code { "blackbox verify --dir " (dir_arg) " --digest " (digest.unwrap_or("…")) } } }
                tr { td { "this report" } td { code class="command" { (command) } } }
            }
        }
    }
}

fn incident_title(i: &Incident) -> String {
    format!("{} at {}", i.trigger_kind, format_time(i.trigger_ts_ns))
}

/// The page of a window's report.
pub fn window(
    w: &WindowData,
    dir: &str,
    dir_arg: &str,
    checked: &Checked,
    digest: Option<&str>,
    command: &str,
) -> String {
    let origin = w.incident.as_ref().map_or(w.since_ns, |i| i.trigger_ts_ns);
    let scale = Scale::new(w.since_ns, w.until_ns, origin);
    let title = match &w.incident {
        Some(i) => format!("Incident: {}", incident_title(i)),
        None => format!(
            "Window {} to {}",
            format_time(w.since_ns),
            format_time(w.until_ns)
        ),
    };
    let at = |ns: u64| relative(ns as i128 - origin as i128);
    let events: u64 = w
        .lanes
        .values()
        .map(|l| l.by_tier.iter().sum::<u64>())
        .chain(w.lanes_left_out.iter().map(|(_, n)| *n))
        .sum();
    let crowded: Vec<&String> = w
        .lanes
        .iter()
        .filter(|(_, l)| l.columns.is_some())
        .map(|(k, _)| k)
        .collect();
    let plotted = w
        .series
        .iter()
        .flat_map(|(k, by)| by.iter().map(move |(n, s)| (k, n, s)))
        .filter(|(_, _, s)| s.count > 0 || !s.summaries.is_empty());
    let subtitle = html! {
        "Log " code { (dir) } " · window " (format_time(w.since_ns)) " to " (format_time(w.until_ns))
        " · " (count(events, "event")) " in " (count((w.lanes.len() + w.lanes_left_out.len()) as u64, "kind")) " · " (count(w.kb_changes.len() as u64, "knowledge-base change"))
    };
    let nav = [
        ("timeline", "Timeline"),
        ("plots", "Values"),
        ("kb", "Knowledge base"),
        ("working", "Working memory"),
        ("accounting", "Accounting"),
        ("integrity", "Integrity"),
    ];
    let body = html! {
        @if let Some(i) = &w.incident {
            section id="incident" {
                table class="kv" {
                    tr { td { "trigger" } td { code { (i.trigger_kind) } " · seq " (i.trigger_seq) " · " (format_time(i.trigger_ts_ns)) } }
                    tr { td { "pre-roll" } td { (format_time(i.preroll_start_ns)) " to the trigger (" (at(i.preroll_start_ns)) "): "
                        (i.preroll_events) " events held in the ring, written at the trigger" } }
                    tr { td { "post-roll" } td { "the trigger to " (format_time(i.postroll_end_ns)) " (" (at(i.postroll_end_ns)) ")" } }
                }
            }
        }
        section id="timeline" {
            h2 { "Timeline" }
            p class="note" { "One lane per kind; each mark is a record where it happened. Times are relative to "
                @if w.incident.is_some() { "the trigger (red line)." } @else { "the window's start." }
                " Hover a mark for its details." }
            (legend())
            (svg::timeline(&scale, &w.lanes, &w.kb_changes, &w.cited, w.incident.as_ref(), &w.incidents.iter().filter(|o| Some(o.trigger_seq) != w.incident.as_ref().map(|i| i.trigger_seq)).cloned().collect::<Vec<_>>()))
            @if !w.lanes_left_out.is_empty() {
                p class="note" { "More kinds than the timeline draws (" (LANES_MAX) "): "
                    (w.lanes_left_out.len()) " with fewer records have no lane: "
                    @for (n, (k, count)) in w.lanes_left_out.iter().take(20).enumerate() { @if n > 0 { ", " } code { (k) } " (" (count) ")" }
                    @if w.lanes_left_out.len() > 20 { ", …" } "." }
            }
            @if !crowded.is_empty() {
                p class="note" { "More than " (MARKS_MAX) " events in a lane are drawn as " (COLUMNS)
                    " columns, each as high as its count and coloured by its most common tier: "
                    @for (n, k) in crowded.iter().enumerate() { @if n > 0 { ", " } code { (k) } } "." }
            }
        }
        section id="plots" {
            h2 { "Values" }
            p class="note" { "Kept events as points (coloured by tier); summary windows as a band from min to max with the mean as a line. More than "
                (POINTS_MAX) " points are drawn as " (COLUMNS) " columns from min to max with their mean." }
            @for (kind, name, series) in plotted {
                h3 { code { (kind) } " · " (name) }
                p class="note" { "Events carrying it in the window: " (series.count) "; summary windows: " (series.summaries.len()) "."
                    @if series.not_finite > 0 { " " (series.not_finite) " values that are not finite numbers (NaN, infinity) are counted, not drawn." } }
                (svg::plot(&scale, series, w.incident.as_ref()))
            }
            @if w.plots_left_out > 0 {
                p class="note" { (w.plots_left_out) " more values have no plot (at most " (PLOTS_MAX) " a page): "
                    code { "blackbox replay --dir " (dir_arg) " --since " (w.since_ns) " --until " (w.until_ns) } " prints them." }
            }
        }
        section id="kb" {
            h2 { "Knowledge base" }
            h3 { "Changes in the window" }
            @if w.kb_changes.is_empty() {
                p { "No commit in the window." }
            } @else {
                table class="kb-changes" {
                    thead { tr { th { "when" } th class="n" { "version" } th { "key" } th { "outcome" } th { "old → new" } th class="n" { "confidence" } th { "evidence" } th { "message" } } }
                    tbody {
                        @for k in w.kb_changes.iter().take(ROWS_MAX) {
                            tr id=(format!("commit-{}", k.seq)) {
                                td { (at(k.ts_ns)) } td class="n" { (k.version) } td { code { (k.key) } }
                                td { (k.op) ": " (k.outcome) }
                                td { code { (k.old.as_ref().map_or_else(|| "—".to_owned(), json_text)) " → " (k.new.as_ref().map_or_else(|| "—".to_owned(), json_text)) } " " span class="note" { (k.status) } }
                                td class="n" { (k.confidence.map_or_else(|| "—".to_owned(), trim)) }
                                td { @for (n, s) in k.evidence.iter().enumerate() { @if n > 0 { ", " } (seq_link(*s, &w.cited)) } }
                                td { (k.message.as_deref().unwrap_or("")) }
                            }
                        }
                    }
                }
                (more_rows(w.kb_changes.len(), "changes"))
            }
            h3 { "Facts at " @if w.incident.is_some() { "the trigger" } @else { "the window's end" } " (version " (w.state.kb_version) ")" }
            @if w.facts.is_empty() {
                p { "No fact." }
            } @else {
                table class="facts" {
                    thead { tr { th { "key" } th { "value" } th class="n" { "confidence" } th { "status" } th { "because" } th { "contested by" } th { "rejected" } } }
                    tbody {
                        @for (key, f) in w.facts.iter().take(ROWS_MAX) {
                            tr data-key=(key) {
                                td { code { (key) } } td { code { (json_text(&f["value"])) } }
                                td class="n" { (f["confidence"].as_f64().map_or_else(|| "—".to_owned(), trim)) }
                                td { (f["status"].as_str().unwrap_or("")) }
                                td { @for (n, s) in f["provenance"].as_array().into_iter().flatten().filter_map(Value::as_u64).collect::<Vec<_>>().iter().enumerate() {
                                    @if n > 0 { ", " } (seq_link(*s, &w.cited)) } }
                                td class="rivals" { @for r in f["rivals"].as_array().into_iter().flatten() {
                                    code { (json_text(&r["value"])) } " ("
                                    (r["confidence"].as_f64().map_or_else(|| "—".to_owned(), trim)) "; "
                                    @for (n, s) in r["provenance"].as_array().into_iter().flatten().filter_map(Value::as_u64).collect::<Vec<_>>().iter().enumerate() {
                                        @if n > 0 { ", " } (seq_link(*s, &w.cited)) }
                                    ") " } }
                                td { @for r in f["refuted"].as_array().into_iter().flatten() {
                                    code { (json_text(&r["value"])) } " ("
                                    @for (n, s) in r["counter_evidence"].as_array().into_iter().flatten().filter_map(Value::as_u64).collect::<Vec<_>>().iter().enumerate() {
                                        @if n > 0 { ", " } (seq_link(*s, &w.cited)) }
                                    ") " } }
                            }
                        }
                    }
                }
                (more_rows(w.facts.len(), "facts"))
            }
            h3 { "Records cited" }
            @if w.cited.is_empty() {
                p { "None." }
            } @else {
                table class="cited" {
                    thead { tr { th class="n" { "seq" } th { "when" } th { "kind" } th { "payload" } } }
                    tbody {
                        @for (seq, c) in &w.cited {
                            tr id=(format!("rec-{seq}")) {
                                td class="n" { (seq) }
                                @match c {
                                    Some(c) => { td { (at(c.ts_ns)) } td { code { (c.kind) } } td { code { (c.excerpt) } } }
                                    None => { td colspan="3" { "not an event the log still holds" } }
                                }
                            }
                        }
                    }
                }
                @if w.cited_left_out > 0 {
                    p class="note" { (count(w.cited_left_out as u64, "more cited record")) " not listed (at most " (CITED_MAX) "); their seqs are shown without a link." }
                }
            }
        }
        section id="working" {
            h2 { "Working memory at " @if w.incident.is_some() { "the trigger" } @else { "the window's end" } }
            @if w.state.working.is_empty() {
                p { "Empty." }
            } @else {
                table class="kv working" {
                    @for (k, v) in w.state.working.iter().take(ROWS_MAX) { tr { td { code { (k) } } td { code { (json_text(v)) } } } }
                }
                (more_rows(w.state.working.len(), "keys"))
            }
        }
        section id="accounting" {
            h2 { "Accounting of the window" }
            p class="note" {
                "What the recorder counted per kind between the accounting record "
                @match w.accounting_from { Some(seq) => { "at seq " (seq) } None => { "(the log's start)" } }
                " and the one "
                @match w.accounting_to { Some(seq) => { "at seq " (seq) } None => { "(none yet)" } }
                ": the window, and up to one accounting interval on each side."
            }
            (accounting_table(&w.accounting))
        }
        (integrity(checked, digest, command, dir_arg))
    };
    page(&title, subtitle, &nav, body).into_string()
}

/// Facts of the log for the overview's header.
#[derive(Debug)]
pub struct LogFacts<'a> {
    pub dir: &'a str,
    pub records: u64,
    pub segments: usize,
    pub bytes: u64,
    pub kinds: &'a std::collections::BTreeMap<String, Counters>,
}

/// The page of the overview: rates, incidents, totals, disk.
pub fn overview(
    o: &OverviewData,
    facts: &LogFacts<'_>,
    checked: &Checked,
    digest: Option<&str>,
    command: &str,
    dir_arg: &str,
) -> String {
    let span_s = o.last_ns.saturating_sub(o.first_ns) as f64 / 1e9;
    let column_s = span_s / RATE_COLUMNS as f64;
    let triggers: Vec<u64> = o.incidents.iter().map(|(_, i)| i.trigger_ts_ns).collect();
    let title = "Flight log overview";
    let subtitle = html! {
        "Log " code { (facts.dir) } " · " (format_time(o.first_ns)) " to " (format_time(o.last_ns))
        " (" (trim(span_s)) " s) · " (count(facts.records, "record")) " · " (count(o.incidents.len() as u64, "incident"))
    };
    let nav = [
        ("rates", "Rates"),
        ("incidents", "Incidents"),
        ("accounting", "Accounting"),
        ("disk", "Disk"),
        ("integrity", "Integrity"),
    ];
    let body = html! {
        section id="rates" {
            h2 { "Events per kind over time" }
            p class="note" { "Each row is one kind's events in the log, in " (RATE_COLUMNS) " columns of "
                (trim(column_s)) " s, scaled to the row's busiest column; red lines are incident triggers." }
            @if o.events.is_empty() {
                p { "The log holds no event." }
            } @else {
                (svg::rates(o, &triggers))
            }
            @if o.rates_left_out > 0 {
                p class="note" { (count(o.rates_left_out as u64, "less busy kind")) " not drawn (at most " (LANES_MAX) " rows); the table lists them." }
            }
            table class="rates-table" {
                thead { tr { th { "kind" } th class="n" { "events in the log" } th class="n" { "mean per second" } th class="n" { "busiest column, per second" } } }
                tbody { @for (kind, n) in o.events.iter().take(ROWS_MAX) {
                    @let most = o.rates.get(kind).and_then(|r| r.iter().max().copied()).unwrap_or(0);
                    tr { td { code { (kind) } } td class="n" { (n) }
                        td class="n" { (trim(*n as f64 / span_s.max(1e-9))) }
                        td class="n" { (trim(most as f64 / column_s.max(1e-9))) } }
                } }
            }
        }
        section id="incidents" {
            h2 { "Incidents" }
            @if o.incidents.is_empty() {
                p { "No incident in the log." }
            } @else {
                ol {
                    @for (n, (_, i)) in o.incidents.iter().enumerate().take(ROWS_MAX) {
                        li { a href=(format!("#incident-{}", n + 1)) { (incident_title(i)) } " (trigger seq " (i.trigger_seq) ")" }
                    }
                }
                (more_rows(o.incidents.len(), "incidents"))
                @for (n, (_, i)) in o.incidents.iter().enumerate().take(ROWS_MAX) {
                    section id=(format!("incident-{}", n + 1)) class="incident" {
                        h3 { "Incident " (n + 1) ": " (incident_title(i)) }
                        table class="kv" {
                            tr { td { "trigger" } td { code { (i.trigger_kind) } " · seq " (i.trigger_seq) } }
                            tr { td { "window" } td { (format_time(i.preroll_start_ns)) " to " (format_time(i.postroll_end_ns)) } }
                            tr { td { "pre-roll" } td { (i.preroll_events) " events written from the ring" } }
                            tr { td { "its report" } td { code { "blackbox report --dir " (dir_arg) " --incident " (n + 1) " --out incident-" (n + 1) ".html" } } }
                        }
                    }
                }
            }
        }
        section id="accounting" {
            h2 { "Accounting since the log was created" }
            (accounting_table(facts.kinds))
            p class="note" { (o.kb_commits) " knowledge-base commits in the log." }
        }
        section id="disk" {
            h2 { "Disk" }
            p { (facts.bytes) " bytes in " (count(facts.segments as u64, "segment file")) " ("
                (trim(facts.bytes as f64 / 1_048_576.0)) " MiB; "
                (trim(facts.bytes as f64 / facts.records.max(1) as f64)) " bytes a record)." }
        }
        (integrity(checked, digest, command, dir_arg))
    };
    page(title, subtitle, &nav, body).into_string()
}
