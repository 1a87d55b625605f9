"""Execution events: the task runtime's lifecycle, relations and published facts.

An execution is an owner path (its id). ``execution.created`` (a declaration:
task ref, inputs, parent) and ``execution.started`` open it; a terminal
``execution.completed`` or ``execution.failed`` ends it. A parent records
``execution_relation.created`` on its own path when it spawns, adopts or
abandons a child; a running body records ``runtime.published_fact`` on its
execution's path. These refs are the kernel ABI's (other implementations
write the same records, byte for byte), so they keep their ``shepherd2.``
names.

Every lifecycle payload names its execution; the kernel's projection folds a
record that leaves ``execution_id`` out into the path it sits on, so the key
is optional here. Parents and child frontiers are always present, as JSON
``null`` when absent.

The terminal frontier (``frontier.owner_cutoff``) is not an execution event:
the store writes it and verifies it when a cutoff is read, and the task
runtime only reads cutoffs through the store.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

from goatherd.domain.events.base import RuntimeEvent, register_event
from goatherd.domain.records import RecordMode

__all__ = [
    "ExecutionCompleted",
    "ExecutionCreated",
    "ExecutionFailed",
    "ExecutionRelationCreated",
    "ExecutionStarted",
    "FactPublished",
    "PUBLISHED_FACT_KIND_LABEL",
    "PUBLISHED_FACT_SCHEMA_REF",
    "RelationKind",
]

_DECL: Final = RecordMode.DECLARATION
_CAPT: Final = RecordMode.CAPTURE


class RelationKind(StrEnum):
    """How a child execution relates to its parent."""

    SPAWNED = "spawned"
    ADOPTED = "adopted"
    ABANDONED = "abandoned"


@register_event
@dataclass(frozen=True, kw_only=True)
class ExecutionCreated(RuntimeEvent):
    """An execution was declared (the id anchor of its path).

    Attributes:
        execution_id: the execution (its owner path).
        task_ref: the task the run executes, verbatim.
        inputs: the run's inputs.
        parent_execution_id: the spawning execution, or ``None``.
    """

    SCHEMA = "shepherd2.execution.created.v1"
    MODE = _DECL
    KIND_LABEL = "execution_created"

    task_ref: str
    inputs: Mapping[str, Any]
    parent_execution_id: str | None
    execution_id: str | None = None


@register_event
@dataclass(frozen=True, kw_only=True)
class ExecutionStarted(RuntimeEvent):
    """An execution's body started.

    Attributes:
        execution_id: the execution.
    """

    SCHEMA = "shepherd2.execution.started.v1"
    MODE = _CAPT
    KIND_LABEL = "execution_started"

    execution_id: str | None = None


@register_event
@dataclass(frozen=True, kw_only=True)
class ExecutionCompleted(RuntimeEvent):
    """An execution ended with outputs (terminal).

    Attributes:
        execution_id: the execution.
        outputs: what the body returned.
    """

    SCHEMA = "shepherd2.execution.completed.v1"
    MODE = _CAPT
    KIND_LABEL = "execution_completed"

    outputs: Mapping[str, Any]
    execution_id: str | None = None


@register_event
@dataclass(frozen=True, kw_only=True)
class ExecutionFailed(RuntimeEvent):
    """An execution ended with an error (terminal).

    Attributes:
        execution_id: the execution.
        error: ``"<Type>: <message>"`` of what failed.
    """

    SCHEMA = "shepherd2.execution.failed.v1"
    MODE = _CAPT
    KIND_LABEL = "execution_failed"

    error: str
    execution_id: str | None = None


@register_event
@dataclass(frozen=True, kw_only=True)
class ExecutionRelationCreated(RuntimeEvent):
    """A parent spawned, adopted or abandoned a child (the parent's path).

    Attributes:
        relation_id: stable across the events of one relation.
        relation_kind: spawned, adopted or abandoned.
        parent_execution_id: the parent.
        child_execution_id: the child.
        child_frontier_id: the child's terminal frontier, or ``None``.
    """

    SCHEMA = "shepherd2.execution_relation.created.v1"
    MODE = _CAPT
    KIND_LABEL = "relation_created"

    relation_id: str
    relation_kind: RelationKind
    parent_execution_id: str
    child_execution_id: str
    child_frontier_id: str | None


@register_event
@dataclass(frozen=True, kw_only=True)
class FactPublished(RuntimeEvent):
    """A running body published a fact (its execution's path).

    Attributes:
        kind: the fact's kind, chosen by the body.
        data: the fact's data.
    """

    SCHEMA = "shepherd2.runtime.published_fact.v1"
    MODE = _CAPT
    KIND_LABEL = "fact_published"

    kind: str
    data: Mapping[str, Any]


PUBLISHED_FACT_SCHEMA_REF: Final = FactPublished.SCHEMA
"""The schema ref of a published fact (the seed's ``SchemaRuntimePublishedFact``)."""

PUBLISHED_FACT_KIND_LABEL: Final = FactPublished.KIND_LABEL
"""The kind label a published fact is recorded with."""
