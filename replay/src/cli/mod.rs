//! The command line: one module per subcommand, and what they share (arguments, errors,
//! output, progress).
//!
//! To add a subcommand: a module with an `Args` struct (`clap::Args`) and a
//! `run(Args) -> Result<(), CliError>`, a variant in [`Command`], and an arm in
//! [`main`].

use std::fmt;
use std::io::{self, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::OnceLock;

use blackbox_log::Shown;
use blackbox_replay::Error;
use clap::{Parser, Subcommand};

mod damage;
mod demo;
mod digest;
mod export;
mod fleet;
mod import;
mod kb;
mod lake;
mod range;
mod record;
mod release;
mod replay;
mod report;
mod ship;
mod state;
mod stats;
mod verify;
mod verify_remote;

/// Blackbox: a flight recorder for robots and AI agents.
#[derive(Debug, Parser)]
#[command(name = "blackbox", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Record JSON lines from stdin into a log (events and working-memory operations).
    Record(record::Args),
    /// Print the records of a range, filtered by kind and type.
    Replay(replay::Args),
    /// Check every checksum and the hash chain; exit 0 only if the log is intact (also
    /// a log shipped to object storage: `--dir s3://BUCKET/PREFIX`).
    Verify(verify::Args),
    /// Print SEQ:HASH of the last record, to check the log against later.
    ///
    /// It checks the log's structure (every segment's header and footer, and that they
    /// continue one another: a missing, foreign or truncated segment fails) and reads the
    /// last segment in full; it does not read the records of the other segments, so
    /// damage inside one of them passes. `blackbox verify` checks every record.
    Digest(digest::Args),
    /// Print the log's size, time span and per-kind totals.
    Stats(stats::Args),
    /// The working memory, knowledge base and accounting totals at a point in time.
    State(state::Args),
    /// Read and revise the knowledge base: versioned facts with provenance.
    Kb(kb::Args),
    /// Export events as JSON lines, Parquet or MCAP, with a manifest beside the output.
    Export(export::Args),
    /// Import an MCAP recording into a log through a retention policy.
    Import(import::Args),
    /// Write an incident, a window or the whole log as one self-contained HTML page.
    Report(report::Args),
    /// Record a simulated robot run with an incident into a new log, then review it.
    Demo(demo::Args),
    /// Release an incident: a recorder under a disk budget stops keeping its window.
    Release(release::Args),
    /// Ship the sealed segments to object storage (S3 or a directory) with a manifest.
    Ship(ship::Args),
    /// The logs of a fleet shipped under one prefix: `fleet verify` checks every one.
    Fleet(fleet::Args),
}

/// Runs the command line and maps every outcome to an exit code: 0 on success, 1 on a
/// failure, 2 on a usage error. Errors go to stderr in one line.
pub fn main() -> ExitCode {
    // Everything the command creates (logs, knowledge-base views, exports, temporary
    // files) is private to its owner, whatever umask it inherits.
    // SAFETY: umask only sets this process's file-mode creation mask; no thread has
    // started yet to race with it.
    unsafe { libc::umask(0o077) };
    // Every read command takes a shipped log's URL as `--dir`.
    blackbox_ship::install_url_reader();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return usage_error(&e),
    };
    let result = match cli.command {
        Command::Record(args) => record::run(args),
        Command::Replay(args) => replay::run(args),
        Command::Verify(args) => verify::run(args),
        Command::Digest(args) => digest::run(args),
        Command::Release(args) => release::run(args),
        Command::Stats(args) => stats::run(args),
        Command::State(args) => state::run(args),
        Command::Kb(args) => kb::run(args),
        Command::Export(args) => export::run(args),
        Command::Import(args) => import::run(args),
        Command::Report(args) => report::run(args),
        Command::Demo(args) => demo::run(args),
        Command::Ship(args) => ship::run(args),
        Command::Fleet(args) => fleet::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.quiet => ExitCode::SUCCESS,
        Err(e) if e.message.is_empty() => ExitCode::from(e.code),
        Err(e) => {
            // Nothing more can be done if stderr is gone.
            let _ = writeln!(io::stderr().lock(), "blackbox: {}", e.message);
            ExitCode::from(e.code)
        }
    }
}

/// Prints clap's help and version as clap does, and a usage error as one line.
fn usage_error(e: &clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    match e.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            let _ = e.print();
            ExitCode::SUCCESS
        }
        ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            let _ = e.print();
            ExitCode::from(2)
        }
        _ => {
            let _ = writeln!(
                io::stderr().lock(),
                "blackbox: {}; run `blackbox help` or `blackbox SUBCOMMAND --help` for usage",
                usage_sentence(e)
            );
            ExitCode::from(2)
        }
    }
}

