"""``goatherd log``, ``show`` and ``stats`` read a real trace and never write it."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from goatherd.cli import main


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


class TestLog:
    def test_log_lists_records_in_commit_order(self, trace_file, capsys) -> None:
        path, _ = trace_file
        assert main(["log", str(path)]) == 0
        lines = capsys.readouterr().out.splitlines()
        assert len(lines) == 4  # call, result, note, frontier
        assert "agent:main#0" in lines[0]
        assert "bash" in lines[0]

    def test_log_filters_by_owner_subtree_and_schema(self, trace_file, capsys) -> None:
        path, _ = trace_file
        assert main(["log", str(path), "--owner", "agent:main", "--json"]) == 0
        rows = json.loads(capsys.readouterr().out)
        assert {row["owner"] for row in rows} == {"agent:main", "agent:main:sub"}
        assert main(["log", str(path), "--schema", "note.v1", "--json"]) == 0
        rows = json.loads(capsys.readouterr().out)
        assert [row["payload"] for row in rows] == [{"text": "hi"}]

    def test_log_never_modifies_the_file(self, trace_file, capsys) -> None:
        path, _ = trace_file
        before = _digest(path)
        assert main(["log", str(path)]) == 0
        assert main(["stats", str(path)]) == 0
        assert _digest(path) == before


class TestShow:
    def test_show_accepts_a_unique_prefix(self, trace_file, capsys) -> None:
        path, ids = trace_file
        assert main(["show", str(path), ids["result"][7:19], "--json"]) == 0
        details = json.loads(capsys.readouterr().out)
        assert details["record_id"] == ids["result"]
        assert details["caused_by"] == [ids["call"]]
        assert details["placements"][0]["path_ref"] == "agent:main:sub"
        assert len(details["witness_chain"]) == 2

    def test_show_lists_children_of_a_parent(self, trace_file, capsys) -> None:
        path, ids = trace_file
        assert main(["show", str(path), ids["call"]]) == 0
        out = capsys.readouterr().out
        assert f"child      {ids['result']}" in out

    def test_an_unknown_record_is_one_clear_line(self, trace_file, capsys) -> None:
        path, _ = trace_file
        assert main(["show", str(path), "deadbeef"]) == 1
        err = capsys.readouterr().err
        assert err.strip() == (
            "goatherd: error: no record matches 'deadbeef';"
            " list them with `goatherd log`"
        )


class TestStats:
    def test_stats_counts_records_witnesses_and_blobs(self, trace_file, capsys) -> None:
        path, _ = trace_file
        assert main(["stats", str(path), "--json"]) == 0
        stats = json.loads(capsys.readouterr().out)
        assert stats["log_positions"] == 4
        assert stats["checkpoint_blobs"] == 1
        assert stats["frontiers"] == 1
        assert stats["records"] == stats["witnesses"] + 4
        assert stats["schemas"]["note.v1"] == 1


class TestOpening:
    @pytest.mark.parametrize("command", ["log", "stats", "verify"])
    def test_a_missing_file_is_refused_without_creating_it(
        self, tmp_path: Path, capsys, command: str
    ) -> None:
        missing = tmp_path / "nope.sqlite"
        assert main([command, str(missing)]) == 1
        assert "not found" in capsys.readouterr().err
        assert not missing.exists()

    def test_a_foreign_file_is_refused(self, tmp_path: Path, capsys) -> None:
        foreign = tmp_path / "notes.txt"
        foreign.write_text("not a database at all, just some text to read\n" * 20)
        before = _digest(foreign)
        assert main(["log", str(foreign)]) == 1
        assert "goatherd: error:" in capsys.readouterr().err
        assert _digest(foreign) == before


class TestArguments:
    @pytest.mark.parametrize(
        ("option", "value", "says"),
        [
            ("--limit", "0", "must be at least 1, got 0"),
            ("--limit", "-1", "must be at least 1, got -1"),
            ("--limit", "ten", "not a whole number: 'ten'"),
            ("--limit", str(2**70), "too large"),
            ("--tail", "0", "must be at least 1, got 0"),
            ("--since", "-5", "must be 0 or more, got -5"),
            ("--interval", "0", "must be 0.01 to 3600 seconds"),
        ],
    )
    def test_a_bad_number_is_a_usage_error_naming_the_option(
        self, trace_file, capsys, option: str, value: str, says: str
    ) -> None:
        path, _ = trace_file
        with pytest.raises(SystemExit) as info:
            main(["log", "--db", str(path), option, value])
        assert info.value.code == 2
        err = capsys.readouterr().err
        assert option in err
        assert says in err

    def test_limit_and_tail_take_what_they_say(self, trace_file, capsys) -> None:
        path, _ = trace_file
        assert main(["log", "--db", str(path), "--json"]) == 0
        everything = json.loads(capsys.readouterr().out)
        assert main(["log", "--db", str(path), "--json", "--limit", "1"]) == 0
        assert json.loads(capsys.readouterr().out) == everything[:1]
        assert main(["log", "--db", str(path), "--json", "--tail", "2"]) == 0
        assert json.loads(capsys.readouterr().out) == everything[-2:]
        since = str(everything[2]["position"])
        assert main(["log", "--db", str(path), "--json", "--since", since]) == 0
        assert json.loads(capsys.readouterr().out) == everything[2:]


COMMANDS_ON_A_MISSING_TRACE = [
    ["log"],
    ["show", "deadbeef"],
    ["stats"],
    ["verify"],
    ["recover"],
    ["export"],
    ["scopes"],
    ["diff", "scope:x"],
    ["checkout", "scope:x", "out-dir"],
    ["settle", "out:x:1", "discard"],
    ["discard", "scope:x"],
    ["restore", "cp:x:1"],
    ["cut", "publish", "cut:1", "agent", "deadbeef"],
    ["cut", "resolve", "cut:1"],
    ["history", "agent"],
    ["projections", "list"],
    ["projections", "catch-up"],
    ["projections", "rebuild", "ui_index"],
]


@pytest.mark.parametrize(
    "argv", COMMANDS_ON_A_MISSING_TRACE, ids=lambda a: " ".join(a[:2])
)
def test_no_command_but_import_creates_a_database(
    tmp_path: Path, capsys, monkeypatch, argv: list[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    typo = tmp_path / "typo.sqlite"
    assert main([*argv, "--db", str(typo)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "not found" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == []
