"""Every write to a side table is a step of the commit chain (ADR 0064).

The materialization ledger and the legacy checkpoint blob table sit beside the
trace. Each insert, replacement and deletion takes the next commit number from
the append commits' allocator and is chained like a commit, so plain
``verify`` names a single edited cell and a noted head covers the side rows.
A trace written before schema v3 (``fixtures/trace_v2.sqlite``, written by the
last v2 version: ``fixtures/make_trace_v2.py``) is chained once, by its first
writer; read-only openers compute the same head without writing.
"""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from goatherd.domain import TRUSTED_APPEND_CONTEXT
from goatherd.domain.errors import AppendIntentConflictError
from goatherd.domain.workspace import WorkspaceState
from goatherd.infrastructure.audit.verify import verify_trace
from goatherd.infrastructure.store import (
    SqlAlchemyTraceStore,
    SQLiteTraceStore,
    open_trace_store,
    open_trace_store_read_only,
)
from goatherd.infrastructure.store import postgres as pg
from goatherd.infrastructure.store.chain import SideContent, side_digest
from goatherd.infrastructure.store.schema import SCHEMA_V2, SCHEMA_VERSION
from goatherd.infrastructure.store.side import ledger_row_digest
from tests.infrastructure.backends import DURABLE_BACKENDS, backend_url
from tests.infrastructure.store.helpers import batch, draft

FIXTURE = Path(__file__).parent / "fixtures" / "trace_v2.sqlite"
LEDGER, BLOBS = "materialization_intents", "checkpoint_snapshots"
STATE = WorkspaceState("memory", "r1", {"files": {"a.txt": "one"}})


@pytest.fixture(params=DURABLE_BACKENDS)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    yield from backend_url(request.param, tmp_path)


def steps(store: SqlAlchemyTraceStore) -> list[tuple[int, str, str, bool]]:
    """``(commit_seq, table, key, row present)`` of every side step."""
    with store.engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT commit_seq, table_name, row_key, row_digest FROM side_writes "
                "ORDER BY commit_seq"
            )
        ).all()
    return [(int(s), t, k, d is not None) for s, t, k, d in rows]


def test_every_side_write_takes_the_next_commit_number(url: str) -> None:
    with open_trace_store(url) as store:
        store.append(TRUSTED_APPEND_CONTEXT, batch("a:0", "agent:a", draft(0)))
        store.record_completed_materialization("mat:1", "ab" * 32, "{}")
        store.record_completed_materialization("mat:1", "ab" * 32, "{}")  # no step
        with pytest.raises(AppendIntentConflictError):
            store.record_completed_materialization("mat:1", "cd" * 32, "{}")
        store.persist_checkpoint_blob("cp:1", "scope:s", 1, STATE, b"one", 1)
        store.append(TRUSTED_APPEND_CONTEXT, batch("a:1", "agent:a", draft(1)))
        store.persist_checkpoint_blob("cp:1", "scope:s", 1, STATE, b"two", 2)
        store.delete_checkpoint_blob("cp:1")
        store.delete_checkpoint_blob("cp:1")  # absent: no step
        assert steps(store) == [
            (1, LEDGER, "mat:1", True),
            (2, BLOBS, "cp:1", True),
            (4, BLOBS, "cp:1", True),
            (5, BLOBS, "cp:1", False),
        ]
        assert store.trace_head().commits == 6
        report = verify_trace(store)
        assert report.ok, report.problems
        assert store.verify_chain().unsealed == 0


def test_a_side_step_digest_is_not_an_append_commit_digest() -> None:
    step = SideContent(3, LEDGER, "mat:1", "sha256:" + "ab" * 32)
    other = SideContent(3, BLOBS, "mat:1", "sha256:" + "ab" * 32)
    deleted = SideContent(3, LEDGER, "mat:1", None)
    assert len({side_digest(step), side_digest(other), side_digest(deleted)}) == 3


def test_the_ledger_row_digest_covers_every_column() -> None:
    base = ("mat:1", "ab" * 32, "{}", "2026-12-01 00:00:00")
    digests = {ledger_row_digest(*base)}
    for index in range(4):
        changed = list(base)
        changed[index] += "x"
        digests.add(ledger_row_digest(*changed))
    assert len(digests) == 5


def test_a_rewrite_of_a_side_row_with_every_digest_recomputed_fails_only_against_a_noted_head(  # noqa: E501
    tmp_path: Path,
) -> None:
    path = tmp_path / "trace.sqlite"
    with SQLiteTraceStore(path) as store:
        store.append(TRUSTED_APPEND_CONTEXT, batch("a:0", "agent:a", draft(0)))
        store.record_completed_materialization("mat:1", "ab" * 32, "{}")
        store.append(TRUSTED_APPEND_CONTEXT, batch("a:1", "agent:a", draft(1)))
        noted = str(store.trace_head())
    forged = "cd" * 32
    with sqlite3.connect(path) as conn:
        seq, completed = conn.execute(
            "SELECT s.commit_seq, m.completed_at FROM side_writes s, "
            "materialization_intents m WHERE s.row_key = m.materialize_intent_id"
        ).fetchone()
        digest = ledger_row_digest("mat:1", forged, "{}", completed)
        conn.execute("UPDATE materialization_intents SET request_digest = ?", (forged,))
        conn.execute(
            "UPDATE side_writes SET row_digest = ?, commit_digest = ?, "
            "head_digest = NULL",
            (digest, side_digest(SideContent(seq, LEDGER, "mat:1", digest))),
        )
        conn.execute("UPDATE append_intents SET head_digest = NULL")
        conn.execute("DELETE FROM meta WHERE key = 'head'")
    with SQLiteTraceStore(path) as store:  # a writer relinks the whole chain
        store.seal()
    with open_trace_store_read_only(path) as store:
        assert verify_trace(store).ok
        report = verify_trace(store, expect_head=noted)
    assert report.expected_head is False


