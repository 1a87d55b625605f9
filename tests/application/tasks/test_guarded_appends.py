"""Every record on a run's path is decided against the trace and appended guarded.

Two store objects on one SQLite file stand for two processes; a store that
lets the rival write just before one named append puts the rival's record
exactly inside the window between a decision and its append (the real
several-process race is ``test_cross_process.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

import pytest
from returns.result import Success

from goatherd.application import (
    ExecutionPath,
    Registry,
    TaskControl,
    execution_batch,
    start_task,
    start_task_sync,
)
from goatherd.domain import (
    MAX_OWNER_ORDINAL,
    TRUSTED_APPEND_CONTEXT,
    TRUSTED_READ_CONTEXT,
    AppendBatch,
    AppendContext,
    AppendReceipt,
    Cut,
    CutSpec,
    ExecutionAggregate,
    ExecutionCompleted,
    ExecutionExistsError,
    ExecutionFailed,
    ExecutionStarted,
    ExecutionStatus,
    ExecutionTerminalError,
    FactPublished,
    OperationContext,
    RelationExistsError,
    RelationNotActiveError,
    RuntimeEvent,
    decode_fact,
    execution_id_for,
    fold_execution,
)
from goatherd.infrastructure.store import SQLiteTraceStore, open_trace_store
from goatherd.projections import create_execution_batch, project_execution

RUN = "run:guarded"
EXEC = execution_id_for(f"{RUN}:create")


class Interloper(SQLiteTraceStore):
    """A real store that lets another writer in right before a named append."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.before: dict[str, Callable[[], None]] = {}

    def append(
        self,
        context: AppendContext | OperationContext,
        batch: AppendBatch,
        *,
        expected_heads: Mapping[str, int] | None = None,
    ) -> AppendReceipt:
        rival = self.before.pop(batch.append_intent_id, None)
        if rival is not None:
            rival()
        return super().append(context, batch, expected_heads=expected_heads)


def registry_of(body: Callable[..., object]) -> Registry:
    registry = Registry()
    registry.register("T", body)
    return registry


def path_events(store: SQLiteTraceStore, owner: str = EXEC) -> list[object]:
    slice_ = store.read_owner_prefix(TRUSTED_READ_CONTEXT, owner, MAX_OWNER_ORDINAL)
    return [
        decode_fact(slice_.facts_by_id[rid]).event  # type: ignore[arg-type]
        for rid in slice_.owner_paths.get(owner, ())
    ]


def terminals(store: SQLiteTraceStore) -> list[object]:
    return [
        e
        for e in path_events(store)
        if isinstance(e, ExecutionCompleted | ExecutionFailed)
    ]


def rival_run(path: Path, body: Callable[..., object]) -> Callable[[], None]:
    def run() -> None:
        with SQLiteTraceStore(path) as other:
            assert isinstance(
                start_task_sync(other, registry_of(body), "T", RUN), Success
            )

    return run


