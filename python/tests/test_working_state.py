"""The working memory as a mapping, checkpoints, sync, stats and the state at a time:
a dict kept beside it, the records the command prints, and hand counts are the
oracles."""

from collections.abc import MutableMapping

import blackbox
import pytest

from conftest import json_lines


def test_working_memory_is_a_mapping_whose_changes_reach_the_log(log_dir, command):
    model = {}
    with blackbox.Recorder(log_dir) as rec:
        w = rec.working
        assert isinstance(w, MutableMapping)
        assert len(w) == 0 and list(w) == []
        w["goal"] = {"task": "lift", "object": "cup"}
        model["goal"] = {"task": "lift", "object": "cup"}
        w["grip"] = 12.5
        model["grip"] = 12.5
        w["nothing"] = None
        model["nothing"] = None
        assert w["nothing"] is None and "nothing" in w
        with pytest.raises(KeyError):
            w["missing"]
        assert w.get("missing", "default") == "default"
        del w["grip"]
        del model["grip"]
        with pytest.raises(KeyError):
            del w["grip"]
        w.update({"a": [1, 2], "b": "x"})
        model.update({"a": [1, 2], "b": "x"})
        assert w.pop("b") == "x"
        model.pop("b")
        assert dict(w) == model == w.to_dict()
        assert sorted(w) == sorted(model) and len(w) == len(model)
        seq = rec.checkpoint()
        last = rec.sync()
        assert last is not None and last >= seq
    checkpoint = [r for r in blackbox.replay(log_dir, types="checkpoint") if r["seq"] == seq]
    assert [c["working"] for c in checkpoint] == [model]
    changes = list(blackbox.replay(log_dir, types="working"))
    assert changes == json_lines(command, "replay", "--dir", log_dir, "--json",
                                 "--type", "working")
    # Replaying the changes rebuilds the memory.
    rebuilt = {}
    for c in changes:
        rebuilt.update(c["set"])
        for k in c["del"]:
            rebuilt.pop(k, None)
    assert rebuilt == model


def test_the_memory_is_restored_on_open(log_dir):
    with blackbox.Recorder(log_dir) as rec:
        rec.working["kept"] = {"n": 1}
    with blackbox.Recorder(log_dir) as rec:
        assert dict(rec.working) == {"kept": {"n": 1}}
    with blackbox.Recorder(log_dir, restore_working_memory=False) as rec:
        assert dict(rec.working) == {}


def test_state_at_a_time_is_the_commands(log_dir, command):
    with blackbox.Recorder(log_dir) as rec:
        rec.working["step"] = 1
        first = rec.record_evidence("step.done", {"step": 1})
        rec.working["step"] = 2
        second = rec.record_evidence("step.done", {"step": 2})
    events = {e["seq"]: e for e in blackbox.replay(log_dir, types="event")}
    at_first = events[first]["ts_ns"]
    state = blackbox.state_at(log_dir, at_first)
    assert state["working"] == {"step": 1}
    assert state == json_lines(command, "state", "--dir", log_dir, "--json",
                               "--at", at_first)[0]
    later = blackbox.state_at(log_dir, events[second]["ts"])
    assert later["working"] == {"step": 2}
    assert later == json_lines(command, "state", "--dir", log_dir, "--json",
                               "--at", events[second]["ts"])[0]


def test_stats_count_each_tier_by_hand(log_dir, tmp_path):
    policy = {"default": "full", "rules": [{"match": "debug.*", "tier": "drop"}]}
    with blackbox.Recorder(log_dir, policy=policy) as rec:
        for _ in range(3):
            rec.record("debug.tick")
        for _ in range(2):
            rec.record("action.go", {"x": 1})
        stats = rec.stats()
    assert stats["debug.tick"]["seen"] == 3 and stats["debug.tick"]["dropped"] == 3
    assert stats["debug.tick"]["kept"] == 0
    assert stats["action.go"]["seen"] == 2 and stats["action.go"]["kept"] == 2
    assert [e["kind"] for e in blackbox.replay(log_dir, types="event")] == ["action.go"] * 2
    # The same policy from its file.
    path = tmp_path / "policy.toml"
    path.write_text('default = "full"\n\n[[rules]]\nmatch = "debug.*"\ntier = "drop"\n')
    other = tmp_path / "other"
    with blackbox.Recorder(other, policy=path) as rec:
        rec.record("debug.tick")
        rec.record("action.go")
        assert rec.stats()["debug.tick"]["dropped"] == 1
    assert [e["kind"] for e in blackbox.replay(other, types="event")] == ["action.go"]


def test_close_twice_returns_the_same_last_seq(log_dir):
    rec = blackbox.Recorder(log_dir)
    rec.record("a.b")
    last = rec.close()
    assert last is not None
    assert rec.close() == last
    assert max(r["seq"] for r in blackbox.replay(log_dir, log_order=True)) == last
    with pytest.raises(blackbox.BlackboxError, match="closed"):
        rec.record("a.b")


def test_verify_reports_an_intact_log_as_the_command_does(log_dir, command):
    write = blackbox.Recorder(log_dir)
    for i in range(10):
        write.record("a.b", {"i": i})
    write.close()
    report = blackbox.verify(log_dir)
    assert report == json_lines(command, "verify", "--dir", log_dir, "--json")[0]
    assert report["intact"] is True and report["records"] >= 10
    digest = report["last"]
    again = blackbox.verify(log_dir, digest)
    assert again["digest_matched"] is True and again["digest"] == digest
