"""run_reversible on SQLite with memory sandboxes: approve, deny, fail, bad input."""

from __future__ import annotations

import pytest

from goatherd.application import (
    ApplyConflictError,
    NoSandboxError,
    RunCallbackError,
    RunSettleError,
    RunStatus,
    SandboxError,
    Supervisor,
    Verdict,
    run_reversible,
)
from goatherd.domain import (
    DestructivePathReviewer,
    OutputState,
    ScopeExistsError,
    ScopeNotFoundError,
    ScopeState,
    ScopeStateError,
    SupervisorDeniedError,
)
from goatherd.infrastructure.store import SQLiteTraceStore
from tests.application.run.support import (
    DECISION_SCHEMA,
    DISCARDED_SCHEMA,
    MERGED_SCHEMA,
    PROPOSED_SCHEMA,
    RUN_SCHEMA,
    deny_paths_under,
    failure_of,
    fresh_sibling,
    is_live,
    live_sandbox,
    manager,
    payloads,
    run_records,
    schemas_on,
    trace_size,
    value_of,
    workspace,
)

PEM = DestructivePathReviewer(("*.pem",))


@pytest.fixture
def store(tmp_path):
    with SQLiteTraceStore(tmp_path / "trace.db") as s:
        yield s


def write(path: str, data: bytes):
    def handler(scope):
        scope.sandbox.write_file(path, data)
        return f"wrote {path}"

    return handler