class TestTheEndIsDecidedOnce:
    def test_an_end_under_the_same_intent_with_other_content_loses_as_ended(
        self, tmp_path: Path
    ) -> None:
        db = tmp_path / "t.sqlite"
        with Interloper(db) as store:
            # The rival completes the same run first, with other outputs.
            store.before[f"{RUN}:complete"] = rival_run(db, lambda: {"who": "rival"})
            result = start_task_sync(
                store, registry_of(lambda: {"who": "us"}), "T", RUN
            )
            error = result.failure()
            assert isinstance(error, ExecutionTerminalError)
            assert error.status is ExecutionStatus.SUCCEEDED
            (ended,) = terminals(store)
            assert isinstance(ended, ExecutionCompleted)
            assert dict(ended.outputs) == {"who": "rival"}
        with SQLiteTraceStore(db) as reopened:
            run = start_task_sync(reopened, Registry(), "T", RUN).unwrap()
            assert run.wait().outputs == {"who": "rival"}

    def test_a_failure_recorded_first_makes_a_later_completion_lose(
        self, tmp_path: Path
    ) -> None:
        def boom() -> None:
            raise RuntimeError("rival broke")

        db = tmp_path / "t.sqlite"
        with Interloper(db) as store:
            # Another intent (R:fail): the store refuses our append by the head.
            store.before[f"{RUN}:complete"] = rival_run(db, boom)
            result = start_task_sync(store, registry_of(lambda: {"ok": 1}), "T", RUN)
            error = result.failure()
            assert isinstance(error, ExecutionTerminalError)
            assert error.status is ExecutionStatus.FAILED
            (ended,) = terminals(store)
            assert isinstance(ended, ExecutionFailed)
            assert ended.error == "RuntimeError: rival broke"
            assert error.terminal_record == ended.record_id()

    def test_the_same_end_recorded_by_two_processes_is_one_record(
        self, tmp_path: Path
    ) -> None:
        db = tmp_path / "t.sqlite"
        with Interloper(db) as store:
            store.before[f"{RUN}:complete"] = rival_run(db, lambda: {"same": True})
            run = start_task_sync(store, registry_of(lambda: {"same": True}), "T", RUN)
            assert run.unwrap().wait().outputs == {"same": True}
            assert len(terminals(store)) == 1

    def test_nothing_is_published_after_another_process_ended_the_run(
        self, tmp_path: Path
    ) -> None:
        db = tmp_path / "t.sqlite"
        seen: list[BaseException] = []

        def body(control: TaskControl) -> dict[str, object]:
            control.publish("step", {"n": 1})
            try:
                control.publish("step", {"n": 2})
            except ExecutionTerminalError as error:
                seen.append(error)
                raise
            return {}

        def rival_body(control: TaskControl) -> dict[str, object]:
            control.publish("step", {"n": 1})  # the same first fact: it replays
            return {"by": "rival"}

        with Interloper(db) as store:
            store.before[f"{RUN}:publish:2"] = rival_run(db, rival_body)
            result = start_task_sync(store, registry_of(body), "T", RUN)
            assert isinstance(result.failure(), ExecutionTerminalError)
            assert len(seen) == 1
            events = path_events(store)
        kinds = [type(e).__name__ for e in events]
        end = kinds.index("ExecutionCompleted")
        assert kinds.count("FactPublished") == 1
        # After the terminal record: only the run's frontier (a kernel record).
        assert kinds[end + 1 :] == ["OpaqueRecord"]

    def test_an_async_run_that_loses_reports_it_from_wait(self, tmp_path: Path) -> None:
        db = tmp_path / "t.sqlite"
        with Interloper(db) as store:
            store.before[f"{RUN}:complete"] = rival_run(db, lambda: {"who": "rival"})
            run = start_task(store, registry_of(lambda: {"who": "us"}), "T", RUN)
            with pytest.raises(Exception, match="task run failed") as caught:
                run.unwrap().wait(timeout=30)
            assert isinstance(caught.value.__cause__, ExecutionTerminalError)


class TestOpening:
    def test_an_execution_created_under_another_intent_is_not_created_again(
        self, tmp_path: Path
    ) -> None:
        with SQLiteTraceStore(tmp_path / "t.sqlite") as store:
            forged = create_execution_batch(
                append_intent_id="someone-else",
                execution_id=EXEC,
                task_ref="T",
                inputs={"other": True},
            )
            store.append(TRUSTED_APPEND_CONTEXT, forged)
            before = path_events(store)
            result = start_task_sync(store, registry_of(lambda: None), "T", RUN)
            assert isinstance(result.failure(), ExecutionExistsError)
            assert path_events(store) == before


class DiesAtFrontier(SQLiteTraceStore):
    """A real store whose process dies after the terminal record, before the cut."""

    def publish_cut(
        self, context: AppendContext | OperationContext, spec: CutSpec
    ) -> Cut:
        raise ProcessDied