/// A usage error in one sentence of ours, naming the option and the value, without
/// clap's tips and usage block.
fn usage_sentence(e: &clap::Error) -> String {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    let ctx = |k: ContextKind| -> Option<String> {
        match e.get(k)? {
            ContextValue::String(s) => Some(s.clone()),
            ContextValue::Strings(v) => Some(v.join(", ")),
            ContextValue::StyledStr(s) => Some(s.to_string()),
            ContextValue::StyledStrs(v) => Some(
                v.iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", "),
            ),
            ContextValue::Number(n) => Some(n.to_string()),
            _ => None,
        }
    };
    // `--since <T>` is named `--since`.
    let option = |text: String| {
        text.split_whitespace()
            .next()
            .unwrap_or_default()
            .to_owned()
    };
    let arg = ctx(ContextKind::InvalidArg).map(option);
    let value = ctx(ContextKind::InvalidValue);
    match (e.kind(), arg, value) {
        (ErrorKind::ValueValidation, Some(arg), Some(value)) => {
            let why = match std::error::Error::source(e) {
                // The standard library's number parser: say what is expected instead.
                Some(s) if s.is::<std::num::ParseIntError>() => {
                    "expected a whole number, 0 or more".to_owned()
                }
                Some(s) => s.to_string(),
                None => "it is not valid".to_owned(),
            };
            format!("invalid value {} for {arg}: {why}", Shown(&value))
        }
        // An option that takes any text (a path) has no list of valid values.
        (ErrorKind::InvalidValue, Some(arg), Some(value)) => {
            match ctx(ContextKind::ValidValue).filter(|valid| !valid.is_empty()) {
                Some(valid) if value.is_empty() => {
                    format!("{arg} needs a value: one of {valid}")
                }
                Some(valid) => format!(
                    "invalid value {} for {arg}: expected one of {valid}",
                    Shown(&value)
                ),
                None if value.is_empty() => format!("{arg} needs a value"),
                None => format!("invalid value {} for {arg}", Shown(&value)),
            }
        }
        (ErrorKind::UnknownArgument, Some(arg), _) => format!("unknown option {arg}"),
        (ErrorKind::InvalidSubcommand, _, _) => match ctx(ContextKind::InvalidSubcommand) {
            Some(name) => format!("unknown subcommand {}", Shown(&name)),
            None => "unknown subcommand".to_owned(),
        },
        (ErrorKind::ArgumentConflict, Some(arg), _) => match ctx(ContextKind::PriorArg) {
            Some(prior) => format!("{arg} cannot be given with {}", option(prior)),
            None => format!("{arg} cannot be given with the options before it"),
        },
        (ErrorKind::MissingRequiredArgument, Some(arg), _) => {
            let missing: Vec<String> = arg_list(&ctx(ContextKind::InvalidArg).unwrap_or(arg));
            format!("missing {}", missing.join(" and "))
        }
        (ErrorKind::MissingSubcommand, _, _) => "a subcommand is missing".to_owned(),
        (ErrorKind::TooManyValues | ErrorKind::WrongNumberOfValues, Some(arg), _) => {
            format!("{arg} takes one value")
        }
        _ => {
            // Anything else: clap's first line, without its "error: " prefix.
            let text = e.to_string();
            let first = text.lines().map(str::trim).find(|l| !l.is_empty());
            first
                .map(|l| l.strip_prefix("error: ").unwrap_or(l).to_owned())
                .unwrap_or_else(|| "invalid arguments".to_owned())
        }
    }
}

/// The options a "missing" error names, each as `--name`.
fn arg_list(text: &str) -> Vec<String> {
    text.split(", ")
        .map(|a| a.split_whitespace().next().unwrap_or(a).to_owned())
        .collect()
}

/// A failure: one sentence that says what happened and what to do, and the exit code.
#[derive(Debug)]
pub struct CliError {
    message: String,
    code: u8,
    /// Stdout was closed by its reader (`| head`): stop quietly, as a success.
    quiet: bool,
}

impl CliError {
    /// A failure with exit code 1.
    pub fn new(message: impl Into<String>) -> CliError {
        CliError {
            message: message.into(),
            code: 1,
            quiet: false,
        }
    }

    /// A salvage that read everything intact and reported what was lost: exit code 3,
    /// nothing more on stderr.
    pub fn salvaged() -> CliError {
        CliError {
            message: String::new(),
            code: 3,
            quiet: false,
        }
    }

