"""A manager-less scope in one process, the manager in another (and back).

Real git workspaces (the repository in place for the root, a detached
worktree for the isolated child) and a trace on SQLite or PostgreSQL; every
step in a separate Python process runs as a script through
``python -c``.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from returns.result import Success

from goatherd.application import RecoverOptions, recover_scopes
from goatherd.domain import CheckpointState, ScopeCreated, ScopeState
from goatherd.infrastructure.audit.verify import verify_trace
from goatherd.infrastructure.bootstrap import runtime_context_for, scope_manager_for
from goatherd.infrastructure.sandbox import new_local_git_sandbox, new_worktree_sandbox
from goatherd.infrastructure.store import SQLiteTraceStore, open_trace_store
from tests.integration.runtime.support import make_repo

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[3]


def open_store(trace: str):
    return open_trace_store(trace) if "://" in trace else SQLiteTraceStore(trace)


def in_another_process(trace: str, body: str, *, wait: bool = True):
    script = textwrap.dedent(
        """
        import os, sys
        from pathlib import Path
        from goatherd import Scope
        from goatherd.infrastructure.sandbox import (
            new_local_git_sandbox, new_worktree_sandbox,
        )
        from goatherd.infrastructure.store import SQLiteTraceStore, open_trace_store
        trace = sys.argv[1]
        store = open_trace_store(trace) if "://" in trace else SQLiteTraceStore(trace)
        """
    ) + textwrap.dedent(body)
    command = [sys.executable, "-c", script, trace]
    if not wait:
        return subprocess.Popen(
            command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_scope_made_without_a_manager_is_recovered_by_one_in_another_process(
    trace, tmp_path
):
    repo = make_repo(tmp_path / "repo", {"app.py": b"v1\n"})
    worktree = tmp_path / "wt-try"
    in_another_process(
        trace,
        f"""
        repo, wt = Path({str(repo)!r}), Path({str(worktree)!r})
        root = Scope.new(store, "agent:main").with_sandbox(
            new_local_git_sandbox(repo), owns=False
        )
        notes = root.fork("agent:notes").unwrap()
        notes.append_fact("app.note.v1", "note", {{"text": "looked around"}}).unwrap()
        cp = root.create_checkpoint(b"the conversation").unwrap()
        sb = new_worktree_sandbox(repo, wt)
        from goatherd import SandboxSpec
        sb.create(SandboxSpec())
        child = root.fork_isolated("agent:try", None, sb).unwrap()
        (wt / "answer.txt").write_bytes(b"42\\n")
        out = child.seal().unwrap()
        (repo / "app.py").write_bytes(b"the agent broke it\\n")
        print(cp.id, out.id)
        os._exit(0)  # no clean shutdown: the trace is all that is left
        """,
    )
    calls: list[tuple[str, str, str]] = []

    def resolver(scope_id: str, backend: str, path: str):
        calls.append((scope_id, backend, path))
        if scope_id == "scope:agent:main":
            return new_local_git_sandbox(repo)
        return new_worktree_sandbox(repo, path) if path else None

    with open_store(trace) as store:
        mgr = recover_scopes(
            runtime_context_for(store), RecoverOptions(resolver=resolver)
        ).unwrap()
        assert sorted(calls) == [
            ("scope:agent:main", "", ""),
            ("scope:agent:try", "git", str(worktree)),
        ]
        states = {s.id: s.state for s in mgr.all_scopes()}
        assert states == {
            "scope:agent:main": ScopeState.ACTIVE,
            "scope:agent:notes": ScopeState.ACTIVE,
            "scope:agent:try": ScopeState.ACTIVE,
        }
        created = [
            e.record.payload
            for e in store.read_path("agent:main")
            if e.record.envelope.schema_ref == ScopeCreated.SCHEMA
        ]
        assert created == [
            {"owner": "agent:main", "sandbox_backend": "git", "sandbox_path": str(repo)}
        ]
        cp = mgr.latest_checkpoint("scope:agent:main")
        assert cp is not None
        assert mgr.restore_checkpoint(cp.id) == Success(b"the conversation")
        assert (repo / "app.py").read_bytes() == b"v1\n"
        (out,) = mgr.outputs_for_scope("scope:agent:try")
        assert out.changes() == [{"path": "answer.txt", "kind": "create"}]
        assert "+42" in out.diff()
        assert out.sealed_at() is not None
        assert mgr.settle(out.id, "selected") == Success(None)
        assert (repo / "answer.txt").read_bytes() == b"42\n"
        assert not worktree.exists()
        assert verify_trace(store).ok


def test_a_manager_s_scope_is_continued_without_one_in_another_process(trace, tmp_path):
    repo = make_repo(tmp_path / "repo", {"app.py": b"v1\n"})
    with open_store(trace) as store:
        mgr = scope_manager_for(store)
        root = mgr.create("agent:main", new_local_git_sandbox(repo)).unwrap()
        cp = mgr.create_checkpoint(root.id, b"before").unwrap()
        kid = mgr.fork(root.id, "agent:kid").unwrap()
    out = in_another_process(
        trace,
        f"""
        repo = Path({str(repo)!r})
        root = Scope.new(store, "agent:main").with_sandbox(new_local_git_sandbox(repo))
        kid = Scope.new(store, "agent:kid")
        print(root.latest_checkpoint().id, [c.id for c in root.children])
        (repo / "app.py").write_bytes(b"changed\\n")
        print(root.restore_checkpoint({cp.id!r}).unwrap().decode())
        print(root.discard(kid))
        """,
    ).split("\n")
    assert out[0] == f"{cp.id} ['scope:agent:kid']"
    assert out[1] == "before"
    assert out[2] == "<Success: None>"
    assert (repo / "app.py").read_bytes() == b"v1\n"
    with open_store(trace) as store:
        mgr = scope_manager_for(store)
        assert mgr.get(kid.id).state is ScopeState.DISCARDED  # type: ignore[union-attr]
        assert mgr.checkpoint(cp.id).state is CheckpointState.USED  # type: ignore[union-attr]


def test_processes_racing_to_start_one_root_make_one_scope(tmp_path):
    trace = str(tmp_path / "trace.db")
    # The store's first open creates its schema; racing first opens are the
    # store's own concern, this test races the root's creation.
    with SQLiteTraceStore(trace) as store:
        scope_manager_for(store)
    repo = make_repo(tmp_path / "repo")
    go = tmp_path / "go"
    racers = [
        in_another_process(
            trace,
            f"""
            from pathlib import Path
            import time
            go = Path({str(go)!r})
            while not go.exists():
                time.sleep(0.005)
            scope = Scope.new(store, "agent:main").with_sandbox(
                new_local_git_sandbox({str(repo)!r})
            )
            print(scope.append_fact("app.hello.v1", "hello", {{"pid": os.getpid()}}))
            """,
            wait=False,
        )
        for _ in range(4)
    ]
    time.sleep(1.0)  # every racer imported goatherd and opened the trace
    go.write_text("go")
    outs = [racer.communicate(timeout=120) for racer in racers]
    assert [r.returncode for r in racers] == [0] * 4, [err for _, err in outs]
    assert all(out.startswith("<Success: sha256:") for out, _ in outs)
    with SQLiteTraceStore(trace) as store:
        schemas = [e.record.envelope.schema_ref for e in store.read_path("agent:main")]
        assert schemas.count(ScopeCreated.SCHEMA) == 1
        assert schemas.count("app.hello.v1") == 4
        mgr = scope_manager_for(store)
        assert [s.id for s in mgr.all_scopes()] == ["scope:agent:main"]
        assert mgr.get("scope:agent:main").state is ScopeState.ACTIVE  # type: ignore[union-attr]
        assert verify_trace(store).ok
