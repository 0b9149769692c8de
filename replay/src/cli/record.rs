//! `blackbox record`: JSON lines on stdin into a log.
//!
//! A line is an event `{"kind", "payload", "values", "source", "event_time", "ack"}`
//! (only `kind` is required) or an operation `{"op": "set", "key", "value"}`, `{"op":
//! "del", "key"}`, `{"op": "checkpoint"}`, `{"op": "sync"}`, or a knowledge-base
//! operation (`kb.put`, `kb.refute`, `kb.retract`, `kb.revert`: see `blackbox_replay::record_apply`). Blank
//! lines are ignored; any other field is refused, so that a misspelt field is not
//! dropped silently.
//!
//! Replies on stdout, one JSON object a line, in input order: `{"line": L, "seq": S}`
//! for an event sent with `"ack": true`, `{"line": L, "version": V, "outcome": O, "seq":
//! S}` for a committed knowledge-base operation, `{"line": L, "error": E}` for a line
//! that asked for a reply and was refused, `{"synced": S}` for a sync, and the summary
//! at the end.

use std::collections::BTreeMap;
use std::io::{self, BufRead, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use blackbox::policy::Policy;
use blackbox::{Config, Counters, Durability, LogOptions, Recorder};
use blackbox_replay::record_apply::{AckedLines, Applied, apply_line};
use blackbox_replay::record_input::{Line, Reply, asks_reply, parse_line};
use serde_json::{Map, Value, json};

use super::{CliError, DirArg, key_from, size_arg};

/// When records reach the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DurabilityArg {
    /// fdatasync every batch (group commit): nothing acknowledged is lost.
    Sync,
    /// Write every batch to the OS: a crash of the process loses nothing.
    Flush,
    /// Write when the buffer fills: fastest.
    Buffered,
}

impl From<DurabilityArg> for Durability {
    fn from(d: DurabilityArg) -> Durability {
        match d {
            DurabilityArg::Sync => Durability::Sync,
            DurabilityArg::Flush => Durability::Flush,
            DurabilityArg::Buffered => Durability::Buffered,
        }
    }
}

/// Record JSON lines from stdin: events, working-memory operations (set, del,
/// checkpoint, sync) and knowledge-base operations (kb.put, kb.refute, kb.retract,
/// kb.revert). Prints `{"line": L, "seq": SEQ}` for each event sent with "ack": true,
/// `{"line": L, "version": V, "outcome": O, "seq": SEQ}` (or `{"line": L, "error": E}`)
/// for each knowledge-base operation, `{"synced": SEQ}` for each sync and a summary at
/// the end; a torn tail that opening the log cut is said on stderr and in the summary.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    dir: DirArg,
    /// The retention policy (TOML).
    #[arg(long, value_name = "P.toml")]
    policy: Option<PathBuf>,
    /// When records reach the disk; `{"op":"sync"}` makes them durable in any mode.
    #[arg(long, value_enum, default_value = "flush")]
    durability: DurabilityArg,
    /// Segment size at which a new segment file starts (like 64MiB; at least 4096).
    #[arg(long, value_name = "SIZE", value_parser = size_arg)]
    segment_bytes: Option<u64>,
    /// A secret chain key file (32 raw bytes or 64 hex digits) mixed into every link.
    #[arg(long, value_name = "K")]
    key_file: Option<PathBuf>,
    /// Count and skip invalid lines instead of stopping at the first.
    #[arg(long)]
    skip_invalid: bool,
    /// Ship each segment, once sealed, to this URL (s3://BUCKET/PREFIX, file:///PATH
    /// or a directory) from a thread beside the recorder, as `blackbox ship` does; under
    /// a policy's disk budget, only shipped segments are pruned.
    #[arg(long, value_name = "URL")]
    ship_to: Option<String>,
    /// Accepted for uniformity: `record` always prints JSON (one object a line).
    #[arg(long)]
    json: bool,
}

/// What one run did, counted as it goes (the signal handler reads it from its thread).
#[derive(Debug, Default)]
struct Tally {
    lines: AtomicU64,
    events: AtomicU64,
    ops: AtomicU64,
    skipped: AtomicU64,
    /// Knowledge-base operations refused (answered with an error; recording went on).
    refused: AtomicU64,
    /// The seq each event line sent with `"ack": true` got, by line number.
    acked: Mutex<AckedLines>,
}

/// The seqs of acknowledged lines (only the thread reading lines uses them).
fn acked(tally: &Tally) -> std::sync::MutexGuard<'_, AckedLines> {
    tally.acked.lock().unwrap_or_else(PoisonError::into_inner)
}