class TestSharedSandbox:
    def test_an_approved_run_merges_and_the_work_stays_in_the_parent(self, store):
        mgr = manager(store)
        sb = live_sandbox()
        parent = mgr.create("agent:main", sb).unwrap()
        outcome = value_of(
            run_reversible(
                mgr, parent.id, "agent:sub", write("b.txt", b"b\n"), reviewer=PEM
            )
        )
        assert outcome.status is RunStatus.MERGED
        assert outcome.value == "wrote b.txt"
        assert [(c.path, c.kind) for c in outcome.changes] == [("b.txt", "create")]
        assert outcome.verdicts == (Verdict("reviewer:DestructivePathReviewer", True),)
        assert workspace(sb) == {"a.txt": b"1\n", "b.txt": b"b\n"}
        assert mgr.get("scope:agent:sub").state is ScopeState.MERGED  # type: ignore[union-attr]
        # the checkpoint stays valid: the caller can still rewind the merged work
        assert mgr.restore_checkpoint(outcome.checkpoint_id).unwrap() == b""
        assert workspace(sb) == {"a.txt": b"1\n"}

    def test_the_decision_and_the_run_record_carry_the_authority_evidence(self, store):
        mgr = manager(store)
        parent = mgr.create("agent:main", live_sandbox()).unwrap()
        outcome = value_of(
            run_reversible(
                mgr, parent.id, "agent:sub", write("b.txt", b"b\n"), reviewer=PEM
            )
        )
        [decision] = payloads(store, DECISION_SCHEMA)
        assert decision["approved"] is True
        assert decision["action"] == "merged"
        assert decision["child_scope"] == "scope:agent:sub"
        [record] = run_records(store)
        assert record == {
            "parent_scope": "scope:agent:main",
            "child_scope": "scope:agent:sub",
            "isolated": False,
            "status": "merged",
            "authority": [
                {
                    "authority": "reviewer:DestructivePathReviewer",
                    "approved": True,
                    "reason": None,
                }
            ],
            "proposal_record_id": outcome.proposal_record_id,
            "decision_record_id": outcome.decision_record_id,
            "change_count": 1,
            "changes": [{"path": "b.txt", "kind": "create"}],
            "output_id": None,
            "output_action": None,
            "checkpoint_id": outcome.checkpoint_id,
            "reason": None,
        }
        # the run record is the last record on the child's path
        child_path = schemas_on(store, "agent:sub")
        assert child_path[-1] == RUN_SCHEMA
        assert child_path.index(PROPOSED_SCHEMA) < len(child_path) - 1
        assert outcome.record_id == store.read_path("agent:sub")[-1].record.record_id
        [decision_entry] = [
            e.record
            for e in store.read_path("agent:main")
            if e.record.envelope.schema_ref == DECISION_SCHEMA
        ]
        assert decision_entry.record_id == outcome.decision_record_id
        assert decision_entry.envelope.caused_by_record_ids == (
            outcome.proposal_record_id,
        )

    def test_a_denial_returns_supervisor_denied_and_restores_the_parent(self, store):
        mgr = manager(store)
        sb = live_sandbox()
        parent = mgr.create("agent:main", sb).unwrap()
        before = sb.capture()

        def handler(scope):
            scope.sandbox.write_file("keys/ca.pem", b"secret")
            scope.sandbox.write_file("a.txt", b"edited\n")

        error = failure_of(
            run_reversible(mgr, parent.id, "agent:sub", handler, reviewer=PEM)
        )
        assert isinstance(error, SupervisorDeniedError)
        assert error.reason == (
            'change to "keys/ca.pem" matches destructive-path pattern "*.pem"'
        )
        assert sorted(c.path for c in error.changes) == ["a.txt", "keys/ca.pem"]
        # the parent's workspace is exactly as it started, and nothing merged
        assert workspace(sb) == {"a.txt": b"1\n"}
        assert sb.capture().digest() == before.digest()
        assert parent.state is ScopeState.ACTIVE
        assert mgr.get("scope:agent:sub").state is ScopeState.DISCARDED  # type: ignore[union-attr]
        assert MERGED_SCHEMA not in schemas_on(store, "agent:main")
        [decision] = payloads(store, DECISION_SCHEMA)
        assert decision["approved"] is False
        assert decision["action"] == "discarded"
        assert decision["reason"] == error.reason
        [record] = run_records(store)
        assert record["status"] == "denied"
        assert record["reason"] == error.reason
        assert record["authority"] == [
            {
                "authority": "reviewer:DestructivePathReviewer",
                "approved": False,
                "reason": error.reason,
            }
        ]

    def test_the_supervisor_gate_can_deny_a_merge(self, store):
        mgr = manager(store)
        sb = live_sandbox()
        parent = mgr.create("agent:main", sb).unwrap()
        supervisor = Supervisor(mgr, None, recorder=store)
        supervisor.add_rule(deny_paths_under("secrets/"))
        error = failure_of(
            run_reversible(
                mgr,
                parent.id,
                "agent:sub",
                write("secrets/token", b"t"),
                supervisor=supervisor,
            )
        )
        assert isinstance(error, SupervisorDeniedError)
        assert error.reason == "secrets/ is off limits"
        assert workspace(sb) == {"a.txt": b"1\n"}
        [record] = run_records(store)
        assert record["authority"] == [
            {
                "authority": "supervisor",
                "approved": False,
                "reason": "secrets/ is off limits",
            }
        ]
        # an allowed change passes the same gate
        outcome = value_of(
            run_reversible(
                mgr,
                parent.id,
                "agent:sub2",
                write("docs.txt", b"d"),
                supervisor=supervisor,
            )
        )
        assert outcome.status is RunStatus.MERGED
        assert outcome.verdicts == (Verdict("supervisor", True),)

    def test_the_first_denial_stops_the_review(self, store):
        mgr = manager(store)
        parent = mgr.create("agent:main", live_sandbox()).unwrap()
        supervisor = Supervisor(mgr, None)
        supervisor.add_rule(deny_paths_under("keys/"))
        error = failure_of(
            run_reversible(
                mgr,
                parent.id,
                "agent:sub",
                write("keys/ca.pem", b"k"),
                reviewer=PEM,
                supervisor=supervisor,
            )
        )
        assert isinstance(error, SupervisorDeniedError)
        [record] = run_records(store)
        authorities = record["authority"]
        assert isinstance(authorities, list)
        assert [a["authority"] for a in authorities] == [
            "reviewer:DestructivePathReviewer"
        ]

    def test_a_handler_exception_discards_the_child_and_rolls_back(self, store):
        mgr = manager(store)
        sb = live_sandbox()
        parent = mgr.create("agent:main", sb).unwrap()

        def handler(scope):
            scope.sandbox.write_file("half.txt", b"half")
            raise ValueError("the model gave up")

        error = failure_of(run_reversible(mgr, parent.id, "agent:sub", handler))
        assert isinstance(error, RunCallbackError)
        assert error.step == "handler"
        assert isinstance(error.cause, ValueError)
        assert "the model gave up" in str(error)
        assert workspace(sb) == {"a.txt": b"1\n"}
        assert mgr.get("scope:agent:sub").state is ScopeState.DISCARDED  # type: ignore[union-attr]
        # no review happened, and the failure is recorded honestly
        assert payloads(store, PROPOSED_SCHEMA) == []
        assert payloads(store, DECISION_SCHEMA) == []
        [record] = run_records(store)
        assert record["status"] == "failed"
        assert "ValueError: the model gave up" in str(record["reason"])
        assert record["proposal_record_id"] is None

    def test_a_reviewer_that_raises_fails_the_run_and_approves_nothing(self, store):
        mgr = manager(store)
        sb = live_sandbox()
        parent = mgr.create("agent:main", sb).unwrap()

        def broken(proposal):
            raise RuntimeError("reviewer crashed")

        error = failure_of(
            run_reversible(
                mgr, parent.id, "agent:sub", write("b.txt", b"b"), reviewer=broken
            )
        )
        assert isinstance(error, RunCallbackError)
        assert error.step == "reviewer"
        assert workspace(sb) == {"a.txt": b"1\n"}
        assert payloads(store, DECISION_SCHEMA) == []
        [record] = run_records(store)
        assert record["status"] == "failed"
        assert record["proposal_record_id"] is not None

    def test_a_reviewer_denying_with_an_empty_reason_still_denies(self, store):
        mgr = manager(store)
        sb = live_sandbox()
        parent = mgr.create("agent:main", sb).unwrap()
        error = failure_of(
            run_reversible(
                mgr,
                parent.id,
                "agent:sub",
                write("b.txt", b"b"),
                reviewer=lambda proposal: "",
            )
        )
        assert isinstance(error, SupervisorDeniedError)
        assert "denied without a reason" in error.reason
        assert workspace(sb) == {"a.txt": b"1\n"}

    def test_a_keyboard_interrupt_still_ends_the_child_then_propagates(self, store):
        mgr = manager(store)
        sb = live_sandbox()
        parent = mgr.create("agent:main", sb).unwrap()

        def handler(scope):
            scope.sandbox.write_file("b.txt", b"b")
            raise KeyboardInterrupt

        with pytest.raises(KeyboardInterrupt):
            run_reversible(mgr, parent.id, "agent:sub", handler)
        assert workspace(sb) == {"a.txt": b"1\n"}
        assert mgr.get("scope:agent:sub").state is ScopeState.DISCARDED  # type: ignore[union-attr]
        assert run_records(store)[0]["status"] == "failed"


