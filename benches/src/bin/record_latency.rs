//! The latency of `Recorder::record` under a steady load, and the rate of drop-tier
//! events.
//!
//! ```text
//! cargo run --release -p blackbox-benches --bin record_latency -- \
//!     [--rate EVENTS_PER_S] [--threads N] [--seconds S] [--runs R] \
//!     [--payload BYTES] [--tier full|drop] [--no-drop-rate] [--dir PATH]
//! ```
//!
//! Defaults: 200 000 events/s in all from 2 producer threads (100 000 each), for 5 s,
//! one run. Each producer paces itself on a fixed schedule (event `i` is due at
//! `start + i / rate`) by busy-waiting, then times its `record` call with [`Instant`]
//! into an HDR histogram (ns); a producer that falls behind records its late events at
//! once until it is back on schedule. The recorder runs as a host would run it: the
//! system clock, every kind `full`, `Buffered` durability, `Block` on overflow, the
//! default channel; its writer thread encodes and writes the events meanwhile. Every
//! event has a 100-byte JSON payload (`--payload 0`: none; `--tier drop`: the kind is
//! dropped, so nothing reaches the writer; both are for finding where the time goes).
//!
//! Printed first: the cost of the timing itself (two `Instant::now` calls around
//! nothing), which every figure includes. Per run: p50, p90, p99, p99.9 and max of
//! each thread and of both merged, and how far behind schedule the producers fell.
//! With `--runs` above 1, the median of each figure over the runs follows. Then (unless
//! `--no-drop-rate`) the drop-tier rate: `record` of a kind the policy drops, from one
//! thread and from two, for one second each.
//!
//! On a machine with as many cores as producers, the writer shares a core with a
//! busy-waiting producer: the scheduler's preemptions of a producer inside `record`
//! show in the tail.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Barrier;
use std::time::{Duration, Instant};

use blackbox::{Config, Durability, Event, Policy, Recorder, Tier};
use blackbox_benches::{BoxError, Result};
use hdrhistogram::Histogram;

const USAGE: &str = "usage: record_latency [--rate EVENTS_PER_S] [--threads N] [--seconds S] \
                     [--runs R] [--payload BYTES] [--tier full|drop] [--no-drop-rate] \
                     [--dir PATH]";
/// How long each drop-tier measurement lasts.
const DROP_SECONDS: f64 = 1.0;

#[derive(Debug)]
struct Args {
    rate: f64,
    threads: usize,
    seconds: f64,
    runs: usize,
    /// Payload bytes of each timed event (0: none).
    payload: usize,
    /// The timed events' tier: `Full` or `Drop`.
    tier: Tier,
    drop_rate: bool,
    dir: PathBuf,
}

fn parse_args(mut args: impl Iterator<Item = String>) -> Result<Option<Args>> {
    let mut parsed = Args {
        rate: 200_000.0,
        threads: 2,
        seconds: 5.0,
        runs: 1,
        payload: 100,
        tier: Tier::Full,
        drop_rate: true,
        dir: std::env::temp_dir(),
    };
    while let Some(arg) = args.next() {
        let mut value = || {
            args.next()
                .ok_or_else(|| BoxError::from(format!("{arg} needs a value\n{USAGE}")))
        };
        match arg.as_str() {
            "--rate" => parsed.rate = value()?.parse()?,
            "--threads" => parsed.threads = value()?.parse()?,
            "--seconds" => parsed.seconds = value()?.parse()?,
            "--runs" => parsed.runs = value()?.parse()?,
            "--payload" => parsed.payload = value()?.parse()?,
            "--tier" => {
                parsed.tier = match value()?.as_str() {
                    "full" => Tier::Full,
                    "drop" => Tier::Drop,
                    other => return Err(format!("unknown tier {other:?}\n{USAGE}").into()),
                }
            }
            "--no-drop-rate" => parsed.drop_rate = false,
            "--dir" => parsed.dir = PathBuf::from(value()?),
            "-h" | "--help" => return Ok(None),
            other => return Err(format!("unknown argument {other:?}\n{USAGE}").into()),
        }
    }
    if !(parsed.rate > 0.0 && parsed.seconds > 0.0 && parsed.threads > 0 && parsed.runs > 0) {
        return Err(format!("rate, seconds, threads and runs must be positive\n{USAGE}").into());
    }
    Ok(Some(parsed))
}

