"""The store package names its modules' objects and imports none of them eagerly."""

from __future__ import annotations

import pytest

import goatherd.infrastructure.store as package
from goatherd.infrastructure.store import chain, limits, opening, redaction, schema
from goatherd.infrastructure.store import store as store_module
from tests.imports import modules_after


def test_every_name_is_its_modules_object() -> None:
    modules = (chain, limits, opening, redaction, schema, store_module)
    homes = {
        name: module
        for module in modules
        for name in module.__all__
        if name in package.__all__
    }
    assert sorted(homes) == sorted(package.__all__)
    for name, module in homes.items():
        assert getattr(package, name) is getattr(module, name), name
    assert set(dir(package)) >= set(package.__all__)
    with pytest.raises(AttributeError, match="no_such_name"):
        _ = package.no_such_name


def test_a_submodule_loads_neither_the_store_nor_its_append_path() -> None:
    loaded = modules_after("import goatherd.infrastructure.store.postgres")
    prefix = "goatherd.infrastructure.store."
    assert sorted(m for m in loaded if m.startswith(prefix)) == [
        "goatherd.infrastructure.store.postgres"
    ]
    loaded = modules_after(
        "from goatherd.infrastructure.store import open_trace_store_read_only"
    )
    assert "goatherd.infrastructure.store.opening" in loaded
    for module in ("appending", "plan", "staging", "writer", "migration"):
        assert prefix + module not in loaded, module
