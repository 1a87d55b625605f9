"""Retained output and checkpoint aggregates: each rule, each fold, each message."""

from __future__ import annotations

from dataclasses import replace

import pytest

from goatherd.domain import (
    CheckpointAggregate,
    CheckpointNotFoundError,
    CheckpointNotRestorableError,
    CheckpointScopeMismatchError,
    CheckpointState,
    InconsistentTraceError,
    NoBaselineError,
    OutputClaimed,
    OutputClaimedError,
    OutputConsumedError,
    OutputNotFoundError,
    OutputSealed,
    OutputSettled,
    OutputState,
    RetainedOutputAggregate,
    ScopeAggregate,
    ScopeState,
    ScopeStateError,
    SettlementAction,
    WorkspaceState,
)
from goatherd.domain.checkpoint import seq_of_sequenced_id
from goatherd.domain.retained_output import same_attempt

BASE = WorkspaceState(backend="memory", revision="r0", data={"a": "1"})
STATE = WorkspaceState(backend="memory", revision="r1", data={"a": "2"})
OUT = "out:c:3"
MINE = "c:settle:selected:3"
SELECT, APPLY = SettlementAction.SELECT, SettlementAction.APPLY
RELEASE = SettlementAction.RELEASE


def child(**fields: object) -> ScopeAggregate:
    values: dict[str, object] = {"listed": True, "parent_owner": "p", "baseline": BASE}
    return replace(ScopeAggregate.bare("c"), **(values | fields))  # type: ignore[arg-type]


def sealed(**fields: object) -> RetainedOutputAggregate:
    event = RetainedOutputAggregate.bare(OUT).seal(
        child(),
        STATE,
        [{"path": "a", "kind": "modify"}],
        diff_blob="",
        diff_truncated=False,
    )
    out = RetainedOutputAggregate.bare(OUT).with_sealed(event, "sha256:s", "i:seal")
    return replace(out, **fields)  # type: ignore[arg-type]


class TestSeal:
    def test_the_sealed_record_carries_state_baseline_and_diff(self) -> None:
        event = RetainedOutputAggregate.bare(OUT).seal(
            child(),
            STATE,
            [{"path": "a", "kind": "modify", "x": "dropped"}],
            diff_blob="sha256:d",
            diff_truncated=True,
        )
        assert (event.output_id, event.scope) == (OUT, "scope:c")
        assert (event.backend, event.revision) == ("memory", "r1")
        assert (event.state_digest, event.baseline_digest) == (
            STATE.digest(),
            BASE.digest(),
        )
        assert event.changes == ({"path": "a", "kind": "modify"},)
        assert (event.change_count, event.diff_blob, event.diff_truncated) == (
            1,
            "sha256:d",
            True,
        )

    def test_an_untruncated_diff_records_no_flag(self) -> None:
        event = RetainedOutputAggregate.bare(OUT).seal(
            child(), STATE, [], diff_blob="", diff_truncated=False
        )
        assert event.diff_truncated is None

    def test_an_ended_scope_cannot_seal(self) -> None:
        with pytest.raises(ScopeStateError) as caught:
            RetainedOutputAggregate.bare(OUT).seal(
                child(state=ScopeState.MERGED),
                STATE,
                [],
                diff_blob="",
                diff_truncated=False,
            )
        assert str(caught.value) == "cannot seal scope scope:c in state merged"

    def test_a_scope_without_baseline_names_itself(self) -> None:
        with pytest.raises(NoBaselineError) as caught:
            RetainedOutputAggregate.bare(OUT).seal(
                child(baseline=None), STATE, [], diff_blob="", diff_truncated=False
            )
        assert str(caught.value).startswith("scope scope:c has no fork baseline")


class TestFoldSealed:
    def test_the_fold_takes_every_field(self) -> None:
        event = OutputSealed(
            output_id=OUT,
            scope="scope:other",
            backend="memory",
            revision="r1",
            state_digest=STATE.digest(),
            baseline_digest=BASE.digest(),
            change_count=0,
            state=STATE,
            baseline=BASE,
            changes=(),
            diff_blob="sha256:d",
            diff_truncated=True,
        )
        out = RetainedOutputAggregate.bare(OUT).with_sealed(event, "sha256:s", "i")
        assert (out.exists, out.scope_owner) == (True, "other")
        assert (out.diff_blob, out.diff_truncated) == ("sha256:d", True)
        assert (out.workspace, out.baseline) == (STATE, BASE)
        assert (out.sealed_record, out.sealed_intent) == ("sha256:s", "i")

    def test_an_id_names_its_owner_before_any_record(self) -> None:
        assert RetainedOutputAggregate.bare(OUT).scope_owner == "c"

    def test_defaults_fold_to_empty_values(self) -> None:
        out = sealed()
        assert (out.diff_blob, out.diff_truncated, out.scope_owner) == ("", False, "c")

    def test_a_second_seal_contradicts_and_the_first_reason_stays(self) -> None:
        out = sealed()
        event = RetainedOutputAggregate.bare(OUT).seal(
            child(), BASE, [], diff_blob="", diff_truncated=False
        )
        assert out.with_sealed(event, "sha256:s", "i") == out
        twice = out.with_sealed(event, "sha256:other", "i")
        assert twice.inconsistent == f"output {OUT} is sealed twice"
        assert twice.with_sealed(event, "sha256:third", "i") == twice
        assert (
            replace(twice, inconsistent="first")
            .with_sealed(event, "sha256:x", "i")
            .inconsistent
            == "first"
        )


