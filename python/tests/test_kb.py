"""The knowledge base: outcomes computed by hand from the rules (a stronger claim
supersedes, a refutation rejects), and the command's `kb` output as the oracle."""

import blackbox
import pytest

from conftest import json_lines


def test_claims_refutations_and_history(log_dir, command):
    with blackbox.Recorder(log_dir) as rec:
        kb = rec.kb
        w1 = rec.record_evidence("observation.load", values={"kg": 0.31})
        first = kb.put("cup.mass_kg", 0.31, 0.6, [w1], message="weighed")
        assert first["outcome"] == "created" and first["version"] == 1
        w2 = rec.record_evidence("observation.load", values={"kg": 0.42})
        second = kb.put("cup.mass_kg", 0.42, 0.9, [w2])
        assert second["outcome"] == "superseded" and second["version"] == 2
        now = kb.get("cup.mass_kg")
        assert (now["value"], now["status"]) == (0.42, "contested")
        assert now["rivals"][0]["value"] == 0.31
        assert now["provenance"] == [w2]
        assert kb.get("cup.mass_kg", 1)["value"] == 0.31
        assert kb.get("no.such.key") is None
        assert [f["key"] for f in kb.contradictions()] == ["cup.mass_kg"]
        w3 = rec.record_evidence("observation.load", values={"kg": 0.42})
        refuted = kb.refute("cup.mass_kg", 0.31, [w3], message="re-weighed")
        assert refuted["version"] == 3
        rejected = kb.rejected("cup.mass_kg")
        assert [(r["key"], r["value"]) for r in rejected] == [("cup.mass_kg", 0.31)]
        assert kb.rejected("other.key") == []
        history = kb.history("cup.mass_kg")
        assert [h["version"] for h in history] == [1, 2, 3]
        assert history[0]["fact"]["value"] == 0.31
        w4 = rec.record_evidence("observation.gone")
        kb.retract("cup.mass_kg", [w4], message="cup gone")
        assert kb.get("cup.mass_kg") is None
        kb.revert(2, [w4], message="back")
        assert kb.get("cup.mass_kg")["value"] == 0.42
        history = kb.history("cup.mass_kg")
        rejected_all = kb.rejected()
        fact = kb.get("cup.mass_kg")
        at_one = kb.get("cup.mass_kg", at=history[0]["time_ns"])
    assert at_one["value"] == 0.31
    assert history == json_lines(command, "kb", "history", "cup.mass_kg", "--dir", log_dir, "--json")
    assert rejected_all == json_lines(command, "kb", "rejected", "--dir", log_dir, "--json")
    assert fact == json_lines(command, "kb", "get", "cup.mass_kg", "--dir", log_dir, "--json")[0]
    commits = [r["commit"] for r in blackbox.replay(log_dir, types="kb")]
    assert len(commits) == 5


def test_conditions_and_authors_are_kept(log_dir, command):
    with blackbox.Recorder(log_dir) as rec:
        seen = rec.record_evidence("observation.door")
        rec.kb.put("door.open", True, 0.7, seen, conditions={"floor": 2}, author="planner")
        fact = rec.kb.get("door.open")
    assert fact["conditions"] == {"floor": 2}
    log = json_lines(command, "kb", "log", "--dir", log_dir, "--json")
    assert [(c["author"], c["conditions"]) for c in log] == [("planner", {"floor": 2})]


def test_refused_claims_raise_invalid_input_with_the_commands_message(log_dir, command):
    with blackbox.Recorder(log_dir) as rec:
        seen = rec.record_evidence("observation.x")
        with pytest.raises(blackbox.InvalidInput) as bad_confidence:
            rec.kb.put("a.key", 1, 1.5, [seen])
        with pytest.raises(blackbox.InvalidInput) as no_evidence:
            rec.kb.put("a.key", 1, 0.5, [])
        with pytest.raises(blackbox.InvalidInput) as not_in_log:
            rec.kb.put("a.key", 1, 0.5, [seen + 1000])
        with pytest.raises(blackbox.InvalidInput):
            rec.kb.put("a.key", float("nan"), 0.5, [seen])
        with pytest.raises(blackbox.InvalidInput):
            rec.kb.put("a.key", 1, 0.5, "not seqs")
    from conftest import run
    done = run(command, "kb", "put", "a.key", "1", "--confidence", "1.5", "--evidence", seen,
               "--dir", log_dir, check=False)
    assert done.returncode != 0
    assert str(bad_confidence.value) in done.stderr, (str(bad_confidence.value), done.stderr)
    # The next seq the message names is the log's at the time: the command's session
    # wrote records of its own.
    done = run(command, "kb", "put", "a.key", "1", "--evidence", seen + 1000,
               "--dir", log_dir, check=False)
    assert done.returncode != 0
    stem = str(not_in_log.value).split(" (the next seq")[0]
    assert stem.startswith(f"evidence: seq {seen + 1000} is not in the log")
    assert stem in done.stderr, (stem, done.stderr)
    assert str(no_evidence.value)
