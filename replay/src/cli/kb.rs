//! `blackbox kb`: the knowledge base from the command line.
//!
//! Writes (`put`, `refute`, `retract`, `revert`, `rebuild`) open the log as its writer,
//! so they need the directory's writer lock, like `record`. Reads use a temporary view
//! ([`kb_view`]: a copy of the recorder's view caught up with the log, or one rebuilt
//! from the log's commit records): they take no lock and never open the view a running
//! recorder owns.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use blackbox::kb::{AsOf, Conditions, Fact, Outcome, Provenance, Version};
use blackbox::{Config, LogOptions, Recorder, Seq};
use blackbox_log::Shown;
use blackbox_replay::{TempView, fact_json, format_time, kb_view};
use serde_json::{Value, json};

use super::{CliError, DirArg, key_from, line, time_arg};

/// Read and revise the knowledge base: versioned facts with provenance.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: KbCommand,
}

/// What every `kb` subcommand takes.
#[derive(Debug, clap::Args)]
struct Common {
    #[command(flatten)]
    dir: DirArg,
    /// One JSON object a line.
    #[arg(long)]
    json: bool,
    /// The chain key file of a keyed log.
    #[arg(long, value_name = "K")]
    key_file: Option<PathBuf>,
}

/// Who and why, for every write.
#[derive(Debug, clap::Args)]
struct Why {
    /// Seqs of the log records that justify the write (at least one, each already in
    /// the log).
    #[arg(
        long,
        value_name = "SEQ[,SEQ...]",
        value_delimiter = ',',
        required = true
    )]
    evidence: Vec<u64>,
    /// Who makes the write.
    #[arg(long, value_name = "A", default_value = "blackbox")]
    author: String,
}

#[derive(Debug, clap::Subcommand)]
enum KbCommand {
    /// Claim that KEY is VALUE_JSON -> {"version", "outcome"}.
    Put {
        /// The key.
        key: String,
        /// The value, as JSON (a string needs its quotes: '"left"').
        value: String,
        /// The claim's confidence, between 0 and 1.
        #[arg(
            long,
            value_name = "C",
            default_value_t = 0.5,
            allow_negative_numbers = true
        )]
        confidence: f64,
        /// Where the fact holds, as a JSON object: '{"level": 1}'.
        #[arg(long, value_name = "JSON")]
        conditions: Option<String>,
        /// Why (also `--message`).
        #[arg(long, visible_alias = "message", value_name = "R", default_value = "")]
        reason: String,
        #[command(flatten)]
        why: Why,
        #[command(flatten)]
        common: Common,
    },
    /// Record a counterexample: KEY is not VALUE_JSON.
    Refute {
        /// The key.
        key: String,
        /// The refuted value, as JSON.
        value: String,
        /// Why (also `--message`).
        #[arg(long, visible_alias = "message", value_name = "R")]
        reason: String,
        #[command(flatten)]
        why: Why,
        #[command(flatten)]
        common: Common,
    },
    /// Withdraw KEY's fact (its history stays).
    Retract {
        /// The key.
        key: String,
        /// Why (also `--message`).
        #[arg(long, visible_alias = "message", value_name = "R")]
        reason: String,
        #[command(flatten)]
        why: Why,
        #[command(flatten)]
        common: Common,
    },
    /// Print KEY's fact, now or as of a version or a time.
    Get {
        /// The key.
        key: String,
        /// The version to read as of.
        #[arg(long, value_name = "VERSION", conflicts_with = "at")]
        as_of: Option<Version>,
        /// The time to read as of: RFC 3339, integer ns since the epoch, `now`, or a
        /// duration before now (`-5m`).
        #[arg(
            long,
            value_name = "T",
            value_parser = time_arg,
            allow_hyphen_values = true
        )]
        at: Option<u64>,
        /// A context as a JSON object: the fact is printed only if its conditions hold
        /// there.
        #[arg(long, value_name = "JSON")]
        context: Option<String>,
        #[command(flatten)]
        common: Common,
    },
    /// One line per version of KEY.
    History {
        /// The key.
        key: String,
        #[command(flatten)]
        common: Common,
    },
    /// One line per commit.
    Log {
        #[command(flatten)]
        common: Common,
    },
    /// The facts that differ between two versions.
    Diff {
        /// The first version.
        v1: Version,
        /// The second version.
        v2: Version,
        #[command(flatten)]
        common: Common,
    },
    /// Append a commit that restores VERSION's state.
    Revert {
        /// The version to restore.
        version: Version,
        /// Why (also `--message`).
        #[arg(long, visible_alias = "message", value_name = "R")]
        reason: String,
        #[command(flatten)]
        why: Why,
        #[command(flatten)]
        common: Common,
    },
    /// The facts with open contradictions.
    Contradictions {
        #[command(flatten)]
        common: Common,
    },
    /// Every value ever rejected, per key, with the commit that rejected it.
    Rejected {
        #[command(flatten)]
        common: Common,
    },
    /// The facts (not rejected) whose conditions hold in a context.
    Matching {
        /// The context, as a JSON object: '{"level": 1}'.
        #[arg(long, value_name = "JSON")]
        context: String,
        #[command(flatten)]
        common: Common,
    },
    /// Drop the knowledge base's view (DIR/kb) and rebuild it from the log.
    Rebuild {
        #[command(flatten)]
        common: Common,
    },
}

