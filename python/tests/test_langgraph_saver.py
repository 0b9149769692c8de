"""blackbox.langgraph.BlackboxSaver against independent oracles: LangGraph's
InMemorySaver given the same operations, answers computed by hand, the log's own
records (blackbox.replay, blackbox.verify), and a real StateGraph resumed after the
saver is reopened."""

import operator
import subprocess
import sys
from pathlib import Path
from typing import Annotated, TypedDict

import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.types import ERROR, INTERRUPT
from langgraph.graph import END, START, StateGraph

import blackbox
from blackbox.langgraph import DEFAULT_CACHE_BYTES, KINDS, BlackboxSaver


def cid(n):
    """Checkpoint ids in the order they are made, as LangGraph's uuid6 ids sort."""
    return f"1f0c0000-0000-6000-8000-{n:012d}"


def checkpoint(n, values):
    cp = empty_checkpoint()
    cp["id"] = cid(n)
    cp["ts"] = f"2026-12-02T00:00:{n:02d}+00:00"
    cp["channel_values"] = dict(values)
    cp["channel_versions"] = {k: n for k in values}
    cp["versions_seen"] = {"node": {k: n for k in values}}
    return cp


def config(thread, ns="", checkpoint_id=None):
    c = {"configurable": {"thread_id": thread, "checkpoint_ns": ns}}
    if checkpoint_id is not None:
        c["configurable"]["checkpoint_id"] = checkpoint_id
    return c


def operations(saver):
    """The same puts, writes and deletion, on any saver."""
    parents = {}
    n = 0
    for thread, ns, count in [("a", "", 4), ("a", "child:1", 2), ("b", "", 2), ("c", "", 3)]:
        for step in range(count):
            n += 1
            values = {"count": step, "msgs": [f"{thread}{ns}-{i}" for i in range(step + 1)]}
            cp = checkpoint(n, values)
            meta = {"source": "loop", "step": step, "run_id": f"run-{thread}-{step % 2}",
                    "score": step * 0.5, "tags": ["x", thread]}
            saver.put(config(thread, ns, parents.get((thread, ns))), cp, meta,
                      dict(cp["channel_versions"]))
            parents[(thread, ns)] = cp["id"]
    # Writes on a's third checkpoint: two tasks, then the same again (ignored), then a
    # new error and interrupt (they replace the ones before).
    at = config("a", "", cid(3))
    saver.put_writes(at, [("msgs", "hi"), ("count", 5)], "task-1", "~__pregel_pull, node")
    saver.put_writes(at, [(ERROR, "boom"), ("msgs", "from 2")], "task-2", "~__pregel_pull, a")
    saver.put_writes(at, [("msgs", "again"), ("count", 6)], "task-1", "~__pregel_pull, node")
    saver.put_writes(at, [(ERROR, "boom 2"), (INTERRUPT, {"ask": "ok?"})], "task-2", "p")
    saver.put_writes(config("a", "child:1", cid(5)), [("count", 1)], "task-3")
    saver.put_writes(config("b", "", cid(8)), [("count", 2)], "task-4")
    saver.delete_thread("b")


def shape(t):
    """A checkpoint tuple as plain data."""
    if t is None:
        return None
    return (t.config["configurable"], t.checkpoint, t.metadata,
            t.parent_config and t.parent_config["configurable"], t.pending_writes)


QUERIES_EXACT = [
    ("get", config("a")),
    ("get", config("a", "child:1")),
    ("get", config("a", "", cid(3))),
    ("get", config("a", "", cid(2))),
    ("get", config("a", "child:1", cid(5))),
    ("get", config("b")),
    ("get", config("b", "", cid(8))),
    ("get", config("c")),
    ("get", config("a", "", cid(99))),
    ("get", config("nobody")),
    ("list", config("a", ""), {}),
    ("list", config("a", "child:1"), {}),
    ("list", config("a", ""), {"filter": {"step": 1}}),
    ("list", config("a", ""), {"filter": {"source": "loop", "run_id": "run-a-0"}}),
    ("list", config("a", ""), {"filter": {"tags": ["x", "a"]}}),
    ("list", config("a", ""), {"filter": {"step": 7}}),
    ("list", config("a", ""), {"before": config("a", "", cid(3))}),
    ("list", config("a", ""), {"limit": 2}),
    ("list", config("a", ""), {"before": config("a", "", cid(4)), "limit": 1}),
    ("list", config("a", "", cid(2)), {}),
    ("list", config("b", ""), {}),
    ("list", config("c", ""), {"limit": 0}),
]
# Answers whose order across threads and namespaces LangGraph leaves open: compared
# as sets.
QUERIES_UNORDERED = [
    ("list", None, {}),
    ("list", None, {"filter": {"step": 0}}),
    ("list", {"configurable": {"thread_id": "a"}}, {}),
]