class TestSettleable:
    def test_an_unknown_output_is_not_found(self) -> None:
        with pytest.raises(OutputNotFoundError) as caught:
            RetainedOutputAggregate.bare(OUT).check_settleable()
        assert str(caught.value) == f"retained output {OUT} not found"

    def test_a_contradicted_output_names_the_contradiction(self) -> None:
        with pytest.raises(InconsistentTraceError) as caught:
            sealed(inconsistent="sealed twice").check_settleable()
        assert str(caught.value) == f"{OUT}: the trace is inconsistent: sealed twice"

    def test_a_settled_output_says_how(self) -> None:
        with pytest.raises(OutputConsumedError) as caught:
            sealed(state=OutputState.SELECTED).check_settleable()
        assert str(caught.value).startswith(f"output {OUT} is selected:")

    def test_another_attempts_claim_is_named(self) -> None:
        out = sealed(claimed_by="c:settle:applied:9")
        with pytest.raises(OutputClaimedError) as caught:
            out.claim(SELECT, MINE, parent_owner="p", base_digest="")
        assert str(caught.value).startswith(
            f"output {OUT} is claimed by settle intent c:settle:applied:9"
        )


class TestClaimAndSettle:
    def test_a_claim_records_the_parent_and_base(self) -> None:
        event = sealed().claim(APPLY, MINE, parent_owner="p", base_digest="sha256:b")
        assert event is not None
        assert (event.output_id, event.action, event.settle_intent) == (
            OUT,
            APPLY,
            MINE,
        )
        assert (event.parent_owner, event.base_digest) == ("p", "sha256:b")
        unknown = sealed().claim(APPLY, MINE, parent_owner="p", base_digest="")
        assert unknown is not None
        assert unknown.base_digest is None

    def test_claiming_again_under_the_same_intent_is_nothing_new(self) -> None:
        assert (
            sealed(claimed_by=MINE).claim(
                SELECT, MINE, parent_owner="p", base_digest=""
            )
            is None
        )

    def test_the_fold_of_a_claim_keeps_the_first(self) -> None:
        event = OutputClaimed(
            output_id=OUT,
            action=SELECT,
            settle_intent=MINE,
            parent_owner="p",
            base_digest="sha256:b",
        )
        out = sealed().with_claim(event)
        assert (out.claimed_by, out.claim_parent, out.claim_base) == (
            MINE,
            "p",
            "sha256:b",
        )
        later = replace(event, settle_intent="c:settle:applied:4")
        assert out.with_claim(later) == out
        bare = sealed().with_claim(
            OutputClaimed(output_id=OUT, action=SELECT, settle_intent=MINE)
        )
        assert (bare.claim_parent, bare.claim_base) == ("", "")

    def test_an_effect_settlement_records_its_digests(self) -> None:
        event = sealed(claimed_by=MINE).settle(
            SELECT,
            MINE,
            parent_owner="p",
            base_digest="sha256:b",
            result_digest="sha256:r",
        )
        assert event.caused_by == ("sha256:s",)
        assert (event.parent_owner, event.base_digest, event.result_digest) == (
            "p",
            "sha256:b",
            "sha256:r",
        )
        assert event.state_digest == STATE.digest()

    def test_only_the_claimant_may_settle_an_effect(self) -> None:
        with pytest.raises(OutputClaimedError) as caught:
            sealed(claimed_by=MINE).settle(APPLY, "c:settle:applied:4")
        assert f"output {OUT} is claimed" in str(caught.value)

    def test_the_claimant_may_end_with_another_verb_and_no_one_else(self) -> None:
        out = sealed(claimed_by=MINE)
        event = out.settle(RELEASE, "c:settle:released:3")
        assert (event.parent_owner, event.base_digest, event.result_digest) == (
            None,
            None,
            None,
        )
        with pytest.raises(OutputClaimedError) as caught:
            out.settle(RELEASE, "c:settle:released:4")
        assert str(caught.value).startswith(
            f"output {OUT} is claimed by settle intent {MINE}"
        )
        with pytest.raises(OutputClaimedError):
            out.settle(RELEASE)

    def test_an_owner_is_told_apart_from_a_longer_owner(self) -> None:
        assert same_attempt("c:settle:selected:3", "c:settle:released:3")
        assert not same_attempt("c:settle:selected:3", "c:settle:released:4")
        # An owner may itself contain ":settle:"; the attempt key keeps it whole.
        assert not same_attempt(
            "a:settle:x:settle:selected:5", "a:settle:y:settle:released:5"
        )
        assert not same_attempt("", "")

    def test_the_fold_of_a_settlement_takes_every_field(self) -> None:
        event = OutputSettled(
            output_id=OUT,
            action=APPLY,
            state_digest="sha256:w",
            parent_owner="p",
            base_digest="sha256:b",
            result_digest="sha256:r",
        )
        out = sealed().with_settled(event, "sha256:t", "c:settle:applied:3")
        assert (out.state, out.action) == (OutputState.APPLIED, APPLY)
        assert (out.settled_record, out.settled_intent) == (
            "sha256:t",
            "c:settle:applied:3",
        )
        assert (out.parent_owner, out.base_digest, out.result_digest) == (
            "p",
            "sha256:b",
            "sha256:r",
        )
        plain = sealed().with_settled(
            OutputSettled(output_id=OUT, action=RELEASE, state_digest="sha256:w"),
            "r",
            "i",
        )
        assert (plain.parent_owner, plain.base_digest, plain.result_digest) == (
            "",
            "",
            "",
        )
        assert out.with_settled(event, "sha256:t", "i") == out
        assert out.with_settled(event, "sha256:u", "i").inconsistent == (
            f"output {OUT} is settled twice"
        )