class ProcessDied(BaseException):
    """Stands for the process dying: nothing after it runs."""


class TestCrashAfterTheEnd:
    def test_a_restart_publishes_the_frontier_without_running_the_body_again(
        self, tmp_path: Path
    ) -> None:
        db = tmp_path / "t.sqlite"
        calls: list[int] = []

        def body() -> dict[str, object]:
            calls.append(1)
            return {"n": len(calls)}

        with DiesAtFrontier(db) as dying, pytest.raises(ProcessDied):
            start_task_sync(dying, registry_of(body), "T", RUN)
        with SQLiteTraceStore(db) as store:
            before = path_events(store)
            run = start_task_sync(store, registry_of(body), "T", RUN).unwrap()
            assert run.wait().outputs == {"n": 1}
            assert calls == [1]
            # The path gained the frontier record only (a kernel record).
            after = path_events(store)
            assert after[: len(before)] == before
            assert [type(e).__name__ for e in after[len(before) :]] == ["OpaqueRecord"]
            assert len(terminals(store)) == 1


def open_run(state: ExecutionAggregate) -> tuple[RuntimeEvent, ...]:
    created = state.create("T", {}, None)
    return created, state.after(created).start()


class TestExecutionPath:
    def test_recorded_events_are_the_stored_records_and_the_cache_is_the_fold(
        self, tmp_path: Path
    ) -> None:
        with SQLiteTraceStore(tmp_path / "t.sqlite") as store:
            path = ExecutionPath(store, EXEC)
            _, opening = path.record(f"{RUN}:create", open_run)
            tail = (opening[1].record_id(),)
            receipt, (fact,) = path.record(
                f"{RUN}:publish:1", lambda s: (s.publish("k", {"a": 1}, tail),)
            )
            assert receipt.fact_ids == (fact.record_id(),)
            assert path_events(store) == [*opening, fact]
            # What it kept from its own appends is the fold of the path.
            kept = path.state(verified=False)
            assert kept == ExecutionPath(store, EXEC).state()
            assert kept.head == 3
            assert path.state().published_count == 1

    def test_a_record_another_writer_adds_is_folded_before_the_next_decision(
        self, durable_store_url: str
    ) -> None:
        url = durable_store_url
        with open_trace_store(url) as store, open_trace_store(url) as other:
            mine = ExecutionPath(store, EXEC)
            mine.record(f"{RUN}:create", open_run)
            assert mine.state().status is ExecutionStatus.RUNNING
            theirs = ExecutionPath(other, EXEC)
            theirs.record(f"{RUN}:fail", lambda s: (s.fail("theirs"),))
            # What mine keeps still says running: its append loses on the
            # head, and the decision taken again on the path refuses.
            assert mine.state(verified=False).status is ExecutionStatus.RUNNING
            with pytest.raises(ExecutionTerminalError):
                mine.record(f"{RUN}:complete", lambda s: (s.complete({}),))
            assert mine.state(verified=False) == theirs.state()

    def test_a_refusal_on_a_kept_state_is_decided_again_on_the_path(
        self, tmp_path: Path
    ) -> None:
        db = tmp_path / "t.sqlite"
        with SQLiteTraceStore(db) as store, SQLiteTraceStore(db) as other:
            mine = ExecutionPath(store, EXEC)  # keeps "nothing recorded yet"
            receipt, _ = ExecutionPath(other, EXEC).record(f"{RUN}:create", open_run)
            tail = (receipt.fact_ids[-1],)
            # On what it kept the execution does not exist; on the path it runs.
            _, (fact,) = mine.record(
                f"{RUN}:publish:1", lambda s: (s.publish("k", {}, tail),)
            )
            assert path_events(store)[-1] == fact
            assert mine.state(verified=False).published_count == 1

    def test_what_it_keeps_is_always_the_fold_of_a_prefix_of_the_path(
        self, tmp_path: Path
    ) -> None:
        db = tmp_path / "t.sqlite"
        with SQLiteTraceStore(db) as store, SQLiteTraceStore(db) as other:
            mine = ExecutionPath(store, EXEC)
            receipt, _ = mine.record(f"{RUN}:create", open_run)
            tail = (receipt.fact_ids[-1],)
            theirs = ExecutionPath(other, EXEC)
            # Another writer records a relation, then the very fact we will
            # decide (same intent, same content): our append replays theirs.
            theirs.record(
                "x:spawn", lambda s: (s.spawn("rel:x", "exec:c", None, tail),)
            )
            theirs.record(f"{RUN}:publish:1", lambda s: (s.publish("k", {}, tail),))
            mine.record(f"{RUN}:publish:1", lambda s: (s.publish("k", {}, tail),))
            kept = mine.state(verified=False)
            slice_ = store.read_owner_prefix(
                TRUSTED_READ_CONTEXT, EXEC, MAX_OWNER_ORDINAL
            )
            records = [slice_.facts_by_id[r] for r in slice_.owner_paths[EXEC]]
            prefix = [decode_fact(r) for r in records[: kept.head]]  # type: ignore[arg-type]
            assert kept == fold_execution(EXEC, prefix)
            assert mine.state() == fold_execution(
                EXEC,
                [decode_fact(r) for r in records],  # type: ignore[arg-type]
            )

    def test_the_kernel_projection_agrees_with_the_aggregate_on_a_real_run(
        self, tmp_path: Path
    ) -> None:
        def body(control: TaskControl) -> dict[str, object]:
            control.publish("a", {})
            control.abandon(control.spawn("Leaf"))
            return {"x": 1}

        registry = registry_of(body)
        registry.register("Leaf", lambda: None)
        with SQLiteTraceStore(tmp_path / "t.sqlite") as store:
            run = start_task_sync(store, registry, "T", RUN).unwrap()
            state = ExecutionPath(store, EXEC).state()
            kernel = project_execution(
                store.read_owner_prefix(TRUSTED_READ_CONTEXT, EXEC, MAX_OWNER_ORDINAL),
                EXEC,
            )
            assert (state.status, state.terminal_record, dict(state.outputs)) == (
                kernel.status,
                kernel.terminal_fact_id,
                dict(kernel.outputs),
            )
            assert state.relations == run.history().relations
            assert state.published_count == 1
            assert state.active_relations() == ()

    def test_a_batch_of_events_citing_different_parents_is_refused(self) -> None:
        with pytest.raises(ValueError, match="cite different parents"):
            execution_batch(
                "i",
                EXEC,
                [ExecutionStarted(caused_by=("a",)), FactPublished(kind="k", data={})],
            )


