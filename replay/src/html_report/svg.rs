//! The report's drawings, inline SVG: the timeline of a window (a lane per kind, each
//! record where it happened, shaded by tier), a plot per value, and the overview's rates.
//! Every figure has a fixed coordinate system (`viewBox`) and scales to the page.

use std::collections::BTreeMap;

use blackbox::codec::WrittenTier;
use maud::{Markup, html};

use super::gather::{COLUMNS, KbChange, Lane, OverviewData, RATE_COLUMNS, Series, TIERS};
use crate::decode::Incident;

/// Width of every figure.
const WIDTH: f64 = 1000.0;
/// Left gutter, for the lanes' names.
const GUTTER: f64 = 190.0;
/// Right margin.
const MARGIN: f64 = 12.0;
/// Height of a lane.
const LANE: f64 = 20.0;
/// Height of the time axis.
const AXIS: f64 = 26.0;
/// Height of a value plot's drawing area.
const PLOT: f64 = 110.0;

/// Maps times of a window to x.
#[derive(Debug, Clone, Copy)]
pub struct Scale {
    since_ns: u64,
    until_ns: u64,
    /// Where tick labels count from (the trigger, or the window's start).
    origin_ns: u64,
}

impl Scale {
    pub fn new(since_ns: u64, until_ns: u64, origin_ns: u64) -> Scale {
        // A window of at least 1 ns, inside u64.
        let since_ns = since_ns.min(u64::MAX - 1);
        Scale {
            since_ns,
            until_ns: until_ns.max(since_ns + 1),
            origin_ns,
        }
    }

    /// The x of a time.
    pub fn x(&self, ts_ns: u64) -> f64 {
        let span = (self.until_ns - self.since_ns) as f64;
        let f = (ts_ns.clamp(self.since_ns, self.until_ns) - self.since_ns) as f64 / span;
        GUTTER + f * (WIDTH - GUTTER - MARGIN)
    }

    /// The x of a column's left edge, and its width.
    fn column(&self, i: usize, columns: usize) -> (f64, f64) {
        let w = (WIDTH - GUTTER - MARGIN) / columns as f64;
        (GUTTER + i as f64 * w, w)
    }

    /// Ticks: (x, label), at a round step, about eight over the window.
    fn ticks(&self) -> Vec<(f64, String)> {
        const STEPS_NS: [u64; 22] = [
            1_000_000,
            2_000_000,
            5_000_000,
            10_000_000,
            20_000_000,
            50_000_000,
            100_000_000,
            200_000_000,
            500_000_000,
            1_000_000_000,
            2_000_000_000,
            5_000_000_000,
            10_000_000_000,
            30_000_000_000,
            60_000_000_000,
            120_000_000_000,
            300_000_000_000,
            600_000_000_000,
            1_800_000_000_000,
            3_600_000_000_000,
            21_600_000_000_000,
            86_400_000_000_000,
        ];
        let span = self.until_ns - self.since_ns;
        let step = STEPS_NS
            .into_iter()
            .find(|s| span / s <= 8)
            .unwrap_or(span.div_ceil(8).max(1));
        // The first tick at or after the window's start, on the step's grid around the
        // origin.
        let origin = self.origin_ns as i128;
        let since = self.since_ns as i128;
        let step_i = step as i128;
        let mut t = origin + ((since - origin).div_euclid(step_i)) * step_i;
        if t < since {
            t += step_i;
        }
        let mut out = Vec::new();
        while t <= self.until_ns as i128 && out.len() < 20 {
            let rel = t - origin;
            // t lies in [since, until] here: a u64.
            out.push((
                self.x(u64::try_from(t).unwrap_or(self.until_ns)),
                relative(rel),
            ));
            t += step_i;
        }
        out
    }
}

/// A time relative to the origin: `0`, `+1.5 s`, `−250 ms`, `+2 min`.
pub fn relative(ns: i128) -> String {
    if ns == 0 {
        return "0".to_owned();
    }
    let sign = if ns < 0 { "−" } else { "+" };
    let a = ns.unsigned_abs();
    let text = if a < 1_000_000_000 {
        format!("{} ms", trim(a as f64 / 1e6))
    } else if a < 120_000_000_000 {
        format!("{} s", trim(a as f64 / 1e9))
    } else if a < 7_200_000_000_000 {
        format!("{} min", trim(a as f64 / 6e10))
    } else {
        format!("{} h", trim(a as f64 / 3.6e12))
    };
    format!("{sign}{text}")
}

