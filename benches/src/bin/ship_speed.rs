//! Shipping beside the recorder: the log's write throughput, the shipping throughput
//! to a store, and `Recorder::record`'s latency with and without a shipper running.
//!
//! ```text
//! cargo run --release -p blackbox-benches --bin ship_speed -- \
//!     [--to URL] [--mb MB] [--rate EVENTS_PER_S] [--seconds S] [--runs R] [--dir PATH]
//! ```
//!
//! `--to` is where each run ships, under a prefix of its own: `s3://BUCKET/PREFIX` (the
//! store the environment names, as `blackbox ship` reads it: an S3 API server on
//! loopback, `moto_server`, for the figures of PERFORMANCE.md) or `file:///PATH`
//! [default: a directory under `--dir`]. Defaults: 256 MB of log, 100 000 events/s for
//! 5 s, 3 runs.
//!
//! Per run:
//! 1. **Write**: the `Recorder` records events of a 100-byte JSON payload as fast as
//!    one producer can, into 8 MiB segments, until the log holds `--mb` MB; the log's
//!    bytes over the time from open to close are its write throughput.
//! 2. **Ship**: one `blackbox_ship::ship` pass of that log's sealed segments (every one
//!    but the last); bytes uploaded over its time.
//! 3. **Latency**: one producer records `--rate` events a second for `--seconds` on a
//!    fixed schedule (busy-waiting; each `record` call timed into an HDR histogram), into
//!    1 MiB segments, first alone, then with the recorder's shipper on
//!    (`Config::ship`: a thread that ships each segment as it is sealed, a pass every
//!    100 ms).
//!
//! The report (markdown, on stdout) gives the medians over the runs: write and ship
//! MB/s and their ratio, and the latency percentiles alone and while shipping.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use blackbox::{Config, Durability, Event, LogOptions, Recorder, Ship};
use blackbox_benches::harness::{dir_usage, median};
use blackbox_benches::{BoxError, Result};
use blackbox_ship::ShipOptions;
use hdrhistogram::Histogram;

const USAGE: &str = "usage: ship_speed [--to URL] [--mb MB] [--rate EVENTS_PER_S] [--seconds S] \
                     [--runs R] [--dir PATH]";

#[derive(Debug)]
struct Args {
    to: Option<String>,
    mb: u64,
    rate: f64,
    seconds: f64,
    runs: usize,
    dir: PathBuf,
}

fn parse_args(mut args: impl Iterator<Item = String>) -> Result<Option<Args>> {
    let mut parsed = Args {
        to: None,
        mb: 256,
        rate: 100_000.0,
        seconds: 5.0,
        runs: 3,
        dir: std::env::temp_dir(),
    };
    while let Some(arg) = args.next() {
        let mut value = || {
            args.next()
                .ok_or_else(|| BoxError::from(format!("{arg} needs a value\n{USAGE}")))
        };
        match arg.as_str() {
            "--to" => parsed.to = Some(value()?),
            "--mb" => parsed.mb = value()?.parse()?,
            "--rate" => parsed.rate = value()?.parse()?,
            "--seconds" => parsed.seconds = value()?.parse()?,
            "--runs" => parsed.runs = value()?.parse()?,
            "--dir" => parsed.dir = PathBuf::from(value()?),
            "-h" | "--help" => return Ok(None),
            other => return Err(format!("unknown argument {other:?}\n{USAGE}").into()),
        }
    }
    if !(parsed.mb > 0 && parsed.rate > 0.0 && parsed.seconds > 0.0 && parsed.runs > 0) {
        return Err(format!("mb, rate, seconds and runs must be positive\n{USAGE}").into());
    }
    Ok(Some(parsed))
}

fn main() -> ExitCode {
    blackbox_benches::main_of(
        "ship_speed",
        USAGE,
        parse_args(std::env::args().skip(1)),
        run,
    )
}

/// A 100-byte JSON payload.
fn payload(i: u64) -> String {
    format!(
        r#"{{"seq":{i:>12},"joint":[0.125,-1.5,2.25],"state":"ok","pad":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}}"#
    )
}

fn config(segment_bytes: u64) -> Config {
    Config::new()
        .durability(Durability::Buffered)
        .log_options(LogOptions::new().segment_bytes_max(segment_bytes))
}

/// A non-negative float rounded down to an integer (`as` saturates, and maps NaN to 0).
#[allow(clippy::cast_possible_truncation)]
fn to_u64(x: f64) -> u64 {
    x as u64
}

/// MB/s.
fn rate(bytes: u64, elapsed: Duration) -> f64 {
    bytes as f64 / 1e6 / elapsed.as_secs_f64()
}

/// Records until the log holds `mb` MB; returns its bytes and the time taken.
fn write(dir: &Path, mb: u64) -> Result<(u64, Duration)> {
    let target = mb * 1_000_000;
    let start = Instant::now();
    let rec = Recorder::open(dir, config(8 << 20))?;
    let mut i = 0u64;
    loop {
        for _ in 0..10_000 {
            let p = payload(i);
            rec.record(&Event::new("robot.state").json(&p))?;
            i += 1;
        }
        // Measured between batches: the writer may lag by a channel's worth.
        if dir_usage(dir)?.apparent >= target {
            break;
        }
    }
    rec.close()?;
    let elapsed = start.elapsed();
    Ok((dir_usage(dir)?.apparent, elapsed))
}

