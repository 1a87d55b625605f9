"""The saver's in-memory index, folded strictly from the trace's log.

Nothing here is a second registry: the index is rebuilt from the records in
log order whenever a saver opens a trace, and caught up before every read and
after every write, so several processes (and several savers) on one trace see
each other's checkpoints. Deletions and pruning are records too: folding them
in log order hides exactly what was visible when they were appended.

Pure: no I/O; the saver feeds it :class:`~goatherd.domain.log.LogEntry` values.
"""

from __future__ import annotations

import base64
import bisect
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from goatherd.domain.log import LogEntry
from goatherd.integrations.langgraph.paths import PATH_PREFIX
from goatherd.integrations.langgraph.values import Blob, MalformedValueError

__all__ = [
    "CheckpointEntry",
    "FoldItem",
    "RejectedRecord",
    "SCHEMAS",
    "SCHEMA_CHECKPOINT",
    "SCHEMA_CHECKPOINTS_HIDDEN",
    "SCHEMA_THREAD_DELETED",
    "SCHEMA_VALUE",
    "SCHEMA_VALUES_ERASED",
    "SCHEMA_WRITE",
    "SCHEMA_WRITES",
    "ThreadIndex",
    "TraceIndex",
    "WriteEntry",
]

SCHEMA_CHECKPOINT: Final = "goatherd.langgraph.checkpoint.v1"
SCHEMA_WRITE: Final = "goatherd.langgraph.write.v1"
SCHEMA_WRITES: Final = "goatherd.langgraph.writes.v1"
SCHEMA_VALUE: Final = "goatherd.langgraph.value.v1"
SCHEMA_THREAD_DELETED: Final = "goatherd.langgraph.thread_deleted.v1"
SCHEMA_CHECKPOINTS_HIDDEN: Final = "goatherd.langgraph.checkpoints_hidden.v1"
SCHEMA_VALUES_ERASED: Final = "goatherd.langgraph.values_erased.v1"
SCHEMAS: Final = (
    SCHEMA_CHECKPOINT,
    SCHEMA_WRITE,
    SCHEMA_WRITES,
    SCHEMA_VALUE,
    SCHEMA_THREAD_DELETED,
    SCHEMA_CHECKPOINTS_HIDDEN,
    SCHEMA_VALUES_ERASED,
)
_LOG = logging.getLogger(__name__)
_OWN_PATHS: Final = PATH_PREFIX + ":"


@dataclass(frozen=True, slots=True)
class FoldItem:
    """One path entry as the index folds it: from the log, or from a receipt.

    Attributes:
        ordinal: the entry's ordinal on ``owner``.
        redacted: the record's payload was erased (ADR 0063).
    """

    position: int
    record_id: str
    owner: str
    ordinal: int
    schema_ref: str
    payload: Mapping[str, object]
    redacted: bool = False

    @classmethod
    def of(cls, entry: LogEntry) -> FoldItem:
        """The item of a log entry."""
        record = entry.record
        return cls(
            entry.position,
            record.record_id,
            record.trace_owner_id,
            record.owner_ordinal,
            record.envelope.schema_ref,
            record.payload,
            record.redacted_by is not None,
        )


@dataclass(frozen=True, slots=True)
class CheckpointEntry:
    """One visible checkpoint, as its record states it.

    Attributes:
        channels: channel -> value digest (``None``: the channel is empty).
        versions: channel -> version key (see ``version_key``).
    """

    record_id: str
    owner: str
    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str
    parent_id: str | None
    checkpoint: Blob
    metadata: Blob
    channels: Mapping[str, str | None]
    versions: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class WriteEntry:
    """One pending write of a task against a checkpoint."""

    record_id: str
    task_id: str
    task_path: str
    idx: int
    channel: str
    value: Blob | str  # inline, or the digest of a value record

    @property
    def sort_key(self) -> tuple[str, str, int]:
        """LangGraph's ``writes_sort_key`` order."""
        return (self.task_path, self.task_id, self.idx)


@dataclass(frozen=True, slots=True)
class RejectedRecord:
    """A record with one of the saver's schemas that the index could not use."""

    record_id: str
    owner: str
    reason: str


