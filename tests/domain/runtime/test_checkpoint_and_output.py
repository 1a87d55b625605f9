"""Checkpoint and retained-output aggregates: decide, then fold; single use."""

from __future__ import annotations

import pytest

from goatherd.domain import (
    CheckpointAggregate,
    CheckpointClaimedError,
    CheckpointNotFoundError,
    CheckpointNotRestorableError,
    CheckpointScopeMismatchError,
    CheckpointState,
    InconsistentTraceError,
    NoBaselineError,
    OutputClaimedError,
    OutputConsumedError,
    OutputNotFoundError,
    OutputState,
    RetainedOutputAggregate,
    ScopeStateError,
    SettlementAction,
    WorkspaceState,
    checkpoint_id_for,
    output_id_for,
    owner_of_checkpoint,
    owner_of_output,
    same_attempt,
)
from tests.domain.runtime.facts import Trace

BASE = WorkspaceState(backend="memory", revision="r1", data={"a": "1"})
SEALED = WorkspaceState(backend="memory", revision="r2", data={"a": "2"})
CP = checkpoint_id_for("agent:main", 5)


def test_checkpoint_and_output_ids_name_their_owner_even_with_colons():
    assert checkpoint_id_for("agent:main", 7) == "cp:agent:main:7"
    assert owner_of_checkpoint("cp:agent:main:7") == "agent:main"
    assert owner_of_checkpoint("nonsense") == ""
    assert output_id_for("a:b", 9) == "out:a:b:9"
    assert owner_of_output("out:a:b:9") == "a:b"
    assert owner_of_output("cp:a:1") == ""


def created(trace: Trace, owner: str = "agent:main") -> CheckpointAggregate:
    trace.create(owner)
    scope = trace.scope(owner)
    event = trace.checkpoint(CP).create(
        scope, BASE, snapshot_digest="sha256:" + "0" * 64, has_snapshot=True
    )
    trace.place(event, owner, CP)
    return trace.checkpoint(CP)


