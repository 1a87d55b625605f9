"""Fitness tests for the layer rules that import-linter cannot express."""

from __future__ import annotations

import ast
import importlib
import pkgutil
import sys
from pathlib import Path

import pytest

import goatherd

PACKAGE_ROOT = Path(goatherd.__file__).parent
ALLOWED_EVENTSOURCING = ("eventsourcing.domain", "eventsourcing.utils")


def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
    return names


def test_the_domain_imports_only_the_stdlib_and_eventsourcing_domain() -> None:
    offenders = []
    for path in sorted((PACKAGE_ROOT / "domain").rglob("*.py")):
        for name in _imports(path):
            top = name.split(".")[0]
            if top == "goatherd":
                if not name.startswith("goatherd.domain"):
                    offenders.append(f"{path.name}: {name}")
            elif top == "eventsourcing":
                if not name.startswith(ALLOWED_EVENTSOURCING):
                    offenders.append(f"{path.name}: {name}")
            elif top not in sys.stdlib_module_names and top != "__future__":
                offenders.append(f"{path.name}: {name}")
    assert offenders == []


def _public_modules() -> list[str]:
    return ["goatherd"] + [
        info.name
        for info in pkgutil.walk_packages([str(PACKAGE_ROOT)], prefix="goatherd.")
        if "traceui.static" not in info.name and not info.name.endswith("__main__")
    ]


@pytest.mark.parametrize("module_name", _public_modules())
def test_each_package_all_is_sorted_and_resolves(module_name: str) -> None:
    module = importlib.import_module(module_name)
    exported = list(getattr(module, "__all__", []))
    if not module.__file__ or not module.__file__.endswith("__init__.py"):
        assert exported == sorted(exported), f"{module_name}.__all__ is not sorted"
    duplicates = sorted({n for n in exported if exported.count(n) > 1})
    assert duplicates == [], f"{module_name}.__all__ repeats {duplicates}"
    for name in exported:
        assert hasattr(module, name), f"{module_name}.{name} is missing"
