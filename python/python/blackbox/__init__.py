"""Blackbox: a flight recorder for robots and AI agents, in Python.

Record events, keep a working memory and a knowledge base of facts with evidence,
all in one hash-chained log; read it back as ``blackbox replay --json`` prints it,
rebuild the state at any time, verify that nothing was changed, and export the
events to Parquet, JSONL or MCAP.

    import blackbox

    with blackbox.Recorder("run.log", policy={"default": "full"}) as rec:
        rec.record("tool.call", {"tool": "search", "query": "cups"})
        rec.working["goal"] = "find a cup"
        seen = rec.record_evidence("observation.cup", {"where": "table"})
        rec.kb.put("cup.location", "table", 0.8, [seen])

    for record in blackbox.replay("run.log", kind="tool.*"):
        print(record["seq"], record["payload"])

    blackbox.export("run.log", "events.parquet")  # pandas, DuckDB, datasets read it
"""

from __future__ import annotations

import os
from collections.abc import Iterator, MutableMapping
from typing import Any, Literal

from . import _blackbox
from ._blackbox import (
    BlackboxError,
    InvalidInput,
    Kb,
    Locked,
    LogDamaged,
    Records,
    export,
    replay,
    state_at,
    to_ns,
    verify,
)

__all__ = [
    "BlackboxError",
    "InvalidInput",
    "Kb",
    "Locked",
    "LogDamaged",
    "Recorder",
    "Records",
    "Working",
    "export",
    "replay",
    "state_at",
    "to_ns",
    "verify",
]


class Working(MutableMapping):
    """A recorder's working memory as a mutable mapping of str to JSON values.

    Every change reaches the log as a record in its place among the events, and
    checkpoints hold the memory whole. Reading a value gives a copy: change it and
    set it again for the change to be recorded.
    """

    __slots__ = ("_w",)

    def __init__(self, handle: _blackbox.Working) -> None:
        self._w = handle

    def __getitem__(self, key: str) -> Any:
        if not isinstance(key, str):
            raise KeyError(key)
        # A stored null reads back as None: tell it from a missing key.
        value = self._w.get(key)
        if value is None and key not in self._w.keys():
            raise KeyError(key)
        return value

    def __setitem__(self, key: str, value: Any) -> None:
        if not isinstance(key, str):
            raise InvalidInput(
                f"working-memory keys are strings, not {type(key).__name__}"
            )
        self._w.set(key, value)

    def __delitem__(self, key: str) -> None:
        if not isinstance(key, str) or not self._w.remove(key):
            raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return iter(self._w.keys())

    def __len__(self) -> int:
        return len(self._w)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and key in self._w.keys()

    def to_dict(self) -> dict[str, Any]:
        """The whole memory as a dict, read at once."""
        return self._w.snapshot()

    def __repr__(self) -> str:
        return f"Working({self._w.snapshot()!r})"


class Recorder:
    """A flight recorder over the log in ``dir`` (created if missing).

    ``policy`` is the path of a policy file (TOML) or a dict shaped as that TOML;
    ``durability`` is ``"flush"`` (a crash of the process loses nothing),
    ``"sync"`` (nor does a power cut) or ``"buffered"``. Use it as a context
    manager, or call :meth:`close`.
    """

    __slots__ = (
        "_r",
        "record",
        "record_evidence",
        "working",
        "kb",
        "dir",
        "key_file",
        "policy",
    )

    def __init__(
        self,
        dir: str | os.PathLike[str],
        policy: str | os.PathLike[str] | dict[str, Any] | None = None,
        durability: Literal["flush", "sync", "buffered"] = "flush",
        *,
        overflow: Literal["block", "drop"] = "block",
        key_file: str | os.PathLike[str] | None = None,
        segment_bytes: int | None = None,
        restore_working_memory: bool = True,
    ) -> None:
        self._r = _blackbox.Recorder(
            dir,
            policy,
            durability,
            overflow=overflow,
            key_file=key_file,
            segment_bytes=segment_bytes,
            restore_working_memory=restore_working_memory,
        )
        #: The log's directory, its chain key file and the policy as given: what a
        #: reader of the same log (``blackbox.langgraph.BlackboxSaver``) needs.
        self.dir = os.fspath(dir)
        self.key_file = None if key_file is None else os.fspath(key_file)
        self.policy = policy
        # Bound straight to the extension: no Python frame on the hot path.
        self.record = self._r.record
        self.record_evidence = self._r.record_evidence
        self.working = Working(self._r._working)
        self.kb: Kb = self._r.kb

    def checkpoint(self) -> int:
        """Appends a checkpoint of the working memory; returns its seq."""
        return self._r.checkpoint()

    def sync(self) -> int | None:
        """Returns once everything recorded before is durable, with the last seq."""
        return self._r.sync()

    def stats(self) -> dict[str, dict[str, int]]:
        """Per-kind counters (seen, kept, sampled_out, summarized, dropped,
        overflow, preroll, lost), running totals since the log was created."""
        return self._r.stats()

    def close(self) -> int | None:
        """Closes the log; returns its last seq. Closing again returns the same."""
        return self._r.close()

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
