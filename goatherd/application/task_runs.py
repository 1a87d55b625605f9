"""The task runtime's vocabulary: errors, the registry of bodies, run and child handles.

What a caller holds of a run: :class:`Run` (wait for it, snapshot it, read
its terminal cutoff and history) and :class:`ChildHandle`; the
:class:`Registry` from task ref to body; the run id and frontier id rules;
the errors a run can end with. It imports the domain, the execution
projections and the trace port, nothing of the runtime that drives a run
(``task_control``, ``tasks``).
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final, TypeAlias

from goatherd.domain import (
    MAX_OWNER_ORDINAL,
    TRUSTED_READ_CONTEXT,
    AppendIntentConflictError,
    CanonicalEncodingError,
    Cut,
    ExecutionRelation,
    ExecutionRuleError,
    GoatherdError,
    InconsistentTraceError,
    OrdinalConflictError,
    RecordDecodeError,
    UnknownFrontierError,
)
from goatherd.domain.store import TraceStore
from goatherd.projections import (
    EffectiveHistory,
    Execution,
    project_effective_history_from_store,
    project_execution,
    project_execution_from_store,
)

__all__ = [
    "ChildHandle",
    "Registry",
    "Run",
    "RunTerminalError",
    "TASK_START_FAILURES",
    "TaskBody",
    "TaskControlError",
    "TaskError",
    "TaskRunError",
    "TaskStartFailure",
    "UnknownExecutionError",
    "UnknownTaskError",
    "frontier_id_for_run",
    "new_run_id",
]


_POLL_INTERVAL: Final = 0.01


class TaskError(GoatherdError):
    """Root of the task runtime's errors."""


class UnknownTaskError(TaskError, LookupError):
    """Raised when no body is registered under a task ref (recorded as a failure)."""

    def __init__(self, task_ref: str) -> None:
        """Name the unknown ``task_ref``."""
        super().__init__(f'no task registered under ref "{task_ref}"')
        self.task_ref = task_ref


class TaskControlError(TaskError, ValueError):
    """Raised when a control operation's precondition fails; nothing was appended."""


class RunTerminalError(TaskControlError):
    """Raised when a control is used after its run's body returned."""


class UnknownExecutionError(TaskError, KeyError):
    """Raised by ``read_execution`` for an execution the control does not know."""

    def __str__(self) -> str:
        """Return the message without ``KeyError``'s quoting."""
        return str(self.args[0])


class TaskRunError(TaskError, RuntimeError):
    """Raised by ``Run.wait`` when the run could not reach a terminal frontier."""


TaskBody: TypeAlias = Callable[..., object]
"""A task body: called with the :class:`TaskControl` (or with nothing if it
takes no parameters); returns a mapping of outputs, ``None``, a pydantic-style
model (``model_dump``) or any value (recorded as ``{"result": value}``)."""

TaskStartFailure: TypeAlias = (
    AppendIntentConflictError
    | CanonicalEncodingError
    | ExecutionRuleError
    | InconsistentTraceError
    | OrdinalConflictError
    | RecordDecodeError
)
"""Why a run could not start or could not record its end.

- ``AppendIntentConflictError``, ``CanonicalEncodingError``: the run id was
  used with other content, or the inputs are not plain JSON (nothing appended);
- ``ExecutionTerminalError`` (an ``ExecutionRuleError``): another process ended
  the run first (the body ran, its end was not recorded); other
  ``ExecutionRuleError`` s: the run's path breaks an execution rule;
- ``InconsistentTraceError``, ``RecordDecodeError``: the run's path contradicts
  itself or holds a record that does not decode;
- ``OrdinalConflictError``: other writers kept moving the run's path through
  every retry (retryable).
"""

TASK_START_FAILURES: Final[tuple[type[TaskStartFailure], ...]] = (
    AppendIntentConflictError,
    CanonicalEncodingError,
    ExecutionRuleError,
    InconsistentTraceError,
    OrdinalConflictError,
    RecordDecodeError,
)
"""What :func:`start_task_sync` and :func:`start_task` catch into a ``Failure``."""


def new_run_id() -> str:
    """Return a fresh run id: ``run:`` and 32 lowercase hex digits."""
    return "run:" + secrets.token_hex(16)


def frontier_id_for_run(run_id: str) -> str:
    """Return the terminal frontier id of run ``run_id``."""
    return f"frontier:{run_id}:terminal"