/// Runs `blackbox kb`.
pub fn run(args: Args) -> Result<(), CliError> {
    match args.command {
        KbCommand::Put {
            key,
            value,
            confidence,
            conditions,
            reason,
            why,
            common,
        } => {
            let value = parse_json("VALUE_JSON", &value)?;
            let conditions = match conditions {
                Some(text) => parse_object("--conditions", &text)?,
                None => Conditions::new(),
            };
            blackbox::kb::validate_key(&key)?;
            blackbox::kb::validate_confidence(confidence)?;
            let provenance = provenance(&why).message(reason);
            write(&common, &why, explain_claim, |kb| {
                kb.assert(&key, value, confidence, &conditions, provenance)
            })
        }
        KbCommand::Refute {
            key,
            value,
            reason,
            why,
            common,
        } => {
            let value = parse_json("VALUE_JSON", &value)?;
            blackbox::kb::validate_key(&key)?;
            let provenance = provenance(&why).message(reason);
            write(&common, &why, explain_refutation, |kb| {
                kb.refute(&key, &value, provenance)
            })
        }
        KbCommand::Retract {
            key,
            reason,
            why,
            common,
        } => {
            blackbox::kb::validate_key(&key)?;
            let provenance = provenance(&why).message(reason);
            write(&common, &why, |_| None, |kb| kb.retract(&key, provenance))
        }
        KbCommand::Revert {
            version,
            reason,
            why,
            common,
        } => {
            let provenance = provenance(&why).message(reason);
            write(
                &common,
                &why,
                |_| None,
                |kb| kb.revert_to(version, provenance),
            )
        }
        KbCommand::Rebuild { common } => {
            let recorder = open_writer(&common)?;
            let kb = recorder.kb()?;
            let n = kb.rebuild().map_err(blackbox::Error::from)?;
            let from = kb.view().history_from().map_err(blackbox::Error::from)?;
            recorder.close()?;
            let mut out = io::stdout().lock();
            if common.json {
                let mut done = json!({"rebuilt": true, "commits": n});
                if from > 0
                    && let Some(obj) = done.as_object_mut()
                {
                    obj.insert("history_from".to_owned(), from.into());
                }
                line(&mut out, done)?;
            } else if from > 0 {
                line(
                    &mut out,
                    format!(
                        "rebuilt the knowledge base from the log: its snapshot at version {from}, then {n} commits (the log was pruned before it: history complete from version {from})"
                    ),
                )?;
            } else {
                line(
                    &mut out,
                    format!("rebuilt the knowledge base from the log: {n} commits"),
                )?;
            }
            out.flush().map_err(super::stdout_error)
        }
        KbCommand::Get {
            key,
            as_of,
            at,
            context,
            common,
        } => {
            let context = context
                .map(|text| parse_object("--context", &text))
                .transpose()?;
            let view = read(&common)?;
            let at = match (as_of, at) {
                (Some(v), _) => AsOf::Version(v),
                (None, Some(t)) => AsOf::Time(t),
                (None, None) => AsOf::Version(view.version()?),
            };
            let fact = view.get_as_of(&key, at)?.ok_or_else(|| not_found(&key))?;
            if let Some(context) = &context
                && !fact.holds_in(context)
            {
                return Err(CliError::new(format!(
                    "not found: the fact of {} holds only where {} (not in the context given)",
                    Shown(&key),
                    Value::from(
                        fact.conditions
                            .clone()
                            .into_iter()
                            .collect::<serde_json::Map<_, _>>()
                    )
                )));
            }
            let mut out = io::stdout().lock();
            if common.json {
                line(&mut out, fact_json(&fact))?;
            } else {
                line(&mut out, describe(&fact))?;
            }
            out.flush().map_err(super::stdout_error)
        }
        KbCommand::History { key, common } => {
            let view = read(&common)?;
            let history = view.history(&key)?;
            if history.is_empty() {
                return Err(not_found(&key));
            }
            // A knowledge base rebuilt from a pruned log starts at its snapshot: its
            // history is complete from there only, and the command says so first.
            let from = view.history_from()?;
            let mut out = io::stdout().lock();
            if from > 0 && !common.json {
                line(
                    &mut out,
                    format!("history complete from version {from} (the log was pruned before it)"),
                )?;
            }
            for (version, fact) in history {
                // What the commit did (a refutation names the value it refuted), then
                // the key's state after it: the outcome alone beside the held value
                // read as if that value had been rejected.
                let entry = blackbox_replay::history_entry(&view, from, version, fact.as_ref())?;
                if common.json {
                    line(&mut out, entry)?;
                } else {
                    let state = fact
                        .as_ref()
                        .map_or_else(|| "(no fact)".to_owned(), describe);
                    line(
                        &mut out,
                        format!(
                            "v{version}  {}  {}: {}; then {state}",
                            entry["time"].as_str().unwrap_or_default(),
                            entry["op"].as_str().unwrap_or("?"),
                            entry["outcome"].as_str().unwrap_or("?")
                        ),
                    )?;
                }
            }
            out.flush().map_err(super::stdout_error)
        }
        KbCommand::Log { common } => {
            let view = read(&common)?;
            let from = view.history_from()?;
            let mut out = io::stdout().lock();
            if from > 0 && !common.json {
                line(
                    &mut out,
                    format!(
                        "log complete from version {} (the log was pruned before it; the knowledge base starts from its snapshot at version {from})",
                        from + 1
                    ),
                )?;
            }
            for commit in view.log(..)? {
                if common.json {
                    let mut v = serde_json::to_value(&commit).unwrap_or(Value::Null);
                    if let Some(obj) = v.as_object_mut() {
                        obj.insert("time".to_owned(), format_time(commit.time_ns).into());
                    }
                    line(&mut out, v)?;
                } else {
                    let r = &commit.record;
                    let what = r.op.to_string();
                    let evidence: Vec<String> = r.provenance.iter().map(u64::to_string).collect();
                    line(
                        &mut out,
                        format!(
                            "v{}  {}  seq {}  {}: {what} -> {}  evidence {}{}",
                            r.version,
                            format_time(commit.time_ns),
                            commit.seq,
                            r.author,
                            r.outcome.name(),
                            evidence.join(","),
                            if r.message.is_empty() {
                                String::new()
                            } else {
                                format!("  \"{}\"", r.message)
                            }
                        ),
                    )?;
                }
            }
            out.flush().map_err(super::stdout_error)
        }
        KbCommand::Diff { v1, v2, common } => {
            let view = read(&common)?;
            let mut out = io::stdout().lock();
            for d in view.diff(v1, v2)? {
                if common.json {
                    line(
                        &mut out,
                        json!({
                            "key": d.key,
                            "before": d.before.as_ref().map(fact_json),
                            "after": d.after.as_ref().map(fact_json),
                        }),
                    )?;
                } else {
                    let show = |f: &Option<Fact>| {
                        f.as_ref().map_or_else(|| "(no fact)".to_owned(), describe)
                    };
                    line(
                        &mut out,
                        format!("{}: {}  ->  {}", d.key, show(&d.before), show(&d.after)),
                    )?;
                }
            }
            out.flush().map_err(super::stdout_error)
        }
        KbCommand::Contradictions { common } => {
            let view = read(&common)?;
            print_facts(&common, &view.contradictions()?)
        }
        KbCommand::Rejected { common } => {
            let view = read(&common)?;
            let mut out = io::stdout().lock();
            for r in view.rejected()? {
                if common.json {
                    line(&mut out, blackbox_replay::rejection_json(&view, &r)?)?;
                } else {
                    let time = view.commit_time(r.version)?;
                    let why = match r.refutations {
                        0 => format!(
                            "confidence under {}",
                            blackbox::kb::adjudicate::REJECTED_BELOW
                        ),
                        1 => "refuted once".to_owned(),
                        n => format!("refuted {n} times"),
                    };
                    line(
                        &mut out,
                        format!(
                            "{} = {}  rejected by v{} at {}, confidence {:.3}, {why}",
                            r.key,
                            r.value,
                            r.version,
                            time.map(format_time).unwrap_or_default(),
                            r.confidence
                        ),
                    )?;
                }
            }
            out.flush().map_err(super::stdout_error)
        }
        KbCommand::Matching { context, common } => {
            let context = parse_object("--context", &context)?;
            let view = read(&common)?;
            print_facts(&common, &view.matching(&context)?)
        }
    }
}

