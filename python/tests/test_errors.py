"""Errors are exceptions of a small hierarchy, with the command's own sentence: the
command's stderr on the same fault is the oracle."""

import subprocess
from datetime import datetime

import blackbox
import pytest

from conftest import run


def test_the_hierarchy():
    for cls in (blackbox.LogDamaged, blackbox.Locked, blackbox.InvalidInput):
        assert issubclass(cls, blackbox.BlackboxError)
    assert issubclass(blackbox.BlackboxError, Exception)


def test_a_locked_directory_raises_locked_as_the_command_reports_it(log_dir, command):
    with blackbox.Recorder(log_dir) as rec:
        rec.record("a.b")
        with pytest.raises(blackbox.Locked) as locked:
            blackbox.Recorder(log_dir)
        done = subprocess.run([command, "record", "--dir", str(log_dir)], input="",
                              capture_output=True, text=True)
        assert done.returncode != 0
        assert str(locked.value) in done.stderr, (str(locked.value), done.stderr)
        assert "lock" in str(locked.value)
    # Closed, the directory opens again.
    with blackbox.Recorder(log_dir) as rec:
        rec.record("a.b")


def damage(log_dir):
    """Flips one byte in the middle of the largest segment file."""
    segments = sorted(log_dir.glob("*.bbx"), key=lambda p: p.stat().st_size)
    assert segments, list(log_dir.iterdir())
    data = bytearray(segments[-1].read_bytes())
    data[len(data) // 2] ^= 0xFF
    segments[-1].write_bytes(bytes(data))


def test_a_damaged_log_raises_log_damaged_as_the_command_reports_it(log_dir, command):
    with blackbox.Recorder(log_dir) as rec:
        for i in range(2000):
            rec.record("sensor.reading", {"i": i, "text": f"reading number {i} " * 4})
    intact = blackbox.verify(log_dir)
    damage(log_dir)
    with pytest.raises(blackbox.LogDamaged) as damaged:
        blackbox.verify(log_dir)
    done = run(command, "verify", "--dir", log_dir, check=False)
    assert done.returncode != 0
    assert str(damaged.value) in done.stderr, (str(damaged.value), done.stderr)
    with pytest.raises(blackbox.LogDamaged):
        list(blackbox.replay(log_dir))
    assert intact["intact"] is True


def test_bad_input_raises_invalid_input(log_dir, command):
    with blackbox.Recorder(log_dir) as rec:
        with pytest.raises(blackbox.InvalidInput) as bad_kind:
            rec.record("Not A Kind!")
        with pytest.raises(blackbox.InvalidInput, match="NaN"):
            rec.record("a.b", {"x": float("nan")})
        with pytest.raises(blackbox.InvalidInput, match="object"):
            rec.record("a.b", {"x": object()})
        with pytest.raises(blackbox.InvalidInput, match="keys are strings"):
            rec.record("a.b", {1: "x"})
        with pytest.raises(blackbox.InvalidInput, match="values are numbers"):
            rec.record("a.b", values={"v": "high"})
        with pytest.raises(blackbox.InvalidInput, match="64 bits"):
            rec.record("a.b", {"x": 2**70})
        deep = []
        deep.append(deep)
        with pytest.raises(blackbox.InvalidInput, match="nested"):
            rec.record("a.b", deep)
        with pytest.raises(blackbox.InvalidInput, match="time zone"):
            rec.record("a.b", event_time_ns=datetime(2026, 1, 1))
        with pytest.raises(blackbox.InvalidInput):
            rec.working["x"] = {1, 2}
        rec.record("a.b")
    done = subprocess.run([command, "record", "--dir", str(log_dir)],
                          input='{"kind": "Not A Kind!"}\n', capture_output=True, text=True)
    assert done.returncode != 0
    assert str(bad_kind.value) in done.stderr, (str(bad_kind.value), done.stderr)
    with pytest.raises(blackbox.InvalidInput) as bad_time:
        blackbox.replay(log_dir, since="yesterday")
    assert "invalid time \"yesterday\"" in str(bad_time.value)
    with pytest.raises(blackbox.InvalidInput, match="unknown record type"):
        blackbox.replay(log_dir, types=["events"])
    with pytest.raises(blackbox.InvalidInput, match="does not exist"):
        blackbox.replay(log_dir / "missing")
    with pytest.raises(blackbox.InvalidInput, match="durability"):
        blackbox.Recorder(log_dir, durability="often")
    with pytest.raises(blackbox.InvalidInput):
        blackbox.Recorder(log_dir, policy={"default": "sometimes"})
    with pytest.raises(blackbox.InvalidInput):
        blackbox.verify(log_dir, "not-a-digest")
    # Nothing refused was recorded.
    assert [e["kind"] for e in blackbox.replay(log_dir, types="event")] == ["a.b"]


def test_a_string_utf8_cannot_hold_is_refused_by_name(log_dir):
    with blackbox.Recorder(log_dir) as rec:
        with pytest.raises(blackbox.InvalidInput, match="payload holds a string with a lone surrogate"):
            rec.record("a.b", {"x": "\ud800"})
        with pytest.raises(blackbox.InvalidInput, match="payload holds a string with a lone surrogate"):
            rec.record("a.b", {"\udfff": 1})
        rec.record("a.b", {"x": "é ✓"})
    assert [e["payload"] for e in blackbox.replay(log_dir, types="event")] == [{"x": "é ✓"}]
