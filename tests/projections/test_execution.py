from __future__ import annotations

import pytest

from goatherd.domain import Cut, RecordDraft
from goatherd.projections import (
    Execution,
    ExecutionStatus,
    PayloadHiddenError,
    ProjectionModeError,
    complete_execution_batch,
    create_execution_batch,
    execution_completed,
    execution_created,
    execution_failed,
    execution_started,
    fail_execution_batch,
    fold_execution_record,
    project_execution,
    project_execution_slice,
)
from tests.projections.slices import make_record, records_of_batches, shape_of, slice_of

EXEC = "exec:00000000000000000000000000000001"


def _created_and_started(inputs=None, caused_by=()):
    batch = create_execution_batch(
        append_intent_id="run:create",
        execution_id=EXEC,
        task_ref="pkg.Task",
        inputs=inputs or {"n": 1},
        caused_by=caused_by,
    )
    return records_of_batches([batch])


class TestBuilders:
    def test_created_is_a_declaration_with_a_null_parent_when_absent(self) -> None:
        draft = execution_created(EXEC, "pkg.Task", {"a": 1})
        assert draft == RecordDraft(
            mode="declaration",
            schema_ref="shepherd2.execution.created.v1",
            kind_label="execution_created",
            payload={
                "execution_id": EXEC,
                "task_ref": "pkg.Task",
                "inputs": {"a": 1},
                "parent_execution_id": None,
            },
        )

    def test_lifecycle_captures_carry_their_payloads(self) -> None:
        assert execution_started(EXEC).payload == {"execution_id": EXEC}
        assert execution_started(EXEC).mode == "capture"
        completed = execution_completed(EXEC, {"x": 2})
        assert (completed.kind_label, dict(completed.payload)) == (
            "execution_completed",
            {"execution_id": EXEC, "outputs": {"x": 2}},
        )
        failed = execution_failed(EXEC, "ValueError: boom")
        assert (failed.schema_ref, dict(failed.payload)) == (
            "shepherd2.execution.failed.v1",
            {"execution_id": EXEC, "error": "ValueError: boom"},
        )

    def test_the_create_batch_is_one_group_without_local_ref_chaining(self) -> None:
        batch = create_execution_batch(
            append_intent_id="run:create",
            execution_id=EXEC,
            task_ref="pkg.Task",
            inputs={},
            parent_execution_id="exec:parent",
            caused_by=("sha256:p",),
        )
        assert batch.append_intent_id == "run:create"
        (group,) = batch.groups
        assert group.trace_owner_id == EXEC
        assert group.causal_parents == ("sha256:p",)
        assert [d.kind_label for d in group.fact_drafts] == [
            "execution_created",
            "execution_started",
        ]
        assert all(d.caused_by_local_refs == () for d in group.fact_drafts)
        assert all(d.caused_by_fact_ids == () for d in group.fact_drafts)
        assert group.fact_drafts[0].payload["parent_execution_id"] == "exec:parent"

    def test_the_terminal_batches_hold_one_draft_on_the_execution_path(self) -> None:
        done = complete_execution_batch(
            append_intent_id="i", execution_id=EXEC, outputs={}, caused_by=("p",)
        )
        fail = fail_execution_batch(
            append_intent_id="j", execution_id=EXEC, error="e", caused_by=("p",)
        )
        for batch in (done, fail):
            (group,) = batch.groups
            assert group.trace_owner_id == EXEC
            assert group.causal_parents == ("p",)
            assert len(group.fact_drafts) == 1


