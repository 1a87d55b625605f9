"""Projection specs and schema libraries.

A :class:`ProjectionSpec` declares what a pure projection needs from a slice:
its mode filter and whether payloads must be visible.
:func:`ensure_projection_compatible` enforces both before any fold runs. A
:class:`SchemaLibrary` groups the schema refs of one ring with the projections
that read them; the execution and relation libraries of the kernel live here.
The refs themselves are spelled once, by the event classes in
``goatherd.domain.events``; the ``SCHEMA_EXECUTION_*`` names are the seed's.

Two libraries are the default (:func:`default_schema_libraries`):
:func:`shepherd_schemas`, the seed's ``ShepherdSchemas()`` (the execution and
relation rings with their projection specs, and the runtime-published-fact
ref as a known schema, folded by the history projection), and
:func:`runtime_schema_library`, every schema the runtime's typed events
decode (current and retired refs) with the runtime-state projection. The
execution projections check their slices against the kernel library's specs,
and ``goatherd verify`` decodes every record of a schema either library
knows (ADR 0059).

Pure values only: no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Final, Protocol, runtime_checkable

from goatherd.domain.events import (
    ExecutionCompleted,
    ExecutionCreated,
    ExecutionFailed,
    ExecutionRelationCreated,
    ExecutionStarted,
    FactPublished,
    runtime_schemas,
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
    "RUNTIME_STATE_PROJECTION",
    "SCHEMA_EXECUTION_COMPLETED",
    "SCHEMA_EXECUTION_CREATED",
    "SCHEMA_EXECUTION_FAILED",
    "SCHEMA_EXECUTION_RELATION",
    "SCHEMA_EXECUTION_STARTED",
    "SCHEMA_RUNTIME_PUBLISHED_FACT",
    "SHEPHERD_SCHEMA_LIBRARY",
    "SchemaLibrary",
    "StaticSchemaLibrary",
    "default_schema_libraries",
    "ensure_projection_compatible",
    "known_schema_refs",
    "runtime_schema_library",
    "schema_library_of",
    "shepherd_schemas",
]

# The seed's schema constants, spelled once by the event classes.
SCHEMA_EXECUTION_CREATED: Final = ExecutionCreated.SCHEMA
SCHEMA_EXECUTION_STARTED: Final = ExecutionStarted.SCHEMA
SCHEMA_EXECUTION_COMPLETED: Final = ExecutionCompleted.SCHEMA
SCHEMA_EXECUTION_FAILED: Final = ExecutionFailed.SCHEMA
SCHEMA_EXECUTION_RELATION: Final = ExecutionRelationCreated.SCHEMA
SCHEMA_RUNTIME_PUBLISHED_FACT: Final = FactPublished.SCHEMA


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


@runtime_checkable
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
SHEPHERD_SCHEMA_LIBRARY: Final = StaticSchemaLibrary(
    name="shepherd2",
    schema_refs=(
        *EXECUTION_SCHEMA_LIBRARY.schema_refs,
        *EXECUTION_RELATION_SCHEMA_LIBRARY.schema_refs,
        SCHEMA_RUNTIME_PUBLISHED_FACT,
    ),
    projection_specs=(
        *EXECUTION_SCHEMA_LIBRARY.projection_specs,
        *EXECUTION_RELATION_SCHEMA_LIBRARY.projection_specs,
    ),
)
RUNTIME_STATE_PROJECTION: Final = ProjectionSpec(name="goatherd.runtime_state")
"""The runtime-state projection's needs: both modes, payloads visible (it folds
the global log, not a slice, so nothing enforces this spec; it describes)."""


def shepherd_schemas() -> StaticSchemaLibrary:
    """Return the default kernel library (the seed's ``ShepherdSchemas()``).

    The execution and relation rings with their projection specs, plus the
    runtime-published-fact ref as a known schema: no projection spec is
    claimed for it (the history projection folds it under its own).
    """
    return SHEPHERD_SCHEMA_LIBRARY


def runtime_schema_library() -> StaticSchemaLibrary:
    """Return the library of the runtime's own schemas.

    Every ref a typed runtime event decodes (retired refs included, sorted),
    except the kernel rings :func:`shepherd_schemas` owns, with the
    runtime-state projection's spec.
    """
    kernel = set(SHEPHERD_SCHEMA_LIBRARY.schema_refs)
    return StaticSchemaLibrary(
        name="goatherd.runtime",
        schema_refs=tuple(sorted(runtime_schemas() - kernel)),
        projection_specs=(RUNTIME_STATE_PROJECTION,),
    )


def default_schema_libraries() -> tuple[StaticSchemaLibrary, ...]:
    """Return the libraries goatherd knows: the kernel's, then the runtime's."""
    return (shepherd_schemas(), runtime_schema_library())


def known_schema_refs() -> frozenset[str]:
    """Return every schema ref a default library knows."""
    return frozenset(
        ref for library in default_schema_libraries() for ref in library.schema_refs
    )


def schema_library_of(schema_ref: str) -> StaticSchemaLibrary | None:
    """Return the default library that knows ``schema_ref`` (``None``: none)."""
    for library in default_schema_libraries():
        if schema_ref in library.schema_refs:
            return library
    return None