/// One more.
fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

/// Runs `blackbox record`.
pub fn run(args: Args) -> Result<(), CliError> {
    let mut config = Config::new().durability(args.durability.into());
    if let Some(path) = &args.policy {
        let policy = Policy::from_toml_file(path)
            .map_err(|e| CliError::new(format!("{e}: fix the policy file")))?;
        config = config.policy(policy);
    }
    let mut log = LogOptions::new().key(key_from(args.key_file.as_deref())?);
    if let Some(bytes) = args.segment_bytes {
        if bytes < 4096 {
            return Err(CliError::new(format!(
                "--segment-bytes {bytes} is too small: give at least 4096 bytes, like 64MiB"
            )));
        }
        log = log.segment_bytes_max(bytes);
    }
    config = config.log_options(log);
    if let Some(url) = &args.ship_to {
        config = config.ship(blackbox::Ship::to(url.clone()));
    }
    let recorder = Arc::new(Recorder::open(&args.dir.dir, config)?);
    let recovered = recovered_json(recorder.recovery());
    if let Some(r) = &recovered {
        // What a crash tore is said, not only cut: here, in the summary, and in the log
        // (the recorder's recovery record).
        let _ = writeln!(
            io::stderr().lock(),
            "blackbox: {}: cut {} bytes of a torn write at the end of {} (records from seq {} on, if it held any, are lost; {}): the last writer stopped mid-write",
            args.dir.dir.display(),
            r["torn_bytes"],
            r["segment"].as_str().unwrap_or("?"),
            r["first_lost_seq"],
            r["detail"].as_str().unwrap_or("")
        );
    }
    let baseline = Arc::new(recorder.stats()?);
    let tally = Arc::new(Tally::default());
    // A supervisor's SIGTERM or a Ctrl-C closes the log as the end of input would (open
    // summary windows, a last accounting record, a checkpoint, fsync), prints the
    // summary with the counts so far, then exits 130.
    let on_signal = Arc::clone(&recorder);
    let (base, counted, torn) = (Arc::clone(&baseline), Arc::clone(&tally), recovered.clone());
    let dir = args.dir.dir.clone();
    let _ = ctrlc::set_handler(move || {
        SIGNALED.store(true, Ordering::SeqCst);
        let (totals, last, _) = close_once(&on_signal);
        if let (Ok(totals), Ok(last_seq)) = (&totals, &last) {
            let _ = print_summary(*last_seq, &counted, &base, totals, torn.clone());
        }
        let mut err = io::stderr().lock();
        let _ = match last {
            Ok(seq) => writeln!(
                err,
                "blackbox: interrupted: closed log {} at seq {}; every record so far is durable",
                dir.display(),
                seq.map_or_else(|| "-".to_owned(), |s| s.to_string())
            ),
            Err(e) => writeln!(
                err,
                "blackbox: interrupted, and closing the log failed: {e}"
            ),
        };
        std::process::exit(130);
    });
    let result = record_all(&recorder, &args, &baseline, &tally, recovered);
    if SIGNALED.load(Ordering::SeqCst) {
        // The signal handler is closing the log and ends the process when it is done:
        // returning now would cut its close short.
        loop {
            std::thread::park();
        }
    }
    result
}

/// Set by the signal handler before it closes the log.
static SIGNALED: AtomicBool = AtomicBool::new(false);

/// What opening the log cut, as the summary's `recovered` object.
fn recovered_json(recovery: &blackbox::Recovery) -> Option<Value> {
    if recovery.torn_bytes_cut == 0 {
        return None;
    }
    Some(json!({
        "torn_bytes": recovery.torn_bytes_cut,
        "segment": recovery
            .torn_segment
            .as_ref()
            .map(|p| p.display().to_string()),
        "first_lost_seq": recovery.first_lost_seq.map(|s| s.0),
        "detail": recovery.torn_detail,
    }))
}

fn record_all(
    recorder: &Recorder,
    args: &Args,
    baseline: &BTreeMap<String, Counters>,
    tally: &Tally,
    recovered: Option<Value>,
) -> Result<(), CliError> {
    let outcome = feed(recorder, args, tally);
    // Whatever happened, close: the records before a bad line stay, synced.
    let (totals, closed, shipping_failed) = close_once(recorder);
    outcome?;
    let totals = totals.map_err(CliError::new)?;
    let last_seq = closed.map_err(CliError::new)?;
    print_summary(last_seq, tally, baseline, &totals, recovered)?;
    // Everything is recorded; that shipping failed was said on stderr at the close.
    if shipping_failed {
        return Err(CliError::reported());
    }
    Ok(())
}

