"""Read-only means read-only (issue 13, item 5).

``open_trace_store_read_only`` works for a user who may not write the trace's
directory or file, and creates no ``-wal``/``-shm`` files of its own: each
test runs the reads in a forked child as user ``nobody`` on a trace in a
directory only root may write.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import stat
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from goatherd import TRUSTED_APPEND_CONTEXT, TRUSTED_READ_CONTEXT
from goatherd.infrastructure.audit.verify import verify_trace
from goatherd.infrastructure.store import (
    SQLiteTraceStore,
    open_trace_store,
    open_trace_store_read_only,
)
from tests.infrastructure.store.helpers import EVERYTHING, batch, draft

FIXTURE = Path(__file__).parent / "fixtures" / "trace_v1.sqlite"
NOBODY = 65534

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0, reason="switching to user nobody needs root"
)


def as_nobody(body: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """Run ``body()`` in a forked child as ``nobody``; return its JSON report."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through the pipe
        os.close(read)
        try:
            os.setgid(NOBODY)
            os.setuid(NOBODY)
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
    report: dict[str, Any] = json.loads(b"".join(chunks))
    return report


@pytest.fixture
def locked_dir() -> Iterator[Path]:
    """A directory nobody can read and enter but not write (pytest's own
    temporary directories are private to root)."""
    base = Path(tempfile.mkdtemp(prefix="goatherd-ro-"))
    base.chmod(0o755)
    directory = base / "audit"
    directory.mkdir(mode=0o755)
    try:
        yield directory
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _readable(directory: Path) -> None:
    for child in directory.iterdir():
        child.chmod(stat.S_IRUSR | stat.S_IWUSR | stat.S_IRGRP | stat.S_IROTH)


def _reads(path: Path, **options: Any) -> Callable[[], dict[str, Any]]:
    def body() -> dict[str, Any]:
        with open_trace_store_read_only(path, **options) as store:
            log = store.read_log(limit=10_000)
            report = verify_trace(store)
            chain = store.verify_chain()
            prefix = store.read_owner_prefix(TRUSTED_READ_CONTEXT, "exec:a", EVERYTHING)
            return {
                "positions": [e.position for e in log],
                "records": store.fact_count(),
                "verified": report.ok,
                "chain": chain.ok,
                "head": str(store.trace_head()),
                "prefix": len(prefix.owner_paths.get("exec:a", ())),
            }

    return body


def test_a_quiet_trace_reads_in_a_read_only_directory_leaving_no_side_files(
    locked_dir: Path,
) -> None:
    path = locked_dir / "trace.sqlite"
    with SQLiteTraceStore(path) as store:
        for n in range(3):
            store.append(TRUSTED_APPEND_CONTEXT, batch(f"i:{n}", "exec:a", draft(n)))
        head = str(store.trace_head())
    _readable(locked_dir)
    before = path.read_bytes()
    report = as_nobody(_reads(path))
    assert report == {
        "positions": [0, 1, 2],
        "records": 5,
        "verified": True,
        "chain": True,
        "head": head,
        "prefix": 3,
    }, report
    assert sorted(p.name for p in locked_dir.iterdir()) == ["trace.sqlite"]
    assert path.read_bytes() == before


def test_a_trace_a_writer_is_using_reads_through_its_wal(locked_dir: Path) -> None:
    path = locked_dir / "trace.sqlite"
    with SQLiteTraceStore(path) as store:
        store._checkpointer = None  # keep the commits in the WAL
        raw = store._held_writer().connection.driver_connection
        assert raw is not None
        raw.execute("PRAGMA wal_autocheckpoint=0")
        for n in range(3):
            store.append(TRUSTED_APPEND_CONTEXT, batch(f"i:{n}", "exec:a", draft(n)))
        _readable(locked_dir)
        files = sorted(p.name for p in locked_dir.iterdir())
        assert files == ["trace.sqlite", "trace.sqlite-shm", "trace.sqlite-wal"]
        report = as_nobody(_reads(path))
        assert report["positions"] == [0, 1, 2], report
        assert report["chain"] is True
        assert sorted(p.name for p in locked_dir.iterdir()) == files


