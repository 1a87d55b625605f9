"""ScopeManager on SQLite with the memory sandbox: the seed's rhythms and bad input."""

from __future__ import annotations

import threading

import pytest
from returns.result import Failure, Success

from goatherd.application import (
    ApplyConflictError,
    RecoverOptions,
    RecoveryStats,
    SandboxSpec,
    ScopeManager,
    recover_scopes,
)
from goatherd.domain import (
    CheckpointNotFoundError,
    CheckpointNotRestorableError,
    CheckpointState,
    DestructivePathReviewer,
    NotAChildError,
    OutputConsumedError,
    OutputNotFoundError,
    OutputState,
    ParentMovedError,
    ScopeNotFoundError,
    ScopeState,
    ScopeStateError,
    SnapshotTooLargeError,
    UnknownSettlementActionError,
)
from goatherd.infrastructure.bootstrap import runtime_context_for, scope_manager_for
from goatherd.infrastructure.sandbox.memory import MemorySandbox, MemorySandboxConfig
from goatherd.infrastructure.store import SQLiteTraceStore


@pytest.fixture
def store(tmp_path):
    with SQLiteTraceStore(tmp_path / "trace.db") as s:
        yield s


def sandbox(files=None, repository=None) -> MemorySandbox:
    if repository is not None:
        sb = MemorySandbox(MemorySandboxConfig(repository=repository))
    else:
        sb = MemorySandbox(MemorySandboxConfig(files=files or {"a.txt": b"1\n"}))
    sb.create(SandboxSpec())
    return sb


def manager(store) -> ScopeManager:
    return scope_manager_for(store)


def sealed_try(path):
    """A root on a memory sandbox and its isolated child "try" with one sealed
    output (``x.txt`` added); returns the root's sandbox, the host's sandboxes
    by scope id and the output."""
    main = sandbox()
    with SQLiteTraceStore(path) as store:
        mgr = manager(store)
        parent = mgr.create("agent:main", main).unwrap()
        wt = sandbox(repository=main.repository)
        child = mgr.fork_isolated(parent.id, "try", None, wt).unwrap()
        wt.write_file("x.txt", b"x\n")
        out = mgr.seal(child.id).unwrap()
    return main, {"scope:agent:main": main, "scope:try": wt}, out


def failure_of(result):
    assert isinstance(result, Failure), result
    return result.failure()


def trace_size(store) -> tuple[int, int]:
    return store.fact_count(), store.max_position()


class TestForkAndBranch:
    def test_fork_then_merge_or_discard_records_the_lifecycle(self, store):
        mgr = manager(store)
        parent = mgr.create("agent:main", sandbox()).unwrap()
        child = mgr.fork(parent.id, "agent:experimental").unwrap()
        assert child.parent == parent
        assert child.sandbox is parent.sandbox
        assert not child.owns_sandbox
        assert parent.merge(child) == Success(None)
        assert child.state is ScopeState.MERGED
        other = mgr.fork(parent.id, "agent:other").unwrap()
        assert parent.discard(other) == Success(None)
        assert other.state is ScopeState.DISCARDED
        assert [c.owner_id for c in parent.children] == [
            "agent:experimental",
            "agent:other",
        ]
        assert [s.id for s in mgr.active_scopes()] == ["scope:agent:main"]

    def test_a_retried_fork_under_the_same_seq_appends_nothing_new(self, store):
        mgr = manager(store)
        parent = mgr.create("p", sandbox()).unwrap()
        mgr.fork(parent.id, "c", seq=41).unwrap()
        before = trace_size(store)
        fresh = manager(store)
        # The root is in the trace: another manager sees it, and only needs
        # this process's sandbox object to be attached.
        assert fresh.get("scope:p") is not None
        fresh.attach_sandbox("scope:p", parent.sandbox)  # type: ignore[arg-type]
        again = fresh.fork(parent.id, "c", seq=41).unwrap()
        assert again.fork_point == mgr.get("scope:c").fork_point  # type: ignore[union-attr]
        assert trace_size(store) == before