fn main() -> ExitCode {
    blackbox_benches::main_of(
        "record_latency",
        USAGE,
        parse_args(std::env::args().skip(1)),
        run,
    )
}

/// The percentiles reported, and their labels.
const QUANTILES: [(f64, &str); 5] = [
    (0.50, "p50"),
    (0.90, "p90"),
    (0.99, "p99"),
    (0.999, "p99.9"),
    (1.0, "max"),
];

/// One row of figures (ns): the [`QUANTILES`] of a histogram.
fn figures(h: &Histogram<u64>) -> [u64; 5] {
    QUANTILES.map(|(q, _)| {
        if q >= 1.0 {
            h.max()
        } else {
            h.value_at_quantile(q)
        }
    })
}

fn header() {
    let labels: Vec<String> = QUANTILES.iter().map(|(_, l)| format!("{l:>9}")).collect();
    println!("  {:<10} {:>10} {}", "thread", "events", labels.join(" "));
}

fn row(label: &str, events: Option<u64>, f: &[u64; 5]) {
    let cells: Vec<String> = f.iter().map(|ns| format!("{:>9}", fmt_ns(*ns))).collect();
    let events = events.map_or_else(|| "-".to_owned(), |n| n.to_string());
    println!("  {label:<10} {events:>10} {}", cells.join(" "));
}

fn fmt_ns(ns: u64) -> String {
    if ns < 10_000 {
        format!("{ns} ns")
    } else if ns < 10_000_000 {
        format!("{:.1} µs", ns as f64 / 1e3)
    } else {
        format!("{:.1} ms", ns as f64 / 1e6)
    }
}

/// A non-negative float rounded down to an integer (`as` saturates, and maps NaN to 0).
#[allow(clippy::cast_possible_truncation)]
fn to_u64(x: f64) -> u64 {
    x as u64
}

fn median(mut v: Vec<u64>) -> u64 {
    v.sort_unstable();
    v.get(v.len() / 2).copied().unwrap_or(0)
}

/// A JSON object of (at least) `bytes` bytes whose `seq` field the producer rewrites
/// for each event; no payload at all when `bytes` is 0.
struct Payload {
    bytes: usize,
    text: String,
}

impl Payload {
    fn new(thread: usize, bytes: usize) -> Payload {
        let mut p = Payload {
            bytes,
            text: String::with_capacity(bytes),
        };
        p.set(thread, 0);
        p
    }

    fn set(&mut self, thread: usize, seq: u64) {
        use std::fmt::Write as _;
        self.text.clear();
        if self.bytes == 0 {
            return;
        }
        let _ = write!(
            self.text,
            r#"{{"thread":{thread},"seq":{seq:>12},"joint":[0.125,-1.5,2.25],"state":"ok","pad":""#
        );
        while self.text.len() + 2 < self.bytes {
            self.text.push('x');
        }
        self.text.push_str(r#""}"#);
    }

    fn event(&self) -> Event<'_> {
        let event = Event::new("robot.state");
        if self.bytes == 0 {
            event
        } else {
            event.json(&self.text)
        }
    }
}

fn new_histogram() -> Result<Histogram<u64>> {
    // 1 ns to 100 s, 3 significant digits.
    Ok(Histogram::new_with_bounds(1, 100_000_000_000, 3)?)
}

/// What one producer measured.
struct Producer {
    hist: Histogram<u64>,
    /// The furthest behind schedule it fell (ns).
    max_lag_ns: u64,
    /// Events recorded later than 10 µs after they were due.
    late: u64,
}

