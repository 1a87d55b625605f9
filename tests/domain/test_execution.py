"""The execution aggregate: given recorded events, a decision returns events or refuses.

Pure: events are placed on a path by hand (record ids as the runtime's append
gives them), folded with ``with_fact``, and the decision methods are asked.
"""

from __future__ import annotations

import pytest

from goatherd.domain import (
    ExecutionAggregate,
    ExecutionCompleted,
    ExecutionCreated,
    ExecutionExistsError,
    ExecutionFailed,
    ExecutionNotFoundError,
    ExecutionRelation,
    ExecutionRelationCreated,
    ExecutionStarted,
    ExecutionStateError,
    ExecutionStatus,
    ExecutionTerminalError,
    FactPublished,
    InconsistentTraceError,
    OpaqueRecord,
    PlacedEvent,
    RecordMode,
    RelationExistsError,
    RelationKind,
    RelationNotActiveError,
    RuntimeEvent,
    fold_execution,
)

EXEC = "exec:e"
TAIL = ("sha256:tail",)


def placed(*events: RuntimeEvent, owner: str = EXEC) -> list[PlacedEvent]:
    return [PlacedEvent(e, e.record_id(), owner, n) for n, e in enumerate(events)]


def given(*events: RuntimeEvent) -> ExecutionAggregate:
    return fold_execution(EXEC, placed(*events))


CREATED = ExecutionCreated(
    execution_id=EXEC, task_ref="pkg.T", inputs={"n": 1}, parent_execution_id=None
)
STARTED = ExecutionStarted(execution_id=EXEC)
DONE = ExecutionCompleted(execution_id=EXEC, outputs={"ok": True}, caused_by=TAIL)
FAILED = ExecutionFailed(execution_id=EXEC, error="ValueError: no", caused_by=TAIL)


def running() -> ExecutionAggregate:
    return given(CREATED, STARTED)


def spawned(relation_id: str = "rel:1", child: str = "exec:c") -> RuntimeEvent:
    return ExecutionRelationCreated(
        caused_by=TAIL,
        relation_id=relation_id,
        relation_kind=RelationKind.SPAWNED,
        parent_execution_id=EXEC,
        child_execution_id=child,
        child_frontier_id="frontier:c",
    )


class TestCreateAndStart:
    def test_a_bare_execution_is_created_with_its_task_inputs_and_parent(self):
        event = ExecutionAggregate(EXEC).create("pkg.T", {"n": 1}, "exec:p", TAIL)
        assert event == ExecutionCreated(
            caused_by=TAIL,
            execution_id=EXEC,
            task_ref="pkg.T",
            inputs={"n": 1},
            parent_execution_id="exec:p",
        )
        assert event.payload()["parent_execution_id"] == "exec:p"

    def test_the_same_create_again_is_idempotent_another_is_refused(self):
        state = given(CREATED)
        assert state.create("pkg.T", {"n": 1}, None) == CREATED
        with pytest.raises(ExecutionExistsError) as caught:
            state.create("pkg.T", {"n": 2}, None)
        assert caught.value.created_record == CREATED.record_id()
        assert str(caught.value) == (
            f"execution {EXEC} exists: created by record {CREATED.record_id()}"
        )

    def test_start_needs_a_created_record(self):
        with pytest.raises(ExecutionNotFoundError, match=f"execution {EXEC} not found"):
            ExecutionAggregate(EXEC).start()

    def test_created_then_started_is_decided_in_one_batch(self):
        state = ExecutionAggregate(EXEC)
        created = state.create("pkg.T", {}, None, TAIL)
        started = state.after(created).start(TAIL)
        assert started == ExecutionStarted(caused_by=TAIL, execution_id=EXEC)
        assert state.after(created).after(started).status is ExecutionStatus.RUNNING

    def test_a_second_start_is_refused_unless_it_is_the_same_record(self):
        state = running()
        assert state.start() == STARTED
        with pytest.raises(
            ExecutionStateError, match=r"cannot start .*: it is running"
        ):
            state.start(TAIL)


class TestTerminal:
    def test_a_running_execution_completes_or_fails(self):
        assert running().complete({"ok": True}, TAIL) == DONE
        assert running().fail("ValueError: no", TAIL) == FAILED

    def test_a_pending_execution_cannot_end(self):
        with pytest.raises(ExecutionStateError, match="it is pending"):
            given(CREATED).complete({})

    @pytest.mark.parametrize("ended", [DONE, FAILED], ids=["succeeded", "failed"])
    def test_a_second_terminal_is_refused_naming_the_first(self, ended):
        state = given(CREATED, STARTED, ended)
        for decide in (
            lambda: state.complete({"other": 1}, TAIL),
            lambda: state.fail("boom", TAIL),
        ):
            with pytest.raises(ExecutionTerminalError) as caught:
                decide()
            assert caught.value.terminal_record == ended.record_id()
            assert caught.value.status is state.status
            assert ended.record_id() in str(caught.value)

    def test_the_recorded_terminal_decided_again_is_idempotent(self):
        # A retry after a crash between the terminal append and the frontier.
        assert given(CREATED, STARTED, DONE).complete({"ok": True}, TAIL) == DONE
        assert given(CREATED, STARTED, FAILED).fail("ValueError: no", TAIL) == FAILED

    def test_the_same_outputs_under_other_parents_are_another_record(self):
        with pytest.raises(ExecutionTerminalError):
            given(CREATED, STARTED, DONE).complete({"ok": True}, ("sha256:other",))


