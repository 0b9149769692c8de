//! The report: the table of rows, how each row answers the window query, and the
//! ratios that the recorder's targets name, each judged met or missed.

use std::fmt::Write as _;
use std::time::Duration;

use crate::harness::Row;

/// Renders `rows` as a markdown table.
#[must_use]
pub fn markdown_table(rows: &[Row]) -> String {
    let mut out = String::new();
    out.push_str(
        "| contender | durability | integrity | write (events/s) | read (events/s) | one kind in a 10 % window | disk / logical |\n",
    );
    out.push_str("|---|---|---|---:|---:|---:|---:|\n");
    for row in rows {
        let d = &row.description;
        // Writing into a String cannot fail.
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {:.2} |",
            d.name,
            d.durability,
            d.integrity,
            millions(row.write_eps),
            millions(row.read_eps),
            millis(row.window),
            row.disk_ratio,
        );
    }
    out
}

/// One line per row: how it answers the window query.
#[must_use]
pub fn window_paths(rows: &[Row]) -> String {
    let mut out = String::new();
    for row in rows {
        let _ = writeln!(
            out,
            "- {}: {}",
            row.description.name, row.description.window_path
        );
    }
    out
}

/// A rate in millions a second, two decimals: `2.70 M`.
#[must_use]
pub fn millions(eps: f64) -> String {
    format!("{:.2} M", eps / 1e6)
}

/// A duration in milliseconds with three significant digits: `115 ms`, `7.80 ms`.
#[must_use]
pub fn millis(d: Duration) -> String {
    let ms = d.as_secs_f64() * 1e3;
    if ms >= 100.0 {
        format!("{ms:.0} ms")
    } else if ms >= 10.0 {
        format!("{ms:.1} ms")
    } else {
        format!("{ms:.2} ms")
    }
}

/// Which figure a target compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metric {
    /// Events written per second: higher is better.
    Write,
    /// Events read per second: higher is better.
    Read,
    /// Time to answer the window query: lower is better.
    Window,
    /// Bytes on disk: lower is better.
    Disk,
}

impl Metric {
    fn value(self, row: &Row) -> f64 {
        match self {
            Metric::Write => row.write_eps,
            Metric::Read => row.read_eps,
            Metric::Window => row.window.as_secs_f64(),
            Metric::Disk => row.disk_ratio,
        }
    }

    fn higher_is_better(self) -> bool {
        matches!(self, Metric::Write | Metric::Read)
    }

    fn show(self, row: &Row) -> String {
        match self {
            Metric::Write => format!("{}/s", millions(row.write_eps)),
            Metric::Read => format!("{}/s", millions(row.read_eps)),
            Metric::Window => millis(row.window),
            Metric::Disk => format!("{:.2} × logical", row.disk_ratio),
        }
    }

    fn noun(self) -> &'static str {
        match self {
            Metric::Write => "write",
            Metric::Read => "read",
            Metric::Window => "window query",
            Metric::Disk => "bytes on disk",
        }
    }
}

/// How a ratio must compare with its bound.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Bound {
    /// `ratio ≥ x`.
    AtLeast(f64),
    /// `ratio ≤ x`.
    AtMost(f64),
    /// `ratio < x`.
    Below(f64),
}

impl Bound {
    fn holds(self, ratio: f64) -> bool {
        match self {
            Bound::AtLeast(x) => ratio >= x,
            Bound::AtMost(x) => ratio <= x,
            Bound::Below(x) => ratio < x,
        }
    }

    fn show(self) -> String {
        match self {
            Bound::AtLeast(x) => format!("≥ {x:.1}×"),
            Bound::AtMost(x) => format!("≤ {x:.1}×"),
            Bound::Below(x) => format!("< {x:.1}×"),
        }
    }
}

/// A target: the ratio of one row's figure to the best of some other rows'.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Target {
    /// The row measured (a [`Description::id`](crate::harness::Description::id)).
    pub row: &'static str,
    /// The rows it is measured against; the best of them (fastest, smallest) counts.
    pub against: &'static [&'static str],
    /// The figure compared.
    pub metric: Metric,
    /// What the ratio `row / against` must be.
    pub bound: Bound,
}

