"""How fast Python records: `Recorder.record()` events per second from one thread and
from four, with a small dict payload and with none, medians of several rounds.

    python python/benches/record_speed.py [--events N] [--rounds R]

Each round records N events per thread into a fresh log (policy: every kind `full`;
durability "buffered", so the disk is out of the measure as in the Rust ingest
benchmark), timed from the first call to the last call's return, then closes the log.
The events are in the log when it closes: the round checks the count.
"""

from __future__ import annotations

import argparse
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000, help="events per thread and round")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    print("| threads | payload | median events/s | rounds (M/s) |")
    print("|---:|---|---:|---|")
    for threads in (1, 4):
        cases: list[tuple[str, dict[str, Any] | None]] = [("small dict", PAYLOAD), ("none", None)]
        for name, payload in cases:
            rates = [one_round(threads, args.events // threads, payload) for _ in range(args.rounds)]
            median = statistics.median(rates)
            each = ", ".join(f"{r / 1e6:.2f}" for r in rates)
            print(f"| {threads} | {name} | {median / 1e6:.2f} M | {each} |")


if __name__ == "__main__":
    main()
