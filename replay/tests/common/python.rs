//! The Python the tests read exports with: the readers users have (pyarrow, DuckDB,
//! pandas, mcap), in the virtual environment `scripts/python-env` creates.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

/// The interpreter of the tests' Python environment, created on first use (a minute,
/// once: `scripts/python-env` installs `scripts/python-requirements.txt`).
/// `BLACKBOX_PYTHON` names another interpreter with those packages.
pub fn python() -> &'static Path {
    static PYTHON: OnceLock<PathBuf> = OnceLock::new();
    PYTHON.get_or_init(|| {
        if let Some(python) = std::env::var_os("BLACKBOX_PYTHON") {
            return PathBuf::from(python);
        }
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/python-env");
        let out = Command::new(&script)
            .output()
            .unwrap_or_else(|e| panic!("run {}: {e}", script.display()));
        assert!(
            out.status.success(),
            "{} failed (it needs python3 with venv, and PyPI): {}",
            script.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
    })
}

/// Runs the Python script `replay/tests/python/NAME` with `args`, and returns its
/// standard output; panics with its standard error when it fails.
pub fn run(name: &str, args: &[&dyn AsRef<std::ffi::OsStr>]) -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/python")
        .join(name);
    let out: Output = Command::new(python())
        .arg(&script)
        .args(args.iter().map(|a| a.as_ref()))
        .output()
        .unwrap_or_else(|e| panic!("run {}: {e}", script.display()));
    assert!(
        out.status.success(),
        "{} failed: {}{}",
        script.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}
