"""What each settle verb records, on which paths, and what the claim rules refuse.

The trace is the registry: a settle that lands its effect but records the wrong
fields, or records them on the wrong paths, leaves another process (or the next
restart) with a different answer. These tests read the stored paths back.
"""

from __future__ import annotations

from typing import Any

import pytest
from returns.result import Failure, Success

from goatherd.application import SandboxSpec, ScopeManager
from goatherd.application.errors import ApplyConflictError, UnsupportedError
from goatherd.domain import (
    OutputClaimed,
    OutputSealed,
    OutputSettled,
    ParentMovedError,
    ScopeClaimedError,
    ScopeDiscarded,
    ScopeMerged,
    SettleEffectLandedError,
    SettlementAction,
    TraceStoreError,
    WorkspaceApplied,
    WorkspaceBusyError,
)
from goatherd.domain.events.base import RuntimeEvent, decode_fact
from goatherd.infrastructure.bootstrap import scope_manager_for
from goatherd.infrastructure.sandbox.memory import MemorySandbox, MemorySandboxConfig
from goatherd.infrastructure.store import SQLiteTraceStore


class Died(BaseException):
    pass


def main_sandbox() -> MemorySandbox:
    sb = MemorySandbox(MemorySandboxConfig(files={"a.txt": b"1\n"}))
    sb.create(SandboxSpec())
    return sb


def fork_and_seal(
    mgr: ScopeManager, root_id: str, main: MemorySandbox, name: str, path: str
):
    wt = MemorySandbox(MemorySandboxConfig(repository=main.repository))
    wt.create(SandboxSpec())
    child = mgr.fork_isolated(root_id, name, None, wt).unwrap()
    wt.write_file(path, f"{name}\n".encode())
    return mgr.seal(child.id).unwrap(), wt


def events(store, owner: str, kind: type[RuntimeEvent]) -> list[Any]:
    found = [decode_fact(e.record).event for e in store.read_path(owner)]
    return [e for e in found if isinstance(e, kind)]


@pytest.fixture
def store(tmp_path):
    with SQLiteTraceStore(tmp_path / "trace.db") as opened:
        yield opened


def test_select_records_the_landed_state_on_the_parent_and_the_output(store):
    main = main_sandbox()
    mgr = scope_manager_for(store)
    root = mgr.create("root", main).unwrap()
    out, wt = fork_and_seal(mgr, root.id, main, "try", "b.txt")
    sealed_state = wt.capture()
    baseline = main.capture().digest()
    assert mgr.settle(out.id, "selected") == Success(None)
    landed = main.capture().digest()
    assert landed == sealed_state.digest()

    applied = events(store, "root", WorkspaceApplied)
    assert [(a.backend, a.revision, a.state_digest) for a in applied] == [
        (sealed_state.backend, sealed_state.revision, landed)
    ]
    for owner in ("root", "try", out.id):
        (settled,) = events(store, owner, OutputSettled)
        assert settled.action is SettlementAction.SELECT
        assert settled.output_id == out.id
        assert settled.parent_owner == "root"
        assert settled.base_digest == baseline
        assert settled.result_digest == landed
    for owner in ("root", "try"):
        (merged,) = events(store, owner, ScopeMerged)
        assert merged.child_owner == "try"
    model = mgr.context.model
    model.refresh()
    assert model.scope("root").workspace_digest == landed
    assert model.scope("root").workspace_claim == ""


def test_apply_records_the_merged_state_and_no_workspace_reset(store):
    main = main_sandbox()
    mgr = scope_manager_for(store)
    root = mgr.create("root", main).unwrap()
    out, _ = fork_and_seal(mgr, root.id, main, "try", "b.txt")
    main.write_file("c.txt", b"parent\n")  # disjoint from the output's change
    base = main.capture().digest()
    assert mgr.settle(out.id, "applied") == Success(None)
    result = main.capture().digest()
    assert main.read_file("b.txt") == b"try\n"
    assert main.read_file("c.txt") == b"parent\n"

    assert events(store, "root", WorkspaceApplied) == []
    for owner in ("root", "try", out.id):
        (settled,) = events(store, owner, OutputSettled)
        assert settled.action is SettlementAction.APPLY
        assert (settled.parent_owner, settled.base_digest) == ("root", base)
        assert settled.result_digest == result
    model = mgr.context.model
    model.refresh()
    assert model.scope("root").workspace_claim == ""