def answers(saver):
    out = []
    for q in QUERIES_EXACT + QUERIES_UNORDERED:
        if q[0] == "get":
            out.append(shape(saver.get_tuple(q[1])))
        else:
            got = [shape(t) for t in saver.list(q[1], **q[2])]
            if q in QUERIES_UNORDERED:
                got = sorted(got, key=repr)
            out.append(got)
    return out


@pytest.mark.parametrize("cache_bytes", [DEFAULT_CACHE_BYTES, 0], ids=["cached", "read-back"])
def test_the_saver_answers_as_the_in_memory_saver_and_again_after_reopening(
        log_dir, cache_bytes):
    oracle = InMemorySaver()
    operations(oracle)
    expected = answers(oracle)
    # The oracle answers something for each query kind.
    assert expected[0] is not None and expected[2][4] and expected[10]
    with BlackboxSaver.open(log_dir, cache_bytes=cache_bytes) as saver:
        operations(saver)
        assert answers(saver) == expected
    with BlackboxSaver.open(log_dir, cache_bytes=cache_bytes) as reopened:
        assert answers(reopened) == expected


def ids(saver, thread, ns=None):
    c = {"configurable": {"thread_id": thread}}
    if ns is not None:
        c["configurable"]["checkpoint_ns"] = ns
    return sorted(t.checkpoint["id"] for t in saver.list(c))


def test_copy_prune_and_delete_for_runs_append_records_and_survive_reopening(log_dir):
    with BlackboxSaver.open(log_dir) as saver:
        operations(saver)
        saver.copy_thread("a", "d")
        saver.delete_for_runs(["run-c-1"])        # c's second checkpoint (step 1)
        saver.prune(["a"], strategy="keep_latest")
        saver.prune(["nobody"], strategy="delete")
        with pytest.raises(blackbox.InvalidInput, match="unknown prune strategy 'all'"):
            saver.prune(["a"], strategy="all")

    def check(s):
        # a: its latest of each namespace (checkpoints 4 and 6), the copy d: all six.
        assert ids(s, "a") == [cid(4), cid(6)]
        assert ids(s, "d") == [cid(n) for n in range(1, 7)]
        assert ids(s, "d", "child:1") == [cid(5), cid(6)]
        assert ids(s, "c") == [cid(9), cid(11)]
        assert ids(s, "b") == []
        # The copy carries the writes, under its own thread, ordered by task path,
        # task id and index ("p" < "~...", an interrupt's index -3 < an error's -1).
        d3 = s.get_tuple(config("d", "", cid(3)))
        assert d3.config["configurable"]["thread_id"] == "d"
        assert d3.pending_writes == [
            ("task-2", INTERRUPT, {"ask": "ok?"}), ("task-2", ERROR, "boom 2"),
            ("task-2", "msgs", "from 2"), ("task-1", "msgs", "hi"), ("task-1", "count", 5)]
        assert d3.checkpoint["channel_values"] == {"count": 2, "msgs": ["a-0", "a-1", "a-2"]}
        # a's pruned third checkpoint is gone, writes and all.
        assert s.get_tuple(config("a", "", cid(3))) is None
        assert s.get_tuple(config("a")).checkpoint["id"] == cid(4)

    with BlackboxSaver.open(log_dir) as saver:
        check(saver)
    # Everything went through the log, in order, and the log is intact.
    kinds = [r["kind"] for r in blackbox.replay(log_dir, kind="langgraph.*", types="event",
                                                log_order=True)]
    assert kinds == (["langgraph.checkpoint"] * 11
                     + ["langgraph.writes", "langgraph.error", "langgraph.error",
                        "langgraph.writes", "langgraph.writes", "langgraph.delete",
                        "langgraph.copy", "langgraph.delete", "langgraph.delete",
                        "langgraph.delete"])
    report = blackbox.verify(log_dir)
    assert report["intact"] is True