/// The quantiles reported.
const QUANTILES: [(f64, &str); 4] = [(0.5, "p50"), (0.99, "p99"), (0.999, "p99.9"), (1.0, "max")];

/// Records at `rate` for `seconds`, each call timed; with `ship_to`, the recorder ships
/// each segment as it seals meanwhile (`Config::ship`, a pass every 100 ms). Returns the
/// histogram and the segments shipped.
fn paced(dir: &Path, args: &Args, ship_to: Option<&str>) -> Result<(Histogram<u64>, u64)> {
    let mut config = config(1 << 20);
    if let Some(url) = ship_to {
        config = config.ship(Ship::to(url).interval(Duration::from_millis(100)));
    }
    let rec = Recorder::open(dir, config)?;
    let mut hist = Histogram::<u64>::new_with_bounds(1, 100_000_000_000, 3)?;
    let events = to_u64(args.rate * args.seconds);
    let interval_ns = 1e9 / args.rate;
    let t0 = Instant::now();
    for i in 0..events {
        let p = payload(i);
        let due = t0 + Duration::from_nanos(to_u64(i as f64 * interval_ns));
        while Instant::now() < due {
            std::hint::spin_loop();
        }
        let event = Event::new("robot.state").json(&p);
        let before = Instant::now();
        rec.record(&event)?;
        hist.saturating_record(
            u64::try_from(before.elapsed().as_nanos())
                .unwrap_or(u64::MAX)
                .max(1),
        );
    }
    rec.close()?;
    let status = rec.ship_status().unwrap_or_default();
    if let Some(e) = status.last_error {
        return Err(format!("shipping failed: {e}").into());
    }
    Ok((hist, status.uploaded))
}

fn quantiles(h: &Histogram<u64>) -> Vec<u64> {
    QUANTILES
        .iter()
        .map(|&(q, _)| {
            if q >= 1.0 {
                h.max()
            } else {
                h.value_at_quantile(q)
            }
        })
        .collect()
}

fn run(args: &Args) -> Result<()> {
    let scratch = tempfile::Builder::new()
        .prefix("ship_speed-")
        .tempdir_in(&args.dir)?;
    let base = match &args.to {
        Some(url) => url.trim_end_matches('/').to_owned(),
        None => format!(
            "file://{}",
            std::path::absolute(scratch.path().join("store"))?.display()
        ),
    };
    let pid = std::process::id();
    let (mut writes, mut ships, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    let (mut alone, mut shipping) = (Vec::new(), Vec::new());
    for run in 0..args.runs {
        let log = scratch.path().join(format!("log-{run}"));
        let (bytes, took) = write(&log, args.mb)?;
        let write_mbs = rate(bytes, took);
        let start = Instant::now();
        let report = blackbox_ship::ship(
            &log,
            &format!("{base}/{pid}-{run}/log"),
            &ShipOptions::default(),
        )?;
        let ship_mbs = rate(report.bytes_uploaded, start.elapsed());
        eprintln!(
            "run {run}: wrote {bytes} bytes at {write_mbs:.1} MB/s; shipped {} segments ({} bytes) at {ship_mbs:.1} MB/s",
            report.shipped_segments, report.bytes_uploaded
        );
        writes.push(write_mbs);
        ships.push(ship_mbs);
        ratios.push(ship_mbs / write_mbs);
        std::fs::remove_dir_all(&log)?;

        let quiet = scratch.path().join(format!("paced-{run}"));
        let (h, _) = paced(&quiet, args, None)?;
        alone.push(quantiles(&h));
        std::fs::remove_dir_all(&quiet)?;
        let busy = scratch.path().join(format!("paced-shipping-{run}"));
        let (h, shipped) = paced(&busy, args, Some(&format!("{base}/{pid}-{run}/paced")))?;
        eprintln!("run {run}: {shipped} segments shipped while recording");
        shipping.push(quantiles(&h));
        std::fs::remove_dir_all(&busy)?;
    }
    let med = |v: &mut Vec<f64>| median(v).unwrap_or(f64::NAN);
    println!(
        "## Shipping beside the recorder ({} runs, to {base})\n",
        args.runs
    );
    println!("| write MB/s | ship MB/s | ship / write |");
    println!("|---:|---:|---:|");
    println!(
        "| {:.1} | {:.1} | {:.2} |\n",
        med(&mut writes),
        med(&mut ships),
        med(&mut ratios)
    );
    println!(
        "`record()` at {} events/s for {} s, medians over the runs:\n",
        args.rate, args.seconds
    );
    let labels: Vec<&str> = QUANTILES.iter().map(|(_, l)| *l).collect();
    println!("| | {} |", labels.join(" | "));
    println!("|---|{}", "---:|".repeat(labels.len()));
    for (name, rows) in [("alone", &alone), ("while shipping", &shipping)] {
        let cells: Vec<String> = (0..labels.len())
            .map(|i| {
                let mut v: Vec<f64> = rows.iter().map(|r| r[i] as f64).collect();
                format!("{:.1} µs", med(&mut v) / 1e3)
            })
            .collect();
        println!("| {name} | {} |", cells.join(" | "));
    }
    Ok(())
}
