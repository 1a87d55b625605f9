"""GoatherdSaver's own promises, beyond LangGraph's conformance suite.

De-duplicated values (a changed channel stores only itself, a growing list only
its new items), bounded records, several savers on one trace, deletion and
pruning as records, bad input refused with one line, tampering detected,
foreign records ignored, and the core importing without LangGraph.
"""

from __future__ import annotations

import asyncio
import base64
import json
import operator
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import Checkpoint, empty_checkpoint
from langgraph.checkpoint.base.id import uuid6
from langgraph.checkpoint.serde.types import ERROR
from langgraph.graph import END, START, StateGraph

from goatherd.domain.contexts import TRUSTED_APPEND_CONTEXT
from goatherd.domain.errors import ReadOnlyStoreError
from goatherd.domain.records import AppendBatch, AppendGroup, RecordDraft
from goatherd.infrastructure.store import (
    SqlAlchemyTraceStore,
    open_trace_store,
    open_trace_store_read_only,
)
from goatherd.integrations.langgraph import (
    SCHEMA_CHECKPOINT,
    SCHEMA_CHECKPOINTS_HIDDEN,
    SCHEMA_THREAD_DELETED,
    SCHEMA_VALUE,
    SCHEMA_WRITE,
    SCHEMA_WRITES,
    CheckpointConfigError,
    GoatherdSaver,
    MalformedValueError,
    ValueLimits,
    namespace_path,
    thread_path,
)
from goatherd.integrations.langgraph.paths import MAX_OWNER_PATH

ROOT = Path(__file__).resolve().parents[3]


class Stores(list[SqlAlchemyTraceStore]):
    """Stores opened on one trace; each stands for another process."""

    def __init__(self, url: str) -> None:
        super().__init__()
        self.url = url

    def open(self) -> SqlAlchemyTraceStore:
        self.append(open_trace_store(self.url))
        return self[-1]


@pytest.fixture
def stores(trace_url: str) -> Iterator[Stores]:
    """Open stores on one trace (SQLite file, PostgreSQL); closed after the test."""
    opened = Stores(trace_url)
    yield opened
    for store in opened:
        store.close()


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Iterator[SqlAlchemyTraceStore]:
    store = open_trace_store(tmp_path / "trace.sqlite")
    yield store
    store.close()


def config(
    thread: str, checkpoint_id: str | None = None, ns: str = ""
) -> RunnableConfig:
    configurable: dict[str, Any] = {"thread_id": thread, "checkpoint_ns": ns}
    if checkpoint_id is not None:
        configurable["checkpoint_id"] = checkpoint_id
    return {"configurable": configurable}


def checkpoint(values: dict[str, Any], versions: Mapping[str, int]) -> Checkpoint:
    cp = empty_checkpoint()
    cp["id"] = str(uuid6(clock_seq=-1))
    cp["channel_values"] = values
    cp["channel_versions"] = dict(versions)
    return cp


def records(store: SqlAlchemyTraceStore, schema: str) -> list[Any]:
    return [
        e.record
        for e in store.read_log(-1, 1_000_000)
        if e.record.envelope.schema_ref == schema
    ]


def put(
    saver: GoatherdSaver,
    thread: str,
    parent: str | None,
    values: dict[str, Any],
    versions: dict[str, int],
    new: dict[str, str | int | float],
) -> str:
    stored = saver.put(
        config(thread, parent), checkpoint(values, versions), {"step": 0}, new
    )
    return str(stored["configurable"]["checkpoint_id"])


