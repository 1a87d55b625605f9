"""The execution projections read from a store through published frontiers.

Each function resolves a cut with ``resolve_cut`` and folds the slice; nothing
is written. They take the structural :class:`~goatherd.domain.TraceStore`.
"""

from __future__ import annotations

from goatherd.domain.contexts import OperationContext, ReadContext
from goatherd.domain.records import Cut
from goatherd.domain.store import TraceStore
from goatherd.projections.execution import Execution, project_execution
from goatherd.projections.history import (
    EffectiveHistory,
    active_relations,
    project_effective_history,
)
from goatherd.projections.relations import (
    ExecutionRelation,
    project_execution_relations,
)

__all__ = [
    "project_effective_history_from_store",
    "project_execution_from_store",
    "project_execution_relations_from_store",
]

_Read = ReadContext | OperationContext


def project_execution_from_store(
    store: TraceStore, read_context: _Read, cutoff: Cut
) -> Execution:
    """Resolve ``cutoff`` and project its target execution with that cutoff.

    Raises:
        TraceStoreError: an unknown frontier (``UnknownFrontierError``).
    """
    slice_ = store.resolve_cut(read_context, cutoff.frontier_id)
    return project_execution(slice_, cutoff.target_trace_owner_id, cutoff=cutoff)


def project_execution_relations_from_store(
    store: TraceStore, read_context: _Read, cutoff: Cut
) -> tuple[ExecutionRelation, ...]:
    """Resolve ``cutoff`` and list the relations on its target (parent) path."""
    slice_ = store.resolve_cut(read_context, cutoff.frontier_id)
    return project_execution_relations(slice_, cutoff.target_trace_owner_id)


def project_effective_history_from_store(
    store: TraceStore, read_context: _Read, cutoff: Cut
) -> EffectiveHistory:
    """Resolve the root frontier and each active child's frontier, then project.

    Raises:
        TraceStoreError: when a root or child frontier is unknown.
    """
    root_slice = store.resolve_cut(read_context, cutoff.frontier_id)
    owner = cutoff.target_trace_owner_id
    relations = project_execution_relations(root_slice, owner)
    child_slices = tuple(
        store.resolve_cut(read_context, relation.child_frontier_id)
        for relation in active_relations(relations)
        if relation.child_frontier_id is not None
    )
    return project_effective_history(root_slice, owner, child_slices=child_slices)
