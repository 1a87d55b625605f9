"""The seed's runtime README examples, on the git worktree backend.

Every scope works in a real detached git worktree (roots too), files are
changed on disk the way an agent would, and the trace is a SQLite file.
"""

from __future__ import annotations

import pytest
from returns.result import Failure, Success

from goatherd.application import (
    ApplyConflictError,
    RecoverOptions,
    recover_scopes,
)
from goatherd.domain import (
    CheckpointNotRestorableError,
    CheckpointState,
    DestructivePathReviewer,
    MergeProposed,
    OutputConsumedError,
    OutputState,
    ParentMovedError,
    ScopeState,
    SupervisorDecided,
)
from goatherd.infrastructure.bootstrap import runtime_context_for, scope_manager_for
from goatherd.infrastructure.sandbox import GitSandbox, new_worktree_sandbox
from goatherd.infrastructure.store import SQLiteTraceStore
from tests.integration.runtime.support import git, make_repo, worktree

pytestmark = pytest.mark.integration


@pytest.fixture
def repo(tmp_path):
    return make_repo(
        tmp_path / "repo", {"README.md": b"hello\n", "src/app.py": b"v1\n"}
    )


@pytest.fixture
def store(tmp_path):
    with SQLiteTraceStore(tmp_path / "trace.db") as s:
        yield s


def files(sandbox: GitSandbox) -> dict[str, bytes]:
    root = sandbox.workdir
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".git" not in p.relative_to(root).parts
    }


def failure_of(result):
    assert isinstance(result, Failure), result
    return result.failure()


def schemas_on(store, owner: str) -> list[str]:
    return [e.record.envelope.schema_ref for e in store.read_path(owner)]


def test_fork_and_branch(repo, store, tmp_path):
    mgr = scope_manager_for(store)
    parent = mgr.create("agent:main", worktree(repo, tmp_path / "wt-main")).unwrap()
    child = mgr.fork(parent.id, "agent:experimental").unwrap()
    assert child.sandbox is parent.sandbox
    assert not child.owns_sandbox
    (parent.sandbox.workdir / "notes.txt").write_bytes(b"works\n")  # type: ignore[union-attr]
    assert parent.merge(child) == Success(None)
    failed = mgr.fork(parent.id, "agent:failed").unwrap()
    assert parent.discard(failed) == Success(None)
    assert (child.state, failed.state) == (ScopeState.MERGED, ScopeState.DISCARDED)
    assert schemas_on(store, "agent:failed")[-1] == "goatherd.scope.discarded.v1"
    assert (tmp_path / "wt-main" / "notes.txt").exists()  # a shared sandbox stays


def test_roll_the_workspace_back(repo, store, tmp_path):
    mgr = scope_manager_for(store)
    sb = worktree(repo, tmp_path / "wt-main")
    scope = mgr.create("agent:main", sb).unwrap()
    before = files(sb)
    cp = mgr.create_checkpoint(scope.id, b"conversation so far").unwrap()
    (sb.workdir / "src" / "app.py").unlink()  # the sub-agent's destructive change
    (sb.workdir / "junk.txt").write_bytes(b"junk\n")
    assert mgr.restore_checkpoint(cp.id) == Success(b"conversation so far")
    assert files(sb) == before
    assert mgr.checkpoint(cp.id).state is CheckpointState.USED  # type: ignore[union-attr]
    again = failure_of(mgr.restore_checkpoint(cp.id))
    assert isinstance(again, CheckpointNotRestorableError)
    fork_state = scope.capture_workspace().unwrap()
    for variant in (b"A\n", b"B\n"):
        (sb.workdir / "variant.txt").write_bytes(variant)
        assert scope.apply_workspace(fork_state) == Success(None)
        assert files(sb) == before


