//! Percentiles of the knowledge base's reads (`get`, `get_as_of` by version and by
//! time) at a key history depth of 10 and of 100 000 versions, and of its commits while
//! the deep history is built.
//!
//! ```text
//! cargo run --release -p blackbox-benches --bin kb_latency -- \
//!     [--depth VERSIONS] [--samples N] [--rounds R] [--dir PATH]
//! ```
//!
//! The base is the one of the `kb` criterion bench, built through `Recorder::kb` on a
//! recorder with default options (except a 1 µs confidence half-life, so that claims
//! alternate between corroborating and superseding): one key with `--depth` versions
//! (default 100 000) and one with 10, their commits interleaved (the shallow key's
//! first at version 1), the first claim citing one evidence event and every later one
//! the record of the commit before it. Every commit of the
//! build is timed, so the build doubles as a commit benchmark at a growing depth; its
//! total time is printed. A second base holds only a key with 10 versions.
//!
//! Then each read of each key is called `--samples` times (default 10 000), each call
//! timed with [`Instant`] into an HDR histogram (ns). The calls are made in `--rounds`
//! rounds (default 10), every case taking its turn in each round, so that the noise of
//! a shared machine spreads over all cases alike; one unrecorded round warms up first.
//! As-of reads draw a version uniformly from the one that created the key to the base's
//! latest, or a time uniformly between those two commits' times, before the timer
//! starts (xorshift, same seed every run). Printed: p50, p90, p99, p99.9, max and mean
//! per case, then for each read the ratios depth 100 000 / depth 10 of p50 and p99,
//! against the targets (p99 ≤ 50 µs; the deep key within 2× of the shallow one).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use blackbox::{
    AsOf, Conditions, Config, Event, KnowledgeBase, Outcome, Provenance, Recorder, Seq,
};
use blackbox_benches::{BoxError, Result};
use hdrhistogram::Histogram;
use serde_json::{Value, json};

const USAGE: &str = "usage: kb_latency [--depth VERSIONS] [--samples N] [--rounds R] [--dir PATH]";
/// Versions of the shallow key.
const SHALLOW: u64 = 10;
/// Confidence half-life: short enough that every other value supersedes.
const HALF_LIFE_NS: u64 = 1_000;
/// Every claim's confidence.
const CONFIDENCE: f64 = 0.6;
/// The p99 target of every read, ns.
const P99_TARGET_NS: u64 = 50_000;
/// How much slower the deep key may be than the shallow one.
const RATIO_TARGET: f64 = 2.0;

#[derive(Debug)]
struct Args {
    depth: u64,
    samples: u64,
    rounds: u64,
    dir: PathBuf,
}

fn parse_args(mut args: impl Iterator<Item = String>) -> Result<Option<Args>> {
    let mut parsed = Args {
        depth: 100_000,
        samples: 10_000,
        rounds: 10,
        dir: std::env::temp_dir(),
    };
    while let Some(arg) = args.next() {
        let mut value = || {
            args.next()
                .ok_or_else(|| BoxError::from(format!("{arg} needs a value\n{USAGE}")))
        };
        match arg.as_str() {
            "--depth" => parsed.depth = value()?.parse()?,
            "--samples" => parsed.samples = value()?.parse()?,
            "--rounds" => parsed.rounds = value()?.parse()?,
            "--dir" => parsed.dir = PathBuf::from(value()?),
            "-h" | "--help" => return Ok(None),
            other => return Err(format!("unknown argument {other:?}\n{USAGE}").into()),
        }
    }
    if parsed.depth == 0 || parsed.rounds == 0 || parsed.samples < parsed.rounds {
        return Err(
            format!("depth and rounds must be positive, samples >= rounds\n{USAGE}").into(),
        );
    }
    Ok(Some(parsed))
}

fn main() -> ExitCode {
    blackbox_benches::main_of(
        "kb_latency",
        USAGE,
        parse_args(std::env::args().skip(1)),
        run,
    )
}

