"""The substrates package re-exports exactly its modules' public names."""

from __future__ import annotations

import goatherd.infrastructure.substrates as package
from goatherd.infrastructure.substrates import kv, workspace


def test_the_literal_all_equals_the_modules_names_sorted() -> None:
    assert package.__all__ == sorted([*kv.__all__, *workspace.__all__])
