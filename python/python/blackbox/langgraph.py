"""A LangGraph checkpointer backed by a Blackbox log: :class:`BlackboxSaver`.

Every checkpoint and every pending write the graph saves is a record of the
hash-chained log, beside the agent's own events and facts when the saver shares the
agent's :class:`blackbox.Recorder`::

    import blackbox
    from blackbox.langgraph import BlackboxSaver

    with blackbox.Recorder("flight", policy=policy) as rec:
        graph = builder.compile(checkpointer=BlackboxSaver(rec))
        graph.invoke(inputs, {"configurable": {"thread_id": "t1"}})

    with BlackboxSaver.open("flight") as saver:      # a recorder of its own
        graph = builder.compile(checkpointer=saver)

The records, in log order, are the whole truth; ``get_tuple`` and ``list`` answer
from an index the saver keeps and rebuilds from them when it opens:

- ``langgraph.checkpoint``: a checkpoint (ids, parent, the serializer's bytes of the
  checkpoint and of its metadata);
- ``langgraph.writes``: the pending writes of one task (``langgraph.error`` when one of
  them is a node's error, so a policy can make it an incident trigger);
- ``langgraph.delete``: ``delete_thread``, ``delete_for_runs`` or ``prune``;
- ``langgraph.copy``: ``copy_thread``.

Each is a raw payload, a MessagePack array whose first element is the format version
(1). They are written with ``record_evidence``, so whatever the policy's tier for
their kinds they are kept whole; a policy with a ``[retention]`` budget, which would
remove old segments and the checkpoints in them, is refused.

The log is append-only: deleting appends a record saying what went, the saver stops
answering for it at once (and after every reopen), and the log keeps the history, which
``blackbox replay`` still shows and ``blackbox verify`` still proves.

LangGraph is imported by this module only: install it with the ``langgraph`` extra
(``pip install "./python[langgraph]"``).
"""

from __future__ import annotations

import os
import sys
import threading
from collections import OrderedDict
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any, Literal

import ormsgpack
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_id,
    get_checkpoint_metadata,
    writes_sort_key,
)
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.types import ERROR

from . import BlackboxError, InvalidInput, Recorder, replay

__all__ = [
    "CHECKPOINT_KIND",
    "COPY_KIND",
    "DELETE_KIND",
    "ERROR_KIND",
    "KINDS",
    "WRITES_KIND",
    "BlackboxSaver",
]

CHECKPOINT_KIND = "langgraph.checkpoint"
WRITES_KIND = "langgraph.writes"
ERROR_KIND = "langgraph.error"
DELETE_KIND = "langgraph.delete"
COPY_KIND = "langgraph.copy"
#: The kinds of the saver's records.
KINDS = (CHECKPOINT_KIND, WRITES_KIND, ERROR_KIND, DELETE_KIND, COPY_KIND)

#: The version of the records' payload format.
FORMAT = 1

#: What the saver keeps of the records' bytes in memory, at most, by default.
DEFAULT_CACHE_BYTES = 64 << 20

_STRATEGIES = ("keep_latest", "delete")

#: How many answers of ``list`` read their records together.
_LIST_PAGE = 64


class _Entry:
    """A checkpoint in the index: where its record is, its parent and its metadata
    (to filter on); its bytes are in the log, and in the cache while recent."""

    __slots__ = ("seq", "parent", "metadata")

    def __init__(self, seq: int, parent: str | None, metadata: dict[str, Any]) -> None:
        self.seq = seq
        self.parent = parent
        self.metadata = metadata


# A saver record, decoded: a MessagePack array whose first element is FORMAT.
_Record = list[Any]

# A pending write in the index: (task_id, channel, task_path, seq of its record,
# position in the record's list of writes).
_Write = tuple[str, str, str, int, int]


def _retention_in(policy: Any) -> bool:
    """Whether a policy (a dict shaped as the TOML, or a file's path) has a
    ``[retention]`` budget."""
    if policy is None:
        return False
    if isinstance(policy, dict):
        return "retention" in policy
    path = os.fspath(policy)
    try:
        with open(path, "rb") as f:
            text = f.read()
    except OSError:
        return False  # the recorder read it: it is gone since, nothing to check
    if sys.version_info >= (3, 11):
        import tomllib

        try:
            return "retention" in tomllib.loads(text.decode("utf-8"))
        except (UnicodeDecodeError, tomllib.TOMLDecodeError):
            return False
    # Python 3.10 has no TOML reader: a line that opens the table is enough to see it.
    return any(
        line.strip().startswith(b"[retention") or line.strip().startswith(b"retention")
        for line in text.splitlines()
    )