@dataclass(slots=True)
class ThreadIndex:
    """The visible checkpoints and writes of one thread."""

    checkpoints: dict[tuple[str, str], CheckpointEntry] = field(default_factory=dict)
    ordered: dict[str, list[str]] = field(default_factory=dict)
    writes: dict[tuple[str, str], dict[tuple[str, int], WriteEntry]] = field(
        default_factory=dict
    )
    versions: dict[tuple[str, str, str], str | None] = field(default_factory=dict)

    def add_checkpoint(self, entry: CheckpointEntry) -> None:
        """Add (or replace) a checkpoint and index its channel versions."""
        key = (entry.checkpoint_ns, entry.checkpoint_id)
        if key not in self.checkpoints:
            bisect.insort(
                self.ordered.setdefault(entry.checkpoint_ns, []), entry.checkpoint_id
            )
        self.checkpoints[key] = entry
        for channel, digest in entry.channels.items():
            version = entry.versions.get(channel)
            if version is not None:
                self.versions[(entry.checkpoint_ns, channel, version)] = digest

    def hide(self, checkpoint_ns: str, checkpoint_id: str) -> None:
        """Drop a checkpoint and its writes from view."""
        key = (checkpoint_ns, checkpoint_id)
        if self.checkpoints.pop(key, None) is not None:
            ids = self.ordered[checkpoint_ns]
            del ids[bisect.bisect_left(ids, checkpoint_id)]
            if not ids:
                del self.ordered[checkpoint_ns]
        self.writes.pop(key, None)

    def add_write(
        self, checkpoint_ns: str, checkpoint_id: str, entry: WriteEntry
    ) -> None:
        """Add a write; a regular write already held for its key is kept."""
        writes = self.writes.setdefault((checkpoint_ns, checkpoint_id), {})
        key = (entry.task_id, entry.idx)
        if entry.idx < 0 or key not in writes:
            writes[key] = entry

    def latest(self, checkpoint_ns: str) -> CheckpointEntry | None:
        """Return the namespace's checkpoint with the highest id."""
        ids = self.ordered.get(checkpoint_ns)
        return self.checkpoints[(checkpoint_ns, ids[-1])] if ids else None


@dataclass(slots=True)
class TraceIndex:
    """Every thread's index, the value records by digest, and the log cursor."""

    cursor: int = -1
    threads: dict[str, ThreadIndex] = field(default_factory=dict)
    values: dict[str, str] = field(default_factory=dict)
    tips: dict[str, str] = field(default_factory=dict)
    rejected: list[RejectedRecord] = field(default_factory=list)
    heads: dict[str, int] = field(default_factory=dict)
    """Owner path -> its next ordinal, for the ``langgraph:`` paths (what a
    guarded append expects: see ``GoatherdSaver``)."""
    erased: dict[str, int] = field(default_factory=dict)
    """Value digest -> how many of its value records were erased (a value
    stored again after an erasure carries this as its ``generation``, so that
    its record gets a new id)."""

    def fold(self, entry: LogEntry) -> None:
        """Fold one log entry (entries arrive in log order, each once)."""
        self.fold_item(FoldItem.of(entry))

    def fold_item(self, item: FoldItem) -> None:
        """Fold one path entry (in log order, each once)."""
        self.cursor = max(self.cursor, item.position)
        if item.owner.startswith(_OWN_PATHS):
            self.heads[item.owner] = item.ordinal + 1
        fold = _FOLDS.get(item.schema_ref)
        if fold is None or item.redacted:
            # An erased record (ADR 0063) has no payload to fold: its thread
            # was deleted before it was erased.
            return
        try:
            fold(self, item)
        except (MalformedValueError, KeyError, TypeError, ValueError) as error:
            reason = str(error) or type(error).__name__
            _LOG.warning("langgraph: ignoring record %s: %s", item.record_id, reason)
            self.rejected.append(RejectedRecord(item.record_id, item.owner, reason))

    def thread(self, thread_id: str) -> ThreadIndex | None:
        """Return a thread's index (``None``: nothing visible)."""
        return self.threads.get(thread_id)


def _str(payload: Mapping[str, object], key: str) -> str:
    value = payload.get(key)
    if not isinstance(value, str):
        raise MalformedValueError(f"{key!r} must be a string")
    return value


def _opt_str(payload: Mapping[str, object], key: str) -> str | None:
    value = payload.get(key)
    if value is not None and not isinstance(value, str):
        raise MalformedValueError(f"{key!r} must be a string or null")
    return value


def _blob(payload: Mapping[str, object], key: str) -> Blob:
    value = payload.get(key)
    if not isinstance(value, dict):
        raise MalformedValueError(f"{key!r} must be an object")
    return Blob(
        _str(value, "type"), base64.b64decode(_str(value, "data"), validate=True)
    )


def _str_map(
    payload: Mapping[str, object], key: str, *, nullable: bool
) -> dict[str, str | None]:
    value = payload.get(key)
    if not isinstance(value, dict):
        raise MalformedValueError(f"{key!r} must be an object")
    for item in value.values():
        if not (isinstance(item, str) or (nullable and item is None)):
            raise MalformedValueError(f"{key!r} values must be strings")
    return dict(value)


