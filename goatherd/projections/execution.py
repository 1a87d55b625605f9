"""The execution lifecycle: draft builders and the kernel's pure fold.

An execution is an owner path (its id) holding ``created`` (declaration), then
``started``, then one or more terminal records (``completed``/``failed``).
:func:`project_execution` folds that path into an :class:`Execution`; the fold
is incremental (:func:`fold_execution_record`) so a view kept current record
by record equals one rebuilt from scratch. Records are decoded into the typed
events of ``goatherd.domain.events`` (strictly: a lifecycle record that does
not decode raises ``RecordDecodeError`` naming it) and the fold dispatches on
the event class. It keeps the kernel's tolerant values: records naming another
execution are skipped, a later ``created`` resets the status, the last
terminal record wins. The task runtime decides on
:class:`~goatherd.domain.ExecutionAggregate`, which folds to the same values
and also refuses to act on such contradictions.

The draft and batch builders are pure; :func:`publish_execution_frontier` is
the one function here that talks to a store, through the structural
:class:`FrontierPublisher` protocol.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import reduce, singledispatch
from typing import Final, Protocol

from goatherd.domain.contexts import AppendContext, OperationContext, ReadContext
from goatherd.domain.events import (
    ExecutionCompleted,
    ExecutionCreated,
    ExecutionFailed,
    ExecutionStarted,
    RuntimeEvent,
    decode_fact,
)
from goatherd.domain.execution import ExecutionStatus
from goatherd.domain.records import (
    AppendBatch,
    AppendGroup,
    Cut,
    CutSpec,
    Record,
    RecordDraft,
    TraceSlice,
    VisibilityProfile,
    VisibleRecord,
)
from goatherd.projections.errors import PayloadHiddenError, ProjectionInputError
from goatherd.projections.schema_library import (
    EXECUTION_PROJECTION,
    ensure_projection_compatible,
)

__all__ = [
    "EXECUTION_SCHEMA_READ_CONTEXT",
    "Execution",
    "ExecutionStatus",
    "FrontierPublisher",
    "complete_execution_batch",
    "create_execution_batch",
    "execution_completed",
    "execution_created",
    "execution_failed",
    "execution_started",
    "fail_execution_batch",
    "fold_execution_record",
    "project_execution",
    "project_execution_slice",
    "publish_execution_frontier",
    "require_record",
    "synthesize_cutoff",
]

EXECUTION_SCHEMA_READ_CONTEXT: Final = ReadContext(actor_ref="execution:schema")
_TERMINAL_SCHEMAS: Final = (ExecutionCompleted.SCHEMA, ExecutionFailed.SCHEMA)


@dataclass(frozen=True, slots=True)
class Execution:
    """An execution as folded from its owner path.

    Attributes:
        execution_id: the owner path folded.
        task_ref: from the latest ``created`` record ("" before one).
        parent_execution_id: the spawning execution, or ``None``.
        status: the latest lifecycle state; a later ``created`` resets it.
        inputs: from ``created``; outputs: from the latest ``completed``.
        error: from the latest ``failed`` (``None`` after a ``completed``).
        started_fact_id: the latest ``started`` record id.
        terminal_fact_id: the latest terminal record id (the last one wins).
        cutoff: the cut the fold stopped at (``None`` inside an incremental fold).
    """

    execution_id: str
    task_ref: str = ""
    parent_execution_id: str | None = None
    status: ExecutionStatus = ExecutionStatus.PENDING
    inputs: Mapping[str, object] = field(default_factory=dict)
    outputs: Mapping[str, object] = field(default_factory=dict)
    error: str | None = None
    started_fact_id: str | None = None
    terminal_fact_id: str | None = None
    cutoff: Cut | None = None


# ----------------------------------------------------------------- builders


def execution_created(
    execution_id: str,
    task_ref: str,
    inputs: Mapping[str, object],
    parent_execution_id: str | None = None,
) -> RecordDraft:
    """Build the ``created`` declaration (an absent parent is JSON null)."""
    return ExecutionCreated(
        execution_id=execution_id,
        task_ref=task_ref,
        inputs=dict(inputs),
        parent_execution_id=parent_execution_id,
    ).draft()


def execution_started(execution_id: str) -> RecordDraft:
    """Build the ``started`` capture."""
    return ExecutionStarted(execution_id=execution_id).draft()


def execution_completed(
    execution_id: str, outputs: Mapping[str, object]
) -> RecordDraft:
    """Build the terminal-success capture."""
    return ExecutionCompleted(execution_id=execution_id, outputs=dict(outputs)).draft()


def execution_failed(execution_id: str, error: str) -> RecordDraft:
    """Build the terminal-failure capture."""
    return ExecutionFailed(execution_id=execution_id, error=error).draft()


def _one_group_batch(
    append_intent_id: str,
    owner: str,
    drafts: tuple[RecordDraft, ...],
    caused_by: Sequence[str],
) -> AppendBatch:
    group = AppendGroup(
        trace_owner_id=owner, causal_parents=tuple(caused_by), fact_drafts=drafts
    )
    return AppendBatch(append_intent_id=append_intent_id, groups=(group,))


def create_execution_batch(
    *,
    append_intent_id: str,
    execution_id: str,
    task_ref: str,
    inputs: Mapping[str, object],
    parent_execution_id: str | None = None,
    caused_by: Sequence[str] = (),
) -> AppendBatch:
    """Build the create append: ``created`` then ``started`` on the execution path.

    Both drafts take exactly ``caused_by`` (the group parents); ``started`` does
    not cite ``created`` (the vectors pin this).
    """
    drafts = (
        execution_created(execution_id, task_ref, inputs, parent_execution_id),
        execution_started(execution_id),
    )
    return _one_group_batch(append_intent_id, execution_id, drafts, caused_by)


def complete_execution_batch(
    *,
    append_intent_id: str,
    execution_id: str,
    outputs: Mapping[str, object],
    caused_by: Sequence[str] = (),
) -> AppendBatch:
    """Build the terminal-success append (one draft on the execution path)."""
    drafts = (execution_completed(execution_id, outputs),)
    return _one_group_batch(append_intent_id, execution_id, drafts, caused_by)


def fail_execution_batch(
    *,
    append_intent_id: str,
    execution_id: str,
    error: str,
    caused_by: Sequence[str] = (),
) -> AppendBatch:
    """Build the terminal-failure append (one draft on the execution path)."""
    drafts = (execution_failed(execution_id, error),)
    return _one_group_batch(append_intent_id, execution_id, drafts, caused_by)


# ------------------------------------------------------------------- folding


def require_record(record: VisibleRecord, projection: str) -> Record:
    """Return ``record`` if its payload is visible.

    Raises:
        PayloadHiddenError: when ``record`` is a shape.
    """
    if not isinstance(record, Record):
        raise PayloadHiddenError(
            f"{projection} requires payload-visible facts; "
            f"{record.record_id} is a shape"
        )
    return record


def fold_execution_record(state: Execution, record: VisibleRecord) -> Execution:
    """Fold one record of the execution's path into ``state`` (pure).

    Records whose payload names another execution, and records of other
    schemas, leave ``state`` unchanged.

    Raises:
        PayloadHiddenError: when ``record`` is a shape.
        RecordDecodeError: a lifecycle record that does not decode.
    """
    fact = require_record(record, "execution projection")
    return _fold(decode_fact(fact).event, state, fact.record_id)


def _names_other(state: Execution, named: str | None) -> bool:
    return named is not None and named != state.execution_id


@singledispatch
def _fold(event: RuntimeEvent, state: Execution, record_id: str) -> Execution:
    del event, record_id
    return state


@_fold.register
def _created(event: ExecutionCreated, state: Execution, record_id: str) -> Execution:
    del record_id
    if _names_other(state, event.execution_id):
        return state
    return replace(
        state,
        task_ref=event.task_ref,
        parent_execution_id=event.parent_execution_id,
        inputs=dict(event.inputs),
        status=ExecutionStatus.PENDING,
    )


@_fold.register
def _started(event: ExecutionStarted, state: Execution, record_id: str) -> Execution:
    if _names_other(state, event.execution_id):
        return state
    return replace(state, started_fact_id=record_id, status=ExecutionStatus.RUNNING)


@_fold.register
def _completed(
    event: ExecutionCompleted, state: Execution, record_id: str
) -> Execution:
    if _names_other(state, event.execution_id):
        return state
    return replace(
        state,
        outputs=dict(event.outputs),
        error=None,
        terminal_fact_id=record_id,
        status=ExecutionStatus.SUCCEEDED,
    )


@_fold.register
def _failed(event: ExecutionFailed, state: Execution, record_id: str) -> Execution:
    if _names_other(state, event.execution_id):
        return state
    return replace(
        state,
        outputs={},
        error=event.error,
        terminal_fact_id=record_id,
        status=ExecutionStatus.FAILED,
    )


def synthesize_cutoff(slice_: TraceSlice, target: str) -> Cut:
    """Return the slice's frontier, or a cut through the target path's last record."""
    if slice_.frontier is not None:
        return replace(slice_.frontier)
    path = slice_.owner_paths.get(target, ())
    if not path:
        return Cut("", target, "", -1)
    last = path[-1]
    return Cut("", target, last, slice_.facts_by_id[last].owner_ordinal)


def _require_payloads(slice_: TraceSlice) -> None:
    if slice_.visibility_profile == VisibilityProfile.SHAPE_ONLY:
        raise PayloadHiddenError(
            f"projection {EXECUTION_PROJECTION.name!r} requires payload-visible "
            "facts; got a shape_only slice"
        )


def _path_records(slice_: TraceSlice, target: str) -> Iterable[VisibleRecord]:
    return (slice_.facts_by_id[rid] for rid in slice_.owner_paths.get(target, ()))


def project_execution(
    slice_: TraceSlice, target: str, *, cutoff: Cut | None = None
) -> Execution:
    """Fold the target's owner path in ``slice_`` into an :class:`Execution`.

    A missing owner path folds to a ``pending`` execution. The cutoff is the one
    given, else the slice's frontier, else one synthesized from the path.

    Raises:
        PayloadHiddenError: a ``TypeError`` "requires payload-visible facts"
            for a shape-only slice, or a record shape on the path.
        ProjectionModeError: unless the slice's mode filter is ``both``.
        RecordDecodeError: a lifecycle record on the path does not decode.
    """
    _require_payloads(slice_)
    ensure_projection_compatible(slice_, EXECUTION_PROJECTION)
    folded = reduce(
        fold_execution_record, _path_records(slice_, target), Execution(target)
    )
    if cutoff is None:
        cutoff = synthesize_cutoff(slice_, target)
    return replace(folded, cutoff=cutoff)


project_execution_slice = project_execution


class FrontierPublisher(Protocol):
    """The part of the trace store that :func:`publish_execution_frontier` uses."""

    def read_fact(
        self,
        context: ReadContext | OperationContext,
        record_id: str,
        visibility: str | None = None,
    ) -> VisibleRecord:
        """Read one record by id."""
        ...

    def publish_cut(
        self, context: AppendContext | OperationContext, spec: CutSpec
    ) -> Cut:
        """Publish a cut through the append path."""
        ...


def publish_execution_frontier(
    store: FrontierPublisher,
    append_context: AppendContext | OperationContext,
    *,
    frontier_id: str,
    target_execution_id: str,
    through_fact_id: str,
    publisher_execution_id: str | None = None,
    append_intent_id: str | None = None,
    caused_by: Sequence[str] = (),
) -> Cut:
    """Publish a terminal frontier over an execution path (idempotent by intent).

    The through record must be payload-visible and terminal (completed or
    failed); otherwise nothing is published.

    Raises:
        PayloadHiddenError: when the through record reads as a shape.
        ProjectionInputError: when the through record is not terminal.
    """
    through = store.read_fact(EXECUTION_SCHEMA_READ_CONTEXT, through_fact_id)
    record = require_record(through, "terminal execution frontier")
    if record.envelope.schema_ref not in _TERMINAL_SCHEMAS:
        raise ProjectionInputError(
            "terminal execution frontier must target a terminal lifecycle fact"
        )
    spec = CutSpec(
        frontier_id=frontier_id,
        target_trace_owner_id=target_execution_id,
        through_fact_id=through_fact_id,
        publisher_trace_owner_id=publisher_execution_id,
        append_intent_id=append_intent_id,
        caused_by=tuple(caused_by),
    )
    return store.publish_cut(append_context, spec)