class Registry:
    """A thread-safe map from task ref (recorded verbatim) to task body."""

    def __init__(self) -> None:
        """Start empty."""
        self._lock = threading.Lock()
        self._bodies: dict[str, TaskBody] = {}

    def register(self, task_ref: str, body: TaskBody) -> None:
        """Register ``body`` under ``task_ref`` (a later call overwrites)."""
        with self._lock:
            self._bodies[task_ref] = body

    def lookup(self, task_ref: str) -> TaskBody:
        """Return the body registered under ``task_ref``.

        Raises:
            UnknownTaskError: nothing is registered under it.
        """
        with self._lock:
            body = self._bodies.get(task_ref)
        if body is None:
            raise UnknownTaskError(task_ref)
        return body


def _cutoff_tail(cut: Cut) -> str:
    return cut.created_by_fact_id or cut.through_fact_id


def _project_terminal(store: TraceStore, cut: Cut) -> Execution:
    return project_execution_from_store(store, TRUSTED_READ_CONTEXT, cut)


def _read_cutoff(store: TraceStore, frontier_id: str) -> Cut | None:
    try:
        return store.read_owner_cutoff(frontier_id)
    except UnknownFrontierError:
        return None


class _Completion:
    """How a background run ended: set once, with the runner's error if any."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.error: BaseException | None = None


@dataclass(frozen=True)
class Run:
    """A handle on one run: its execution and terminal frontier.

    ``wait`` blocks until the run is terminal; ``snapshot`` projects whatever
    the execution's path holds now.
    """

    store: TraceStore = field(repr=False)
    run_id: str
    execution_id: str
    frontier_id: str
    _completion: _Completion | None = field(default=None, repr=False, compare=False)

    def done(self) -> bool:
        """Tell whether the terminal frontier is published (or the runner ended)."""
        if self._completion is not None:
            return self._completion.done.is_set()
        return _read_cutoff(self.store, self.frontier_id) is not None

    def wait(self, timeout: float | None = None) -> Execution:
        """Block until the run is terminal; return its terminal projection.

        A failed body is a ``failed`` execution, not an error.

        Raises:
            TaskRunError: the runner itself failed (the store refused an
                append), or ``timeout`` seconds passed first.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        if self._completion is not None:
            self._await_runner(timeout)
        cut = _read_cutoff(self.store, self.frontier_id)
        while cut is None:
            if deadline is not None and time.monotonic() >= deadline:
                raise TaskRunError(
                    f"waiting for frontier {self.frontier_id}: timed out"
                )
            time.sleep(_POLL_INTERVAL)
            cut = _read_cutoff(self.store, self.frontier_id)
        return _project_terminal(self.store, cut)

    def _await_runner(self, timeout: float | None) -> None:
        assert self._completion is not None
        if not self._completion.done.wait(timeout):
            raise TaskRunError(f"waiting for frontier {self.frontier_id}: timed out")
        error = self._completion.error
        if error is not None:
            raise TaskRunError(f"task run failed: {error}") from error

    def snapshot(self) -> Execution:
        """Project the execution from everything on its path now."""
        slice_ = self.store.read_owner_prefix(
            TRUSTED_READ_CONTEXT, self.execution_id, MAX_OWNER_ORDINAL
        )
        return project_execution(slice_, self.execution_id)

    def cutoff(self) -> Cut:
        """Return the verified terminal cutoff.

        Raises:
            UnknownFrontierError: the run is not terminal yet.
        """
        return self.store.read_owner_cutoff(self.frontier_id)

    def history(self) -> EffectiveHistory:
        """Project the terminal tree: root, active children, published facts.

        Abandoned children are dropped; re-opening the store re-projects the
        same history.

        Raises:
            UnknownFrontierError: the run is not terminal yet.
        """
        return project_effective_history_from_store(
            self.store, TRUSTED_READ_CONTEXT, self.cutoff()
        )


@dataclass(frozen=True)
class ChildHandle:
    """A child execution known to a parent control (spawned or adopted)."""

    store: TraceStore = field(repr=False)
    execution_id: str
    frontier_id: str
    relation_id: str
    relation: ExecutionRelation

    def wait(self) -> Execution:
        """Return the child's terminal projection (children are already terminal)."""
        return _project_terminal(
            self.store, self.store.read_owner_cutoff(self.frontier_id)
        )

    def cutoff(self) -> Cut:
        """Return the child's verified terminal cutoff."""
        return self.store.read_owner_cutoff(self.frontier_id)