def test_recover_after_a_restart(repo, tmp_path):
    db = tmp_path / "trace.db"
    with SQLiteTraceStore(db) as store:
        mgr = scope_manager_for(store)
        root = mgr.create("agent:main", worktree(repo, tmp_path / "wt-main")).unwrap()
        iso = worktree(repo, tmp_path / "wt-iso")
        iso.apply(root.sandbox.capture())  # type: ignore[union-attr]
        child = mgr.fork_isolated(root.id, "agent:iso", None, iso).unwrap()
        shared = mgr.fork(root.id, "agent:shared").unwrap()
        gone = mgr.fork(root.id, "agent:gone").unwrap()
        mgr.discard(gone.id).unwrap()
        cp = mgr.create_checkpoint(root.id, b"snap").unwrap()
        (tmp_path / "wt-iso" / "result.txt").write_bytes(b"done\n")
        out = mgr.seal(child.id).unwrap()
    calls: list[tuple[str, str, str]] = []

    def resolver(scope_id: str, backend: str, path: str) -> GitSandbox | None:
        calls.append((scope_id, backend, path))
        if scope_id == "scope:agent:main":
            return new_worktree_sandbox(repo, tmp_path / "wt-main")
        return new_worktree_sandbox(repo, path) if path else None

    with SQLiteTraceStore(db) as store:
        mgr = recover_scopes(
            runtime_context_for(store), RecoverOptions(resolver=resolver)
        ).unwrap()
        assert sorted(calls) == [
            ("scope:agent:iso", "git", str(tmp_path / "wt-iso")),
            ("scope:agent:main", "", ""),
        ]
        states = {s.id: s.state for s in mgr.all_scopes()}
        assert states["scope:agent:gone"] is ScopeState.DISCARDED
        assert states["scope:agent:shared"] is ScopeState.ACTIVE
        assert mgr.get(shared.id).sandbox is mgr.get(root.id).sandbox  # type: ignore[union-attr]
        assert mgr.latest_checkpoint(root.id).id == cp.id  # type: ignore[union-attr]
        proposal = mgr.propose_merge(child.id).unwrap()
        assert [c.path for c in proposal.changes] == ["result.txt"]
        assert mgr.settle(out.id, "selected") == Success(None)
        assert (tmp_path / "wt-main" / "result.txt").read_bytes() == b"done\n"
        git(tmp_path / "wt-main", "add", "-A")
        git(tmp_path / "wt-main", "commit", "-q", "-m", "moved on")
    with SQLiteTraceStore(db) as store:
        mgr = recover_scopes(
            runtime_context_for(store), RecoverOptions(resolver=resolver)
        ).unwrap()
        stale = mgr.checkpoint(cp.id)
        assert stale is not None
        assert stale.state is CheckpointState.INVALID
        assert mgr.latest_checkpoint(root.id) is None


def test_isolate_a_branch_in_its_own_worktree(repo, store, tmp_path):
    mgr = scope_manager_for(store)
    main = worktree(repo, tmp_path / "wt-main")
    parent = mgr.create("agent:main", main).unwrap()
    (main.workdir / "draft.txt").write_bytes(b"uncommitted\n")
    sb = worktree(repo, tmp_path / "wt-exp")
    sb.apply(main.capture())  # Create then Apply(forkState)
    child = mgr.fork_isolated(parent.id, "agent:experimental", None, sb).unwrap()
    assert (tmp_path / "wt-exp" / "draft.txt").read_bytes() == b"uncommitted\n"
    (tmp_path / "wt-exp" / "README.md").write_bytes(b"rewritten\n")
    assert (tmp_path / "wt-main" / "README.md").read_bytes() == b"hello\n"
    assert parent.discard(child) == Success(None)
    assert not (tmp_path / "wt-exp").exists()  # discard is a physical rollback
    assert files(main)["README.md"] == b"hello\n"


