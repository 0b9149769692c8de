"""Recording from Python and reading back: what was recorded (the test's own list) and
what the command prints (`blackbox replay --json`) are the oracles."""

from datetime import datetime, timedelta, timezone

import blackbox
import pytest

from conftest import json_lines


def write_events(log_dir):
    """Records a known set of events; returns them as (kind, payload, values, source,
    event_time_ns, how the payload reads back, its encoding)."""
    sent = [
        ("tool.call", {"tool": "search", "q": "cups", "n": [1, 2.5, None, True]}, None, "agent", None),
        ("tool.result", "a JSON string", {"ms": 12.5}, None, 1_700_000_000_123_456_789),
        ("sensor.raw", b"\x00\x01\xfe\xff", {"a": 1.0, "b": -2.0}, "wrist", None),
        ("decision.go", None, None, None, None),
        ("tool.call", [1, "two", {"three": 3}], None, None, None),
        ("tool.call", 42, None, None, None),
    ]
    with blackbox.Recorder(log_dir) as rec:
        for kind, payload, values, source, t in sent:
            rec.record(kind, payload, values=values, source=source, event_time_ns=t)
    return sent


def test_events_read_back_as_recorded_and_as_the_command_prints_them(log_dir, command):
    sent = write_events(log_dir)
    events = list(blackbox.replay(log_dir, types="event"))
    assert len(events) == len(sent)
    for got, (kind, payload, values, source, t) in zip(events, sent):
        assert got["type"] == "event"
        assert got["kind"] == kind
        assert got["source"] == source
        assert got["values"] == (values or {})
        assert got["event_time_ns"] == t
        if payload is None:
            assert (got["payload"], got["encoding"]) == (None, "none")
        elif isinstance(payload, bytes):
            assert (got["payload"], got["encoding"]) == (payload.hex(), "raw")
        else:
            assert (got["payload"], got["encoding"]) == (payload, "json")
    # Every record, of every type, is the object the command prints.
    ours = list(blackbox.replay(log_dir))
    theirs = json_lines(command, "replay", "--dir", log_dir, "--json")
    assert ours == theirs
    assert {r["type"] for r in ours} >= {"event", "accounting", "checkpoint"}


def test_kind_and_type_filters_match_the_command(log_dir, command):
    write_events(log_dir)
    ours = list(blackbox.replay(log_dir, kind="tool.*"))
    assert [r["kind"] for r in ours] == ["tool.call", "tool.result", "tool.call", "tool.call"]
    assert ours == json_lines(command, "replay", "--dir", log_dir, "--json", "--kind", "tool.*")
    both = list(blackbox.replay(log_dir, kind=["sensor.*", "decision.*"]))
    assert [r["kind"] for r in both] == ["sensor.raw", "decision.go"]
    excluded = list(blackbox.replay(log_dir, kind=["*", "!tool.*"], types=["event"]))
    assert [r["kind"] for r in excluded] == ["sensor.raw", "decision.go"]
    checkpoints = list(blackbox.replay(log_dir, types=["checkpoint"]))
    assert checkpoints and all(r["type"] == "checkpoint" for r in checkpoints)
    assert checkpoints == json_lines(command, "replay", "--dir", log_dir, "--json",
                                     "--type", "checkpoint")


def test_times_are_taken_as_ns_iso_strings_and_datetimes(log_dir, command):
    with blackbox.Recorder(log_dir) as rec:
        seqs = [rec.record_evidence("step.n", {"i": i}) for i in range(20)]
    events = list(blackbox.replay(log_dir, types="event"))
    assert [e["seq"] for e in events] == seqs
    middle = events[10]
    t = middle["ts_ns"]
    expected = [e for e in events if e["ts_ns"] >= t]
    assert list(blackbox.replay(log_dir, since=t, types="event")) == expected
    assert list(blackbox.replay(log_dir, since=middle["ts"], types="event")) == expected
    assert expected == json_lines(command, "replay", "--dir", log_dir, "--json",
                                  "--type", "event", "--since", t)
    before = [e for e in events if e["ts_ns"] < t]
    assert list(blackbox.replay(log_dir, until=t - 1, types="event")) == before
    # A datetime holds microseconds: hand-computed nanoseconds.
    micros = t // 1000
    dt = datetime(1970, 1, 1, tzinfo=timezone.utc) + timedelta(microseconds=micros)
    assert blackbox.to_ns(dt) == micros * 1000
    assert list(blackbox.replay(log_dir, since=dt, types="event")) == [
        e for e in events if e["ts_ns"] >= micros * 1000]
    plus_one = dt.astimezone(timezone(timedelta(hours=1)))
    assert blackbox.to_ns(plus_one) == micros * 1000
    assert blackbox.to_ns("1970-01-01T00:00:01.5Z") == 1_500_000_000
    # 2026-11-30T12:00:00Z: 20787 days after the epoch, then 12 hours.
    assert blackbox.to_ns("2026-11-30T13:00:00+01:00") == (20787 * 86400 + 12 * 3600) * 10**9
    assert blackbox.to_ns(12345) == 12345


def test_event_time_accepts_every_time_form(log_dir):
    dt = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=timezone.utc)
    with blackbox.Recorder(log_dir) as rec:
        rec.record("a.b", event_time_ns=dt)
        rec.record("a.b", event_time_ns="2026-01-02T03:04:05.678901234Z")
        rec.record("a.b", event_time_ns=7)
    got = [e["event_time_ns"] for e in blackbox.replay(log_dir, types="event")]
    base = 1_767_323_045 * 10**9  # 2026-01-02T03:04:05Z, by hand: 20455 days + 3h4m5s
    assert base == (20455 * 86400 + 3 * 3600 + 4 * 60 + 5) * 10**9
    assert got == [base + 678_901_000, base + 678_901_234, 7]


def test_log_order_and_seq_bounds(log_dir, command):
    write_events(log_dir)
    all_records = list(blackbox.replay(log_dir, log_order=True))
    seqs = [r["seq"] for r in all_records]
    assert seqs == sorted(seqs)
    lo, hi = seqs[2], seqs[-3]
    bounded = list(blackbox.replay(log_dir, from_seq=lo, to_seq=hi, log_order=True))
    assert [r["seq"] for r in bounded] == [s for s in seqs if lo <= s <= hi]
    assert bounded == json_lines(command, "replay", "--dir", log_dir, "--json",
                                 "--log-order", "--from-seq", lo, "--to-seq", hi)