class TestRollback:
    def test_a_checkpoint_rewinds_the_workspace_once_and_returns_the_snapshot(
        self, store
    ):
        mgr = manager(store)
        sb = sandbox()
        scope = mgr.create("agent:main", sb).unwrap()
        cp = mgr.create_checkpoint(scope.id, b"conversation").unwrap()
        sb.write_file("a.txt", b"destroyed\n")
        assert mgr.restore_checkpoint(cp.id) == Success(b"conversation")
        assert sb.read_file("a.txt") == b"1\n"
        assert mgr.checkpoint(cp.id).state is CheckpointState.USED  # type: ignore[union-attr]
        error = failure_of(mgr.restore_checkpoint(cp.id))
        assert isinstance(error, CheckpointNotRestorableError)

    def test_a_reusable_state_can_be_applied_twice(self, store):
        mgr = manager(store)
        sb = sandbox()
        scope = mgr.create("agent:main", sb).unwrap()
        fork_state = scope.capture_workspace().unwrap()
        for variant in (b"A\n", b"B\n"):
            sb.write_file("a.txt", variant)
            assert scope.apply_workspace(fork_state) == Success(None)
            assert sb.read_file("a.txt") == b"1\n"


class TestRecovery:
    def test_the_tree_checkpoints_and_outputs_come_back_after_a_restart(self, tmp_path):
        path = tmp_path / "t.db"
        root_sb = sandbox()
        with SQLiteTraceStore(path) as store:
            mgr = manager(store)
            root = mgr.create("agent:main", root_sb).unwrap()
            child = mgr.fork(root.id, "c1").unwrap()
            gone = mgr.fork(root.id, "c2").unwrap()
            mgr.fork(child.id, "g").unwrap()
            mgr.discard(gone.id).unwrap()
            cp = mgr.create_checkpoint(root.id, b"snap").unwrap()
            out = mgr.seal(child.id).unwrap()
        with SQLiteTraceStore(path) as store:
            stats = RecoveryStats()
            calls = []

            def resolver(scope_id, backend, address):
                calls.append((scope_id, backend, address))
                return root_sb if scope_id == "scope:agent:main" else None

            mgr = recover_scopes(
                runtime_context_for(store),
                RecoverOptions(resolver=resolver, stats=stats),
            ).unwrap()
            states = {s.id: s.state for s in mgr.all_scopes()}
            assert states == {
                "scope:agent:main": ScopeState.ACTIVE,
                "scope:c1": ScopeState.ACTIVE,
                "scope:c2": ScopeState.DISCARDED,
                "scope:g": ScopeState.ACTIVE,
            }
            assert calls == [("scope:agent:main", "", "")]
            assert mgr.get("scope:g").sandbox is root_sb  # type: ignore[union-attr]
            assert (stats.fork_records, stats.terminal_records) == (3, 1)
            assert (stats.checkpoint_blobs, stats.sealed_outputs) == (1, 1)
            assert mgr.latest_checkpoint(root.id).id == cp.id  # type: ignore[union-attr]
            assert mgr.output(out.id).state is OutputState.UNCONSUMED  # type: ignore[union-attr]
            assert mgr.settle(out.id, "selected") == Success(None)
            assert mgr.restore_checkpoint(cp.id) == Success(b"snap")

    def test_a_checkpoint_the_workspace_has_left_recovers_invalid(self, tmp_path):
        path = tmp_path / "t.db"
        sb = sandbox()
        with SQLiteTraceStore(path) as store:
            mgr = manager(store)
            scope = mgr.create("a", sb).unwrap()
            cp = mgr.create_checkpoint(scope.id).unwrap()
            sb.commit()
        with SQLiteTraceStore(path) as store:
            mgr = recover_scopes(
                runtime_context_for(store), RecoverOptions(resolver=lambda *_: sb)
            ).unwrap()
            assert mgr.checkpoint(cp.id).state is CheckpointState.INVALID  # type: ignore[union-attr]
            assert mgr.latest_checkpoint(scope.id) is None
            assert isinstance(
                failure_of(mgr.restore_checkpoint(cp.id)), CheckpointNotRestorableError
            )


