"""Claims before workspace effects, retries under the same seq, the fault hook."""

from __future__ import annotations

import pytest
from returns.result import Failure, Success

from goatherd.application import (
    RecoverOptions,
    SandboxSpec,
    ScopeManager,
    recover_scopes,
)
from goatherd.domain import (
    CheckpointClaimed,
    CheckpointClaimedError,
    CheckpointState,
    OutputClaimed,
    OutputClaimedError,
    OutputConsumedError,
    OutputState,
    SettleEffectLandedError,
    SettlementAction,
)
from goatherd.infrastructure.bootstrap import runtime_context_for, scope_manager_for
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
def path(tmp_path):
    return tmp_path / "trace.db"


def main_sandbox() -> MemorySandbox:
    sb = MemorySandbox(MemorySandboxConfig(files={"a.txt": b"1\n"}))
    sb.create(SandboxSpec())
    return sb


def sealed(mgr: ScopeManager, main: MemorySandbox):
    root = mgr.create("root", main).unwrap()
    wt = MemorySandbox(MemorySandboxConfig(repository=main.repository))
    wt.create(SandboxSpec())
    child = mgr.fork_isolated(root.id, "try", None, wt).unwrap()
    wt.write_file("b.txt", b"child\n")
    return mgr.seal(child.id).unwrap(), wt


def count(store, owner: str, schema: str) -> int:
    return sum(
        1 for e in store.read_path(owner) if e.record.envelope.schema_ref == schema
    )


def recovered(store, sandboxes):
    mgr = recover_scopes(
        runtime_context_for(store),
        RecoverOptions(resolver=lambda sid, *_: sandboxes.get(sid)),
    ).unwrap()
    if mgr.get("scope:root") is None:
        mgr.create("root", sandboxes["scope:root"]).unwrap()
    return mgr


def test_a_settle_that_died_after_its_effect_is_finished_by_its_retry(path):
    main = main_sandbox()
    with SQLiteTraceStore(path) as store:
        mgr = scope_manager_for(store, faults=dies_at("after-effect"))
        out, wt = sealed(mgr, main)
        with pytest.raises(Died):
            mgr.settle(out.id, "selected", seq=77)
    assert main.read_file("b.txt") == b"child\n"
    with SQLiteTraceStore(path) as store:
        mgr = recovered(store, {"scope:root": main, "scope:try": wt})
        again = mgr.output(out.id)
        assert again is not None
        assert again.state is OutputState.UNCONSUMED
        other = mgr.settle(out.id, "applied", seq=78)
        assert isinstance(other, Failure)
        assert isinstance(other.failure(), OutputClaimedError)
        assert mgr.settle(out.id, "selected", seq=77) == Success(None)
        assert again.action is SettlementAction.SELECT
        assert count(store, out.id, OutputClaimed.SCHEMA) == 1


def test_only_the_claimant_ends_a_claimed_output(path):
    main = main_sandbox()
    with SQLiteTraceStore(path) as store:
        mgr = scope_manager_for(store, faults=dies_at("after-effect"))
        out, _ = sealed(mgr, main)
        with pytest.raises(Died):
            mgr.settle(out.id, "selected", seq=5)
        mgr.context.faults = None
        # Another attempt cannot end it: the claimant may be landing right now.
        other = mgr.settle(out.id, "released", seq=6)
        assert isinstance(other, Failure)
        assert isinstance(other.failure(), OutputClaimedError)
        assert "seq=5" in str(other.failure())
        # The claimant (its seq) may end it with another verb: the landed
        # effect stays, the output is released.
        assert mgr.settle(out.id, "released", seq=5) == Success(None)
        assert out.state is OutputState.RELEASED
        late = mgr.settle(out.id, "selected", seq=5)
        assert isinstance(late, Failure)
        assert isinstance(late.failure(), OutputConsumedError)