class TestProjectExecution:
    def test_a_create_only_slice_projects_running(self) -> None:
        created, started = _created_and_started()
        execution = project_execution(slice_of([created, started]), EXEC)
        assert execution.status is ExecutionStatus.RUNNING
        assert execution.task_ref == "pkg.Task"
        assert execution.inputs == {"n": 1}
        assert execution.started_fact_id == started.record_id
        assert execution.terminal_fact_id is None

    def test_create_plus_complete_projects_succeeded_with_inputs_and_outputs(
        self,
    ) -> None:
        records = _created_and_started()
        done = make_record(execution_completed(EXEC, {"answer": 42}), EXEC, 2)
        execution = project_execution(slice_of([*records, done]), EXEC)
        assert execution.status is ExecutionStatus.SUCCEEDED
        assert execution.inputs == {"n": 1}
        assert execution.outputs == {"answer": 42}
        assert execution.error is None
        assert execution.terminal_fact_id == done.record_id

    def test_a_failure_clears_outputs_and_keeps_the_error_text(self) -> None:
        records = _created_and_started()
        failed = make_record(execution_failed(EXEC, "RuntimeError: boom"), EXEC, 2)
        execution = project_execution(slice_of([*records, failed]), EXEC)
        assert execution.status is ExecutionStatus.FAILED
        assert execution.error == "RuntimeError: boom"
        assert execution.outputs == {}

    def test_the_last_terminal_record_wins(self) -> None:
        records = _created_and_started()
        failed = make_record(execution_failed(EXEC, "first"), EXEC, 2)
        done = make_record(execution_completed(EXEC, {"ok": True}), EXEC, 3)
        execution = project_execution(slice_of([*records, failed, done]), EXEC)
        assert execution.status is ExecutionStatus.SUCCEEDED
        assert execution.error is None
        assert execution.terminal_fact_id == done.record_id

    def test_a_later_created_record_resets_the_status_to_pending(self) -> None:
        records = _created_and_started()
        again = make_record(execution_created(EXEC, "pkg.Other", {}), EXEC, 2)
        execution = project_execution(slice_of([*records, again]), EXEC)
        assert execution.status is ExecutionStatus.PENDING
        assert execution.task_ref == "pkg.Other"
        assert execution.started_fact_id == records[1].record_id

    def test_records_of_another_execution_and_other_schemas_are_skipped(self) -> None:
        records = _created_and_started()
        foreign = make_record(execution_completed("exec:other", {"x": 1}), EXEC, 2)
        note = make_record(RecordDraft("capture", "app.note.v1", {"m": 1}), EXEC, 3)
        execution = project_execution(slice_of([*records, foreign, note]), EXEC)
        assert execution.status is ExecutionStatus.RUNNING

    def test_a_missing_owner_folds_to_pending_with_a_synthesized_empty_cutoff(
        self,
    ) -> None:
        execution = project_execution(slice_of([]), EXEC)
        assert execution == Execution(EXEC, cutoff=Cut("", EXEC, "", -1))

    def test_the_synthesized_cutoff_ends_at_the_last_record_of_the_path(self) -> None:
        created, started = _created_and_started()
        execution = project_execution(slice_of([created, started]), EXEC)
        assert execution.cutoff == Cut("", EXEC, started.record_id, 1)

    def test_the_slice_frontier_or_a_given_cutoff_is_used(self) -> None:
        frontier = Cut("frontier:f", EXEC, "sha256:t", 7, EXEC, "sha256:c")
        records = _created_and_started()
        from_slice = project_execution(slice_of(records, frontier=frontier), EXEC)
        assert from_slice.cutoff == frontier
        given = Cut("frontier:g", EXEC, "sha256:u", 9)
        assert project_execution(slice_of(records), EXEC, cutoff=given).cutoff == given

    def test_a_non_both_mode_filter_is_rejected(self) -> None:
        records = _created_and_started()
        with pytest.raises(ProjectionModeError, match="requires mode_filter='both'"):
            project_execution(slice_of(records, mode_filter="captures_only"), EXEC)

    def test_a_shape_only_slice_raises_the_spec_s_type_error(self) -> None:
        # kernel-spec sections 8 and 15: TypeError "requires payload-visible facts"
        records = _created_and_started()
        shapes = slice_of(records, visibility="shape_only")
        with pytest.raises(TypeError, match="requires payload-visible facts"):
            project_execution(shapes, EXEC)

    def test_a_shape_on_the_path_raises_a_type_error(self) -> None:
        created, started = _created_and_started()
        with pytest.raises(TypeError, match="requires payload-visible facts"):
            project_execution(slice_of([created, shape_of(started)]), EXEC)
        with pytest.raises(PayloadHiddenError):
            fold_execution_record(Execution(EXEC), shape_of(created))

    def test_the_alias_is_the_same_function(self) -> None:
        assert project_execution_slice is project_execution

    def test_projection_does_not_mutate_the_slice(self) -> None:
        records = _created_and_started()
        slice_ = slice_of(records)
        before = (dict(slice_.facts_by_id), dict(slice_.owner_paths))
        execution = project_execution(slice_, EXEC)
        assert (dict(slice_.facts_by_id), dict(slice_.owner_paths)) == before
        assert execution.inputs is not records[0].payload["inputs"]
