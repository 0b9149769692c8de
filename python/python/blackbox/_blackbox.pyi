"""Type stubs of blackbox's extension module (``blackbox._blackbox``)."""

import os
from collections.abc import Iterable, Iterator
from datetime import datetime
from typing import Any, Literal, Optional, Union, final

Json = Any
"""A JSON value: None, bool, int, float, str, and dict (str keys) or list of those."""

Time = Union[int, str, datetime]
"""A time: int nanoseconds since the epoch, a datetime with a time zone, or a string
as the command reads one (RFC 3339, integer ns, ``now``, ``-5m``)."""

StrPath = Union[str, os.PathLike[str]]

class BlackboxError(Exception): ...
class LogDamaged(BlackboxError): ...
class Locked(BlackboxError): ...
class InvalidInput(BlackboxError): ...

@final
class Working:
    def get(self, key: str) -> Json: ...
    def set(self, key: str, value: Json) -> bool: ...
    def remove(self, key: str) -> bool: ...
    def keys(self) -> list[str]: ...
    def snapshot(self) -> dict[str, Json]: ...
    def __len__(self) -> int: ...

@final
class Kb:
    def put(
        self,
        key: str,
        value: Json,
        confidence: float,
        evidence: Union[int, Iterable[int]],
        conditions: Optional[dict[str, Json]] = None,
        message: Optional[str] = None,
        author: Optional[str] = None,
    ) -> dict[str, Any]: ...
    def refute(
        self,
        key: str,
        value: Json,
        evidence: Union[int, Iterable[int]],
        message: Optional[str] = None,
        author: Optional[str] = None,
    ) -> dict[str, Any]: ...
    def retract(
        self,
        key: str,
        evidence: Union[None, int, Iterable[int]] = None,
        message: Optional[str] = None,
        author: Optional[str] = None,
    ) -> dict[str, Any]: ...
    def revert(
        self,
        version: int,
        evidence: Union[None, int, Iterable[int]] = None,
        message: Optional[str] = None,
        author: Optional[str] = None,
    ) -> dict[str, Any]: ...
    def get(
        self,
        key: str,
        as_of: Union[None, int, str, datetime] = None,
        *,
        at: Optional[Time] = None,
    ) -> Optional[dict[str, Any]]: ...
    def history(self, key: str) -> list[dict[str, Any]]: ...
    def contradictions(self) -> list[dict[str, Any]]: ...
    def rejected(self, key: Optional[str] = None) -> list[dict[str, Any]]: ...

@final
class Recorder:
    def __new__(
        cls,
        dir: StrPath,
        policy: Union[None, StrPath, dict[str, Any]] = None,
        durability: Literal["flush", "sync", "buffered"] = "flush",
        *,
        overflow: Literal["block", "drop"] = "block",
        key_file: Optional[StrPath] = None,
        segment_bytes: Optional[int] = None,
        restore_working_memory: bool = True,
    ) -> Recorder: ...
    def record(
        self,
        kind: str,
        payload: Union[None, Json, bytes] = None,
        values: Optional[dict[str, float]] = None,
        source: Optional[str] = None,
        event_time_ns: Optional[Time] = None,
    ) -> None: ...
    def record_evidence(
        self,
        kind: str,
        payload: Union[None, Json, bytes] = None,
        values: Optional[dict[str, float]] = None,
        source: Optional[str] = None,
        event_time_ns: Optional[Time] = None,
    ) -> int: ...
    @property
    def _working(self) -> Working: ...
    @property
    def kb(self) -> Kb: ...
    def checkpoint(self) -> int: ...
    def sync(self) -> Optional[int]: ...
    def stats(self) -> dict[str, dict[str, int]]: ...
    def close(self) -> Optional[int]: ...

@final
class Records(Iterator[dict[str, Any]]):
    def __iter__(self) -> Records: ...
    def __next__(self) -> dict[str, Any]: ...

def replay(
    dir: StrPath,
    since: Optional[Time] = None,
    until: Optional[Time] = None,
    kind: Union[None, str, Iterable[str]] = None,
    types: Union[None, str, Iterable[str]] = None,
    *,
    from_seq: Optional[int] = None,
    to_seq: Optional[int] = None,
    log_order: bool = False,
    key_file: Optional[StrPath] = None,
) -> Records: ...
def state_at(
    dir: StrPath, at: Time, *, key_file: Optional[StrPath] = None
) -> dict[str, Any]: ...
def verify(
    dir: StrPath, digest: Optional[str] = None, *, key_file: Optional[StrPath] = None
) -> dict[str, Any]: ...
def export(
    dir: StrPath,
    path: StrPath,
    format: Literal["parquet", "jsonl", "mcap"] = "parquet",
    since: Optional[Time] = None,
    until: Optional[Time] = None,
    kind: Union[None, str, Iterable[str]] = None,
    *,
    from_seq: Optional[int] = None,
    to_seq: Optional[int] = None,
    include_unweighted: bool = False,
    salvage: bool = False,
    partition: Optional[Literal["kind", "date", "date,kind", "kind,date"]] = None,
    summaries: Optional[StrPath] = None,
    compression: Optional[Literal["zstd", "lz4", "none"]] = None,
    key_file: Optional[StrPath] = None,
) -> dict[str, Any]: ...
def to_ns(t: Time) -> int: ...