/// The recorder's targets, as ratios within one run.
pub const TARGETS: &[Target] = &[
    Target {
        row: "recorder-buffered",
        against: &["mcap-unchunked"],
        metric: Metric::Write,
        bound: Bound::AtLeast(1.0),
    },
    Target {
        row: "log-buffered",
        against: &["mcap-unchunked"],
        metric: Metric::Write,
        bound: Bound::AtLeast(1.5),
    },
    Target {
        row: "recorder-buffered",
        against: &["mcap-unchunked", "mcap-chunked"],
        metric: Metric::Read,
        bound: Bound::AtLeast(1.0),
    },
    Target {
        row: "log-buffered",
        against: &["mcap-unchunked", "mcap-chunked"],
        metric: Metric::Read,
        bound: Bound::AtLeast(1.5),
    },
    Target {
        row: "recorder-buffered",
        against: &["mcap-chunked"],
        metric: Metric::Window,
        bound: Bound::AtMost(2.0),
    },
    Target {
        row: "recorder-buffered",
        against: &["sqlite-normal", "sqlite-full"],
        metric: Metric::Window,
        bound: Bound::Below(1.0),
    },
    Target {
        row: "recorder-buffered",
        against: &["mcap-unchunked"],
        metric: Metric::Disk,
        bound: Bound::AtMost(1.0),
    },
    Target {
        row: "recorder-sync",
        against: &["fjall"],
        metric: Metric::Write,
        bound: Bound::AtLeast(2.0),
    },
    Target {
        row: "recorder-sync",
        against: &["sqlite-full"],
        metric: Metric::Write,
        bound: Bound::AtLeast(4.0),
    },
];

/// How one target fared.
#[derive(Debug, Clone, PartialEq)]
pub struct Judged {
    /// The target.
    pub target: Target,
    /// `row / best of against`, on the target's metric.
    pub ratio: f64,
    /// Whether the ratio meets the bound.
    pub met: bool,
    /// The line for the report.
    pub line: String,
}

/// Judges every target whose rows are all in `rows` (the others are skipped).
#[must_use]
pub fn judge(rows: &[Row], targets: &[Target]) -> Vec<Judged> {
    let find = |id: &str| rows.iter().find(|r| r.description.id == id);
    let mut out = Vec::new();
    for &target in targets {
        let Some(row) = find(target.row) else {
            continue;
        };
        let metric = target.metric;
        let best = target
            .against
            .iter()
            .filter_map(|id| find(id))
            .reduce(|a, b| {
                let better = if metric.higher_is_better() {
                    metric.value(b) > metric.value(a)
                } else {
                    metric.value(b) < metric.value(a)
                };
                if better { b } else { a }
            });
        let Some(other) = best else {
            continue;
        };
        let ratio = metric.value(row) / metric.value(other);
        let met = target.bound.holds(ratio);
        let line = format!(
            "{} {} vs {}: {} against {} = {ratio:.2}× (target {}): {}",
            row.description.name,
            metric.noun(),
            other.description.name,
            metric.show(row),
            metric.show(other),
            target.bound.show(),
            if met { "met" } else { "**missed**" },
        );
        out.push(Judged {
            target,
            ratio,
            met,
            line,
        });
    }
    out
}

