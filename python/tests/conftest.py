"""Fixtures of the package's tests: a fresh log directory, and the `blackbox` command
(BLACKBOX_BIN, set by the test that runs this suite under `cargo test`), whose output
is the oracle the package's readers are checked against."""

import json
import os
import subprocess

import pytest


@pytest.fixture
def log_dir(tmp_path):
    return tmp_path / "flight"


@pytest.fixture(scope="session")
def command():
    path = os.environ.get("BLACKBOX_BIN")
    if not path:
        pytest.fail("BLACKBOX_BIN names no blackbox command: run the suite through "
                    "`cargo test -p blackbox-replay --test python_package`, or set it")
    return path


def run(command, *args, check=True):
    """Runs the command; returns the completed process (text)."""
    done = subprocess.run([command, *map(str, args)], capture_output=True, text=True)
    if check and done.returncode != 0:
        raise AssertionError(f"blackbox {' '.join(map(str, args))} failed: {done.stderr}")
    return done


def json_lines(command, *args):
    """The JSON objects the command prints, one a line."""
    out = run(command, *args).stdout
    return [json.loads(line) for line in out.splitlines() if line.strip()]
