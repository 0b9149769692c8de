//! Criterion benches of the recorder (`blackbox`): end-to-end ingest per retention tier,
//! and the producer-side rate of drop-tier events.
//!
//! ```text
//! cargo bench -p blackbox-benches --bench recorder
//! ```
//!
//! `ingest_100B/*`: one thread records [`INGEST_EVENTS`] events of kind `bench.event`
//! with a 100-byte JSON payload and then calls `Recorder::sync`, which returns once the
//! writer has encoded and appended every kept event and the log is on disk. One
//! iteration is that whole round, so the rate is end to end: the hot path, the channel,
//! the writer (tier logic, rkyv encoding, the log's framing, hashing and `write(2)`)
//! and the fdatasync of what the round wrote. The recorder runs with `Buffered`
//! durability (the writer hands batches to the log without flushing each one), the
//! system clock, `Block` on overflow and default options otherwise; opening and closing
//! it are not timed. One bench per tier of the policy:
//!
//! - `full`: every event written;
//! - `sample_10`: 1 in 10 written;
//! - `summary_1s`: one summary record per second;
//! - `drop`: counted by the producer, nothing reaches the writer;
//! - `full_channel_4096`: `full` with a channel of 4096 events instead of the default
//!   65 536. When the writer is the bottleneck the channel stays full, and a deep one
//!   holds its events (and their payloads) out of cache by the time the writer reads
//!   them; this row shows what that costs.
//!
//! `record_drop/*`: `Recorder::record` of a drop-tier event (no payload) from one and
//! from two threads, the events split evenly; the time is from the threads' start to the
//! last one's end. This is the producer's whole cost of an event the policy drops:
//! classification (a cached lookup), the post-roll check and one atomic add.
//! `1_thread_beside_preroll_rule` is the same with a policy that also has a drop rule
//! with `preroll = true` (and incident capture): the plain drop tier keeps its fast
//! path. `preroll_rule_1_thread` records that rule's own kind, whose events go to the
//! writer's pre-roll ring (a channel send each).

use std::hint::black_box;
use std::path::Path;
use std::sync::Barrier;
use std::time::{Duration, Instant};

use blackbox::{Config, Durability, Event, Policy, Recorder, Sampling, Tier};
use criterion::{Criterion, SamplingMode, Throughput, criterion_group, criterion_main};

/// Events per iteration of the ingest benches.
const INGEST_EVENTS: u64 = 1_000_000;
/// The payload size of the ingest benches.
const PAYLOAD_BYTES: usize = 100;
const SEC: u64 = 1_000_000_000;

