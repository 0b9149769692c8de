//! The `blackbox` command: record, replay, verify, digest, stats and export a flight
//! log (DESIGN §8). Run `blackbox help` for the subcommands.

mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}
