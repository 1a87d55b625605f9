"""Lazy package exports: a layer package names what its modules export.

A package built with :func:`lazy_exports` imports one of its modules the
first time a name that module exports is read (PEP 562 module
``__getattr__``), so ``from goatherd.application import ScopeManager`` loads
the manager and what it needs, not the whole layer. The package keeps a
generated map of name to module (``_exports.py``, written by
``tools/gen_lazy_exports.py``); ``__all__`` is assembled, importing every
module, only when something asks for it (``from pkg import *``).

A name missing from the map (a module grew a name after the map was
written) is still found, by importing the package's modules in order until
one exports it; ``tests/architecture/test_lazy_exports.py`` keeps the map
complete so that this never costs a start-up.

A name that is both a module and a name exported by it (``materialize``,
``best_of_n`` in ``goatherd.application``) stays the exported name: the
import system's binding of the submodule onto the package is ignored.
"""

from __future__ import annotations

import importlib
import sys
import types
from collections.abc import Callable, Mapping
from typing import Any

__all__: list[str] = []


class _LazyPackage(types.ModuleType):
    """A package module that keeps exported names over same-named submodules."""

    def __setattr__(self, name: str, value: Any) -> None:
        shadowed = self.__dict__.get("_SHADOWED", ())
        if (
            name in shadowed
            and isinstance(value, types.ModuleType)
            and value.__name__ == f"{self.__name__}.{name}"
        ):
            return
        super().__setattr__(name, value)


def lazy_exports(
    package: str,
    namespace: dict[str, Any],
    modules: tuple[str, ...],
    names: Mapping[str, str],
) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """Return a package's ``__getattr__`` and ``__dir__``.

    Args:
        package: the package's dotted name (its ``__init__`` is running).
        namespace: the package's ``globals()``; resolved names are cached in it.
        modules: the package's modules (relative dotted names), in ``__all__``
            order.
        names: each exported name's module (one of ``modules``).
    """
    namespace["_SHADOWED"] = frozenset(names) & frozenset(modules)
    sys.modules[package].__class__ = _LazyPackage

    def load(module: str) -> Any:
        return importlib.import_module(f"{package}.{module}")

    def everything() -> list[str]:
        exported: list[str] = []
        for module in modules:
            exported += load(module).__all__
        namespace["__all__"] = exported
        return exported

    def home_of(name: str) -> str | None:
        known = names.get(name)
        if known is not None or name.startswith("__"):
            return known
        return next((m for m in modules if name in load(m).__all__), None)

    def getattr_(name: str) -> object:
        if name == "__all__":
            return everything()
        home = home_of(name)
        if home is None:
            if name in modules:
                return load(name)
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(load(home), name)
        namespace[name] = value
        return value

    def dir_() -> list[str]:
        return sorted({*namespace, *names, *modules})

    return getattr_, dir_


def named_homes(
    package: str, namespace: dict[str, Any], homes: Mapping[str, str]
) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """Return ``__getattr__`` and ``__dir__`` for a package with a literal ``__all__``.

    The plain form of :func:`lazy_exports`, for packages that list their
    names themselves (so mypy can follow them): each name in ``homes`` is
    read from its module (a relative dotted name) the first time it is
    asked for, and cached in ``namespace``.
    """

    def getattr_(name: str) -> object:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{home}"), name)
        namespace[name] = value
        return value

    def dir_() -> list[str]:
        return sorted({*namespace, *homes})

    return getattr_, dir_
