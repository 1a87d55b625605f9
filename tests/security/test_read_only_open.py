"""A trace file opened read-only is never modified (byte-compare before and after).

Every read command of the CLI (``log``, ``show``, ``stats``, ``verify``,
``export``), the trace UI serving the file, and every write method of a
read-only store are run against a real trace file; the database and its WAL
must be byte-identical afterwards (SQLite's ``-shm`` read-mark index is the one
file a WAL reader writes, see ``files.py``). A trace with a live, never
checkpointed ``-wal`` is read too: a careless reader would checkpoint it.
"""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from goatherd.cli import main
from goatherd.domain import (
    TRUSTED_APPEND_CONTEXT,
    AppendBatch,
    CutSpec,
    ReadOnlyStoreError,
)
from goatherd.domain.workspace import WorkspaceState
from goatherd.infrastructure.store import (
    SqlAlchemyTraceStore,
    open_trace_store_read_only,
)
from goatherd.infrastructure.traceui import TraceUiServer
from tests.cli.conftest import build_trace
from tests.security.files import trace_bytes


@pytest.fixture
def trace(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    directory = tmp_path / "db"
    directory.mkdir()
    path = directory / "trace.sqlite"
    ids = build_trace(path)
    return path, ids


@pytest.fixture
def trace_with_live_wal(tmp_path: Path) -> Path:
    """A trace whose last commits sit in a -wal file that was never checkpointed."""
    directory = tmp_path / "walled"
    directory.mkdir()
    source = tmp_path / "source.sqlite"
    build_trace(source)
    shutil.copy(source, directory / "trace.sqlite")
    writer = sqlite3.connect(directory / "trace.sqlite")
    writer.execute("PRAGMA journal_mode=WAL")
    writer.execute("PRAGMA wal_autocheckpoint=0")
    writer.execute("CREATE TABLE IF NOT EXISTS scratch_unrelated(x)")
    writer.commit()
    # Copy the three files while the writer still holds them: a crash image.
    frozen = tmp_path / "frozen"
    frozen.mkdir()
    for file in directory.iterdir():
        shutil.copy(file, frozen / file.name)
    writer.close()
    return frozen / "trace.sqlite"


COMMANDS: dict[str, Callable[[str, dict[str, str], Path], list[str]]] = {
    "log": lambda db, ids, tmp: ["log", db],
    "log --json": lambda db, ids, tmp: ["log", db, "--json", "--owner", "agent"],
    "show": lambda db, ids, tmp: ["show", db, ids["call"][:16]],
    "show --json": lambda db, ids, tmp: ["show", db, ids["result"], "--json"],
    "stats": lambda db, ids, tmp: ["stats", db, "--json"],
    "verify": lambda db, ids, tmp: ["verify", db],
    "export": lambda db, ids, tmp: ["export", db, "-o", str(tmp / "out.jsonl")],
}


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_read_command_leaves_the_trace_file_byte_identical(
    trace: tuple[Path, dict[str, str]],
    tmp_path: Path,
    name: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path, ids = trace
    before = trace_bytes(path.parent)
    assert main(COMMANDS[name](str(path), ids, tmp_path)) == 0
    capsys.readouterr()
    assert trace_bytes(path.parent) == before


@pytest.mark.parametrize("command", ["log", "stats", "verify", "export"])
def test_read_commands_do_not_checkpoint_a_live_wal(
    trace_with_live_wal: Path,
    command: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    before = trace_bytes(trace_with_live_wal.parent)
    assert "trace.sqlite-wal" in before
    main([command, str(trace_with_live_wal)])
    capsys.readouterr()
    assert trace_bytes(trace_with_live_wal.parent) == before


def test_the_trace_ui_serving_a_file_leaves_it_byte_identical(
    trace: tuple[Path, dict[str, str]],
) -> None:
    path, ids = trace
    before = trace_bytes(path.parent)
    store = open_trace_store_read_only(path)
    try:
        with TraceUiServer(store) as server, httpx.Client(base_url=server.url) as http:
            for route in (
                "/",
                "/api/health",
                "/api/records",
                "/api/records?path=agent&mode=captures_only",
                f"/api/records/{ids['call']}",
                "/api/owners",
                "/api/scopes",
            ):
                assert http.get(route).status_code == 200, route
    finally:
        store.close()
    assert trace_bytes(path.parent) == before


WRITES: dict[str, Callable[[SqlAlchemyTraceStore], object]] = {
    "append": lambda s: s.append(TRUSTED_APPEND_CONTEXT, AppendBatch("x", ())),
    "publish_cut": lambda s: s.publish_cut(
        TRUSTED_APPEND_CONTEXT, CutSpec("f", "agent:main", "sha256:x")
    ),
    "persist_checkpoint_blob": lambda s: s.persist_checkpoint_blob(
        "cp", "scope:x", 1, WorkspaceState("memory", "r"), b"", 0
    ),
    "delete_checkpoint_blob": lambda s: s.delete_checkpoint_blob("cp:agent:main:7"),
    "record_completed_materialization": lambda s: s.record_completed_materialization(
        "m", "d", "{}"
    ),
    "transaction": lambda s: s.transaction().__enter__(),
}


@pytest.mark.parametrize("name", sorted(WRITES))
def test_every_write_method_of_a_read_only_store_refuses_and_writes_nothing(
    trace: tuple[Path, dict[str, str]], name: str
) -> None:
    path, _ = trace
    before = trace_bytes(path.parent)
    store = open_trace_store_read_only(path)
    try:
        with pytest.raises(ReadOnlyStoreError, match="read-only"):
            WRITES[name](store)
    finally:
        store.close()
    assert trace_bytes(path.parent) == before
