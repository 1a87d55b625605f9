"""The seed's own README examples for the rest of its surface, run as written.

Each test quotes the Go example it ports (runtime and kernel seed READMEs) and
runs the Python form on a real git repository and a SQLite trace file: the
manager-less scope, released checkpoint snapshots, the sealed output's
accessors after a restart, and a git sandbox that executes with a placement.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from returns.result import Failure, Success
from sqlalchemy import text

from goatherd import Scope
from goatherd.application import ExecRequest, RecoverOptions, recover_scopes
from goatherd.domain import (
    CheckpointNotRestorableError,
    CheckpointState,
    OutputState,
    ScopeState,
    WorkspaceState,
)
from goatherd.infrastructure.bootstrap import runtime_context_for, scope_manager_for
from goatherd.infrastructure.sandbox import (
    ExecPlacement,
    LandlockBackend,
    landlock_abi,
    new_local_git_sandbox,
    new_worktree_sandbox,
    with_exec,
)
from goatherd.infrastructure.store import SQLiteTraceStore
from tests.integration.runtime.support import make_repo, worktree

pytestmark = pytest.mark.integration


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(
        tmp_path / "repo", {"README.md": b"hello\n", "src/app.py": b"v1\n"}
    )


def test_scope_workspace_and_checkpoint_operations(repo: Path, tmp_path: Path) -> None:
    """runtime seed, "Scope workspace and checkpoint operations".

    scope := goatherd.NewScope(store, "owner-id").WithSandbox(sb, false)
    ws, err := scope.CaptureWorkspace(ctx)          // reusable state, no lifecycle
    err = scope.ApplyWorkspace(ctx, ws)
    diff, files, err := scope.DiffWorkspace(ctx, ws, 2000)
    cp, err := scope.CreateCheckpoint(ctx, snapshot)
    snapshot, err := scope.RestoreCheckpoint(ctx, cp)
    """
    with SQLiteTraceStore(tmp_path / "trace.db") as store:
        sb = new_local_git_sandbox(repo)
        scope = Scope.new(store, "owner-id").with_sandbox(sb, owns=False)
        ws = scope.capture_workspace().unwrap()
        (repo / "src" / "app.py").write_bytes(b"v2\n")
        diff, files = scope.diff_workspace(ws, 2000).unwrap()
        assert files == ["src/app.py"]
        assert "+v2" in diff
        assert scope.apply_workspace(ws) == Success(None)
        assert (repo / "src" / "app.py").read_bytes() == b"v1\n"
        cp = scope.create_checkpoint(b"snapshot").unwrap()
        (repo / "README.md").write_bytes(b"destroyed\n")
        assert scope.restore_checkpoint(cp) == Success(b"snapshot")
        assert (repo / "README.md").read_bytes() == b"hello\n"
        # owns=false: the repository in place is never destroyed.
        assert scope.halt() == Success(None)
        assert repo.exists()
        assert (repo / "README.md").read_bytes() == b"hello\n"


def test_fork_and_choose_on_a_scope(repo: Path, tmp_path: Path) -> None:
    """runtime seed, "Roll the workspace back" and the Scope methods.

    forkState, _ := scope.CaptureWorkspace(ctx)   // no lifecycle, stays valid
    // ...variant A...
    scope.ApplyWorkspace(ctx, forkState)          // rewind to the fork point
    // ...variant B...
    child, _ := scope.Fork("agent:experimental", nil); scope.Merge(child)
    other, _ := scope.Fork("agent:other", nil); scope.Discard(other)
    """
    with SQLiteTraceStore(tmp_path / "trace.db") as store:
        scope = Scope.new(store, "agent:main").with_sandbox(
            new_local_git_sandbox(repo), False
        )
        fork_state = scope.capture_workspace().unwrap()
        results = {}
        for variant in (b"A\n", b"B\n"):
            (repo / "variant.txt").write_bytes(variant)
            results[variant] = scope.diff_workspace(fork_state).unwrap()[1]
            scope.apply_workspace(fork_state).unwrap()
        assert results == {b"A\n": ["variant.txt"], b"B\n": ["variant.txt"]}
        assert not (repo / "variant.txt").exists()
        child = scope.fork("agent:experimental", None).unwrap()
        assert child.fork_point
        assert isinstance(child.baseline(), WorkspaceState)
        assert scope.merge(child) == Success(None)
        other = scope.fork("agent:other", None).unwrap()
        assert scope.discard(other) == Success(None)
        assert [(c.owner_id, c.state) for c in scope.children] == [
            ("agent:experimental", ScopeState.MERGED),
            ("agent:other", ScopeState.DISCARDED),
        ]


def test_restore_marks_the_checkpoint_used_and_releases_the_snapshot(
    repo: Path, tmp_path: Path
) -> None:
    """runtime seed, "Roll the workspace back".

    cp, _ := mgr.CreateCheckpoint(ctx, scope.ID(), conversationSnapshot)
    snapshot, _ := mgr.RestoreCheckpoint(ctx, cp.ID)
        // workspace reverted, snapshot returned
    // Checkpoints are single-use: restore marks them used and releases the snapshot.
    mgr.PruneCheckpoints(ctx, "scope-id")             // also deletes persisted blobs
    """
    with SQLiteTraceStore(tmp_path / "trace.db") as store:
        mgr = scope_manager_for(store)
        scope = mgr.create("agent:main", new_local_git_sandbox(repo)).unwrap()
        cp = mgr.create_checkpoint(scope.id, b'[{"role": "user"}]').unwrap()
        (repo / "src" / "app.py").unlink()
        assert mgr.restore_checkpoint(cp.id) == Success(b'[{"role": "user"}]')
        assert (repo / "src" / "app.py").read_bytes() == b"v1\n"
        used = mgr.checkpoint(cp.id)
        assert used is not None
        assert (used.state, used.snapshot) == (CheckpointState.USED, b"")
        assert used.snapshot_digest == cp.snapshot_digest  # the digest stays
        again = mgr.restore_checkpoint(cp.id)
        assert isinstance(again, Failure)
        assert isinstance(again.failure(), CheckpointNotRestorableError)
        kept = mgr.create_checkpoint(scope.id, b"never restored").unwrap()
        assert mgr.prune_checkpoints(scope.id) == 2
        assert mgr.checkpoint(kept.id) is None
        with store.engine.connect() as conn:
            assert (
                conn.execute(text("SELECT count(*) FROM content_blobs")).scalar() == 0
            )


def test_sealed_outputs_keep_their_changes_and_diff_after_a_restart(
    repo: Path, tmp_path: Path
) -> None:
    """runtime seed, "Review before merge / settle outputs" (best of n).

    out, _ := mgr.Seal(ctx, child.ID())
    outs = append(outs, out) // out.Changes and out.Diff are frozen at seal time
    mgr.Settle(ctx, outs[winner].ID, goatherd.SettleSelect)
    for _, out := range losers { _ = mgr.Settle(ctx, out.ID, goatherd.SettleDiscard) }
    """
    db = tmp_path / "trace.db"
    with SQLiteTraceStore(db) as store:
        mgr = scope_manager_for(store)
        parent = mgr.create("agent:main", new_local_git_sandbox(repo)).unwrap()
        outs = []
        for i in range(3):
            sb = worktree(repo, tmp_path / f"try-{i}")
            child = mgr.fork_isolated(parent.id, f"try-{i}", None, sb).unwrap()
            (tmp_path / f"try-{i}" / "answer.txt").write_bytes(f"{i}\n".encode())
            outs.append(mgr.seal(child.id).unwrap())
        frozen = [(o.changes(), o.diff(), o.baseline(), o.workspace()) for o in outs]
        sealed_at = [o.sealed_at() for o in outs]
    with SQLiteTraceStore(db) as store:
        mgr = recover_scopes(
            runtime_context_for(store),
            RecoverOptions(
                resolver=lambda sid, backend, path: (
                    new_local_git_sandbox(repo)
                    if sid == "scope:agent:main"
                    else new_worktree_sandbox(repo, path)
                )
            ),
        ).unwrap()
        again = [mgr.output(o.id) for o in outs]
        assert all(o is not None for o in again)
        recovered = [o for o in again if o is not None]
        assert [
            (o.changes(), o.diff(), o.baseline(), o.workspace()) for o in recovered
        ] == frozen
        assert [o.sealed_at() for o in recovered] == sealed_at
        assert all(at is not None for at in sealed_at)
        assert recovered[1].diff(max_lines=2).count("\n") == 2  # cut, and marked
        winner, losers = recovered[1], [recovered[0], recovered[2]]
        assert mgr.settle(winner.id, "selected") == Success(None)
        for out in losers:
            assert mgr.settle(out.id, "discarded") == Success(None)
        assert (repo / "answer.txt").read_bytes() == b"1\n"
        assert winner.state is OutputState.SELECTED
        settled = winner.settled_at()
        assert settled is not None
        assert settled >= sealed_at[1]  # type: ignore[operator]


@pytest.mark.skipif(landlock_abi() < 1, reason="this kernel does not provide Landlock")
def test_a_git_sandbox_with_exec(repo: Path) -> None:
    """runtime seed, "Containment backends".

    sb := git.NewLocalGitSandbox(repoPath,
        git.WithExec(backend, confinement.PlacementPaddock))
    """
    sb = new_local_git_sandbox(
        repo, with_exec(LandlockBackend(), ExecPlacement.PADDOCK)
    )
    assert sb.capabilities().exec
    result = sb.exec(
        ExecRequest("sh", ("-c", "echo fixed > src/app.py; cat src/app.py"))
    )
    assert (result.exit_code, result.stdout) == (0, b"fixed\n")
    assert (repo / "src" / "app.py").read_bytes() == b"fixed\n"