/// Xorshift64*: a cheap deterministic generator.
struct Rng(u64);

impl Rng {
    fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `lo..=hi` (up to a negligible modulo bias).
    fn between(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next_u64() % (hi - lo + 1)
    }
}

fn new_histogram() -> Result<Histogram<u64>> {
    // 1 ns to 100 s, 3 significant digits.
    Ok(Histogram::new_with_bounds(1, 100_000_000_000, 3)?)
}

fn elapsed_ns(since: Instant) -> u64 {
    u64::try_from(since.elapsed().as_nanos())
        .unwrap_or(u64::MAX)
        .max(1)
}

/// The two values every key alternates between: small objects, as a perception fact.
fn values() -> [Value; 2] {
    [
        json!({"state": "open", "pose": [1.25, -0.5, 0.0]}),
        json!({"state": "closed", "pose": [1.25, -0.5, 0.0]}),
    ]
}

/// One key's claims: created, then corroborated and superseded in turn, each citing the
/// record of the commit before it.
struct Claims {
    key: &'static str,
    made: u64,
    current: usize,
}

impl Claims {
    fn new(key: &'static str) -> Claims {
        Claims {
            key,
            made: 0,
            current: 0,
        }
    }

    /// Makes the key's next claim and checks its outcome.
    fn next(&mut self, kb: &KnowledgeBase, values: &[Value; 2], evidence: &mut Seq) -> Result<()> {
        let (value, expected) = match self.made {
            0 => (self.current, Outcome::Created),
            n if n % 2 == 1 => (self.current, Outcome::Corroborated),
            _ => (1 - self.current, Outcome::Superseded),
        };
        let committed = kb.assert(
            self.key,
            values[value].clone(),
            CONFIDENCE,
            &Conditions::new(),
            Provenance::new([*evidence]),
        )?;
        if committed.outcome != expected {
            return Err(format!(
                "claim {} on {}: {:?}, expected {expected:?}",
                self.made, self.key, committed.outcome
            )
            .into());
        }
        self.made += 1;
        self.current = value;
        // The next claim cites this commit's record: a seq no value holds yet, so it
        // counts (a claim citing only what its value holds would be a duplicate), without
        // recording an event per claim, which would time the recorder, not the
        // knowledge base.
        *evidence = blackbox::Seq(committed.seq);
        Ok(())
    }
}

/// A base to read. The recorder is declared first: closed before its directory goes.
struct Base {
    recorder: Recorder,
    _dir: tempfile::TempDir,
}

impl Base {
    fn kb(&self) -> Result<&KnowledgeBase> {
        Ok(self.recorder.kb()?)
    }
}

/// Commit latencies of a build.
struct Build {
    base: Base,
    all: Histogram<u64>,
    first: Histogram<u64>,
    last: Histogram<u64>,
    seconds: f64,
}

/// How many commits at each end of the build are reported apart.
const ENDS: u64 = 10_000;

