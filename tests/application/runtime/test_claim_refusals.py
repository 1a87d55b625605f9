"""What a halt or discard refused by an unfinished claim tells its caller.

``check_no_claim_needs`` names the holder, the claiming attempt, the command
that finishes it, the kind of claim and the claimant's ``seq``, for a settle's
claim, a restore's claim, and a claim whose holder the fold cannot read (a
forged record): every field is asserted, in one process, with the fault hook
stopping the claimant between its claim and its result.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from returns.result import Failure, Success

from goatherd.application import SandboxSpec, ScopeManager
from goatherd.application.decisions import Decision
from goatherd.domain import (
    TRUSTED_APPEND_CONTEXT,
    CheckpointClaimed,
    ScopeClaimedError,
    checkpoint_id_for,
)
from goatherd.infrastructure.bootstrap import scope_manager_for
from goatherd.infrastructure.sandbox.memory import MemorySandbox, MemorySandboxConfig
from goatherd.infrastructure.store import SQLiteTraceStore


class Died(BaseException):
    pass


def dies_at(boundary: str):
    def hook(seen: str, intent: str) -> None:
        if seen == boundary:
            raise Died(intent)

    return hook


@pytest.fixture
def store(tmp_path: Path):
    with SQLiteTraceStore(tmp_path / "trace.db") as opened:
        yield opened


def main_sandbox() -> MemorySandbox:
    sb = MemorySandbox(MemorySandboxConfig(files={"a.txt": b"1\n"}))
    sb.create(SandboxSpec())
    return sb


def refused(result: object) -> ScopeClaimedError:
    assert isinstance(result, Failure), result
    error = result.failure()
    assert isinstance(error, ScopeClaimedError), error
    return error


@pytest.mark.parametrize("child_name", ["try", "agent:settle:two"])
def test_a_settles_claim_names_the_output_kind_and_seq_to_resume(
    store: SQLiteTraceStore, child_name: str
) -> None:
    main = main_sandbox()
    mgr: ScopeManager = scope_manager_for(store)
    root = mgr.create("root", main).unwrap()
    wt = MemorySandbox(MemorySandboxConfig(repository=main.repository))
    wt.create(SandboxSpec())
    child = mgr.fork_isolated(root.id, child_name, None, wt).unwrap()
    wt.write_file("b.txt", b"child\n")
    out = mgr.seal(child.id).unwrap()
    mgr.context.faults = dies_at("after-effect")
    with pytest.raises(Died):
        mgr.settle(out.id, "applied", seq=12)
    mgr.context.faults = None

    error = refused(mgr.halt(child.id))
    assert error.holder == out.id
    # An owner may itself contain ":settle:"; the verb is still read right.
    assert error.claimed_by == f"{child_name}:settle:applied:12"
    assert error.finish == f"goatherd settle {out.id} applied --resume 12"
    assert error.kind == "output"
    assert error.seq == 12
    assert str(error).startswith(f"cannot halt scope {child.id}: {out.id} is claimed")
    # The parent the effect lands on may not end either.
    assert refused(mgr.halt(root.id)).holder == out.id

    assert mgr.settle(out.id, "applied", seq=12) == Success(None)
    assert mgr.halt(root.id) == Success(None)


def test_a_restores_claim_names_the_checkpoint_kind_and_seq(
    store: SQLiteTraceStore,
) -> None:
    main = main_sandbox()
    mgr = scope_manager_for(store)
    root = mgr.create("root", main).unwrap()
    kid = mgr.fork(root.id, "kid").unwrap()
    cp = mgr.create_checkpoint(kid.id, b"snap").unwrap()
    mgr.context.faults = dies_at("after-effect")
    with pytest.raises(Died):
        mgr.restore_checkpoint(cp.id, seq=41)
    mgr.context.faults = None

    for result, subject in (
        (mgr.halt(kid.id), "cannot halt scope"),
        (mgr.discard(kid.id), "cannot discard scope"),
        (mgr.merge(kid.id), "cannot merge scope"),
    ):
        error = refused(result)
        assert error.holder == cp.id
        assert error.claimed_by == "restore attempt 41"
        assert error.finish == f"goatherd restore {cp.id} --resume 41"
        assert error.kind == "checkpoint"
        assert error.seq == 41
        assert str(error).startswith(f"{subject} {kid.id}: {cp.id} is claimed")

    assert mgr.restore_checkpoint(cp.id, seq=41) == Success(b"snap")
    assert mgr.halt(kid.id) == Success(None)


def test_a_claim_the_fold_cannot_read_refuses_every_ending_in_that_workspace(
    store: SQLiteTraceStore,
) -> None:
    main = main_sandbox()
    mgr = scope_manager_for(store)
    root = mgr.create("root", main).unwrap()
    shared = mgr.fork(root.id, "shared").unwrap()
    # A forged claim on a checkpoint no record created.
    ghost = checkpoint_id_for("root", 999)
    forged = CheckpointClaimed(
        checkpoint_id=ghost, claimant="7", workspace_owner="root"
    )
    batch = Decision().place(forged, ghost, "root").batch("forged:claim:1")
    store.append(TRUSTED_APPEND_CONTEXT, batch)
    mgr.context.model.refresh()
    assert mgr.context.model.scope("root").workspace_claim == ghost

    for result in (mgr.halt(shared.id), mgr.discard(shared.id), mgr.halt(root.id)):
        error = refused(result)
        assert error.holder == ghost
        assert error.claimed_by == ghost
        assert error.finish == "its claimant's retry"
        assert error.kind == ""
        assert error.seq is None
    assert mgr.get(shared.id) is not None
    assert mgr.context.model.scope("shared").state.value == "active"
