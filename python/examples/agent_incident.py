"""A scripted LangGraph agent recorded by Blackbox: its tool calls and decisions are
events, what it learns are facts with their evidence, its checkpoints are records of
the same log (`BlackboxSaver`), and a tool failure triggers an incident. Then, from
Python, what it believed at the failure and why.

    python python/examples/agent_incident.py [LOG_DIR]

No model and no network: the "model" is a script of tool calls. Needs the `blackbox`
package with its LangGraph extra and `langgraph` (`pip install "./python[langgraph]" langgraph`).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any, TypedDict

import blackbox
from blackbox.langgraph import BlackboxSaver
from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph

# Every tool call, result and decision is kept; a failure is an incident whose
# pre-roll and post-roll the log keeps at full fidelity whatever the other rules say;
# the agent's chatter is sampled.
POLICY = {
    "default": "full",
    "rules": [{"match": "agent.thought", "tier": "sample", "every": 10}],
    "incident": {"triggers": ["agent.failure"], "preroll": "30s", "postroll": "5s"},
}

# The "model": the tool calls it decides on, in order.
SCRIPT: list[tuple[str, dict[str, Any]]] = [
    ("look", {"where": "table"}),
    ("weigh", {"object": "cup"}),
    ("look", {"where": "shelf"}),
    ("grasp", {"object": "cup", "force_n": 41}),
    ("place", {"object": "cup", "where": "tray"}),
]


class GripperJammed(RuntimeError):
    """The tool that fails."""


class AgentState(TypedDict):
    step: int
    done: bool


def make_graph(rec: blackbox.Recorder) -> StateGraph[AgentState]:
    """The agent: `plan` picks the next tool call, `act` runs it and learns from it."""

    def plan(state: AgentState) -> dict[str, Any]:
        step = state["step"]
        if step >= len(SCRIPT):
            rec.record("decision.stop", {"step": step, "why": "script done"}, source="planner")
            return {"done": True}
        tool, args = SCRIPT[step]
        rec.record("agent.thought", f"step {step}: {tool} next", source="planner")
        rec.record("decision.next_tool", {"step": step, "tool": tool, "args": args}, source="planner")
        rec.working["next_tool"] = {"tool": tool, "args": args}
        return {"done": False}

    def act(state: AgentState) -> dict[str, Any]:
        step = state["step"]
        tool, args = SCRIPT[step]
        rec.record("tool.call", {"step": step, "tool": tool, "args": args}, source="executor")
        try:
            result = TOOLS[tool](rec, args)
        except GripperJammed as e:
            rec.record("tool.error", {"step": step, "tool": tool, "error": str(e)}, source="executor")
            # The trigger: the log keeps the 30 s before it and the 5 s after at full
            # fidelity, and marks the incident.
            rec.record("agent.failure", {"step": step, "tool": tool, "error": str(e)}, source="executor")
            raise
        rec.record("tool.result", {"step": step, "tool": tool, "result": result}, source="executor")
        rec.working["last_result"] = result
        return {"step": step + 1}

    graph = StateGraph(AgentState)
    graph.add_node("plan", plan)
    graph.add_node("act", act)
    graph.add_edge(START, "plan")
    graph.add_conditional_edges("plan", lambda s: END if s["done"] else "act")
    graph.add_edge("act", "plan")
    return graph


def look(rec: blackbox.Recorder, args: dict[str, Any]) -> dict[str, Any]:
    seen = {"table": {"cup": False}, "shelf": {"cup": True}}[args["where"]]
    # An observation the knowledge base will cite: recorded whatever its tier, and its
    # seq returned.
    seq = rec.record_evidence("observation.camera", {"where": args["where"], **seen}, source="camera")
    if seen["cup"]:
        rec.kb.put("cup.location", args["where"], 0.9, [seq], message="seen by the camera")
    else:
        rec.kb.refute("cup.location", args["where"], [seq], message="not there")
    return seen


def weigh(rec: blackbox.Recorder, args: dict[str, Any]) -> dict[str, Any]:
    seq = rec.record_evidence("observation.scale", {"object": args["object"]}, values={"kg": 0.31}, source="scale")
    rec.kb.put("cup.mass_kg", 0.31, 0.8, [seq], message="weighed on the scale")
    return {"kg": 0.31}


def grasp(rec: blackbox.Recorder, args: dict[str, Any]) -> dict[str, Any]:
    rec.record("gripper.force", values={"n": float(args["force_n"])}, source="gripper")
    if args["force_n"] > 30:
        raise GripperJammed(f"gripper jammed at {args['force_n']} N (limit 30 N)")
    return {"held": True}


def place(rec: blackbox.Recorder, args: dict[str, Any]) -> dict[str, Any]:
    return {"placed": args["where"]}


TOOLS = {"look": look, "weigh": weigh, "grasp": grasp, "place": place}


def run(log_dir: Path) -> None:
    with blackbox.Recorder(log_dir, policy=POLICY) as rec:
        rec.working["goal"] = {"task": "put the cup on the tray"}
        # The graph's checkpoints go to the same log, between the events they follow.
        agent = make_graph(rec).compile(checkpointer=BlackboxSaver(rec))
        thread: RunnableConfig = {"configurable": {"thread_id": "cup-1"}}
        try:
            agent.invoke(AgentState(step=0, done=False), thread)
        except GripperJammed as e:
            print(f"the agent failed: {e}")
        last = agent.get_state(thread)
        print(f"its last checkpoint: step {last.values['step']}, next {list(last.next)} (a resume starts there)")


def review(log_dir: Path) -> None:
    """What the agent believed when it failed, and why: from the log alone."""
    failure = next(blackbox.replay(log_dir, kind="agent.failure", types="event"))
    at = failure["ts_ns"]
    print(f"\nfailure at seq {failure['seq']} ({failure['ts']}): {failure['payload']['error']}")
    state = blackbox.state_at(log_dir, at)
    print("working memory then:")
    for key, value in state["working"].items():
        print(f"  {key} = {value}")
    print("facts then, each with the records that justify it:")
    for key, fact in state["kb"].items():
        print(f"  {key} = {fact['value']} (confidence {fact['confidence']}, {fact['status']}, version {fact['version']})")
        for seq in fact["provenance"]:
            print(f"    because {cited(log_dir, seq)}")
        for refuted in fact["refuted"]:
            for seq in refuted["counter_evidence"]:
                print(f"    not {refuted['value']}, because {cited(log_dir, seq)}")
    print(f"\nthe same from the command:\n"
          f"  blackbox replay --dir {log_dir} --around incident\n"
          f"  blackbox state --dir {log_dir} --at {at}\n"
          f"  blackbox kb history cup.location --dir {log_dir}")
    print(f"verify: {blackbox.verify(log_dir)['records']} records, intact")


def cited(log_dir: Path, seq: int) -> str:
    """The record at a seq, in a line."""
    (record,) = blackbox.replay(log_dir, from_seq=seq, to_seq=seq, types="event")
    return f"seq {seq}: {record['kind']} {record['payload']}"


def main() -> None:
    log_dir = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp()) / "agent"
    run(log_dir)
    review(log_dir)


if __name__ == "__main__":
    main()
