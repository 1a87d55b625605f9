"""Fault injection around the store's external effects, each followed by recovery.

SQLite locked beyond the busy timeout, SQLite disk full (``max_page_count``),
a read-only database file (opened as an unprivileged user), and a PostgreSQL
backend terminated in the middle of an append. After each fault: the error
is clear and names the cause, nothing was written, the trace verifies, the
store works again once the cause is gone, and a retry under the SAME intent
commits exactly once (a second retry returns the stored receipt).
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import stat
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from sqlalchemy.exc import OperationalError
from sqlalchemy.pool import NullPool

from goatherd.application import SandboxSpec
from goatherd.domain import (
    TRUSTED_APPEND_CONTEXT,
    AppendBatch,
    AppendGroup,
    AppendReceipt,
    NotATraceStoreError,
    RecordDraft,
    StoreUnavailableError,
)
from goatherd.infrastructure.audit.verify import verify_trace
from goatherd.infrastructure.bootstrap import scope_manager_for
from goatherd.infrastructure.sandbox import MemorySandbox, MemorySandboxConfig
from goatherd.infrastructure.store import (
    SqlAlchemyTraceStore,
    SQLiteTraceStore,
    open_trace_store,
    open_trace_store_read_only,
)
from goatherd.infrastructure.store import (
    engine as store_engine,
)
from goatherd.infrastructure.store.appending import _LOCK_SQL
from goatherd.infrastructure.store.postgres import lock_key
from tests.fuzz.tables import table_rows

pytestmark = pytest.mark.integration

# The store translates every driver outage (a lock held beyond the busy
# timeout, a full disk, a lost connection) into its own error; the driver's
# message stays in the text and the driver error in __cause__.
LOCKED = StoreUnavailableError


def batch(intent: str, size: int = 1, owner: str = "agent:a") -> AppendBatch:
    draft = RecordDraft("capture", "app.step.v1", {"intent": intent, "pad": "x" * size})
    return AppendBatch(intent, (AppendGroup(owner, fact_drafts=(draft,)),))


def append(store: SqlAlchemyTraceStore, intent: str, size: int = 1) -> AppendReceipt:
    return store.append(TRUSTED_APPEND_CONTEXT, batch(intent, size))


def assert_retry_commits_exactly_once(
    store: SqlAlchemyTraceStore, intent: str, size: int = 1
) -> None:
    records, position = store.fact_count(), store.max_position()
    receipt = append(store, intent, size)
    assert store.fact_count() == records + 1
    assert store.max_position() == position + 1
    assert append(store, intent, size) == receipt
    assert store.fact_count() == records + 1
    assert store.read_append_intent(intent) == receipt
    report = verify_trace(store)
    assert report.ok, report.problems


# ------------------------------------------------------------ SQLite locked


@pytest.fixture
def short_busy_timeout(monkeypatch: pytest.MonkeyPatch) -> int:
    """Lower the store's SQLite busy timeout for stores opened in this test.

    The store reads ``engine.BUSY_TIMEOUT_MS`` (30 s) when it builds its
    engine; there is no per-store option yet (see docs/reliability.md).
    """
    monkeypatch.setattr(store_engine, "BUSY_TIMEOUT_MS", 200)
    return 200


@pytest.fixture
def locked(tmp_path: Path) -> Iterator[sqlite3.Connection]:
    """A second connection that will hold BEGIN EXCLUSIVE on the trace file."""
    holder = sqlite3.connect(tmp_path / "trace.sqlite", isolation_level=None)
    yield holder
    holder.close()


def test_an_append_locked_out_beyond_the_busy_timeout_fails_clearly_then_retries_once(
    tmp_path: Path, short_busy_timeout: int, locked: sqlite3.Connection
) -> None:
    with SQLiteTraceStore(tmp_path / "trace.sqlite") as store:
        append(store, "before")
        before = table_rows(store.engine)
        locked.execute("BEGIN EXCLUSIVE")
        started = time.monotonic()
        with pytest.raises(LOCKED, match="database is locked"):
            append(store, "blocked")
        waited = time.monotonic() - started
        locked.execute("ROLLBACK")
        assert table_rows(store.engine) == before
        assert store.read_append_intent("blocked") is None
        assert_retry_commits_exactly_once(store, "blocked")
    # the figure for docs/reliability.md: how long the writer waited
    print(f"locked-out append gave up after {waited:.3f}s")


def test_a_locked_out_runtime_command_raises_and_its_same_seq_retry_forks_once(
    tmp_path: Path, short_busy_timeout: int, locked: sqlite3.Connection
) -> None:
    with SQLiteTraceStore(tmp_path / "trace.sqlite") as store:
        manager = scope_manager_for(store)
        sandbox = MemorySandbox(MemorySandboxConfig(files={"a.txt": b"1\n"}))
        sandbox.create(SandboxSpec())
        parent = manager.create("agent:main", sandbox).unwrap()
        created = store.fact_count()  # the root's record (and its witness)
        locked.execute("BEGIN EXCLUSIVE")
        with pytest.raises(LOCKED, match="database is locked"):
            manager.fork(parent.id, "agent:main:child", seq=7)
        locked.execute("ROLLBACK")
        assert store.fact_count() == created
        child = manager.fork(parent.id, "agent:main:child", seq=7).unwrap()
        size = store.fact_count(), store.max_position()
        # The same seq again: the stored outcome, no second fork record.
        again = scope_manager_for(store)
        again.attach_sandbox(parent.id, sandbox)
        assert again.fork(parent.id, "agent:main:child", seq=7).unwrap() == child
        assert (store.fact_count(), store.max_position()) == size
        assert verify_trace(store).ok


# ------------------------------------------------------------ SQLite disk full


def cap_pages(store: SqlAlchemyTraceStore, pages: int) -> None:
    """Let the store's writer connection grow the file to ``pages`` at most.

    ``max_page_count`` is per connection; the store's appends (and its
    ``transaction()``) go through one writer connection, so set it there.
    """
    with store.transaction() as conn:
        conn.exec_driver_sql(f"PRAGMA max_page_count={pages}")


def test_a_full_disk_fails_the_append_clearly_and_the_retry_after_space_commits_once(
    tmp_path: Path,
) -> None:
    path = tmp_path / "trace.sqlite"
    with SQLiteTraceStore(path) as store:
        append(store, "before")
        with store.engine.connect() as conn:
            pages = int(conn.exec_driver_sql("PRAGMA page_count").scalar_one())
        before = table_rows(store.engine)
        cap_pages(store, pages)
        with pytest.raises(LOCKED, match="database or disk is full"):
            append(store, "big", size=200_000)
        assert table_rows(store.engine) == before
        assert verify_trace(store).ok
        cap_pages(store, 1_073_741_823)  # space is back
        assert_retry_commits_exactly_once(store, "big", size=200_000)
    with SQLiteTraceStore(path) as reopened:
        assert verify_trace(reopened).ok
        assert reopened.read_append_intent("big") is not None


# ------------------------------------------------------------ read-only file


def as_nobody(body: Any) -> dict[str, str]:
    """Run ``body()`` in a forked child as user ``nobody``; return its report.

    Root bypasses file permissions, so the child drops privileges first
    (no exec: the interpreter and every module are already loaded).
    """
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through the pipe
        os.close(read)
        try:
            if os.getuid() == 0:
                os.setgid(65534)
                os.setuid(65534)
            result = body()
        except BaseException as error:
            result = {"error": type(error).__name__, "message": str(error)}
        os.write(write, json.dumps(result).encode())
        os._exit(0)
    os.close(write)
    chunks = []
    while chunk := os.read(read, 65536):
        chunks.append(chunk)
    os.close(read)
    os.waitpid(pid, 0)
    report: dict[str, str] = json.loads(b"".join(chunks))
    return report


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    directory = Path(tempfile.mkdtemp(prefix="goatherd-ro-"))
    directory.chmod(0o777)  # the unprivileged child may create -wal/-shm here
    try:
        yield directory
    finally:
        for child in directory.iterdir():
            child.unlink()
        directory.rmdir()


def test_a_read_only_database_file_refuses_writes_clearly_and_the_retry_commits_once(
    shared_dir: Path,
) -> None:
    path = shared_dir / "trace.sqlite"
    with SQLiteTraceStore(path) as store:
        append(store, "before")
    path.chmod(stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)
    before = path.read_bytes()

    def write_then_read() -> dict[str, str]:
        report: dict[str, str] = {}
        try:
            with SQLiteTraceStore(path) as writer:
                append(writer, "refused")
        except Exception as error:
            report = {"error": type(error).__name__, "message": str(error)}
        with open_trace_store_read_only(path) as reader:
            report["records"] = str(reader.fact_count())
        return report

    report = as_nobody(write_then_read)
    assert report["error"] in ("StoreUnavailableError", "NotATraceStoreError"), report
    assert "readonly database" in report["message"] or "read-only" in report["message"]
    assert report["records"] == "3"  # root witness, witness, the record
    assert path.read_bytes() == before
    # Recovery: make the file writable again; the same intent commits once.
    path.chmod(0o666)
    with SQLiteTraceStore(path) as store:
        assert verify_trace(store).ok
        assert_retry_commits_exactly_once(store, "refused")


def test_the_read_only_opener_refuses_a_missing_file_without_creating_it(
    tmp_path: Path,
) -> None:
    with pytest.raises(NotATraceStoreError, match="file not found"):
        open_trace_store_read_only(tmp_path / "absent.sqlite")
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------------ PostgreSQL


def waiting_backend(admin: str, database: str, deadline: float) -> int:
    """Return the pid of the backend blocked on a lock in ``database``."""
    with psycopg.connect(admin, autocommit=True) as conn:
        while time.monotonic() < deadline:
            row = conn.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = %s "
                "AND wait_event_type = 'Lock'",
                (database,),
            ).fetchone()
            if row is not None:
                return int(row[0])
            time.sleep(0.01)
    raise AssertionError("the append never blocked on its owner's lock")


@pytest.mark.postgres
def test_a_postgres_backend_killed_mid_append_fails_clearly_then_retries_once(
    postgres_url: str,
) -> None:
    from sqlalchemy.engine import make_url

    url = make_url(postgres_url)
    admin = url.set(drivername="postgresql").render_as_string(hide_password=False)
    with open_trace_store(postgres_url) as store:
        append(store, "before")
        before = table_rows(store.engine)
        # Hold the owner's lock (an append locks the owners it writes) so the
        # writer's append is inside its transaction, waiting, when killed.
        with psycopg.connect(admin) as holder:
            holder.execute(  # the store's own statement: keys are per trace
                _LOCK_SQL.replace("?", "%s"), ([lock_key("o", "agent:a")],)
            )
            errors: list[BaseException] = []

            def writer() -> None:
                try:
                    append(store, "killed")
                except BaseException as error:
                    errors.append(error)

            thread = threading.Thread(target=writer)
            thread.start()
            pid = waiting_backend(admin, url.database or "", time.monotonic() + 30)
            with psycopg.connect(admin, autocommit=True) as killer:
                killed = killer.execute(
                    "SELECT pg_terminate_backend(%s)", (pid,)
                ).fetchone()
            assert killed == (True,)
            thread.join(30)
            holder.rollback()
        assert len(errors) == 1
        assert isinstance(errors[0], StoreUnavailableError)
        # the driver's own error (the append path runs on the driver connection)
        assert isinstance(
            errors[0].__cause__, OperationalError | psycopg.OperationalError
        )
        assert re.search("connection is lost|terminat|closed", str(errors[0]))
        assert table_rows(store.engine) == before
        assert store.read_append_intent("killed") is None
        assert verify_trace(store).ok
        # The pool pre-pings, so the same store object works again.
        assert_retry_commits_exactly_once(store, "killed")


@pytest.mark.postgres
def test_a_postgres_server_connection_lost_between_appends_is_survived(
    postgres_url: str,
) -> None:
    with open_trace_store(postgres_url, poolclass=NullPool) as store:
        append(store, "one")
        with psycopg.connect(postgres_url.replace("+psycopg", "")) as conn:
            conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
        assert_retry_commits_exactly_once(store, "two")
