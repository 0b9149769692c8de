"""The type stubs: checked against the extension module by mypy's stubtest, and used by
mypy --strict on the package's example and benchmark, and on code that misuses the API
(which must be refused)."""

import subprocess
import sys
from pathlib import Path

PYTHON_DIR = Path(__file__).resolve().parent.parent


def mypy(*args, cwd=PYTHON_DIR):
    return subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True, cwd=cwd)


def test_the_stubs_match_the_extension_module():
    done = mypy("mypy.stubtest", "blackbox._blackbox", "--allowlist", "stubtest-allowlist.txt")
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_example_and_the_benchmark_type_check_strictly():
    done = mypy("mypy", "--strict", "--no-incremental", "examples/agent_incident.py", "benches/record_speed.py")
    assert done.returncode == 0, done.stdout + done.stderr


def test_misuse_of_the_api_is_a_type_error(tmp_path):
    (tmp_path / "misuse.py").write_text(
        "import blackbox\n"
        "with blackbox.Recorder('flight', durability='eventually') as rec:\n"
        "    rec.record(42)\n"
        "    n: str = rec.record_evidence('kind')\n"
        "blackbox.export('flight', 'out', format='csv')\n"
    )
    done = mypy("mypy", "--strict", "--no-incremental", "misuse.py", cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    lines = [l for l in done.stdout.splitlines() if ": error:" in l]
    assert sorted(int(l.split(":")[1]) for l in lines) == [2, 3, 4, 5], done.stdout