def test_discard_records_the_discard_on_parent_and_child_only(store):
    main = main_sandbox()
    mgr = scope_manager_for(store)
    root = mgr.create("root", main).unwrap()
    out, _ = fork_and_seal(mgr, root.id, main, "try", "b.txt")
    assert mgr.settle(out.id, "discarded") == Success(None)
    for owner in ("root", "try"):
        (discarded,) = events(store, owner, ScopeDiscarded)
        assert discarded.child_owner == "try"
    assert events(store, "root", OutputSettled) == []
    for owner in ("try", out.id):
        (settled,) = events(store, owner, OutputSettled)
        assert settled.action is SettlementAction.DISCARD
        assert settled.parent_owner is None


@pytest.mark.parametrize("end", ["discard", "halt"])
def test_the_output_of_a_scope_ended_already_is_discarded_alone(store, end):
    # A collided demo (or a supervisor) can end the scope before anyone ends
    # its output: discarding the output then consumes it, once, and records
    # no second discard of the scope.
    main = main_sandbox()
    mgr = scope_manager_for(store)
    root = mgr.create("root", main).unwrap()
    out, _ = fork_and_seal(mgr, root.id, main, "try", "b.txt")
    child = out.scope_id
    if end == "discard":
        assert mgr.discard(child) == Success(None)
    else:
        mgr.halt(child).unwrap()
    before = len(events(store, "try", ScopeDiscarded))
    assert mgr.settle(out.id, "discarded") == Success(None)
    assert len(events(store, "try", ScopeDiscarded)) == before
    (settled,) = events(store, out.id, OutputSettled)
    assert settled.action is SettlementAction.DISCARD
    again = mgr.settle(out.id, "discarded")
    assert isinstance(again, Failure)


def test_two_managers_discarding_a_halted_scopes_output_consume_it_once(tmp_path):
    # Each manager on its own connection folds the trace itself, as another
    # process would: the halt from one and the discards from both end the
    # output exactly once, whichever folds first.
    with (
        SQLiteTraceStore(tmp_path / "trace.db") as one,
        SQLiteTraceStore(tmp_path / "trace.db") as two,
    ):
        main = main_sandbox()
        first = scope_manager_for(one)
        root = first.create("root", main).unwrap()
        out, _ = fork_and_seal(first, root.id, main, "try", "b.txt")
        second = scope_manager_for(two)
        second.halt(out.scope_id).unwrap()
        answers = [
            first.settle(out.id, "discarded"),
            second.settle(out.id, "discarded"),
        ]
        assert [isinstance(a, Success) for a in answers] == [True, False]
        (settled,) = events(one, out.id, OutputSettled)
        assert settled.action is SettlementAction.DISCARD


def test_release_leaves_the_child_active_and_the_parent_untouched(store):
    main = main_sandbox()
    mgr = scope_manager_for(store)
    root = mgr.create("root", main).unwrap()
    out, _ = fork_and_seal(mgr, root.id, main, "try", "b.txt")
    head = [e.record.envelope.record_id for e in store.read_path("root")]
    assert mgr.settle(out.id, "released") == Success(None)
    assert [e.record.envelope.record_id for e in store.read_path("root")] == head
    assert events(store, "try", ScopeDiscarded) == []
    for owner in ("try", out.id):
        (settled,) = events(store, owner, OutputSettled)
        assert settled.action is SettlementAction.RELEASE


def test_the_claimant_ending_its_claim_frees_the_parent_workspace(store):
    main = main_sandbox()

    def die_after_claim(boundary: str, intent: str) -> None:
        if boundary == "after-commit" and intent.endswith(":claim"):
            raise Died(intent)

    mgr = scope_manager_for(store, faults=die_after_claim)
    root = mgr.create("root", main).unwrap()
    first, _ = fork_and_seal(mgr, root.id, main, "one", "b.txt")
    with pytest.raises(Died):
        mgr.settle(first.id, "selected", seq=40)
    mgr.context.faults = None
    (claim,) = events(store, "root", OutputClaimed)
    assert claim.output_id == first.id
    assert mgr.settle(first.id, "released", seq=40) == Success(None)
    (settled,) = events(store, "root", OutputSettled)
    assert settled.action is SettlementAction.RELEASE
    model = mgr.context.model
    model.refresh()
    assert model.scope("root").workspace_claim == ""


