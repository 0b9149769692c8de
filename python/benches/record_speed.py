"""How fast Python records: `Recorder.record()` events per second from one thread and
from four, with a small dict payload and with none, medians of several rounds; beside
it, in the same run, what a Python program does without Blackbox: one JSON line per
event (`json.dumps` and a buffered file's `write`, no checksum, no chain).

    python python/benches/record_speed.py [--events N] [--rounds R]

Each round records N events per thread into a fresh log (policy: every kind `full`;
durability "buffered", so the disk is out of the measure as in the Rust ingest
benchmark), timed from the first call to the last call's return, then closes the log.
The events are in the log when it closes: the round checks the count.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import threading
import time
from typing import Any

import blackbox

PAYLOAD = {"tool": "search", "step": 1, "ok": True}


def one_round(threads: int, events: int, payload: dict[str, Any] | None) -> float:
    """Events per second of one round."""
    with tempfile.TemporaryDirectory() as tmp:
        log = os.path.join(tmp, "flight")
        with blackbox.Recorder(log, policy={"default": "full"}, durability="buffered") as rec:
            start = threading.Barrier(threads + 1)

            def producer() -> None:
                record = rec.record
                start.wait()
                for _ in range(events):
                    record("tool.call", payload)

            workers = [threading.Thread(target=producer) for _ in range(threads)]
            for w in workers:
                w.start()
            start.wait()
            t0 = time.perf_counter()
            for w in workers:
                w.join()
            elapsed = time.perf_counter() - t0
            kept = rec.stats()["tool.call"]["kept"]
        if kept != threads * events:
            raise SystemExit(f"the log kept {kept} events of {threads * events}")
        return threads * events / elapsed


def jsonl_round(events: int, payload: dict[str, Any] | None) -> float:
    """Events per second of one round of JSON lines from one thread."""
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "events.jsonl"), "w") as out:
            write, dumps = out.write, json.dumps
            t0 = time.perf_counter()
            for _ in range(events):
                write(dumps({"kind": "tool.call", "ts": time.time_ns(), "payload": payload}) + "\n")
            elapsed = time.perf_counter() - t0
        return events / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000, help="events per thread and round")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    print("| writer | threads | payload | median events/s | rounds (M/s) |")
    print("|---|---:|---|---:|---|")
    cases: list[tuple[str, dict[str, Any] | None]] = [("small dict", PAYLOAD), ("none", None)]

    def row(writer: str, threads: int, name: str, rates: list[float]) -> None:
        each = ", ".join(f"{r / 1e6:.2f}" for r in rates)
        print(f"| {writer} | {threads} | {name} | {statistics.median(rates) / 1e6:.2f} M | {each} |")

    for threads in (1, 4):
        for name, payload in cases:
            rates = [one_round(threads, args.events // threads, payload) for _ in range(args.rounds)]
            row("`Recorder.record()`", threads, name, rates)
    for name, payload in cases:
        rates = [jsonl_round(args.events, payload) for _ in range(args.rounds)]
        row("JSON lines (`json.dumps`)", 1, name, rates)


if __name__ == "__main__":
    main()
