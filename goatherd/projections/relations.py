"""Parent-owned execution relations (kernel-spec section 10.1).

A relation record (``spawned``, ``adopted`` or ``abandoned``) lives on the
PARENT execution's owner path. :func:`project_execution_relations` lists every
relation event on that path in path order; abandoning keeps the relation id,
so later folds (effective history) can drop the child.

Pure: builders and folds only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from goatherd.domain.records import (
    AppendBatch,
    AppendGroup,
    Record,
    RecordDraft,
    RecordMode,
    TraceSlice,
    VisibleRecord,
)
from goatherd.projections.errors import ProjectionInputError
from goatherd.projections.execution import require_record
from goatherd.projections.schema_library import (
    EXECUTION_RELATION_PROJECTION,
    SCHEMA_EXECUTION_RELATION,
    ensure_projection_compatible,
)

__all__ = [
    "ExecutionRelation",
    "RelationKind",
    "create_execution_relation_batch",
    "execution_relation_created",
    "execution_relation_from_fact",
    "fold_relation_record",
    "project_execution_relations",
]


class RelationKind(StrEnum):
    """How a child execution relates to its parent."""

    SPAWNED = "spawned"
    ADOPTED = "adopted"
    ABANDONED = "abandoned"


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


def execution_relation_created(
    relation_id: str,
    relation_kind: str,
    parent_execution_id: str,
    child_execution_id: str,
    child_frontier_id: str | None = None,
) -> RecordDraft:
    """Build the relation capture (an absent child frontier is JSON null)."""
    return RecordDraft(
        mode=RecordMode.CAPTURE,
        schema_ref=SCHEMA_EXECUTION_RELATION,
        kind_label="relation_created",
        payload={
            "relation_id": relation_id,
            "relation_kind": str(relation_kind),
            "parent_execution_id": parent_execution_id,
            "child_execution_id": child_execution_id,
            "child_frontier_id": child_frontier_id,
        },
    )


def create_execution_relation_batch(
    *,
    append_intent_id: str,
    relation_id: str,
    relation_kind: str,
    parent_execution_id: str,
    child_execution_id: str,
    child_frontier_id: str | None = None,
    caused_by: Sequence[str] = (),
) -> AppendBatch:
    """Build the relation append: one group on the PARENT's owner path."""
    draft = execution_relation_created(
        relation_id,
        relation_kind,
        parent_execution_id,
        child_execution_id,
        child_frontier_id,
    )
    group = AppendGroup(
        trace_owner_id=parent_execution_id,
        causal_parents=tuple(caused_by),
        fact_drafts=(draft,),
    )
    return AppendBatch(append_intent_id=append_intent_id, groups=(group,))


def _kind(value: object) -> RelationKind:
    if isinstance(value, str) and value in RelationKind.__members__.values():
        return RelationKind(value)
    raise ProjectionInputError(f"unknown execution relation kind: {value}")


def execution_relation_from_fact(record: Record) -> ExecutionRelation:
    """Parse one relation record; missing strings default to "".

    Raises:
        ProjectionInputError: for another schema or an unknown relation kind.
    """
    schema = record.envelope.schema_ref
    if schema != SCHEMA_EXECUTION_RELATION:
        raise ProjectionInputError(f"expected relation_created fact, got {schema!r}")
    payload = record.payload
    frontier = payload.get("child_frontier_id")
    return ExecutionRelation(
        relation_id=str(payload.get("relation_id") or ""),
        relation_kind=_kind(payload.get("relation_kind")),
        parent_execution_id=str(payload.get("parent_execution_id") or ""),
        child_execution_id=str(payload.get("child_execution_id") or ""),
        child_frontier_id=None if frontier is None else str(frontier),
        created_fact_id=record.record_id,
    )


def fold_relation_record(
    relations: tuple[ExecutionRelation, ...], record: VisibleRecord, parent: str
) -> tuple[ExecutionRelation, ...]:
    """Append ``record``'s relation if it is one of ``parent``'s (pure, total).

    Raises:
        PayloadHiddenError: when ``record`` is a shape.
        ProjectionInputError: for an unknown relation kind.
    """
    fact = require_record(record, "execution relation projection")
    if fact.envelope.schema_ref != SCHEMA_EXECUTION_RELATION:
        return relations
    relation = execution_relation_from_fact(fact)
    if relation.parent_execution_id != parent:
        return relations
    return (*relations, relation)


def project_execution_relations(
    slice_: TraceSlice, parent: str
) -> tuple[ExecutionRelation, ...]:
    """List the relation events on ``parent``'s owner path, in path order.

    Every event is listed, ``abandoned`` included; relations naming another
    parent are skipped.

    Raises:
        ProjectionModeError: unless the slice is ``both`` and payload-visible.
        PayloadHiddenError: when the path holds a record shape.
        ProjectionInputError: for an unknown relation kind.
    """
    ensure_projection_compatible(slice_, EXECUTION_RELATION_PROJECTION)
    relations: tuple[ExecutionRelation, ...] = ()
    for record_id in slice_.owner_paths.get(parent, ()):
        relations = fold_relation_record(
            relations, slice_.facts_by_id[record_id], parent
        )
    return relations