class BlackboxSaver(BaseCheckpointSaver[int]):
    """A LangGraph checkpointer whose checkpoints and pending writes are records of a
    Blackbox log (see the module's documentation for the records).

    ``BlackboxSaver(recorder)`` shares a :class:`blackbox.Recorder` (the agent's
    events, facts and checkpoints in one log; closing the recorder is the caller's);
    :meth:`open` makes a saver with a recorder of its own, closed with the saver.
    ``cache_bytes`` bounds the records' bytes kept in memory: the index holds each
    checkpoint's seq, parent and metadata, and an older checkpoint is read back from
    the log by its seq.

    Deleting (``delete_thread``, ``delete_for_runs``, ``prune``) appends a record: the
    saver no longer answers for what it names, and the log keeps the history.
    ``prune(strategy="keep_latest")`` keeps the latest checkpoint of each namespace of
    each thread, whatever the graph's channels; a graph with ``DeltaChannel``
    channels needs the ancestors back to a snapshot, so do not prune its threads.

    The async methods answer at once from the index or write one record, as the
    sync ones do; a write waits for the log as ``record_evidence`` does (written to
    the operating system in ``"flush"`` mode).
    """

    def __init__(
        self,
        recorder: Recorder,
        *,
        serde: SerializerProtocol | None = None,
        cache_bytes: int = DEFAULT_CACHE_BYTES,
    ) -> None:
        super().__init__(serde=serde)
        if not isinstance(recorder, Recorder):
            raise InvalidInput(
                f"recorder is of type {type(recorder).__name__}: give a blackbox.Recorder"
            )
        if not isinstance(cache_bytes, int) or cache_bytes < 0:
            raise InvalidInput(
                f"cache_bytes {cache_bytes!r} is not a number of bytes (an int, 0 or more)"
            )
        if _retention_in(recorder.policy):
            raise InvalidInput(
                "the recorder's policy has a [retention] budget, which would remove old "
                "checkpoints from the log: give the saver a recorder whose policy has none"
            )
        self._rec = recorder
        self._owns_recorder = False
        self._cache_max = cache_bytes
        self._cache: OrderedDict[int, tuple[_Record, int]] = OrderedDict()
        self._cache_size = 0
        self._lock = threading.RLock()
        # thread id -> namespace -> checkpoint id -> entry
        self._threads: dict[str, dict[str, dict[str, _Entry]]] = {}
        # (thread id, namespace) -> the greatest checkpoint id there
        self._latest: dict[tuple[str, str], str] = {}
        # (thread id, namespace, checkpoint id) -> (task id, idx) -> write
        self._writes: dict[tuple[str, str, str], dict[tuple[str, int], _Write]] = {}
        self._rebuild()

    @classmethod
    def open(
        cls,
        dir: Any,
        policy: Any = None,
        durability: Literal["flush", "sync", "buffered"] = "flush",
        *,
        serde: SerializerProtocol | None = None,
        cache_bytes: int = DEFAULT_CACHE_BYTES,
        **recorder_options: Any,
    ) -> BlackboxSaver:
        """A saver over the log in ``dir`` with a recorder of its own (the arguments
        of :class:`blackbox.Recorder`), closed by :meth:`close` or ``with``."""
        recorder = Recorder(dir, policy, durability, **recorder_options)
        try:
            saver = cls(recorder, serde=serde, cache_bytes=cache_bytes)
        except BaseException:
            recorder.close()
            raise
        saver._owns_recorder = True
        return saver

    @property
    def recorder(self) -> Recorder:
        """The recorder the saver writes through."""
        return self._rec

    def close(self) -> None:
        """Closes the recorder if the saver opened it (:meth:`open`); else nothing."""
        if self._owns_recorder:
            self._rec.close()

    def __enter__(self) -> BlackboxSaver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> BlackboxSaver:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()

    # --- the log ---------------------------------------------------------------

    def _append(self, kind: str, record: _Record) -> int:
        """Writes a record (kept whatever the policy's tier); returns its seq."""
        payload = ormsgpack.packb(record)
        seq = self._rec.record_evidence(kind, payload)
        self._cache_put(seq, record, len(payload))
        return seq

    def _cache_put(self, seq: int, record: _Record, size: int) -> None:
        if size > self._cache_max:
            return
        self._cache[seq] = (record, size)
        self._cache_size += size
        while self._cache_size > self._cache_max:
            _, (_, evicted) = self._cache.popitem(last=False)
            self._cache_size -= evicted

    def _records(self, seqs: Sequence[int]) -> dict[int, _Record]:
        """The records of seqs, from the cache or read back from the log (those not
        cached in one pass over the range they span)."""
        out: dict[int, _Record] = {}
        missing = set()
        with self._lock:
            for seq in seqs:
                hit = self._cache.get(seq)
                if hit is None:
                    missing.add(seq)
                else:
                    self._cache.move_to_end(seq)
                    out[seq] = hit[0]
        if not missing:
            return out
        found = self._read(missing)
        if len(found) < len(missing):
            # Written in "buffered" mode and not yet flushed: flush, and read again.
            self._rec.sync()
            found = self._read(missing)
        for seq in sorted(missing):
            if seq not in found:
                raise BlackboxError(
                    f"the log in {self._rec.dir} has no record {seq}, which holds a "
                    "checkpoint or writes of the saver's index"
                )
            kind, payload = found[seq]
            record = _decode(self._rec.dir, seq, kind, payload)
            with self._lock:
                self._cache_put(seq, record, len(payload))
            out[seq] = record
        return out

    def _read(self, seqs: set[int]) -> dict[int, tuple[str, bytes]]:
        """The kinds and payloads of seqs, read from the log in one pass."""
        found = {}
        for r in replay(
            self._rec.dir,
            kind=list(KINDS),
            types="event",
            from_seq=min(seqs),
            to_seq=max(seqs),
            log_order=True,
            key_file=self._rec.key_file,
        ):
            if r["seq"] in seqs:
                found[r["seq"]] = (r["kind"], _payload_bytes(self._rec.dir, r))
        return found

    def _rebuild(self) -> None:
        """The index from the saver's records, in log order."""
        # Whatever a saver of this recorder wrote before is on its way to the log.
        self._rec.sync()
        with self._lock:
            for r in replay(
                self._rec.dir,
                kind=list(KINDS),
                types="event",
                log_order=True,
                key_file=self._rec.key_file,
            ):
                seq = r["seq"]
                kind = r["kind"]
                payload = _payload_bytes(self._rec.dir, r)
                record = _decode(self._rec.dir, seq, kind, payload)
                if kind in (CHECKPOINT_KIND, WRITES_KIND, ERROR_KIND):
                    self._cache_put(seq, record, len(payload))
                self._apply(kind, seq, record)

    def _apply(self, kind: str, seq: int, record: _Record) -> None:
        """Applies a record to the index (as written, and again on rebuild)."""
        if kind == CHECKPOINT_KIND:
            _, thread_id, ns, checkpoint_id, parent, _, _, md_type, md_bytes = record
            metadata = self.serde.loads_typed((md_type, md_bytes))
            self._threads.setdefault(thread_id, {}).setdefault(ns, {})[checkpoint_id] = (
                _Entry(seq, parent, metadata)
            )
            key = (thread_id, ns)
            latest = self._latest.get(key)
            if latest is None or checkpoint_id > latest:
                self._latest[key] = checkpoint_id
        elif kind in (WRITES_KIND, ERROR_KIND):
            _, thread_id, ns, checkpoint_id, task_id, task_path, writes = record
            stored = self._writes.setdefault((thread_id, ns, checkpoint_id), {})
            for pos, (idx, channel, _, _) in enumerate(writes):
                stored[(task_id, idx)] = (task_id, channel, task_path, seq, pos)
        elif kind == DELETE_KIND:
            what = record[1]
            if what == "thread":
                self._drop_threads([record[2]])
            elif what == "runs":
                self._drop_runs(set(record[2]))
            else:  # "prune"
                if record[3] == "delete":
                    self._drop_threads(record[2])
                else:
                    self._keep_latest(record[2])
        else:  # COPY_KIND
            self._copy(record[1], record[2])

    def _drop_threads(self, thread_ids: Sequence[str]) -> None:
        gone = set(thread_ids)
        for t in gone:
            self._threads.pop(t, None)
        for latest in [k for k in self._latest if k[0] in gone]:
            del self._latest[latest]
        for writes in [k for k in self._writes if k[0] in gone]:
            del self._writes[writes]

    def _drop_checkpoints(self, thread_id: str, ns: str, ids: Sequence[str]) -> None:
        by_id = self._threads[thread_id][ns]
        for checkpoint_id in ids:
            del by_id[checkpoint_id]
            self._writes.pop((thread_id, ns, checkpoint_id), None)
        if by_id:
            self._latest[(thread_id, ns)] = max(by_id)
        else:
            del self._threads[thread_id][ns]
            self._latest.pop((thread_id, ns), None)
            if not self._threads[thread_id]:
                del self._threads[thread_id]

    def _drop_runs(self, run_ids: set[str]) -> None:
        for thread_id, namespaces in list(self._threads.items()):
            for ns, by_id in list(namespaces.items()):
                ids = [
                    cid
                    for cid, e in by_id.items()
                    if e.metadata.get("run_id") in run_ids
                ]
                if ids:
                    self._drop_checkpoints(thread_id, ns, ids)

    def _keep_latest(self, thread_ids: Sequence[str]) -> None:
        for thread_id in thread_ids:
            namespaces = self._threads.get(thread_id)
            if namespaces is None:
                continue
            for ns, by_id in list(namespaces.items()):
                latest = self._latest[(thread_id, ns)]
                self._drop_checkpoints(
                    thread_id, ns, [cid for cid in by_id if cid != latest]
                )
            for key in [
                k
                for k in self._writes
                if k[0] == thread_id and self._latest.get((k[0], k[1])) != k[2]
            ]:
                del self._writes[key]

    def _copy(self, source: str, target: str) -> None:
        for ns, by_id in self._threads.get(source, {}).items():
            into = self._threads.setdefault(target, {}).setdefault(ns, {})
            for checkpoint_id, e in by_id.items():
                into[checkpoint_id] = _Entry(e.seq, e.parent, e.metadata)
            self._latest[(target, ns)] = max(into)
        for (t, ns, checkpoint_id), stored in list(self._writes.items()):
            if t == source:
                self._writes[(target, ns, checkpoint_id)] = dict(stored)

    # --- reading ---------------------------------------------------------------

    def _tuple(
        self,
        thread_id: str,
        ns: str,
        checkpoint_id: str,
        entry: _Entry,
        writes: list[_Write],
        records: dict[int, _Record],
    ) -> CheckpointTuple:
        record = records[entry.seq]
        loads = self.serde.loads_typed
        pending = []
        for task_id, channel, _, seq, pos in writes:
            _, _, value_type, value_bytes = records[seq][6][pos]
            pending.append((task_id, channel, loads((value_type, value_bytes))))
        return CheckpointTuple(
            config={
                "configurable": {
                    "thread_id": thread_id,
                    "checkpoint_ns": ns,
                    "checkpoint_id": checkpoint_id,
                }
            },
            checkpoint=loads((record[5], record[6])),
            metadata=loads((record[7], record[8])),
            parent_config=(
                {
                    "configurable": {
                        "thread_id": thread_id,
                        "checkpoint_ns": ns,
                        "checkpoint_id": entry.parent,
                    }
                }
                if entry.parent
                else None
            ),
            pending_writes=pending,
        )

    def _ordered_writes(self, thread_id: str, ns: str, checkpoint_id: str) -> list[_Write]:
        stored = self._writes.get((thread_id, ns, checkpoint_id))
        if not stored:
            return []
        return [
            stored[k]
            for k in sorted(stored, key=lambda k: writes_sort_key(stored[k][2], *k))
        ]

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint of ``config`` (its ``checkpoint_id``, else the thread's
        latest in the namespace), with its pending writes; None if there is none."""
        configurable = config["configurable"]
        thread_id = str(configurable["thread_id"])
        ns = configurable.get("checkpoint_ns", "")
        with self._lock:
            by_id = self._threads.get(thread_id, {}).get(ns)
            if not by_id:
                return None
            checkpoint_id = get_checkpoint_id(config) or self._latest[(thread_id, ns)]
            entry = by_id.get(checkpoint_id)
            if entry is None:
                return None
            writes = self._ordered_writes(thread_id, ns, checkpoint_id)
        records = self._records([entry.seq, *(w[3] for w in writes)])
        return self._tuple(thread_id, ns, checkpoint_id, entry, writes, records)

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """The checkpoints of ``config``'s thread (and namespace and checkpoint id,
        when it gives them; every thread when ``config`` is None) whose metadata has
        every key-value of ``filter``, older than ``before``'s checkpoint, newest
        first, at most ``limit``."""
        configurable = config["configurable"] if config else {}
        before_id = get_checkpoint_id(before) if before else None
        with self._lock:
            if config:
                thread_id = str(configurable["thread_id"])
                threads = [(thread_id, self._threads.get(thread_id, {}))]
            else:
                threads = list(self._threads.items())
            only_ns = configurable.get("checkpoint_ns")
            only_id = get_checkpoint_id(config) if config else None
            found = []
            for thread_id, namespaces in threads:
                for ns, by_id in namespaces.items():
                    if only_ns is not None and ns != only_ns:
                        continue
                    for checkpoint_id, entry in by_id.items():
                        if only_id and checkpoint_id != only_id:
                            continue
                        if before_id and checkpoint_id >= before_id:
                            continue
                        if filter and not all(
                            entry.metadata.get(k) == v for k, v in filter.items()
                        ):
                            continue
                        found.append((checkpoint_id, thread_id, ns, entry))
            found.sort(key=lambda f: f[0], reverse=True)
            if limit is not None:
                found = found[: max(limit, 0)]
            chosen = [
                (f, self._ordered_writes(f[1], f[2], f[0])) for f in found
            ]
        # The records of a page of answers are read together: one pass over the log
        # for those no longer cached.
        for page in range(0, len(chosen), _LIST_PAGE):
            answers = chosen[page : page + _LIST_PAGE]
            records = self._records(
                [s for (_, _, _, e), ws in answers for s in (e.seq, *(w[3] for w in ws))]
            )
            for (checkpoint_id, thread_id, ns, entry), writes in answers:
                yield self._tuple(thread_id, ns, checkpoint_id, entry, writes, records)

    # --- writing ---------------------------------------------------------------

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Appends the checkpoint (whole, with its channel values) to the log."""
        configurable = config["configurable"]
        thread_id = str(configurable["thread_id"])
        ns = configurable.get("checkpoint_ns", "")
        checkpoint_id = checkpoint["id"]
        cp_type, cp_bytes = self.serde.dumps_typed(checkpoint)
        md_type, md_bytes = self.serde.dumps_typed(
            get_checkpoint_metadata(config, metadata)
        )
        record = [
            FORMAT,
            thread_id,
            ns,
            checkpoint_id,
            configurable.get("checkpoint_id"),
            cp_type,
            cp_bytes,
            md_type,
            md_bytes,
        ]
        with self._lock:
            seq = self._append(CHECKPOINT_KIND, record)
            self._apply(CHECKPOINT_KIND, seq, record)
        return {
            "configurable": {
                "thread_id": thread_id,
                "checkpoint_ns": ns,
                "checkpoint_id": checkpoint_id,
            }
        }

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Appends a task's writes to the log (one record; ``langgraph.error`` when a
        write is the task's error). A write already stored for the same task and
        index is kept, as in LangGraph's own savers; an error, an interrupt, a
        resume or a schedule replaces the one before."""
        configurable = config["configurable"]
        thread_id = str(configurable["thread_id"])
        ns = configurable.get("checkpoint_ns", "")
        checkpoint_id = configurable["checkpoint_id"]
        dumps = self.serde.dumps_typed
        with self._lock:
            stored = self._writes.get((thread_id, ns, checkpoint_id), {})
            entries = []
            failed = False
            for i, (channel, value) in enumerate(writes):
                idx = WRITES_IDX_MAP.get(channel, i)
                if idx >= 0 and (task_id, idx) in stored:
                    continue
                failed = failed or channel == ERROR
                value_type, value_bytes = dumps(value)
                entries.append([idx, channel, value_type, value_bytes])
            if not entries:
                return
            record = [FORMAT, thread_id, ns, checkpoint_id, task_id, task_path, entries]
            kind = ERROR_KIND if failed else WRITES_KIND
            seq = self._append(kind, record)
            self._apply(kind, seq, record)

    def _append_apply(self, kind: str, record: _Record) -> None:
        with self._lock:
            seq = self._append(kind, record)
            self._apply(kind, seq, record)

    def delete_thread(self, thread_id: str) -> None:
        """Appends a deletion of the thread: the saver answers no more for its
        checkpoints and writes (the log keeps them)."""
        self._append_apply(DELETE_KIND, [FORMAT, "thread", str(thread_id)])

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Appends a deletion of the checkpoints whose metadata's ``run_id`` is one of
        ``run_ids``, and of their writes (the log keeps them)."""
        run_ids = [str(r) for r in run_ids]
        if run_ids:
            self._append_apply(DELETE_KIND, [FORMAT, "runs", run_ids])

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Appends a copy of every checkpoint and write of one thread to another: the
        copies answer from the source's records."""
        source, target = str(source_thread_id), str(target_thread_id)
        with self._lock:
            if source in self._threads or any(k[0] == source for k in self._writes):
                self._append_apply(COPY_KIND, [FORMAT, source, target])

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """Appends a pruning of the threads: ``"keep_latest"`` keeps the latest
        checkpoint of each namespace (and its writes), ``"delete"`` none. The log
        keeps what went."""
        if strategy not in _STRATEGIES:
            raise InvalidInput(
                f"unknown prune strategy {strategy!r}: expected \"keep_latest\" or \"delete\""
            )
        thread_ids = [str(t) for t in thread_ids]
        if thread_ids:
            self._append_apply(DELETE_KIND, [FORMAT, "prune", thread_ids, strategy])

    # --- async: the same, answered at once --------------------------------------

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return self.get_tuple(config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        for item in self.list(config, filter=filter, before=before, limit=limit):
            yield item

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return self.put(config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        self.put_writes(config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        self.delete_thread(thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        self.delete_for_runs(run_ids)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        self.copy_thread(source_thread_id, target_thread_id)

    async def aprune(
        self, thread_ids: Sequence[str], *, strategy: str = "keep_latest"
    ) -> None:
        self.prune(thread_ids, strategy=strategy)


def _payload_bytes(dir: str, r: dict[str, Any]) -> bytes:
    """A saver record's raw payload, from the hex ``replay`` shows it as."""
    payload = r.get("payload")
    if r.get("encoding") != "raw" or not isinstance(payload, str):
        raise BlackboxError(
            f"record {r.get('seq')} of kind {r.get('kind')} in {dir} has no raw payload: "
            "it was not written by a LangGraph saver"
        )
    return bytes.fromhex(payload)


# The length of each kind's record.
_LENGTHS = {
    CHECKPOINT_KIND: 9,
    WRITES_KIND: 7,
    ERROR_KIND: 7,
    COPY_KIND: 3,
}


def _decode(dir: str, seq: int, kind: str, payload: bytes) -> _Record:
    """A saver record from its payload, checked for its shape."""

    def refuse(why: str) -> BlackboxError:
        return BlackboxError(
            f"record {seq} of kind {kind} in {dir} is not a LangGraph saver record: {why}"
        )

    try:
        record = ormsgpack.unpackb(payload)
    except ormsgpack.MsgpackDecodeError as e:
        raise refuse(f"its payload is not MessagePack ({e})") from None
    if not isinstance(record, list) or not record:
        raise refuse("its payload is not an array")
    if record[0] != FORMAT:
        raise refuse(f"its format is {record[0]!r}, this saver reads {FORMAT}")
    if kind == DELETE_KIND:
        ok = (len(record) == 3 and record[1] == "thread" and isinstance(record[2], str)) or (
            len(record) == 3 and record[1] == "runs" and isinstance(record[2], list)
        ) or (
            len(record) == 4
            and record[1] == "prune"
            and isinstance(record[2], list)
            and record[3] in _STRATEGIES
        )
        if not ok:
            raise refuse("its deletion is none of thread, runs and prune")
        return record
    if len(record) != _LENGTHS[kind]:
        raise refuse(f"it has {len(record)} fields, not {_LENGTHS[kind]}")
    if kind in (WRITES_KIND, ERROR_KIND):
        writes = record[6]
        if not isinstance(writes, list) or not all(
            isinstance(w, list) and len(w) == 4 and isinstance(w[0], int) for w in writes
        ):
            raise refuse("its writes are not [idx, channel, type, bytes] arrays")
    return record