class TestPublishAndRelations:
    def test_a_running_execution_publishes(self):
        event = running().publish("note", {"m": 1}, TAIL)
        assert event == FactPublished(caused_by=TAIL, kind="note", data={"m": 1})

    @pytest.mark.parametrize(
        ("events", "error"),
        [
            ((), ExecutionNotFoundError),
            ((CREATED,), ExecutionStateError),
            ((CREATED, STARTED, DONE), ExecutionTerminalError),
        ],
        ids=["unknown", "pending", "ended"],
    )
    def test_nothing_is_published_or_related_outside_the_running_state(
        self, events, error
    ):
        state = given(*events)
        with pytest.raises(error):
            state.publish("late", {})
        with pytest.raises(error):
            state.spawn("rel:1", "exec:c", "frontier:c")
        with pytest.raises(error):
            state.adopt("rel:1", "exec:c", "frontier:c")

    def test_a_relation_id_is_used_once(self):
        state = running().after(spawned())
        message = "relation rel:1 of execution exec:e exists"
        with pytest.raises(RelationExistsError, match=message):
            state.adopt("rel:1", "exec:d", "frontier:d", TAIL)
        assert state.spawn("rel:1", "exec:c", "frontier:c", TAIL) == spawned()

    def test_a_recorded_relation_replays_even_after_the_end(self):
        state = running().after(spawned()).after(DONE)
        assert state.spawn("rel:1", "exec:c", "frontier:c", TAIL) == spawned()

    def test_only_an_active_relation_is_abandoned(self):
        state = running()
        with pytest.raises(RelationNotActiveError, match="rel:1 is not an active"):
            state.abandon("rel:1", "exec:c", "frontier:c")
        state = state.after(spawned())
        abandoned = state.abandon("rel:1", "exec:c", "frontier:c", TAIL)
        assert abandoned.relation_kind is RelationKind.ABANDONED
        after = state.after(abandoned)
        assert after.active_relations() == ()
        with pytest.raises(RelationNotActiveError):
            after.abandon("rel:1", "exec:c", "frontier:c", ("sha256:x",))

    def test_relations_keep_path_order_and_the_latest_kind_decides(self):
        state = running().after(spawned("rel:1")).after(spawned("rel:2", "exec:d"))
        assert [r.relation_id for r in state.active_relations()] == ["rel:1", "rel:2"]
        assert state.relations[0] == ExecutionRelation(
            "rel:1",
            RelationKind.SPAWNED,
            EXEC,
            "exec:c",
            "frontier:c",
            spawned().record_id(),
        )


class TestEvolve:
    def test_the_fold_tracks_status_values_records_and_head(self):
        note = FactPublished(kind="k", data={})
        state = given(CREATED, STARTED, note, note, FAILED)
        assert state.status is ExecutionStatus.FAILED
        assert (state.task_ref, dict(state.inputs)) == ("pkg.T", {"n": 1})
        assert (state.error, dict(state.outputs)) == ("ValueError: no", {})
        assert state.started_record == STARTED.record_id()
        assert state.terminal_record == FAILED.record_id()
        assert state.published_count == 2
        assert state.head == 5
        assert state.terminal

    def test_records_of_other_executions_and_schemas_only_move_the_head(self):
        foreign = ExecutionCompleted(execution_id="exec:other", outputs={})
        opaque = OpaqueRecord(
            record_schema="app.note.v1",
            record_mode=RecordMode.CAPTURE,
            record_kind_label="note",
            record_payload={"m": 1},
        )
        other_parent = ExecutionRelationCreated(
            relation_id="rel:x",
            relation_kind=RelationKind.SPAWNED,
            parent_execution_id="exec:other",
            child_execution_id="exec:c",
            child_frontier_id=None,
        )
        state = given(CREATED, STARTED, foreign, opaque, other_parent)
        assert state == running().after(foreign).after(opaque).after(other_parent)
        assert state.status is ExecutionStatus.RUNNING
        assert state.relations == ()
        assert state.head == 5

    def test_a_record_without_an_execution_id_belongs_to_its_path(self):
        state = given(CREATED, ExecutionStarted(), ExecutionCompleted(outputs={"a": 1}))
        assert state.status is ExecutionStatus.SUCCEEDED
        assert dict(state.outputs) == {"a": 1}

    @pytest.mark.parametrize(
        ("events", "reason"),
        [
            ((CREATED, STARTED, DONE, FAILED), "a second terminal record"),
            (
                (
                    CREATED,
                    ExecutionCreated(task_ref="x", inputs={}, parent_execution_id=None),
                ),
                "a second created record",
            ),
            (
                (CREATED, STARTED, DONE, ExecutionStarted(caused_by=TAIL)),
                "after the terminal",
            ),
            ((CREATED, STARTED, ExecutionStarted(caused_by=TAIL)), "a second started"),
        ],
        ids=["two-terminals", "two-creates", "start-after-end", "two-starts"],
    )
    def test_a_contradicting_path_is_inconsistent_and_refuses_decisions(
        self, events, reason
    ):
        state = given(*events)
        assert reason in state.inconsistent
        with pytest.raises(InconsistentTraceError, match=reason):
            state.publish("k", {})

    def test_the_kernel_values_of_a_contradiction_are_kept(self):
        # The last terminal wins and a later created resets to pending, as the
        # kernel projection folds them; the aggregate only adds the flag.
        state = given(CREATED, STARTED, DONE, FAILED)
        assert state.status is ExecutionStatus.FAILED
        assert state.terminal_record == FAILED.record_id()
        again = ExecutionCreated(task_ref="x", inputs={}, parent_execution_id=None)
        assert given(CREATED, STARTED, again).status is ExecutionStatus.PENDING
