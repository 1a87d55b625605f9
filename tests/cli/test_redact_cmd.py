"""``goatherd redact``: erase payloads, say what was done and what remains (ADR 0077).

SQLite: the WAL is truncated and the file read back, exit 0. PostgreSQL: the
command compacts, lists each WAL segment and place it could not clean or
check, and exits 4 when erased bytes may remain; a role without server
privileges gets the same kind of lines, never a traceback.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from sqlalchemy.engine import make_url

from goatherd.cli import main
from goatherd.cli.exits import EXIT_INCOMPLETE
from goatherd.domain.contexts import TRUSTED_APPEND_CONTEXT
from goatherd.domain.records import AppendBatch, AppendGroup, RecordDraft
from goatherd.infrastructure.store import SQLiteTraceStore, open_trace_store
from goatherd.infrastructure.store.store import SqlAlchemyTraceStore
from tests.faults.conftest import postgres_url  # noqa: F401 (a fixture)


def _secret() -> str:
    return "SECRET-" + os.urandom(48).hex()


def _append(store: SqlAlchemyTraceStore, intent: str, secret: str) -> str:
    draft = RecordDraft("capture", "test.secret.v1", {"s": secret})
    batch = AppendBatch(intent, (AppendGroup("agent:a", fact_drafts=(draft,)),))
    return store.append(TRUSTED_APPEND_CONTEXT, batch).fact_ids[0]


def _file_bytes(path: Path) -> bytes:
    return b"".join(p.read_bytes() for p in (path, Path(f"{path}-wal")) if p.exists())


def test_redact_on_sqlite_erases_and_exits_0(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "t.sqlite"
    secret = _secret()
    with SQLiteTraceStore(path) as store:
        erased = _append(store, "i:0", secret)
        _append(store, "i:1", _secret())
    assert main(["redact", "--db", str(path), erased[7:19], "--reason", "gdpr"]) == 0
    out = capsys.readouterr()
    assert out.err == ""
    lines = out.out.splitlines()
    assert lines[0].startswith("erased 1 record by redaction sha256:")
    assert "erasure complete: no erased byte found where it was checked" in lines
    assert secret.encode() not in _file_bytes(path)
    assert main(["verify", "--db", str(path)]) == 0
    capsys.readouterr()
    # The same command again replays the committed redaction.
    assert (
        main(["redact", "--db", str(path), erased, "--reason", "gdpr", "--json"]) == 0
    )
    again = json.loads(capsys.readouterr().out)
    assert again["erased"] == [erased]
    assert lines[0].split()[5] == again["redaction_record_id"]


def test_redact_refuses_bad_input_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "t.sqlite"
    with SQLiteTraceStore(path) as store:
        _append(store, "i:0", _secret())
    before = _file_bytes(path)
    assert main(["redact", "--db", str(path), "abcdef00", "--reason", "x"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "abcdef00" in err
    with pytest.raises(SystemExit) as usage:
        main(["redact", "--db", str(path), "ab", "--reason", "x", "--wait", "-1"])
    assert usage.value.code == 2
    assert "--wait: must be 0.01 to 3600 seconds" in capsys.readouterr().err
    assert _file_bytes(path) == before


def test_redact_on_postgres_lists_what_remains_and_exits_4(
    postgres_url: str,  # noqa: F811 (a fixture)
    capsys: pytest.CaptureFixture[str],
) -> None:
    with open_trace_store(postgres_url) as store:
        erased = _append(store, "i:0", _secret())
    code = main(["redact", "--db", postgres_url, erased, "--reason", "gdpr"])
    out = capsys.readouterr()
    assert out.err == ""
    lines = out.out.splitlines()
    assert "done: VACUUM (FULL) records: rewritten without old row versions" in lines
    assert any(
        line.startswith("done: table records:") and "no piece" in line for line in lines
    ), lines
    remains = [line for line in lines if line.startswith("remains: ")]
    if remains:
        assert code == EXIT_INCOMPLETE
        assert lines[-2] == "erasure incomplete: erased bytes may remain where listed"
    else:
        assert code == 0
    assert lines[-1].startswith("note: backups and copies")
    assert main(["verify", "--db", postgres_url]) == 0


def test_redact_no_compact_on_postgres_says_vacuum_did_not_run(
    postgres_url: str,  # noqa: F811 (a fixture)
    capsys: pytest.CaptureFixture[str],
) -> None:
    with open_trace_store(postgres_url) as store:
        erased = _append(store, "i:0", _secret())
    args = ["redact", "--db", postgres_url, erased, "--reason", "r", "--no-compact"]
    assert main([*args, "--json"]) == EXIT_INCOMPLETE
    data = json.loads(capsys.readouterr().out)
    assert data["complete"] is False
    assert data["steps"] == []
    assert any("VACUUM (FULL)" in line for line in data["remains"])


@pytest.fixture
def plain_role_url(
    postgres_url: str,  # noqa: F811 (a fixture)
) -> Iterator[str]:
    """A database owned by a fresh role that is no superuser."""
    url = make_url(postgres_url)
    admin = url.set(drivername="postgresql").render_as_string(hide_password=False)
    role = f"goatherd_cli_{uuid.uuid4().hex[:10]}"
    name = f"{url.database}_cli"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE ROLE "{role}" LOGIN')
        conn.execute(f'CREATE DATABASE "{name}" OWNER "{role}"')
    try:
        yield url.set(username=role, database=name).render_as_string(
            hide_password=False
        )
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            conn.execute(f'DROP ROLE IF EXISTS "{role}"')


def test_redact_as_a_role_without_privileges_reports_lines_not_a_traceback(
    plain_role_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with open_trace_store(plain_role_url) as store:
        erased = _append(store, "i:0", _secret())
    code = main(["redact", "--db", plain_role_url, erased, "--reason", "gdpr"])
    out = capsys.readouterr()
    assert code == EXIT_INCOMPLETE
    assert out.err == ""
    assert "Traceback" not in out.out
    lines = out.out.splitlines()
    assert any(line.startswith("done: CHECKPOINT: not run (") for line in lines)
    assert any(
        line.startswith("remains: table records: its files were not read (permission")
        for line in lines
    ), lines
    assert any(line.startswith("remains: WAL: pg_wal was not read (") for line in lines)
