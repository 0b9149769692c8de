//! Criterion benches of the knowledge base (`blackbox-kb`), through `Recorder::kb` on a
//! real recorder in a temporary directory: commit throughput, and the latency of `get`
//! and `get_as_of` at a key history depth of 10 and of 100 000 versions.
//!
//! ```text
//! cargo bench -p blackbox-benches --bench kb
//! ```
//!
//! `kb_commit/assert_alternating`: `KnowledgeBase::assert` on [`COMMIT_KEYS`] keys in
//! turn, each key's claims alternating between corroborating its current value and
//! superseding it with the other one, the first claim citing one evidence event
//! (recorded up front with `Recorder::record_evidence`) and every later one the record
//! of the commit before it, so that each brings evidence its value does not hold yet. Each timed commit is the whole write:
//! adjudication (a read of the key's fact and of its last commit in the view), the JSON
//! commit record, the round trip to the writer thread, which checks the evidence and
//! writes the record to the operating system (no fdatasync), and the view's batch (five
//! fjall inserts, journal buffered). The recorder runs with default options, except a
//! 1 µs confidence half-life: a fact's confidence has decayed to nothing by the next
//! claim on its key, so every claim of the other value supersedes it (with the default
//! half-life of a day it would only contest it); the value it displaces stays as its
//! rival. Each sample opens a fresh recorder and
//! creates the keys before the timing starts; the outcome of every commit is checked.
//!
//! `kb_get/*`, `kb_get_as_of_version/*`, `kb_get_as_of_time/*`: reads of one key. The
//! base is built once, before the first read bench (the time it takes is printed): one
//! key with [`DEEP`] versions and one with [`SHALLOW`], their commits interleaved (the
//! shallow key's every [`DEEP`] / [`SHALLOW`] commits, from version 1), written with the
//! same alternating claims as above; so `depth_10` and `depth_100000` read the same
//! fjall database and differ only in the key's history. `depth_10_small_base` reads a
//! key with [`SHALLOW`] versions in a base that holds nothing else: what a large base
//! costs on its own. `get` reads the current fact; `get_as_of` with `AsOf::Version`
//! picks a version at each call uniformly from the one that created the key to the
//! base's latest, with `AsOf::Time` a time uniformly between those two commits' times
//! (an xorshift generator, seeded the same every run). Every read is checked to find a
//! fact.
//!
//! Criterion reports means and medians; the `kb_latency` binary times 10 000 single
//! calls of each read for p50 and p99.

use std::cell::RefCell;
use std::hint::black_box;
use std::path::Path;
use std::time::{Duration, Instant};

use blackbox::{AsOf, Conditions, Config, Event, KnowledgeBase, Outcome, Provenance, Recorder};
use criterion::{Criterion, SamplingMode, Throughput, criterion_group, criterion_main};
use serde_json::{Value, json};

/// Keys the commit bench claims in turn.
const COMMIT_KEYS: usize = 4;
/// Versions of the deep key.
const DEEP: u64 = 100_000;
/// Versions of the shallow key.
const SHALLOW: u64 = 10;
/// Confidence half-life: short enough that every other value supersedes.
const HALF_LIFE_NS: u64 = 1_000;
/// Every claim's confidence.
const CONFIDENCE: f64 = 0.6;

/// Xorshift64*: a cheap deterministic generator.
struct Rng(u64);

impl Rng {
    fn new() -> Rng {
        Rng(0x9E37_79B9_7F4A_7C15)
    }

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

fn temp_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("blackbox-bench-kb-")
        .tempdir()
        .expect("create a temporary directory")
}

fn open(dir: &Path) -> Recorder {
    Recorder::open(dir.join("log"), Config::new().kb_half_life_ns(HALF_LIFE_NS))
        .expect("open the recorder")
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
    key: String,
    /// Claims made so far.
    made: u64,
    /// Index of the current value in [`values`].
    current: usize,
}

impl Claims {
    fn new(key: impl Into<String>) -> Claims {
        Claims {
            key: key.into(),
            made: 0,
            current: 0,
        }
    }

    /// Makes the key's next claim and checks its outcome; returns the version.
    fn next(
        &mut self,
        kb: &KnowledgeBase,
        values: &[Value; 2],
        evidence: &mut blackbox::Seq,
    ) -> u64 {
        let (value, expected) = match self.made {
            0 => (self.current, Outcome::Created),
            n if n % 2 == 1 => (self.current, Outcome::Corroborated),
            _ => (1 - self.current, Outcome::Superseded),
        };
        let committed = kb
            .assert(
                &self.key,
                values[value].clone(),
                CONFIDENCE,
                &Conditions::new(),
                Provenance::new([*evidence]),
            )
            .expect("assert");
        assert_eq!(
            committed.outcome, expected,
            "claim {} on {}",
            self.made, self.key
        );
        self.made += 1;
        self.current = value;
        // The next claim cites this commit's record: a seq no value holds yet, so it
        // counts (a claim citing only what its value holds would be a duplicate), without
        // recording an event per claim, which would time the recorder, not the
        // knowledge base.
        *evidence = blackbox::Seq(committed.seq);
        committed.version
    }
}

/// Times `iters` commits in a fresh recorder.
fn time_commits(iters: u64) -> Duration {
    let dir = temp_dir();
    let recorder = open(dir.path());
    let mut evidence = recorder
        .record_evidence(&Event::new("obs.door").json(r#"{"seen":"open"}"#))
        .expect("record the evidence");
    let kb = recorder.kb().expect("open the knowledge base");
    let values = values();
    let mut keys: Vec<Claims> = (0..COMMIT_KEYS)
        .map(|i| Claims::new(format!("door.{i}")))
        .collect();
    for claims in &mut keys {
        claims.next(kb, &values, &mut evidence);
    }
    let start = Instant::now();
    for i in 0..iters {
        let at = usize::try_from(i).expect("a usize") % COMMIT_KEYS;
        black_box(keys[at].next(kb, &values, &mut evidence));
    }
    let elapsed = start.elapsed();
    recorder.close().expect("close");
    elapsed
}

fn commit(c: &mut Criterion) {
    let mut group = c.benchmark_group("kb_commit");
    // Each sample is a fresh base: flat sampling gives every one as many commits.
    group.sampling_mode(SamplingMode::Flat);
    group.throughput(Throughput::Elements(1));
    group.bench_function("assert_alternating", |b| b.iter_custom(time_commits));
    group.finish();
}

/// A base to read: a recorder, a key in it, and the range of versions and times.
struct Base {
    // Declared first: closed before its directory is removed.
    recorder: Recorder,
    _dir: tempfile::TempDir,
}

/// One key to read and the range its as-of reads draw from.
#[derive(Clone)]
struct Target {
    key: String,
    /// The version that created the key.
    first: u64,
    /// The base's latest version.
    latest: u64,
    first_ns: u64,
    last_ns: u64,
}

impl Target {
    fn new(kb: &KnowledgeBase, key: &str) -> Target {
        let latest = kb.version().expect("the version");
        let first = kb
            .history(key)
            .expect("read the history")
            .first()
            .expect("a version")
            .0;
        let time = |v| {
            kb.log(v..=v)
                .expect("read the commit log")
                .first()
                .expect("a commit")
                .time_ns
        };
        Target {
            key: key.to_owned(),
            first,
            latest,
            first_ns: time(first),
            last_ns: time(latest),
        }
    }
}

/// Builds a base of `deep` versions of `deep_key` and `shallow` versions of
/// `shallow_key`, interleaved, the shallow key's first at version 1.
fn build(deep_key: &str, deep: u64, shallow_key: &str, shallow: u64) -> Base {
    let dir = temp_dir();
    let recorder = open(dir.path());
    let mut evidence = recorder
        .record_evidence(&Event::new("obs.door").json(r#"{"seen":"open"}"#))
        .expect("record the evidence");
    let kb = recorder.kb().expect("open the knowledge base");
    let values = values();
    let mut d = Claims::new(deep_key);
    let mut s = Claims::new(shallow_key);
    let every = if shallow == 0 {
        u64::MAX
    } else {
        deep.div_ceil(shallow).max(1)
    };
    for i in 0..deep.max(shallow) {
        if i % every == 0 && s.made < shallow {
            s.next(kb, &values, &mut evidence);
        }
        if i < deep {
            d.next(kb, &values, &mut evidence);
        }
    }
    while s.made < shallow {
        s.next(kb, &values, &mut evidence);
    }
    assert_eq!(kb.version().expect("the version"), deep + shallow);
    Base {
        recorder,
        _dir: dir,
    }
}

/// The bases the read benches use, built once.
struct Fixture {
    large: Base,
    small: Base,
    /// (label, index of the base: 0 large, 1 small, target)
    cases: Vec<(&'static str, usize, Target)>,
}

impl Fixture {
    fn build() -> Fixture {
        let start = Instant::now();
        let large = build("door.deep", DEEP, "door.shallow", SHALLOW);
        let elapsed = start.elapsed();
        let commits = DEEP + SHALLOW;
        println!(
            "kb setup: {commits} commits through recorder.kb() in {:.1} s ({:.0} commits/s, {:.1} µs each)",
            elapsed.as_secs_f64(),
            commits as f64 / elapsed.as_secs_f64(),
            elapsed.as_secs_f64() * 1e6 / commits as f64,
        );
        let small = build("door.deep", 0, "door.shallow", SHALLOW);
        let large_kb = large.recorder.kb().expect("the knowledge base");
        let small_kb = small.recorder.kb().expect("the knowledge base");
        let cases = vec![
            ("depth_10", 0, Target::new(large_kb, "door.shallow")),
            ("depth_100000", 0, Target::new(large_kb, "door.deep")),
            (
                "depth_10_small_base",
                1,
                Target::new(small_kb, "door.shallow"),
            ),
        ];
        Fixture {
            large,
            small,
            cases,
        }
    }

    fn kb(&self, base: usize) -> &KnowledgeBase {
        let base = if base == 0 { &self.large } else { &self.small };
        base.recorder.kb().expect("the knowledge base")
    }
}

#[derive(Clone, Copy)]
enum Read {
    Get,
    AsOfVersion,
    AsOfTime,
}

impl Read {
    fn group(self) -> &'static str {
        match self {
            Read::Get => "kb_get",
            Read::AsOfVersion => "kb_get_as_of_version",
            Read::AsOfTime => "kb_get_as_of_time",
        }
    }
}

fn read(kb: &KnowledgeBase, target: &Target, read: Read, rng: &mut Rng) -> blackbox::Fact {
    let fact = match read {
        Read::Get => kb.get(&target.key),
        Read::AsOfVersion => kb.get_as_of(
            &target.key,
            AsOf::Version(rng.between(target.first, target.latest)),
        ),
        Read::AsOfTime => kb.get_as_of(
            &target.key,
            AsOf::Time(rng.between(target.first_ns, target.last_ns)),
        ),
    };
    fact.expect("read").expect("a fact")
}

fn reads(c: &mut Criterion) {
    // Built on first use, so that a filter that selects no read bench skips it.
    let fixture: RefCell<Option<Fixture>> = RefCell::new(None);
    let fixture = &fixture;
    for op in [Read::Get, Read::AsOfVersion, Read::AsOfTime] {
        let mut group = c.benchmark_group(op.group());
        group.throughput(Throughput::Elements(1));
        for label in ["depth_10", "depth_100000", "depth_10_small_base"] {
            group.bench_function(label, |b| {
                let mut slot = fixture.borrow_mut();
                let f = slot.get_or_insert_with(Fixture::build);
                let (_, base, target) = f
                    .cases
                    .iter()
                    .find(|(l, _, _)| *l == label)
                    .expect("a case");
                let kb = f.kb(*base);
                let mut rng = Rng::new();
                b.iter(|| black_box(read(kb, target, op, &mut rng)));
            });
        }
        group.finish();
    }
    if let Some(f) = fixture.borrow_mut().take() {
        f.large.recorder.close().expect("close");
        f.small.recorder.close().expect("close");
    }
}

fn config() -> Criterion {
    Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5))
        .without_plots()
}

criterion_group! {
    name = benches;
    config = config();
    targets = commit, reads
}
criterion_main!(benches);