class TestRelationRules:
    def test_a_relation_id_reused_by_adopt_fails_the_body(self, tmp_path: Path) -> None:
        seen: list[BaseException] = []

        def body(control: TaskControl) -> None:
            child = control.spawn("Leaf")
            try:
                control.adopt(child.execution_id, child.frontier_id, child.relation_id)
            except RelationExistsError as error:
                seen.append(error)

        registry = registry_of(body)
        registry.register("Leaf", lambda: None)
        with SQLiteTraceStore(tmp_path / "t.sqlite") as store:
            start_task_sync(store, registry, "T", RUN).unwrap()
        assert len(seen) == 1

    def test_abandoning_twice_is_refused_the_second_time(self, tmp_path: Path) -> None:
        seen: list[BaseException] = []

        def body(control: TaskControl) -> None:
            child = control.spawn("Leaf")
            control.abandon(child)
            try:
                control.abandon(child)
            except RelationNotActiveError as error:
                seen.append(error)

        registry = registry_of(body)
        registry.register("Leaf", lambda: None)
        with SQLiteTraceStore(tmp_path / "t.sqlite") as store:
            history = start_task_sync(store, registry, "T", RUN).unwrap().history()
        assert len(seen) == 1
        assert [r.relation_kind for r in history.relations] == ["spawned", "abandoned"]