/// A 100-byte JSON object.
fn payload() -> String {
    let mut p =
        String::from(r#"{"seq":12345678,"joint":[0.125,-1.5,2.25],"state":"tracking","pad":""#);
    while p.len() < PAYLOAD_BYTES - 2 {
        p.push('x');
    }
    p.push_str(r#""}"#);
    assert_eq!(p.len(), PAYLOAD_BYTES);
    p
}

fn temp_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("blackbox-bench-recorder-")
        .tempdir()
        .expect("create a temporary directory")
}

/// A policy that gives `bench.*` the tier, everything else `full`.
fn policy(tier: Tier) -> Policy {
    Policy::builder()
        .rule("bench.*", tier)
        .build()
        .expect("a valid policy")
}

/// The recorder's default channel capacity.
const CHANNEL_DEFAULT: usize = 1 << 16;

fn open(dir: &Path, tier: Tier, channel_capacity: usize) -> Recorder {
    Recorder::open(
        dir.join("log"),
        Config::new()
            .policy(policy(tier))
            .durability(Durability::Buffered)
            .channel_capacity(channel_capacity),
    )
    .expect("open the recorder")
}

/// Times `iters` rounds of [`INGEST_EVENTS`] events and a sync, in one recorder.
fn time_ingest(tier: &Tier, channel_capacity: usize, payload: &str, iters: u64) -> Duration {
    let dir = temp_dir();
    let recorder = open(dir.path(), tier.clone(), channel_capacity);
    let event = Event::new("bench.event").json(payload);
    // The kind's first sight (classification, interning) is not part of the workload.
    recorder.record(&event).expect("record");
    recorder.sync().expect("sync");
    let mut elapsed = Duration::ZERO;
    for _ in 0..iters {
        let start = Instant::now();
        for _ in 0..INGEST_EVENTS {
            recorder.record(&event).expect("record");
        }
        recorder.sync().expect("sync");
        elapsed += start.elapsed();
    }
    recorder.close().expect("close");
    elapsed
}

fn ingest(c: &mut Criterion) {
    let payload = payload();
    let rows = [
        ("full", Tier::Full, CHANNEL_DEFAULT),
        (
            "sample_10",
            Tier::Sample(Sampling::Every(10)),
            CHANNEL_DEFAULT,
        ),
        (
            "summary_1s",
            Tier::Summary { window_ns: SEC },
            CHANNEL_DEFAULT,
        ),
        ("drop", Tier::Drop, CHANNEL_DEFAULT),
        ("full_channel_4096", Tier::Full, 4096),
    ];
    let mut group = c.benchmark_group("ingest_100B");
    // One iteration is a million events (tenths of a second): flat sampling keeps the
    // iteration count, and so the run time and the disk written, bounded.
    group.sampling_mode(SamplingMode::Flat);
    group.throughput(Throughput::Elements(INGEST_EVENTS));
    for (name, tier, channel_capacity) in &rows {
        group.bench_function(*name, |b| {
            b.iter_custom(|iters| time_ingest(tier, *channel_capacity, &payload, iters));
        });
    }
    group.finish();
}

/// Drop-tier policies of the `record_drop` benches.
#[derive(Clone, Copy)]
enum DropPolicy {
    /// `bench.*` dropped, nothing else.
    Plain,
    /// `bench.*` dropped, beside a drop rule that keeps `trace.*` for the pre-roll and
    /// incident capture: the plain drop tier must not get slower for it.
    BesidePreroll,
    /// The kind recorded is the pre-roll drop rule's own (it goes to the writer's ring).
    Preroll,
}

fn drop_recorder(dir: &Path, which: DropPolicy) -> (Recorder, &'static str) {
    let incident = blackbox::IncidentPolicy::new(&["failure.*"]);
    let (policy, kind) = match which {
        DropPolicy::Plain => (policy(Tier::Drop), "bench.dropped"),
        DropPolicy::BesidePreroll | DropPolicy::Preroll => (
            Policy::builder()
                .rule("bench.*", Tier::Drop)
                .drop_rule_with_preroll("trace.*")
                .incident(incident)
                .build()
                .expect("a valid policy"),
            if matches!(which, DropPolicy::Preroll) {
                "trace.dropped"
            } else {
                "bench.dropped"
            },
        ),
    };
    let recorder = Recorder::open(
        dir.join("log"),
        Config::new()
            .policy(policy)
            .durability(Durability::Buffered)
            .channel_capacity(CHANNEL_DEFAULT),
    )
    .expect("open the recorder");
    (recorder, kind)
}

/// Times `iters` drop-tier events recorded by `threads` threads together.
fn time_drop(which: DropPolicy, threads: u64, iters: u64) -> Duration {
    let dir = temp_dir();
    let (recorder, kind) = drop_recorder(dir.path(), which);
    let event = Event::new(kind);
    recorder.record(&event).expect("record");
    let per_thread = iters.div_ceil(threads);
    let barrier = Barrier::new(usize::try_from(threads).expect("a few threads") + 1);
    let elapsed = std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                barrier.wait();
                for _ in 0..per_thread {
                    black_box(recorder.record(black_box(&event))).expect("record");
                }
            });
        }
        barrier.wait();
        let start = Instant::now();
        // Leaving the scope joins the threads.
        start
    })
    .elapsed();
    recorder.close().expect("close");
    elapsed
}

fn record_drop(c: &mut Criterion) {
    let mut group = c.benchmark_group("record_drop");
    group.throughput(Throughput::Elements(1));
    let plain = DropPolicy::Plain;
    group.bench_function("1_thread", |b| {
        b.iter_custom(|iters| time_drop(plain, 1, iters))
    });
    group.bench_function("2_threads", |b| {
        b.iter_custom(|iters| time_drop(plain, 2, iters))
    });
    let beside = DropPolicy::BesidePreroll;
    group.bench_function("1_thread_beside_preroll_rule", |b| {
        b.iter_custom(|iters| time_drop(beside, 1, iters))
    });
    group.bench_function("preroll_rule_1_thread", |b| {
        b.iter_custom(|iters| time_drop(DropPolicy::Preroll, 1, iters))
    });
    group.finish();
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
    targets = ingest, record_drop
}
criterion_main!(benches);
