"""The CLI takes what people type: prefixes, environment ids, commands to run next.

A session is recorded with the Python API the way the MCP server lays it
out (a root ``mcp:project`` in place, environments ``mcp:project:env-...``
in worktrees), then driven through the real ``goatherd`` main function as a
new process would, on SQLite and PostgreSQL.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
from pathlib import Path
from typing import Any

import pytest
from returns.result import Failure

from goatherd.application import FaultHook, SandboxSpec, ScopeManager
from goatherd.cli import EXIT_FAILED, EXIT_USAGE, main
from goatherd.cli.common import recorded_roots, workspace_resolver
from goatherd.cli.hints import refusal
from goatherd.domain import (
    TRUSTED_APPEND_CONTEXT,
    AppendBatch,
    AppendGroup,
    CheckpointState,
    OutputState,
    RecordDraft,
    RestoreEffectLandedError,
    SettleEffectLandedError,
    TraceStoreError,
    WorkspaceBusyError,
)
from goatherd.infrastructure import (
    Runtime,
    new_local_git_sandbox,
    new_worktree_sandbox,
    open_runtime,
    open_trace_store,
)
from tests.cli.test_lifecycle import _git
from tests.infrastructure.backends import durable_store_url

__all__ = ["durable_store_url"]

pytestmark = pytest.mark.integration
ROOT = "mcp:project"
ENVS = ("env-1a2b3c4d", "env-9f8e7d6c")


class Died(BaseException):
    """A crash in the middle of a command (not an error anything catches)."""


def _project(tmp: Path) -> Path:
    repo = tmp / "project"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    (repo / "app.txt").write_text("one\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "start")
    return repo


def _session(db: str, tmp: Path) -> dict[str, str]:
    """A root and two environments, each with a sealed output and a checkpoint."""
    repo = _project(tmp)
    ids: dict[str, str] = {"repo": str(repo)}
    with open_runtime(db) as runtime:
        mgr = runtime.new_manager()
        root = mgr.create(ROOT, new_local_git_sandbox(repo)).unwrap()
        for n, env in enumerate(ENVS):
            where = tmp / env
            sandbox = new_worktree_sandbox(repo, where)
            sandbox.create(SandboxSpec())
            child = mgr.fork_isolated(root.id, f"{ROOT}:{env}", None, sandbox).unwrap()
            baseline = child.baseline()
            assert baseline is not None
            child.apply_workspace(baseline).unwrap()
            ids[f"cp{n}"] = mgr.create_checkpoint(child.id, b"before").unwrap().id
            (where / "app.txt").write_text(f"attempt {n}\n")
            ids[f"out{n}"] = mgr.seal(child.id).unwrap().id
            ids[f"scope{n}"] = child.id
    return ids


def _manager(runtime: Runtime, faults: FaultHook) -> ScopeManager:
    """A manager of another process: recovered, sandboxes re-adopted as the CLI does."""
    runtime.recover(None).unwrap()
    resolver = workspace_resolver([], recorded_roots(runtime))
    return runtime.new_manager(resolver, faults=faults)


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> Any:
    code, out, err = _run(capsys, *argv, "--json")
    assert code == 0, err
    return json.loads(out)


def _commands(err: str) -> list[list[str]]:
    """The commands a refusal names (between backticks), as argv lists."""
    return [shlex.split(text) for text in re.findall(r"`(goatherd [^`]*)`", err)]


@pytest.fixture
def session(
    durable_store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[str, dict[str, str]]:
    monkeypatch.delenv("GOATHERD_DB", raising=False)
    monkeypatch.delenv("GOATHERD_WORKSPACE", raising=False)
    return durable_store_url, _session(durable_store_url, tmp_path)


def _outputs(capsys: pytest.CaptureFixture[str], db: str) -> dict[str, str]:
    tree = _json(capsys, "scopes", "--db", db)
    return {o["id"]: o["state"] for s in tree["scopes"] for o in s["outputs"]}


class TestWhatPeopleType:
    def test_a_unique_prefix_names_an_output_with_or_without_out(
        self, session: tuple[str, dict[str, str]], capsys: pytest.CaptureFixture[str]
    ) -> None:
        db, ids = session
        out0 = ids["out0"]
        assert _json(capsys, "diff", out0[:-3], "--db", db)["target"] == out0
        bare = out0.removeprefix("out:")[:-3]
        assert _json(capsys, "diff", bare, "--db", db)["target"] == out0
        settled = _json(capsys, "settle", out0[:-3], "select", "--db", db)
        assert settled == {"output": out0, "scope": ids["scope0"], "state": "selected"}

    def test_a_unique_prefix_names_a_scope_and_a_checkpoint(
        self, session: tuple[str, dict[str, str]], capsys: pytest.CaptureFixture[str]
    ) -> None:
        db, ids = session
        # A prefix of one environment's owner path: the scope, not its output.
        live = _json(capsys, "diff", f"{ROOT}:env-9f", "--db", db)
        assert live["target"] == ids["scope1"]
        assert "+attempt 1" in live["diff"]
        restored = _json(capsys, "restore", ids["cp1"][:-2], "--db", db)
        assert restored["checkpoint"] == ids["cp1"]
        assert (Path(ids["repo"]).parent / ENVS[1] / "app.txt").read_text() == "one\n"
        discarded = _json(capsys, "discard", f"scope:{ROOT}:env-1a", "--db", db)
        assert discarded == {"scope": ids["scope0"], "state": "discarded"}

    def test_the_numeric_tail_of_an_output_is_enough_when_unique(
        self, session: tuple[str, dict[str, str]], capsys: pytest.CaptureFixture[str]
    ) -> None:
        db, ids = session
        tail = ids["out1"].rpartition(":")[2]
        other = ids["out0"].rpartition(":")[2]
        digits = next(
            tail[-n:] for n in range(1, len(tail) + 1) if not other.endswith(tail[-n:])
        )
        assert _json(capsys, "diff", digits, "--db", db)["target"] == ids["out1"]

    def test_an_environment_id_names_its_scope_or_its_single_open_output(
        self, session: tuple[str, dict[str, str]], capsys: pytest.CaptureFixture[str]
    ) -> None:
        db, ids = session
        live = _json(capsys, "diff", ENVS[0], "--db", db)
        assert live["target"] == ids["scope0"]
        checkout = _json(
            capsys, "checkout", ENVS[1], str(Path(ids["repo"]).parent / "c"), "--db", db
        )
        assert checkout["target"] == ids["scope1"]
        settled = _json(capsys, "settle", ENVS[1], "select", "--db", db)
        assert settled["output"] == ids["out1"]
        assert (Path(ids["repo"]) / "app.txt").read_text() == "attempt 1\n"
        restored = _json(capsys, "restore", ENVS[0], "--db", db)
        assert restored["checkpoint"] == ids["cp0"]
        # Its one output is consumed now: an environment id says so.
        code, _, err = _run(capsys, "settle", ENVS[1], "discard", "--db", db)
        assert code == EXIT_FAILED
        assert f"{ids['scope1']} has no unconsumed output" in err
        assert ids["out1"] in err
        assert "`goatherd scopes`" in err

    def test_an_environment_with_several_open_outputs_is_refused_listing_them(
        self,
        session: tuple[str, dict[str, str]],
        capsys: pytest.CaptureFixture[str],
        tmp_path: Path,
    ) -> None:
        db, ids = session
        with open_runtime(db) as runtime:
            mgr = runtime.new_manager(
                lambda sid, backend, path: new_worktree_sandbox(Path(ids["repo"]), path)
            )
            (tmp_path / ENVS[0] / "app.txt").write_text("attempt 0, again\n")
            again = mgr.seal(ids["scope0"]).unwrap().id
        code, _, err = _run(capsys, "settle", ENVS[0], "select", "--db", db)
        assert code == EXIT_USAGE
        assert f"{ids['scope0']} has 2 unconsumed outputs" in err
        assert ids["out0"] in err
        assert again in err
        assert err.count("\n") == 1
        assert _outputs(capsys, db)[again] == OutputState.UNCONSUMED.value

    def test_an_ambiguous_prefix_is_a_usage_error_listing_the_candidates(
        self, session: tuple[str, dict[str, str]], capsys: pytest.CaptureFixture[str]
    ) -> None:
        db, ids = session
        code, _, err = _run(capsys, "settle", f"out:{ROOT}:env-", "select", "--db", db)
        assert code == EXIT_USAGE
        assert "is ambiguous: it matches 2 outputs" in err
        assert ids["out0"] in err
        assert ids["out1"] in err
        assert "type more of the id" in err
        assert err.count("\n") == 1
        code, _, err = _run(capsys, "diff", f"{ROOT}:env-", "--db", db)
        assert code == EXIT_USAGE
        assert ids["scope0"] in err
        assert ids["scope1"] in err
        assert set(_outputs(capsys, db).values()) == {"unconsumed"}

    def test_an_unknown_id_names_the_listing_command(
        self, session: tuple[str, dict[str, str]], capsys: pytest.CaptureFixture[str]
    ) -> None:
        db, _ = session
        code, _, err = _run(capsys, "settle", "out:nothing", "select", "--db", db)
        assert code == EXIT_FAILED
        assert err == (
            "goatherd: error: no output matches 'out:nothing';"
            " list them with `goatherd scopes`\n"
        )
        code, _, err = _run(capsys, "restore", "cp:nothing", "--db", db)
        assert code == EXIT_FAILED
        assert "no checkpoint matches 'cp:nothing'" in err
        code, _, err = _run(capsys, "show", "feedface", "--db", db)
        assert code == EXIT_FAILED
        assert "list them with `goatherd log`" in err

    def test_records_owners_and_cuts_take_prefixes(
        self, session: tuple[str, dict[str, str]], capsys: pytest.CaptureFixture[str]
    ) -> None:
        db, ids = session
        # A session's few records may all start with different hex digits; 17
        # more distinct ones make two share one (pigeonhole), whatever ids the
        # session's timestamps gave its own records.
        with open_trace_store(db) as store:
            drafts = tuple(
                RecordDraft("capture", "test.padding.v1", {"n": n}) for n in range(17)
            )
            group = AppendGroup("test:padding", fact_drafts=drafts)
            store.append(TRUSTED_APPEND_CONTEXT, AppendBatch("padding", (group,)))
        log = _json(capsys, "log", "--db", db)
        record = log[-1]["record_id"]
        assert _json(capsys, "show", record[7:19], "--db", db)["record_id"] == record
        firsts: dict[str, list[str]] = {}
        for entry in log:
            firsts.setdefault(entry["record_id"][7], []).append(entry["record_id"])
        shared = next(c for c, found in firsts.items() if len(set(found)) > 1)
        code, _, err = _run(capsys, "show", shared, "--db", db)
        assert code == EXIT_USAGE
        assert "is ambiguous" in err
        assert "`goatherd log`" in err
        # An owner by its scope id or environment id; a cut by a prefix.
        owned = _json(capsys, "log", "--owner", ENVS[0], "--db", db)
        assert {e["owner"] for e in owned} == {f"{ROOT}:{ENVS[0]}"}
        assert _json(capsys, "log", "--owner", ids["scope0"], "--db", db) == owned
        through = owned[-1]["record_id"]
        published = _json(
            capsys, "cut", "publish", "cut:env-one", ENVS[0], through[7:20], "--db", db
        )
        assert published["owner"] == f"{ROOT}:{ENVS[0]}"
        assert published["through_record_id"] == through
        resolved = _json(capsys, "cut", "resolve", "cut:env-o", "--db", db)
        assert resolved["cut_id"] == "cut:env-one"
        code, _, err = _run(capsys, "history", "no-such-owner", "--db", db)
        assert code == EXIT_FAILED
        assert "neither a cut id nor an owner path" in err
        assert "`goatherd log`" in err


class TestRefusalsNameTheCommand:
    def test_a_refused_select_names_the_apply_that_works(
        self, session: tuple[str, dict[str, str]], capsys: pytest.CaptureFixture[str]
    ) -> None:
        db, ids = session
        repo = Path(ids["repo"])
        (repo / "notes.txt").write_text("the human moved on\n")
        code, _, err = _run(capsys, "settle", ENVS[0], "select", "--db", db)
        assert code == EXIT_FAILED
        assert "SettleApply" not in err
        assert "parent workspace has moved" in err
        commands = _commands(err)
        assert commands == [["goatherd", "settle", ids["out0"], "apply", "--db", db]]
        code, _out, err = _run(capsys, *commands[0][1:])
        assert code == 0, err
        assert (repo / "app.txt").read_text() == "attempt 0\n"
        assert (repo / "notes.txt").read_text() == "the human moved on\n"
        assert _outputs(capsys, db)[ids["out0"]] == OutputState.APPLIED.value

    def test_a_crashed_settle_names_the_resume_that_finishes_it(
        self, session: tuple[str, dict[str, str]], capsys: pytest.CaptureFixture[str]
    ) -> None:
        db, ids = session
        repo = Path(ids["repo"])

        def dies(boundary: str, intent: str) -> None:
            if boundary == "after-effect":
                raise Died(intent)

        with open_runtime(db) as runtime:
            mgr = _manager(runtime, dies)
            with pytest.raises(Died):
                mgr.settle(ids["out1"], "selected", seq=7001)
        assert (repo / "app.txt").read_text() == "attempt 1\n"  # the effect landed
        code, _, err = _run(capsys, "settle", ids["out1"], "select", "--db", db)
        assert code == EXIT_FAILED
        assert "claimed by settle attempt 7001" in err
        assert "seq=" not in err
        finish, end = _commands(err)
        assert finish == [
            *("goatherd", "settle", ids["out1"], "select"),
            *("--resume", "7001", "--db", db),
        ]
        assert end[:4] == ["goatherd", "settle", ids["out1"], "release"]
        # What the unfinished claim blocks names the same command: ending the
        # claimed output's scope, applying another output onto the parent.
        code, _, err = _run(capsys, "discard", ids["scope1"], "--db", db)
        assert code == EXIT_FAILED
        assert finish in _commands(err)
        code, _, err = _run(capsys, "settle", ids["out0"], "apply", "--db", db)
        assert code == EXIT_FAILED
        assert "apply conflict" in err  # the landed select changed app.txt
        assert ["goatherd", "diff", ids["out0"], "--db", db] in _commands(err)
        # A busy workspace names its claimant's command, found in the model.
        with open_runtime(db, read_only=True) as runtime:
            runtime.recover(None).unwrap()
            busy = WorkspaceBusyError(f"restore {ids['cp0']}", ROOT, ids["out1"])
            args = argparse.Namespace(db=db, workspace=[])
            translated = refusal(busy, args, runtime.model)
        assert translated is not None
        assert "retry once it settles, or finish it" in str(translated)
        assert finish in _commands(str(translated))
        code, _, err = _run(capsys, *finish[1:])
        assert code == 0, err
        assert _outputs(capsys, db)[ids["out1"]] == OutputState.SELECTED.value

    def test_a_landed_settle_names_the_resume_that_finishes_it(
        self, session: tuple[str, dict[str, str]], capsys: pytest.CaptureFixture[str]
    ) -> None:
        db, ids = session

        def refuse(boundary: str, intent: str) -> None:
            landing = ":settle:" in intent and "claim" not in intent
            if boundary == "before-commit" and landing:
                raise TraceStoreError("disk full")

        with open_runtime(db) as runtime:
            mgr = _manager(runtime, refuse)
            result = mgr.settle(ids["out0"], "applied", seq=7002)
        assert isinstance(result, Failure)
        landed = result.failure()
        assert isinstance(landed, SettleEffectLandedError)
        args = argparse.Namespace(db=db, workspace=[])
        translated = refusal(landed, args)
        assert translated is not None
        message = str(translated)
        assert "seq=" not in message
        assert "disk full" in message
        finish, *ends = _commands(message)
        assert finish[1:] == [
            "settle",
            ids["out0"],
            "apply",
            "--resume",
            "7002",
            "--db",
            db,
        ]
        assert [e[3] for e in ends] == ["release", "discard"]
        code, _, err = _run(capsys, *finish[1:])
        assert code == 0, err
        assert _outputs(capsys, db)[ids["out0"]] == OutputState.APPLIED.value

    def test_a_landed_restore_names_the_resume_that_finishes_it(
        self, session: tuple[str, dict[str, str]], capsys: pytest.CaptureFixture[str]
    ) -> None:
        db, ids = session

        def refuse(boundary: str, intent: str) -> None:
            landing = "restore" in intent and "claim" not in intent
            if boundary == "before-commit" and landing:
                raise TraceStoreError("disk full")

        with open_runtime(db) as runtime:
            mgr = _manager(runtime, refuse)
            result = mgr.restore_checkpoint(ids["cp0"], seq=41)
            assert isinstance(result, Failure)
            landed = result.failure()
            assert isinstance(landed, RestoreEffectLandedError), landed
        translated = refusal(landed, argparse.Namespace(db=db, workspace=[]))
        assert translated is not None
        (resume,) = _commands(str(translated))
        assert resume[1:] == ["restore", ids["cp0"], "--resume", "41", "--db", db]
        code, _, err = _run(capsys, *resume[1:])
        assert code == 0, err
        tree = _json(capsys, "scopes", "--db", db)
        states = {c["id"]: c["state"] for c in tree["checkpoints"]}
        assert states[ids["cp0"]] == CheckpointState.USED.value

    def test_a_consumed_output_and_a_used_checkpoint_name_the_listing(
        self, session: tuple[str, dict[str, str]], capsys: pytest.CaptureFixture[str]
    ) -> None:
        db, ids = session
        assert _run(capsys, "settle", ids["out0"], "release", "--db", db)[0] == 0
        code, _, err = _run(capsys, "settle", ids["out0"], "select", "--db", db)
        assert code == EXIT_FAILED
        assert "released" in err
        assert "`goatherd scopes` lists the outputs" in err
        assert _run(capsys, "restore", ids["cp1"], "--db", db)[0] == 0
        code, _, err = _run(capsys, "restore", ids["cp1"], "--db", db)
        assert code == EXIT_FAILED
        assert "`goatherd scopes` lists the checkpoints still valid" in err
        assert _run(capsys, "discard", ids["scope1"], "--db", db)[0] == 0
        code, _, err = _run(capsys, "settle", ids["out1"], "select", "--db", db)
        assert code == EXIT_FAILED
        assert "`goatherd scopes` shows each scope's state" in err


def test_the_typed_db_is_repeated_and_an_environment_db_is_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from goatherd.cli.hints import command

    monkeypatch.setenv("GOATHERD_DB", "/tmp/env trace.sqlite")
    args = argparse.Namespace(db="/tmp/env trace.sqlite", workspace=["/src/my repo"])
    assert command(args, "settle", "out:a:1", "apply") == (
        "`goatherd settle out:a:1 apply --workspace '/src/my repo'`"
    )
    args = argparse.Namespace(db="/tmp/other.sqlite", workspace=[])
    assert command(args, "verify", workspace=False) == (
        "`goatherd verify --db /tmp/other.sqlite`"
    )


def test_a_conflicting_apply_names_the_hunks_and_consumes_nothing(
    session: tuple[str, dict[str, str]], capsys: pytest.CaptureFixture[str]
) -> None:
    db, ids = session
    _json(capsys, "settle", ids["out1"], "select", "--db", db)
    code, _, err = _run(capsys, "settle", ids["out0"], "apply", "--db", db)
    assert code == EXIT_FAILED
    # Both attempts rewrote the file's only line: git's merge names it.
    assert "app.txt (ours line 1 / theirs line 1)" in err
    assert (Path(ids["repo"]) / "app.txt").read_text() == "attempt 1\n"
    assert _outputs(capsys, db)[ids["out0"]] == "unconsumed"