CP = "cp:c:2"


def checkpoint(**fields: object) -> CheckpointAggregate:
    bare = CheckpointAggregate.bare(CP)
    values: dict[str, object] = {"exists": True, "state_digest": "sha256:w"}
    return replace(bare, **(values | fields))  # type: ignore[arg-type]


class TestRestorable:
    def test_an_unknown_or_pruned_checkpoint_is_not_found(self) -> None:
        for cp in (CheckpointAggregate.bare(CP), checkpoint(pruned=True)):
            with pytest.raises(CheckpointNotFoundError) as caught:
                cp.check_restorable(child())
            assert str(caught.value) == f"checkpoint {CP} not found"

    def test_a_contradicted_checkpoint_names_itself(self) -> None:
        with pytest.raises(InconsistentTraceError) as caught:
            checkpoint(inconsistent="why").check_restorable(child())
        assert str(caught.value) == f"{CP}: the trace is inconsistent: why"

    def test_an_ended_scope_cannot_restore(self) -> None:
        with pytest.raises(ScopeStateError) as caught:
            checkpoint().check_restorable(child(state=ScopeState.DISCARDED))
        assert str(caught.value) == "cannot restore in scope scope:c in state discarded"

    def test_another_scopes_checkpoint_is_refused(self) -> None:
        other = replace(child(), owner="d")
        with pytest.raises(CheckpointScopeMismatchError) as caught:
            checkpoint().check_restorable(other)
        assert (
            str(caught.value)
            == f"checkpoint {CP} belongs to scope scope:c, not scope:d"
        )

    def test_a_used_checkpoint_is_not_restorable(self) -> None:
        with pytest.raises(CheckpointNotRestorableError) as caught:
            checkpoint(state=CheckpointState.USED).check_restorable(child())
        assert str(caught.value) == f"checkpoint {CP} is used, cannot restore"

    @pytest.mark.parametrize(
        ("fields", "missing"),
        [
            ({"state_digest": ""}, "workspace state"),
            ({"state_digest": "", "has_snapshot": True}, "workspace state"),
            ({"has_snapshot": True, "snapshot_digest": None}, "snapshot"),
        ],
    )
    def test_an_unverifiable_checkpoint_says_what_digest_is_missing(
        self, fields: dict[str, object], missing: str
    ) -> None:
        with pytest.raises(CheckpointNotRestorableError) as caught:
            checkpoint(**fields).check_restorable(child())
        assert str(caught.value) == (
            f"checkpoint {CP} is unverifiable (recorded without the digest of its"
            f" {missing}), cannot restore"
        )

    def test_a_verifiable_checkpoint_passes(self) -> None:
        checkpoint().check_restorable(child())
        checkpoint(has_snapshot=True, snapshot_digest="sha256:x").check_restorable(
            child()
        )

    @pytest.mark.parametrize(
        ("identifier", "seq"),
        [("cp:c:12", 12), ("cp:a:b:7", 7), ("cp:c:x", 0), ("cp:c:", 0), ("12", 12)],
    )
    def test_the_seq_of_an_id_is_its_last_number(
        self, identifier: str, seq: int
    ) -> None:
        assert seq_of_sequenced_id(identifier) == seq
