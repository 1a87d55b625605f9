"""Erasure on PostgreSQL that does what the role may and says what remains (ADR 0077).

On the real server at ``GOATHERD_TEST_DB_URL``: after ``redact(...,
compact=True)`` the erased strings are not in the table files the report says
it read (checked again here, independently, as a superuser), every WAL
segment that still holds one is listed, and a role that may not run
``CHECKPOINT`` or read server files, or does not own the tables, gets lines
saying so, never an exception.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections.abc import Iterator

import psycopg
import pytest
from sqlalchemy.engine import make_url

from goatherd.domain.contexts import TRUSTED_APPEND_CONTEXT
from goatherd.domain.records import AppendBatch, AppendGroup, RecordDraft
from goatherd.infrastructure.audit.verify import verify_trace
from goatherd.infrastructure.store import (
    Redaction,
    SqlAlchemyTraceStore,
    open_trace_store,
)
from tests.faults.conftest import postgres_url  # noqa: F401 (a fixture)

pytestmark = pytest.mark.postgres

CTX = TRUSTED_APPEND_CONTEXT


def _secret() -> str:
    """A string PostgreSQL stores as it is (random hex does not compress)."""
    return "SECRET-" + os.urandom(48).hex()


def _append(store: SqlAlchemyTraceStore, intent: str, payload: dict[str, str]) -> str:
    draft = RecordDraft("capture", "test.secret.v1", payload)
    batch = AppendBatch(intent, (AppendGroup("agent:a", fact_drafts=(draft,)),))
    return store.append(CTX, batch).fact_ids[0]


def _admin(url: str) -> str:
    """The URL's database as the superuser the test server runs (psycopg form)."""
    parsed = make_url(url).set(drivername="postgresql", username="postgres")
    return parsed.render_as_string(hide_password=False)


def _server_files(url: str, sql: str) -> dict[str, bytes]:
    """Read files as a superuser: name -> bytes, for the names ``sql`` lists."""
    with psycopg.connect(_admin(url), autocommit=True) as conn:
        conn.execute("CHECKPOINT")  # the files, not only the shared buffers
        names = [str(row[0]) for row in conn.execute(sql).fetchall() if row[0]]
        files: dict[str, bytes] = {}
        for name in names:
            row = conn.execute("SELECT pg_read_binary_file(%s)", (name,)).fetchone()
            assert row is not None
            files[name] = bytes(row[0])
        return files


_TABLE_FILES_SQL = (
    "SELECT pg_relation_filepath('records') UNION ALL "
    "SELECT pg_relation_filepath(reltoastrelid) FROM pg_class "
    "WHERE oid = 'records'::regclass AND reltoastrelid <> 0"
)
_WAL_SQL = "SELECT 'pg_wal/' || name FROM pg_ls_waldir() WHERE length(name) = 24"


def test_compact_leaves_no_erased_string_in_the_table_files_and_lists_the_wal(
    postgres_url: str,  # noqa: F811 (a fixture)
) -> None:
    secrets = [_secret() for _ in range(3)]
    with open_trace_store(postgres_url) as store:
        ids = [_append(store, f"i:{n}", {"s": s}) for n, s in enumerate(secrets)]
        _append(store, "i:kept", {"s": _secret()})
        before = _server_files(postgres_url, _TABLE_FILES_SQL)
        assert any(secrets[0].encode() in data for data in before.values())
        redaction = store.redact(CTX, "r:1", ids, "a test", compact=True)
    assert any(
        s.startswith("VACUUM (FULL) records: rewritten") for s in redaction.steps
    )
    assert any(
        s.startswith("table records:") and "no piece of an erased body" in s
        for s in redaction.steps
    ), (redaction.steps, redaction.remains)
    after = _server_files(postgres_url, _TABLE_FILES_SQL)
    for secret in secrets:
        assert not any(secret.encode() in data for data in after.values())
    # Every WAL segment that still holds an erased string is named.
    wal = _server_files(postgres_url, _WAL_SQL)
    holding = {
        name.removeprefix("pg_wal/")
        for name, data in wal.items()
        if any(s.encode() in data for s in secrets)
    }
    # (Names can differ: a checkpoint renames a recycled segment, old bytes and all.)
    if holding:
        assert any(line.startswith("WAL segment ") for line in redaction.remains)
    assert set(redaction.bytes_left) <= set(ids)
    assert redaction.complete is (not redaction.remains and not redaction.bytes_left)
    if holding:
        assert not redaction.complete
    assert all("\n" not in line for line in (*redaction.steps, *redaction.remains))
    with open_trace_store(postgres_url) as store:
        assert verify_trace(store).ok


def test_without_compact_postgres_says_the_old_versions_remain(
    postgres_url: str,  # noqa: F811 (a fixture)
) -> None:
    with open_trace_store(postgres_url) as store:
        erased = _append(store, "i:0", {"s": _secret()})
        redaction = store.redact(CTX, "r:1", [erased], "a test")
    assert not redaction.complete
    assert any("VACUUM (FULL)" in line for line in redaction.remains)
    assert redaction.steps == ()


def test_a_compressed_body_is_reported_as_not_searchable(
    postgres_url: str,  # noqa: F811 (a fixture)
) -> None:
    with open_trace_store(postgres_url) as store:
        erased = _append(store, "i:0", {"s": "compressible " * 2000})
        redaction = store.redact(CTX, "r:1", [erased], "a test", compact=True)
    assert erased in redaction.bytes_left
    assert any("stored compressed" in line for line in redaction.remains)
    assert not redaction.complete


