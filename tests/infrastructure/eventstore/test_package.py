"""The eventstore package re-exports exactly its modules' public names."""

from __future__ import annotations

import goatherd.infrastructure.eventstore as package
from goatherd.infrastructure.eventstore import factory, recorder


def test_the_package_list_equals_the_modules_lists():
    modules = (factory, recorder)
    expected = sorted(name for m in modules for name in m.__all__)
    assert sorted(package.__all__) == expected
