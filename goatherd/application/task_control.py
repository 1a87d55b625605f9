"""Driving one run: the control a body holds and the steps from open to frontier.

:class:`TaskControl` publishes facts and spawns, adopts and abandons
children, each a decision of the run's execution aggregate appended under
the path's head; the private steps below it open a run, run its body,
record its end and publish its terminal frontier. ``tasks`` builds the
public ``start_task`` and ``start_task_sync`` on them; this module imports
``task_runs`` and the execution path, never ``tasks``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from goatherd.application.executions import ExecutionPath, execution_batch
from goatherd.application.task_runs import (
    ChildHandle,
    Registry,
    Run,
    RunTerminalError,
    TaskBody,
    TaskControlError,
    UnknownExecutionError,
    UnknownTaskError,
    _Completion,
    _cutoff_tail,
    _project_terminal,
    _read_cutoff,
    frontier_id_for_run,
    new_run_id,
)
from goatherd.domain import (
    TRUSTED_APPEND_CONTEXT,
    TRUSTED_READ_CONTEXT,
    AppendReceipt,
    ExecutionAggregate,
    ExecutionExistsError,
    ExecutionRelation,
    ExecutionRelationCreated,
    Record,
    RuntimeEvent,
    check_canonical,
    execution_id_for,
    relation_id_for,
)
from goatherd.domain.store import TraceStore
from goatherd.projections import (
    Execution,
    publish_execution_frontier,
)

__all__ = [
    "TaskControl",
]


class TaskControl:
    """What a running body may do: publish facts and manage child executions.

    Every record it appends cites the control's causal tail, which then moves
    to the new record. Each is a decision of the run's execution aggregate,
    appended under its path's head: once another process ended the run, a
    publish, spawn, adopt or abandon raises ``ExecutionTerminalError``.
    Usable only while the body runs.
    """

    def __init__(
        self,
        store: TraceStore,
        registry: Registry,
        run_id: str,
        path: ExecutionPath,
        causal_tail: str,
    ) -> None:
        """Bind the control to the run's execution path, starting at ``causal_tail``."""
        self._store = store
        self._registry = registry
        self._run_id = run_id
        self._path = path
        self._tail = causal_tail
        self._publish_count = 0
        self._child_count = 0
        self._relation_count = 0
        self._known: dict[str, str] = {}
        self._closed = False

    @property
    def execution_id(self) -> str:
        """The execution this control appends for."""
        return self._path.execution_id

    @property
    def run_id(self) -> str:
        """The run id."""
        return self._run_id

    @property
    def causal_tail(self) -> str:
        """The record the next append will cite."""
        return self._tail

    @property
    def path(self) -> ExecutionPath:
        """The run's execution path (its aggregate and guarded appends)."""
        return self._path

    def close(self) -> None:
        """Refuse every later append (the run is about to become terminal)."""
        self._closed = True

    def _check_open(self, operation: str) -> None:
        if self._closed:
            raise RunTerminalError(
                f"run {self._run_id} is terminal; its control cannot {operation}"
            )

    def _record(
        self, intent: str, decide: Callable[[ExecutionAggregate], RuntimeEvent]
    ) -> tuple[str, RuntimeEvent]:
        receipt, events = self._path.record(intent, lambda state: (decide(state),))
        self._tail = receipt.fact_ids[-1]
        return self._tail, events[-1]

    def publish(self, kind: str, data: Mapping[str, object] | None = None) -> Record:
        """Append a published fact ``{kind, data}`` and return it.

        Raises:
            RunTerminalError: the body already returned.
            ExecutionTerminalError: another process ended the run.
            CanonicalEncodingError: ``data`` is not plain JSON (nothing appended).
        """
        self._check_open("publish")
        self._publish_count += 1
        parents = (self._tail,)
        record_id, _ = self._record(
            f"{self._run_id}:publish:{self._publish_count}",
            lambda state: state.publish(kind, dict(data or {}), parents),
        )
        record = self._store.read_fact(TRUSTED_READ_CONTEXT, record_id)
        assert isinstance(record, Record)  # a trusted payload read never hides
        return record

    def spawn(
        self,
        task_ref: str,
        inputs: Mapping[str, object] | None = None,
        registry: Registry | None = None,
        *,
        run_id: str | None = None,
    ) -> ChildHandle:
        """Record a ``spawned`` relation, then run the child to its end.

        The child's terminal frontier is published by this (the parent)
        execution, so it lands on the parent's path. A failing child does not
        fail the parent: inspect ``await_terminal``.

        Raises:
            RunTerminalError: the body already returned (nothing appended).
            ExecutionTerminalError: another process ended the run.
            The child's own start failures (``TaskStartFailure`` members).
        """
        self._check_open("spawn")
        self._child_count += 1
        child_run = run_id or f"{self._run_id}:child:{self._child_count}"
        child_exec = execution_id_for(f"{child_run}:create")
        child_frontier = frontier_id_for_run(child_run)
        intent = f"{child_run}:relation:spawned"
        parents = (self._tail,)
        relation = self._relate(
            intent,
            lambda state: state.spawn(
                relation_id_for(intent), child_exec, child_frontier, parents
            ),
        )
        _run_to_end(
            self._store,
            registry or self._registry,
            _RunSpec(
                task_ref=task_ref,
                run_id=child_run,
                inputs=dict(inputs or {}),
                parent_execution_id=self.execution_id,
                create_caused_by=(relation.created_fact_id,),
                frontier_publisher=self.execution_id,
                frontier_caused_by=(relation.created_fact_id,),
            ),
        )
        self._path.forget()  # the child's frontier landed on this path
        self._known[child_exec] = child_frontier
        self._tail = _cutoff_tail(self._store.read_owner_cutoff(child_frontier))
        return ChildHandle(
            self._store, child_exec, child_frontier, relation.relation_id, relation
        )

    def await_terminal(self, handle: ChildHandle) -> Execution:
        """Return the child's terminal projection and move the tail to its frontier."""
        self._known[handle.execution_id] = handle.frontier_id
        self._tail = _cutoff_tail(self._store.read_owner_cutoff(handle.frontier_id))
        return handle.wait()

    def adopt(
        self, execution_id: str, frontier_id: str, relation_id: str | None = None
    ) -> ChildHandle:
        """Record an ``adopted`` relation to an already terminal execution.

        Raises:
            TaskControlError: the frontier is unknown or targets another
                execution (checked before anything is appended).
            RunTerminalError: the body already returned.
            ExecutionTerminalError: another process ended the run.
            RelationExistsError: ``relation_id`` is in use on this execution.
        """
        self._check_open("adopt")
        cut = _read_cutoff(self._store, frontier_id)
        if cut is None:
            raise TaskControlError(
                f"adopt: frontier {frontier_id}: unknown frontier id: {frontier_id}"
            )
        if cut.target_trace_owner_id != execution_id:
            raise TaskControlError(
                f"adopt: frontier {frontier_id} targets "
                f"{cut.target_trace_owner_id}, not {execution_id}"
            )
        self._relation_count += 1
        intent = f"{self._run_id}:relation:adopted:{self._relation_count}"
        chosen = relation_id or relation_id_for(intent)
        parents = (self._tail,)
        relation = self._relate(
            intent,
            lambda state: state.adopt(chosen, execution_id, frontier_id, parents),
        )
        self._known[execution_id] = frontier_id
        return ChildHandle(
            self._store, execution_id, frontier_id, relation.relation_id, relation
        )

    def abandon(self, handle: ChildHandle) -> ExecutionRelation:
        """Record an ``abandoned`` relation under the handle's relation id.

        The effective history then drops the child; its records remain.

        Raises:
            TaskControlError: the child has no terminal cutoff (nothing appended).
            RunTerminalError: the body already returned.
            ExecutionTerminalError: another process ended the run.
            RelationNotActiveError: the handle's relation is not an active
                child of this execution (never related, or abandoned already).
        """
        self._check_open("abandon")
        cut = _read_cutoff(self._store, handle.frontier_id)
        if cut is None:
            raise TaskControlError(
                f"abandon: child has no terminal cutoff: {handle.frontier_id}"
            )
        self._relation_count += 1
        intent = f"{self._run_id}:relation:abandoned:{self._relation_count}"
        parents = [self._tail]
        if _cutoff_tail(cut) != self._tail:
            parents.append(_cutoff_tail(cut))
        return self._relate(
            intent,
            lambda state: state.abandon(
                handle.relation_id,
                handle.execution_id,
                handle.frontier_id,
                tuple(parents),
            ),
        )

    def read_execution(self, execution_id: str) -> Execution:
        """Return the terminal projection of a child this control knows.

        Raises:
            UnknownExecutionError: the execution is not one of its children.
        """
        frontier_id = self._known.get(execution_id)
        if frontier_id is None:
            raise UnknownExecutionError(
                f"execution is not known to this control: {execution_id}"
            )
        return _project_terminal(
            self._store, self._store.read_owner_cutoff(frontier_id)
        )

    def _relate(
        self,
        intent: str,
        decide: Callable[[ExecutionAggregate], ExecutionRelationCreated],
    ) -> ExecutionRelation:
        record_id, event = self._record(intent, decide)
        assert isinstance(event, ExecutionRelationCreated)
        return ExecutionRelation.of(event, record_id)