def test_review_before_merge(repo, store, tmp_path):
    mgr = scope_manager_for(store)
    main = worktree(repo, tmp_path / "wt-main")
    parent = mgr.create("agent:main", main).unwrap()
    before = files(main)
    reviewer = DestructivePathReviewer(("keys/**", "*.pem"))
    cp = mgr.create_checkpoint(parent.id, b"").unwrap()
    child = mgr.fork(parent.id, "agent:sub").unwrap()
    (main.workdir / "keys").mkdir()
    (main.workdir / "keys" / "ca.pem").write_bytes(b"secret\n")
    proposal = mgr.propose_merge(child.id, 1000).unwrap()
    proposed_id = mgr.record_merge_proposal(proposal).unwrap()
    deny = reviewer(proposal)
    assert deny is not None
    mgr.record_merge_decision(proposal, False, deny, "discarded", proposed_id).unwrap()
    assert mgr.discard(child.id) == Success(None)
    assert mgr.restore_checkpoint(cp.id) == Success(b"")
    assert files(main) == before
    assert MergeProposed.SCHEMA in schemas_on(store, "agent:sub")
    retry = mgr.fork(parent.id, "agent:sub-2").unwrap()
    (main.workdir / "src" / "feature.py").write_bytes(b"ok\n")
    proposal = mgr.propose_merge(retry.id, 1000).unwrap()
    assert reviewer(proposal) is None
    proposed_id = mgr.record_merge_proposal(proposal).unwrap()
    mgr.record_merge_decision(proposal, True, "", "merged", proposed_id).unwrap()
    assert parent.merge(retry) == Success(None)
    decisions = [
        e.record.payload
        for e in store.read_path("agent:main")
        if e.record.envelope.schema_ref == SupervisorDecided.SCHEMA
    ]
    assert [d["approved"] for d in decisions] == [False, True]


def test_best_of_n_with_settle(repo, store, tmp_path):
    mgr = scope_manager_for(store)
    main = worktree(repo, tmp_path / "wt-main")
    parent = mgr.create("agent:main", main).unwrap()
    outs = []
    for i in range(3):
        sb = worktree(repo, tmp_path / f"wt-try-{i}")
        sb.apply(main.capture())
        child = mgr.fork_isolated(parent.id, f"try-{i}", None, sb).unwrap()
        (sb.workdir / "answer.txt").write_bytes(f"{i}\n".encode())
        outs.append(mgr.seal(child.id).unwrap())
    assert [o.changes() for o in outs] == [
        [{"path": "answer.txt", "kind": "create"}]
    ] * 3
    assert "answer.txt" in outs[1].diff()
    assert mgr.settle(outs[1].id, "selected") == Success(None)
    for loser in (outs[0], outs[2]):
        assert mgr.settle(loser.id, "discarded") == Success(None)
    assert files(main)["answer.txt"] == b"1\n"
    assert [o.state for o in outs] == [
        OutputState.DISCARDED,
        OutputState.SELECTED,
        OutputState.DISCARDED,
    ]
    assert isinstance(
        failure_of(mgr.settle(outs[1].id, "released")), OutputConsumedError
    )
    assert not any((tmp_path / f"wt-try-{i}").exists() for i in range(3))


def test_a_moved_parent_refuses_select_and_takes_a_disjoint_apply(
    repo, store, tmp_path
):
    mgr = scope_manager_for(store)
    main = worktree(repo, tmp_path / "wt-main")
    parent = mgr.create("agent:main", main).unwrap()
    outs = []
    for name, path in (("a", "a.txt"), ("b", "src/app.py")):
        sb = worktree(repo, tmp_path / f"wt-{name}")
        sb.apply(main.capture())
        child = mgr.fork_isolated(parent.id, name, None, sb).unwrap()
        (sb.workdir / path).write_bytes(b"child\n")
        outs.append(mgr.seal(child.id).unwrap())
    (main.workdir / "src" / "app.py").write_bytes(b"parent\n")  # the parent moves
    before = store.fact_count()
    assert isinstance(failure_of(mgr.settle(outs[0].id, "selected")), ParentMovedError)
    conflict = failure_of(mgr.settle(outs[1].id, "applied"))
    assert isinstance(conflict, ApplyConflictError)
    assert store.fact_count() == before
    assert outs[1].state is OutputState.UNCONSUMED
    assert mgr.settle(outs[0].id, "applied") == Success(None)
    assert files(main)["a.txt"] == b"child\n"
    assert files(main)["src/app.py"] == b"parent\n"
