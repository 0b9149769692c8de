//! `blackbox state`: the working memory, knowledge base and accounting at a time.

use std::io::{self, Write};
use std::path::PathBuf;

use blackbox_replay::{State, format_time, state_at};

use super::{CliError, DirArg, key_from, line, time_arg};

/// Print the state at a point in time: the working memory as it was then (the last
/// checkpoint and the changes since), the knowledge base as of it, and the accounting
/// totals up to it.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    dir: DirArg,
    /// The point in time: RFC 3339, integer ns since the epoch, `now`, or a duration
    /// before now (`-5m`).
    #[arg(long, value_name = "T", value_parser = time_arg, allow_hyphen_values = true)]
    at: u64,
    /// One JSON object: `{"at", "working", "kb", "kinds"}` and the seqs they come from.
    #[arg(long)]
    json: bool,
    /// The chain key file of a keyed log.
    #[arg(long, value_name = "K")]
    key_file: Option<PathBuf>,
}

/// Where the working memory of a state comes from, in words.
pub fn working_source(state: &State) -> String {
    match (state.checkpoint_seq, state.working_seq) {
        (_, None) => "empty: no checkpoint or change at or before this time".to_owned(),
        (Some(c), Some(w)) if c == w => format!("the checkpoint at seq {c}"),
        (Some(c), Some(w)) => format!("the checkpoint at seq {c} and the changes up to seq {w}"),
        (None, Some(w)) => format!("the changes up to seq {w}"),
    }
}

/// Runs `blackbox state`.
pub fn run(args: Args) -> Result<(), CliError> {
    let key = key_from(args.key_file.as_deref())?;
    let state = state_at(&args.dir.dir, args.at, key)
        .map_err(|e| super::damage::fail(&args.dir.dir, args.json, e))?;
    let stdout = io::stdout();
    let mut out = stdout.lock();
    if args.json {
        line(&mut out, state.to_json())?;
        return out.flush().map_err(super::stdout_error);
    }
    line(&mut out, format!("state at {}", format_time(state.at_ns)))?;
    line(
        &mut out,
        format!("working memory ({}):", working_source(&state)),
    )?;
    for (k, v) in &state.working {
        line(&mut out, format!("  {k} = {v}"))?;
    }
    line(
        &mut out,
        format!("knowledge base (version {}):", state.kb_version),
    )?;
    for fact in state.kb.values() {
        line(
            &mut out,
            format!(
                "  {} = {}  confidence {:.3}, {}, evidence {}",
                fact.key,
                fact.value,
                fact.confidence,
                fact.status.name(),
                fact.evidence_count
            ),
        )?;
    }
    match state.accounting_seq {
        None => line(
            &mut out,
            "accounting: no accounting record at or before this time",
        )?,
        Some(seq) => {
            line(
                &mut out,
                format!("accounting (running totals at seq {seq}):"),
            )?;
            for (kind, c) in &state.kinds {
                line(
                    &mut out,
                    format!(
                        "  {kind}: seen {} kept {} sampled_out {} summarized {} dropped {} overflow {} preroll {}",
                        c.seen,
                        c.kept,
                        c.sampled_out,
                        c.summarized,
                        c.dropped,
                        c.overflow,
                        c.preroll
                    ),
                )?;
            }
        }
    }
    out.flush().map_err(super::stdout_error)
}
