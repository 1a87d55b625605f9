"""The default schema libraries: the seed's ``ShepherdSchemas()`` and the runtime's.

``shepherd_schemas()`` is the kernel's default library: the execution and
relation rings with their projection specs, plus the runtime-published-fact
ref as a known schema with no spec of its own. ``runtime_schema_library()``
registers every schema the runtime's typed events decode. Together they know
every schema with a typed event, each exactly once.
"""

from __future__ import annotations

import pytest

import goatherd.domain
import goatherd.projections
from goatherd.domain import event_class_for, runtime_fold_schemas, runtime_schemas
from goatherd.projections import (
    EXECUTION_PROJECTION,
    EXECUTION_RELATION_PROJECTION,
    EXECUTION_RELATION_SCHEMA_LIBRARY,
    EXECUTION_SCHEMA_LIBRARY,
    RUNTIME_STATE_PROJECTION,
    SCHEMA_RUNTIME_PUBLISHED_FACT,
    SHEPHERD_SCHEMA_LIBRARY,
    SchemaLibrary,
    StaticSchemaLibrary,
    default_schema_libraries,
    known_schema_refs,
    runtime_schema_library,
    schema_library_of,
    shepherd_schemas,
)


def test_shepherd_schemas_is_the_seeds_default_library() -> None:
    library = shepherd_schemas()
    assert library is SHEPHERD_SCHEMA_LIBRARY
    protocol: SchemaLibrary = library  # it is a SchemaLibrary (checked by mypy)
    assert protocol.name == "shepherd2"
    assert library.schema_refs == (
        "shepherd2.execution.created.v1",
        "shepherd2.execution.started.v1",
        "shepherd2.execution.completed.v1",
        "shepherd2.execution.failed.v1",
        "shepherd2.execution_relation.created.v1",
        "shepherd2.runtime.published_fact.v1",
    )
    assert library.projection_specs == (
        EXECUTION_PROJECTION,
        EXECUTION_RELATION_PROJECTION,
    )


def test_it_is_the_two_rings_plus_the_published_fact_without_a_spec() -> None:
    library = shepherd_schemas()
    rings = (EXECUTION_SCHEMA_LIBRARY, EXECUTION_RELATION_SCHEMA_LIBRARY)
    assert library.schema_refs[:-1] == tuple(
        ref for ring in rings for ref in ring.schema_refs
    )
    assert library.projection_specs == tuple(
        spec for ring in rings for spec in ring.projection_specs
    )
    assert library.schema_refs[-1] == SCHEMA_RUNTIME_PUBLISHED_FACT
    assert SCHEMA_RUNTIME_PUBLISHED_FACT == goatherd.domain.PUBLISHED_FACT_SCHEMA_REF
    assert not any("published" in spec.name for spec in library.projection_specs)


def test_the_runtime_library_registers_every_runtime_schema_once() -> None:
    runtime = runtime_schema_library()
    assert runtime.name == "goatherd.runtime"
    assert runtime.projection_specs == (RUNTIME_STATE_PROJECTION,)
    assert list(runtime.schema_refs) == sorted(runtime.schema_refs)
    kernel = set(shepherd_schemas().schema_refs)
    assert kernel.isdisjoint(runtime.schema_refs)
    assert kernel | set(runtime.schema_refs) == runtime_schemas()
    assert known_schema_refs() == runtime_schemas()


def test_retired_refs_are_known_and_the_runtime_state_folds_only_known_refs() -> None:
    runtime = set(runtime_schema_library().schema_refs)
    assert {"shepherd.scope.forked.v1", "goatherd.checkpoint.created.v1"} <= runtime
    assert runtime_fold_schemas() <= runtime
    for ref in known_schema_refs():
        assert event_class_for(ref) is not None, ref


@pytest.mark.parametrize(
    ("schema_ref", "library"),
    [
        ("shepherd2.execution.started.v1", "shepherd2"),
        ("shepherd2.runtime.published_fact.v1", "shepherd2"),
        ("goatherd.scope.created.v1", "goatherd.runtime"),
        ("shepherd.run_output.sealed.v1", "goatherd.runtime"),
        ("app.note.v1", None),
        ("", None),
    ],
)
def test_schema_library_of_names_the_library_that_knows_a_ref(
    schema_ref: str, library: str | None
) -> None:
    found = schema_library_of(schema_ref)
    assert (found.name if found is not None else None) == library


def test_the_defaults_are_the_kernels_then_the_runtimes_and_public() -> None:
    libraries = default_schema_libraries()
    assert [lib.name for lib in libraries] == ["shepherd2", "goatherd.runtime"]
    assert all(isinstance(lib, StaticSchemaLibrary) for lib in libraries)
    public = set(goatherd.projections.__all__)
    assert {
        "shepherd_schemas",
        "runtime_schema_library",
        "default_schema_libraries",
    } <= (public)