/// A number as a label: four significant digits, in scientific notation when very
/// large or very small, trailing zeros cut.
pub fn trim(v: f64) -> String {
    if !v.is_finite() {
        return v.to_string();
    }
    let a = v.abs();
    if a != 0.0 && !(1e-3..1e7).contains(&a) {
        return format!("{v:.3e}");
    }
    // Decimals for four significant digits (at least none, at most six).
    let digits = [1000.0, 100.0, 10.0, 1.0, 0.1, 0.01]
        .iter()
        .position(|&bound| a >= bound)
        .unwrap_or(6);
    let s = format!("{v:.digits$}");
    let s = if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        &s
    };
    if s.is_empty() || s == "-" || s == "-0" {
        "0".to_owned()
    } else {
        s.to_owned()
    }
}

/// The CSS class of a tier's marks.
pub fn tier_class(tier: WrittenTier) -> &'static str {
    match tier {
        WrittenTier::Full => "t-full",
        WrittenTier::Sample => "t-sample",
        WrittenTier::Preroll => "t-preroll",
        WrittenTier::Postroll => "t-postroll",
    }
}

/// Coordinates rounded to a tenth: small files.
fn c(v: f64) -> String {
    let r = (v * 10.0).round() / 10.0;
    if r.fract() == 0.0 {
        format!("{r:.0}")
    } else {
        format!("{r:.1}")
    }
}

/// The time axis and the vertical grid over a figure of `height` below it.
fn axis(scale: &Scale, height: f64) -> Markup {
    html! {
        g class="axis" {
            @for (x, label) in scale.ticks() {
                line x1=(c(x)) x2=(c(x)) y1=(c(AXIS - 6.0)) y2=(c(AXIS + height)) class="grid" {}
                text x=(c(x)) y=(c(AXIS - 10.0)) text-anchor="middle" { (label) }
            }
        }
    }
}

/// The incident's pre-roll and post-roll as shaded bands, and its trigger as a line.
fn incident_marks(scale: &Scale, incident: Option<&Incident>, top: f64, height: f64) -> Markup {
    html! {
        @if let Some(i) = incident {
            rect class="preroll-band" x=(c(scale.x(i.preroll_start_ns))) y=(c(top))
                width=(c(scale.x(i.trigger_ts_ns) - scale.x(i.preroll_start_ns))) height=(c(height)) {
                title { "pre-roll: kept at full fidelity before the trigger" }
            }
            rect class="postroll-band" x=(c(scale.x(i.trigger_ts_ns))) y=(c(top))
                width=(c(scale.x(i.postroll_end_ns) - scale.x(i.trigger_ts_ns))) height=(c(height)) {
                title { "post-roll: kept at full fidelity after the trigger" }
            }
            line class="trigger" x1=(c(scale.x(i.trigger_ts_ns))) x2=(c(scale.x(i.trigger_ts_ns)))
                y1=(c(top - 4.0)) y2=(c(top + height)) {
                title { "trigger: " (i.trigger_kind) " (seq " (i.trigger_seq) ")" }
            }
        }
    }
}

/// A lane's name, cut to fit the gutter (the whole name in its tooltip).
fn lane_label(name: &str, y: f64) -> Markup {
    let shown: String = if name.chars().count() > 30 {
        let cut: String = name.chars().take(29).collect();
        format!("{cut}…")
    } else {
        name.to_owned()
    };
    html! {
        text class="lane-label" x=(c(GUTTER - 8.0)) y=(c(y + LANE * 0.7)) text-anchor="end" {
            title { (name) } (shown)
        }
    }
}