class TestReviewBeforeMerge:
    def test_a_denied_proposal_is_recorded_discarded_and_rolled_back(self, store):
        mgr = manager(store)
        sb = sandbox()
        parent = mgr.create("agent:main", sb).unwrap()
        cp = mgr.create_checkpoint(parent.id, b"").unwrap()
        child = mgr.fork(parent.id, "agent:sub").unwrap()
        sb.write_file("keys/ca.pem", b"secret")
        proposal = mgr.propose_merge(child.id, 1000).unwrap()
        assert [(c.path, c.kind) for c in proposal.changes] == [
            ("keys/ca.pem", "create")
        ]
        proposed_id = mgr.record_merge_proposal(proposal).unwrap()
        reason = DestructivePathReviewer(("*.pem",))(proposal)
        assert reason is not None
        decision = mgr.record_merge_decision(
            proposal, False, reason, "discarded", proposed_id
        )
        assert isinstance(decision, Success)
        assert mgr.discard(child.id) == Success(None)
        assert mgr.restore_checkpoint(cp.id) == Success(b"")
        assert "keys/ca.pem" not in sb.list_files()


class TestBestOfN:
    def test_seal_each_then_select_one_and_discard_the_rest(self, store):
        mgr = manager(store)
        main = sandbox()
        parent = mgr.create("agent:main", main).unwrap()
        outs = []
        for i in range(3):
            wt = sandbox(repository=main.repository)
            child = mgr.fork_isolated(parent.id, f"try-{i}", None, wt).unwrap()
            wt.write_file("answer.txt", f"{i}\n".encode())
            outs.append(mgr.seal(child.id).unwrap())
        assert outs[1].changes() == [{"path": "answer.txt", "kind": "create"}]
        assert mgr.settle(outs[1].id, "selected") == Success(None)
        assert main.read_file("answer.txt") == b"1\n"
        for out in (outs[0], outs[2]):
            assert mgr.settle(out.id, "discarded") == Success(None)
        assert [o.state for o in outs] == [
            OutputState.DISCARDED,
            OutputState.SELECTED,
            OutputState.DISCARDED,
        ]
        second = failure_of(mgr.settle(outs[1].id, "released"))
        assert isinstance(second, OutputConsumedError)

    def test_select_refuses_a_moved_parent_and_apply_merges_disjoint_paths(self, store):
        mgr = manager(store)
        main = sandbox()
        parent = mgr.create("agent:main", main).unwrap()
        wt = sandbox(repository=main.repository)
        child = mgr.fork_isolated(parent.id, "try", None, wt).unwrap()
        wt.write_file("b.txt", b"child\n")
        out = mgr.seal(child.id).unwrap()
        main.write_file("c.txt", b"parent\n")
        before = trace_size(store)
        assert isinstance(failure_of(mgr.settle(out.id, "selected")), ParentMovedError)
        assert trace_size(store) == before
        assert mgr.settle(out.id, "applied") == Success(None)
        assert main.read_file("b.txt") == b"child\n"
        assert main.read_file("c.txt") == b"parent\n"

    def test_an_overlapping_apply_conflicts_and_consumes_nothing(self, store):
        mgr = manager(store)
        main = sandbox()
        parent = mgr.create("agent:main", main).unwrap()
        wt = sandbox(repository=main.repository)
        child = mgr.fork_isolated(parent.id, "try", None, wt).unwrap()
        wt.write_file("a.txt", b"child\n")
        out = mgr.seal(child.id).unwrap()
        main.write_file("a.txt", b"parent\n")
        before = trace_size(store)
        error = failure_of(mgr.settle(out.id, "applied"))
        assert isinstance(error, ApplyConflictError)
        assert error.paths == ("a.txt",)
        assert out.state is OutputState.UNCONSUMED
        assert trace_size(store) == before
        assert main.read_file("a.txt") == b"parent\n"

    @pytest.mark.parametrize("loser", ["selected", "applied"])
    def test_a_settle_whose_output_was_taken_after_its_fold_says_so(
        self, tmp_path, loser
    ):
        # Manager A folds, then manager B settles the output (applied: its
        # effect lands on the parent) before A looks at the parent. A's answer
        # is that the output is consumed, not that the parent moved.
        path = tmp_path / "race.db"
        main, host, out = sealed_try(path)
        with SQLiteTraceStore(path) as a_store, SQLiteTraceStore(path) as b_store:
            a = scope_manager_for(a_store, resolver=lambda sid, *_: host.get(sid))
            b = scope_manager_for(b_store, resolver=lambda sid, *_: host.get(sid))
            a.get("scope:try")
            real_capture = main.capture

            after_b: list[tuple[int, int]] = []

            def capture_after_b_won():
                main.capture = real_capture
                assert b.settle(out.id, "applied") == Success(None)
                after_b.append(trace_size(b_store))
                return real_capture()

            main.capture = capture_after_b_won
            error = failure_of(a.settle(out.id, loser))
            assert main.capture == real_capture  # the race did happen
            assert trace_size(a_store) == after_b[0]  # the loser recorded nothing
        assert isinstance(error, OutputConsumedError), error
        assert main.read_file("x.txt") == b"x\n"

    def test_eight_managers_settling_one_output_give_exactly_one_winner(self, tmp_path):
        # Eight threads, each with its own store object and manager (its own
        # fold of the trace, no shared lock), settle one output with every
        # verb at once: exactly one wins, and the effect lands at most once.
        path = tmp_path / "race.db"
        main, host, out = sealed_try(path)
        verbs = ["selected", "applied", "released", "discarded"] * 2
        results: list[tuple[str, object]] = []
        barrier = threading.Barrier(8)

        def settle(verb: str) -> None:
            with SQLiteTraceStore(path) as store:
                mine = scope_manager_for(store, resolver=lambda sid, *_: host.get(sid))
                mine.get("scope:try")  # fold before the start line
                barrier.wait()
                results.append((verb, mine.settle(out.id, verb)))

        threads = [threading.Thread(target=settle, args=(v,)) for v in verbs]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        winners = [verb for verb, r in results if isinstance(r, Success)]
        assert len(winners) == 1, results
        assert all(
            isinstance(r.failure(), OutputConsumedError | ScopeStateError)
            for _, r in results
            if isinstance(r, Failure)
        ), results
        landed = "x.txt" in main.list_files()
        assert landed == (winners[0] in ("selected", "applied"))
        with SQLiteTraceStore(path) as store:
            state = manager(store).output(out.id).state  # type: ignore[union-attr]
        assert state.value == winners[0]


