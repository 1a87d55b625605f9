"""What the runtime reads per command: a cheap tail check, heads it saw itself.

A catch-up with nothing new is one read of the log's last position (SQLite);
a decision whose view is still the log's tail appends with the heads the
model saw instead of reading them. Another writer's commit sends the model
back to the log and the store, so every cross-process guarantee holds.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event

from goatherd.application.ports import SandboxSpec
from goatherd.infrastructure.bootstrap import runtime_model_for, scope_manager_for
from goatherd.infrastructure.sandbox.memory import MemorySandbox, MemorySandboxConfig
from goatherd.infrastructure.store import (
    SqlAlchemyTraceStore,
    SQLiteTraceStore,
    open_trace_store,
)
from tests.integration.runtime.support import fresh_postgres_database


def _sandbox() -> MemorySandbox:
    sandbox = MemorySandbox(MemorySandboxConfig(files={"a.txt": b"1\n"}))
    sandbox.create(SandboxSpec())
    return sandbox


def _statements(store: SqlAlchemyTraceStore) -> list[str]:
    """Collect the SQL every SQLAlchemy execution on ``store``'s engine sends."""
    seen: list[str] = []

    def record(_conn: Any, _cursor: Any, statement: str, *_rest: Any) -> None:
        seen.append(statement)

    event.listen(store.engine, "before_cursor_execute", record)
    return seen


@pytest.fixture
def trace_file(tmp_path: Path) -> Path:
    return tmp_path / "trace.db"


def test_a_cycle_by_the_only_writer_reads_neither_the_log_nor_path_heads(
    trace_file: Path,
) -> None:
    with SQLiteTraceStore(trace_file) as store:
        mgr = scope_manager_for(store)
        parent = mgr.create("agent:main", _sandbox()).unwrap()
        seen = _statements(store)
        for i in range(3):
            child = mgr.fork(parent.id, f"try-{i}").unwrap()
            out = mgr.seal(child.id).unwrap()
            mgr.settle(out.id, "selected").unwrap()
        reads = [s for s in seen if "path_entries" in s or "owner_ordinals" in s]
        assert reads == []
        assert mgr.get(parent.id) is not None
        assert [s.state.value for s in mgr.all_scopes()][1:] == ["merged"] * 3


def test_another_writers_commit_is_read_by_the_next_catch_up(
    trace_file: Path,
) -> None:
    with SQLiteTraceStore(trace_file) as first, SQLiteTraceStore(trace_file) as other:
        mine, theirs = scope_manager_for(first), scope_manager_for(other)
        mine.create("root").unwrap()
        assert mine.get("scope:root") is not None
        theirs.fork("scope:root", "kid").unwrap()  # mine has not seen it yet
        kid = mine.get("scope:kid")
        assert kid is not None
        # A decision after the other's commit reads the heads and commits.
        mine.inject("scope:kid", "hello").unwrap()
        assert theirs.get("scope:kid") is not None
        schemas = [e.record.envelope.schema_ref for e in other.read_path("kid")]
        assert schemas[-1] == "goatherd.supervisor.inject.v1"


def test_a_model_that_skipped_other_schemas_reads_the_heads_it_did_not_see(
    trace_file: Path,
) -> None:
    with SQLiteTraceStore(trace_file) as store:
        mgr = scope_manager_for(store)
        mgr.create("root").unwrap()
        mgr.append_fact("scope:root", "agent.note.v1", "note", {"n": 1}).unwrap()
    attempts: list[str] = []

    def count(boundary: str, intent: str) -> None:
        if boundary == "before-commit":
            attempts.append(intent)

    with SQLiteTraceStore(trace_file) as store:
        # A new model folds only the runtime's schemas: the note on root's
        # path is skipped, so root's head is read, not guessed (no refusal).
        mgr = scope_manager_for(store, faults=count)
        mgr.inject("scope:root", "after a restart").unwrap()
        assert len(attempts) == 1
        mgr.fork("scope:root", "kid").unwrap()
        assert len(attempts) == 2


def test_a_head_taken_from_the_model_goes_stale_and_the_decision_decides_again(
    trace_file: Path,
) -> None:
    with SQLiteTraceStore(trace_file) as first, SQLiteTraceStore(trace_file) as other:
        theirs = scope_manager_for(other)
        moved: list[str] = []

        def race(boundary: str, intent: str) -> None:
            # After the tail check vouched for root's head, before the append.
            if boundary == "before-commit" and not moved:
                moved.append(theirs.inject("scope:root", "first").unwrap())

        scope_manager_for(first).create("root").unwrap()
        mine = scope_manager_for(first, faults=race)
        mine.inject("scope:root", "second").unwrap()
        texts = [e.record.payload.get("guidance") for e in first.read_path("root")]
        assert texts[-2:] == ["first", "second"]
        # The refused append made the model read the heads again; the next
        # command is back on heads it saw itself.
        model = runtime_model_for(first)
        position = first.max_position()
        assert model.vouched_heads(["root"]) == (position, {"root": len(texts)})


def test_the_cheap_tail_is_the_last_committed_position(trace_file: Path) -> None:
    with SQLiteTraceStore(trace_file) as store, SQLiteTraceStore(trace_file) as other:
        assert store.cheap_tail() == -1
        scope_manager_for(store).create("root").unwrap()
        assert store.cheap_tail() == store.max_position()
        scope_manager_for(other).fork("scope:root", "kid").unwrap()
        assert store.cheap_tail() == other.max_position() == store.max_position()


@pytest.fixture
def postgres_url() -> Iterator[str]:
    with fresh_postgres_database() as url:
        yield url


@pytest.mark.postgres
def test_postgres_has_no_cheap_tail_and_reads_the_log(postgres_url: str) -> None:
    with open_trace_store(postgres_url) as store:
        assert store.cheap_tail() is None
        mgr = scope_manager_for(store)
        parent = mgr.create("agent:main", _sandbox()).unwrap()
        child = mgr.fork(parent.id, "try").unwrap()
        mgr.settle(mgr.seal(child.id).unwrap().id, "selected").unwrap()
        assert [s.state.value for s in mgr.all_scopes()] == ["active", "merged"]
