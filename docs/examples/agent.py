"""An agent loop that records into Blackbox while it runs: its events, its working
memory, and the facts it learns, each citing the observation behind it.

    BLACKBOX=path/to/blackbox python3 agent.py [DIR]     (default: blackbox, ./flight)

It prints one JSON line per decision, and the recorder's summary last.
"""
import json
import os
import queue
import subprocess
import sys
import threading

directory = sys.argv[1] if len(sys.argv) > 1 else "flight"
rec = subprocess.Popen(
    [os.environ.get("BLACKBOX", "blackbox"), "record", "--dir", directory],
    stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1,
)

# Every line that asks for a reply ("ack": true, a kb.* op, a sync) gets exactly one, in
# order, and the summary comes last. Read them on a thread: replies nobody reads fill the
# pipe, `record` then blocks writing one, and a host writing lines blocks in turn.
replies = queue.Queue()


def read_replies():
    for text in rec.stdout:
        replies.put(json.loads(text))
    replies.put(None)  # record stopped: its error is on stderr


threading.Thread(target=read_replies, daemon=True).start()
lines_sent = 0  # "line:L" cites the L-th line of this stream


def send(obj):
    """Sends one line; returns its number."""
    global lines_sent
    rec.stdin.write(json.dumps(obj) + "\n")
    lines_sent += 1
    return lines_sent


def ask(obj):
    """Sends a line that asks for a reply, and waits for the reply. Once lines ask for
    replies, a refused line gets one too, asked for or not: it names its own line."""
    line = send(obj)
    rec.stdin.flush()
    while True:
        reply = replies.get(timeout=60)
        if reply is None:
            sys.exit(f"blackbox record stopped at line {line}")
        if "error" in reply:
            raise RuntimeError(f"line {reply['line']} refused: {reply['error']}")
        if reply.get("line", line) == line:  # a sync's reply names no line
            return reply


masses_kg = {"cup": 0.31, "plate": 0.52, "bowl": 0.27}
for name, mass_kg in masses_kg.items():
    send({"op": "set", "key": "goal", "value": {"task": "lift", "object": name}})
    send({"kind": "sensor.imu", "values": {"az": -9.8}, "source": "wrist"})
    # Acknowledged: written whatever its tier, and its seq known, so a fact can cite it.
    weighed = ask({"kind": "observation.load", "source": "wrist", "ack": True,
                   "payload": {"object": name}, "values": {"kg": mass_kg}})
    learned = ask({"op": "kb.put", "key": f"{name}.mass_kg", "value": mass_kg,
                   "confidence": 0.8, "evidence": [f"line:{weighed['line']}"],
                   "message": "weighed before lifting"})
    send({"op": "set", "key": "grip_force_n", "value": round(mass_kg * 9.8 * 4, 2)})
    decided = ask({"kind": "decision.lift", "ack": True,
                   "payload": {"object": name, "kb_version": learned["version"]}})
    print(json.dumps({"key": f"{name}.mass_kg", "value": mass_kg,
                      "version": learned["version"], "outcome": learned["outcome"],
                      "observed_seq": weighed["seq"], "decided_seq": decided["seq"]}))

# Weighed again, the bowl is heavier: the old value is refuted, citing the new reading.
again = ask({"kind": "observation.load", "source": "wrist", "ack": True,
             "payload": {"object": "bowl"}, "values": {"kg": 0.29}})
ask({"op": "kb.refute", "key": "bowl.mass_kg", "value": 0.27,
     "evidence": [again["seq"]], "message": "re-weighed: 0.29 kg"})

synced = ask({"op": "sync"})  # {"synced": SEQ}: every record so far is durable
rec.stdin.close()
summary = replies.get(timeout=60)
if rec.wait() != 0:
    sys.exit(f"blackbox record failed with code {rec.returncode}")
print(json.dumps(summary))
