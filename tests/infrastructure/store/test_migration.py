"""Schema v1 traces open: read as they are, upgraded to v2 by a writer, atomically.

The fixture ``fixtures/trace_v1.sqlite`` was written by the code of commit
a1ccf92 (the last v1 version; ``fixtures/make_trace_v1.py`` shows how): a demo
session with scopes, checkpoints, settlement and event-store snapshots, plus a
cut, a materialization ledger row, an empty batch, non-ASCII and DEL payloads
and projection tables.
"""

from __future__ import annotations

import multiprocessing
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text

from goatherd.domain import (
    TRUSTED_APPEND_CONTEXT,
    TRUSTED_READ_CONTEXT,
    NotATraceStoreError,
)
from goatherd.infrastructure.audit.verify import verify_trace
from goatherd.infrastructure.store import (
    SQLiteTraceStore,
    open_trace_store,
    open_trace_store_read_only,
)
from goatherd.infrastructure.store.schema import SCHEMA_V1, SCHEMA_VERSION
from tests.infrastructure.backends import backend_url
from tests.infrastructure.store.helpers import EVERYTHING, batch, draft

FIXTURE = Path(__file__).parent / "fixtures" / "trace_v1.sqlite"
V1_TABLES = (
    "append_intents",
    "contexts",
    "records",
    "record_edges",
    "path_entries",
    "owner_ordinals",
    "frontiers",
    "materialization_intents",
    "checkpoint_snapshots",
)


@pytest.fixture
def v1_file(tmp_path: Path) -> Path:
    path = tmp_path / "trace.sqlite"
    shutil.copy(FIXTURE, path)
    return path