fn provenance(why: &Why) -> Provenance {
    Provenance::new(why.evidence.iter().map(|&s| Seq(s))).author(why.author.clone())
}

fn not_found(key: &str) -> CliError {
    CliError::new(format!("not found: the key {} has no fact", Shown(key)))
}

fn parse_json(what: &str, text: &str) -> Result<Value, CliError> {
    blackbox_replay::json_input::parse_strict_why(text).map_err(|(why, not_json)| {
        // The hint is for text that is not JSON (a bare word); a repeated key is not
        // about quoting.
        CliError::new(if not_json {
            format!("{what}: {why}: quote strings as JSON, e.g. '\"left\"'")
        } else {
            format!("{what}: {why}")
        })
    })
}

fn parse_object(what: &str, text: &str) -> Result<Conditions, CliError> {
    match parse_json(what, text)? {
        Value::Object(map) => Ok(map.into_iter().collect()),
        other => Err(CliError::new(format!(
            "{what} must be a JSON object such as '{{\"level\": 1}}', not {other}"
        ))),
    }
}

/// One line for a person.
fn describe(fact: &Fact) -> String {
    let mut s = format!(
        "{} = {}  confidence {:.3}, {}, evidence {}, v{}",
        fact.key,
        fact.value,
        fact.confidence,
        fact.status.name(),
        fact.evidence_count,
        fact.updated
    );
    if !fact.conditions.is_empty() {
        let c: serde_json::Map<String, Value> = fact.conditions.clone().into_iter().collect();
        s.push_str(&format!(", where {}", Value::Object(c)));
    }
    if fact.refutations > 0 {
        s.push_str(&format!(", refuted {}", times(fact.refutations)));
    }
    for r in &fact.rivals {
        s.push_str(&format!(
            "; contradicted by {} (confidence {:.3}, evidence {})",
            r.value, r.confidence, r.evidence_count
        ));
    }
    for r in &fact.refuted {
        s.push_str(&format!(
            "; refuted: {} (confidence {:.3}, evidence {}, refuted {})",
            r.value,
            r.confidence,
            r.evidence_count,
            times(r.refutations)
        ));
    }
    s
}