class TestCheckpoint:
    def test_creation_records_the_state_and_the_snapshot_digest(self):
        trace = Trace()
        cp = created(trace)
        assert cp.exists
        assert cp.is_valid
        assert cp.workspace == BASE
        assert cp.state_digest == BASE.digest()
        assert cp.snapshot_digest == "sha256:" + "0" * 64
        assert trace.scope("agent:main").workspace_digest == BASE.digest()

    def test_a_claim_then_a_restore_uses_it_up(self):
        trace = Trace()
        created(trace)
        scope = trace.scope("agent:main")
        claim = trace.checkpoint(CP).claim(scope, "7", "agent:main")
        assert claim is not None
        trace.place(claim, CP, "agent:main")
        assert trace.scope("agent:main").workspace_claim == CP
        assert trace.checkpoint(CP).claim(scope, "7", "agent:main") is None
        with pytest.raises(CheckpointClaimedError, match="claimed by restore 7"):
            trace.checkpoint(CP).claim(scope, "8", "agent:main")
        trace.place(trace.checkpoint(CP).restore(scope, "7"), CP, "agent:main")
        assert trace.checkpoint(CP).state is CheckpointState.USED
        assert trace.scope("agent:main").workspace_claim == ""
        with pytest.raises(CheckpointNotRestorableError, match="is used"):
            trace.checkpoint(CP).check_restorable(trace.scope("agent:main"))

    def test_it_cannot_be_restored_on_another_scope(self):
        trace = Trace()
        created(trace)
        trace.create("b")
        with pytest.raises(
            CheckpointScopeMismatchError,
            match="belongs to scope scope:agent:main, not scope:b",
        ):
            trace.checkpoint(CP).check_restorable(trace.scope("b"))

    def test_a_terminal_scope_cannot_be_checkpointed(self):
        trace = Trace()
        trace.create("a")
        halt = trace.scope("a").halt()
        assert halt is not None
        trace.place(halt, "a")
        with pytest.raises(
            ScopeStateError, match="cannot checkpoint scope scope:a in state discarded"
        ):
            CheckpointAggregate.bare("cp:a:1").create(
                trace.scope("a"), BASE, snapshot_digest="", has_snapshot=False
            )

    def test_a_burnt_checkpoint_is_never_restorable_and_frees_the_workspace(self):
        trace = Trace()
        created(trace)
        scope = trace.scope("agent:main")
        claim = trace.checkpoint(CP).claim(scope, "1", "agent:main")
        assert claim is not None
        trace.place(claim, CP)
        burn = trace.checkpoint(CP).invalidate("restore failed: disk")
        assert burn is not None
        trace.place(burn, CP, "agent:main")
        cp = trace.checkpoint(CP)
        assert (cp.state, cp.invalid_reason) == (
            CheckpointState.INVALID,
            "restore failed: disk",
        )
        assert trace.scope("agent:main").workspace_claim == ""
        assert trace.scope("agent:main").workspace_digest == ""  # unknown now
        assert cp.invalidate("again") is None

    def test_a_pruned_checkpoint_is_gone_and_releases_its_snapshot(self):
        trace = Trace()
        created(trace)
        pruned = trace.checkpoint(CP).prune()
        assert pruned is not None
        assert pruned.released == ("sha256:" + "0" * 64,)
        trace.place(pruned, "agent:main", CP)
        with pytest.raises(CheckpointNotFoundError):
            trace.checkpoint(CP).check_restorable(trace.scope("agent:main"))
        assert trace.checkpoint(CP).prune() is None

    def test_a_record_without_digests_is_refused_as_unverifiable(self):
        trace = Trace()
        trace.create("agent:main")
        trace.append_raw(
            "agent:main",
            "goatherd.checkpoint.created.v1",
            "declaration",
            {
                "checkpoint_id": CP,
                "stash_sha": "s",
                "head_sha": "h",
                "has_snapshot": True,
            },
        )
        cp = trace.checkpoint(CP)
        assert (cp.backend, cp.revision, cp.state_digest) == ("git", "h", "")
        with pytest.raises(CheckpointNotRestorableError, match="unverifiable"):
            cp.check_restorable(trace.scope("agent:main"))

    def test_two_different_creations_of_one_id_contradict(self):
        trace = Trace()
        created(trace)
        other = WorkspaceState(backend="memory", revision="r9")
        twin = CheckpointAggregate.bare(CP).create(
            trace.scope("agent:main"), other, snapshot_digest="", has_snapshot=False
        )
        trace.place(twin, "agent:main", CP)
        with pytest.raises(InconsistentTraceError, match="created twice"):
            trace.checkpoint(CP).check_restorable(trace.scope("agent:main"))


def sealed_output() -> tuple[Trace, str]:
    trace = Trace()
    trace.create("p")
    trace.fork("p", "c", baseline=BASE, isolated=True)
    out_id = output_id_for("c", 3)
    event = trace.output(out_id).seal(
        trace.scope("c"),
        SEALED,
        [{"path": "a", "kind": "modify"}],
        diff_blob="sha256:" + "1" * 64,
        diff_truncated=False,
    )
    trace.place(event, "c", out_id)
    return trace, out_id