def test_a_step_that_changes_one_channel_stores_only_that_value(
    stores: Stores,
) -> None:
    store = stores.open()
    saver = GoatherdSaver(store)
    big_a, big_b = "a" * 5000, "b" * 5000
    first = put(
        saver,
        "t",
        None,
        {"a": big_a, "b": big_b, "c": big_a},
        {"a": 1, "b": 1, "c": 1},
        {"a": 1, "b": 1, "c": 1},
    )
    # "a" and "c" hold one value: stored once.
    assert len(records(store, SCHEMA_VALUE)) == 2
    second = put(
        saver,
        "t",
        first,
        {"a": "changed", "b": big_b, "c": big_a},
        {"a": 2, "b": 1, "c": 1},
        {"a": 2},
    )
    values = records(store, SCHEMA_VALUE)
    assert len(values) == 3
    changed = base64.b64decode(values[-1].payload["data"])
    assert saver.serde.loads_typed((values[-1].payload["type"], changed)) == "changed"
    fresh = GoatherdSaver(stores.open())
    got = fresh.get_tuple(config("t", second))
    assert got is not None
    assert got.checkpoint["channel_values"] == {"a": "changed", "b": big_b, "c": big_a}
    old = fresh.get_tuple(config("t", first))
    assert old is not None
    assert old.checkpoint["channel_values"] == {"a": big_a, "b": big_b, "c": big_a}


def test_a_growing_list_stores_one_small_record_per_step(stores: Stores) -> None:
    store = stores.open()
    saver = GoatherdSaver(store)
    messages: list[dict[str, Any]] = []
    ids: list[str] = []
    parent = None
    for step in range(60):
        messages = [*messages, {"role": "ai", "text": f"message {step} " * 10}]
        parent = put(
            saver,
            "t",
            parent,
            {"messages": messages, "n": step},
            {"messages": step + 1, "n": step + 1},
            {"messages": step + 1, "n": step + 1},
        )
        ids.append(parent)
    nodes = [
        r.payload for r in records(store, SCHEMA_VALUE) if r.payload["kind"] == "list"
    ]
    assert len(nodes) == 60
    assert all(len(n["items"]) == 1 for n in nodes)
    assert [n["length"] for n in nodes] == list(range(1, 61))
    fresh = GoatherdSaver(stores.open())
    for step in (59, 0, 31):
        got = fresh.get_tuple(config("t", ids[step]))
        assert got is not None
        assert got.checkpoint["channel_values"]["messages"] == messages[: step + 1]


def test_a_list_that_is_not_an_extension_is_stored_whole(
    sqlite_store: SqlAlchemyTraceStore,
) -> None:
    saver = GoatherdSaver(sqlite_store)
    first = put(saver, "t", None, {"m": [1, 2, 3]}, {"m": 1}, {"m": 1})
    second = put(saver, "t", first, {"m": [9, 2, 3, 4]}, {"m": 2}, {"m": 2})
    nodes = [r.payload for r in records(sqlite_store, SCHEMA_VALUE)]
    assert [n["base"] for n in nodes] == [None, None]
    got = GoatherdSaver(sqlite_store).get_tuple(config("t", second))
    assert got is not None
    assert got.checkpoint["channel_values"]["m"] == [9, 2, 3, 4]


def test_every_record_stays_bounded_and_values_round_trip(
    sqlite_store: SqlAlchemyTraceStore,
) -> None:
    limits = ValueLimits(chunk_bytes=1024, inline_item_bytes=256, max_list_items=4)
    saver = GoatherdSaver(sqlite_store, limits=limits)
    blob = bytes(range(256)) * 40
    items = [f"item {i} " * (1 if i % 3 else 60) for i in range(23)]
    first = put(
        saver,
        "t",
        None,
        {"blob": blob, "items": items},
        {"blob": 1, "items": 1},
        {"blob": 1, "items": 1},
    )
    saver.put_writes(config("t", first), [("items", "w" * 5000)], "task-1")
    bound = limits.chunk_bytes * 4 // 3 + 600
    for record in records(sqlite_store, SCHEMA_VALUE):
        assert len(json.dumps(record.payload)) <= bound, record.payload["kind"]
    kinds = {r.payload["kind"] for r in records(sqlite_store, SCHEMA_VALUE)}
    assert kinds == {"part", "chunked", "list", "blob"}
    fresh = GoatherdSaver(sqlite_store, limits=limits)
    got = fresh.get_tuple(config("t", first))
    assert got is not None
    assert got.checkpoint["channel_values"] == {"blob": blob, "items": items}
    assert got.pending_writes == [("task-1", "items", "w" * 5000)]