/// The totals, the last seq and the shipping outcome of the one close of the run.
type Closed = (
    Result<BTreeMap<String, Counters>, String>,
    Result<Option<blackbox::Seq>, String>,
    // Whether shipping failed or did not finish (said on stderr at the close).
    bool,
);

/// Closes the recorder once, whoever asks first, the end of input or the signal
/// handler (a Ctrl-C to a pipeline also ends the input: both arrive together); the
/// other waits for that close and gets its outcome. A second close would only say the
/// recorder is closed, and its caller end the process before the first had printed
/// the summary.
fn close_once(recorder: &Recorder) -> Closed {
    static CLOSED: Mutex<Option<Closed>> = Mutex::new(None);
    let mut closed = CLOSED.lock().unwrap_or_else(PoisonError::into_inner);
    closed
        .get_or_insert_with(|| {
            // In the words the command uses for the recorder's errors.
            let said = |e: blackbox::Error| CliError::from(e).to_string();
            let totals = recorder.stats().map_err(said);
            let last = recorder.close().map_err(said);
            // One reading of the shipper, for the message and the exit code alike.
            let shipping_failed = match recorder.ship_status() {
                Some(status) => {
                    let mut err = io::stderr().lock();
                    let failed = !status.ended || status.last_error.is_some();
                    let _ = match (&status.last_error, status.shipped_through) {
                        _ if !status.ended => writeln!(
                            err,
                            "blackbox: everything was recorded, but shipping did not finish (exit 1): the store had not answered when the recorder closed; the next run (or `blackbox ship`) resumes it"
                        ),
                        (Some(e), _) => writeln!(
                            err,
                            "blackbox: everything was recorded, but shipping failed (exit 1): {e}"
                        ),
                        (None, Some(seq)) => writeln!(
                            err,
                            "blackbox: shipping: shipped through seq {seq} (segments uploaded this run: {}); the last segment ships once a later run seals it",
                            status.uploaded
                        ),
                        (None, None) => writeln!(
                            err,
                            "blackbox: shipping: no segment was sealed, nothing shipped yet"
                        ),
                    };
                    failed
                }
                None => false,
            };
            (totals, last, shipping_failed)
        })
        .clone()
}

/// Set by whichever prints the summary first: the end of input or the signal handler.
/// Held while it prints, so the other (the handler, which then ends the process) waits
/// for the line to be out.
static SUMMARY_PRINTED: Mutex<bool> = Mutex::new(false);

/// Prints the run's summary line on stdout, once.
fn print_summary(
    last_seq: Option<blackbox::Seq>,
    tally: &Tally,
    baseline: &BTreeMap<String, Counters>,
    totals: &BTreeMap<String, Counters>,
    recovered: Option<Value>,
) -> Result<(), CliError> {
    let mut printed = SUMMARY_PRINTED
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    if *printed {
        return Ok(());
    }
    *printed = true;
    let count = |c: &AtomicU64| c.load(Ordering::Relaxed);
    let summary = json!({
        "last_seq": last_seq.map(|s| s.0),
        "lines": count(&tally.lines),
        "events": count(&tally.events),
        "ops": count(&tally.ops),
        "skipped": count(&tally.skipped),
        "refused": count(&tally.refused),
        "kinds": run_counters(baseline, totals),
        "recovered": recovered,
    });
    reply(&io::stdout(), &summary, Answering::Summary)
}

/// This run's counters per kind: the totals at the end less those at open.
fn run_counters(
    baseline: &BTreeMap<String, Counters>,
    totals: &BTreeMap<String, Counters>,
) -> Value {
    let mut kinds = Map::new();
    for (kind, end) in totals {
        let start = baseline.get(kind).copied().unwrap_or_default();
        let c = Counters {
            seen: end.seen.saturating_sub(start.seen),
            kept: end.kept.saturating_sub(start.kept),
            sampled_out: end.sampled_out.saturating_sub(start.sampled_out),
            summarized: end.summarized.saturating_sub(start.summarized),
            dropped: end.dropped.saturating_sub(start.dropped),
            overflow: end.overflow.saturating_sub(start.overflow),
            preroll: end.preroll.saturating_sub(start.preroll),
            lost: end.lost.saturating_sub(start.lost),
        };
        if c != Counters::default() {
            kinds.insert(kind.clone(), blackbox_replay::counters_json(&c));
        }
    }
    Value::Object(kinds)
}

