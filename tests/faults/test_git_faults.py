"""Git failing under the runtime: a stale ``index.lock``, a missing worktree.

A root scope works in a real repository (in place), an attempt in a detached
worktree. After each fault the command fails with the sandbox's clear error
(``GitError`` quoting git, ``SandboxError`` naming the missing directory),
the trace verifies, and once the cause is repaired the SAME command (same
``seq``, so the same intent) completes exactly once: one settled or sealed
record, the effect applied once.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from returns.result import Failure

from goatherd.application import GitError, SandboxError, SandboxSpec
from goatherd.domain import (
    CheckpointNotRestorableError,
    OutputState,
    SnapshotReleasedError,
)
from goatherd.infrastructure.audit.verify import verify_trace
from goatherd.infrastructure.bootstrap import scope_manager_for
from goatherd.infrastructure.sandbox import (
    GitSandbox,
    new_local_git_sandbox,
    new_worktree_sandbox,
)
from goatherd.infrastructure.store import SQLiteTraceStore
from tests.infrastructure.sandbox import gitfixtures as fx

pytestmark = pytest.mark.integration

SEALED = "goatherd.run_output.sealed.v1"
SETTLED = "goatherd.run_output.settled.v1"


class World:
    """A trace, a repository with a root scope, and one worktree attempt."""

    def __init__(self, base: Path, store: SQLiteTraceStore) -> None:
        self.store = store
        self.repo = fx.make_repo(base / "repo", {"base.txt": b"base\n"})
        self.manager = scope_manager_for(store)
        root = new_local_git_sandbox(self.repo)
        root.create(SandboxSpec())
        self.root = self.manager.create("agent:main", root).unwrap()
        self.worktree = base / "wt"
        self.sandbox: GitSandbox = new_worktree_sandbox(self.repo, self.worktree)
        self.sandbox.create(SandboxSpec())
        self.child = self.manager.fork_isolated(
            self.root.id, "agent:main:try", None, self.sandbox, seq=1
        ).unwrap()

    def work(self) -> None:
        (self.worktree / "answer.txt").write_bytes(b"42\n")

    def records(self, schema: str) -> int:
        return len(
            {e.record.record_id for e in self.store.scan_records_by_schema(schema)}
        )


@pytest.fixture
def world(tmp_path: Path) -> World:
    store = SQLiteTraceStore(tmp_path / "trace.sqlite")
    try:
        return World(tmp_path, store)
    except BaseException:
        store.close()
        raise


def failure_of(result: object) -> BaseException:
    assert isinstance(result, Failure), result
    error = result.failure()
    assert isinstance(error, BaseException)
    return error


def test_a_stale_index_lock_fails_the_settlement_clearly_and_its_retry_lands_once(
    world: World,
) -> None:
    with world.store:
        world.work()
        output = world.manager.seal(world.child.id, seq=2).unwrap()
        lock = world.repo / ".git" / "index.lock"
        lock.write_bytes(b"")  # a git process died holding the index
        error = failure_of(world.manager.settle(output.id, "selected", seq=3))
        assert isinstance(error, GitError)
        assert "index.lock" in str(error)
        assert not (world.repo / "answer.txt").exists()  # nothing half-applied
        assert world.records(SETTLED) == 0
        assert verify_trace(world.store).ok
        lock.unlink()  # the operator removes the stale lock
        assert world.manager.settle(output.id, "selected", seq=3).unwrap() is None
        assert (world.repo / "answer.txt").read_bytes() == b"42\n"
        assert world.records(SETTLED) == 1
        # The same intent again: the stored outcome, nothing new.
        size = world.store.fact_count()
        assert world.manager.settle(output.id, "selected", seq=3).unwrap() is None
        assert world.store.fact_count() == size
        assert world.manager.output(output.id).state is OutputState.SELECTED  # type: ignore[union-attr]
        assert verify_trace(world.store).ok


def test_a_stale_index_lock_burns_the_checkpoint_clearly_and_a_new_one_restores_once(
    world: World,
) -> None:
    # runtime-spec 4.4: a failed apply burns the checkpoint (the workspace
    # state after a failed apply is unknown in general), so its retry is
    # refused with a clear error; the repair is a new checkpoint.
    with world.store:
        checkpoint = world.manager.create_checkpoint(
            world.root.id, b"conversation", seq=5
        ).unwrap()
        (world.repo / "base.txt").write_bytes(b"damaged\n")
        lock = world.repo / ".git" / "index.lock"
        lock.write_bytes(b"")
        error = failure_of(world.manager.restore_checkpoint(checkpoint.id, seq=6))
        assert isinstance(error, GitError)
        assert "index.lock" in str(error)
        assert verify_trace(world.store).ok
        lock.unlink()
        refused = failure_of(world.manager.restore_checkpoint(checkpoint.id, seq=6))
        assert isinstance(refused, CheckpointNotRestorableError)
        assert "invalid" in str(refused)
        assert (world.repo / "base.txt").read_bytes() == b"damaged\n"
        (world.repo / "base.txt").write_bytes(b"base\n")
        fresh = world.manager.create_checkpoint(world.root.id, b"again", seq=7).unwrap()
        (world.repo / "base.txt").write_bytes(b"damaged\n")
        assert world.manager.restore_checkpoint(fresh.id, seq=8).unwrap() == b"again"
        assert (world.repo / "base.txt").read_bytes() == b"base\n"
        size = world.store.fact_count()
        # The restore released its snapshot (ADR 0056): the retry says so.
        retried = failure_of(world.manager.restore_checkpoint(fresh.id, seq=8))
        assert isinstance(retried, SnapshotReleasedError)
        assert world.store.fact_count() == size
        assert verify_trace(world.store).ok


def test_a_missing_worktree_fails_the_seal_and_a_reprovisioned_retry_seals_once(
    world: World,
) -> None:
    import shutil

    with world.store:
        world.work()
        shutil.rmtree(world.worktree)  # the worktree directory vanished
        error = failure_of(world.manager.seal(world.child.id, seq=2))
        assert isinstance(error, SandboxError)
        assert str(world.worktree) in str(error)
        assert world.records(SEALED) == 0
        assert verify_trace(world.store).ok
        # Recovery: provision the worktree again at the same address (git
        # prunes the stale registration) and redo the attempt's work.
        world.sandbox.create(SandboxSpec())
        world.work()
        output = world.manager.seal(world.child.id, seq=2).unwrap()
        assert output.changes() == [{"path": "answer.txt", "kind": "create"}]
        assert world.records(SEALED) == 1
        again = world.manager.seal(world.child.id, seq=2).unwrap()
        assert again.id == output.id
        assert world.records(SEALED) == 1
        assert world.manager.settle(output.id, "selected", seq=3).unwrap() is None
        assert (world.repo / "answer.txt").read_bytes() == b"42\n"
        assert not world.worktree.exists()  # the settled attempt's worktree is gone
        assert verify_trace(world.store).ok