def test_an_unfinished_claim_refuses_every_other_effect_on_the_workspace(store):
    main = main_sandbox()

    def die_after_claim(boundary: str, intent: str) -> None:
        if boundary == "after-commit" and intent.endswith(":claim"):
            raise Died(intent)

    mgr = scope_manager_for(store)
    root = mgr.create("root", main).unwrap()
    first, _ = fork_and_seal(mgr, root.id, main, "one", "b.txt")
    second, _ = fork_and_seal(mgr, root.id, main, "two", "c.txt")
    mgr.context.faults = die_after_claim
    with pytest.raises(Died):
        mgr.settle(first.id, "selected", seq=50)
    mgr.context.faults = None
    # The live workspace has not moved (the claimant died before its effect):
    # only the trace knows the workspace is taken.
    select = mgr.settle(second.id, "selected", seq=51)
    assert isinstance(select, Failure)
    assert isinstance(select.failure(), ParentMovedError)
    assert second.id in str(select.failure())
    apply = mgr.settle(second.id, "applied", seq=52)
    assert isinstance(apply, Failure)
    busy = apply.failure()
    assert isinstance(busy, WorkspaceBusyError)
    assert str(busy) == (
        f"settle {second.id} (apply): the workspace of scope:root is claimed by"
        f" {first.id}, whose effect is unfinished; retry once it settles"
    )
    assert (busy.workspace_scope, busy.holder) == ("scope:root", first.id)
    # The claimant itself goes on and finishes.
    assert mgr.settle(first.id, "selected", seq=50) == Success(None)
    assert main.read_file("b.txt") == b"one\n"


def test_a_select_refused_by_the_recorded_digest_names_the_output(store):
    main = main_sandbox()
    mgr = scope_manager_for(store)
    root = mgr.create("root", main).unwrap()
    first, _ = fork_and_seal(mgr, root.id, main, "one", "b.txt")
    second, _ = fork_and_seal(mgr, root.id, main, "two", "c.txt")
    baseline = main.capture()
    assert mgr.settle(first.id, "selected") == Success(None)
    # Put the live workspace back on the baseline behind the runtime's back:
    # the trace still records the selected state, and select decides on it.
    main.apply(baseline)
    refused = mgr.settle(second.id, "selected")
    assert isinstance(refused, Failure)
    assert isinstance(refused.failure(), ParentMovedError)
    assert str(refused.failure()).startswith(f"settle {second.id} (select):")
    assert events(store, second.id, OutputClaimed) == []


def test_seal_records_the_output_on_the_scope_and_output_paths(store):
    main = main_sandbox()
    mgr = scope_manager_for(store)
    root = mgr.create("root", main).unwrap()
    wt = MemorySandbox(MemorySandboxConfig(repository=main.repository))
    wt.create(SandboxSpec())
    child = mgr.fork_isolated(root.id, "try", None, wt).unwrap()
    baseline = wt.capture()
    wt.write_file("b.txt", b"new\n")
    wt.write_file("a.txt", b"2\n")
    out = mgr.seal(child.id, seq=7).unwrap()
    assert out.id == "out:try:7"
    # The same seq again is the same seal, not a second output.
    assert mgr.seal(child.id, seq=7).unwrap().id == out.id
    for owner in ("try", out.id):
        (sealed,) = events(store, owner, OutputSealed)
        assert sealed.output_id == out.id
        assert sealed.scope == "scope:try"
        assert sealed.state_digest == wt.capture().digest()
        assert sealed.baseline_digest == baseline.digest()
        assert sealed.change_count == 2
        assert sorted((c["path"], c["kind"]) for c in sealed.changes) == [
            ("a.txt", "modify"),
            ("b.txt", "create"),
        ]
        assert not sealed.diff_truncated
    for line in ("+new", "-1", "+2"):
        assert f"\n{line}\n" in out.diff()


def test_seal_of_an_ended_scope_names_the_verb(store):
    main = main_sandbox()
    mgr = scope_manager_for(store)
    root = mgr.create("root", main).unwrap()
    out, _ = fork_and_seal(mgr, root.id, main, "try", "b.txt")
    assert mgr.settle(out.id, "discarded") == Success(None)
    refused = mgr.seal("scope:try")
    assert isinstance(refused, Failure)
    assert str(refused.failure()).startswith("cannot seal scope scope:try in state")