def test_deleting_a_thread_keeps_its_records_in_the_log(log_dir):
    with BlackboxSaver.open(log_dir) as saver:
        saver.put(config("t"), checkpoint(1, {"x": 1}), {"step": 0}, {"x": 1})
        saver.delete_thread("t")
        assert saver.get_tuple(config("t")) is None
        assert list(saver.list(None)) == []
    events = list(blackbox.replay(log_dir, kind="langgraph.*", types="event", log_order=True))
    assert [e["kind"] for e in events] == ["langgraph.checkpoint", "langgraph.delete"]
    with BlackboxSaver.open(log_dir) as saver:
        assert saver.get_tuple(config("t")) is None
        # Putting again after the deletion answers again.
        saver.put(config("t"), checkpoint(2, {"x": 2}), {"step": 1}, {"x": 2})
    with BlackboxSaver.open(log_dir) as saver:
        assert ids(saver, "t") == [cid(2)]


def test_the_saver_keeps_its_records_whatever_the_policy_and_refuses_a_retention_budget(
        log_dir, tmp_path):
    drop_all = {"default": "drop", "rules": [{"match": "langgraph.*", "tier": "drop"}]}
    with blackbox.Recorder(log_dir, policy=drop_all) as rec:
        saver = BlackboxSaver(rec)
        saver.put(config("t"), checkpoint(1, {"x": 1}), {"step": 0}, {"x": 1})
        saver.put_writes(config("t", "", cid(1)), [("x", 2)], "task")
        rec.record("agent.note", {"dropped": True})
    kinds = [r["kind"] for r in blackbox.replay(log_dir, types="event")]
    assert kinds == ["langgraph.checkpoint", "langgraph.writes"]
    with blackbox.Recorder(log_dir, policy=drop_all) as rec:
        t = BlackboxSaver(rec).get_tuple(config("t"))
        assert t.checkpoint["channel_values"] == {"x": 1}
        assert t.pending_writes == [("task", "x", 2)]

    budget = {"default": "full", "retention": {"max_bytes": "1GiB"}}
    with blackbox.Recorder(tmp_path / "kept", policy=budget) as rec:
        with pytest.raises(blackbox.InvalidInput, match=r"\[retention\] budget"):
            BlackboxSaver(rec)
    policy_file = tmp_path / "policy.toml"
    policy_file.write_text('default = "full"\n\n[retention]\nmax_age = "168h"\n')
    with pytest.raises(blackbox.InvalidInput, match=r"\[retention\] budget"):
        BlackboxSaver.open(tmp_path / "kept2", policy=policy_file)
    # The refused open closed its recorder: the directory opens again.
    blackbox.Recorder(tmp_path / "kept2").close()
    with pytest.raises(blackbox.InvalidInput, match="give a blackbox.Recorder"):
        BlackboxSaver("flight")


def test_the_index_holds_a_bounded_cache_and_reads_older_checkpoints_from_the_log(log_dir):
    big = "x" * 2000
    with BlackboxSaver.open(log_dir, cache_bytes=8192) as saver:
        parent = None
        for n in range(1, 41):
            cp = checkpoint(n, {"n": n, "pad": big})
            stored = saver.put(config("t", "", parent), cp, {"step": n}, {"n": n, "pad": n})
            parent = stored["configurable"]["checkpoint_id"]
            assert saver._cache_size <= 8192
        for n in range(1, 41):
            t = saver.get_tuple(config("t", "", cid(n)))
            assert t.checkpoint["channel_values"] == {"n": n, "pad": big}
            assert t.metadata["step"] == n
            assert saver._cache_size <= 8192
        assert [t.metadata["step"] for t in saver.list(config("t"), limit=3)] == [40, 39, 38]



def test_a_buffered_recorder_s_checkpoints_read_back_before_they_are_flushed(log_dir):
    # "buffered": record_evidence returns once the record is in the log's buffer, not
    # yet where a reader sees it; a read that misses the cache flushes first.
    with BlackboxSaver.open(log_dir, durability="buffered", cache_bytes=0) as saver:
        saver.put(config("t"), checkpoint(1, {"x": 1}), {"step": 0}, {"x": 1})
        saver.put_writes(config("t", "", cid(1)), [("x", 2)], "task")
        t = saver.get_tuple(config("t"))
        assert t.checkpoint["channel_values"] == {"x": 1}
        assert t.pending_writes == [("task", "x", 2)]