class TestIsolatedSandbox:
    def test_an_approved_run_settles_select_into_an_unmoved_parent(self, store):
        mgr = manager(store)
        main = live_sandbox()
        parent = mgr.create("agent:main", main).unwrap()
        child_sb = fresh_sibling(main.repository)
        outcome = value_of(
            run_reversible(
                mgr,
                parent.id,
                "agent:try",
                write("b.txt", b"b\n"),
                sandbox=child_sb,
                reviewer=PEM,
            )
        )
        assert outcome.status is RunStatus.SELECTED
        assert outcome.output_action == "selected"
        assert outcome.checkpoint_id == ""
        assert workspace(main) == {"a.txt": b"1\n", "b.txt": b"b\n"}
        assert mgr.get("scope:agent:try").state is ScopeState.MERGED  # type: ignore[union-attr]
        assert not is_live(child_sb)  # the owned sandbox went with the merge
        [decision] = payloads(store, DECISION_SCHEMA)
        assert (decision["approved"], decision["action"]) == (True, "selected")
        [record] = run_records(store)
        assert record["isolated"] is True
        assert record["output_id"] == outcome.output_id
        assert record["output_action"] == "selected"

    def test_the_child_starts_from_the_parents_uncommitted_tree(self, store):
        mgr = manager(store)
        main = live_sandbox()
        main.write_file("draft.txt", b"uncommitted\n")
        parent = mgr.create("agent:main", main).unwrap()
        seen = {}

        def handler(scope):
            seen["draft"] = scope.sandbox.read_file("draft.txt")
            scope.sandbox.write_file("b.txt", b"b\n")

        outcome = value_of(
            run_reversible(
                mgr,
                parent.id,
                "agent:try",
                handler,
                sandbox=fresh_sibling(main.repository),
            )
        )
        assert seen == {"draft": b"uncommitted\n"}
        assert [c.path for c in outcome.changes] == ["b.txt"]
        assert workspace(main) == {
            "a.txt": b"1\n",
            "draft.txt": b"uncommitted\n",
            "b.txt": b"b\n",
        }

    def test_a_moved_parent_falls_back_to_apply(self, store):
        mgr = manager(store)
        main = live_sandbox()
        parent = mgr.create("agent:main", main).unwrap()

        def handler(scope):
            scope.sandbox.write_file("b.txt", b"child\n")
            main.write_file("c.txt", b"parent moved\n")  # concurrent parent work

        outcome = value_of(
            run_reversible(
                mgr,
                parent.id,
                "agent:try",
                handler,
                sandbox=fresh_sibling(main.repository),
            )
        )
        assert outcome.status is RunStatus.APPLIED
        assert workspace(main) == {
            "a.txt": b"1\n",
            "b.txt": b"child\n",
            "c.txt": b"parent moved\n",
        }
        [decision] = payloads(store, DECISION_SCHEMA)
        assert decision["action"] == "applied"

    def test_a_conflict_leaves_the_output_unconsumed_and_the_parent_as_it_is(
        self, store
    ):
        mgr = manager(store)
        main = live_sandbox()
        parent = mgr.create("agent:main", main).unwrap()

        def handler(scope):
            scope.sandbox.write_file("a.txt", b"child\n")
            main.write_file("a.txt", b"parent\n")

        error = failure_of(
            run_reversible(
                mgr,
                parent.id,
                "agent:try",
                handler,
                sandbox=fresh_sibling(main.repository),
            )
        )
        assert isinstance(error, RunSettleError)
        assert isinstance(error.cause, ApplyConflictError)
        assert error.cause.paths == ("a.txt",)
        assert workspace(main) == {"a.txt": b"parent\n"}
        output = mgr.output(error.output_id)
        assert output is not None
        assert output.state is OutputState.UNCONSUMED
        assert mgr.get("scope:agent:try").state is ScopeState.ACTIVE  # type: ignore[union-attr]
        # no verdict action was taken yet, so no decision is recorded
        assert payloads(store, DECISION_SCHEMA) == []
        [record] = run_records(store)
        assert record["status"] == "sealed"
        assert record["output_action"] is None
        # the caller can still end it: release keeps the sealed state addressable
        assert mgr.settle(error.output_id, "discarded").unwrap() is None

    def test_a_denial_destroys_the_sandbox_and_never_touches_the_parent(self, store):
        mgr = manager(store)
        main = live_sandbox()
        parent = mgr.create("agent:main", main).unwrap()
        before = main.capture()
        child_sb = fresh_sibling(main.repository)
        error = failure_of(
            run_reversible(
                mgr,
                parent.id,
                "agent:try",
                write("ca.pem", b"k"),
                sandbox=child_sb,
                reviewer=PEM,
            )
        )
        assert isinstance(error, SupervisorDeniedError)
        assert not is_live(child_sb)
        assert main.capture().digest() == before.digest()
        assert DISCARDED_SCHEMA in schemas_on(store, "agent:main")
        assert run_records(store)[0]["status"] == "denied"

    def test_a_handler_exception_destroys_the_sandbox(self, store):
        mgr = manager(store)
        main = live_sandbox()
        parent = mgr.create("agent:main", main).unwrap()
        child_sb = fresh_sibling(main.repository)

        def handler(scope):
            scope.sandbox.write_file("b.txt", b"b")
            raise OSError("disk full")

        error = failure_of(
            run_reversible(mgr, parent.id, "agent:try", handler, sandbox=child_sb)
        )
        assert isinstance(error, RunCallbackError)
        assert not is_live(child_sb)
        assert workspace(main) == {"a.txt": b"1\n"}
        assert mgr.get("scope:agent:try").state is ScopeState.DISCARDED  # type: ignore[union-attr]