# ------------------------------------------------------------------ running


@dataclass(frozen=True, slots=True)
class _RunSpec:
    task_ref: str
    run_id: str
    inputs: Mapping[str, object]
    parent_execution_id: str | None = None
    create_caused_by: tuple[str, ...] = ()
    frontier_publisher: str | None = None
    frontier_caused_by: tuple[str, ...] = ()

    @property
    def execution_id(self) -> str:
        return execution_id_for(f"{self.run_id}:create")

    @property
    def frontier_id(self) -> str:
        return frontier_id_for_run(self.run_id)

    def opening(self, state: ExecutionAggregate) -> tuple[RuntimeEvent, ...]:
        """Decide the create batch: ``created`` then ``started``."""
        parents = self.create_caused_by
        created = state.create(
            self.task_ref, self.inputs, self.parent_execution_id, parents
        )
        return created, state.after(created).start(parents)


def _begin(store: TraceStore, registry: Registry, spec: _RunSpec) -> TaskControl | None:
    """Open the run; return its control, or None if it is already terminal."""
    if _read_cutoff(store, spec.frontier_id) is not None:
        return None
    check_canonical(dict(spec.inputs), root="inputs")
    path = ExecutionPath(store, spec.execution_id)
    receipt = _open(store, path, spec)
    state = path.state()
    if state.terminal_record is not None:
        # It ended but its frontier was not published (a crash between the
        # two appends): publish it now; the body does not run again.
        _publish_frontier(store, spec, state.terminal_record)
        return None
    return TaskControl(store, registry, spec.run_id, path, receipt.fact_ids[-1])


