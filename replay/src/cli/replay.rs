//! `blackbox replay`: the records of a range, filtered by kind and type.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::io::{self, BufWriter, Write};
use std::path::PathBuf;

use blackbox_replay::{
    Body, Order, Payload, Query, Record, Replay, Salvaged, format_time, hex, to_json,
};

use super::range::{RangeArgs, explain_empty};
use super::{CliError, DirArg, TypeArg, glob_arg, key_from, line, warn_unverified};

/// Print the records of a range, one a line.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    dir: DirArg,
    #[command(flatten)]
    range: RangeArgs,
    /// Records from this seq on.
    #[arg(long, value_name = "N")]
    from_seq: Option<u64>,
    /// Records up to this seq (inclusive).
    #[arg(long, value_name = "N")]
    to_seq: Option<u64>,
    /// Only records whose kind matches this glob (repeatable; `*` crosses dots; `!GLOB`
    /// excludes the kinds it matches).
    #[arg(long = "kind", value_name = "GLOB", value_parser = glob_arg)]
    kinds: Vec<String>,
    /// Only records of this type (repeatable; default: every type but dictionary).
    #[arg(long = "type", value_name = "TYPE", value_enum)]
    types: Vec<TypeArg>,
    /// Print at most N records.
    #[arg(long, value_name = "N")]
    limit: Option<u64>,
    /// Print in log order (by seq), in one pass, instead of by when each record
    /// happened (pre-roll events are written when their incident is triggered).
    #[arg(long)]
    log_order: bool,
    /// Read a damaged log around its damage, in log order: print every intact record
    /// and report each lost stretch (stderr, or a `"type": "lost"` object with --json);
    /// exit 3 if anything was lost.
    #[arg(long)]
    salvage: bool,
    /// One JSON object a line.
    #[arg(long)]
    json: bool,
    /// The chain key file of a keyed log, to verify its chain while reading.
    #[arg(long, value_name = "K")]
    key_file: Option<PathBuf>,
}

/// The query the arguments describe.
pub fn query(
    since: Option<u64>,
    until: Option<u64>,
    from_seq: Option<u64>,
    to_seq: Option<u64>,
    kinds: &[String],
) -> Result<Query, CliError> {
    let mut q = Query::new();
    if let Some(t) = since {
        q = q.since(t);
    }
    if let Some(t) = until {
        q = q.until(t);
    }
    if let Some(s) = from_seq {
        q = q.from_seq(s);
    }
    if let Some(s) = to_seq {
        q = q.to_seq(s);
    }
    for k in kinds {
        q = q.kind(k)?;
    }
    Ok(q)
}

/// Runs `blackbox replay`.
pub fn run(args: Args) -> Result<(), CliError> {
    let dir = &args.dir.dir;
    let key = key_from(args.key_file.as_deref())?;
    // Damage is reported as every reader reports it: with --json, one object on stdout.
    let damaged = |e| super::damage::fail(dir, args.json, e);
    if !args.salvage {
        blackbox_replay::open_log_dir(dir).map_err(damaged)?;
    }
    let (since, until) = args.range.resolve(dir, key.as_ref())?;
    let mut q = query(since, until, args.from_seq, args.to_seq, &args.kinds)?;
    if !args.types.is_empty() {
        q = q.types(args.types.iter().map(|&t| t.into()));
    }
    q = q.key(key.clone()).order(if args.log_order {
        Order::Log
    } else {
        Order::Happened
    });
    if args.salvage {
        return salvage(&args, &q);
    }
    let mut replay = Replay::open(dir, &q).map_err(damaged)?;
    if !replay.chain_verified() {
        warn_unverified(dir);
    }
    let stdout = io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let mut printed = 0u64;
    let mut kinds = BTreeSet::new();
    // Each record decoded in place: only what is printed is copied out of the log.
    while let Some(r) = replay.next_view() {
        if args.limit.is_some_and(|n| printed >= n) {
            break;
        }
        let r = match r {
            Ok(r) => r,
            Err(e) => {
                // The records so far, then the report after them.
                out.flush().map_err(super::stdout_error)?;
                return Err(damaged(e));
            }
        };
        if let Some(k) = r.kind()
            && !kinds.contains(k)
        {
            kinds.insert(k.to_owned());
        }
        if args.json {
            line(&mut out, r.to_json())?;
        } else {
            line(&mut out, human(&r.into_owned()))?;
        }
        printed += 1;
    }
    out.flush().map_err(super::stdout_error)?;
    explain_empty(dir, key, &q, printed, &kinds);
    Ok(())
}

