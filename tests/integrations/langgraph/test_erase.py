"""``erase_thread``: a deleted thread's payloads leave the database (ADR 0063).

On SQLite and PostgreSQL: the erased thread's checkpoint, write and value
bytes are gone from the database (the SQLite file and its WAL are grepped;
PostgreSQL's ``records`` table is searched), ``verify`` is green, LangGraph
cannot read the thread, and another thread sharing a value still reads it, in
this saver and in a saver that folds the trace afresh.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from goatherd.domain.records import REDACTION_SCHEMA_REF, Record
from goatherd.infrastructure.audit.verify import verify_trace
from goatherd.infrastructure.store import SqlAlchemyTraceStore, open_trace_store
from goatherd.integrations.langgraph import (
    SCHEMA_CHECKPOINT,
    SCHEMA_THREAD_DELETED,
    SCHEMA_VALUE,
    SCHEMA_VALUES_ERASED,
    SCHEMA_WRITE,
    GoatherdSaver,
)
from tests.integrations.langgraph.test_saver import config, put, records


@pytest.fixture
def store(trace_url: str) -> Iterator[SqlAlchemyTraceStore]:
    opened = open_trace_store(trace_url)
    yield opened
    opened.close()


def stored_form(saver: GoatherdSaver, value: Any) -> str:
    """The base64 text a value's serialized bytes take in a stored payload."""
    _, data = saver.serde.dumps_typed(value)
    return base64.b64encode(data).decode("ascii")


def in_database(store: SqlAlchemyTraceStore, needle: str) -> bool:
    url = store.engine.url
    if url.get_backend_name() == "sqlite":
        path = Path(str(url.database))
        data = b"".join(
            p.read_bytes()
            for p in (path, Path(f"{path}-wal"), Path(f"{path}-journal"))
            if p.exists()
        )
        return needle.encode() in data
    with store.engine.connect() as conn:
        count = conn.execute(
            text("SELECT count(*) FROM records WHERE body_json LIKE :n"),
            {"n": f"%{needle}%"},
        ).scalar()
    return bool(count)


def test_an_erased_thread_leaves_the_database_and_shared_values_stay(
    store: SqlAlchemyTraceStore,
) -> None:
    saver = GoatherdSaver(store)
    secret = f"secret-{uuid.uuid4().hex}-" + "x" * 200
    pending = f"pending-{uuid.uuid4().hex}"
    shared = f"shared-{uuid.uuid4().hex}-" + "y" * 200
    first = put(saver, "gone", None, {"s": shared}, {"s": 1}, {"s": 1})
    second = put(
        saver, "gone", first, {"s": shared, "x": secret}, {"s": 1, "x": 2}, {"x": 2}
    )
    saver.put_writes(config("gone", second), [("x", pending)], "task-1")
    put(saver, "keep", None, {"s": shared}, {"s": 1}, {"s": 1})
    needles = {v: stored_form(saver, v) for v in (secret, pending, shared)}
    assert all(in_database(store, n) for n in needles.values())
    head = store.trace_head()

    redactions = saver.erase_thread("gone", "user asked for erasure")

    assert len(redactions) == 1
    assert not in_database(store, needles[secret])
    assert not in_database(store, needles[pending])
    assert in_database(store, needles[shared])
    report = verify_trace(store)
    assert report.ok, report
    assert store.verify_chain(expect=head).ok
    for reader in (saver, GoatherdSaver(store)):
        assert reader.get_tuple(config("gone")) is None
        assert list(reader.list(config("gone"))) == []
        kept = reader.get_tuple(config("keep"))
        assert kept is not None
        assert kept.checkpoint["channel_values"] == {"s": shared}
        assert reader.rejected_records == ()
    # What stays: the records' ids and schemas, the deletion, the redaction.
    erased = {
        r.record_id
        for schema in (SCHEMA_CHECKPOINT, SCHEMA_WRITE, SCHEMA_VALUE)
        for r in records(store, schema)
        if r.redacted_by is not None
    }
    (redaction,) = records(store, REDACTION_SCHEMA_REF)
    assert redaction.record_id == redactions[0]
    assert sorted(erased) == redaction.payload["erased"]
    assert len(erased) == 4  # two checkpoints, a write, the secret's value
    assert [r.payload["thread_id"] for r in records(store, SCHEMA_THREAD_DELETED)] == [
        "gone"
    ]
    # The thread can start afresh, and an equal value be stored again (as a
    # new record: the erased one keeps its id), by this saver and a fresh one.
    put(saver, "gone", None, {"s": shared}, {"s": 1}, {"s": 1})
    assert saver.get_tuple(config("gone")) is not None
    for writer in (saver, GoatherdSaver(store)):
        thread = f"again-{uuid.uuid4().hex}"
        put(writer, thread, None, {"x": secret}, {"x": 1}, {"x": 1})
        again = GoatherdSaver(store).get_tuple(config(thread))
        assert again is not None
        assert again.checkpoint["channel_values"] == {"x": secret}
    assert verify_trace(store).ok
    # The erased value record itself stays erased.
    (value,) = [r for r in records(store, SCHEMA_VALUE) if r.redacted_by]
    assert value.record_id in redaction.payload["erased"]


def test_erasing_a_deleted_thread_erases_its_hidden_records_too(
    store: SqlAlchemyTraceStore,
) -> None:
    saver = GoatherdSaver(store)
    secret = f"old-{uuid.uuid4().hex}-" + "z" * 200
    first = put(saver, "t", None, {"x": secret}, {"x": 1}, {"x": 1})
    put(saver, "t", first, {"x": "newer"}, {"x": 2}, {"x": 2})
    saver.prune(["t"], strategy="keep_latest")
    saver.delete_thread("t")
    needle = stored_form(saver, secret)
    assert in_database(store, needle)
    saver.erase_thread("t", "retention period over")
    assert not in_database(store, needle)
    assert verify_trace(store).ok
    checkpoints = records(store, SCHEMA_CHECKPOINT)
    assert checkpoints
    assert all(isinstance(r, Record) and r.redacted_by for r in checkpoints)
    # Already deleted: no second deletion record; the erased values are named.
    assert len(records(store, SCHEMA_THREAD_DELETED)) == 1
    (named,) = records(store, SCHEMA_VALUES_ERASED)
    assert named.payload["reason"] == "retention period over"
