"""Effective history: root execution, active children, published facts.

The root's owner path carries relation events and published facts; children
are projected from their own (frontier-resolved) slices, matched to relations
by frontier id. A relation whose latest event is ``abandoned`` is inactive: it
stays in :attr:`EffectiveHistory.relations` but yields no child.

Pure: folds over slices only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from goatherd.domain.events import FactPublished, decode_fact
from goatherd.domain.execution import active_relations
from goatherd.domain.records import TraceSlice, VisibleRecord
from goatherd.projections.execution import Execution, project_execution, require_record
from goatherd.projections.relations import (
    ExecutionRelation,
    project_execution_relations,
)

__all__ = [
    "EffectiveChild",
    "EffectiveHistory",
    "PublishedFact",
    "active_relations",
    "project_effective_history",
    "published_fact_from_record",
]


@dataclass(frozen=True, slots=True)
class PublishedFact:
    """A fact an execution published (``TaskControl.publish``)."""

    fact_id: str
    kind: str
    data: Mapping[str, object] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class EffectiveChild:
    """An active child: the relation that links it and its projected execution."""

    relation: ExecutionRelation
    execution: Execution


@dataclass(frozen=True, slots=True)
class EffectiveHistory:
    """The effective history of one execution.

    Attributes:
        root: the projected root execution.
        relations: every relation event on the root path, in path order.
        children: the active children with a matching child slice.
        published_facts: the root path's published facts, in path order.
    """

    root: Execution
    relations: tuple[ExecutionRelation, ...] = ()
    children: tuple[EffectiveChild, ...] = ()
    published_facts: tuple[PublishedFact, ...] = ()


def published_fact_from_record(record: VisibleRecord) -> PublishedFact | None:
    """Return the published fact ``record`` carries, or ``None`` for other schemas.

    Raises:
        PayloadHiddenError: when ``record`` is a shape.
        RecordDecodeError: a published fact (or another execution record)
            that does not decode.
    """
    fact = require_record(record, "effective history projection")
    event = decode_fact(fact).event
    if not isinstance(event, FactPublished):
        return None
    return PublishedFact(fact_id=fact.record_id, kind=event.kind, data=dict(event.data))


def _published_facts(slice_: TraceSlice, owner: str) -> tuple[PublishedFact, ...]:
    facts = (
        published_fact_from_record(slice_.facts_by_id[rid])
        for rid in slice_.owner_paths.get(owner, ())
    )
    return tuple(fact for fact in facts if fact is not None)


def _children(
    relations: Sequence[ExecutionRelation], child_slices: Sequence[TraceSlice]
) -> tuple[EffectiveChild, ...]:
    by_frontier = {
        s.frontier.frontier_id: s for s in child_slices if s.frontier is not None
    }
    children = []
    for relation in active_relations(relations):
        child_slice = by_frontier.get(relation.child_frontier_id or "")
        if relation.child_frontier_id is None or child_slice is None:
            continue
        execution = project_execution(child_slice, relation.child_execution_id)
        children.append(EffectiveChild(relation, execution))
    return tuple(children)


def project_effective_history(
    root_slice: TraceSlice,
    root_owner: str,
    *,
    child_slices: Sequence[TraceSlice] = (),
) -> EffectiveHistory:
    """Project the root execution, its active children and its published facts.

    A child slice is matched to an active relation by its frontier id; active
    relations without a matching slice are skipped.

    Raises:
        ProjectionModeError: when a slice is not ``both`` and payload-visible.
        PayloadHiddenError: when a folded path holds a record shape.
        ProjectionInputError: for an unknown relation kind.
    """
    root = project_execution(root_slice, root_owner)
    relations = project_execution_relations(root_slice, root_owner)
    return EffectiveHistory(
        root=root,
        relations=relations,
        children=_children(relations, child_slices),
        published_facts=_published_facts(root_slice, root_owner),
    )