/// `replay --salvage`: every intact record, in log order, and each loss where it lies.
fn salvage(args: &Args, q: &Query) -> Result<(), CliError> {
    let dir = &args.dir.dir;
    let salvage = blackbox_replay::salvage(dir, q)?;
    if !salvage.chain_verified() {
        warn_unverified(dir);
    }
    let stdout = io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let mut printed = 0u64;
    let mut lost = false;
    for item in salvage {
        match item {
            Salvaged::Record(r) => {
                if args.limit.is_some_and(|n| printed >= n) {
                    continue;
                }
                if args.json {
                    line(&mut out, to_json(&r))?;
                } else {
                    line(&mut out, human(&r))?;
                }
                printed += 1;
            }
            Salvaged::Lost(loss) => {
                lost |= blackbox_replay::loses_records(&loss);
                if args.json {
                    line(&mut out, blackbox_replay::loss_json(&loss))?;
                } else {
                    // In order with the records around it.
                    out.flush().map_err(super::stdout_error)?;
                    let _ = writeln!(io::stderr().lock(), "blackbox: {loss}");
                }
            }
            Salvaged::Undecodable { seq, reason } => {
                lost = true;
                if args.json {
                    line(
                        &mut out,
                        serde_json::json!({"type": "undecodable", "seq": seq, "reason": reason}),
                    )?;
                } else {
                    out.flush().map_err(super::stdout_error)?;
                    let _ = writeln!(
                        io::stderr().lock(),
                        "blackbox: seq {seq} is intact but cannot be read: {reason}"
                    );
                }
            }
        }
    }
    out.flush().map_err(super::stdout_error)?;
    if lost {
        return Err(CliError::salvaged());
    }
    Ok(())
}