/// The judged targets as a markdown list.
#[must_use]
pub fn ratios(rows: &[Row]) -> String {
    let mut out = String::new();
    for judged in judge(rows, TARGETS) {
        let _ = writeln!(out, "- {}", judged.line);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::Description;

    fn row(id: &'static str, write: f64, read: f64, window_ms: f64, disk: f64) -> Row {
        Row {
            description: Description {
                id,
                name: id,
                durability: "d",
                integrity: "i",
                window_path: "p",
            },
            write_eps: write,
            read_eps: read,
            window: Duration::from_secs_f64(window_ms / 1e3),
            disk_ratio: disk,
        }
    }

    #[test]
    fn figures_are_formatted_for_the_table() {
        assert_eq!(millions(2_700_000.0), "2.70 M");
        assert_eq!(millions(500_000.0), "0.50 M");
        assert_eq!(millis(Duration::from_micros(115_400)), "115 ms");
        assert_eq!(millis(Duration::from_micros(55_040)), "55.0 ms");
        assert_eq!(millis(Duration::from_micros(1_960)), "1.96 ms");
        let table = markdown_table(&[row("a", 1e6, 2e6, 3.0, 1.5)]);
        assert!(
            table.contains("| a | d | i | 1.00 M | 2.00 M | 3.00 ms | 1.50 |"),
            "{table}"
        );
    }

    #[test]
    fn ratios_are_row_over_the_best_peer_and_judged_by_direction() {
        // The first table, by hand: the recorder writes 2.70 M/s against MCAP's
        // 7.53 M/s (0.36×, missed); its window takes 55 ms against MCAP's indexed
        // 1.96 ms (28×, missed) and SQLite's 7.8 ms (7.1×, missed); its bytes are 1.64
        // against 1.16 (1.41×, missed).
        let rows = [
            row("recorder-buffered", 2.70e6, 2.27e6, 55.0, 1.64),
            row("log-buffered", 7.75e6, 13.9e6, 7.7, 1.19),
            row("mcap-unchunked", 7.53e6, 8.71e6, 115.0, 1.16),
            row("mcap-chunked", 5.03e6, 8.22e6, 1.96, 1.30),
            row("sqlite-normal", 0.9e6, 5.9e6, 8.1, 1.52),
            row("sqlite-full", 0.50e6, 5.76e6, 7.8, 1.52),
            row("recorder-sync", 2.2e6, 2.27e6, 55.0, 1.70),
            row("fjall", 0.92e6, 1.77e6, 3.0, 1.16),
        ];
        let judged = judge(&rows, TARGETS);
        assert_eq!(judged.len(), TARGETS.len());
        let ratios: Vec<f64> = judged.iter().map(|j| j.ratio).collect();
        let by_hand = [
            2.70 / 7.53, // recorder write vs MCAP unchunked
            7.75 / 7.53, // log write vs MCAP unchunked
            2.27 / 8.71, // Replay read vs the faster MCAP read (unchunked)
            13.9 / 8.71, // log read vs the same
            55.0 / 1.96, // window vs MCAP indexed
            55.0 / 7.8,  // window vs the faster SQLite (FULL here)
            1.64 / 1.16, // bytes vs MCAP unchunked
            2.2 / 0.92,  // Sync vs fjall
            2.2 / 0.50,  // Sync vs SQLite FULL
        ];
        for (got, want) in ratios.iter().zip(by_hand) {
            assert!((got - want).abs() < 1e-9, "{got} vs {want}");
        }
        let met: Vec<bool> = judged.iter().map(|j| j.met).collect();
        assert_eq!(
            met,
            [false, false, false, true, false, false, false, true, true]
        );
        assert!(
            judged[5].line.contains("vs sqlite-full"),
            "{}",
            judged[5].line
        );
        assert!(judged[0].line.ends_with("**missed**"), "{}", judged[0].line);
    }

    #[test]
    fn targets_whose_rows_are_missing_are_skipped() {
        let rows = [row("recorder-buffered", 1.0, 1.0, 1.0, 1.0)];
        assert!(judge(&rows, TARGETS).is_empty());
        assert!(ratios(&rows).is_empty());
    }

    #[test]
    fn bounds_are_inclusive_only_where_they_say_so() {
        assert!(Bound::AtLeast(1.0).holds(1.0));
        assert!(Bound::AtMost(2.0).holds(2.0));
        assert!(!Bound::Below(1.0).holds(1.0));
        assert!(Bound::Below(1.0).holds(0.99));
    }
}