def test_a_failed_settle_record_after_the_effect_is_effect_landed(path):
    main = main_sandbox()
    with SQLiteTraceStore(path) as store:
        mgr = scope_manager_for(store)
        out, _ = sealed(mgr, main)
        from goatherd.domain import TraceStoreError

        def refuse(boundary: str, intent: str) -> None:
            if (
                boundary == "before-commit"
                and ":settle:" in intent
                and "claim" not in intent
            ):
                raise TraceStoreError("disk full")

        mgr.context.faults = refuse
        result = mgr.settle(out.id, "selected", seq=9)
        assert isinstance(result, Failure)
        assert isinstance(result.failure(), SettleEffectLandedError)
        assert out.state is OutputState.UNCONSUMED
        mgr.context.faults = None
        assert mgr.settle(out.id, "selected", seq=9) == Success(None)
        assert main.read_file("b.txt") == b"child\n"


def test_a_restore_retried_after_it_committed_returns_its_snapshot(path):
    main = main_sandbox()
    with SQLiteTraceStore(path) as store:
        mgr = scope_manager_for(store)
        root = mgr.create("root", main).unwrap()
        cp = mgr.create_checkpoint(root.id, b"history").unwrap()
        main.write_file("a.txt", b"broken\n")

        def die_after_restore(boundary: str, intent: str) -> None:
            if boundary == "after-commit" and intent.endswith(f"restore:{cp.seq}"):
                raise Died(intent)

        mgr.context.faults = die_after_restore
        with pytest.raises(Died):
            mgr.restore_checkpoint(cp.id, seq=31)
    with SQLiteTraceStore(path) as store:
        mgr = recovered(store, {"scope:root": main})
        assert mgr.restore_checkpoint(cp.id, seq=31) == Success(b"history")
        view = mgr.checkpoint(cp.id)
        assert view is not None
        assert view.state is CheckpointState.USED
        other = mgr.restore_checkpoint(cp.id, seq=32)
        assert isinstance(other, Failure)
        assert main.read_file("a.txt") == b"1\n"


def test_a_claimed_checkpoint_refuses_another_restore_attempt(path):
    main = main_sandbox()
    with SQLiteTraceStore(path) as store:
        mgr = scope_manager_for(store)
        root = mgr.create("root", main).unwrap()
        cp = mgr.create_checkpoint(root.id, b"s").unwrap()
        mgr.context.faults = dies_at("after-effect")
        with pytest.raises(Died):
            mgr.restore_checkpoint(cp.id, seq=1)
        mgr.context.faults = None
        other = mgr.restore_checkpoint(cp.id, seq=2)
        assert isinstance(other, Failure)
        assert isinstance(other.failure(), CheckpointClaimedError)
        assert mgr.restore_checkpoint(cp.id, seq=1) == Success(b"s")
        assert count(store, cp.id, CheckpointClaimed.SCHEMA) == 1


def test_a_checkpoint_whose_record_never_landed_is_not_recovered(path):
    main = main_sandbox()
    with SQLiteTraceStore(path) as store:
        mgr = scope_manager_for(store, faults=dies_at("after-blob"))
        root = mgr.create("root", main).unwrap()
        mgr.fork(root.id, "c").unwrap()
        with pytest.raises(Died):
            mgr.create_checkpoint(root.id, b"x", seq=3)
    with SQLiteTraceStore(path) as store:
        mgr = recovered(store, {"scope:root": main})
        assert mgr.latest_checkpoint("scope:root") is None
        cp = mgr.create_checkpoint("scope:root", b"x", seq=3).unwrap()
        assert cp.state is CheckpointState.VALID
        assert mgr.restore_checkpoint(cp.id) == Success(b"x")


def test_a_child_ended_by_another_manager_refuses_a_stale_settle_before_any_effect(
    path,
):
    from goatherd.domain import ScopeStateError

    main = main_sandbox()
    with SQLiteTraceStore(path) as one, SQLiteTraceStore(path) as two:
        mine = scope_manager_for(one)
        out, wt = sealed(mine, main)  # mine now caches the child as active
        other = recovered(two, {"scope:root": main, "scope:try": wt})
        assert other.discard("scope:try") == Success(None)
        before = one.fact_count()
        result = mine.settle(out.id, "selected")
        assert isinstance(result, Failure)
        assert isinstance(result.failure(), ScopeStateError)
        assert "b.txt" not in main.list_files()
        assert one.fact_count() == before
        assert count(one, out.id, OutputClaimed.SCHEMA) == 0