class TestBadInput:
    def test_an_unknown_parent_fails_before_anything_is_created(self, store):
        mgr = manager(store)
        main = live_sandbox()
        mgr.create("agent:main", main).unwrap()
        child_sb = fresh_sibling(main.repository)
        before = trace_size(store)
        error = failure_of(
            run_reversible(mgr, "scope:nope", "c", write("b", b"b"), sandbox=child_sb)
        )
        assert isinstance(error, ScopeNotFoundError)
        assert trace_size(store) == before
        assert not is_live(child_sb)

    def test_a_parent_without_a_sandbox_is_refused_before_the_fork(self, store):
        mgr = manager(store)
        parent = mgr.create("agent:main").unwrap()
        before = trace_size(store)
        error = failure_of(run_reversible(mgr, parent.id, "c", write("b", b"b")))
        assert isinstance(error, NoSandboxError)
        assert "needs a workspace" in str(error)
        assert trace_size(store) == before
        assert parent.children == []

    def test_a_terminal_parent_is_refused(self, store):
        mgr = manager(store)
        root = mgr.create("agent:main", live_sandbox()).unwrap()
        gone = mgr.fork(root.id, "gone").unwrap()
        mgr.discard(gone.id).unwrap()
        before = trace_size(store)
        error = failure_of(run_reversible(mgr, gone.id, "c", write("b", b"b")))
        assert isinstance(error, ScopeStateError)
        assert trace_size(store) == before

    def test_an_existing_child_owner_fails_and_the_new_sandbox_is_destroyed(
        self, store
    ):
        mgr = manager(store)
        main = live_sandbox()
        parent = mgr.create("agent:main", main).unwrap()
        mgr.fork(parent.id, "taken").unwrap()
        before = trace_size(store)
        child_sb = fresh_sibling(main.repository)
        error = failure_of(
            run_reversible(mgr, parent.id, "taken", write("b", b"b"), sandbox=child_sb)
        )
        assert isinstance(error, ScopeExistsError)
        assert trace_size(store) == before
        assert not is_live(child_sb)
        assert workspace(main) == {"a.txt": b"1\n"}

    def test_a_sandbox_the_caller_already_created_is_refused_and_left_alone(
        self, store
    ):
        mgr = manager(store)
        main = live_sandbox()
        parent = mgr.create("agent:main", main).unwrap()
        mine = fresh_sibling(main.repository)
        from goatherd.application import SandboxSpec

        mine.create(SandboxSpec())
        mine.write_file("mine.txt", b"keep")
        before = trace_size(store)
        error = failure_of(
            run_reversible(mgr, parent.id, "c", write("b", b"b"), sandbox=mine)
        )
        assert isinstance(error, SandboxError)
        assert "already created" in str(error)
        assert trace_size(store) == before
        assert mine.read_file("mine.txt") == b"keep"
        assert parent.children == []