def test_savers_on_one_trace_see_each_others_checkpoints(stores: Stores) -> None:
    one, two = GoatherdSaver(stores.open()), GoatherdSaver(stores.open())
    first = put(one, "t", None, {"x": [1]}, {"x": 1}, {"x": 1})
    second = put(two, "t", first, {"x": [1, 2]}, {"x": 2}, {"x": 2})
    latest = one.get_tuple(config("t"))
    assert latest is not None
    assert latest.checkpoint["id"] == second
    assert latest.checkpoint["channel_values"] == {"x": [1, 2]}
    two.delete_thread("t")
    assert one.get_tuple(config("t")) is None


def test_threads_writing_concurrently_lose_nothing(
    sqlite_store: SqlAlchemyTraceStore,
) -> None:
    saver = GoatherdSaver(sqlite_store)

    def work(thread: str) -> None:
        parent = None
        for step in range(15):
            parent = put(
                saver,
                thread,
                parent,
                {"v": list(range(step))},
                {"v": step + 1},
                {"v": step + 1},
            )

    workers = [threading.Thread(target=work, args=(f"t{i}",)) for i in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    fresh = GoatherdSaver(sqlite_store)
    for i in range(4):
        history = list(fresh.list(config(f"t{i}")))
        assert len(history) == 15
        assert history[0].checkpoint["channel_values"] == {"v": list(range(14))}


def test_deletion_hides_the_thread_and_records_why(
    sqlite_store: SqlAlchemyTraceStore,
) -> None:
    saver = GoatherdSaver(sqlite_store)
    first = put(saver, "t", None, {"x": "secret"}, {"x": 1}, {"x": 1})
    saver.put_writes(config("t", first), [("x", "w")], "task")
    before = sqlite_store.max_position()
    saver.delete_thread("t", reason="user asked for erasure")
    assert saver.get_tuple(config("t")) is None
    assert list(saver.list(config("t"))) == []
    deleted = records(sqlite_store, SCHEMA_THREAD_DELETED)
    assert [(r.trace_owner_id, r.payload["reason"]) for r in deleted] == [
        (thread_path("t"), "user asked for erasure")
    ]
    assert deleted[0].envelope.caused_by_record_ids == (
        records(sqlite_store, SCHEMA_CHECKPOINT)[0].record_id,
    )
    # Append-only: what was hidden is still in the trace.
    assert len(records(sqlite_store, SCHEMA_CHECKPOINT)) == 1
    assert len(records(sqlite_store, SCHEMA_WRITE)) == 1
    assert sqlite_store.max_position() == before + 1
    again = put(saver, "t", None, {"x": "new"}, {"x": 1}, {"x": 1})
    latest = GoatherdSaver(sqlite_store).get_tuple(config("t"))
    assert latest is not None
    assert latest.checkpoint["id"] == again
    assert latest.pending_writes == []


def test_prune_keep_latest_records_the_hidden_checkpoints(
    sqlite_store: SqlAlchemyTraceStore,
) -> None:
    saver = GoatherdSaver(sqlite_store)
    ids = []
    parent = None
    for step in range(3):
        parent = put(saver, "t", parent, {"x": step}, {"x": step + 1}, {"x": step + 1})
        ids.append(parent)
    saver.prune(["t"])
    hidden = records(sqlite_store, SCHEMA_CHECKPOINTS_HIDDEN)
    assert [h.payload["reason"] for h in hidden] == ["prune:keep_latest"]
    assert hidden[0].payload["checkpoints"] == [["", ids[0]], ["", ids[1]]]
    assert [t.checkpoint["id"] for t in GoatherdSaver(sqlite_store).list(None)] == [
        ids[2]
    ]


def test_a_fork_from_an_old_checkpoint_gets_its_own_path(
    sqlite_store: SqlAlchemyTraceStore,
) -> None:
    saver = GoatherdSaver(sqlite_store)
    a = put(saver, "t", None, {"x": 1}, {"x": 1}, {"x": 1})
    b = put(saver, "t", a, {"x": 2}, {"x": 2}, {"x": 2})
    c = put(saver, "t", a, {"x": 3}, {"x": 3}, {"x": 3})
    d = put(saver, "t", c, {"x": 4}, {"x": 4}, {"x": 4})
    owners = {
        r.payload["checkpoint_id"]: r.trace_owner_id
        for r in records(sqlite_store, SCHEMA_CHECKPOINT)
    }
    main = namespace_path("t", "")
    assert owners[a] == owners[b] == main
    assert owners[c] == owners[d] == f"{main}:fork={c}"
    fork_first = next(
        r
        for r in records(sqlite_store, SCHEMA_CHECKPOINT)
        if r.payload["checkpoint_id"] == c
    )
    parent = next(
        r
        for r in records(sqlite_store, SCHEMA_CHECKPOINT)
        if r.payload["checkpoint_id"] == a
    )
    assert parent.record_id in fork_first.envelope.caused_by_record_ids


@pytest.mark.parametrize(
    ("thread", "ns"),
    [("a:b", "child:1|grand:2"), ("x" * 5000, "n" * 5000), ("é ✓ %41", "")],
)
def test_any_thread_id_maps_to_a_bounded_path(
    sqlite_store: SqlAlchemyTraceStore, thread: str, ns: str
) -> None:
    saver = GoatherdSaver(sqlite_store)
    first = put(saver, thread, None, {"x": 1}, {"x": 1}, {"x": 1})
    saver.put(config(thread, first, ns), checkpoint({"y": 2}, {"y": 1}), {}, {"y": 1})
    owners = {r.trace_owner_id for r in records(sqlite_store, SCHEMA_CHECKPOINT)}
    assert all(len(o) <= MAX_OWNER_PATH for o in owners)
    assert all(o.count(":") == 2 for o in owners)
    got = GoatherdSaver(sqlite_store).get_tuple(config(thread, ns=ns))
    assert got is not None
    assert got.checkpoint["channel_values"] == {"y": 2}
    assert got.config["configurable"]["thread_id"] == thread


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda s: s.put({}, checkpoint({}, {}), {}, {}),
            "put needs config['configurable']",
        ),
        (
            lambda s: s.put(
                config("t") | {"configurable": {}}, checkpoint({}, {}), {}, {}
            ),
            "put needs config['configurable']['thread_id']",
        ),
        (
            lambda s: s.get_tuple({"configurable": {"thread_id": ["t"]}}),
            "config['configurable']['thread_id'] must be a string, got list",
        ),
        (
            lambda s: s.get_tuple(
                {"configurable": {"thread_id": "t", "checkpoint_ns": 3}}
            ),
            "config['configurable']['checkpoint_ns'] must be a string, got int",
        ),
        (
            lambda s: s.put_writes(config("t"), [("c", 1)], "task"),
            "put_writes needs config['configurable']['checkpoint_id']",
        ),
        (
            lambda s: s.prune(["t"], strategy="all"),
            "prune strategy must be one of keep_latest, delete, got 'all'",
        ),
    ],
)
def test_bad_input_is_refused_with_one_line_and_writes_nothing(
    sqlite_store: SqlAlchemyTraceStore, call: Any, message: str
) -> None:
    saver = GoatherdSaver(sqlite_store)
    with pytest.raises((CheckpointConfigError, ValueError)) as raised:
        call(saver)
    assert str(raised.value) == message
    assert "\n" not in str(raised.value)
    assert sqlite_store.max_position() == -1