/// Reads stdin to its end, recording every line.
fn feed(recorder: &Recorder, args: &Args, tally: &Tally) -> Result<(), CliError> {
    let stdin = io::stdin();
    let mut input = stdin.lock();
    let stdout = io::stdout();
    let mut buf = Vec::new();
    let mut number = 0u64;
    // Whether any line so far asked for a reply: from then on every refused line is
    // answered, since what a line that cannot be read asked for cannot be told.
    let mut replies_in_use = false;
    loop {
        buf.clear();
        let read = read_line_capped(&mut input, &mut buf, LINE_BYTES_MAX)
            .map_err(|e| CliError::new(format!("cannot read stdin: {e}")))?;
        let too_long = match read {
            LineRead::End => return Ok(()),
            LineRead::Line => false,
            LineRead::TooLong => true,
        };
        number += 1;
        bump(&tally.lines);
        let outcome = match std::str::from_utf8(&buf) {
            _ if too_long => Err(format!(
                "it is longer than {} MiB, more than any record the log takes",
                LINE_BYTES_MAX >> 20
            )),
            Err(e) => Err(format!(
                "not UTF-8 text (invalid byte at column {})",
                e.valid_up_to() + 1
            )),
            Ok(text) if text.trim().is_empty() => continue,
            Ok(text) => match parse_line(text) {
                Ok(line) => {
                    replies_in_use |= line.asks_reply();
                    apply(recorder, line, number, &stdout, tally)?
                }
                Err(reason) => Err(reason),
            },
        };
        if let Err(reason) = outcome {
            // A line that asked for a reply gets one, so that a host waiting for it is
            // not left waiting: read through a lossy decoding when it is not UTF-8.
            let asks = if too_long {
                Reply::None
            } else {
                asks_reply(&String::from_utf8_lossy(&buf))
            };
            replies_in_use |= asks != Reply::None;
            if replies_in_use {
                reply(
                    &stdout,
                    &json!({"line": number, "error": reason}),
                    Answering::Refused(number),
                )?;
            }
            if asks == Reply::Kb {
                // A knowledge-base operation refused never stops the recording.
                bump(&tally.refused);
                let _ = writeln!(
                    io::stderr().lock(),
                    "blackbox: line {number} refused: {reason}"
                );
                continue;
            }
            if args.skip_invalid {
                if too_long {
                    // The rest of the line is read and dropped, never held.
                    skip_line(&mut input)
                        .map_err(|e| CliError::new(format!("cannot read stdin: {e}")))?;
                }
                bump(&tally.skipped);
                let _ = writeln!(
                    io::stderr().lock(),
                    "blackbox: line {number} skipped: {reason}"
                );
            } else {
                return Err(CliError::new(format!(
                    "line {number}: {reason}: fix the line or pass --skip-invalid to skip such lines (the lines before it are recorded)"
                )));
            }
        }
    }
}

/// What a reply answers, for the error when it cannot be written.
#[derive(Debug, Clone, Copy)]
enum Answering {
    /// Line L, recorded (or committed, or synced).
    Recorded(u64),
    /// Line L, refused.
    Refused(u64),
    /// The summary, after the log was closed.
    Summary,
}

/// Prints one reply line and flushes it: the host may be waiting for it. Every reply
/// goes through here. A closed stdout is not the quiet end of `| head`: the host waits
/// for replies, and the lines after this one would go unrecorded without a word, so it
/// stops the run with exit code 1 and a sentence on stderr (the caller then closes the
/// log, as at the end of input).
fn reply(stdout: &io::Stdout, value: &Value, answering: Answering) -> Result<(), CliError> {
    let mut out = stdout.lock();
    writeln!(out, "{value}")
        .and_then(|()| out.flush())
        .map_err(|e| {
            let why = if e.kind() == io::ErrorKind::BrokenPipe {
                "stdout was closed".to_owned()
            } else {
                e.to_string()
            };
            CliError::new(match answering {
                Answering::Recorded(number) => format!(
                    "line {number}: cannot write its reply ({why}): stopped recording; line {number} was the last recorded (the log is closed, every line up to it synced): keep reading the output of `blackbox record` until it exits"
                ),
                Answering::Refused(number) => format!(
                    "line {number}: cannot write its reply ({why}): stopped recording; line {number} was refused and the lines before it recorded (the log is closed, every one of them synced): keep reading the output of `blackbox record` until it exits"
                ),
                Answering::Summary => format!(
                    "cannot write the summary ({why}): the log is closed, every line recorded and synced"
                ),
            })
        })
}

