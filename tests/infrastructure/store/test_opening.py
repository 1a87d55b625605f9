"""Opening stores: restart, durability, the read-only opener, bad database files."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from sqlalchemy import text

from goatherd import (
    TRUSTED_APPEND_CONTEXT,
    TRUSTED_READ_CONTEXT,
    CutSpec,
    WorkspaceState,
)
from goatherd.domain import (
    NotATraceStoreError,
    ReadOnlyStoreError,
)
from goatherd.infrastructure.store import (
    SQLiteTraceStore,
    open_trace_store,
    open_trace_store_read_only,
)
from tests.infrastructure.store.helpers import EVERYTHING, batch, draft

CTX = TRUSTED_APPEND_CONTEXT
READ = TRUSTED_READ_CONTEXT


class TestRestart:
    def test_intents_ordinals_commits_and_cuts_survive_a_reopen(
        self, durable_store_url: str
    ) -> None:
        with open_trace_store(durable_store_url) as store:
            first = store.append(CTX, batch("i:1", "exec:a", draft(1)))
            cut = store.publish_cut(CTX, CutSpec("f:1", "exec:a", first.fact_ids[0]))
        with open_trace_store(durable_store_url) as store:
            assert store.append(CTX, batch("i:1", "exec:a", draft(1))) == first
            second = store.append(CTX, batch("i:2", "exec:a", draft(2)))
            assert second.owner_ordinal_ranges == {"exec:a": (2, 2)}
            assert second.commit_receipts == ("commit:2",)
            assert store.read_owner_cutoff("f:1") == cut
            assert store.max_position() == 2


class TestSQLiteFiles:
    def test_a_file_store_runs_in_wal_with_the_requested_durability(
        self, tmp_path: Path
    ) -> None:
        for durability, level in (("normal", 1), ("full", 2)):
            path = tmp_path / f"{durability}.sqlite"
            with SQLiteTraceStore(path, durability=durability) as store:
                with store.engine.connect() as conn:
                    mode = conn.execute(text("PRAGMA journal_mode")).scalar()
                    sync = conn.execute(text("PRAGMA synchronous")).scalar()
                assert (mode, sync) == ("wal", level)

    def test_an_unknown_durability_is_refused(self, tmp_path: Path) -> None:
        with pytest.raises(ValueError, match="unknown durability"):
            SQLiteTraceStore(tmp_path / "x.sqlite", durability="sometimes")

    def test_a_bare_path_and_a_sqlite_url_open_the_same_store(
        self, tmp_path: Path
    ) -> None:
        path = tmp_path / "t.sqlite"
        with open_trace_store(path) as store:
            store.append(CTX, batch("i:1", "exec:a", draft(1)))
        with open_trace_store(f"sqlite:///{path}") as store:
            assert store.fact_count() == 3

    def test_an_unsupported_url_scheme_is_refused(self) -> None:
        with pytest.raises(ValueError, match="unsupported trace store URL"):
            open_trace_store("mysql://localhost/db")

    @pytest.mark.parametrize("opener", [SQLiteTraceStore, open_trace_store_read_only])
    def test_a_file_that_is_not_a_database_is_refused_unchanged(
        self, tmp_path: Path, opener: object
    ) -> None:
        path = tmp_path / "notes.txt"
        content = b"these are not the tables you are looking for\n" * 40
        path.write_bytes(content)
        with pytest.raises(NotATraceStoreError, match="not"):
            opener(path)  # type: ignore[operator]
        assert path.read_bytes() == content
        assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]

    @pytest.mark.parametrize("opener", [SQLiteTraceStore, open_trace_store_read_only])
    def test_a_foreign_sqlite_database_is_refused_unchanged(
        self, tmp_path: Path, opener: object
    ) -> None:
        path = tmp_path / "other.sqlite"
        with sqlite3.connect(path) as conn:
            conn.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY)")
        conn.close()
        content = path.read_bytes()
        with pytest.raises(NotATraceStoreError, match="not a goatherd trace store"):
            opener(path)  # type: ignore[operator]
        assert path.read_bytes() == content


class TestReadOnly:
    def test_a_missing_or_empty_file_fails_loudly(self, tmp_path: Path) -> None:
        with pytest.raises(NotATraceStoreError, match="file not found"):
            open_trace_store_read_only(tmp_path / "missing.sqlite")
        assert not (tmp_path / "missing.sqlite").exists()
        empty = tmp_path / "empty.sqlite"
        empty.touch()
        with pytest.raises(NotATraceStoreError, match="empty"):
            open_trace_store_read_only(empty)
        assert empty.read_bytes() == b""

    def test_it_reads_but_every_write_raises(self, durable_store_url: str) -> None:
        with open_trace_store(durable_store_url) as store:
            receipt = store.append(CTX, batch("i:1", "exec:a", draft(1)))
        with open_trace_store_read_only(durable_store_url) as reader:
            assert reader.read_only
            prefix = reader.read_owner_prefix(READ, "exec:a", EVERYTHING)
            assert prefix.owner_paths == {"exec:a": receipt.fact_ids}
            with pytest.raises(ReadOnlyStoreError):
                reader.append(CTX, batch("i:2", "exec:a", draft(2)))
            with pytest.raises(ReadOnlyStoreError):
                reader.publish_cut(CTX, CutSpec("f", "exec:a", receipt.fact_ids[0]))
            with pytest.raises(ReadOnlyStoreError):
                reader.persist_checkpoint_blob(
                    "cp", "s", 1, WorkspaceState("git"), b"", 1
                )
            with pytest.raises(ReadOnlyStoreError):
                reader.record_completed_materialization("m", "d", "{}")
            assert reader.fact_count() == 3

    def test_it_never_changes_the_database_file(self, tmp_path: Path) -> None:
        path = tmp_path / "t.sqlite"
        with SQLiteTraceStore(path) as store:
            store.append(CTX, batch("i:1", "exec:a", draft(1)))
        content = path.read_bytes()
        with open_trace_store_read_only(path) as reader:
            reader.read_owner_prefix(READ, "exec:a", EVERYTHING)
        assert path.read_bytes() == content