/// The timeline: a lane per kind (its events where they happened, shaded by tier; its
/// summary windows as grey spans), a lane for the knowledge base's commits, the
/// incident's windows and trigger.
pub fn timeline(
    scale: &Scale,
    lanes: &BTreeMap<String, Lane>,
    kb: &[KbChange],
    cited: &BTreeMap<u64, Option<super::gather::Cited>>,
    incident: Option<&Incident>,
    others: &[Incident],
) -> Markup {
    let rows = lanes.len() + 1;
    let height = AXIS + rows as f64 * LANE + 8.0;
    let body = rows as f64 * LANE;
    html! {
        svg class="timeline" viewBox=(format!("0 0 {WIDTH} {}", c(height))) role="img"
            aria-label="Timeline of the window: one lane per kind" {
            (incident_marks(scale, incident, AXIS, body))
            @for o in others {
                line class="other-trigger" x1=(c(scale.x(o.trigger_ts_ns))) x2=(c(scale.x(o.trigger_ts_ns)))
                    y1=(c(AXIS)) y2=(c(AXIS + body)) {
                    title { "another incident's trigger: " (o.trigger_kind) " (seq " (o.trigger_seq) ")" }
                }
            }
            (axis(scale, body))
            @for (row, (kind, lane)) in lanes.iter().enumerate() {
                @let y = AXIS + row as f64 * LANE;
                g class="lane" data-kind=(kind) {
                    (lane_label(kind, y))
                    line class="lane-rule" x1=(c(GUTTER)) x2=(c(WIDTH - MARGIN)) y1=(c(y + LANE)) y2=(c(y + LANE)) {}
                    @for &(start, end, count) in &lane.summaries {
                        rect class="summary" x=(c(scale.x(start))) y=(c(y + 3.0))
                            width=(c((scale.x(end) - scale.x(start)).max(0.5))) height=(c(LANE - 6.0)) {
                            title { "summary window: " (count) " events folded" }
                        }
                    }
                    @match &lane.columns {
                        None => {
                            @for m in &lane.marks {
                                @if cited.contains_key(&m.seq) {
                                    a href=(format!("#rec-{}", m.seq)) {
                                        rect class=(format!("{} cited", tier_class(m.tier))) x=(c(scale.x(m.ts_ns) - 1.5)) y=(c(y + 1.0)) width="3" height=(c(LANE - 2.0)) {
                                            title { "seq " (m.seq) ": cited by the knowledge base" }
                                        }
                                    }
                                } @else {
                                    rect class=(tier_class(m.tier)) x=(c(scale.x(m.ts_ns) - 0.6)) y=(c(y + 4.0)) width="1.2" height=(c(LANE - 8.0)) {}
                                }
                            }
                        }
                        Some(columns) => {
                            @let most = columns.iter().map(|col| col.by_tier.iter().sum::<u64>()).max().unwrap_or(1).max(1);
                            @for (i, col) in columns.iter().enumerate() {
                                @let n: u64 = col.by_tier.iter().sum();
                                @if n > 0 {
                                    @let (x, w) = scale.column(i, COLUMNS);
                                    @let h = (LANE - 8.0) * (0.25 + 0.75 * n as f64 / most as f64);
                                    @let tier = TIERS[col.by_tier.iter().enumerate().max_by_key(|(_, n)| **n).map_or(0, |(i, _)| i)];
                                    rect class=(tier_class(tier)) x=(c(x)) y=(c(y + LANE - 4.0 - h)) width=(c(w.max(0.6))) height=(c(h)) {
                                        title { (n) " events" }
                                    }
                                }
                            }
                        }
                    }
                }
            }
            @let y = AXIS + lanes.len() as f64 * LANE;
            g class="lane kb-lane" {
                (lane_label("knowledge base", y))
                @for k in kb.iter().take(super::gather::MARKS_MAX) {
                    @let x = scale.x(k.ts_ns);
                    @let m = y + LANE / 2.0;
                    a href=(format!("#commit-{}", k.seq)) {
                        path class=(format!("kb-mark outcome-{}", k.outcome)) d=(format!("M{} {}l5 5l-5 5l-5 -5z", c(x), c(m - 5.0))) {
                            title { "v" (k.version) " " (k.key) ": " (k.outcome) }
                        }
                    }
                }
            }
        }
    }
}

