"""``goatherd verify``, ``export``, ``import``: tamper evidence, exact round trips."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, inspect, text
from sqlalchemy.engine import make_url

import goatherd
from goatherd.cli import main
from goatherd.infrastructure.store import SQLiteTraceStore


@pytest.fixture
def postgres_database() -> Iterator[str]:
    """A new, empty database; its URL carries a password (trust auth ignores it)."""
    base = os.environ.get("GOATHERD_TEST_DB_URL")
    if not base:
        pytest.skip("GOATHERD_TEST_DB_URL is not set (no PostgreSQL server)")
    url = make_url(base)
    admin = create_engine(url, isolation_level="AUTOCOMMIT")
    name = f"import_{uuid.uuid4().hex[:10]}"
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield url.set(database=name, password="secret").render_as_string(
            hide_password=False
        )
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


class TestVerify:
    def test_an_untouched_trace_verifies(self, trace_file, capsys) -> None:
        path, _ = trace_file
        assert main(["verify", str(path)]) == 0
        assert capsys.readouterr().out.startswith("ok: ")

    def test_an_edited_payload_is_named_as_the_first_bad_record(
        self, trace_file, capsys
    ) -> None:  # the tamper test of issue 8
        path, ids = trace_file
        with sqlite3.connect(path) as conn:
            conn.execute(
                "UPDATE records SET body_json = replace(body_json, 'pytest', 'rm -rf')"
                " WHERE record_id = ?",
                (ids["call"],),
            )
        assert main(["verify", str(path)]) == 1
        err = capsys.readouterr().err
        assert err.startswith(f"verify failed: identity: record {ids['call']}")

    def test_a_reordered_parent_edge_is_found(self, trace_file, capsys) -> None:
        path, ids = trace_file
        with sqlite3.connect(path) as conn:
            conn.execute("PRAGMA foreign_keys=OFF")
            conn.execute(
                "UPDATE record_edges SET parent_record_id = ?"
                " WHERE child_record_id = ?",
                (ids["result"], ids["result"]),
            )
        assert main(["verify", str(path), "--json"]) == 1
        report = json.loads(capsys.readouterr().out)
        assert report["problems"][0]["check"] == "causality"
        assert report["problems"][0]["record_id"] == ids["result"]

    def test_a_skipped_ordinal_is_found(self, trace_file, capsys) -> None:
        path, _ = trace_file
        with sqlite3.connect(path) as conn:
            conn.execute(
                "UPDATE path_entries SET path_ordinal = 5 WHERE path_ref = 'other'"
            )
        assert main(["verify", str(path)]) == 1
        assert "ordinals" in capsys.readouterr().err


class TestExportImport:
    def test_a_round_trip_keeps_every_id_and_verifies(
        self, trace_file, tmp_path: Path, capsys
    ) -> None:
        path, _ = trace_file
        exported = tmp_path / "trace.jsonl"
        assert main(["export", str(path), "-o", str(exported)]) == 0
        copy = tmp_path / "copy.sqlite"
        assert main(["import", str(exported), str(copy)]) == 0
        assert main(["verify", str(copy)]) == 0
        again = tmp_path / "again.jsonl"
        assert main(["export", str(copy), "-o", str(again)]) == 0
        assert again.read_bytes() == exported.read_bytes()
        with SQLiteTraceStore(str(path)) as one, SQLiteTraceStore(str(copy)) as two:
            ctx = goatherd.TRUSTED_READ_CONTEXT
            for owner in ("agent:main", "agent:main:sub", "other", "kernel:witness"):
                assert one.read_owner_prefix(ctx, owner, 99) == two.read_owner_prefix(
                    ctx, owner, 99
                )
            assert one.read_owner_cutoff("frontier:demo") == two.read_owner_cutoff(
                "frontier:demo"
            )
            assert one.load_checkpoint_blobs() == two.load_checkpoint_blobs()

    def test_a_forged_line_is_rejected_with_its_number_and_nothing_is_written(
        self, trace_file, tmp_path: Path, capsys
    ) -> None:
        path, _ = trace_file
        exported = tmp_path / "trace.jsonl"
        assert main(["export", str(path), "-o", str(exported)]) == 0
        lines = exported.read_text(encoding="utf-8").splitlines(keepends=True)
        number = next(i for i, line in enumerate(lines, 1) if '"success":true' in line)
        lines[number - 1] = lines[number - 1].replace(
            '"success":true', '"success":false'
        )
        forged = tmp_path / "forged.jsonl"
        forged.write_text("".join(lines), encoding="utf-8")
        target = tmp_path / "forged.sqlite"
        assert main(["import", str(forged), str(target)]) == 1
        err = capsys.readouterr().err
        assert f"line {number}:" in err
        assert "forged id or edited content" in err
        # Nothing is left behind (no target, no temporary file), so the retry
        # with the good file works.
        assert not target.exists()
        assert [p.name for p in tmp_path.iterdir() if "forged.sqlite" in p.name] == []
        assert main(["import", str(exported), str(target)]) == 0
        assert main(["verify", str(target)]) == 0

    def test_a_truncated_export_is_rejected(
        self, trace_file, tmp_path: Path, capsys
    ) -> None:
        path, _ = trace_file
        exported = tmp_path / "trace.jsonl"
        assert main(["export", str(path), "-o", str(exported)]) == 0
        lines = exported.read_text(encoding="utf-8").splitlines(keepends=True)
        cut = tmp_path / "cut.jsonl"
        cut.write_text("".join(lines[:-1]), encoding="utf-8")
        assert main(["import", str(cut), str(tmp_path / "cut.sqlite")]) == 1
        assert "truncated" in capsys.readouterr().err

    def test_import_refuses_an_existing_database(
        self, trace_file, tmp_path: Path, capsys
    ) -> None:
        path, _ = trace_file
        exported = tmp_path / "trace.jsonl"
        assert main(["export", str(path), "-o", str(exported)]) == 0
        assert main(["import", str(exported), str(path)]) == 1
        assert "already exists" in capsys.readouterr().err

    def test_a_line_over_the_limit_is_refused_and_leaves_nothing(
        self, trace_file, tmp_path: Path, capsys
    ) -> None:
        path, _ = trace_file
        exported = tmp_path / "trace.jsonl"
        assert main(["export", str(path), "-o", str(exported)]) == 0
        target = tmp_path / "small.sqlite"
        args = ["import", "--max-line-bytes", "200", str(exported), str(target)]
        assert main(args) == 1
        err = capsys.readouterr().err
        assert "line 2: the line is longer than 200 bytes" in err
        assert "--max-line-bytes" in err
        assert not target.exists()

    def test_import_into_postgres_is_all_or_nothing(
        self, trace_file, tmp_path: Path, capsys, postgres_database: str
    ) -> None:
        path, _ = trace_file
        exported = tmp_path / "trace.jsonl"
        assert main(["export", str(path), "-o", str(exported)]) == 0
        lines = exported.read_text(encoding="utf-8").splitlines(keepends=True)
        forged = tmp_path / "forged.jsonl"
        forged.write_text("".join(lines[:-2] + lines[-1:]), encoding="utf-8")
        assert main(["import", str(forged), postgres_database]) == 1
        assert "line" in capsys.readouterr().err
        engine = create_engine(postgres_database)
        with engine.connect() as conn:
            assert inspect(conn).get_table_names() == []
        engine.dispose()
        assert main(["import", str(exported), postgres_database]) == 0
        out = capsys.readouterr().out
        assert "imported 3 intents" in out
        assert "secret" not in out
        assert main(["verify", postgres_database]) == 0


@pytest.mark.integration  # the installed console script, in a subprocess
class TestConsoleScript:
    def test_errors_are_one_line_without_a_traceback(self, tmp_path: Path) -> None:
        result = subprocess.run(
            [sys.executable, "-m", "goatherd", "stats", str(tmp_path / "missing.db")],
            capture_output=True,
            text=True,
            check=False,
        )
        assert result.returncode == 1
        assert "Traceback" not in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1

    def test_debug_shows_the_traceback(self, tmp_path: Path) -> None:
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "goatherd",
                "--debug",
                "stats",
                str(tmp_path / "x.db"),
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        assert result.returncode == 1
        assert "Traceback" in result.stderr

    def test_help_and_version(self) -> None:
        result = subprocess.run(
            [sys.executable, "-m", "goatherd", "--version"],
            capture_output=True,
            text=True,
            check=True,
        )
        assert result.stdout.strip() == f"goatherd {goatherd.__version__}"
