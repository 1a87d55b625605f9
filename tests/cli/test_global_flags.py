"""One way to name the trace (``--db``, ``$GOATHERD_DB``); global flags anywhere."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from goatherd.cli import main


@pytest.mark.parametrize(
    "argv",
    [
        ["--db", "{db}", "--json", "stats"],
        ["stats", "--db", "{db}", "--json"],
        ["--json", "stats", "--db", "{db}"],
        ["--db", "{db}", "stats", "--json", "--debug"],
        ["--debug", "stats", "{db}", "--json"],  # the old positional, hidden
    ],
    ids=lambda argv: " ".join(argv),
)
def test_db_json_and_debug_work_before_or_after_the_command(
    trace_file, capsys, argv: list[str]
) -> None:
    path, _ = trace_file
    assert main([a.replace("{db}", str(path)) for a in argv]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["records"] > 0


def test_goatherd_db_names_the_trace_and_db_wins_over_it(
    trace_file, tmp_path: Path, capsys, monkeypatch
) -> None:
    path, _ = trace_file
    monkeypatch.setenv("GOATHERD_DB", str(path))
    assert main(["stats", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["records"] > 0
    missing = tmp_path / "other.sqlite"
    assert main(["stats", "--db", str(missing)]) == 1
    assert "other.sqlite" in capsys.readouterr().err
    assert not missing.exists()


def test_no_trace_named_is_a_usage_error(capsys, monkeypatch) -> None:
    monkeypatch.delenv("GOATHERD_DB", raising=False)
    with pytest.raises(SystemExit) as info:
        main(["stats"])
    assert info.value.code == 2
    assert "no trace named: pass --db DB or set GOATHERD_DB" in capsys.readouterr().err


def test_a_trace_named_twice_is_a_usage_error(trace_file, capsys) -> None:
    path, _ = trace_file
    with pytest.raises(SystemExit) as info:
        main(["stats", str(path), "--db", str(path) + ".other"])
    assert info.value.code == 2
    assert "the trace is named twice" in capsys.readouterr().err


def test_a_command_without_a_trace_refuses_db(trace_file, capsys) -> None:
    path, _ = trace_file
    with pytest.raises(SystemExit) as info:
        main(["demo", "--db", str(path)])
    assert info.value.code == 2
    assert "demo does not open a trace: drop --db" in capsys.readouterr().err
