"""The task runtime on a real store: runs, children, failures, bad input."""

from __future__ import annotations

import re
import threading
from pathlib import Path

import pytest

from goatherd.application import (
    ChildHandle,
    Registry,
    RunTerminalError,
    TaskControl,
    TaskControlError,
    TaskRunError,
    UnknownExecutionError,
    start_task,
    start_task_sync,
)
from goatherd.domain import (
    AppendIntentConflictError,
    CanonicalEncodingError,
    execution_id_for,
)
from goatherd.infrastructure.store import SQLiteTraceStore
from goatherd.projections import ExecutionRelation, RelationKind


@pytest.fixture
def store():
    with SQLiteTraceStore() as trace:
        yield trace


def registry_with(**bodies) -> Registry:
    registry = Registry()
    for ref, body in bodies.items():
        registry.register(ref, body)
    return registry


class TestSeedExample:
    """The seed's "Run tasks" example, in Python."""

    def registry(self) -> Registry:
        registry = Registry()

        def my_task(c: TaskControl) -> dict[str, object]:
            c.publish("note", {"msg": "working"})
            child = c.spawn("LeafTask", {"n": 1}, registry)
            execution = c.await_terminal(child)
            return {"child": execution.execution_id}

        registry.register("MyTask", my_task)
        registry.register("LeafTask", lambda: {"leaf": True})
        return registry

    def test_a_synchronous_run_is_terminal_with_its_child(self, store) -> None:
        run = start_task_sync(
            store, self.registry(), "MyTask", "run:fixed-id", {"x": 1}
        ).unwrap()
        execution = run.wait()
        assert execution.status == "succeeded"
        assert execution.inputs == {"x": 1}
        child_id = execution_id_for("run:fixed-id:child:1:create")
        assert execution.outputs == {"child": child_id}
        history = run.history()
        (child,) = history.children
        assert child.execution.status == "succeeded"
        assert child.execution.parent_execution_id == run.execution_id
        assert child.execution.inputs == {"n": 1}
        assert [f.kind for f in history.published_facts] == ["note"]

    def test_an_async_run_returns_a_live_handle_and_wait_blocks(self, store) -> None:
        run = start_task(store, self.registry(), "MyTask").unwrap()
        assert re.fullmatch(r"run:[0-9a-f]{32}", run.run_id)
        assert run.wait(timeout=10).status == "succeeded"
        assert run.done()


class TestLiveHandle:
    def test_snapshot_shows_a_running_execution_until_the_body_returns(
        self, store
    ) -> None:
        release = threading.Event()
        registry = registry_with(Slow=lambda: release.wait(10) and {"ok": True})
        run = start_task(store, registry, "Slow", "run:slow").unwrap()
        assert run.snapshot().status == "running"
        assert not run.done()
        with pytest.raises(TaskRunError, match="waiting for frontier"):
            run.wait(timeout=0.05)
        release.set()
        assert run.wait(timeout=10).outputs == {"ok": True}
        assert run.snapshot().status == "succeeded"

    def test_a_runner_that_dies_is_reported_by_wait(self, store) -> None:
        class Died(BaseException):
            pass

        def dies() -> None:
            raise Died("power cut")

        run = start_task(store, registry_with(D=dies), "D").unwrap()
        with pytest.raises(TaskRunError, match="task run failed: power cut"):
            run.wait(timeout=10)


class TestFailuresAreRecorded:
    def test_an_unknown_task_ref_is_a_failed_execution(self, store) -> None:
        run = start_task_sync(store, Registry(), "Nope", "run:nope").unwrap()
        execution = run.wait()
        assert execution.status == "failed"
        assert execution.error == 'no task registered under ref "Nope"'

    def test_a_raising_body_is_failed_with_type_and_message(self, store) -> None:
        def boom(control: TaskControl) -> None:
            control.publish("before", {})
            raise RuntimeError("boom")

        run = start_task_sync(store, registry_with(B=boom), "B").unwrap()
        execution = run.wait()
        assert execution.status == "failed"
        assert execution.error == "RuntimeError: boom"
        assert [f.kind for f in run.history().published_facts] == ["before"]

    def test_outputs_that_are_not_json_fail_the_run(self, store) -> None:
        run = start_task_sync(store, registry_with(S=lambda: {"s": {1}}), "S").unwrap()
        execution = run.wait()
        assert execution.status == "failed"
        assert execution.error is not None
        assert execution.error.startswith("CanonicalTypeError: outputs.s")

    @pytest.mark.parametrize(
        ("value", "outputs"), [(None, {}), (7, {"result": 7}), ([1], {"result": [1]})]
    )
    def test_outputs_are_coerced_to_an_object(self, store, value, outputs) -> None:
        run = start_task_sync(store, registry_with(V=lambda: value), "V").unwrap()
        assert run.wait().outputs == outputs

    def test_a_failing_child_does_not_fail_its_parent(self, store) -> None:
        def parent(control: TaskControl) -> dict[str, object]:
            child = control.spawn("Bad")
            return {"child_status": control.await_terminal(child).status.value}

        def bad() -> None:
            raise ValueError("nope")

        registry = registry_with(P=parent, Bad=bad)
        run = start_task_sync(store, registry, "P").unwrap()
        assert run.wait().outputs == {"child_status": "failed"}