def test_seal_without_a_baseline_says_there_is_nothing_to_settle_onto(store):
    mgr = scope_manager_for(store)
    root = mgr.create("root").unwrap()
    wt = MemorySandbox(MemorySandboxConfig(files={"a.txt": b"1\n"}))
    wt.create(SandboxSpec())
    child = mgr.fork_isolated(root.id, "try", None, wt).unwrap()
    refused = mgr.seal(child.id)
    assert isinstance(refused, Failure)
    assert str(refused.failure()) == (
        "scope scope:try has no fork baseline: it was forked from a parent"
        " without a sandbox, so there is no base to settle onto"
    )


@pytest.mark.parametrize(
    ("limit_delta", "truncated"), [(0, False), (1, False), (-1, True)]
)
def test_a_diff_beyond_the_blob_limit_is_cut_and_marked(
    store, limit_delta: int, truncated: bool
):
    main = main_sandbox()
    mgr = scope_manager_for(store)
    root = mgr.create("root", main).unwrap()
    wt = MemorySandbox(MemorySandboxConfig(repository=main.repository))
    wt.create(SandboxSpec())
    child = mgr.fork_isolated(root.id, "try", None, wt).unwrap()
    wt.write_file("b.txt", ("\u00e9" * 300 + "\n").encode())
    probe = mgr.seal(child.id, seq=1).unwrap().diff()
    size = len(probe.encode())
    store.with_checkpoint_blob_limit(size + limit_delta)
    wt.write_file("c.txt", b"x\n")
    wt.remove_file("c.txt")
    out = mgr.seal(child.id, seq=2).unwrap()
    (sealed,) = events(store, out.id, OutputSealed)
    assert bool(sealed.diff_truncated) is truncated
    stored = out.diff()
    if not truncated:
        assert stored == probe
        return
    marker = "\n...[diff truncated at the blob limit]\n"
    assert stored.endswith(marker)
    assert len(stored.encode()) <= size - 1
    # Cut on a character boundary: what is kept is a prefix of the diff, at
    # most one two-byte character short of the limit.
    kept = stored.removesuffix(marker)
    assert probe.startswith(kept)
    assert len(kept.encode()) >= size - 1 - len(marker) - 1


def test_a_settlement_that_cannot_be_recorded_says_how_to_finish_it(store):
    main = main_sandbox()
    mgr = scope_manager_for(store)
    root = mgr.create("root", main).unwrap()
    out, _ = fork_and_seal(mgr, root.id, main, "try", "b.txt")
    halts: list[object] = []

    def refuse(boundary: str, intent: str) -> None:
        if boundary == "before-commit" and intent == "try:settle:selected:9":
            mgr.context.faults = None
            halts.append(mgr.halt("scope:try"))  # refused: the claim needs it
            raise TraceStoreError("disk full")

    mgr.context.faults = refuse
    result = mgr.settle(out.id, "selected", seq=9)
    assert isinstance(result, Failure)
    landed = result.failure()
    assert isinstance(landed, SettleEffectLandedError)
    assert str(landed) == (
        f"settle {out.id} (selected): settle effect landed: the work stands on the"
        " parent but the settlement was not recorded (disk full); finish it with"
        " seq=9 (the same verb again, or release or discard)"
    )
    assert (landed.output_id, landed.action, landed.ending, landed.seq) == (
        out.id,
        "selected",
        "release or discard",
        9,
    )
    (halt,) = halts
    assert isinstance(halt, Failure)
    refused = halt.failure()
    assert isinstance(refused, ScopeClaimedError)
    assert refused.holder == out.id
    assert refused.claimed_by == "try:settle:selected:9"
    assert refused.finish == f"goatherd settle {out.id} selected --resume 9"
    assert mgr.settle(out.id, "selected", seq=landed.seq) == Success(None)
    assert out.state.value == "selected"
    assert mgr.context.model.scope("root").workspace_claim == ""