def _open(store: TraceStore, path: ExecutionPath, spec: _RunSpec) -> AppendReceipt:
    intent = f"{spec.run_id}:create"
    try:
        receipt, _ = path.record(intent, spec.opening)
    except ExecutionExistsError:
        if store.read_append_intent(intent) is None:
            raise  # created by another writer's intent: nothing to replay
        # Created by this run id with other content: the store refuses the
        # batch as AppendIntentConflictError (the run id was reused).
        bare = ExecutionAggregate(path.execution_id)
        batch = execution_batch(intent, spec.execution_id, spec.opening(bare))
        return store.append(TRUSTED_APPEND_CONTEXT, batch)
    return receipt


def _finish(
    store: TraceStore, registry: Registry, spec: _RunSpec, control: TaskControl
) -> None:
    """Run the body inside the failure boundary, record its end, publish the cut."""
    outputs, error = _call_body(registry, spec.task_ref, control)
    control.close()
    parents = (control.causal_tail,)

    def end(state: ExecutionAggregate) -> tuple[RuntimeEvent, ...]:
        if error is None:
            return (state.complete(outputs, parents),)
        return (state.fail(error, parents),)

    verb = "complete" if error is None else "fail"
    receipt, _ = control.path.record(f"{spec.run_id}:{verb}", end)
    _publish_frontier(store, spec, receipt.fact_ids[-1])


def _publish_frontier(store: TraceStore, spec: _RunSpec, terminal: str) -> None:
    publish_execution_frontier(
        store,
        TRUSTED_APPEND_CONTEXT,
        frontier_id=spec.frontier_id,
        target_execution_id=spec.execution_id,
        through_fact_id=terminal,
        publisher_execution_id=spec.frontier_publisher,
        caused_by=spec.frontier_caused_by,
    )


def _call_body(
    registry: Registry, task_ref: str, control: TaskControl
) -> tuple[dict[str, object], str | None]:
    try:
        body = registry.lookup(task_ref)
    except UnknownTaskError as error:
        return {}, str(error)
    try:
        outputs = _coerce_outputs(_invoke(body, control))
        check_canonical(outputs, root="outputs")
    except Exception as error:  # the failure boundary: every body error is data
        return {}, f"{type(error).__name__}: {error}"
    return outputs, None


def _invoke(body: TaskBody, control: TaskControl) -> object:
    try:
        parameters = inspect.signature(body).parameters
    except (TypeError, ValueError):
        return body(control)
    return body() if not parameters else body(control)


def _coerce_outputs(value: object) -> dict[str, object]:
    if value is None:
        return {}
    if isinstance(value, Mapping):
        return dict(value)
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        dumped = dump(mode="json")
        if isinstance(dumped, dict):
            return dumped
    return {"result": value}


def _run_to_end(store: TraceStore, registry: Registry, spec: _RunSpec) -> None:
    control = _begin(store, registry, spec)
    if control is not None:
        _finish(store, registry, spec, control)


def _handle(store: TraceStore, spec: _RunSpec, completion: _Completion | None) -> Run:
    return Run(store, spec.run_id, spec.execution_id, spec.frontier_id, completion)


def _spec(
    task_ref: str, run_id: str | None, inputs: Mapping[str, object] | None
) -> _RunSpec:
    return _RunSpec(task_ref, run_id or new_run_id(), dict(inputs or {}))