/// Builds a base of `deep` versions of `door.deep` and [`SHALLOW`] of `door.shallow`,
/// interleaved, the shallow key's first at version 1; times every commit.
fn build(args: &Args, deep: u64) -> Result<Build> {
    let dir = tempfile::Builder::new()
        .prefix("blackbox-kb-latency-")
        .tempdir_in(&args.dir)?;
    let recorder = Recorder::open(
        dir.path().join("log"),
        Config::new().kb_half_life_ns(HALF_LIFE_NS),
    )?;
    let mut evidence =
        recorder.record_evidence(&Event::new("obs.door").json(r#"{"seen":"open"}"#))?;
    let kb = recorder.kb()?;
    let values = values();
    let mut d = Claims::new("door.deep");
    let mut s = Claims::new("door.shallow");
    let every = deep.div_ceil(SHALLOW).max(1);
    let total = deep + SHALLOW;
    let (mut all, mut first, mut last) = (new_histogram()?, new_histogram()?, new_histogram()?);
    let mut n = 0u64;
    let mut timed = |claims: &mut Claims| -> Result<()> {
        let t = Instant::now();
        claims.next(kb, &values, &mut evidence)?;
        let ns = elapsed_ns(t);
        all.saturating_record(ns);
        if n < ENDS {
            first.saturating_record(ns);
        }
        if n + ENDS >= total {
            last.saturating_record(ns);
        }
        n += 1;
        Ok(())
    };
    let start = Instant::now();
    for i in 0..deep.max(SHALLOW) {
        if i % every == 0 && s.made < SHALLOW {
            timed(&mut s)?;
        }
        if i < deep {
            timed(&mut d)?;
        }
    }
    while s.made < SHALLOW {
        timed(&mut s)?;
    }
    let seconds = start.elapsed().as_secs_f64();
    if kb.version()? != total {
        return Err(format!("{} versions, expected {total}", kb.version()?).into());
    }
    Ok(Build {
        base: Base {
            recorder,
            _dir: dir,
        },
        all,
        first,
        last,
        seconds,
    })
}

/// One key to read and the range its as-of reads draw from.
struct Target {
    label: String,
    key: &'static str,
    /// The version that created the key.
    first: u64,
    /// The base's latest version.
    latest: u64,
    first_ns: u64,
    last_ns: u64,
}

impl Target {
    fn new(kb: &KnowledgeBase, label: String, key: &'static str) -> Result<Target> {
        let latest = kb.version()?;
        let first = kb
            .history(key)?
            .first()
            .ok_or_else(|| BoxError::from(format!("no version of {key}")))?
            .0;
        let time = |v| -> Result<u64> {
            Ok(kb
                .log(v..=v)?
                .first()
                .ok_or_else(|| BoxError::from(format!("no commit {v}")))?
                .time_ns)
        };
        Ok(Target {
            label,
            key,
            first,
            latest,
            first_ns: time(first)?,
            last_ns: time(latest)?,
        })
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Read {
    Get,
    AsOfVersion,
    AsOfTime,
}

impl Read {
    fn name(self) -> &'static str {
        match self {
            Read::Get => "get",
            Read::AsOfVersion => "get_as_of(Version)",
            Read::AsOfTime => "get_as_of(Time)",
        }
    }
}

/// Times `n` calls of `read` on `target` into `hist` (when given).
fn sample(
    kb: &KnowledgeBase,
    target: &Target,
    read: Read,
    rng: &mut Rng,
    n: u64,
    mut hist: Option<&mut Histogram<u64>>,
) -> Result<()> {
    for _ in 0..n {
        let (fact, ns) = match read {
            Read::Get => {
                let t = Instant::now();
                let fact = kb.get(target.key)?;
                (fact, elapsed_ns(t))
            }
            Read::AsOfVersion => {
                let at = AsOf::Version(rng.between(target.first, target.latest));
                let t = Instant::now();
                let fact = kb.get_as_of(target.key, at)?;
                (fact, elapsed_ns(t))
            }
            Read::AsOfTime => {
                let at = AsOf::Time(rng.between(target.first_ns, target.last_ns));
                let t = Instant::now();
                let fact = kb.get_as_of(target.key, at)?;
                (fact, elapsed_ns(t))
            }
        };
        if std::hint::black_box(fact).is_none() {
            return Err(format!("{} of {} found no fact", read.name(), target.label).into());
        }
        if let Some(h) = hist.as_deref_mut() {
            h.saturating_record(ns);
        }
    }
    Ok(())
}

/// A non-negative float rounded down to an integer (`as` saturates, and maps NaN to 0).
#[allow(clippy::cast_possible_truncation)]
fn to_u64(x: f64) -> u64 {
    x as u64
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

fn header(first: &str) {
    println!(
        "  {first:<42} {:>8} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
        "calls", "p50", "p90", "p99", "p99.9", "max", "mean"
    );
}

fn row(label: &str, h: &Histogram<u64>) {
    let q = |q| fmt_ns(h.value_at_quantile(q));
    println!(
        "  {label:<42} {:>8} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
        h.len(),
        q(0.5),
        q(0.9),
        q(0.99),
        q(0.999),
        fmt_ns(h.max()),
        fmt_ns(to_u64(h.mean().round())),
    );
}

fn run(args: &Args) -> Result<()> {
    let mut timer = new_histogram()?;
    for _ in 0..1_000_000 {
        timer.saturating_record(elapsed_ns(Instant::now()));
    }
    println!("timing overhead (Instant::now twice around nothing):");
    header("");
    row("empty", &timer);
    println!();

    let large = build(args, args.depth)?;
    let total = args.depth + SHALLOW;
    println!(
        "setup: {total} commits through recorder.kb() in {:.1} s: {:.0} commits/s",
        large.seconds,
        total as f64 / large.seconds
    );
    println!("commit latency while building (assert, alternating corroborate/supersede):");
    header("");
    row("all commits", &large.all);
    row(&format!("first {}", large.first.len()), &large.first);
    row(&format!("last {}", large.last.len()), &large.last);
    println!();
    let small = build(args, 0)?;

    let deep_label = format!("depth {}", args.depth);
    let large_kb = large.base.kb()?;
    let small_kb = small.base.kb()?;
    let targets = [
        (
            large_kb,
            Target::new(large_kb, "depth 10".to_owned(), "door.shallow")?,
        ),
        (
            large_kb,
            Target::new(large_kb, deep_label.clone(), "door.deep")?,
        ),
        (
            small_kb,
            Target::new(small_kb, "depth 10, small base".to_owned(), "door.shallow")?,
        ),
    ];
    let reads = [Read::Get, Read::AsOfVersion, Read::AsOfTime];
    let mut hists: Vec<Vec<Histogram<u64>>> = Vec::new();
    for _ in reads {
        hists.push(
            targets
                .iter()
                .map(|_| new_histogram())
                .collect::<Result<_>>()?,
        );
    }
    let per_round = args.samples / args.rounds;
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for round in 0..=args.rounds {
        for (r, read) in reads.iter().enumerate() {
            for (t, (kb, target)) in targets.iter().enumerate() {
                // Round 0 warms up.
                let hist = (round > 0).then(|| &mut hists[r][t]);
                sample(kb, target, *read, &mut rng, per_round, hist)?;
            }
        }
    }
    println!(
        "reads: {} calls per case in {} rounds; the large base holds {total} versions",
        per_round * args.rounds,
        args.rounds
    );
    for (r, read) in reads.iter().enumerate() {
        header(read.name());
        for (t, (_, target)) in targets.iter().enumerate() {
            row(&target.label, &hists[r][t]);
        }
    }
    println!();
    println!(
        "against the targets (p99 <= {}; {deep_label} within {RATIO_TARGET}x of depth 10):",
        fmt_ns(P99_TARGET_NS)
    );
    let verdict = |ok: bool| if ok { "met" } else { "MISSED" };
    for (r, read) in reads.iter().enumerate() {
        let (shallow, deep) = (&hists[r][0], &hists[r][1]);
        let ratio = |q| deep.value_at_quantile(q) as f64 / shallow.value_at_quantile(q) as f64;
        let (p50, p99) = (ratio(0.5), ratio(0.99));
        let worst_p99 = shallow
            .value_at_quantile(0.99)
            .max(deep.value_at_quantile(0.99));
        println!(
            "  {:<20} worst p99 {:>9} ({}); deep/shallow p50 {p50:.2}x, p99 {p99:.2}x ({})",
            read.name(),
            fmt_ns(worst_p99),
            verdict(worst_p99 <= P99_TARGET_NS),
            verdict(p50 <= RATIO_TARGET && p99 <= RATIO_TARGET),
        );
    }
    small.base.recorder.close()?;
    large.base.recorder.close()?;
    Ok(())
}
