"""Projection specs and schema libraries.

A :class:`ProjectionSpec` declares what a pure projection needs from a slice:
its mode filter and whether payloads must be visible.
:func:`ensure_projection_compatible` enforces both before any fold runs. A
:class:`SchemaLibrary` groups the schema refs of one ring with the projections
that read them; the execution and relation libraries of the kernel live here.
The refs themselves are spelled once, by the event classes in
``goatherd.domain.events``; the ``SCHEMA_EXECUTION_*`` names are the seed's.

Pure values only: no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Final, Protocol

from goatherd.domain.events import (
    ExecutionCompleted,
    ExecutionCreated,
    ExecutionFailed,
    ExecutionRelationCreated,
    ExecutionStarted,
)
from goatherd.domain.records import TraceSlice, VisibilityProfile
from goatherd.projections.errors import ProjectionModeError

__all__ = [
    "EXECUTION_PROJECTION",
    "EXECUTION_RELATION_PROJECTION",
    "EXECUTION_RELATION_SCHEMA_LIBRARY",
    "EXECUTION_SCHEMA_LIBRARY",
    "ProjectionModeRequirement",
    "ProjectionSpec",
    "SCHEMA_EXECUTION_COMPLETED",
    "SCHEMA_EXECUTION_CREATED",
    "SCHEMA_EXECUTION_FAILED",
    "SCHEMA_EXECUTION_RELATION",
    "SCHEMA_EXECUTION_STARTED",
    "SchemaLibrary",
    "StaticSchemaLibrary",
    "ensure_projection_compatible",
]

# The seed's schema constants, spelled once by the event classes.
SCHEMA_EXECUTION_CREATED: Final = ExecutionCreated.SCHEMA
SCHEMA_EXECUTION_STARTED: Final = ExecutionStarted.SCHEMA
SCHEMA_EXECUTION_COMPLETED: Final = ExecutionCompleted.SCHEMA
SCHEMA_EXECUTION_FAILED: Final = ExecutionFailed.SCHEMA
SCHEMA_EXECUTION_RELATION: Final = ExecutionRelationCreated.SCHEMA


class ProjectionModeRequirement(StrEnum):
    """What a projection needs a slice's mode filter to be (``any`` accepts all)."""

    DECLARATIONS_ONLY = "declarations_only"
    CAPTURES_ONLY = "captures_only"
    BOTH = "both"
    ANY = "any"


@dataclass(frozen=True, slots=True)
class ProjectionSpec:
    """The kernel requirements of one pure projection.

    Attributes:
        name: the projection's name, used in error messages.
        mode_requirement: a :class:`ProjectionModeRequirement` value.
        requires_payload: whether a ``shape_only`` slice is rejected.
        accepts_anchors: descriptive only (the folds check payload visibility).
    """

    name: str
    mode_requirement: str = ProjectionModeRequirement.BOTH
    requires_payload: bool = True
    accepts_anchors: bool = True


def ensure_projection_compatible(slice_: TraceSlice, spec: ProjectionSpec) -> None:
    """Check that ``slice_`` satisfies ``spec`` before a projection folds it.

    A payload-requiring projection rejects a ``shape_only`` slice (it would
    otherwise fold an empty path into a plausible pending value), and a mode
    requirement other than ``any`` must equal the slice's mode filter.

    Raises:
        ProjectionModeError: naming the projection, the requirement and what the
            slice carries.
    """
    if spec.requires_payload and slice_.visibility_profile == (
        VisibilityProfile.SHAPE_ONLY
    ):
        raise ProjectionModeError(
            f"projection {spec.name!r} requires payload-visible facts; "
            f"got visibility_profile={str(slice_.visibility_profile)!r}"
        )
    requirement = str(spec.mode_requirement)
    if requirement not in (ProjectionModeRequirement.ANY, str(slice_.mode_filter)):
        raise ProjectionModeError(
            f"projection {spec.name!r} requires mode_filter={requirement!r}; "
            f"got {str(slice_.mode_filter)!r}"
        )


class SchemaLibrary(Protocol):
    """A named set of schema refs and the projections that read them."""

    @property
    def name(self) -> str:
        """The library's name."""
        ...

    @property
    def schema_refs(self) -> Sequence[str]:
        """The schema refs the library owns, in declaration order."""
        ...

    @property
    def projection_specs(self) -> Sequence[ProjectionSpec]:
        """The projections over those schemas."""
        ...


@dataclass(frozen=True, slots=True)
class StaticSchemaLibrary:
    """A :class:`SchemaLibrary` given by value."""

    name: str
    schema_refs: tuple[str, ...] = ()
    projection_specs: tuple[ProjectionSpec, ...] = ()


EXECUTION_PROJECTION: Final = ProjectionSpec(name="shepherd2.execution.project")
EXECUTION_RELATION_PROJECTION: Final = ProjectionSpec(
    name="shepherd2.execution_relation.project"
)
EXECUTION_SCHEMA_LIBRARY: Final = StaticSchemaLibrary(
    name="shepherd2.execution",
    schema_refs=(
        SCHEMA_EXECUTION_CREATED,
        SCHEMA_EXECUTION_STARTED,
        SCHEMA_EXECUTION_COMPLETED,
        SCHEMA_EXECUTION_FAILED,
    ),
    projection_specs=(EXECUTION_PROJECTION,),
)
EXECUTION_RELATION_SCHEMA_LIBRARY: Final = StaticSchemaLibrary(
    name="shepherd2.execution_relation",
    schema_refs=(SCHEMA_EXECUTION_RELATION,),
    projection_specs=(EXECUTION_RELATION_PROJECTION,),
)
