"""Parent-owned execution relations.

A relation record (``spawned``, ``adopted`` or ``abandoned``) lives on the
PARENT execution's owner path. :func:`project_execution_relations` lists every
relation event on that path in path order; abandoning keeps the relation id,
so later folds (effective history) can drop the child. Records decode into
``ExecutionRelationCreated`` (strictly: a relation record with a missing key
or an unknown kind raises ``RecordDecodeError`` naming it).

Pure: builders and folds only.
"""

from __future__ import annotations

from collections.abc import Sequence

from goatherd.domain.events import ExecutionRelationCreated, RelationKind, decode_fact
from goatherd.domain.execution import ExecutionRelation
from goatherd.domain.records import (
    AppendBatch,
    AppendGroup,
    Record,
    RecordDraft,
    TraceSlice,
    VisibleRecord,
)
from goatherd.projections.errors import ProjectionInputError
from goatherd.projections.execution import require_record
from goatherd.projections.schema_library import (
    EXECUTION_RELATION_PROJECTION,
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


def execution_relation_created(
    relation_id: str,
    relation_kind: str,
    parent_execution_id: str,
    child_execution_id: str,
    child_frontier_id: str | None = None,
) -> RecordDraft:
    """Build the relation capture (an absent child frontier is JSON null).

    Raises:
        ValueError: ``relation_kind`` is not spawned, adopted or abandoned.
    """
    return ExecutionRelationCreated(
        relation_id=relation_id,
        relation_kind=RelationKind(relation_kind),
        parent_execution_id=parent_execution_id,
        child_execution_id=child_execution_id,
        child_frontier_id=child_frontier_id,
    ).draft()


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
    """Build the relation append: one group on the PARENT's owner path.

    Raises:
        ValueError: ``relation_kind`` is not spawned, adopted or abandoned.
    """
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


def execution_relation_from_fact(record: Record) -> ExecutionRelation:
    """Parse one relation record.

    Raises:
        ProjectionInputError: for a record of another schema.
        RecordDecodeError: a relation record that does not decode (a missing
            key, an unknown relation kind).
    """
    event = decode_fact(record).event
    if not isinstance(event, ExecutionRelationCreated):
        schema = record.envelope.schema_ref
        raise ProjectionInputError(f"expected relation_created fact, got {schema!r}")
    return ExecutionRelation.of(event, record.record_id)


def fold_relation_record(
    relations: tuple[ExecutionRelation, ...], record: VisibleRecord, parent: str
) -> tuple[ExecutionRelation, ...]:
    """Append ``record``'s relation if it is one of ``parent``'s (pure).

    Raises:
        PayloadHiddenError: when ``record`` is a shape.
        RecordDecodeError: a relation record that does not decode.
    """
    fact = require_record(record, "execution relation projection")
    event = decode_fact(fact).event
    if not isinstance(event, ExecutionRelationCreated):
        return relations
    if event.parent_execution_id != parent:
        return relations
    return (*relations, ExecutionRelation.of(event, fact.record_id))


def project_execution_relations(
    slice_: TraceSlice, parent: str
) -> tuple[ExecutionRelation, ...]:
    """List the relation events on ``parent``'s owner path, in path order.

    Every event is listed, ``abandoned`` included; relations naming another
    parent are skipped.

    Raises:
        ProjectionModeError: unless the slice is ``both`` and payload-visible.
        PayloadHiddenError: when the path holds a record shape.
        RecordDecodeError: a relation record that does not decode.
    """
    ensure_projection_compatible(slice_, EXECUTION_RELATION_PROJECTION)
    relations: tuple[ExecutionRelation, ...] = ()
    for record_id in slice_.owner_paths.get(parent, ()):
        relations = fold_relation_record(
            relations, slice_.facts_by_id[record_id], parent
        )
    return relations
