from __future__ import annotations

import pytest

from goatherd.domain import TraceSlice
from goatherd.projections import (
    EXECUTION_PROJECTION,
    EXECUTION_RELATION_SCHEMA_LIBRARY,
    EXECUTION_SCHEMA_LIBRARY,
    ProjectionModeError,
    ProjectionSpec,
    SchemaLibrary,
    ensure_projection_compatible,
)


def test_a_mode_mismatch_names_the_projection_the_requirement_and_the_slice() -> None:
    slice_ = TraceSlice(mode_filter="captures_only")
    with pytest.raises(ProjectionModeError) as caught:
        ensure_projection_compatible(slice_, EXECUTION_PROJECTION)
    assert str(caught.value) == (
        "projection 'shepherd2.execution.project' requires mode_filter='both'; "
        "got 'captures_only'"
    )
    assert isinstance(caught.value, ValueError)


@pytest.mark.parametrize("mode", ["both", "captures_only", "declarations_only"])
def test_the_any_requirement_accepts_every_mode_filter(mode: str) -> None:
    spec = ProjectionSpec("p", mode_requirement="any")
    ensure_projection_compatible(TraceSlice(mode_filter=mode), spec)


def test_an_equal_mode_requirement_passes() -> None:
    spec = ProjectionSpec("p", mode_requirement="declarations_only")
    ensure_projection_compatible(TraceSlice(mode_filter="declarations_only"), spec)


def test_a_payload_requiring_projection_rejects_a_shape_only_slice() -> None:
    slice_ = TraceSlice(visibility_profile="shape_only")
    with pytest.raises(ProjectionModeError, match="requires payload-visible facts"):
        ensure_projection_compatible(slice_, EXECUTION_PROJECTION)


def test_a_shape_only_slice_passes_a_projection_that_needs_no_payload() -> None:
    spec = ProjectionSpec("shapes", requires_payload=False)
    ensure_projection_compatible(TraceSlice(visibility_profile="shape_only"), spec)


def test_the_kernel_libraries_list_their_schemas_and_projections() -> None:
    libraries: list[SchemaLibrary] = [
        EXECUTION_SCHEMA_LIBRARY,
        EXECUTION_RELATION_SCHEMA_LIBRARY,
    ]
    assert [lib.name for lib in libraries] == [
        "shepherd2.execution",
        "shepherd2.execution_relation",
    ]
    assert EXECUTION_SCHEMA_LIBRARY.schema_refs == (
        "shepherd2.execution.created.v1",
        "shepherd2.execution.started.v1",
        "shepherd2.execution.completed.v1",
        "shepherd2.execution.failed.v1",
    )
    assert EXECUTION_RELATION_SCHEMA_LIBRARY.schema_refs == (
        "shepherd2.execution_relation.created.v1",
    )
    assert [s.name for s in EXECUTION_RELATION_SCHEMA_LIBRARY.projection_specs] == [
        "shepherd2.execution_relation.project"
    ]