def test_an_edited_value_record_is_detected(tmp_path: Path) -> None:
    path = tmp_path / "trace.sqlite"
    with GoatherdSaver.from_url(path) as saver:
        first = put(saver, "t", None, {"x": "original"}, {"x": 1}, {"x": 1})
    original = base64.b64encode(saver.serde.dumps_typed("original")[1]).decode()
    forged = base64.b64encode(saver.serde.dumps_typed("forgery!")[1]).decode()
    with sqlite3.connect(path) as conn:
        # Edit the stored body in place, whatever its layout: the store's
        # record id no longer matches, and neither does the value's digest.
        changed = conn.execute(
            "UPDATE records SET body_json = replace(body_json, ?, ?)"
            " WHERE schema_ref = ?",
            (original, forged, SCHEMA_VALUE),
        ).rowcount
    assert changed == 1
    with (
        GoatherdSaver.from_url(path) as saver,
        pytest.raises(MalformedValueError) as raised,
    ):
        saver.get_tuple(config("t", first))
    assert "the bytes do not match the digest" in str(raised.value)


def test_foreign_records_with_the_saver_schemas_are_ignored_and_listed(
    sqlite_store: SqlAlchemyTraceStore,
) -> None:
    saver = GoatherdSaver(sqlite_store)
    first = put(saver, "t", None, {"x": 1}, {"x": 1}, {"x": 1})
    junk = RecordDraft(
        mode="capture",
        schema_ref=SCHEMA_CHECKPOINT,
        payload={"thread_id": "t", "checkpoint_id": 7},
    )
    other = RecordDraft(mode="capture", schema_ref="someone.else.v1", payload={"x": 1})
    group = AppendGroup(namespace_path("t", ""), fact_drafts=(junk, other))
    sqlite_store.append(TRUSTED_APPEND_CONTEXT, AppendBatch("junk", (group,)))
    rejected = saver.rejected_records
    assert [(r.owner, r.reason) for r in rejected] == [
        (namespace_path("t", ""), "'checkpoint_ns' must be a string")
    ]
    got = saver.get_tuple(config("t"))
    assert got is not None
    assert got.checkpoint["id"] == first


