"""Traces in two schemas of one PostgreSQL database never hold each other back.

Readers stop below the first log position a writer still holds (ADR 0036);
only the allocations of their own trace may count. The test suite itself puts
many traces in one database (a schema each), and so may a user.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import psycopg
import pytest
from sqlalchemy.engine import make_url

from goatherd.domain.contexts import TRUSTED_APPEND_CONTEXT
from goatherd.domain.records import AppendBatch, AppendGroup, RecordDraft
from goatherd.infrastructure.store import open_trace_store
from goatherd.infrastructure.store.appending import _LOCK_SQL
from goatherd.infrastructure.store.postgres import lock_key
from tests.infrastructure.backends import _postgres_url

pytestmark = pytest.mark.postgres


@pytest.fixture
def two_traces() -> Iterator[tuple[str, str]]:
    first, second = _postgres_url(), _postgres_url()
    yield next(first), next(second)
    for urls in (first, second):
        next(urls, None)


def note(n: int) -> AppendBatch:
    draft = RecordDraft(mode="capture", schema_ref="test.note.v1", payload={"n": n})
    return AppendBatch(f"i:{n}", (AppendGroup("agent:a", fact_drafts=(draft,)),))


def test_an_append_held_open_in_another_schema_hides_nothing(
    two_traces: tuple[str, str],
) -> None:
    mine, other = two_traces
    with open_trace_store(other):  # creates the other trace's tables and functions
        pass
    with open_trace_store(mine) as store:
        for n in range(5):
            store.append(TRUSTED_APPEND_CONTEXT, note(n))
    url = make_url(other)
    dsn = url.set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(dsn) as held:  # a writer of the other trace, mid-commit
        held.execute("SELECT goatherd_allocate(1, 1)").fetchone()
        with open_trace_store(mine) as reader:
            assert reader.max_position() == 4
            assert [e.position for e in reader.read_log(-1, 10)] == [0, 1, 2, 3, 4]
            reader.append(TRUSTED_APPEND_CONTEXT, note(5))
            assert reader.max_position() == 5
        held.rollback()


@pytest.mark.timeout(120)
def test_a_writer_held_open_in_another_schema_makes_no_writer_here_wait(
    two_traces: tuple[str, str],
) -> None:
    """The same position, commit number and owner in two traces are two locks.

    Before, the allocation lock of a position was exclusive in the whole
    database: a fresh trace's first append waited for another trace's open
    transaction holding its own position 0 (and stalled every allocation).
    """
    mine, other = two_traces
    for trace in (mine, other):
        with open_trace_store(trace):  # tables and functions of both traces
            pass
    url = make_url(other)
    dsn = url.set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(dsn) as held:  # a writer of the other trace, mid-commit
        held.execute("SELECT goatherd_allocate(1, 1)").fetchone()
        held.execute(
            _LOCK_SQL.replace("?", "%s"), ([lock_key("o", "agent:a")],)
        ).fetchone()
        done: list[int] = []

        def append_here() -> None:
            with open_trace_store(mine) as store:
                store.append(TRUSTED_APPEND_CONTEXT, note(0))
                done.append(store.max_position())

        writer = threading.Thread(target=append_here, daemon=True)
        writer.start()
        writer.join(30)
        stalled = writer.is_alive()
        held.rollback()
        writer.join(30)
    assert not stalled, "the append waited for another trace's transaction"
    assert done == [0]


def test_a_new_trace_has_the_postgres_indexes_and_verify_counts_them_as_ours(
    two_traces: tuple[str, str],
) -> None:
    """The two PostgreSQL-only indexes are plain DDL, outside the metadata.

    The partial index keeps the unsealed tail cheap to find; both are created
    for a new trace and reopening keeps them, and ``verify`` does not name them
    as planted.
    """
    from goatherd.infrastructure.audit.verify import verify_trace

    trace, _ = two_traces
    for _ in range(2):  # creating, then reopening (install_postgres_functions)
        with open_trace_store(trace) as store:
            store.append(TRUSTED_APPEND_CONTEXT, note(0))
            with store.engine.connect() as conn:
                rows = conn.exec_driver_sql(
                    "SELECT indexname, indexdef FROM pg_indexes "
                    "WHERE schemaname = current_schema() "
                    "AND tablename = 'append_intents'"
                ).all()
            found = {str(name): str(definition) for name, definition in rows}
            assert verify_trace(store).problems == ()
    assert "WHERE (head_digest IS NULL)" in found["idx_append_intents_unsealed"]
    assert "(commit_seq)" in found["idx_append_intents_commit"]
