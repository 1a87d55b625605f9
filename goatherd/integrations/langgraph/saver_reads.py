"""The saver's read path: ``get_tuple`` and ``list``.

``CheckpointReads`` finds checkpoints in the index and builds LangGraph's
``CheckpointTuple`` from them, deserializing channel values (through the
value cache) and pending writes. Imports ``saver_core`` and ``saver_config``.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import Checkpoint, CheckpointTuple, get_checkpoint_id

from goatherd.integrations.langgraph.index import (
    CheckpointEntry,
    ThreadIndex,
    WriteEntry,
)
from goatherd.integrations.langgraph.saver_config import (
    _configurable,
    _id_field,
    _namespace,
)
from goatherd.integrations.langgraph.saver_core import SaverCore

__all__ = [
    "CheckpointReads",
]


class CheckpointReads(SaverCore):
    """The read path of ``GoatherdSaver``: checkpoints as LangGraph tuples."""

    # ------------------------------------------------------------ get / list

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """Return the checkpoint ``config`` names, or its namespace's latest."""
        configurable = _configurable(config, "get_tuple")
        thread_id = _id_field(configurable, "thread_id", "get_tuple")
        namespace = _namespace(configurable)
        checkpoint_id = get_checkpoint_id(config)
        with self._lock:
            self._catch_up()
            thread = self._index.thread(thread_id)
            if thread is None:
                return None
            if checkpoint_id is None:
                entry = thread.latest(namespace)
            else:
                entry = thread.checkpoints.get((namespace, str(checkpoint_id)))
            return None if entry is None else self._tuple(thread, entry)

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,  # LangGraph's name
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """Yield matching checkpoints, newest (highest checkpoint id) first.

        The matches are fixed when iteration starts; each tuple is built (its
        values deserialized) only when it is reached.
        """
        with self._lock:
            self._catch_up()
            candidates = self._candidates(config, before)
        found = 0
        for thread, entry in candidates:
            if limit is not None and found >= limit:
                return
            with self._lock:
                item = self._matching_tuple(thread, entry, filter or {})
            if item is not None:
                found += 1
                yield item

    def _candidates(
        self, config: RunnableConfig | None, before: RunnableConfig | None
    ) -> builtins.list[tuple[ThreadIndex, CheckpointEntry]]:
        configurable = (config or {}).get("configurable") or {}
        threads: Iterable[ThreadIndex]
        if configurable.get("thread_id") is not None:
            found = self._index.thread(_id_field(configurable, "thread_id", "list"))
            threads = [found] if found else []
        else:
            threads = self._index.threads.values()
        namespace = configurable.get("checkpoint_ns")
        only_id = configurable.get("checkpoint_id")
        before_id = get_checkpoint_id(before) if before else None
        candidates = [
            (thread, entry)
            for thread in threads
            for entry in thread.checkpoints.values()
            if (namespace is None or entry.checkpoint_ns == namespace)
            and (only_id is None or entry.checkpoint_id == str(only_id))
            and (before_id is None or entry.checkpoint_id < str(before_id))
        ]
        candidates.sort(key=lambda pair: pair[1].checkpoint_id, reverse=True)
        return candidates

    def _matching_tuple(
        self, thread: ThreadIndex, entry: CheckpointEntry, wanted: Mapping[str, Any]
    ) -> CheckpointTuple | None:
        if wanted:
            metadata = self.serde.loads_typed(
                (entry.metadata.type, entry.metadata.data)
            )
            if any(metadata.get(k) != v for k, v in wanted.items()):
                return None
        return self._tuple(thread, entry)

    def _tuple(self, thread: ThreadIndex, entry: CheckpointEntry) -> CheckpointTuple:
        checkpoint: Checkpoint = self.serde.loads_typed(
            (entry.checkpoint.type, entry.checkpoint.data)
        )
        digests = [d for d in entry.channels.values() if d is not None]
        key = (entry.checkpoint_ns, entry.checkpoint_id)
        writes = sorted(thread.writes.get(key, {}).values(), key=lambda w: w.sort_key)
        digests += [w.value for w in writes if isinstance(w.value, str)]
        values = self._cache.values(self.serde, digests)
        checkpoint["channel_values"] = {
            channel: values[digest]
            for channel, digest in entry.channels.items()
            if digest is not None
        }
        config: RunnableConfig = {
            "configurable": {
                "thread_id": entry.thread_id,
                "checkpoint_ns": entry.checkpoint_ns,
                "checkpoint_id": entry.checkpoint_id,
            }
        }
        parent: RunnableConfig | None = None
        if entry.parent_id is not None:
            parent = {
                "configurable": {
                    "thread_id": entry.thread_id,
                    "checkpoint_ns": entry.checkpoint_ns,
                    "checkpoint_id": entry.parent_id,
                }
            }
        return CheckpointTuple(
            config=config,
            checkpoint=checkpoint,
            metadata=self.serde.loads_typed((entry.metadata.type, entry.metadata.data)),
            parent_config=parent,
            pending_writes=[
                (w.task_id, w.channel, self._write_value(w, values)) for w in writes
            ],
        )

    def _write_value(self, write: WriteEntry, values: Mapping[str, Any]) -> Any:
        if isinstance(write.value, str):
            return values[write.value]
        return self.serde.loads_typed((write.value.type, write.value.data))
