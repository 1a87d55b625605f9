"""The execution lifecycle: schema builders and the pure fold (kernel-spec section 9).

An execution is an owner path (its id) holding ``created`` (declaration), then
``started``, then one or more terminal records (``completed``/``failed``).
:func:`project_execution` folds that path into an :class:`Execution`; the fold
is incremental (:func:`fold_execution_record`) so a view kept current record
by record equals one rebuilt from scratch.

The draft and batch builders are pure; :func:`publish_execution_frontier` is
the one function here that talks to a store, through the structural
:class:`FrontierPublisher` protocol.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from functools import reduce
from typing import Final, Protocol

from goatherd.domain.contexts import AppendContext, OperationContext, ReadContext
from goatherd.domain.records import (
    AppendBatch,
    AppendGroup,
    Cut,
    CutSpec,
    Payload,
    Record,
    RecordDraft,
    RecordMode,
    TraceSlice,
    VisibilityProfile,
    VisibleRecord,
)
from goatherd.projections.errors import PayloadHiddenError, ProjectionInputError
from goatherd.projections.schema_library import (
    EXECUTION_PROJECTION,
    SCHEMA_EXECUTION_COMPLETED,
    SCHEMA_EXECUTION_CREATED,
    SCHEMA_EXECUTION_FAILED,
    SCHEMA_EXECUTION_STARTED,
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
_TERMINAL_SCHEMAS: Final = (SCHEMA_EXECUTION_COMPLETED, SCHEMA_EXECUTION_FAILED)


class ExecutionStatus(StrEnum):
    """The projected lifecycle state of an execution."""

    PENDING = "pending"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"


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
    return RecordDraft(
        mode=RecordMode.DECLARATION,
        schema_ref=SCHEMA_EXECUTION_CREATED,
        kind_label="execution_created",
        payload={
            "execution_id": execution_id,
            "task_ref": task_ref,
            "inputs": dict(inputs),
            "parent_execution_id": parent_execution_id,
        },
    )


def execution_started(execution_id: str) -> RecordDraft:
    """Build the ``started`` capture."""
    return RecordDraft(
        mode=RecordMode.CAPTURE,
        schema_ref=SCHEMA_EXECUTION_STARTED,
        kind_label="execution_started",
        payload={"execution_id": execution_id},
    )


def execution_completed(
    execution_id: str, outputs: Mapping[str, object]
) -> RecordDraft:
    """Build the terminal-success capture."""
    return RecordDraft(
        mode=RecordMode.CAPTURE,
        schema_ref=SCHEMA_EXECUTION_COMPLETED,
        kind_label="execution_completed",
        payload={"execution_id": execution_id, "outputs": dict(outputs)},
    )


def execution_failed(execution_id: str, error: str) -> RecordDraft:
    """Build the terminal-failure capture."""
    return RecordDraft(
        mode=RecordMode.CAPTURE,
        schema_ref=SCHEMA_EXECUTION_FAILED,
        kind_label="execution_failed",
        payload={"execution_id": execution_id, "error": error},
    )


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


def _dict_copy(value: object) -> dict[str, object]:
    return dict(value) if isinstance(value, dict) else {}


def _fold_created(state: Execution, payload: Payload) -> Execution:
    parent = payload.get("parent_execution_id")
    return replace(
        state,
        task_ref=str(payload.get("task_ref") or ""),
        parent_execution_id=None if parent is None else str(parent),
        inputs=_dict_copy(payload.get("inputs")),
        status=ExecutionStatus.PENDING,
    )


def fold_execution_record(state: Execution, record: VisibleRecord) -> Execution:
    """Fold one record of the execution's path into ``state`` (pure, total).

    Records whose payload names another execution, and records of other
    schemas, leave ``state`` unchanged.

    Raises:
        PayloadHiddenError: when ``record`` is a shape.
    """
    fact = require_record(record, "execution projection")
    payload = fact.payload
    named = payload.get("execution_id")
    if named is not None and named != state.execution_id:
        return state
    schema = fact.envelope.schema_ref
    if schema == SCHEMA_EXECUTION_CREATED:
        return _fold_created(state, payload)
    if schema == SCHEMA_EXECUTION_STARTED:
        return replace(
            state, started_fact_id=fact.record_id, status=ExecutionStatus.RUNNING
        )
    if schema == SCHEMA_EXECUTION_COMPLETED:
        return replace(
            state,
            outputs=_dict_copy(payload.get("outputs")),
            error=None,
            terminal_fact_id=fact.record_id,
            status=ExecutionStatus.SUCCEEDED,
        )
    if schema == SCHEMA_EXECUTION_FAILED:
        return replace(
            state,
            outputs={},
            error=str(payload.get("error") or ""),
            terminal_fact_id=fact.record_id,
            status=ExecutionStatus.FAILED,
        )
    return state


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
            (kernel-spec sections 8 and 15) for a shape-only slice, or a
            record shape on the path.
        ProjectionModeError: unless the slice's mode filter is ``both``.
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