fn producer(
    recorder: &Recorder,
    thread: usize,
    args: &Args,
    events: u64,
    start: &Barrier,
) -> Result<Producer> {
    let mut hist = new_histogram()?;
    let mut payload = Payload::new(thread, args.payload);
    let per_thread_rate = args.rate / args.threads as f64;
    let interval_ns = 1e9 / per_thread_rate;
    let mut max_lag_ns = 0u64;
    let mut late = 0u64;
    start.wait();
    let t0 = Instant::now();
    for i in 0..events {
        payload.set(thread, i);
        let due = t0 + Duration::from_nanos(to_u64(i as f64 * interval_ns));
        let mut now = Instant::now();
        while now < due {
            std::hint::spin_loop();
            now = Instant::now();
        }
        let lag = u64::try_from((now - due).as_nanos()).unwrap_or(u64::MAX);
        max_lag_ns = max_lag_ns.max(lag);
        if lag > 10_000 {
            late += 1;
        }
        let event = payload.event();
        let before = Instant::now();
        recorder.record(&event)?;
        let ns = u64::try_from(before.elapsed().as_nanos()).unwrap_or(u64::MAX);
        hist.saturating_record(ns.max(1));
    }
    Ok(Producer {
        hist,
        max_lag_ns,
        late,
    })
}

/// One paced run: per-thread figures, then merged figures.
struct RunResult {
    threads: Vec<[u64; 5]>,
    merged: [u64; 5],
    events_per_s: f64,
}

fn latency_run(args: &Args, run: usize) -> Result<RunResult> {
    let dir = tempfile::Builder::new()
        .prefix("blackbox-record-latency-")
        .tempdir_in(&args.dir)?;
    let policy = Policy::builder()
        .rule("robot.*", args.tier.clone())
        .build()?;
    let recorder = Recorder::open(
        dir.path().join("log"),
        Config::new()
            .policy(policy)
            .durability(Durability::Buffered),
    )?;
    let per_thread_rate = args.rate / args.threads as f64;
    let events = to_u64(per_thread_rate * args.seconds);
    // The kind's first sight (classification, interning) is not part of the workload.
    recorder.record(&Event::new("robot.state").json("{}"))?;
    recorder.sync()?;

    let start = Barrier::new(args.threads + 1);
    let began = Instant::now();
    let results: Vec<Result<Producer>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..args.threads)
            .map(|t| {
                let recorder = &recorder;
                let start = &start;
                s.spawn(move || producer(recorder, t, args, events, start))
            })
            .collect();
        start.wait();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(BoxError::from("a producer panicked")))
            })
            .collect()
    });
    let wall = began.elapsed();
    recorder.sync()?;
    let stats = recorder.stats()?;
    recorder.close()?;

    let mut merged = new_histogram()?;
    let mut threads = Vec::new();
    println!(
        "run {run}: {} threads x {} events at {:.0} events/s each, {}, {}",
        args.threads,
        events,
        per_thread_rate,
        if args.payload == 0 {
            "no payload".to_owned()
        } else {
            format!("{} B JSON payloads", args.payload.max(payload_min()))
        },
        args.tier.name()
    );
    header();
    let mut lags = Vec::new();
    for (t, r) in results.into_iter().enumerate() {
        let p = r?;
        merged.add(&p.hist)?;
        let f = figures(&p.hist);
        row(&format!("thread {t}"), Some(p.hist.len()), &f);
        threads.push(f);
        lags.push((p.max_lag_ns, p.late));
    }
    let merged_figures = figures(&merged);
    row("merged", Some(merged.len()), &merged_figures);
    let total = merged.len();
    let events_per_s = total as f64 / wall.as_secs_f64();
    let kept = stats.get("robot.state").map_or(0, |c| c.kept + c.dropped);
    let lag_text: Vec<String> = lags
        .iter()
        .map(|(lag, late)| format!("max {} behind, {late} late by > 10 µs", fmt_ns(*lag)))
        .collect();
    println!(
        "  achieved {events_per_s:.0} events/s in {:.2} s; {kept} counted; schedule: {}",
        wall.as_secs_f64(),
        lag_text.join("; ")
    );
    Ok(RunResult {
        threads,
        merged: merged_figures,
        events_per_s,
    })
}