class TestBadInput:
    def test_unknown_ids_fail_clearly_and_change_nothing(self, store):
        mgr = manager(store)
        mgr.create("p", sandbox()).unwrap()
        before = trace_size(store)
        assert isinstance(failure_of(mgr.fork("scope:nope", "c")), ScopeNotFoundError)
        assert isinstance(
            failure_of(mgr.settle("out:x:1", "selected")), OutputNotFoundError
        )
        assert isinstance(
            failure_of(mgr.restore_checkpoint("cp:p:1")), CheckpointNotFoundError
        )
        assert isinstance(failure_of(mgr.merge("scope:nope")), ScopeNotFoundError)
        assert trace_size(store) == before

    def test_forking_a_terminal_scope_and_merging_a_non_child_are_refused(self, store):
        mgr = manager(store)
        root = mgr.create("p", sandbox()).unwrap()
        a = mgr.fork(root.id, "a").unwrap()
        b = mgr.fork(root.id, "b").unwrap()
        mgr.discard(a.id).unwrap()
        before = trace_size(store)
        assert isinstance(failure_of(mgr.fork(a.id, "a2")), ScopeStateError)
        assert isinstance(failure_of(b.merge(root)), NotAChildError)
        assert trace_size(store) == before

    def test_an_unknown_verb_consumes_nothing(self, store):
        mgr = manager(store)
        main = sandbox()
        root = mgr.create("p", main).unwrap()
        child = mgr.fork(root.id, "c").unwrap()
        out = mgr.seal(child.id).unwrap()
        before = trace_size(store)
        error = failure_of(mgr.settle(out.id, "merge"))
        assert isinstance(error, UnknownSettlementActionError)
        assert out.state is OutputState.UNCONSUMED
        assert trace_size(store) == before

    def test_an_oversized_snapshot_is_refused_before_anything_is_written(self, store):
        store.with_checkpoint_blob_limit(8)
        mgr = manager(store)
        sb = sandbox()
        scope = mgr.create("p", sb).unwrap()
        before = trace_size(store)
        error = failure_of(mgr.create_checkpoint(scope.id, b"x" * 9))
        assert isinstance(error, SnapshotTooLargeError)
        assert "9 bytes, over the store's 8-byte checkpoint blob limit" in str(error)
        assert trace_size(store) == before
        assert store.load_checkpoint_blobs() == ((), ())
