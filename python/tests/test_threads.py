"""Blocking calls let the interpreter go: two threads record at once. With the
interpreter's switch interval made longer than the test, a thread that kept the
interpreter through a call would run all its calls before the other ran any."""

import sys
import threading

import blackbox


def test_two_threads_record_at_once(log_dir):
    calls = 200
    seqs = {"a": [], "b": []}
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1000.0)
    try:
        with blackbox.Recorder(log_dir) as rec:
            start = threading.Barrier(2)

            def producer(name):
                start.wait()
                for i in range(calls):
                    seqs[name].append(rec.record_evidence(f"thread.{name}", {"i": i}))

            threads = [threading.Thread(target=producer, args=(n,)) for n in seqs]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
    finally:
        sys.setswitchinterval(interval)
    a, b = seqs["a"], seqs["b"]
    assert len(a) == len(b) == calls
    # Interleaved: some record of each thread lies between two of the other's.
    assert any(a[0] < s < a[-1] for s in b) and any(b[0] < s < b[-1] for s in a), (a, b)
    kinds = [e["kind"] for e in blackbox.replay(log_dir, types="event", log_order=True)]
    assert sorted(kinds) == ["thread.a"] * calls + ["thread.b"] * calls