# ------------------------------------------------------ traces before v3


@pytest.fixture
def v2_file(tmp_path: Path) -> Path:
    path = tmp_path / "trace.sqlite"
    shutil.copy(FIXTURE, path)
    return path


def marker(path: Path) -> str:
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
        return str(
            conn.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()[0]
        )


def test_a_v2_trace_reads_as_it_is_with_its_side_rows_chained_in_memory(
    v2_file: Path,
) -> None:
    before = v2_file.read_bytes()
    with open_trace_store_read_only(v2_file) as store:
        head = store.trace_head()
        report = verify_trace(store)
        chain = store.verify_chain()
    assert report.ok, report.problems
    assert report.head == str(head)
    # 18 commits, then the ledger row and the one legacy checkpoint row left
    assert head.commits == 20
    assert chain.unsealed == 2
    assert v2_file.read_bytes() == before
    assert marker(v2_file) == SCHEMA_V2


def test_a_writer_chains_a_v2_trace_s_side_rows_once_at_the_end(
    v2_file: Path,
) -> None:
    with open_trace_store_read_only(v2_file) as old:
        computed = old.trace_head()
    with SQLiteTraceStore(v2_file) as store:
        assert marker(v2_file) == SCHEMA_VERSION
        assert steps(store) == [
            (18, BLOBS, "cp:agent:old:1", True),
            (19, LEDGER, "mat:1", True),
        ]
        assert store.trace_head() == computed
        assert store.verify_chain(expect=computed).ok
        assert store.verify_chain().unsealed == 0
        store.record_completed_materialization("mat:2", "ab" * 32, "{}")
        store.append(TRUSTED_APPEND_CONTEXT, batch("after:v3", "other", draft(1)))
        assert verify_trace(store, expect_head=computed).ok
    with SQLiteTraceStore(v2_file) as again:  # never chained twice
        assert len(steps(again)) == 3
        assert again.trace_head().commits == 22


def test_a_v2_side_row_edited_before_the_upgrade_is_what_the_upgrade_vouches_for(
    v2_file: Path,
) -> None:
    """Like ADR 0038 for v1: the upgrade vouches for the rows as it found them."""
    with open_trace_store_read_only(v2_file) as old:
        computed = old.trace_head()
    with sqlite3.connect(v2_file) as conn:
        conn.execute("UPDATE materialization_intents SET request_digest = 'x'")
    with SQLiteTraceStore(v2_file) as store:
        assert store.trace_head() != computed
        assert not verify_trace(store, expect_head=computed).ok


@pytest.mark.postgres
def test_a_v2_postgres_trace_is_upgraded_to_the_head_it_had(tmp_path: Path) -> None:
    """Drop the steps of a v3 trace whose side writes came last: a v2 trace.

    Its upgrade gives the side rows the same steps back, so the head is the
    one the trace had before.
    """
    for pg_url in backend_url("postgres", tmp_path):
        with open_trace_store(pg_url) as store:
            store.append(TRUSTED_APPEND_CONTEXT, batch("a:0", "agent:a", draft(0)))
            store.persist_checkpoint_blob("cp:1", "scope:s", 1, STATE, b"one", 1)
            store.record_completed_materialization("mat:1", "ab" * 32, "{}")
            before = store.trace_head()
            assert before.commits == 3
        _downgrade_to_v2(pg_url)
        with open_trace_store_read_only(pg_url) as old:
            assert old.trace_head() == before
            assert verify_trace(old).ok
        with open_trace_store(pg_url) as store:
            assert store.trace_head() == before
            assert [s[:3] for s in steps(store)] == [
                (1, BLOBS, "cp:1"),
                (2, LEDGER, "mat:1"),
            ]
            store.append(TRUSTED_APPEND_CONTEXT, batch("a:1", "agent:a", draft(1)))
            assert store.trace_head().commits == 4
            assert verify_trace(store, expect_head=before).ok


_V3_TOP = ",\n        (SELECT COALESCE(max(commit_seq), -1) FROM side_writes)"


def _downgrade_to_v2(pg_url: str) -> None:
    engine = create_engine(pg_url)
    with engine.begin() as conn:
        conn.execute(text("DROP TABLE side_writes"))
        # the readers' function as v2 installed it (no side_writes to look at)
        conn.exec_driver_sql(pg.DDL[3].replace(_V3_TOP, ""))
        last = conn.execute(
            text(
                "SELECT commit_seq, head_digest FROM append_intents "
                "ORDER BY commit_seq DESC LIMIT 1"
            )
        ).one()
        conn.execute(
            text("UPDATE meta SET value = :v WHERE key = 'head'"),
            {"v": f"{last[0] + 1} {last[1]}"},
        )
        conn.execute(
            text("UPDATE meta SET value = :v WHERE key = 'schema'"), {"v": SCHEMA_V2}
        )
        conn.execute(text("SELECT setval('goatherd_commits', :n)"), {"n": last[0]})
    engine.dispose()