/// A record on one line for people.
pub fn human(r: &Record) -> String {
    let type_name = r.record_type().map_or("unknown", |t| t.name());
    let happened = r.happened_ns();
    // When it happened, then how much later the log wrote it (a pre-roll event is
    // written when its incident is triggered), blank when at once.
    let mut s = format!(
        "{:>8}  {}  {:>16}  {:<10}  ",
        r.seq,
        format_time(happened),
        written_later(happened, r.ts_ns),
        type_name
    );
    match &r.body {
        Body::Event(e) => {
            let _ = write!(s, "{}  [{}", e.kind, e.tier.name());
            if e.weight != 1.0 {
                let _ = write!(s, " x{}", e.weight);
            }
            s.push(']');
            if let Some(src) = &e.source {
                let _ = write!(s, "  source={src}");
            }
            for (name, v) in &e.values {
                let _ = write!(s, "  {name}={v}");
            }
            match &e.payload {
                Payload::None => {}
                Payload::Json(v) => {
                    let _ = write!(s, "  payload={v}");
                }
                Payload::Raw(b) => {
                    let _ = write!(s, "  payload=0x{}", hex(b));
                }
            }
            if let Some(t) = e.event_time_ns {
                let _ = write!(s, "  event_time={}", format_time(t));
            }
        }
        Body::Summary(sum) => {
            let _ = write!(
                s,
                "{}  window {} .. {}  count={}",
                sum.kind,
                format_time(sum.window_start_ns),
                format_time(sum.window_end_ns),
                sum.count
            );
            for (name, v) in &sum.values {
                let _ = write!(
                    s,
                    "  {name}: min={} max={} mean={} sum={} last={}",
                    v.min, v.max, v.mean, v.sum, v.last
                );
            }
        }
        Body::Accounting(a) => {
            let _ = write!(s, "{} kinds", a.kinds.len());
            for (kind, c) in &a.kinds {
                let _ = write!(
                    s,
                    "  {kind}: seen={} kept={} sampled_out={} summarized={} dropped={} overflow={} preroll={} lost={}",
                    c.seen,
                    c.kept,
                    c.sampled_out,
                    c.summarized,
                    c.dropped,
                    c.overflow,
                    c.preroll,
                    c.lost
                );
            }
        }
        Body::Recovery(r) => {
            let _ = write!(
                s,
                "opening the log cut {} bytes of a torn write from {} (records from seq {} on, if it held any): {}",
                r.torn_bytes, r.segment, r.first_lost_seq, r.detail
            );
        }
        Body::Checkpoint(c) => {
            let _ = write!(
                s,
                "working memory {}",
                serde_json::Value::Object(c.working.clone())
            );
        }
        Body::Prune(p) => {
            use blackbox::log::retention::{REASON_DISK_FULL, REASON_SHIPPED, REASON_UNSHIPPED};
            let why = if p.reasons & REASON_DISK_FULL != 0 {
                "for room on a full disk"
            } else {
                "by the disk budget"
            };
            let _ = write!(
                s,
                "pruned seqs {}..={} ({} bytes, {} segment{}, records up to {}) {why}",
                p.first_seq,
                p.last_seq,
                p.bytes,
                p.segments.len(),
                if p.segments.len() == 1 { "" } else { "s" },
                blackbox_replay::format_time(p.last_ts_ns)
            );
            if p.reasons & REASON_SHIPPED != 0 {
                s.push_str(", all of it shipped");
            } else if p.reasons & REASON_UNSHIPPED != 0 {
                s.push_str(", some of it never shipped");
            }
            if !p.evicted_pins.is_empty() {
                let _ = write!(s, "; pins evicted: {:?}", p.evicted_pins);
            }
        }
        Body::Policy(toml) => {
            let lines: Vec<&str> = toml.lines().filter(|l| !l.is_empty()).collect();
            let _ = write!(s, "policy in force: {}", lines.join("; "));
        }
        Body::Working(d) => {
            let mut parts: Vec<String> = d.set.iter().map(|(k, v)| format!("{k} = {v}")).collect();
            parts.extend(d.del.iter().map(|k| format!("del {k}")));
            let _ = write!(s, "working memory: {}", parts.join(", "));
        }
        Body::Kb(k) => {
            let _ = write!(s, "commit {}", k.commit);
        }
        Body::KbCarried(k) => {
            let _ = write!(s, "carried commit {}", k.commit);
        }
        Body::KbSnapshot(k) => {
            let facts = k.snapshot["facts"].as_array().map_or(0, Vec::len);
            let _ = write!(
                s,
                "knowledge base as of version {} ({facts} fact{})",
                k.snapshot["version"],
                if facts == 1 { "" } else { "s" }
            );
        }
        Body::Incident(i) => {
            let _ = write!(
                s,
                "{}  trigger seq {}  pre-roll from {} ({} events)  post-roll until {}",
                i.trigger_kind,
                i.trigger_seq,
                format_time(i.preroll_start_ns),
                i.preroll_events,
                format_time(i.postroll_end_ns)
            );
        }
        Body::Dictionary(d) => {
            let names: Vec<String> = d
                .entries
                .iter()
                .map(|(id, name)| format!("{id}={name}"))
                .collect();
            s.push_str(&names.join(" "));
        }
        Body::Unknown {
            record_type,
            payload,
        } => {
            let _ = write!(s, "type tag {record_type}, {} bytes", payload.len());
        }
    }
    let _ = write!(s, "  hash={}", hex(&r.hash));
    s
}

/// `written +1.815s` when a record was written after it happened, else empty.
fn written_later(happened_ns: u64, written_ns: u64) -> String {
    let d = written_ns.saturating_sub(happened_ns);
    if d == 0 {
        String::new()
    } else if d < 1_000_000 {
        format!("written +{}µs", d.div_ceil(1_000))
    } else {
        format!("written +{:.3}s", d as f64 / 1e9)
    }
}
