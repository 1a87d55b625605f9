"""A saver that wrote everything since its last read does not read the log again.

``put`` and ``put_writes`` decide on the saver's index and append with the
heads of the paths the decision depends on guarded (ADR 0079): the index
folds the saver's own records from the receipt when their log positions
follow its cursor, and reads the log only when someone else appended in
between. These tests pin the three halves: no read, the same index as a fresh
fold, and a decision taken again when another saver wrote first.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import Checkpoint, empty_checkpoint
from langgraph.checkpoint.base.id import uuid6

from goatherd.domain.log import LogEntry
from goatherd.infrastructure.store import SqlAlchemyTraceStore, open_trace_store
from goatherd.integrations.langgraph import (
    SCHEMA_CHECKPOINT,
    SCHEMA_WRITE,
    SCHEMA_WRITES,
    GoatherdSaver,
    fork_path,
    namespace_path,
)


def _config(thread: str, checkpoint_id: str | None = None) -> RunnableConfig:
    configurable: dict[str, Any] = {"thread_id": thread, "checkpoint_ns": ""}
    if checkpoint_id is not None:
        configurable["checkpoint_id"] = checkpoint_id
    return {"configurable": configurable}


def _checkpoint(n: int) -> Checkpoint:
    cp = empty_checkpoint()
    cp["id"] = str(uuid6(clock_seq=-1))
    cp["channel_values"] = {"n": n, "m": [f"message {i}" for i in range(n)]}
    cp["channel_versions"] = {"n": n + 1, "m": n + 1}
    return cp


def _step(saver: GoatherdSaver, thread: str, parent: str | None, n: int) -> str:
    stored = saver.put(
        _config(thread, parent), _checkpoint(n), {"step": n}, {"n": n + 1, "m": n + 1}
    )
    checkpoint_id = str(stored["configurable"]["checkpoint_id"])
    saver.put_writes(
        _config(thread, checkpoint_id),
        [("m", [f"message {n}"]), ("n", n + 1), ("branch:to:step", None)],
        f"task-{n}",
    )
    return checkpoint_id


def _records(store: SqlAlchemyTraceStore, *schemas: str) -> list[Any]:
    return [
        e.record
        for e in store.read_log(-1, 1_000_000)
        if e.record.envelope.schema_ref in schemas
    ]


def test_puts_and_writes_read_no_log_when_the_saver_wrote_everything(
    trace_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = open_trace_store(trace_url)
    try:
        saver = GoatherdSaver(store)
        assert saver.get_tuple(_config("t")) is None  # the first call folds the log
        reads: list[int] = []
        real = store.read_log

        def counted(*args: Any, **kwargs: Any) -> tuple[LogEntry, ...]:
            reads.append(1)  # the real store still answers
            return real(*args, **kwargs)

        monkeypatch.setattr(store, "read_log", counted)
        parent = None
        for n in range(10):
            parent = _step(saver, "t", parent, n)
        assert reads == []
        latest = saver.get_tuple(_config("t"))
        assert latest is not None
        assert latest.checkpoint["channel_values"]["n"] == 9
        assert [w[1] for w in latest.pending_writes or []] == [
            "m",
            "n",
            "branch:to:step",
        ]
    finally:
        store.close()


def test_the_index_of_own_appends_equals_a_fresh_fold_of_the_log(
    trace_url: str,
) -> None:
    stores = [open_trace_store(trace_url) for _ in range(2)]
    try:
        writer = GoatherdSaver(stores[0])
        parents: dict[str, str | None] = {"a": None, "b": None, "c": None}
        for n in range(6):
            for thread in parents:
                parents[thread] = _step(writer, thread, parents[thread], n)
        writer.prune(["a"])
        writer.delete_thread("b")
        writer.copy_thread("c", "d")
        fresh = GoatherdSaver(stores[1])
        assert fresh.rejected_records == ()  # folds the whole log
        assert writer._index == fresh._index
        # A call's writes share one record; a single write keeps its own shape.
        assert len(_records(stores[1], SCHEMA_WRITES)) == 18
    finally:
        for store in stores:
            store.close()


def test_a_saver_decides_again_when_another_saver_wrote_since_its_last_read(
    trace_url: str,
) -> None:
    stores = [open_trace_store(trace_url) for _ in range(2)]
    try:
        stale, other = GoatherdSaver(stores[0]), GoatherdSaver(stores[1])
        first = _step(stale, "t", None, 0)
        assert other.get_tuple(_config("t")) is not None
        second = _step(other, "t", first, 1)
        # ``stale`` still holds ``first`` as the tip of the root path: its
        # append is refused on that head, it reads ``second`` and forks.
        third = _step(stale, "t", first, 2)
        placed = {
            r.payload["checkpoint_id"]: r.trace_owner_id
            for r in _records(stores[0], SCHEMA_CHECKPOINT)
        }
        assert placed == {
            first: namespace_path("t", ""),
            second: namespace_path("t", ""),
            third: fork_path("t", "", third),
        }
        # The same (task, idx) written by both: the first in the log is kept,
        # and the saver that came second appends nothing.
        other.put_writes(_config("t", third), [("x", "from other")], "task-x")
        before = len(_records(stores[0], SCHEMA_WRITE, SCHEMA_WRITES))
        stale.put_writes(_config("t", third), [("x", "from stale")], "task-x")
        assert len(_records(stores[0], SCHEMA_WRITE, SCHEMA_WRITES)) == before
        for saver in (stale, other, GoatherdSaver(stores[0])):
            got = saver.get_tuple(_config("t", third))
            assert got is not None
            assert ("task-x", "x", "from other") in (got.pending_writes or [])
    finally:
        for store in stores:
            store.close()


def test_a_savers_appends_share_one_retained_context(trace_url: str) -> None:
    store = open_trace_store(trace_url)
    try:
        saver = GoatherdSaver(store)
        parent = None
        for n in range(5):
            parent = _step(saver, "t", parent, n)
        contexts = {
            r.retained_context_ref
            for r in _records(store, SCHEMA_CHECKPOINT, SCHEMA_WRITES, SCHEMA_WRITE)
        }
        # The first append stores the context; the other nine reuse it by id.
        assert len(contexts) == 1
        assert store.read_log(-1, 1_000_000)[-1].record.retained_context_ref in contexts
        # A second saver on its own store of the same trace (as in another
        # process) stores its own context once.
        second = open_trace_store(trace_url)
        try:
            other = GoatherdSaver(second)
            _step(other, "u", None, 0)
            _step(other, "u", None, 1)
        finally:
            second.close()
        contexts = {
            r.retained_context_ref
            for r in _records(store, SCHEMA_CHECKPOINT, SCHEMA_WRITES, SCHEMA_WRITE)
        }
        assert len(contexts) == 2
    finally:
        store.close()