fn times(n: u64) -> String {
    if n == 1 {
        "once".to_owned()
    } else {
        format!("{n} times")
    }
}

/// What a claim's outcome means, when the name alone does not say it.
fn explain_claim(outcome: Outcome) -> Option<&'static str> {
    match outcome {
        Outcome::Duplicate => Some(
            "every evidence seq cited is already counted for this value, so the claim changed nothing",
        ),
        Outcome::Rejected => Some(
            "the value was refuted: a claim adds to its support, but its confidence stays under the refutation",
        ),
        _ => None,
    }
}

/// What a refutation's outcome means, when the name alone does not say it.
fn explain_refutation(outcome: Outcome) -> Option<&'static str> {
    match outcome {
        Outcome::Duplicate => Some(
            "every evidence seq cited is already counted against this value, so the refutation changed nothing",
        ),
        _ => None,
    }
}

fn print_facts(common: &Common, facts: &[Fact]) -> Result<(), CliError> {
    let mut out = io::stdout().lock();
    for fact in facts {
        if common.json {
            line(&mut out, fact_json(fact))?;
        } else {
            line(&mut out, describe(fact))?;
        }
    }
    out.flush().map_err(super::stdout_error)
}

fn read(common: &Common) -> Result<TempView, CliError> {
    let key = key_from(common.key_file.as_deref())?;
    kb_view(&common.dir.dir, key).map_err(|e| super::damage::fail(&common.dir.dir, common.json, e))
}