/// Records drop-tier events from `threads` threads for about `seconds`; returns
/// events/s in all.
fn drop_rate(dir: &Path, threads: usize, seconds: f64) -> Result<f64> {
    let dir = tempfile::Builder::new()
        .prefix("blackbox-record-drop-")
        .tempdir_in(dir)?;
    let policy = Policy::builder().rule("debug.*", Tier::Drop).build()?;
    let recorder = Recorder::open(
        dir.path().join("log"),
        Config::new()
            .policy(policy)
            .durability(Durability::Buffered),
    )?;
    let event = Event::new("debug.trace");
    recorder.record(&event)?;
    // Calibrate a count that takes about `seconds` on one thread.
    let probe = Instant::now();
    let mut n = 0u64;
    while probe.elapsed() < Duration::from_millis(100) {
        for _ in 0..10_000 {
            recorder.record(std::hint::black_box(&event))?;
        }
        n += 10_000;
    }
    let per_thread = to_u64(n as f64 * seconds / probe.elapsed().as_secs_f64());
    let start = Barrier::new(threads + 1);
    let elapsed = std::thread::scope(|s| -> Result<Duration> {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| -> blackbox::Result<()> {
                    start.wait();
                    for _ in 0..per_thread {
                        recorder.record(std::hint::black_box(&event))?;
                    }
                    Ok(())
                })
            })
            .collect();
        start.wait();
        let began = Instant::now();
        for h in handles {
            h.join()
                .map_err(|_| BoxError::from("a producer panicked"))??;
        }
        Ok(began.elapsed())
    })?;
    let dropped = recorder
        .stats()?
        .get("debug.trace")
        .map_or(0, |c| c.dropped);
    recorder.close()?;
    let expected = per_thread * threads as u64 + n + 1;
    if dropped != expected {
        return Err(format!("{dropped} events counted as dropped, {expected} recorded").into());
    }
    Ok((per_thread * threads as u64) as f64 / elapsed.as_secs_f64())
}

/// The size of the JSON skeleton, the smallest payload `--payload` gives.
fn payload_min() -> usize {
    let mut p = Payload::new(0, 1);
    p.set(0, 0);
    p.text.len()
}

/// The cost of the measurement itself: `Instant::now` twice around nothing.
fn timer_overhead() -> Result<[u64; 5]> {
    let mut hist = new_histogram()?;
    for _ in 0..1_000_000 {
        let before = Instant::now();
        let ns = u64::try_from(before.elapsed().as_nanos()).unwrap_or(u64::MAX);
        hist.saturating_record(ns.max(1));
    }
    Ok(figures(&hist))
}

fn run(args: &Args) -> Result<()> {
    let overhead = timer_overhead()?;
    println!("timing overhead (Instant::now twice, 1 M samples):");
    header();
    row("empty", Some(1_000_000), &overhead);
    println!();
    let mut results = Vec::new();
    for run in 1..=args.runs {
        results.push(latency_run(args, run)?);
        println!();
    }
    if args.runs > 1 {
        println!("median of {} runs:", args.runs);
        header();
        let med = |pick: &dyn Fn(&RunResult) -> [u64; 5]| -> [u64; 5] {
            std::array::from_fn(|i| median(results.iter().map(|r| pick(r)[i]).collect()))
        };
        for t in 0..args.threads {
            row(&format!("thread {t}"), None, &med(&|r| r.threads[t]));
        }
        row("merged", None, &med(&|r| r.merged));
        let rates: Vec<u64> = results.iter().map(|r| to_u64(r.events_per_s)).collect();
        println!("  achieved {} events/s", median(rates));
        println!();
    }
    if !args.drop_rate {
        return Ok(());
    }
    println!("drop tier, record() of a dropped kind:");
    for threads in [1, 2] {
        let rate = drop_rate(&args.dir, threads, DROP_SECONDS)?;
        println!(
            "  {threads} thread{}: {:.1} M events/s",
            if threads == 1 { " " } else { "s" },
            rate / 1e6
        );
    }
    Ok(())
}