def rows(path: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Every v1 column of every v1 table, sorted (what must survive an upgrade)."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        out: dict[str, list[tuple[Any, ...]]] = {}
        for table in V1_TABLES:
            cursor = conn.execute(f"SELECT * FROM {table} LIMIT 0")
            names = [
                d[0]
                for d in cursor.description
                if d[0] not in ("commit_seq", "commit_digest", "head_digest", "txid")
            ]
            sql = f"SELECT {', '.join(names)} FROM {table}"
            out[table] = sorted(conn.execute(sql).fetchall(), key=repr)
        out["meta"] = sorted(
            conn.execute(
                "SELECT key, value FROM meta WHERE key = 'next_commit_seq'"
            ).fetchall()
        )
        return out
    finally:
        conn.close()


def marker(path: Path) -> str:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return str(
            conn.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()[0]
        )
    finally:
        conn.close()


class TestReadingAV1File:
    def test_the_read_only_opener_reads_it_without_changing_a_byte(
        self, v1_file: Path
    ) -> None:
        before = v1_file.read_bytes()
        with open_trace_store_read_only(v1_file) as store:
            log = store.read_log(limit=10_000)
            assert len(log) == 59
            assert store.read_owner_prefix(TRUSTED_READ_CONTEXT, "fixture:a", 9)
            assert store.fact_count() == 48
        assert v1_file.read_bytes() == before
        assert marker(v1_file) == SCHEMA_V1


class TestUpgradingAV1File:
    def test_a_writer_upgrades_it_keeping_every_row_and_every_answer(
        self, v1_file: Path
    ) -> None:
        before = rows(v1_file)
        with open_trace_store_read_only(v1_file) as old:
            old_log = old.read_log(limit=10_000)
            old_prefix = old.read_owner_prefix(
                TRUSTED_READ_CONTEXT, "fixture:a", EVERYTHING
            )
            old_cut = old.read_owner_cutoff("fixture:cut")
        with SQLiteTraceStore(v1_file) as store:
            assert marker(v1_file) == SCHEMA_VERSION
            assert rows(v1_file) == before
            assert store.read_log(limit=10_000) == old_log
            assert (
                store.read_owner_prefix(TRUSTED_READ_CONTEXT, "fixture:a", EVERYTHING)
                == old_prefix
            )
            assert store.read_owner_cutoff("fixture:cut") == old_cut
            report = verify_trace(store)
            assert report.ok, report.problems

    def test_the_upgraded_tables_are_clustered_and_lose_the_redundant_index(
        self, v1_file: Path
    ) -> None:
        SQLiteTraceStore(v1_file).close()
        conn = sqlite3.connect(v1_file)
        sql = dict(conn.execute("SELECT name, sql FROM sqlite_master"))
        conn.close()
        for table in ("path_entries", "contexts", "meta", "owner_ordinals"):
            assert sql[table].rstrip().endswith("WITHOUT ROWID"), table
        assert "UNIQUE (commit_receipt)" not in sql["path_entries"]
        assert "idx_path_entries_record" in sql
        assert "idx_path_entries_position" in sql

    def test_intents_get_commit_numbers_in_the_order_v1_committed_them(
        self, v1_file: Path
    ) -> None:
        conn = sqlite3.connect(v1_file)
        order = [
            r[0]
            for r in conn.execute(
                "SELECT append_intent_id FROM append_intents ORDER BY rowid"
            )
        ]
        conn.close()
        SQLiteTraceStore(v1_file).close()
        conn = sqlite3.connect(v1_file)
        numbered = conn.execute(
            "SELECT append_intent_id, commit_seq FROM append_intents "
            "ORDER BY commit_seq"
        ).fetchall()
        conn.close()
        assert [intent for intent, _ in numbered] == order
        assert [seq for _, seq in numbered] == list(range(len(order)))

    def test_appends_continue_after_the_upgrade_and_old_intents_replay(
        self, v1_file: Path
    ) -> None:
        with SQLiteTraceStore(v1_file) as store:
            stored = store.read_append_intent("fixture:two")
            assert stored is not None
            receipt = store.append(
                TRUSTED_APPEND_CONTEXT, batch("after", "fixture:a", draft("new"))
            )
            assert receipt.commit_receipts == ("commit:59",)
            assert receipt.owner_ordinal_ranges == {"fixture:a": (4, 4)}
            assert store.max_position() == 59
            assert verify_trace(store).ok
        conn = sqlite3.connect(v1_file)
        # after 43 commits and the upgrade's 2 side steps (ADR 0064)
        assert conn.execute(
            "SELECT commit_seq FROM append_intents WHERE append_intent_id = 'after'"
        ).fetchone() == (45,)
        conn.close()

    def test_a_failed_upgrade_leaves_the_file_as_it_was(self, v1_file: Path) -> None:
        conn = sqlite3.connect(v1_file)
        # a row breaking a foreign key: the upgrade's final check refuses it
        conn.execute(
            "INSERT INTO record_edges VALUES ('sha256:nowhere', 0, 'sha256:nobody')"
        )
        conn.commit()
        conn.close()
        before = rows(v1_file)
        with pytest.raises(NotATraceStoreError, match="foreign key"):
            SQLiteTraceStore(v1_file)
        assert marker(v1_file) == SCHEMA_V1
        assert rows(v1_file) == before

    def test_two_processes_opening_it_at_once_upgrade_it_once(
        self, v1_file: Path
    ) -> None:
        ctx = multiprocessing.get_context("spawn")
        with ctx.Pool(2) as pool:
            heads = pool.map(
                _open_and_append, [(str(v1_file), "w1"), (str(v1_file), "w2")]
            )
        assert sorted(heads) == [("fixture:w1", 1), ("fixture:w2", 1)]
        with SQLiteTraceStore(v1_file) as store:
            assert store.max_position() == 60
            assert verify_trace(store).ok


def _open_and_append(args: tuple[str, str]) -> tuple[str, int]:
    path, name = args
    with SQLiteTraceStore(path) as store:
        owner = f"fixture:{name}"
        store.append(TRUSTED_APPEND_CONTEXT, batch(f"i-{name}", owner, draft(name)))
        return owner, store.head(owner)


class TestSchemaMarkers:
    @pytest.mark.parametrize("value", ["goatherd.trace.v9", ""])
    def test_a_writer_refuses_an_unknown_marker_and_writes_nothing(
        self, tmp_path: Path, value: str
    ) -> None:
        path = tmp_path / "trace.sqlite"
        SQLiteTraceStore(path).close()
        conn = sqlite3.connect(path)
        conn.execute("UPDATE meta SET value = ? WHERE key = 'schema'", (value,))
        conn.commit()
        conn.close()
        before = path.read_bytes()
        with pytest.raises(NotATraceStoreError, match="schema marker"):
            SQLiteTraceStore(path)
        with pytest.raises(NotATraceStoreError, match="schema marker"):
            open_trace_store_read_only(path)
        assert path.read_bytes() == before


# ---------------------------------------------------------------- PostgreSQL


@pytest.fixture
def postgres_url(tmp_path: Path) -> Iterator[str]:
    yield from backend_url("postgres", tmp_path)


def _downgrade_to_v1(url: str) -> None:
    """Turn a fresh v2 database back into the v1 layout the last version wrote."""
    engine = create_engine(url)
    with engine.begin() as conn:
        for column in ("commit_seq", "commit_digest", "head_digest", "txid"):
            conn.execute(text(f"ALTER TABLE append_intents DROP COLUMN {column}"))
        conn.execute(text("ALTER TABLE path_entries DROP COLUMN txid"))
        conn.execute(
            text(
                "ALTER TABLE path_entries ADD CONSTRAINT "
                "path_entries_commit_receipt_key UNIQUE (commit_receipt)"
            )
        )
        conn.execute(text("DROP FUNCTION goatherd_allocate(integer, integer)"))
        conn.execute(text("DROP SEQUENCE goatherd_positions"))
        conn.execute(text("DROP SEQUENCE goatherd_commits"))
        conn.execute(text("DELETE FROM meta WHERE key = 'head'"))
        conn.execute(
            text(f"UPDATE meta SET value = '{SCHEMA_V1}' WHERE key = 'schema'")
        )
    engine.dispose()


@pytest.mark.postgres
def test_a_v1_postgres_trace_is_upgraded_in_place(postgres_url: str) -> None:
    with open_trace_store(postgres_url) as store:
        first = store.append(TRUSTED_APPEND_CONTEXT, batch("i:1", "pg:a", draft(1)))
        store.append(TRUSTED_APPEND_CONTEXT, batch("i:empty", "pg:a"))
        store.append(TRUSTED_APPEND_CONTEXT, batch("i:2", "pg:a", draft(2)))
    _downgrade_to_v1(postgres_url)
    with open_trace_store_read_only(postgres_url) as old:
        old_log = old.read_log(limit=100)
    with open_trace_store(postgres_url) as store:
        assert store.read_log(limit=100) == old_log
        assert (
            store.append(TRUSTED_APPEND_CONTEXT, batch("i:1", "pg:a", draft(1)))
            == first
        )
        third = store.append(TRUSTED_APPEND_CONTEXT, batch("i:3", "pg:a", draft(3)))
        assert third.commit_receipts == ("commit:2",)
        assert verify_trace(store).ok
    engine = create_engine(postgres_url)
    with engine.connect() as conn:
        seqs = conn.execute(
            text(
                "SELECT append_intent_id, commit_seq FROM append_intents "
                "ORDER BY commit_seq"
            )
        ).all()
        assert (
            conn.execute(text("SELECT value FROM meta WHERE key = 'schema'")).scalar()
            == SCHEMA_VERSION
        )
    engine.dispose()
    assert [s for _, s in seqs] == [0, 1, 2, 3]
    assert (seqs[0][0], seqs[-1][0]) == ("i:1", "i:3")
