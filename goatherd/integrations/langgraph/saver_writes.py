"""The saver's write path: ``put`` and ``put_writes``.

``CheckpointWrites`` records a checkpoint (its new channel values once each,
then the checkpoint on its path) and a task's pending writes (inline or as
value records, chunked), each decided on the index and appended with guarded
heads. The helpers that compare a put or a write with what is held and that
size write records live here too. Imports ``saver_core``, ``saver_config``
and ``saver_drafts``.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Final

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    get_serializable_checkpoint_metadata,
)

from goatherd.integrations.langgraph.index import (
    SCHEMA_CHECKPOINT,
    SCHEMA_WRITE,
    SCHEMA_WRITES,
    CheckpointEntry,
    ThreadIndex,
    WriteEntry,
)
from goatherd.integrations.langgraph.paths import namespace_path, thread_path
from goatherd.integrations.langgraph.saver_config import (
    _configurable,
    _id_field,
    _namespace,
)
from goatherd.integrations.langgraph.saver_core import SaverCore
from goatherd.integrations.langgraph.saver_drafts import _blob_json, _Drafts
from goatherd.integrations.langgraph.values import encode_blob

__all__ = [
    "CheckpointWrites",
    "version_key",
]


def version_key(version: object) -> str:
    """Return the key a channel version is indexed under (type and text)."""
    return f"{type(version).__name__}:{version}"


class CheckpointWrites(SaverCore):
    """The write path of ``GoatherdSaver``: checkpoints and pending writes."""

    # ------------------------------------------------------------------ put

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Record ``checkpoint``: new channel values once each, then the checkpoint."""
        configurable = _configurable(config, "put")
        thread_id = _id_field(configurable, "thread_id", "put")
        namespace = _namespace(configurable)
        parent_id = configurable.get("checkpoint_id")
        checkpoint_id = str(checkpoint["id"])
        key = (namespace, checkpoint_id)

        def write() -> None:
            thread = self._index.thread(thread_id) or ThreadIndex()
            parent = (
                thread.checkpoints.get((namespace, str(parent_id)))
                if parent_id is not None
                else None
            )
            drafts = _Drafts(self._index)
            channels, versions = self._channels(
                checkpoint, new_versions, namespace, thread, parent, drafts
            )
            payload = {
                "thread_id": thread_id,
                "checkpoint_ns": namespace,
                "checkpoint_id": checkpoint_id,
                "parent_checkpoint_id": None if parent_id is None else str(parent_id),
                **serialized,
                "channels": channels,
                "versions": versions,
            }
            if _already_stored(thread.checkpoints.get(key), payload):
                return
            drafts.add(
                SCHEMA_CHECKPOINT,
                payload,
                parents=[parent.record_id] if parent else [],
                values=[d for d in channels.values() if d is not None],
            )
            owner = self._placement(thread_id, namespace, parent, checkpoint_id)
            guard = {thread_path(thread_id), owner}
            if parent is not None:
                guard.add(parent.owner)
            self._append({owner: drafts.drafts}, sorted(guard))

        with self._lock:
            serialized = self._serialized(config, checkpoint, metadata)
            if parent_id is not None:
                self._read_unless_known(thread_id, namespace, str(parent_id))
            self._guarded(write)
        return {
            "configurable": {
                "thread_id": thread_id,
                "checkpoint_ns": namespace,
                "checkpoint_id": checkpoint_id,
            }
        }

    def _serialized(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
    ) -> dict[str, object]:
        stored = {k: v for k, v in checkpoint.items() if k != "channel_values"}
        stored["channel_values"] = {}
        meta = get_serializable_checkpoint_metadata(config, metadata)
        return {
            "checkpoint": _blob_json(self._cache.blob(self.serde, stored)),
            "metadata": _blob_json(self._cache.blob(self.serde, meta)),
            "summary": _summary(meta),
        }

    def _channels(
        self,
        checkpoint: Checkpoint,
        new_versions: ChannelVersions,
        namespace: str,
        thread: ThreadIndex,
        parent: CheckpointEntry | None,
        drafts: _Drafts,
    ) -> tuple[dict[str, str | None], dict[str, str]]:
        values = checkpoint.get("channel_values") or {}
        all_versions = {**checkpoint.get("channel_versions", {}), **new_versions}
        channels: dict[str, str | None] = {}
        versions: dict[str, str] = {}
        for channel, version in all_versions.items():
            key = version_key(version)
            if channel not in new_versions:
                known = thread.versions.get((namespace, channel, key), _MISSING)
                if known is not _MISSING:
                    channels[channel], versions[channel] = known, key  # type: ignore[assignment]
                    continue
                if channel not in values:
                    continue
            versions[channel] = key
            if channel not in values:
                channels[channel] = None
                continue
            base = parent.channels.get(channel) if parent else None
            channels[channel] = drafts.add_value(
                self._cache.encode(self.serde, values[channel], base)
            )
        return channels, versions

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Record each pending write of ``task_id`` (a repeated write is kept once)."""
        configurable = _configurable(config, "put_writes")
        thread_id = _id_field(configurable, "thread_id", "put_writes")
        namespace = _namespace(configurable)
        checkpoint_id = _id_field(configurable, "checkpoint_id", "put_writes")

        def write() -> None:
            thread = self._index.thread(thread_id) or ThreadIndex()
            entry = thread.checkpoints.get((namespace, checkpoint_id))
            held_now = {
                key: _write_form(w)
                for key, w in thread.writes.get((namespace, checkpoint_id), {}).items()
            }
            drafts = _Drafts(self._index)
            kept: builtins.list[tuple[dict[str, object], builtins.list[str]]] = []
            for position, (channel, value) in enumerate(writes):
                key = (str(task_id), WRITES_IDX_MAP.get(channel, position))
                if key in held_now and key[1] >= 0:
                    continue  # a regular write is kept once
                held, refs = self._write_json(value, drafts)
                form = (channel, task_path, held)
                if held_now.get(key) == form:
                    continue  # the same special write again
                held_now[key] = form
                kept.append(({"idx": key[1], "channel": channel, "value": held}, refs))
            head = {
                "thread_id": thread_id,
                "checkpoint_ns": namespace,
                "checkpoint_id": checkpoint_id,
                "task_id": str(task_id),
                "task_path": task_path,
            }
            parents = [entry.record_id] if entry else []
            for chunk in _write_chunks(kept, self.limits.chunk_bytes):
                refs = [r for _, chunk_refs in chunk for r in chunk_refs]
                if len(chunk) == 1:
                    payload = {**head, **chunk[0][0]}
                    drafts.add(SCHEMA_WRITE, payload, parents=parents, values=refs)
                else:
                    payload = {**head, "writes": [w for w, _ in chunk]}
                    drafts.add(SCHEMA_WRITES, payload, parents=parents, values=refs)
            main = namespace_path(thread_id, namespace)
            owner = entry.owner if entry else main
            # Writes of a checkpoint land on its path, or on the namespace's
            # main path when the writer did not know the checkpoint.
            guard = {thread_path(thread_id), owner, main}
            self._append({owner: drafts.drafts}, sorted(guard))

        with self._lock:
            self._read_unless_known(thread_id, namespace, checkpoint_id)
            self._guarded(write)

    def _write_json(
        self, value: Any, drafts: _Drafts
    ) -> tuple[dict[str, object], builtins.list[str]]:
        blob = self._cache.blob(self.serde, value)
        if len(blob.data) <= self.limits.inline_item_bytes:
            return _blob_json(blob), []
        digest = drafts.add_value(encode_blob(blob, self.limits))
        return {"ref": digest}, [digest]


_MISSING: Final = object()


def _already_stored(entry: CheckpointEntry | None, payload: Mapping[str, Any]) -> bool:
    """Whether a put repeats the visible checkpoint ``entry`` exactly."""
    return (
        entry is not None
        and entry.parent_id == payload["parent_checkpoint_id"]
        and _blob_json(entry.checkpoint) == payload["checkpoint"]
        and _blob_json(entry.metadata) == payload["metadata"]
        and dict(entry.channels) == payload["channels"]
        and dict(entry.versions) == payload["versions"]
    )


def _write_form(entry: WriteEntry) -> tuple[str, str, Mapping[str, object]]:
    """A held write as (channel, task path, stored value) for comparison."""
    value = entry.value
    held = {"ref": value} if isinstance(value, str) else _blob_json(value)
    return (entry.channel, entry.task_path, held)


def _write_chunks(
    kept: Sequence[tuple[dict[str, object], builtins.list[str]]], limit: int
) -> Iterator[Sequence[tuple[dict[str, object], builtins.list[str]]]]:
    """Split a call's writes into records of at most ``limit`` inline bytes."""
    start, size = 0, 0
    for n, (write, _) in enumerate(kept):
        value = write["value"]
        data = value.get("data", "") if isinstance(value, dict) else ""
        grown = size + len(str(data))
        if n > start and grown > limit:
            yield kept[start:n]
            start, grown = n, len(str(data))
        size = grown
    if start < len(kept):
        yield kept[start:]


def _summary(metadata: Mapping[str, Any]) -> dict[str, object]:
    """The metadata fields a trace reader wants to see without deserializing."""
    out: dict[str, object] = {}
    for key in ("source", "step", "run_id"):
        value = metadata.get(key)
        if isinstance(value, str) or (
            isinstance(value, int) and not isinstance(value, bool)
        ):
            out[key] = value
    return out
