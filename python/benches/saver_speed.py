"""BlackboxSaver against LangGraph's SqliteSaver (on a file), side by side in one run:
the same checkpoints put and read back through each, and the same graph run on each.

    python python/benches/saver_speed.py [--checkpoints 2000] [--threads 20] [--rounds 5]

Needs the package with its LangGraph extra and langgraph-checkpoint-sqlite (the
environment `scripts/python-env` builds has them, after `pip install ./python`).
Reports, for each store, the median over the rounds of checkpoints put per second,
get_tuple calls per second (each checkpoint by its id, in a shuffled order) and graph
runs per second (a three-node graph, a thread each), and each Blackbox figure's ratio
to SQLite's. Every round uses fresh directories and database files, in a temporary
directory on the disk of --dir (default: the system's temporary directory).
"""

from __future__ import annotations

import argparse
import operator
import random
import shutil
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Annotated, Any, Literal, TypedDict

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    Checkpoint,
    CheckpointMetadata,
    empty_checkpoint,
)
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph

from blackbox.langgraph import BlackboxSaver


def checkpoints(n: int, threads: int) -> list[tuple[str, Checkpoint, CheckpointMetadata]]:
    """n checkpoints over `threads` threads, each a chat-like state of 0.4 to 2 KB
    serialized: (thread id, checkpoint, metadata)."""
    out = []
    for i in range(n):
        thread = f"thread-{i % threads}"
        step = i // threads
        cp = empty_checkpoint()
        cp["id"] = f"1f0c0000-0000-6000-8000-{i:012d}"
        messages = [
            {"role": "user" if k % 2 == 0 else "assistant",
             "content": f"message {k} of {thread}: " + "lorem ipsum " * 8}
            for k in range(min(step + 1, 12))
        ]
        cp["channel_values"] = {"messages": messages, "step": step, "plan": ["look", "grasp"]}
        cp["channel_versions"] = {"messages": step + 1, "step": step + 1, "plan": 1}
        cp["versions_seen"] = {"agent": {"messages": step}}
        meta: CheckpointMetadata = {"source": "loop", "step": step, "run_id": f"run-{i % 3}"}
        out.append((thread, cp, meta))
    return out


def put_all(
    saver: BaseCheckpointSaver[Any], data: list[tuple[str, Checkpoint, CheckpointMetadata]]
) -> tuple[float, list[RunnableConfig]]:
    parents: dict[str, str] = {}
    stored = []
    start = time.perf_counter()
    for thread, cp, meta in data:
        config: RunnableConfig = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
        if thread in parents:
            config["configurable"]["checkpoint_id"] = parents[thread]
        saved = saver.put(config, cp, meta, dict(cp["channel_versions"]))
        parents[thread] = saved["configurable"]["checkpoint_id"]
        stored.append(saved)
    return time.perf_counter() - start, stored


def get_all(saver: BaseCheckpointSaver[Any], configs: list[RunnableConfig]) -> float:
    start = time.perf_counter()
    for c in configs:
        if saver.get_tuple(c) is None:
            raise SystemExit(f"no checkpoint for {c}")
    return time.perf_counter() - start


class State(TypedDict):
    steps: Annotated[list[str], operator.add]


def build_graph() -> StateGraph[State]:
    builder = StateGraph(State)
    builder.add_node("plan", lambda s: {"steps": ["plan"]})
    builder.add_node("act", lambda s: {"steps": ["act"]})
    builder.add_node("check", lambda s: {"steps": ["check"]})
    builder.add_edge(START, "plan")
    builder.add_edge("plan", "act")
    builder.add_edge("act", "check")
    builder.add_edge("check", END)
    return builder


def run_graph(saver: BaseCheckpointSaver[Any], runs: int) -> float:
    graph = build_graph().compile(checkpointer=saver)
    start = time.perf_counter()
    for i in range(runs):
        graph.invoke({"steps": []}, {"configurable": {"thread_id": f"g-{i}"}})
    return time.perf_counter() - start


Store = Callable[[Path], AbstractContextManager[BaseCheckpointSaver[Any]]]


def stores() -> list[tuple[str, Store]]:
    """(name, a context manager making a fresh saver) for each store measured."""

    def blackbox(durability: Literal["flush", "sync"], cache_bytes: int = 64 << 20) -> Store:
        def make(round_dir: Path) -> BlackboxSaver:
            return BlackboxSaver.open(round_dir / "flight", durability=durability,
                                      cache_bytes=cache_bytes)
        return make

    class Sqlite:
        def __init__(self, round_dir: Path) -> None:
            self.conn = sqlite3.connect(round_dir / "checkpoints.sqlite", check_same_thread=False)
            self.saver = SqliteSaver(self.conn)
            self.saver.setup()

        def __enter__(self) -> SqliteSaver:
            return self.saver

        def __exit__(self, *exc: object) -> None:
            self.conn.close()

    return [
        ("sqlite", Sqlite),
        ("blackbox flush", blackbox("flush")),
        ("blackbox sync", blackbox("sync")),
        ("blackbox flush, cache 0", blackbox("flush", cache_bytes=0)),
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkpoints", type=int, default=2000)
    ap.add_argument("--threads", type=int, default=20)
    ap.add_argument("--graph-runs", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--dir", default=None)
    args = ap.parse_args()

    data = checkpoints(args.checkpoints, args.threads)
    figures: dict[str, dict[str, list[float]]] = {}
    root = Path(tempfile.mkdtemp(prefix="saver-speed-", dir=args.dir))
    try:
        for r in range(args.rounds):
            # The stores take turns within each round, in a new order each time.
            order = stores()
            random.Random(r).shuffle(order)
            for name, make in order:
                round_dir = root / f"{r}-{name.replace(' ', '_').replace(',', '')}"
                round_dir.mkdir()
                with make(round_dir) as saver:
                    put_s, stored = put_all(saver, data)
                    lookups = list(stored)
                    random.Random(r).shuffle(lookups)
                    get_s = get_all(saver, lookups)
                    graph_s = run_graph(saver, args.graph_runs)
                f = figures.setdefault(name, {"put/s": [], "get_tuple/s": [], "graph runs/s": []})
                f["put/s"].append(len(data) / put_s)
                f["get_tuple/s"].append(len(lookups) / get_s)
                f["graph runs/s"].append(args.graph_runs / graph_s)
                shutil.rmtree(round_dir)
    finally:
        shutil.rmtree(root, ignore_errors=True)

    print(f"{args.checkpoints} checkpoints over {args.threads} threads, "
          f"{args.graph_runs} graph runs; medians of {args.rounds} rounds")
    base = {k: statistics.median(v) for k, v in figures["sqlite"].items()}
    print(f"{'store':<26}{'put/s':>12}{'get_tuple/s':>14}{'graph runs/s':>15}")
    for name, _ in stores():
        f = figures[name]
        med = {k: statistics.median(v) for k, v in f.items()}
        print(f"{name:<26}" + "".join(
            f"{med[k]:>{w}.0f}" for k, w in (("put/s", 12), ("get_tuple/s", 14),
                                              ("graph runs/s", 15))))
        if name != "sqlite":
            print(f"{'  × sqlite':<26}" + "".join(
                f"{med[k] / base[k]:>{w}.2f}" for k, w in (("put/s", 12), ("get_tuple/s", 14),
                                                            ("graph runs/s", 15))))


if __name__ == "__main__":
    main()
