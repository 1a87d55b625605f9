"""The execution aggregate: a run's lifecycle, children and facts, folded from its path.

An execution's stream is its owner path. :class:`ExecutionAggregate` is an
immutable value folded from the decoded records of that path
(:meth:`ExecutionAggregate.with_fact`); its decision methods check a rule and
return the event to record, nothing else. The task runtime appends a decision
under the path's head (optimistic concurrency), so of two processes deciding
on one execution only one append commits and the other decides again on the
new state: no second terminal, no fact after the terminal.

The fold keeps the kernel projection's values (``project_execution``): a
record naming another execution is skipped, a later ``created`` resets the
status to pending, the last terminal record wins. What the kernel tolerates
the aggregate also remembers as a contradiction (``inconsistent``), and no
decision is taken on a contradictory execution.

A decision whose record is already on the path (the same content under the
same causal parents: a retry after a crash) returns that same event, so its
append replays the stored record instead of being refused.

Errors (under :class:`~goatherd.domain.RuntimeRuleError`)::

    ExecutionRuleError             base of the execution rules
      ExecutionNotFoundError       no ``created`` record on the path
      ExecutionExistsError         a create onto an execution created otherwise
      ExecutionStateError          the lifecycle state forbids the operation
        ExecutionTerminalError     the execution already has a terminal record
      RelationExistsError          spawn/adopt under a relation id in use
      RelationNotActiveError       abandon of a relation that is not active

They and :class:`ExecutionStatus` live in ``execution_rules`` and are
re-exported here. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import singledispatch
from typing import Any, TypeVar

from goatherd.domain.events import (
    ExecutionCompleted,
    ExecutionCreated,
    ExecutionFailed,
    ExecutionRelationCreated,
    ExecutionStarted,
    FactPublished,
    PlacedEvent,
    RelationKind,
    RuntimeEvent,
)
from goatherd.domain.execution_rules import (
    ExecutionExistsError,
    ExecutionNotFoundError,
    ExecutionRuleError,
    ExecutionStateError,
    ExecutionStatus,
    ExecutionTerminalError,
    RelationExistsError,
    RelationNotActiveError,
)
from goatherd.domain.runtime_errors import InconsistentTraceError

__all__ = [
    "ExecutionAggregate",
    "ExecutionExistsError",
    "ExecutionNotFoundError",
    "ExecutionRelation",
    "ExecutionRuleError",
    "ExecutionStateError",
    "ExecutionStatus",
    "ExecutionTerminalError",
    "RelationExistsError",
    "RelationNotActiveError",
    "active_relations",
    "fold_execution",
]

_ACTIVE_KINDS = (RelationKind.SPAWNED, RelationKind.ADOPTED)
_TERMINAL = (ExecutionStatus.SUCCEEDED, ExecutionStatus.FAILED)
_TerminalT = TypeVar("_TerminalT", ExecutionCompleted, ExecutionFailed)


# ------------------------------------------------------------------ values


@dataclass(frozen=True, slots=True)
class ExecutionRelation:
    """One relation event between a parent and a child execution.

    Attributes:
        relation_id: stable across the events of one relation.
        relation_kind: spawned, adopted or abandoned.
        parent_execution_id: the parent (whose path holds the record).
        child_execution_id: the child.
        child_frontier_id: the child's terminal frontier, or ``None``.
        created_fact_id: the id of the relation record.
    """

    relation_id: str
    relation_kind: RelationKind
    parent_execution_id: str
    child_execution_id: str
    child_frontier_id: str | None
    created_fact_id: str

    @classmethod
    def of(cls, event: ExecutionRelationCreated, record_id: str) -> ExecutionRelation:
        """Return the relation a decoded relation record states."""
        return cls(
            relation_id=event.relation_id,
            relation_kind=event.relation_kind,
            parent_execution_id=event.parent_execution_id,
            child_execution_id=event.child_execution_id,
            child_frontier_id=event.child_frontier_id,
            created_fact_id=record_id,
        )


def active_relations(
    relations: Iterable[ExecutionRelation],
) -> tuple[ExecutionRelation, ...]:
    """Return the latest event per relation id, kept if spawned or adopted.

    Relations keep the order of their first appearance.
    """
    latest: dict[str, ExecutionRelation] = {}
    for relation in relations:
        latest[relation.relation_id] = relation
    return tuple(r for r in latest.values() if r.relation_kind in _ACTIVE_KINDS)


@dataclass(frozen=True, slots=True)
class ExecutionAggregate:
    """An execution as its path shows it.

    Attributes:
        execution_id: the execution (its owner path).
        exists: whether a ``created`` record was folded.
        task_ref: from the latest ``created``.
        inputs: from the latest ``created``.
        parent_execution_id: the spawning execution, or ``None``.
        status: the lifecycle state (the kernel projection's).
        outputs: from the latest ``completed`` (empty after a ``failed``).
        error: from the latest ``failed`` (``None`` after a ``completed``).
        created_record: the latest ``created`` record id.
        started_record: the latest ``started`` record id.
        terminal_record: the latest terminal record id.
        relations: every relation event naming it as parent, in path order.
        published_count: how many facts it published.
        head: the path's next ordinal as folded (what the next append expects).
        inconsistent: why the path contradicts itself (``""``: it does not).
    """

    execution_id: str
    exists: bool = False
    task_ref: str = ""
    inputs: Mapping[str, Any] = field(default_factory=dict)
    parent_execution_id: str | None = None
    status: ExecutionStatus = ExecutionStatus.PENDING
    outputs: Mapping[str, Any] = field(default_factory=dict)
    error: str | None = None
    created_record: str = ""
    started_record: str | None = None
    terminal_record: str | None = None
    relations: tuple[ExecutionRelation, ...] = ()
    published_count: int = 0
    head: int = 0
    inconsistent: str = ""

    @property
    def terminal(self) -> bool:
        """Whether the execution ended (succeeded or failed)."""
        return self.status in _TERMINAL

    def active_relations(self) -> tuple[ExecutionRelation, ...]:
        """Return its active children's relations (see :func:`active_relations`)."""
        return active_relations(self.relations)

    # ------------------------------------------------------------- rules

    def create(
        self,
        task_ref: str,
        inputs: Mapping[str, Any],
        parent_execution_id: str | None,
        caused_by: tuple[str, ...] = (),
    ) -> ExecutionCreated:
        """Decide to declare this execution.

        Raises:
            ExecutionExistsError: another ``created`` record is on the path.
        """
        event = ExecutionCreated(
            caused_by=caused_by,
            execution_id=self.execution_id,
            task_ref=task_ref,
            inputs=dict(inputs),
            parent_execution_id=parent_execution_id,
        )
        if self.exists and self.created_record != event.record_id():
            raise ExecutionExistsError(self.execution_id, self.created_record)
        return event

    def start(self, caused_by: tuple[str, ...] = ()) -> ExecutionStarted:
        """Decide to record that the body started (once, after ``created``).

        Raises:
            ExecutionNotFoundError, InconsistentTraceError,
            ExecutionTerminalError, ExecutionStateError (started already).
        """
        event = ExecutionStarted(caused_by=caused_by, execution_id=self.execution_id)
        if self.started_record is not None and self.started_record == event.record_id():
            return event
        self._require(ExecutionStatus.PENDING, "start")
        return event

    def complete(
        self, outputs: Mapping[str, Any], caused_by: tuple[str, ...] = ()
    ) -> ExecutionCompleted:
        """Decide to end the running execution with ``outputs``.

        Raises:
            ExecutionNotFoundError, InconsistentTraceError,
            ExecutionTerminalError (it ended otherwise), ExecutionStateError.
        """
        event = ExecutionCompleted(
            caused_by=caused_by, execution_id=self.execution_id, outputs=dict(outputs)
        )
        return self._terminal(event, "complete")

    def fail(self, error: str, caused_by: tuple[str, ...] = ()) -> ExecutionFailed:
        """Decide to end the running execution with ``error``.

        Raises:
            as :meth:`complete`.
        """
        event = ExecutionFailed(
            caused_by=caused_by, execution_id=self.execution_id, error=error
        )
        return self._terminal(event, "fail")

    def publish(
        self, kind: str, data: Mapping[str, Any], caused_by: tuple[str, ...] = ()
    ) -> FactPublished:
        """Decide to publish a fact from the running execution.

        Raises:
            ExecutionNotFoundError, InconsistentTraceError,
            ExecutionTerminalError, ExecutionStateError.
        """
        self._require(ExecutionStatus.RUNNING, "publish on")
        return FactPublished(caused_by=caused_by, kind=kind, data=dict(data))

    def spawn(
        self,
        relation_id: str,
        child_execution_id: str,
        child_frontier_id: str | None,
        caused_by: tuple[str, ...] = (),
    ) -> ExecutionRelationCreated:
        """Decide to record a ``spawned`` relation to a new child.

        Raises:
            the errors of :meth:`publish`; RelationExistsError.
        """
        return self._relate(
            RelationKind.SPAWNED,
            relation_id,
            child_execution_id,
            child_frontier_id,
            caused_by,
        )

    def adopt(
        self,
        relation_id: str,
        child_execution_id: str,
        child_frontier_id: str | None,
        caused_by: tuple[str, ...] = (),
    ) -> ExecutionRelationCreated:
        """Decide to record an ``adopted`` relation to an existing execution.

        Raises:
            the errors of :meth:`publish`; RelationExistsError.
        """
        return self._relate(
            RelationKind.ADOPTED,
            relation_id,
            child_execution_id,
            child_frontier_id,
            caused_by,
        )

    def abandon(
        self,
        relation_id: str,
        child_execution_id: str,
        child_frontier_id: str | None,
        caused_by: tuple[str, ...] = (),
    ) -> ExecutionRelationCreated:
        """Decide to record an ``abandoned`` relation (same relation id).

        Raises:
            the errors of :meth:`publish`; RelationNotActiveError.
        """
        return self._relate(
            RelationKind.ABANDONED,
            relation_id,
            child_execution_id,
            child_frontier_id,
            caused_by,
        )

    def _relate(
        self,
        kind: RelationKind,
        relation_id: str,
        child_execution_id: str,
        child_frontier_id: str | None,
        caused_by: tuple[str, ...],
    ) -> ExecutionRelationCreated:
        event = ExecutionRelationCreated(
            caused_by=caused_by,
            relation_id=relation_id,
            relation_kind=kind,
            parent_execution_id=self.execution_id,
            child_execution_id=child_execution_id,
            child_frontier_id=child_frontier_id,
        )
        if self.relations:  # a retry of a recorded relation replays it
            record_id = event.record_id()
            if any(r.created_fact_id == record_id for r in self.relations):
                return event
        self._require(ExecutionStatus.RUNNING, f"record a {kind.value} child of")
        active = {r.relation_id for r in self.active_relations()}
        if kind is RelationKind.ABANDONED and relation_id not in active:
            raise RelationNotActiveError(self.execution_id, relation_id)
        known = {r.relation_id for r in self.relations}
        if kind is not RelationKind.ABANDONED and relation_id in known:
            raise RelationExistsError(self.execution_id, relation_id)
        return event

    def _terminal(self, event: _TerminalT, operation: str) -> _TerminalT:
        if self.terminal_record is not None and (
            self.terminal_record == event.record_id()
        ):
            return event
        self._require(ExecutionStatus.RUNNING, operation)
        return event

    def _require(self, status: ExecutionStatus, operation: str) -> None:
        if not self.exists:
            raise ExecutionNotFoundError(self.execution_id)
        if self.inconsistent:
            raise InconsistentTraceError(self.execution_id, self.inconsistent)
        if self.terminal_record is not None:
            raise ExecutionTerminalError(
                self.execution_id, self.status, operation, self.terminal_record
            )
        if self.status is not status:
            raise ExecutionStateError(self.execution_id, self.status, operation)

    # ------------------------------------------------------------- evolve

    def with_fact(self, fact: PlacedEvent) -> ExecutionAggregate:
        """Fold one decoded record of the execution's path (pure, total)."""
        moved = replace(self, head=max(self.head, fact.ordinal + 1))
        return _evolve(fact.event, moved, fact.record_id)

    def after(self, event: RuntimeEvent) -> ExecutionAggregate:
        """Return the state once ``event`` is recorded next on the path.

        For a decision of several events (``created`` then ``started``): the
        later ones are decided on the state the earlier ones lead to.
        """
        placed = PlacedEvent(event, event.record_id(), self.execution_id, self.head)
        return self.with_fact(placed)


def fold_execution(
    execution_id: str, facts: Iterable[PlacedEvent]
) -> ExecutionAggregate:
    """Fold the decoded records of ``execution_id``'s path, in path order."""
    state = ExecutionAggregate(execution_id)
    for fact in facts:
        state = state.with_fact(fact)
    return state


def _names_other(state: ExecutionAggregate, named: str | None) -> bool:
    return named is not None and named != state.execution_id


@singledispatch
def _evolve(
    event: RuntimeEvent, state: ExecutionAggregate, record_id: str
) -> ExecutionAggregate:
    """Records of other schemas (a frontier, an agent's fact) change nothing."""
    del event, record_id
    return state


@_evolve.register
def _created(
    event: ExecutionCreated, state: ExecutionAggregate, record_id: str
) -> ExecutionAggregate:
    if _names_other(state, event.execution_id):
        return state
    again = state.exists and state.created_record != record_id
    return replace(
        state,
        exists=True,
        task_ref=event.task_ref,
        inputs=dict(event.inputs),
        parent_execution_id=event.parent_execution_id,
        status=ExecutionStatus.PENDING,
        created_record=record_id,
        inconsistent=state.inconsistent
        or (f"a second created record {record_id}" if again else ""),
    )


@_evolve.register
def _started(
    event: ExecutionStarted, state: ExecutionAggregate, record_id: str
) -> ExecutionAggregate:
    if _names_other(state, event.execution_id):
        return state
    if state.terminal_record is not None:
        reason = f"started record {record_id} after the terminal record"
    elif state.started_record not in (None, record_id):
        reason = f"a second started record {record_id}"
    else:
        reason = ""
    return replace(
        state,
        started_record=record_id,
        status=ExecutionStatus.RUNNING,
        inconsistent=state.inconsistent or reason,
    )


@_evolve.register
def _completed(
    event: ExecutionCompleted, state: ExecutionAggregate, record_id: str
) -> ExecutionAggregate:
    if _names_other(state, event.execution_id):
        return state
    return replace(
        _ended(state, record_id),
        outputs=dict(event.outputs),
        error=None,
        status=ExecutionStatus.SUCCEEDED,
    )


@_evolve.register
def _failed(
    event: ExecutionFailed, state: ExecutionAggregate, record_id: str
) -> ExecutionAggregate:
    if _names_other(state, event.execution_id):
        return state
    return replace(
        _ended(state, record_id),
        outputs={},
        error=event.error,
        status=ExecutionStatus.FAILED,
    )


def _ended(state: ExecutionAggregate, record_id: str) -> ExecutionAggregate:
    second = state.terminal_record not in (None, record_id)
    reason = f"a second terminal record {record_id}" if second else ""
    return replace(
        state,
        terminal_record=record_id,
        inconsistent=state.inconsistent or reason,
    )


@_evolve.register
def _related(
    event: ExecutionRelationCreated, state: ExecutionAggregate, record_id: str
) -> ExecutionAggregate:
    if event.parent_execution_id != state.execution_id:
        return state
    relation = ExecutionRelation.of(event, record_id)
    return replace(state, relations=(*state.relations, relation))


@_evolve.register
def _published(
    event: FactPublished, state: ExecutionAggregate, record_id: str
) -> ExecutionAggregate:
    del event, record_id
    return replace(state, published_count=state.published_count + 1)
