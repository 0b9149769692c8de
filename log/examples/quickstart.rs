//! Writes a log, reads a time window back, takes a digest and verifies the log against
//! it, then shows that a cut tail is caught.
//!
//! ```text
//! cargo run --release -p blackbox-log --example quickstart [DIR]
//! ```
//!
//! Without DIR the log goes to a temporary directory that is removed at the end.

use std::process::ExitCode;
use std::time::Instant;

use blackbox_log::{Durability, Log, LogOptions, LogReader, Record, RecordType, Seq};

const SENSOR: RecordType = RecordType(1);
const ACTION: RecordType = RecordType(2);

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("quickstart: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let temp;
    let dir = match std::env::args_os().nth(1) {
        Some(d) => std::path::PathBuf::from(d),
        None => {
            temp = tempfile::tempdir()?;
            temp.path().join("log")
        }
    };

    // A robot at 1 kHz for 10 minutes of record time: a 100-byte sensor sample every
    // millisecond and an action every 100 ms, in small segments to show rolling.
    let opts = LogOptions::new()
        .durability(Durability::Buffered)
        .segment_bytes_max(8 << 20);
    let (mut log, recovery) = Log::open(&dir, opts)?;
    println!(
        "opened {} ({} segment(s), last seq {:?})",
        dir.display(),
        recovery.segments,
        recovery.last_seq.map(|s| s.0)
    );
    let start_ns = 1_790_000_000_000_000_000u64;
    let started = Instant::now();
    let mut sample = [0u8; 100];
    let ticks = 600_000u64;
    for tick in 0..ticks {
        let ts = start_ns + tick * 1_000_000;
        sample[..8].copy_from_slice(&tick.to_le_bytes());
        log.append(Record::new(SENSOR, ts, &sample))?;
        if tick % 100 == 0 {
            let action = format!("{{\"tick\":{tick},\"action\":\"grasp\"}}");
            log.append(Record::new(ACTION, ts, action.as_bytes()))?;
        }
    }
    let last = log.sync()?;
    let elapsed = started.elapsed();
    let digest = log.digest().ok_or("the log is empty")?;
    let written = last.map_or(0, |s| s.0 + 1);
    println!(
        "appended {written} records in {:.0} ms ({:.1} M records/s), {} segments",
        elapsed.as_secs_f64() * 1e3,
        written as f64 / elapsed.as_secs_f64() / 1e6,
        log.segment_count()
    );
    println!("digest: {digest}");
    log.close()?;

    // Read back the actions of one second of record time, 5 minutes in.
    let reader = LogReader::open(&dir)?;
    let from = start_ns + 300_000_000_000;
    let mut actions = Vec::new();
    for r in reader.records_by_time(from..from + 1_000_000_000)? {
        let r = r?;
        if r.record_type() == ACTION {
            actions.push((r.seq(), String::from_utf8_lossy(r.payload()).into_owned()));
        }
    }
    println!("actions between 300 s and 301 s:");
    for (seq, text) in &actions {
        println!("  seq {seq}: {text}");
    }
    let tail: Vec<Seq> = reader
        .records(Seq(written - 3)..)?
        .map(|r| r.map(|r| r.seq()))
        .collect::<Result<_, _>>()?;
    println!("last three seqs: {tail:?}");

    let report = blackbox_log::verify(&dir, None, Some(&digest))?;
    println!(
        "verify: {} records in {} blocks over {} segments intact, digest matched: {}",
        report.records, report.blocks, report.segments, report.digest_matched
    );

    // Remove the newest segment, as someone hiding the last minutes would: a plain
    // verification cannot know, the digest taken earlier does.
    let segments = blackbox_log::list_segments(&dir)?;
    if let Some(newest) = segments.last() {
        std::fs::remove_file(&newest.path)?;
        match blackbox_log::verify(&dir, None, Some(&digest)) {
            Ok(_) => return Err("a cut tail went unnoticed".into()),
            Err(e) => println!("after deleting the newest segment, verify says: {e}"),
        }
    }
    Ok(())
}