/// Applies line `number` and prints its reply. The outer error stops the run (the
/// recorder or stdout failed); the inner one is the line's own problem (refused by the
/// recorder).
fn apply(
    recorder: &Recorder,
    line: Line,
    number: u64,
    stdout: &io::Stdout,
    tally: &Tally,
) -> Result<Result<(), String>, CliError> {
    let applied = match apply_line(recorder, line, number, &mut acked(tally))? {
        Ok(applied) => applied,
        Err(reason) => return Ok(Err(reason)),
    };
    match applied {
        Applied::Event { seq } => {
            bump(&tally.events);
            if let Some(seq) = seq {
                reply(
                    stdout,
                    &json!({"line": number, "seq": seq}),
                    Answering::Recorded(number),
                )?;
            }
        }
        Applied::Op => bump(&tally.ops),
        Applied::Kb(ack) => {
            bump(&tally.ops);
            reply(stdout, &ack, Answering::Recorded(number))?;
        }
        Applied::Synced(seq) => {
            bump(&tally.ops);
            reply(
                stdout,
                &json!({ "synced": seq }),
                Answering::Recorded(number),
            )?;
        }
    }
    Ok(Ok(()))
}

/// The longest input line: twice the largest record the log takes (16 MiB), so any line
/// whose content can be recorded fits, whitespace and escapes included. A longer line is
/// refused as soon as this many bytes of it are read.
const LINE_BYTES_MAX: usize = 32 << 20;

/// What [`read_line_capped`] read.
#[derive(Debug, PartialEq, Eq)]
enum LineRead {
    /// The end of the input.
    End,
    /// A line (with its newline, unless it ended the input).
    Line,
    /// `cap` bytes of a line that goes on: they are in the buffer, the rest is unread.
    TooLong,
}

/// Reads one line into `buf` (empty), holding at most `cap` bytes of it.
fn read_line_capped(
    input: &mut impl BufRead,
    buf: &mut Vec<u8>,
    cap: usize,
) -> io::Result<LineRead> {
    loop {
        let available = match input.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if available.is_empty() {
            return Ok(if buf.is_empty() {
                LineRead::End
            } else {
                LineRead::Line
            });
        }
        let room = cap - buf.len();
        let (take, done) = match available.iter().position(|&b| b == b'\n') {
            Some(i) if i < room => (i + 1, true),
            _ => (available.len().min(room), false),
        };
        buf.extend_from_slice(&available[..take]);
        input.consume(take);
        if done {
            return Ok(LineRead::Line);
        }
        if buf.len() >= cap {
            return Ok(LineRead::TooLong);
        }
    }
}

/// Reads and drops the rest of a line, through its newline.
fn skip_line(input: &mut impl BufRead) -> io::Result<()> {
    loop {
        let available = match input.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if available.is_empty() {
            return Ok(());
        }
        match available.iter().position(|&b| b == b'\n') {
            Some(i) => {
                input.consume(i + 1);
                return Ok(());
            }
            None => {
                let n = available.len();
                input.consume(n);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_read_whole_up_to_the_cap_and_no_further() {
        let mut input = io::Cursor::new(b"ab\ncdefgh\nij".to_vec());
        let mut buf = Vec::new();
        assert_eq!(
            read_line_capped(&mut input, &mut buf, 4).ok(),
            Some(LineRead::Line)
        );
        assert_eq!(buf, b"ab\n");
        buf.clear();
        assert_eq!(
            read_line_capped(&mut input, &mut buf, 4).ok(),
            Some(LineRead::TooLong)
        );
        assert_eq!(buf, b"cdef");
        assert!(skip_line(&mut input).is_ok());
        buf.clear();
        assert_eq!(
            read_line_capped(&mut input, &mut buf, 4).ok(),
            Some(LineRead::Line)
        );
        assert_eq!(buf, b"ij");
        buf.clear();
        assert_eq!(
            read_line_capped(&mut input, &mut buf, 4).ok(),
            Some(LineRead::End)
        );
        // A line of exactly the cap, with its newline past it, is too long.
        let mut input = io::Cursor::new(b"abcd\n".to_vec());
        assert_eq!(
            read_line_capped(&mut input, &mut buf, 4).ok(),
            Some(LineRead::TooLong)
        );
    }
}