/// Opens the log as its writer: only an existing log, never a new one.
fn open_writer(common: &Common) -> Result<Recorder, CliError> {
    let dir: &Path = &common.dir.dir;
    blackbox_replay::open_log_dir(dir)?;
    let log = LogOptions::new().key(key_from(common.key_file.as_deref())?);
    Ok(Recorder::open(dir, Config::new().log_options(log))?)
}

/// Runs a write as a short recorder session. What can be refused without the writer
/// (the key, the confidence, evidence past the log's end) is refused before the log is
/// opened, so it leaves no trace; a session that opens appends, besides its commit, the
/// accounting record and checkpoint every recorder writes when it closes.
fn write(
    common: &Common,
    why: &Why,
    explain: impl Fn(Outcome) -> Option<&'static str>,
    op: impl FnOnce(&blackbox::KnowledgeBase) -> blackbox::kb::Result<blackbox::kb::Committed>,
) -> Result<(), CliError> {
    blackbox_replay::open_log_dir(&common.dir.dir)?;
    let key = key_from(common.key_file.as_deref())?;
    let reader =
        blackbox::LogReader::open_with(&common.dir.dir, blackbox::log::ReaderOptions { key })
            .map_err(|e| CliError::new(super::describe_log(&e)))?;
    let next_seq = reader
        .digest()
        .map_err(|e| CliError::new(super::describe_log(&e)))?
        .map_or(0, |d| d.seq + 1);
    if let Some(&seq) = why.evidence.iter().find(|&&s| s >= next_seq) {
        return Err(blackbox::kb::Error::EvidenceNotInLog { seq, next_seq }.into());
    }
    let recorder = open_writer(common)?;
    let result = recorder
        .kb()
        .and_then(|kb| op(kb).map_err(blackbox::Error::from));
    // Closed whatever happened: a refused write committed nothing, and what is in the
    // log stays.
    let closed = recorder.close();
    let committed = result?;
    closed?;
    let mut out = io::stdout().lock();
    if common.json {
        line(
            &mut out,
            json!({
                "version": committed.version,
                "outcome": committed.outcome.name(),
                "seq": committed.seq,
            }),
        )?;
    } else {
        line(
            &mut out,
            format!(
                "version {}: {} (commit record at seq {}){}",
                committed.version,
                committed.outcome.name(),
                committed.seq,
                explain(committed.outcome).map_or_else(String::new, |e| format!(": {e}"))
            ),
        )?;
    }
    out.flush().map_err(super::stdout_error)
}
