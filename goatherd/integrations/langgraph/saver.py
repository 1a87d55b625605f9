"""``GoatherdSaver``: a LangGraph checkpointer whose storage is a goatherd trace.

Every checkpoint, every pending write and every distinct channel value is a
record on the thread's owner paths (see ``paths``); deletion and pruning are
records that hide what came before them. The saver keeps no state of its own
beyond an index folded from the trace's log (see ``index``) and caches of
immutable value records, so any number of savers, in any number of processes,
can share one trace.

The class is assembled here from its parts: ``saver_core`` (state, index,
appends), ``saver_reads`` (``get_tuple``, ``list``), ``saver_writes``
(``put``, ``put_writes``) and ``saver_threads`` (deletion, erasure, pruning,
copies); this module adds opening a trace by URL and the async methods.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
)

from goatherd.infrastructure.store import open_trace_store
from goatherd.integrations.langgraph.index import RejectedRecord
from goatherd.integrations.langgraph.saver_config import CheckpointConfigError
from goatherd.integrations.langgraph.saver_reads import CheckpointReads
from goatherd.integrations.langgraph.saver_threads import (
    PRUNE_STRATEGIES,
    ThreadOperations,
)
from goatherd.integrations.langgraph.saver_writes import CheckpointWrites
from goatherd.integrations.langgraph.value_cache import MissingValueError

__all__ = [
    "CheckpointConfigError",
    "GoatherdSaver",
    "MissingValueError",
    "PRUNE_STRATEGIES",
]


class GoatherdSaver(CheckpointReads, CheckpointWrites, ThreadOperations):
    """A LangGraph checkpointer over a goatherd trace (SQLite or PostgreSQL).

    Use :meth:`from_url` to open a trace by path or URL, or pass an open
    store. Thread-safe; the async methods run the sync ones on a worker
    thread. Channel values are serialized with the saver's ``serde`` and
    stored once per distinct value; a list that grows stores only its new
    items (LangGraph's reducers build new lists from the old items, which the
    saver recognizes by identity or equality; mutating an item of a stored
    list in place is not detected).

    Args:
        store: the trace store (the saver does not close it).
        serde: LangGraph's serializer (default: ``JsonPlusSerializer``).
        limits: record size bounds for values.
        append_context: the authority appends are made under.
        read_context: the authority reads are made under.
    """

    @classmethod
    @contextmanager
    def from_url(
        cls, url: str | os.PathLike[str], **kwargs: Any
    ) -> Iterator[GoatherdSaver]:
        """Open the trace at ``url`` (a path or SQLAlchemy URL), closing it after."""
        store = open_trace_store(url)
        try:
            yield cls(store, **kwargs)
        finally:
            store.close()

    @property
    def rejected_records(self) -> tuple[RejectedRecord, ...]:
        """Records with the saver's schemas that it ignored, and why."""
        with self._lock:
            self._catch_up()
            return tuple(self._index.rejected)

    # ----------------------------------------------------------------- async

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """Async :meth:`get_tuple` (runs on a worker thread)."""
        return await asyncio.to_thread(self.get_tuple, config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,  # LangGraph's name
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """Async :meth:`list` (each tuple is built on a worker thread)."""
        items = self.list(config, filter=filter, before=before, limit=limit)
        while (item := await asyncio.to_thread(next, items, None)) is not None:
            yield item

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Async :meth:`put` (runs on a worker thread)."""
        return await asyncio.to_thread(
            self.put, config, checkpoint, metadata, new_versions
        )

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Async :meth:`put_writes` (runs on a worker thread)."""
        await asyncio.to_thread(self.put_writes, config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        """Async :meth:`delete_thread` (runs on a worker thread)."""
        await asyncio.to_thread(self.delete_thread, thread_id)

    async def aerase_thread(self, thread_id: str, reason: str) -> tuple[str, ...]:
        """Async :meth:`erase_thread` (runs on a worker thread)."""
        return await asyncio.to_thread(self.erase_thread, thread_id, reason)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Async :meth:`delete_for_runs` (runs on a worker thread)."""
        await asyncio.to_thread(self.delete_for_runs, run_ids)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Async :meth:`copy_thread` (runs on a worker thread)."""
        await asyncio.to_thread(self.copy_thread, source_thread_id, target_thread_id)

    async def aprune(
        self, thread_ids: Sequence[str], *, strategy: str = "keep_latest"
    ) -> None:
        """Async :meth:`prune` (runs on a worker thread)."""
        await asyncio.to_thread(lambda: self.prune(thread_ids, strategy=strategy))