def _fold_checkpoint(index: TraceIndex, item: FoldItem) -> None:
    payload = item.payload
    thread_id = _str(payload, "thread_id")
    namespace = _str(payload, "checkpoint_ns")
    checkpoint_id = _str(payload, "checkpoint_id")
    versions = _str_map(payload, "versions", nullable=False)
    checkpoint = CheckpointEntry(
        record_id=item.record_id,
        owner=item.owner,
        thread_id=thread_id,
        checkpoint_ns=namespace,
        checkpoint_id=checkpoint_id,
        parent_id=_opt_str(payload, "parent_checkpoint_id"),
        checkpoint=_blob(payload, "checkpoint"),
        metadata=_blob(payload, "metadata"),
        channels=_str_map(payload, "channels", nullable=True),
        versions={k: v for k, v in versions.items() if v is not None},
    )
    index.threads.setdefault(checkpoint.thread_id, ThreadIndex()).add_checkpoint(
        checkpoint
    )
    index.tips[checkpoint.owner] = checkpoint.checkpoint_id


def _write_entry(
    record_id: str, task_id: str, task_path: str, write: Mapping[str, object]
) -> WriteEntry:
    idx = write.get("idx")
    if not isinstance(idx, int) or isinstance(idx, bool):
        raise MalformedValueError("'idx' must be an integer")
    value = write.get("value")
    held: Blob | str
    if isinstance(value, dict) and "ref" in value:
        held = _str(value, "ref")
    else:
        held = _blob(write, "value")
    return WriteEntry(
        record_id=record_id,
        task_id=task_id,
        task_path=task_path,
        idx=idx,
        channel=_str(write, "channel"),
        value=held,
    )


def _fold_write(index: TraceIndex, item: FoldItem) -> None:
    payload = item.payload
    write = _write_entry(
        item.record_id,
        _str(payload, "task_id"),
        _str(payload, "task_path"),
        payload,
    )
    thread = index.threads.setdefault(_str(payload, "thread_id"), ThreadIndex())
    thread.add_write(
        _str(payload, "checkpoint_ns"), _str(payload, "checkpoint_id"), write
    )


def _fold_writes(index: TraceIndex, item: FoldItem) -> None:
    """A task's writes of one ``put_writes`` call, in one record, in order."""
    payload = item.payload
    task_id, task_path = _str(payload, "task_id"), _str(payload, "task_path")
    listed = payload.get("writes")
    if not isinstance(listed, list) or not all(isinstance(w, dict) for w in listed):
        raise MalformedValueError("'writes' must be a list of objects")
    entries = [_write_entry(item.record_id, task_id, task_path, w) for w in listed]
    namespace = _str(payload, "checkpoint_ns")
    checkpoint_id = _str(payload, "checkpoint_id")
    thread = index.threads.setdefault(_str(payload, "thread_id"), ThreadIndex())
    for entry in entries:
        thread.add_write(namespace, checkpoint_id, entry)


def _fold_value(index: TraceIndex, item: FoldItem) -> None:
    digest = _str(item.payload, "digest")
    index.values.setdefault(digest, item.record_id)


def _fold_thread_deleted(index: TraceIndex, item: FoldItem) -> None:
    index.threads.pop(_str(item.payload, "thread_id"), None)


def _fold_hidden(index: TraceIndex, item: FoldItem) -> None:
    payload = item.payload
    hidden = payload.get("checkpoints")
    if not isinstance(hidden, list):
        raise MalformedValueError("'checkpoints' must be a list")
    pairs = []
    for pair in hidden:
        if not (
            isinstance(pair, list)
            and len(pair) == 2
            and all(isinstance(x, str) for x in pair)
        ):
            raise MalformedValueError("'checkpoints' must hold [ns, id] pairs")
        pairs.append((pair[0], pair[1]))
    thread = index.threads.get(_str(payload, "thread_id"))
    if thread is not None:
        for ns, checkpoint_id in pairs:
            thread.hide(ns, checkpoint_id)


def _fold_values_erased(index: TraceIndex, item: FoldItem) -> None:
    erased = item.payload.get("values")
    if not isinstance(erased, list):
        raise MalformedValueError("'values' must be a list")
    for pair in erased:
        if not (
            isinstance(pair, list)
            and len(pair) == 2
            and all(isinstance(x, str) for x in pair)
        ):
            raise MalformedValueError("'values' must hold [digest, record id] pairs")
        digest, record_id = pair
        if index.values.get(digest) == record_id:
            del index.values[digest]
        index.erased[digest] = index.erased.get(digest, 0) + 1


_FOLDS: Final = {
    SCHEMA_CHECKPOINT: _fold_checkpoint,
    SCHEMA_WRITE: _fold_write,
    SCHEMA_WRITES: _fold_writes,
    SCHEMA_VALUE: _fold_value,
    SCHEMA_THREAD_DELETED: _fold_thread_deleted,
    SCHEMA_CHECKPOINTS_HIDDEN: _fold_hidden,
    SCHEMA_VALUES_ERASED: _fold_values_erased,
}
