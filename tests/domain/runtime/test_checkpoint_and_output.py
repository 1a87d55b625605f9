"""Checkpoint and retained-output aggregates: single use, consume once."""

from __future__ import annotations

import pytest

from goatherd.domain import (
    CheckpointAggregate,
    CheckpointNotRestorableError,
    CheckpointScopeMismatchError,
    CheckpointState,
    NoBaselineError,
    OutputConsumedError,
    OutputState,
    RetainedOutputAggregate,
    ScopeAggregate,
    ScopeStateError,
    SettlementAction,
    WorkspaceState,
    checkpoint_id_for,
    output_id_for,
    owner_of_checkpoint,
    owner_of_output,
)

BASE = WorkspaceState(backend="memory", revision="r1", data={"a": "1"})
SEALED = WorkspaceState(backend="memory", revision="r2", data={"a": "2"})


def test_checkpoint_and_output_ids_name_their_owner_even_with_colons():
    assert checkpoint_id_for("agent:main", 7) == "cp:agent:main:7"
    assert owner_of_checkpoint("cp:agent:main:7") == "agent:main"
    assert owner_of_checkpoint("nonsense") == ""
    assert output_id_for("a:b", 9) == "out:a:b:9"
    assert owner_of_output("out:a:b:9") == "a:b"
    assert owner_of_output("cp:a:1") == ""


def test_a_checkpoint_is_placed_on_its_scope_and_restored_once():
    scope = ScopeAggregate.bare("agent:main")
    cp = CheckpointAggregate.bare(checkpoint_id_for("agent:main", 5))
    created = cp.create(scope, BASE, has_snapshot=True)
    assert created.payload() == {
        "checkpoint_id": "cp:agent:main:5",
        "backend": "memory",
        "revision": "r1",
        "state_digest": BASE.digest(),
        "has_snapshot": True,
    }
    assert scope.pending()[0].record_id == created.record_id
    cp.restore(scope)
    assert cp.state is CheckpointState.USED
    with pytest.raises(CheckpointNotRestorableError, match="is used, cannot restore"):
        cp.restore(scope)
    assert CheckpointAggregate.fold(None, cp.pending()) == cp


def test_a_checkpoint_cannot_be_restored_on_another_scope():
    scope = ScopeAggregate.bare("a")
    cp = CheckpointAggregate.bare(checkpoint_id_for("a", 1))
    cp.create(scope, BASE, has_snapshot=False)
    with pytest.raises(
        CheckpointScopeMismatchError, match="belongs to scope scope:a, not scope:b"
    ):
        cp.restore(ScopeAggregate.bare("b"))


def test_a_terminal_scope_cannot_be_checkpointed():
    scope = ScopeAggregate.bare("a")
    scope.halt()
    with pytest.raises(
        ScopeStateError, match="cannot checkpoint scope scope:a in state discarded"
    ):
        CheckpointAggregate.bare("cp:a:1").create(scope, BASE, has_snapshot=False)


def sealed_output() -> tuple[ScopeAggregate, RetainedOutputAggregate]:
    parent = ScopeAggregate.bare("p")
    child = ScopeAggregate.bare("c")
    parent.fork(child, baseline=BASE)
    out = RetainedOutputAggregate.bare(output_id_for("c", 3))
    out.seal(child, SEALED, [{"path": "a", "kind": "modify"}])
    return child, out


def test_seal_freezes_state_baseline_and_changes():
    child, out = sealed_output()
    sealed = out.pending()[0]
    assert sealed.payload()["changes"] == [{"path": "a", "kind": "modify"}]
    assert sealed.payload()["baseline_digest"] == BASE.digest()
    assert out.workspace == SEALED
    assert out.baseline == BASE
    assert out.sealed_record_id == sealed.record_id
    assert child.is_active


def test_seal_needs_a_baseline():
    scope = ScopeAggregate.bare("root")
    with pytest.raises(NoBaselineError, match="no base to settle onto"):
        RetainedOutputAggregate.bare("out:root:1").seal(scope, SEALED, [])


def test_an_output_settles_once_citing_its_seal():
    child, out = sealed_output()
    settled = out.settle(child, SettlementAction.RELEASE)
    assert settled.caused_by == (out.sealed_record_id,)
    assert settled.payload() == {
        "output_id": out.id,
        "action": "released",
        "state_digest": SEALED.digest(),
    }
    assert out.state is OutputState.RELEASED
    with pytest.raises(OutputConsumedError, match="retained output already settled"):
        out.settle(child, SettlementAction.SELECT)
    assert RetainedOutputAggregate.fold(None, out.pending()) == out