class TestBadInput:
    def test_inputs_that_are_not_json_are_refused_before_any_append(
        self, store
    ) -> None:
        count = store.fact_count()
        result = start_task_sync(store, Registry(), "T", "run:x", {"bad": {1, 2}})
        assert isinstance(result.failure(), CanonicalEncodingError)
        assert store.fact_count() == count

    def test_spawning_under_a_terminal_run_is_refused_and_appends_nothing(
        self, store
    ) -> None:
        leaked: list[TaskControl] = []
        registry = registry_with(Leak=leaked.append, Leaf=lambda: None)
        start_task_sync(store, registry, "Leak", "run:leak").unwrap()
        count = store.fact_count()
        (control,) = leaked
        with pytest.raises(RunTerminalError, match="run run:leak is terminal"):
            control.spawn("Leaf")
        with pytest.raises(RunTerminalError):
            control.publish("late", {})
        assert store.fact_count() == count

    def test_adopting_an_unknown_or_mismatched_frontier_appends_nothing(
        self, store
    ) -> None:
        other = start_task_sync(
            store, registry_with(L=lambda: None), "L", "run:other"
        ).unwrap()
        errors: list[str] = []

        def parent(control: TaskControl) -> None:
            for args in (
                (other.execution_id, "frontier:missing"),
                ("exec:someone-else", other.frontier_id),
            ):
                count = store.fact_count()
                try:
                    control.adopt(*args)
                except TaskControlError as error:
                    errors.append(str(error))
                assert store.fact_count() == count

        start_task_sync(store, registry_with(P=parent), "P").unwrap()
        assert errors == [
            "adopt: frontier frontier:missing: unknown frontier id: frontier:missing",
            f"adopt: frontier {other.frontier_id} targets {other.execution_id}, "
            "not exec:someone-else",
        ]

    def test_abandoning_a_child_without_a_terminal_cutoff_is_refused(
        self, store
    ) -> None:
        relation = ExecutionRelation(
            "rel:x", RelationKind.SPAWNED, "exec:p", "exec:c", "frontier:none", "f"
        )
        handle = ChildHandle(store, "exec:c", "frontier:none", "rel:x", relation)
        seen: list[str] = []

        def parent(control: TaskControl) -> None:
            try:
                control.abandon(handle)
            except TaskControlError as error:
                seen.append(str(error))

        start_task_sync(store, registry_with(P=parent), "P").unwrap()
        assert seen == ["abandon: child has no terminal cutoff: frontier:none"]

    def test_reading_an_unknown_execution_is_a_key_error(self, store) -> None:
        seen: list[BaseException] = []

        def parent(control: TaskControl) -> None:
            handle = control.spawn("Leaf")
            assert control.read_execution(handle.execution_id).status == "succeeded"
            try:
                control.read_execution("exec:stranger")
            except KeyError as error:
                seen.append(error)

        start_task_sync(store, registry_with(P=parent, Leaf=lambda: None), "P").unwrap()
        (error,) = seen
        assert isinstance(error, UnknownExecutionError)
        assert str(error) == "execution is not known to this control: exec:stranger"


class ProcessDied(BaseException):
    """Stands for the process dying in the middle of a body."""


class TestRestart:
    def test_a_run_that_died_mid_body_reruns_under_the_same_intents(
        self, tmp_path: Path
    ) -> None:
        path = tmp_path / "t.sqlite"
        attempts: list[int] = []

        def flaky(control: TaskControl) -> dict[str, object]:
            control.publish("step", {"n": 1})
            attempts.append(1)
            if len(attempts) == 1:
                raise ProcessDied
            return {"done": True}

        registry = registry_with(F=flaky)
        with SQLiteTraceStore(path) as store, pytest.raises(ProcessDied):
            start_task_sync(store, registry, "F", "run:flaky", {"a": 1})
        with SQLiteTraceStore(path) as store:
            conflict = start_task_sync(store, registry, "F", "run:flaky", {"a": 2})
            assert isinstance(conflict.failure(), AppendIntentConflictError)
            run = start_task_sync(store, registry, "F", "run:flaky", {"a": 1}).unwrap()
            history = run.history()
            assert history.root.status == "succeeded"
            # The replayed publish was the stored record, not a second one.
            assert [f.kind for f in history.published_facts] == ["step"]
            assert len(attempts) == 2
