//! The Python package (`python/`): installed with `pip install ./python` into the tests'
//! Python environment (`scripts/python-env`), then its pytest suite (`python/tests/`)
//! run against it, with this build's `blackbox` command as the oracle the package's
//! readers are checked against.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

/// The workspace's `target/` directory: where this test binary was built.
fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap_or_else(|e| panic!("this test's path: {e}"));
    // target/<profile>/deps/<test>
    exe.ancestors()
        .nth(3)
        .unwrap_or_else(|| panic!("{} is not under target/", exe.display()))
        .to_owned()
}

fn output_text(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn the_python_package_installs_and_passes_its_tests() {
    let python = common::python::python();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let target = target_dir();
    // `pip install ./python` builds the extension in release mode (maturin, from the
    // pinned environment: no build isolation, so nothing is fetched), in a target
    // directory of its own: the one of this `cargo test` is locked while it runs.
    // Cargo rebuilds what changed; installs take turns on a lock.
    let lock = target.join("python-package.lock");
    // maturin's build hook runs the `maturin` beside the interpreter: put it first on
    // the PATH (without build isolation, pip does not).
    let bin = python
        .parent()
        .unwrap_or_else(|| panic!("{} has no directory", python.display()));
    let path = std::env::join_paths(std::iter::once(bin.to_owned()).chain(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    )))
    .unwrap_or_else(|e| panic!("a PATH with {}: {e}", bin.display()));
    let install = Command::new("flock")
        .arg(&lock)
        .arg(python)
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--no-build-isolation",
            "--no-deps",
            "--force-reinstall",
        ])
        .arg(root.join("python"))
        .env("CARGO_TARGET_DIR", target.join("python-build"))
        .env("PATH", path)
        .output()
        .unwrap_or_else(|e| panic!("run flock and pip: {e}"));
    assert!(
        install.status.success(),
        "pip install ./python failed: {}",
        output_text(&install)
    );
    let tests = root.join("python/tests");
    let run = Command::new(python)
        .args(["-m", "pytest", "-q", "-p", "no:cacheprovider"])
        .arg(&tests)
        .current_dir(&tests)
        .env("BLACKBOX_BIN", env!("CARGO_BIN_EXE_blackbox"))
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .unwrap_or_else(|e| panic!("run pytest: {e}"));
    assert!(
        run.status.success(),
        "the Python package's tests failed:\n{}",
        output_text(&run)
    );
    let summary = String::from_utf8_lossy(&run.stdout);
    assert!(
        summary.contains(" passed"),
        "pytest ran no test:\n{summary}"
    );
}