def test_a_replay_with_compact_says_the_bodies_were_not_searched_for(
    postgres_url: str,  # noqa: F811 (a fixture)
) -> None:
    with open_trace_store(postgres_url) as store:
        erased = _append(store, "i:0", {"s": _secret()})
        first = store.redact(CTX, "r:1", [erased], "a test", compact=True)
        again = store.redact(CTX, "r:1", [erased], "a test", compact=True)
    assert again.redaction_record_id == first.redaction_record_id
    assert any("not searched for" in line for line in again.remains)
    assert not again.complete


@pytest.fixture
def owner_role_url(
    postgres_url: str,  # noqa: F811 (a fixture)
) -> Iterator[str]:
    """A database owned by a fresh role with no server privilege."""
    role = f"goatherd_eraser_{uuid.uuid4().hex[:10]}"
    name = f"{make_url(postgres_url).database}_own"
    with psycopg.connect(_admin(postgres_url), autocommit=True) as conn:
        conn.execute(f'CREATE ROLE "{role}" LOGIN')
        conn.execute(f'CREATE DATABASE "{name}" OWNER "{role}"')
    try:
        yield (
            make_url(postgres_url)
            .set(username=role, database=name)
            .render_as_string(hide_password=False)
        )
    finally:
        with psycopg.connect(_admin(postgres_url), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            conn.execute(f'DROP ROLE IF EXISTS "{role}"')


def _erase_as(url: str) -> Redaction:
    with open_trace_store(url) as store:
        erased = _append(store, "i:0", {"s": _secret()})
        return store.redact(CTX, "r:1", [erased], "a test", compact=True)


def test_a_role_without_server_privileges_gets_lines_not_a_traceback(
    owner_role_url: str,
) -> None:
    redaction = _erase_as(owner_role_url)
    # It owns the tables: the rewrite runs.
    assert any(
        s.startswith("VACUUM (FULL) records: rewritten") for s in redaction.steps
    )
    assert any(
        s.startswith("CHECKPOINT: not run (") and "superuser" in s
        for s in redaction.steps
    ), redaction.steps
    assert any(
        s.startswith("table records: its files were not read (")
        for s in redaction.remains
    )
    assert any(s.startswith("WAL: pg_wal was not read (") for s in redaction.remains)
    assert not redaction.complete


def test_a_role_that_does_not_own_the_table_is_told_it_was_not_rewritten(
    owner_role_url: str,
) -> None:
    with open_trace_store(owner_role_url) as store:
        erased = _append(store, "i:0", {"s": _secret()})
    url = make_url(owner_role_url)
    with psycopg.connect(_admin(owner_role_url), autocommit=True) as conn:
        # A database owner may vacuum every table in it: hand both away.
        conn.execute(f'ALTER DATABASE "{url.database}" OWNER TO postgres')
        conn.execute(f'GRANT CREATE, USAGE ON SCHEMA public TO "{url.username}"')
        conn.execute("ALTER TABLE records OWNER TO postgres")
        conn.execute(f'GRANT ALL ON records TO "{url.username}"')
    with open_trace_store(owner_role_url) as store:
        redaction = store.redact(CTX, "r:1", [erased], "a test", compact=True)
    assert any(
        s.startswith("table records: not rewritten (VACUUM (FULL) skipped it")
        for s in redaction.remains
    ), redaction.remains
    assert not redaction.complete


def _hold_snapshot(url: str, seconds: float | None, held: threading.Event) -> None:
    """Hold a REPEATABLE READ snapshot in the trace's database (until the end)."""
    with psycopg.connect(_admin(url)) as conn:
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        conn.execute("SELECT 1").fetchone()  # a snapshot, no lock on records
        held.set()
        time.sleep(seconds if seconds is not None else 0)
        conn.rollback()


def test_an_old_snapshot_is_waited_for_then_the_table_files_are_clean(
    postgres_url: str,  # noqa: F811 (a fixture)
) -> None:
    secret = _secret()
    with open_trace_store(postgres_url) as store:
        erased = _append(store, "i:0", {"s": secret})
        held = threading.Event()
        holder = threading.Thread(target=_hold_snapshot, args=(postgres_url, 2.0, held))
        holder.start()
        assert held.wait(10)
        redaction = store.redact(CTX, "r:1", [erased], "a test", compact=True)
        holder.join()
    assert not any(s.startswith("table records") for s in redaction.remains)
    assert any("no piece of an erased body found" in s for s in redaction.steps)
    after = _server_files(postgres_url, _TABLE_FILES_SQL)
    assert not any(secret.encode() in data for data in after.values())


def test_a_snapshot_that_never_lets_go_is_named_not_hidden(
    postgres_url: str,  # noqa: F811 (a fixture)
) -> None:
    with open_trace_store(postgres_url) as store:
        erased = _append(store, "i:0", {"s": _secret()})
        with psycopg.connect(_admin(postgres_url)) as holder:
            holder.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            holder.execute("SELECT 1").fetchone()  # a snapshot, no lock on records
            pid = holder.info.backend_pid
            redaction = store.redact(
                CTX, "r:1", [erased], "a test", compact=True, wait_seconds=1.0
            )
            holder.rollback()
    assert erased in redaction.bytes_left
    assert any(
        s.startswith("table records: pieces of 1 erased record found")
        for s in redaction.remains
    ), redaction.remains
    assert any(s.startswith(f"session pid {pid} ") for s in redaction.remains)
    assert not redaction.complete
