"""The lifecycle commands through the real CLI, on SQLite and PostgreSQL.

A session is recorded with the Python API (a git project, a root scope in
place, isolated attempts in worktrees, a checkpoint); the commands then work
on it from the shell as a new process would: recovery rebuilds the manager,
worktrees are re-adopted from the fork records, the root's repository comes
from ``--workspace``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from goatherd.application import Registry, SandboxSpec, TaskControl, start_task_sync
from goatherd.cli import main
from goatherd.domain import (
    TRUSTED_APPEND_CONTEXT,
    AppendBatch,
    AppendGroup,
    RecordDraft,
    ScopeState,
)
from goatherd.infrastructure import (
    new_local_git_sandbox,
    new_worktree_sandbox,
    open_runtime,
)
from goatherd.infrastructure.store import open_trace_store
from tests.infrastructure.backends import durable_store_url

__all__ = ["durable_store_url"]

pytestmark = pytest.mark.integration
ROOT = "agent:main"


def _git(repo: Path, *args: str) -> None:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.invalid",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.invalid",
    }
    subprocess.run(["git", *args], cwd=repo, check=True, env=env, capture_output=True)


def _session(db: str, tmp: Path) -> dict[str, str]:
    """Record a root, two isolated attempts (sealed, unsettled) and a checkpoint."""
    repo = tmp / "project"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    (repo / "app.txt").write_text("one\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "start")
    ids: dict[str, str] = {"repo": str(repo)}
    with open_runtime(db) as runtime:
        mgr = runtime.new_manager()
        root = mgr.create(ROOT, new_local_git_sandbox(repo)).unwrap()
        ids["checkpoint"] = mgr.create_checkpoint(root.id, b"conversation").unwrap().id
        for n in range(2):
            sandbox = new_worktree_sandbox(repo, tmp / f"try-{n}")
            sandbox.create(SandboxSpec())
            forked = mgr.fork_isolated(root.id, f"{ROOT}:try-{n}", None, sandbox)
            child = forked.unwrap()
            baseline = child.baseline()
            assert baseline is not None
            child.apply_workspace(baseline).unwrap()
            (tmp / f"try-{n}" / "app.txt").write_text(f"attempt {n}\n")
            ids[f"out{n}"] = mgr.seal(child.id).unwrap().id
            ids[f"scope{n}"] = child.id
    return ids


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _json(capsys, *argv: str) -> Any:
    code, out, err = _run(capsys, *argv, "--json")
    assert code == 0, err
    return json.loads(out)


@pytest.fixture
def session(durable_store_url: str, tmp_path: Path) -> tuple[str, dict[str, str]]:
    return durable_store_url, _session(durable_store_url, tmp_path)


class TestLifecycle:
    def test_scopes_lists_the_tree_with_states_and_outputs(
        self, session, capsys
    ) -> None:
        db, ids = session
        tree = _json(capsys, "scopes", "--db", db)
        states = {s["id"]: s["state"] for s in tree["scopes"]}
        assert states[ids["scope0"]] == "active"
        outputs = {o["id"]: o["state"] for s in tree["scopes"] for o in s["outputs"]}
        assert outputs[ids["out0"]] == "unconsumed"
        code, text, _ = _run(capsys, "--db", db, "scopes")
        assert code == 0
        assert ids["scope1"] in text

    def test_diff_of_an_output_is_a_unified_diff_against_its_base(
        self, session, capsys
    ) -> None:
        db, ids = session
        code, out, err = _run(capsys, "diff", ids["out0"], "--db", db)
        assert code == 0, err
        assert "-one" in out
        assert "+attempt 0" in out
        assert "\x1b[" not in out  # no colour when not on a terminal
        colored = _run(capsys, "diff", ids["out0"], "--db", db, "--color", "always")
        assert "\x1b[32m+attempt 0" in colored[1]

    def test_diff_of_a_live_scope_reads_its_worktree(self, session, capsys) -> None:
        db, ids = session
        data = _json(capsys, "diff", ids["scope1"], "--db", db)
        assert "+attempt 1" in data["diff"]

    def test_reading_commands_record_nothing_when_a_checkpoint_went_stale(
        self, session, capsys, tmp_path
    ) -> None:
        db, ids = session
        repo = Path(ids["repo"])
        (repo / "new.txt").write_text("moved on\n")
        _git(repo, "add", "-A")
        _git(repo, "commit", "-qm", "the root moved past its checkpoint")
        before = _json(capsys, "stats", "--db", db)
        _json(capsys, "diff", ids["scope1"], "--db", db)
        _json(capsys, "checkout", ids["scope0"], str(tmp_path / "c"), "--db", db)
        _json(capsys, "scopes", "--db", db)
        assert _json(capsys, "stats", "--db", db) == before
        tree = _json(capsys, "scopes", "--db", db)
        states = {c["id"]: c["state"] for c in tree["checkpoints"]}
        assert states[ids["checkpoint"]] == "valid"

    def test_checkout_writes_an_outputs_files_into_a_new_directory(
        self, session, capsys, tmp_path
    ) -> None:
        db, ids = session
        target = tmp_path / "out"
        data = _json(
            capsys,
            "checkout",
            ids["checkpoint"],
            str(target),
            "--db",
            db,
            "--workspace",
            ids["repo"],
        )
        assert data["files"] == 1
        assert (target / "app.txt").read_text() == "one\n"
        code, _, err = _run(capsys, "checkout", ids["out0"], str(target), "--db", db)
        assert code == 1
        assert "not an empty directory" in err

    def test_settle_select_then_a_second_settle_is_refused(
        self, session, capsys
    ) -> None:
        db, ids = session
        repo = Path(ids["repo"])
        code, _, err = _run(
            capsys,
            "settle",
            ids["out1"],
            "select",
            "--db",
            db,
            "--workspace",
            str(repo),
        )
        assert code == 0, err
        assert (repo / "app.txt").read_text() == "attempt 1\n"
        code, _, err = _run(
            capsys,
            "settle",
            ids["out1"],
            "release",
            "--db",
            db,
            "--workspace",
            str(repo),
        )
        assert code == 1
        assert err.count("\n") == 1
        assert "out:" in err

    def test_select_finds_the_roots_repository_where_its_record_says(
        self, session, capsys
    ) -> None:
        db, ids = session
        code, out, err = _run(capsys, "settle", ids["out0"], "select", "--db", db)
        assert code == 0, err
        assert (Path(ids["repo"]) / "app.txt").read_text() == "attempt 0\n"
        assert "selected" in out

    def test_select_with_the_repository_gone_says_how_to_name_it(
        self, session, capsys, tmp_path
    ) -> None:
        db, ids = session
        moved = tmp_path / "moved"
        Path(ids["repo"]).rename(moved)
        code, _, err = _run(capsys, "settle", ids["out0"], "select", "--db", db)
        assert code == 1
        assert "--workspace" in err
        assert err.count("\n") == 1
        tree = _json(capsys, "scopes", "--db", db)
        outputs = {o["id"]: o["state"] for s in tree["scopes"] for o in s["outputs"]}
        assert outputs[ids["out0"]] == "unconsumed"  # nothing consumed
        assert (moved / "app.txt").read_text() == "one\n"
        code, _, err = _run(
            capsys, "settle", ids["out0"], "select", "--db", db, "--workspace",
            str(moved),
        )  # fmt: skip
        assert code == 0, err
        assert (moved / "app.txt").read_text() == "attempt 0\n"

    def test_restore_applies_a_checkpoint_once(self, session, capsys, tmp_path) -> None:
        db, ids = session
        repo = Path(ids["repo"])
        (repo / "app.txt").write_text("a mess\n")
        snapshot = tmp_path / "snapshot.bin"
        args = ["restore", ids["checkpoint"], "--db", db, "--workspace", str(repo)]
        code, _, err = _run(capsys, *args, "--snapshot-to", str(snapshot))
        assert code == 0, err
        assert (repo / "app.txt").read_text() == "one\n"
        assert snapshot.read_bytes() == b"conversation"
        code, _, err = _run(capsys, *args)
        assert code == 1
        assert ids["checkpoint"] in err

    def test_cut_publish_and_resolve_and_history(self, session, capsys) -> None:
        db, _ = session
        log = _json(capsys, "log", "--db", db, "--owner", ROOT)
        record = [e for e in log if e["owner"] == ROOT][-1]["record_id"]
        published = _json(
            capsys, "cut", "publish", "cut:1", ROOT, record[7:19], "--db", db
        )
        assert published["through_record_id"] == record
        resolved = _json(capsys, "cut", "resolve", "cut:1", "--db", db)
        assert resolved["records"][-1]["record_id"] == record
        code, _, err = _run(capsys, "history", "nobody", "--db", db)
        assert code == 1
        assert "neither a cut id nor an owner path" in err


def _shell(*argv: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "goatherd", *argv],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


def test_a_stray_active_scope_and_an_unconsumed_output_are_cleaned_from_the_shell(
    durable_store_url: str, tmp_path: Path
) -> None:
    # The state two collided demos leave: active attempts with worktrees on
    # disk and sealed outputs nobody settled.
    ids = _session(durable_store_url, tmp_path)
    env = {**os.environ, "GOATHERD_DB": durable_store_url}
    tree = json.loads(_shell("scopes", "--json", env=env).stdout)
    stray = [s["id"] for s in tree["scopes"] if s["state"] == "active" and s["parent"]]
    assert stray == [ids["scope0"], ids["scope1"]]
    # Cleanup from the shell: discarding an output discards its scope too;
    # the other stray scope is discarded directly.
    done = _shell("settle", ids["out0"], "discard", env=env)
    assert done.returncode == 0, done.stderr
    done = _shell("discard", ids["scope1"], env=env)
    assert done.returncode == 0, done.stderr
    tree = json.loads(_shell("scopes", "--json", env=env).stdout)
    states = {s["id"]: s["state"] for s in tree["scopes"]}
    assert states[ids["scope0"]] == ScopeState.DISCARDED.value
    assert states[ids["scope1"]] == ScopeState.DISCARDED.value
    assert not (tmp_path / "try-0").exists()
    assert not (tmp_path / "try-1").exists()


def test_diff_of_an_output_cut_at_the_blob_limit_is_rebuilt_from_git(
    tmp_path: Path, capsys
) -> None:
    db = str(tmp_path / "trace.sqlite")
    repo = tmp_path / "project"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    (repo / "app.txt").write_text("one\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "start")
    with open_runtime(db) as runtime:
        runtime.store.with_checkpoint_blob_limit(300)
        mgr = runtime.new_manager()
        root = mgr.create(ROOT, new_local_git_sandbox(repo)).unwrap()
        sandbox = new_worktree_sandbox(repo, tmp_path / "try")
        sandbox.create(SandboxSpec())
        child = mgr.fork_isolated(root.id, f"{ROOT}:try", None, sandbox).unwrap()
        lines = "".join(f"line {n}\n" for n in range(200))
        (tmp_path / "try" / "app.txt").write_text(lines)
        out = mgr.seal(child.id).unwrap()
        assert len(out.diff.encode()) <= 300
    code, text, err = _run(capsys, "diff", out.id, "--db", db)
    assert code == 0, err
    assert "+line 199" in text
    assert err == ""
    (tmp_path / "try").rename(tmp_path / "gone")
    repo.rename(tmp_path / "elsewhere")
    code, text, err = _run(capsys, "diff", out.id, "--db", db)
    assert code == 0, err
    assert "+line 0" in text
    assert "+line 199" not in text
    assert "cut at the blob limit; not rebuilt" in err
    assert err.count("\n") == 1


def test_history_of_a_task_tree_by_owner_and_by_cut(
    durable_store_url: str, capsys
) -> None:
    registry = Registry()
    registry.register("Leaf", lambda control: {"leaf": True})

    def tree(control: TaskControl) -> dict[str, object]:
        control.publish("start", {"n": 1})
        control.await_terminal(control.spawn("Leaf", {"n": 1}))
        return {"children": 1}

    registry.register("Tree", tree)
    with open_trace_store(durable_store_url) as store:
        run = start_task_sync(store, registry, "Tree", "run:tree").unwrap()
    by_owner = _json(capsys, "history", run.execution_id, "--db", durable_store_url)
    assert by_owner["root"]["status"] == "succeeded"
    assert by_owner["root"]["outputs"] == {"children": 1}
    assert [
        (c["relation"], c["task_ref"], c["status"]) for c in by_owner["children"]
    ] == [("spawned", "Leaf", "succeeded")]
    assert [f["kind"] for f in by_owner["published_facts"]] == ["start"]
    by_cut = _json(capsys, "history", run.frontier_id, "--db", durable_store_url)
    assert by_cut == by_owner
    code, text, _ = _run(capsys, "history", run.execution_id, "--db", durable_store_url)
    assert code == 0
    assert text.splitlines()[0] == f"{run.execution_id}  Tree  succeeded"


def test_log_tail_since_owner_and_follow(
    durable_store_url: str, tmp_path: Path, capsys
) -> None:
    ids = _session(durable_store_url, tmp_path)
    entries = _json(capsys, "log", "--db", durable_store_url)
    assert [e["position"] for e in entries] == list(range(len(entries)))
    assert (
        _json(capsys, "log", "--db", durable_store_url, "--tail", "3") == entries[-3:]
    )
    since = str(entries[4]["position"])
    assert (
        _json(capsys, "log", "--db", durable_store_url, "--since", since) == entries[4:]
    )
    owned = _json(capsys, "log", "--db", durable_store_url, "--owner", f"{ROOT}:try-0")
    assert owned
    assert {e["owner"] for e in owned} == {f"{ROOT}:try-0"}
    assert ids["scope0"]
    follower = subprocess.Popen(
        [sys.executable, "-m", "goatherd", "log", "--follow", "--json", "--owner",
         "followed", "--interval", "0.05", "--db", durable_store_url],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        time.sleep(1.0)
        with open_trace_store(durable_store_url) as store:
            draft = RecordDraft("capture", "cli.followed.v1", {"n": 1})
            batch = AppendBatch(
                "cli:follow", (AppendGroup("followed", fact_drafts=(draft,)),)
            )
            store.append(TRUSTED_APPEND_CONTEXT, batch)
        assert follower.stdout is not None
        line = follower.stdout.readline()
        followed = json.loads(line)
        assert (followed["owner"], followed["schema_ref"]) == (
            "followed",
            "cli.followed.v1",
        )
        assert followed["position"] == len(entries)
    finally:
        follower.terminate()
        follower.communicate(timeout=30)
