//! The side-by-side comparison behind the `compare` binary, and what the other
//! benchmark binaries share.
//!
//! - [`workload`]: the events (8 kinds, nanosecond timestamps, a 100-byte binary or
//!   about 100-byte JSON payload), the window query and the [`Tally`](workload::Tally)
//!   that checks every read;
//! - [`harness`]: the [`Contender`](harness::Contender) trait every row implements, and
//!   rounds that alternate the contenders and take medians;
//! - [`report`]: the markdown table and the ratios the targets name;
//! - the rows: [`recorder`] (the `Recorder` and `Replay`, what users run),
//!   [`log_alone`] (`blackbox-log` without the recorder), and [`peers`] (MCAP, SQLite,
//!   fjall, a length-prefixed file, JSON lines).

use std::error::Error;

pub mod harness;
pub mod log_alone;
pub mod peers;
pub mod recorder;
pub mod report;
pub mod workload;

/// Error type used throughout the harness; peers' errors are boxed into it.
pub type BoxError = Box<dyn Error + Send + Sync + 'static>;

/// Result alias used throughout the harness.
pub type Result<T, E = BoxError> = std::result::Result<T, E>;

/// The `main` of a latency or long-run binary: `--help` (`parsed` is `Ok(None)`)
/// prints `usage`; a run's error exits 1 and an argument's 2, each as one line after
/// the binary's `name`.
pub fn main_of<A>(
    name: &str,
    usage: &str,
    parsed: Result<Option<A>>,
    run: impl FnOnce(&A) -> Result<()>,
) -> std::process::ExitCode {
    use std::process::ExitCode;
    match parsed {
        Ok(None) => {
            println!("{usage}");
            ExitCode::SUCCESS
        }
        Ok(Some(args)) => match run(&args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("{name}: {e}");
                ExitCode::FAILURE
            }
        },
        Err(e) => {
            eprintln!("{name}: {e}");
            ExitCode::from(2)
        }
    }
}

/// Builds the release `blackbox` binary next to this one and returns its path.
pub fn build_blackbox() -> Result<std::path::PathBuf> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let status = std::process::Command::new(cargo)
        .args([
            "build",
            "--release",
            "-p",
            "blackbox-replay",
            "--bin",
            "blackbox",
        ])
        .status()?;
    if !status.success() {
        return Err(format!("building the blackbox binary failed: {status}").into());
    }
    let exe = std::env::current_exe()?;
    let path = exe
        .parent()
        .ok_or("this binary has no directory")?
        .join("blackbox");
    if !path.is_file() {
        return Err(format!("no blackbox binary at {}", path.display()).into());
    }
    Ok(path)
}

/// Runs `blackbox ARGV` to its end (stdout and stderr read together, so neither pipe
/// can fill and stall it); returns what it printed and its wall time in seconds, from
/// spawn to exit, or an error with its stderr when it fails.
pub fn run_blackbox(blackbox: &std::path::Path, argv: &[&str]) -> Result<(Vec<u8>, f64)> {
    let started = std::time::Instant::now();
    let out = std::process::Command::new(blackbox).args(argv).output()?;
    let elapsed = started.elapsed().as_secs_f64();
    if !out.status.success() {
        return Err(format!(
            "blackbox {} failed ({}): {}",
            argv.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )
        .into());
    }
    Ok((out.stdout, elapsed))
}
