"""Claims (one claimant per output/checkpoint) and snapshot states of the folds."""

from __future__ import annotations

import pytest

from goatherd.domain import (
    CheckpointAggregate,
    CheckpointClaimedError,
    OutputClaimedError,
    OutputConsumedError,
    OutputState,
    RetainedOutputAggregate,
    ScopeAggregate,
    SettlementAction,
    TraceAggregate,
    WorkspaceState,
    checkpoint_id_for,
    output_id_for,
)

BASE = WorkspaceState(backend="memory", revision="r1", data={"a": "1"})
SEALED = WorkspaceState(backend="memory", revision="r2", data={"a": "2"})


def forked() -> tuple[ScopeAggregate, ScopeAggregate]:
    parent = ScopeAggregate.bare("p")
    child = ScopeAggregate.bare("c")
    parent.fork(child, baseline=BASE)
    return parent, child


def sealed_output() -> tuple[ScopeAggregate, RetainedOutputAggregate]:
    _, child = forked()
    out = RetainedOutputAggregate.bare(output_id_for("c", 1))
    out.seal(child, SEALED, [{"path": "a", "kind": "modify"}])
    return child, out


def test_one_settle_intent_claims_an_output_and_a_repeat_claims_nothing():
    _, out = sealed_output()
    claim = out.claim(SettlementAction.SELECT, "c:settle:selected:1")
    assert claim is not None
    assert claim.payload() == {
        "output_id": "out:c:1",
        "action": "selected",
        "settle_intent": "c:settle:selected:1",
    }
    assert out.claimed_by == "c:settle:selected:1"
    assert out.state is OutputState.UNCONSUMED
    assert out.claim(SettlementAction.SELECT, "c:settle:selected:1") is None
    with pytest.raises(OutputClaimedError) as error:
        out.claim(SettlementAction.APPLY, "c:settle:applied:2")
    assert isinstance(error.value, OutputConsumedError)


def test_only_the_claimant_selects_but_anyone_releases_a_claimed_output():
    child, out = sealed_output()
    out.claim(SettlementAction.SELECT, "mine")
    with pytest.raises(OutputClaimedError):
        out.settle(child, SettlementAction.SELECT, "theirs")
    out.settle(child, SettlementAction.RELEASE, "theirs")
    assert out.state is OutputState.RELEASED
    with pytest.raises(OutputConsumedError):
        out.claim(SettlementAction.SELECT, "mine")


def test_a_checkpoint_claim_names_one_restore_attempt():
    scope = ScopeAggregate.bare("s")
    cp = CheckpointAggregate.bare(checkpoint_id_for("s", 3))
    cp.create(scope, BASE, has_snapshot=False)
    assert cp.claim(scope, "41") is not None
    assert cp.claim(scope, "41") is None
    with pytest.raises(CheckpointClaimedError):
        cp.restore(scope, "42")
    cp.restore(scope, "41")
    assert cp.state.value == "used"


@pytest.mark.parametrize("make", ["scope", "output", "checkpoint"])
def test_a_snapshot_state_restores_an_equal_aggregate(make: str) -> None:
    agg: TraceAggregate
    if make == "scope":
        _, agg = forked()
        agg.halt()
    elif make == "output":
        child, out = sealed_output()
        out.claim(SettlementAction.APPLY, "i")
        out.settle(child, SettlementAction.APPLY, "i")
        agg = out
    else:
        scope = ScopeAggregate.bare("s")
        agg = CheckpointAggregate.bare(checkpoint_id_for("s", 3))
        agg.create(scope, BASE, has_snapshot=True)
    agg.collect_events()
    twin = type(agg).from_snapshot(agg.id, agg.version, agg.snapshot_state())
    assert twin == agg


def test_a_snapshot_with_other_fields_is_refused():
    _, child = forked()
    state = child.snapshot_state()
    state["unknown"] = 1
    with pytest.raises(ValueError, match="snapshot fields"):
        ScopeAggregate.from_snapshot("c", child.version, state)


def test_a_clone_shares_no_mutable_state():
    parent, _ = forked()
    parent.collect_events()
    twin = parent.clone()
    twin.children.append("x")
    assert parent.children == ["c"]
    assert twin.pending() == []
