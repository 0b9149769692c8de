"""The agent example (`python/examples/agent_incident.py`) runs as a user runs it, and
what it says the agent believed at the failure is what the log holds, as the command
reads it."""

import json
import subprocess
import sys
from pathlib import Path

from conftest import json_lines, run

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "agent_incident.py"


def test_the_agent_example_records_the_failure_as_an_incident_and_explains_its_beliefs(tmp_path, command):
    log_dir = tmp_path / "agent"
    done = subprocess.run([sys.executable, str(EXAMPLE), str(log_dir)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "the agent failed: gripper jammed at 41 N (limit 30 N)" in out
    # The graph's state was checkpointed into the same log: the last checkpoint is the
    # one before the failing step, which a resume would run again.
    assert "its last checkpoint: step 3, next ['act'] (a resume starts there)" in out

    records = json_lines(command, "replay", "--dir", log_dir, "--json")
    events = [r for r in records if r["type"] == "event"]
    (failure,) = [e for e in events if e["kind"] == "agent.failure"]
    incidents = [r for r in records if r["type"] == "incident"]
    assert [i["trigger_seq"] for i in incidents] == [failure["seq"]], incidents
    # The observations the facts cite, found by what they say.
    (shelf,) = [e for e in events if e["kind"] == "observation.camera" and e["payload"]["where"] == "shelf"]
    (table,) = [e for e in events if e["kind"] == "observation.camera" and e["payload"]["where"] == "table"]
    (scale,) = [e for e in events if e["kind"] == "observation.scale"]

    state = json.loads(run(command, "state", "--dir", log_dir, "--at", failure["ts_ns"], "--json").stdout)
    location = state["kb"]["cup.location"]
    assert (location["value"], location["provenance"]) == ("shelf", [shelf["seq"]])
    assert [r["value"] for r in location["refuted"]] == ["table"]
    mass = state["kb"]["cup.mass_kg"]
    assert (mass["value"], mass["provenance"]) == (0.31, [scale["seq"]])
    assert state["working"]["next_tool"] == {"tool": "grasp", "args": {"object": "cup", "force_n": 41}}

    # The example's own review says the same.
    assert f"failure at seq {failure['seq']}" in out
    assert "cup.location = shelf (confidence 0.9, confirmed" in out
    assert f"because seq {shelf['seq']}: observation.camera" in out
    assert f"not table, because seq {table['seq']}: observation.camera" in out
    assert f"because seq {scale['seq']}: observation.scale" in out
    # Nothing the agent did before the failure is missing: every tool call up to it.
    calls = [e["payload"]["tool"] for e in events if e["kind"] == "tool.call"]
    assert calls == ["look", "weigh", "look", "grasp"]
    # The graph's checkpoints are in the log, and the failing node's error, which the
    # saver records as a write of its own kind.
    checkpoints = [e for e in events if e["kind"] == "langgraph.checkpoint"]
    assert len(checkpoints) >= 8, len(checkpoints)
    assert len([e for e in events if e["kind"] == "langgraph.error"]) == 1