def test_an_upgraded_version_s_trace_reads_as_it_is(locked_dir: Path) -> None:
    path = locked_dir / "trace.sqlite"
    shutil.copy(FIXTURE, path)
    _readable(locked_dir)
    before = path.read_bytes()

    def body() -> dict[str, Any]:
        with open_trace_store_read_only(path) as store:
            return {
                "records": store.fact_count(),
                "head": store.trace_head().commits,
                "chain": store.verify_chain().ok,
            }

    # 43 commits and the steps its upgrade will give its 2 side rows (ADR 0064)
    assert as_nobody(body) == {"records": 48, "head": 45, "chain": True}
    assert path.read_bytes() == before
    assert sorted(p.name for p in locked_dir.iterdir()) == ["trace.sqlite"]


def test_unreadable_wal_changes_are_one_clear_error(locked_dir: Path) -> None:
    # A writer's commits still in the WAL, its -shm gone, the directory not
    # writable: nothing can read those commits safely.
    source = locked_dir.parent / "source"
    source.mkdir()
    writer = sqlite3.connect(source / "trace.sqlite", isolation_level=None)
    writer.execute("PRAGMA journal_mode=WAL")
    writer.execute("PRAGMA wal_autocheckpoint=0")
    writer.close()
    with SQLiteTraceStore(source / "trace.sqlite") as store:
        store._checkpointer = None
        raw = store._held_writer().connection.driver_connection
        assert raw is not None
        raw.execute("PRAGMA wal_autocheckpoint=0")
        store.append(TRUSTED_APPEND_CONTEXT, batch("i:0", "exec:a", draft(0)))
        shutil.copy(source / "trace.sqlite", locked_dir / "trace.sqlite")
        shutil.copy(source / "trace.sqlite-wal", locked_dir / "trace.sqlite-wal")
    _readable(locked_dir)
    report = as_nobody(_reads(locked_dir / "trace.sqlite"))
    assert report["error"] == "StoreUnavailableError", report
    assert "\n" not in report["message"]
    assert sorted(p.name for p in locked_dir.iterdir()) == [
        "trace.sqlite",
        "trace.sqlite-wal",
    ]


def test_in_a_writable_directory_a_reader_leaves_no_side_files(tmp_path: Path) -> None:
    path = tmp_path / "trace.sqlite"
    with SQLiteTraceStore(path) as store:
        store.append(TRUSTED_APPEND_CONTEXT, batch("i:0", "exec:a", draft(0)))
    with open_trace_store_read_only(path) as reader:
        assert reader.max_position() == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["trace.sqlite"]


def test_a_live_reader_sees_commits_made_after_it_opened(tmp_path: Path) -> None:
    path = tmp_path / "trace.sqlite"
    with SQLiteTraceStore(path) as store:
        store.append(TRUSTED_APPEND_CONTEXT, batch("i:0", "exec:a", draft(0)))
        with open_trace_store_read_only(path, live=True) as live:
            store.append(TRUSTED_APPEND_CONTEXT, batch("i:1", "exec:a", draft(1)))
            assert live.max_position() == 1


@pytest.mark.postgres
def test_a_postgres_read_only_store_cannot_write_even_by_mistake(
    durable_store_url: str,
) -> None:
    if not durable_store_url.startswith("postgresql"):
        pytest.skip("PostgreSQL only")
    with open_trace_store(durable_store_url) as store:
        store.append(TRUSTED_APPEND_CONTEXT, batch("i:0", "exec:a", draft(0)))
    with open_trace_store_read_only(durable_store_url) as reader:
        assert reader.max_position() == 0
        with (
            reader.engine.connect() as conn,
            pytest.raises(Exception, match="read-only"),
        ):
            conn.execute(text("DELETE FROM meta"))