    /// A failure already reported (on stdout as JSON, or on stderr): exit code 1, nothing
    /// more.
    pub fn reported() -> CliError {
        CliError {
            message: String::new(),
            code: 1,
            quiet: false,
        }
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl From<Error> for CliError {
    fn from(e: Error) -> CliError {
        CliError::new(describe(&e))
    }
}

impl From<blackbox::kb::Error> for CliError {
    fn from(e: blackbox::kb::Error) -> CliError {
        CliError::from(Error::from(e))
    }
}

impl From<blackbox::Error> for CliError {
    fn from(e: blackbox::Error) -> CliError {
        match e {
            blackbox::Error::Log(log) | blackbox::Error::Writer(log) => {
                // The log's error with its advice, without the recorder's wrapping when
                // the log itself is what failed.
                CliError::new(describe_log(&log))
            }
            blackbox::Error::Policy(p) => CliError::new(format!("{p}: fix the policy file")),
            other => CliError::new(other.to_string()),
        }
    }
}

/// The error with advice on what to do.
pub fn describe(e: &Error) -> String {
    match e {
        Error::NoSuchDir { .. } => {
            format!("{e}: check --dir (only `blackbox record` creates a log)")
        }
        Error::Log(log) => describe_log(log),
        Error::Decode { .. } => format!(
            "{e}: the record is intact in the log but this version of blackbox cannot read it"
        ),
        Error::InvalidKey { .. } => {
            format!("{e}: give a file holding the 32-byte key, raw or as 64 hex digits")
        }
        Error::Io { .. } => format!("{e}: check the path and its permissions"),
        Error::UnsafeOutput { .. } => format!("{e}: choose another --out"),
        Error::ExportChanged { .. } => {
            format!("{e}: it changed after the export; export it again from the log")
        }
        Error::Manifest { .. } => {
            format!("{e}: give the data file or the FILE.manifest.json that export wrote")
        }
        Error::Kb(blackbox::kb::Error::View { .. }) => {
            format!("{e}; `blackbox kb rebuild` rebuilds it")
        }
        Error::Kb(blackbox::kb::Error::BeforeHistory {
            at: blackbox::kb::AsOf::Time(t),
            history_from,
        }) => format!(
            "{} is before the knowledge base's history: it is complete from version {history_from} only (the log was pruned before it, and the knowledge base was rebuilt from its snapshot at version {history_from})",
            blackbox_replay::format_time(*t)
        ),
        _ => e.to_string(),
    }
}

/// A log error with advice on what to do.
pub fn describe_log(e: &blackbox_log::Error) -> String {
    use blackbox_log::Error as L;
    match e {
        L::NotALog { .. } => {
            format!("{e}: point --dir at a log directory written by `blackbox record`")
        }
        L::Locked { .. } => format!(
            "{e}: stop that writer or wait for it to finish, then try again (one writer per log)"
        ),
        L::Corrupt(c) if blackbox_log::source::is_url(&c.segment) => {
            // A shipped segment is `URL/segments/NAME`.
            let url = c
                .segment
                .parent()
                .and_then(Path::parent)
                .unwrap_or(&c.segment);
            format!(
                "{e}: the shipped log is damaged there; `blackbox verify --dir {}` checks every object against its manifest",
                url.display()
            )
        }
        L::Corrupt(c) => {
            let dir = c.segment.parent().unwrap_or(std::path::Path::new("."));
            format!(
                "{e}: the log is damaged there; keep a copy of the directory for investigation, and {}",
                damage::advice(dir)
            )
        }
        L::KeyRequired { .. } => format!("{e}: pass the log's key with --key-file"),
        L::WrongKey { .. } => {
            format!("{e}: pass the key the log was written with (--key-file)")
        }
        L::NotKeyed { .. } => format!("{e}: leave out --key-file"),
        L::DigestMismatch { .. } => format!(
            "{e}: this log no longer holds what the digest was taken from (records were changed or the tail was cut)"
        ),
        L::InvalidDigest { .. } => {
            format!("{e}: pass the digest as `blackbox digest` printed it")
        }
        L::UnsupportedVersion { .. } => format!("{e}: use a newer blackbox"),
        L::Io { path, .. } if blackbox_log::source::is_url(path) => {
            format!("{e}: check the URL, the network and the store's credentials")
        }
        L::Io { .. } => format!("{e}: check the path, its permissions and free space"),
        L::InvalidOptions { .. } => format!("{e}: change the option"),
        _ => e.to_string(),
    }
}

/// Maps a write error on stdout: a closed pipe ends the command quietly.
pub fn stdout_error(e: io::Error) -> CliError {
    if e.kind() == io::ErrorKind::BrokenPipe {
        CliError {
            message: String::new(),
            code: 0,
            quiet: true,
        }
    } else {
        CliError::new(format!("cannot write to stdout: {e}"))
    }
}

/// Writes one line to `out`.
pub fn line(out: &mut impl Write, text: impl fmt::Display) -> Result<(), CliError> {
    writeln!(out, "{text}").map_err(stdout_error)
}

/// Refuses a shipped log's URL as the `--dir` of a command that writes to the log or
/// needs it on this machine (`what` names the command).
pub fn local_only(dir: &Path, what: &str) -> Result<(), CliError> {
    if blackbox_log::source::is_url(dir) {
        return Err(CliError::new(format!(
            "{what} needs a log on this machine, and {} is a shipped log: `verify`, `replay`, `state`, `stats`, `digest`, `kb get`, `kb history` and `export` (but `export --check`) read it where it lies",
            dir.display()
        )));
    }
    Ok(())
}

/// A progress bar on stderr when stderr is a terminal, hidden otherwise.
pub fn progress_bar(len: Option<u64>, message: String) -> indicatif::ProgressBar {
    if !io::stderr().is_terminal() {
        return indicatif::ProgressBar::hidden();
    }
    let bar = match len {
        Some(len) => {
            let bar = indicatif::ProgressBar::new(len);
            if let Ok(style) =
                indicatif::ProgressStyle::with_template("{msg} [{bar:40}] {pos}/{len} ({eta} left)")
            {
                bar.set_style(style.progress_chars("=> "));
            }
            bar
        }
        None => {
            let bar = indicatif::ProgressBar::new_spinner();
            bar.enable_steady_tick(std::time::Duration::from_millis(120));
            bar
        }
    };
    bar.set_message(message);
    bar
}

/// The chain key file this run was given and its key, once read: a damage report is
/// written far from where its subcommand read the key (often from an error alone), and
/// both its survey of the log and every command it advises must use the key.
static KEY_FILE: OnceLock<(PathBuf, blackbox::ChainKey)> = OnceLock::new();

/// Reads the key file, if one was given, and keeps it for damage reports
/// ([`given_key`]).
pub fn key_from(path: Option<&Path>) -> Result<Option<blackbox::ChainKey>, CliError> {
    let key = path
        .map(blackbox_replay::read_key_file)
        .transpose()
        .map_err(CliError::from)?;
    if let (Some(path), Some(key)) = (path, &key) {
        // A run reads one key file: a second read of it finds it already kept.
        let _ = KEY_FILE.set((path.to_owned(), key.clone()));
    }
    Ok(key)
}

/// The key file this run was given (`--key-file`) and its key, once read.
pub fn given_key() -> Option<&'static (PathBuf, blackbox::ChainKey)> {
    KEY_FILE.get()
}

/// Warns on stderr that a keyed log is read without its key.
pub fn warn_unverified(dir: &Path) {
    let _ = writeln!(
        io::stderr().lock(),
        "blackbox: warning: log {} is keyed and no --key-file was given: records are checked against their checksums, not the hash chain",
        dir.display()
    );
}

/// The `--dir` every subcommand takes.
#[derive(Debug, Clone, clap::Args)]
pub struct DirArg {
    /// The log directory.
    #[arg(long, value_name = "DIR")]
    pub dir: PathBuf,
}

/// Value parser: a time (RFC 3339 or integer ns since the epoch).
pub fn time_arg(text: &str) -> Result<u64, String> {
    blackbox_replay::parse_time(text).map_err(|e| match e {
        Error::InvalidTime { reason, .. } => reason,
        other => other.to_string(),
    })
}

/// Value parser: a size (`64MiB`, `4096`).
pub fn size_arg(text: &str) -> Result<u64, String> {
    blackbox_replay::parse_size(text).map_err(|e| match e {
        Error::InvalidSize { reason, .. } => reason,
        other => other.to_string(),
    })
}

/// Value parser: a kind glob, checked as the policy checks its globs.
pub fn glob_arg(text: &str) -> Result<String, String> {
    blackbox_replay::Query::new()
        .kind(text)
        .map(|_| text.to_owned())
        .map_err(|e| match e {
            Error::InvalidGlob { reason, .. } => reason,
            other => other.to_string(),
        })
}

/// The record types `--type` takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum TypeArg {
    /// Events.
    Event,
    /// Summary windows.
    Summary,
    /// Per-kind running totals.
    Accounting,
    /// Working-memory checkpoints.
    Checkpoint,
    /// Knowledge-base commits.
    Kb,
    /// Incident markers.
    Incident,
    /// Interned names (hidden unless asked for).
    Dictionary,
    /// Torn tails cut when the log was opened after a crash.
    Recovery,
    /// Working-memory changes (deltas): the keys set and removed at one time.
    Working,
    /// The retention policy in force (hidden unless asked for).
    Policy,
    /// Knowledge-base snapshots (hidden unless asked for).
    KbSnapshot,
    /// Knowledge-base commits carried in segment preambles (hidden unless asked for).
    KbCarried,
    /// Segments the disk budget removed: which seqs, how many bytes, why.
    Prune,
}