def test_a_restore_that_loses_the_claim_never_touches_the_workspace(path):
    main = main_sandbox()
    with SQLiteTraceStore(path) as store:
        mgr = scope_manager_for(store)
        root = mgr.create("root", main).unwrap()
        cp = mgr.create_checkpoint(root.id, b"s").unwrap()

        def die_after_claim(boundary: str, intent: str) -> None:
            if boundary == "after-commit" and ":claim:" in intent:
                raise Died(intent)

        mgr.context.faults = die_after_claim
        with pytest.raises(Died):
            mgr.restore_checkpoint(cp.id, seq=1)  # claimed, nothing applied yet
        mgr.context.faults = None
        main.write_file("a.txt", b"the agent kept working\n")
        other = mgr.restore_checkpoint(cp.id, seq=2)
        assert isinstance(other.failure(), CheckpointClaimedError)
        assert main.read_file("a.txt") == b"the agent kept working\n"
        # The claimant's retry applies the checkpoint (it never skips the apply).
        assert mgr.restore_checkpoint(cp.id, seq=1) == Success(b"s")
        assert main.read_file("a.txt") == b"1\n"


def test_a_settle_that_loses_the_claim_never_touches_the_workspace(path):
    main = main_sandbox()
    with SQLiteTraceStore(path) as store:
        mgr = scope_manager_for(store)
        out, _ = sealed(mgr, main)

        def die_after_claim(boundary: str, intent: str) -> None:
            if boundary == "after-commit" and intent.endswith(":claim"):
                raise Died(intent)

        mgr.context.faults = die_after_claim
        with pytest.raises(Died):
            mgr.settle(out.id, "applied", seq=11)
        mgr.context.faults = None
        assert "b.txt" not in main.list_files()
        other = mgr.settle(out.id, "selected", seq=12)
        assert isinstance(other.failure(), OutputClaimedError)
        assert "b.txt" not in main.list_files()
        assert mgr.settle(out.id, "applied", seq=11) == Success(None)
        assert main.read_file("b.txt") == b"child\n"


def test_finish_completes_a_landed_settle_or_restore_in_one_call(path):
    from goatherd.domain import RestoreEffectLandedError, TraceStoreError

    main = main_sandbox()
    with SQLiteTraceStore(path) as store:
        mgr = scope_manager_for(store)
        out, _ = sealed(mgr, main)

        def refuse(boundary: str, intent: str) -> None:
            if (
                boundary == "before-commit"
                and "claim" not in intent
                and (":settle:" in intent or ":restore:" in intent)
            ):
                raise TraceStoreError("disk full")

        mgr.context.faults = refuse
        landed = mgr.settle(out.id, "selected", seq=9).failure()
        assert isinstance(landed, SettleEffectLandedError)
        mgr.context.faults = None
        assert mgr.finish(landed) == Success(None)
        assert out.state is OutputState.SELECTED
        root = mgr.get("scope:root")
        assert root is not None
        cp = mgr.create_checkpoint(root.id, b"history").unwrap()
        main.write_file("a.txt", b"broken\n")
        mgr.context.faults = refuse
        restored = mgr.restore_checkpoint(cp.id, seq=41).failure()
        assert isinstance(restored, RestoreEffectLandedError)
        mgr.context.faults = None
        assert mgr.finish(restored) == Success(None)
        view = mgr.checkpoint(cp.id)
        assert view is not None
        assert view.state.value == "used"
        assert main.read_file("a.txt") != b"broken\n"
        with pytest.raises(TypeError, match="finish takes"):
            mgr.finish(TraceStoreError("x"))  # type: ignore[arg-type]
