"""The task runtime: runs with identities, lifecycles and a tree of children.

A run with id ``R`` owns an execution whose owner path is
``E = execution_id_for(R + ":create")``. Every record the runtime writes on
``E`` is a decision of :class:`~goatherd.domain.ExecutionAggregate`, folded
from that path, appended under the path's head
(:class:`~goatherd.application.ExecutionPath`): of several processes running
one run id, exactly one terminal record commits, nothing is published after
it, and the others get ``ExecutionTerminalError``. Every id and intent is
derived exactly as the reference derives them (pinned by
``execution_vectors_v0.json``):

* intents ``R:create``, ``R:complete``, ``R:fail``, ``R:publish:<n>``; the
  terminal frontier ``frontier:R:terminal`` (published under its default
  intent ``frontier:frontier:R:terminal``);
* children ``R:child:<n>`` with relation intent ``<child>:relation:spawned``;
  adopt/abandon intents ``R:relation:adopted:<n>`` / ``R:relation:abandoned:<n>``
  (one counter shared by both).

A run is idempotent by its terminal frontier: once it exists, starting the run
again returns the handle without appending or running the body. A run whose
terminal record committed but whose frontier did not (a crash between the two)
gets its frontier on the next start, without running the body. Before that, a
restart replays the committed intents (the store returns their stored
receipts) and runs the body again (at-least-once).

A body that raises (or a task ref nobody registered) is recorded as a failed
execution with ``"<Type>: <message>"``; it never propagates to the caller.

This module holds the two entry points, :func:`start_task_sync` and
:func:`start_task`, and re-exports the rest of the task runtime: the handles,
the registry and the errors live in ``task_runs``, the control a body holds
and the steps of a run in ``task_control``.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping

from returns.result import Result, safe

from goatherd.application.task_control import (
    TaskControl,
    _begin,
    _finish,
    _handle,
    _run_to_end,
    _RunSpec,
    _spec,
)
from goatherd.application.task_runs import (
    TASK_START_FAILURES,
    ChildHandle,
    Registry,
    Run,
    RunTerminalError,
    TaskBody,
    TaskControlError,
    TaskError,
    TaskRunError,
    TaskStartFailure,
    UnknownExecutionError,
    UnknownTaskError,
    _Completion,
    frontier_id_for_run,
    new_run_id,
)
from goatherd.domain.store import TraceStore

__all__ = [
    "ChildHandle",
    "Registry",
    "Run",
    "RunTerminalError",
    "TASK_START_FAILURES",
    "TaskBody",
    "TaskControl",
    "TaskControlError",
    "TaskError",
    "TaskRunError",
    "TaskStartFailure",
    "UnknownExecutionError",
    "UnknownTaskError",
    "frontier_id_for_run",
    "new_run_id",
    "start_task",
    "start_task_sync",
]


def start_task_sync(
    store: TraceStore,
    registry: Registry,
    task_ref: str,
    run_id: str | None = None,
    inputs: Mapping[str, object] | None = None,
) -> Result[Run, TaskStartFailure]:
    """Run task ``task_ref`` inline; the returned run is terminal.

    Idempotent by the terminal frontier: a finished run id returns its handle
    without appending or running the body again.

    Returns:
        ``Success(run)`` (a failed body is a ``failed`` execution), or a
        ``Failure`` of :data:`TaskStartFailure`: the run id was used with other
        content or the inputs are not plain JSON (nothing was appended), or
        another process ended the run first (``ExecutionTerminalError``).
    """
    spec = _spec(task_ref, run_id, inputs)
    return _run_sync(store, registry, spec)


@safe(exceptions=TASK_START_FAILURES)
def _run_sync(store: TraceStore, registry: Registry, spec: _RunSpec) -> Run:
    _run_to_end(store, registry, spec)
    return _handle(store, spec, None)


@safe(exceptions=TASK_START_FAILURES)
def _safe_begin(
    store: TraceStore, registry: Registry, spec: _RunSpec
) -> TaskControl | None:
    return _begin(store, registry, spec)


def start_task(
    store: TraceStore,
    registry: Registry,
    task_ref: str,
    run_id: str | None = None,
    inputs: Mapping[str, object] | None = None,
) -> Result[Run, TaskStartFailure]:
    """Start task ``task_ref`` and return a live handle at once.

    The create records are appended before this returns (``snapshot`` shows a
    running execution); the body runs in a background thread and ``wait``
    blocks until the run is terminal. If another process ends the run first,
    ``wait`` raises ``TaskRunError`` caused by ``ExecutionTerminalError``.

    Returns:
        As :func:`start_task_sync` for the opening append.
    """
    spec = _spec(task_ref, run_id, inputs)
    return _safe_begin(store, registry, spec).map(
        lambda control: _launch(store, registry, spec, control)
    )


def _launch(
    store: TraceStore, registry: Registry, spec: _RunSpec, control: TaskControl | None
) -> Run:
    if control is None:
        return _handle(store, spec, None)
    completion = _Completion()

    def runner() -> None:
        try:
            _finish(store, registry, spec, control)
        except BaseException as error:  # handed to wait(); the thread must not die
            completion.error = error
        finally:
            completion.done.set()

    threading.Thread(target=runner, name=f"task {spec.run_id}", daemon=True).start()
    return _handle(store, spec, completion)