impl From<TypeArg> for blackbox_replay::RecordType {
    fn from(t: TypeArg) -> Self {
        use blackbox_replay::RecordType as R;
        match t {
            TypeArg::Event => R::Event,
            TypeArg::Summary => R::Summary,
            TypeArg::Accounting => R::Accounting,
            TypeArg::Checkpoint => R::Checkpoint,
            TypeArg::Kb => R::Kb,
            TypeArg::Incident => R::Incident,
            TypeArg::Dictionary => R::Dictionary,
            TypeArg::Recovery => R::Recovery,
            TypeArg::Working => R::Working,
            TypeArg::Policy => R::Policy,
            TypeArg::KbSnapshot => R::KbSnapshot,
            TypeArg::KbCarried => R::KbCarried,
            TypeArg::Prune => R::Prune,
        }
    }
}

/// A byte count for people: `5.1 MiB`.
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::Cli;

    /// Every option of `cmd` and its subcommands, with the path of subcommands to it.
    fn options(cmd: &clap::Command, path: &str, out: &mut Vec<(String, clap::Arg)>) {
        for arg in cmd.get_arguments() {
            out.push((path.to_owned(), arg.clone()));
        }
        for sub in cmd.get_subcommands() {
            options(sub, &format!("{path} {}", sub.get_name()), out);
        }
    }

    /// Whether `text` is accepted as the value of `arg` (its parser, and whether it
    /// takes a value that starts with a hyphen), in `--x TEXT` form.
    fn accepts(arg: &clap::Arg, text: &str) -> bool {
        let alone = clap::Arg::new("x")
            .long("x")
            .value_parser(arg.get_value_parser().clone())
            .allow_hyphen_values(arg.is_allow_hyphen_values_set());
        clap::Command::new("t")
            .arg(alone)
            .try_get_matches_from(["t", "--x", text])
            .is_ok()
    }

    /// Whether `arg` takes a time: an option whose parser accepts `now` and RFC 3339
    /// and refuses words (a text option accepts anything).
    fn takes_a_time(arg: &clap::Arg) -> bool {
        !arg.is_positional()
            && arg.get_action().takes_values()
            && accepts(arg, "now")
            && accepts(arg, "2026-11-30T12:00:00Z")
            && !accepts(arg, "yesterday")
    }

    #[test]
    fn every_option_that_takes_a_time_takes_a_relative_one() {
        // `state --at -5s` and `kb get --at -5s` were refused ("unknown option -5"): the
        // parser accepted relative times, but the option did not take a value that
        // starts with a hyphen, and its help named only the absolute forms.
        let cmd = Cli::command();
        let mut all = Vec::new();
        options(&cmd, "blackbox", &mut all);
        let times: Vec<&(String, clap::Arg)> =
            all.iter().filter(|(_, arg)| takes_a_time(arg)).collect();
        let names: Vec<String> = times
            .iter()
            .map(|(path, arg)| format!("{path} --{}", arg.get_id()))
            .collect();
        // The oracle: the options the command documents as times.
        for expected in [
            "blackbox replay --since",
            "blackbox replay --until",
            "blackbox export --since",
            "blackbox export --until",
            "blackbox state --at",
            "blackbox kb get --at",
        ] {
            assert!(names.iter().any(|n| n == expected), "{expected}: {names:?}");
        }
        for (path, arg) in times {
            let name = format!("{path} --{}", arg.get_id());
            assert!(accepts(arg, "-5s"), "{name} refuses -5s");
            let help = arg.get_help().map(ToString::to_string).unwrap_or_default();
            assert!(
                help.contains("now") && help.contains("-5m"),
                "{name}'s help names every form of a time: {help:?}"
            );
        }
    }
}