def test_records_of_the_saver_kinds_not_written_by_a_saver_are_refused(log_dir, tmp_path):
    with blackbox.Recorder(log_dir) as rec:
        seq = rec.record_evidence("langgraph.checkpoint", {"not": "a saver's"})
        refused = f"record {seq} of kind langgraph.checkpoint .* has no raw payload"
        with pytest.raises(blackbox.BlackboxError, match=refused):
            BlackboxSaver(rec)
    other = tmp_path / "other"
    with blackbox.Recorder(other) as rec:
        seq = rec.record_evidence("langgraph.delete", b"\xc1")
        with pytest.raises(blackbox.BlackboxError,
                           match=f"record {seq} of kind langgraph.delete .* not MessagePack"):
            BlackboxSaver(rec)


class Steps(TypedDict):
    steps: Annotated[list[str], operator.add]


def graph(saver, fail=False):
    def act(state):
        if fail:
            raise ValueError("the gripper slipped")
        return {"steps": ["act"]}

    builder = StateGraph(Steps)
    builder.add_node("plan", lambda state: {"steps": ["plan"]})
    builder.add_node("act", act)
    builder.add_edge(START, "plan")
    builder.add_edge("plan", "act")
    builder.add_edge("act", END)
    return builder.compile(checkpointer=saver, interrupt_before=["act"])


def test_a_graph_resumes_its_thread_after_the_saver_is_reopened(log_dir):
    thread = {"configurable": {"thread_id": "job-1"}}
    with blackbox.Recorder(log_dir) as rec:
        rec.record("agent.start", {"job": 1})
        g = graph(BlackboxSaver(rec))
        assert g.invoke({"steps": ["start"]}, thread) == {"steps": ["start", "plan"]}
        assert g.get_state(thread).next == ("act",)
    with BlackboxSaver.open(log_dir) as saver:
        g = graph(saver)
        state = g.get_state(thread)
        assert state.next == ("act",) and state.values == {"steps": ["start", "plan"]}
        assert g.invoke(None, thread) == {"steps": ["start", "plan", "act"]}
        history = [s.values["steps"] for s in g.get_state_history(thread)]
        assert history[0] == ["start", "plan", "act"] and history[-1] == []
    # One log: the agent's event and the graph's checkpoints.
    kinds = {r["kind"] for r in blackbox.replay(log_dir, types="event")}
    assert {"agent.start", "langgraph.checkpoint"} <= kinds
    assert blackbox.verify(log_dir)["intact"] is True


@pytest.mark.asyncio
async def test_an_async_graph_runs_on_the_saver(log_dir):
    thread = {"configurable": {"thread_id": "job-2"}}
    with BlackboxSaver.open(log_dir) as saver:
        g = graph(saver)
        assert await g.ainvoke({"steps": []}, thread) == {"steps": ["plan"]}
        assert await g.ainvoke(None, thread) == {"steps": ["plan", "act"]}
        assert (await saver.aget_tuple(thread)).checkpoint["channel_values"] == {
            "steps": ["plan", "act"]}


def test_a_node_failure_is_an_incident_when_the_policy_triggers_on_it(log_dir):
    policy = {"default": "full",
              "incident": {"triggers": ["langgraph.error"], "preroll": "10s", "postroll": "1s"}}
    thread = {"configurable": {"thread_id": "job-3"}}
    with blackbox.Recorder(log_dir, policy=policy) as rec:
        saver = BlackboxSaver(rec)
        g = graph(saver, fail=True)
        g.invoke({"steps": []}, thread)
        rec.record("tool.call", {"tool": "gripper"})
        with pytest.raises(ValueError, match="the gripper slipped"):
            g.invoke(None, thread)
        errors = [w for w in saver.get_tuple(thread).pending_writes if w[1] == ERROR]
        assert len(errors) == 1 and "the gripper slipped" in repr(errors[0][2])
    incidents = list(blackbox.replay(log_dir, types="incident"))
    assert [i["trigger_kind"] for i in incidents] == ["langgraph.error"]
    trigger = incidents[0]["trigger_seq"]
    assert [r["kind"] for r in blackbox.replay(log_dir, types="event", from_seq=trigger,
                                               to_seq=trigger)] == ["langgraph.error"]


def test_the_saver_kinds_are_its_records_kinds():
    assert KINDS == ("langgraph.checkpoint", "langgraph.writes", "langgraph.error",
                     "langgraph.delete", "langgraph.copy")


@pytest.mark.parametrize("target", [["-m", "blackbox.langgraph"], ["benches/saver_speed.py"]],
                         ids=["saver", "benchmark"])
def test_the_saver_and_its_benchmark_type_check_strictly(target):
    python_dir = Path(__file__).resolve().parent.parent
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", *target],
        capture_output=True, text=True, cwd=python_dir)
    assert done.returncode == 0, done.stdout + done.stderr