def test_the_core_imports_without_langgraph() -> None:
    code = (
        "import sys\n"
        "for name in ('langgraph', 'langchain_core'):\n"
        "    sys.modules[name] = None\n"
        "import goatherd, goatherd.cli, goatherd.integrations\n"
        "try:\n"
        "    import goatherd.integrations.langgraph\n"
        "except ImportError as error:\n"
        "    print('refused:', error)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("refused:")
    assert "langgraph" in done.stdout or "langchain_core" in done.stdout


def test_an_async_graph_runs_on_the_saver(sqlite_store: SqlAlchemyTraceStore) -> None:
    Chat = TypedDict("Chat", {"log": Annotated[list[str], operator.add]})  # noqa: UP013

    async def reply(state: Any) -> dict[str, list[str]]:
        return {"log": [f"reply {len(state['log'])}"]}

    builder = StateGraph(Chat)
    builder.add_node("reply", reply)
    builder.add_edge(START, "reply")
    builder.add_edge("reply", END)
    graph = builder.compile(checkpointer=GoatherdSaver(sqlite_store))
    thread: RunnableConfig = {"configurable": {"thread_id": "async"}}

    async def run() -> tuple[list[str], int]:
        await graph.ainvoke({"log": ["hi"]}, thread)
        out = await graph.ainvoke({"log": ["again"]}, thread)
        history = [s async for s in graph.aget_state_history(thread)]
        return out["log"], len(history)

    log, steps = asyncio.run(run())
    assert log == ["hi", "reply 1", "again", "reply 3"]
    assert steps == 6
    stored = GoatherdSaver(sqlite_store).get_tuple(thread)
    assert stored is not None
    assert stored.checkpoint["channel_values"]["log"] == log


def test_a_read_only_trace_serves_reads_and_refuses_writes(tmp_path: Path) -> None:
    path = tmp_path / "trace.sqlite"
    with GoatherdSaver.from_url(path) as saver:
        first = put(saver, "t", None, {"x": [1, 2]}, {"x": 1}, {"x": 1})
    store = open_trace_store_read_only(path)
    try:
        reader = GoatherdSaver(store)
        got = reader.get_tuple(config("t"))
        assert got is not None
        assert got.checkpoint["channel_values"] == {"x": [1, 2]}
        with pytest.raises(ReadOnlyStoreError):
            put(reader, "t", first, {"x": [1, 2, 3]}, {"x": 2}, {"x": 2})
    finally:
        store.close()


def test_repeating_a_put_or_a_special_write_appends_nothing(
    sqlite_store: SqlAlchemyTraceStore,
) -> None:
    saver = GoatherdSaver(sqlite_store)
    cp = checkpoint({"x": [1]}, {"x": 1})
    stored = saver.put(config("t"), cp, {"step": 1}, {"x": 1})
    saver.put_writes(stored, [(ERROR, "boom"), ("x", 2)], "task")
    before = sqlite_store.max_position()
    assert saver.put(config("t"), cp, {"step": 1}, {"x": 1}) == stored
    saver.put_writes(stored, [(ERROR, "boom"), ("x", 2)], "task")
    assert sqlite_store.max_position() == before
    saver.put_writes(stored, [(ERROR, "another")], "task")
    assert sqlite_store.max_position() == before + 1
    got = saver.get_tuple(stored)
    assert got is not None
    assert got.pending_writes == [("task", ERROR, "another"), ("task", "x", 2)]


def test_a_list_read_back_after_a_restart_still_grows_by_its_new_items(
    stores: Stores,
) -> None:
    writer = GoatherdSaver(stores.open())
    first = put(writer, "t", None, {"m": ["a", "b"]}, {"m": 1}, {"m": 1})
    restarted = GoatherdSaver(stores.open())
    latest = restarted.get_tuple(config("t"))
    assert latest is not None
    grown = [*latest.checkpoint["channel_values"]["m"], "c"]
    put(restarted, "t", first, {"m": grown}, {"m": 2}, {"m": 2})
    nodes = [r.payload for r in records(stores[0], SCHEMA_VALUE)]
    assert [(n["base"] is None, len(n["items"])) for n in nodes] == [
        (True, 2),
        (False, 1),
    ]
    # A list that differs from the stored one is stored whole.
    put(restarted, "t", first, {"m": ["x", "b", "c"]}, {"m": 3}, {"m": 3})
    nodes = [r.payload for r in records(stores[0], SCHEMA_VALUE)]
    assert (nodes[-1]["base"], len(nodes[-1]["items"])) == (None, 3)


def test_special_writes_in_one_call_apply_in_order(
    sqlite_store: SqlAlchemyTraceStore,
) -> None:
    saver = GoatherdSaver(sqlite_store)
    stored = saver.put(config("t"), checkpoint({}, {}), {}, {})
    saver.put_writes(stored, [(ERROR, 1)], "task")
    saver.put_writes(stored, [(ERROR, 0), (ERROR, 1), (ERROR, 1)], "task")
    got = GoatherdSaver(sqlite_store).get_tuple(stored)
    assert got is not None
    assert got.pending_writes == [("task", ERROR, 1)]
    # Three writes stored: the first call's, then the second call's two
    # changes (its repeat is dropped) in one record, in their order.
    (single,) = records(sqlite_store, SCHEMA_WRITE)
    (both,) = records(sqlite_store, SCHEMA_WRITES)
    assert single.payload["idx"] == -1
    assert [w["idx"] for w in both.payload["writes"]] == [-1, -1]