/// A plot of one value over the window: events as points (by tier), crowded events as
/// columns from min to max with the mean, summary windows as a min–max band with the
/// mean as a line.
pub fn plot(scale: &Scale, series: &Series, incident: Option<&Incident>) -> Markup {
    let mut lo = f64::INFINITY;
    let mut hi = f64::NEG_INFINITY;
    for &(_, v, _) in &series.points {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    for &(n, min, max, _) in series.columns.iter().flatten() {
        if n > 0 {
            lo = lo.min(min);
            hi = hi.max(max);
        }
    }
    for &(_, _, _, min, max, _) in &series.summaries {
        lo = lo.min(min);
        hi = hi.max(max);
    }
    if !lo.is_finite() || !hi.is_finite() {
        lo = 0.0;
        hi = 1.0;
    }
    // A flat series gets a band around it, wide enough to be seen at its magnitude.
    let flat = (hi - lo).abs() <= hi.abs().max(lo.abs()) * 1e-9;
    if flat {
        let half = (hi.abs() * 1e-3).max(0.5);
        lo -= half;
        hi += half;
    }
    let pad = (hi - lo) * 0.06;
    let (lo, hi) = (lo - pad, hi + pad);
    if !(hi - lo).is_finite() || hi - lo <= 0.0 {
        return html! { p class="note" { "These values span more than a plot can draw." } };
    }
    let top = AXIS;
    let y = |v: f64| top + (hi - v) / (hi - lo) * PLOT;
    let height = AXIS + PLOT + 6.0;
    html! {
        svg class="plot" viewBox=(format!("0 0 {WIDTH} {}", c(height))) role="img" {
            (incident_marks(scale, incident, top, PLOT))
            (axis(scale, PLOT))
            line class="lane-rule" x1=(c(GUTTER)) x2=(c(WIDTH - MARGIN)) y1=(c(top + PLOT)) y2=(c(top + PLOT)) {}
            text class="y-label" x=(c(GUTTER - 8.0)) y=(c(top + 10.0)) text-anchor="end" { (trim(hi)) }
            text class="y-label" x=(c(GUTTER - 8.0)) y=(c(top + PLOT)) text-anchor="end" { (trim(lo)) }
            @for &(start, end, count, min, max, mean) in &series.summaries {
                @let (x0, x1) = (scale.x(start), scale.x(end));
                rect class="band" x=(c(x0)) y=(c(y(max))) width=(c((x1 - x0).max(0.5))) height=(c((y(min) - y(max)).max(0.5))) {
                    title { "summary of " (count) " events: min " (trim(min)) ", max " (trim(max)) ", mean " (trim(mean)) }
                }
                line class="mean" x1=(c(x0)) x2=(c(x1)) y1=(c(y(mean))) y2=(c(y(mean))) {}
            }
            @if let Some(columns) = &series.columns {
                @for (i, &(n, min, max, sum)) in columns.iter().enumerate() {
                    @if n > 0 && (sum / n as f64).is_finite() {
                        @let (x, w) = scale.column(i, COLUMNS);
                        @let mid = x + w / 2.0;
                        line class="column" x1=(c(mid)) x2=(c(mid)) y1=(c(y(max))) y2=(c(y(min) + 0.5)) {}
                        line class="mean" x1=(c(x)) x2=(c(x + w)) y1=(c(y(sum / n as f64))) y2=(c(y(sum / n as f64))) {}
                    }
                }
            }
            @for &(ts, v, tier) in &series.points {
                circle class=(tier_class(tier)) cx=(c(scale.x(ts))) cy=(c(y(v))) r="1.8" {}
            }
        }
    }
}

/// The overview's rates: a row per kind, its events per column of the log's span.
pub fn rates(data: &OverviewData, incidents_ns: &[u64]) -> Markup {
    let scale = Scale::new(data.first_ns, data.last_ns, data.first_ns);
    let rows = data.rates.len();
    let height = AXIS + rows as f64 * LANE + 8.0;
    let body = rows as f64 * LANE;
    html! {
        svg class="rates" viewBox=(format!("0 0 {WIDTH} {}", c(height))) role="img"
            aria-label="Events per kind over the log's span" {
            (axis(&scale, body))
            @for &t in incidents_ns {
                line class="trigger" x1=(c(scale.x(t))) x2=(c(scale.x(t))) y1=(c(AXIS)) y2=(c(AXIS + body)) {}
            }
            @for (row, (kind, counts)) in data.rates.iter().enumerate() {
                @let y = AXIS + row as f64 * LANE;
                @let most = counts.iter().copied().max().unwrap_or(1).max(1);
                g class="lane" data-kind=(kind) {
                    (lane_label(kind, y))
                    line class="lane-rule" x1=(c(GUTTER)) x2=(c(WIDTH - MARGIN)) y1=(c(y + LANE)) y2=(c(y + LANE)) {}
                    @for (i, &n) in counts.iter().enumerate() {
                        @if n > 0 {
                            @let (x, w) = scale.column(i, RATE_COLUMNS);
                            @let h = (LANE - 4.0) * n as f64 / most as f64;
                            rect class="t-full" x=(c(x)) y=(c(y + LANE - 2.0 - h)) width=(c(w)) height=(c(h.max(0.6))) {
                                title { (n) " events" }
                            }
                        }
                    }
                }
            }
        }
    }
}
