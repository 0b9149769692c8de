//! MCAP out and in: the export of a log of `--events` events to MCAP beside the JSONL
//! export of the same log, and the import of an MCAP file of as many messages.
//!
//! ```text
//! cargo run --release -p blackbox-benches --bin mcap_speed -- [--events 1000000] [--rounds 3] [--dir PATH]
//! ```
//!
//! The log: 100-byte JSON payloads with two numeric values, in 8 kinds, all kept in
//! full, recorded on a manual clock that moves 1 µs per event. Each export
//! (`export_jsonl`, `export_mcap`, as `blackbox export` runs them: the digest, the weights,
//! the rows, the manifest) writes a new file; the median of `--rounds` runs is printed
//! for JSONL and for MCAP with zstd, lz4 and no compression, with the ratio to JSONL's
//! speed. The import: an MCAP file of as many 100-byte JSON messages on 8 topics
//! (written by the `mcap` crate, zstd chunks), imported with
//! `blackbox_replay::import_mcap::import_mcap` into a new log under the default policy
//! (every kind in full), the median of `--rounds` runs.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use blackbox::{Config, Durability, Event, ManualClock, Recorder};
use blackbox_benches::Result;
use blackbox_replay::{ExportOptions, McapCompression, Query};

const KINDS: [&str; 8] = [
    "arm.state",
    "camera.meta",
    "planner.step",
    "gripper.state",
    "base.odom",
    "lidar.meta",
    "action.move",
    "observation.load",
];

struct Args {
    events: u64,
    rounds: usize,
    dir: Option<PathBuf>,
}

fn parse_args() -> Result<Args> {
    let mut args = Args {
        events: 1_000_000,
        rounds: 3,
        dir: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{a} needs a value"));
        match a.as_str() {
            "--events" => args.events = value()?.parse()?,
            "--rounds" => args.rounds = value()?.parse()?,
            "--dir" => args.dir = Some(PathBuf::from(value()?)),
            other => return Err(format!("unknown argument {other}").into()),
        }
    }
    if args.rounds == 0 || args.events == 0 {
        return Err("--events and --rounds must be at least 1".into());
    }
    Ok(args)
}

/// A 100-byte JSON payload.
fn payload(i: u64) -> String {
    let mut p = format!(
        r#"{{"i":{i},"x":{:.3},"y":{:.3},"label":"pick-and-place""#,
        i as f64 * 0.001,
        -(i as f64) * 0.002
    );
    while p.len() < 99 {
        p.push(' ');
    }
    p.push('}');
    p
}

fn write_log(dir: &Path, events: u64) -> Result<()> {
    let t0 = 1_750_000_000_000_000_000;
    let clock = ManualClock::new(t0);
    let r = Recorder::open(
        dir,
        Config::new()
            .clock(Arc::new(clock.clone()))
            .durability(Durability::Buffered),
    )?;
    for i in 0..events {
        clock.set_ns(t0 + i * 1_000);
        let p = payload(i);
        let v = [("x", i as f64 * 0.001), ("y", -(i as f64) * 0.002)];
        let kind = KINDS[(i % 8) as usize];
        r.record(&Event::new(kind).json(&p).values(&v))?;
    }
    r.close()?;
    Ok(())
}

fn write_mcap(path: &Path, messages: u64) -> Result<()> {
    let file = std::io::BufWriter::new(std::fs::File::create(path)?);
    let mut w = mcap::WriteOptions::new()
        .compression(Some(mcap::Compression::Zstd))
        .create(file)?;
    let schema = w.add_schema("bench.Sample", "jsonschema", br#"{"type":"object"}"#)?;
    let mut channels = Vec::new();
    for kind in KINDS {
        channels.push(w.add_channel(
            schema,
            &format!("/{}", kind.replace('.', "/")),
            "json",
            &BTreeMap::new(),
        )?);
    }
    let t0 = 1_750_000_000_000_000_000u64;
    for i in 0..messages {
        let header = mcap::records::MessageHeader {
            channel_id: channels[(i % 8) as usize],
            sequence: 0,
            log_time: t0 + i * 1_000,
            publish_time: t0 + i * 1_000,
        };
        w.write_to_known_channel(&header, payload(i).as_bytes())?;
    }
    w.finish()?;
    Ok(())
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn run(args: &Args) -> Result<()> {
    let tmp = tempfile::Builder::new()
        .prefix("mcap_speed")
        .tempdir_in(args.dir.clone().unwrap_or_else(std::env::temp_dir))?;
    let log = tmp.path().join("log");
    let started = Instant::now();
    write_log(&log, args.events)?;
    println!(
        "log of {} events written in {:.1} s",
        args.events,
        started.elapsed().as_secs_f64()
    );
    let formats = [
        ("jsonl", None),
        ("mcap zstd", Some(McapCompression::Zstd)),
        ("mcap lz4", Some(McapCompression::Lz4)),
        ("mcap none", Some(McapCompression::None)),
    ];
    let mut jsonl_rate = None;
    println!("| export | median | events/s | vs JSONL | file |");
    println!("|---|---:|---:|---:|---:|");
    for (name, format) in formats {
        let mut secs = Vec::new();
        let mut bytes = 0;
        for round in 0..args.rounds {
            let out = tmp.path().join(format!("out-{round}"));
            let options = ExportOptions::default();
            let (q, progress) = (Query::new(), &mut |_| {});
            let t = Instant::now();
            let m = match format {
                None => blackbox_replay::export_jsonl(&log, &q, &out, &options, progress)?,
                Some(c) => blackbox_replay::export_mcap(&log, &q, &out, &options, c, progress)?,
            };
            secs.push(t.elapsed().as_secs_f64());
            if m.rows != args.events {
                return Err(format!("{name}: exported {} rows of {}", m.rows, args.events).into());
            }
            bytes = m.bytes;
            std::fs::remove_file(&out)?;
        }
        let s = median(secs);
        let rate = args.events as f64 / s;
        let ratio = *jsonl_rate.get_or_insert(rate);
        println!(
            "| {name} | {:.0} ms | {:.2} M | {:.2}× | {:.1} MiB |",
            s * 1e3,
            rate / 1e6,
            rate / ratio,
            bytes as f64 / (1 << 20) as f64
        );
    }
    let file = tmp.path().join("in.mcap");
    write_mcap(&file, args.events)?;
    let mut secs = Vec::new();
    for round in 0..args.rounds {
        let dir = tmp.path().join(format!("import-{round}"));
        let t = Instant::now();
        let done =
            blackbox_replay::import_mcap::import_mcap(&file, &dir, Config::new(), &mut |_| {})
                .map_err(|f| f.error)?;
        secs.push(t.elapsed().as_secs_f64());
        if done.messages != args.events {
            return Err(format!("imported {} messages of {}", done.messages, args.events).into());
        }
        std::fs::remove_dir_all(&dir)?;
    }
    let s = median(secs);
    println!(
        "import of {} messages ({:.1} MiB MCAP, zstd): median {:.0} ms, {:.2} M messages/s",
        args.events,
        std::fs::metadata(&file)?.len() as f64 / (1 << 20) as f64,
        s * 1e3,
        args.events as f64 / s / 1e6
    );
    Ok(())
}

fn main() -> ExitCode {
    match parse_args().and_then(|a| run(&a)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mcap_speed: {e}");
            ExitCode::FAILURE
        }
    }
}