def test_an_overlapping_apply_names_the_paths_both_sides_changed(store):
    main = main_sandbox()
    mgr = scope_manager_for(store)
    root = mgr.create("root", main).unwrap()
    out, _ = fork_and_seal(mgr, root.id, main, "try", "b.txt")
    main.write_file("b.txt", b"parent too\n")
    refused = mgr.settle(out.id, "applied")
    assert isinstance(refused, Failure)
    conflict = refused.failure()
    assert isinstance(conflict, ApplyConflictError)
    assert conflict.paths == ("b.txt",)
    assert str(conflict) == (
        f"apply conflict: settle {out.id} (apply): parent changed since the"
        " baseline, which the sealed output also changes: b.txt"
        " (added on both sides with different content)"
    )
    assert events(store, out.id, OutputClaimed) == []


def test_a_seal_that_died_after_storing_its_diff_is_finished_by_its_retry(store):
    main = main_sandbox()
    seen: list[str] = []

    def die_after_blob(boundary: str, intent: str) -> None:
        seen.append(f"{boundary} {intent}")
        if boundary == "after-blob":
            raise Died(intent)

    mgr = scope_manager_for(store)
    root = mgr.create("root", main).unwrap()
    wt = MemorySandbox(MemorySandboxConfig(repository=main.repository))
    wt.create(SandboxSpec())
    child = mgr.fork_isolated(root.id, "try", None, wt).unwrap()
    wt.write_file("b.txt", b"new\n")
    mgr.context.faults = die_after_blob
    with pytest.raises(Died):
        mgr.seal(child.id, seq=4)
    assert seen == ["after-blob try:seal:4"]
    assert events(store, "try", OutputSealed) == []
    mgr.context.faults = None
    out = mgr.seal(child.id, seq=4).unwrap()
    assert out.id == "out:try:4"
    assert len(events(store, "try", OutputSealed)) == 1
    assert "+new" in out.diff()


def test_a_blob_limit_below_the_marker_keeps_only_the_marker(store):
    main = main_sandbox()
    mgr = scope_manager_for(store)
    root = mgr.create("root", main).unwrap()
    wt = MemorySandbox(MemorySandboxConfig(repository=main.repository))
    wt.create(SandboxSpec())
    child = mgr.fork_isolated(root.id, "try", None, wt).unwrap()
    wt.write_file("b.txt", b"some change\n")
    store.with_checkpoint_blob_limit(5)
    out = mgr.seal(child.id).unwrap()
    assert out.diff() == "\n...[diff truncated at the blob limit]\n"
    (sealed,) = events(store, out.id, OutputSealed)
    assert sealed.diff_truncated is True


class WithoutDelta:
    """A workspace backend that cannot apply a three-way delta (no apply_delta).

    It delegates every other operation to a real in-memory sandbox, as a
    third-party backend that only resets to whole states would.
    """

    def __init__(self, inner: MemorySandbox) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        if name == "apply_delta":
            raise AttributeError(name)
        return getattr(self._inner, name)


def test_apply_into_a_backend_without_deltas_is_unsupported_and_consumes_nothing(
    store,
):
    main = main_sandbox()
    mgr = scope_manager_for(store)
    root = mgr.create("root", WithoutDelta(main)).unwrap()
    out, _ = fork_and_seal(mgr, root.id, main, "try", "b.txt")
    refused = mgr.settle(out.id, "applied")
    assert isinstance(refused, Failure)
    unsupported = refused.failure()
    assert isinstance(unsupported, UnsupportedError)
    assert str(unsupported) == (
        "sandbox capability not supported: memory apply_delta"
        " (parent sandbox does not implement DeltaApplier)"
    )
    assert events(store, out.id, OutputClaimed) == []
    # Select only resets to a whole state: that backend can do it.
    assert mgr.settle(out.id, "selected") == Success(None)


def test_a_select_onto_a_moved_live_workspace_names_the_output(store):
    main = main_sandbox()
    mgr = scope_manager_for(store)
    root = mgr.create("root", main).unwrap()
    out, _ = fork_and_seal(mgr, root.id, main, "try", "b.txt")
    main.write_file("c.txt", b"the parent moved\n")
    refused = mgr.settle(out.id, "selected")
    assert isinstance(refused, Failure)
    assert str(refused.failure()) == (
        f"settle {out.id} (select): parent workspace has moved since the"
        " fork baseline; use SettleApply"
    )


def test_settling_an_unknown_output_names_it(store):
    mgr = scope_manager_for(store)
    mgr.create("root").unwrap()
    refused = mgr.settle("out:root:99", "released")
    assert isinstance(refused, Failure)
    assert str(refused.failure()) == "retained output out:root:99 not found"