class TestOutput:
    def test_seal_freezes_state_baseline_changes_and_the_diff_address(self):
        trace, out_id = sealed_output()
        out = trace.output(out_id)
        assert out.workspace == SEALED
        assert out.baseline == BASE
        assert out.changes == ({"path": "a", "kind": "modify"},)
        assert out.diff_blob == "sha256:" + "1" * 64
        assert out.sealed_record
        assert trace.scope("c").is_active

    def test_seal_needs_a_baseline(self):
        trace = Trace()
        trace.create("root")
        with pytest.raises(NoBaselineError, match="no base to settle onto"):
            RetainedOutputAggregate.bare("out:root:1").seal(
                trace.scope("root"), SEALED, [], diff_blob="", diff_truncated=False
            )

    def test_an_unknown_output_cannot_settle(self):
        with pytest.raises(OutputNotFoundError):
            RetainedOutputAggregate.bare("out:x:1").check_settleable()

    def test_it_settles_once_citing_its_seal(self):
        trace, out_id = sealed_output()
        out = trace.output(out_id)
        settled = out.settle(SettlementAction.RELEASE)
        assert settled.caused_by == (out.sealed_record,)
        assert settled.payload() == {
            "output_id": out_id,
            "action": "released",
            "state_digest": SEALED.digest(),
        }
        trace.place(settled, "c", out_id)
        assert trace.output(out_id).state is OutputState.RELEASED
        with pytest.raises(OutputConsumedError, match="retained output already"):
            trace.output(out_id).settle(SettlementAction.SELECT, "i")

    def test_a_claim_sits_on_the_parent_workspace_until_the_settlement(self):
        trace, out_id = sealed_output()
        claim = trace.output(out_id).claim(
            SettlementAction.SELECT, "i1", parent_owner="p", base_digest=BASE.digest()
        )
        assert claim is not None
        trace.place(claim, out_id, "p")
        assert trace.scope("p").workspace_claim == out_id
        with pytest.raises(OutputClaimedError, match="claimed by settle intent i1"):
            trace.output(out_id).claim(
                SettlementAction.APPLY, "i2", parent_owner="p", base_digest=""
            )
        done = trace.output(out_id).settle(
            SettlementAction.SELECT,
            "i1",
            parent_owner="p",
            base_digest=BASE.digest(),
            result_digest=SEALED.digest(),
        )
        trace.place(done, "c", out_id, "p")
        assert trace.scope("p").workspace_claim == ""
        assert trace.scope("p").workspace_digest == SEALED.digest()

    def test_only_the_claiming_attempt_settles_or_ends_a_claimed_output(self):
        trace, out_id = sealed_output()
        claim = trace.output(out_id).claim(
            SettlementAction.APPLY,
            "c:settle:applied:1",
            parent_owner="p",
            base_digest="",
        )
        assert claim is not None
        trace.place(claim, out_id, "p")
        out = trace.output(out_id)
        with pytest.raises(OutputClaimedError, match="seq=1"):
            out.settle(SettlementAction.APPLY, "c:settle:applied:2")
        with pytest.raises(OutputClaimedError):
            out.settle(SettlementAction.DISCARD, "c:settle:discarded:2")
        with pytest.raises(OutputClaimedError):
            out.settle(SettlementAction.RELEASE, "")
        # The claimant (same owner and seq) may end it with another verb.
        ended = out.settle(SettlementAction.DISCARD, "c:settle:discarded:1")
        trace.place(ended, "c", out_id, "p")
        assert trace.output(out_id).state is OutputState.DISCARDED
        assert trace.scope("p").workspace_claim == ""

    def test_attempts_are_told_apart_by_owner_and_seq(self):
        assert same_attempt("a:b:settle:selected:7", "a:b:settle:released:7")
        assert not same_attempt("a:b:settle:selected:7", "a:b:settle:selected:8")
        assert not same_attempt("a:settle:selected:7", "b:settle:selected:7")
        assert not same_attempt("", "")
        assert not same_attempt("i1", "i1")

    def test_a_second_settlement_record_contradicts_the_first(self):
        trace, out_id = sealed_output()
        first = trace.output(out_id).settle(SettlementAction.RELEASE)
        trace.place(first, "c", out_id)
        second = RetainedOutputAggregate.bare(out_id)
        trace.append_raw(
            out_id,
            "goatherd.run_output.settled.v1",
            "capture",
            {"output_id": out_id, "action": "discarded", "state_digest": "x"},
        )
        out = trace.output(out_id)
        assert out.state is OutputState.RELEASED  # the first settlement holds
        assert "settled twice" in out.inconsistent
        with pytest.raises(InconsistentTraceError):
            out.check_settleable()
        assert second.state is OutputState.UNCONSUMED
