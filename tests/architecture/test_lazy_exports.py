"""The lazy layer packages: complete name maps, same names, loaded on use."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.imports import modules_after

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("goatherd.domain", "goatherd.projections", "goatherd.application")


def _generator() -> ModuleType:
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        return importlib.import_module("gen_lazy_exports")
    finally:
        sys.path.pop(0)


@pytest.mark.parametrize("package", PACKAGES)
def test_the_name_map_is_current(package: str) -> None:
    generator = _generator()
    text = generator.target(package).read_text(encoding="utf-8")
    assert text == generator.render(package), (
        "run: .venv/bin/python tools/gen_lazy_exports.py"
    )


@pytest.mark.parametrize("package", PACKAGES)
def test_the_package_exports_every_module_name_as_the_module_object(
    package: str,
) -> None:
    module = importlib.import_module(package)
    expected: list[str] = []
    for name in module._MODULES:
        expected += importlib.import_module(f"{package}.{name}").__all__
    assert module.__all__ == expected
    for name in expected:
        homes = [
            importlib.import_module(f"{package}.{m}")
            for m in module._MODULES
            if name in importlib.import_module(f"{package}.{m}").__all__
        ]
        assert getattr(module, name) is getattr(homes[0], name)


@pytest.mark.parametrize("package", PACKAGES)
def test_importing_a_package_imports_none_of_its_modules(package: str) -> None:
    loaded = modules_after(f"import {package}")
    ours = {m for m in loaded if m.startswith(f"{package}.")}
    assert ours - {"goatherd.domain._lazy"} == {f"{package}._exports"}


def test_a_name_loads_only_the_modules_it_needs() -> None:
    loaded = modules_after("from goatherd.application import ScopeManager")
    assert "goatherd.application.manager" in loaded
    assert "goatherd.application.best_of_n" not in loaded
    assert "goatherd.application.tasks" not in loaded


def test_a_function_named_like_its_module_stays_the_function() -> None:
    code = (
        "import importlib\n"
        "module = importlib.import_module('goatherd.application.materialize')\n"
        "importlib.import_module('goatherd.application.best_of_n')\n"
        "import goatherd.application as app\n"
        "import goatherd\n"
        "assert callable(app.materialize) and app.materialize is module.materialize\n"
        "assert goatherd.best_of_n is app.best_of_n\n"
        "assert not isinstance(app.best_of_n, type(module))\n"
    )
    modules_after(code)


def test_star_import_and_unknown_names_behave_as_before() -> None:
    code = (
        "from goatherd.domain import *\n"
        "assert Record and canonical_digest\n"
        "import goatherd.domain as d\n"
        "try:\n"
        "    d.no_such_name\n"
        "except AttributeError as e:\n"
        "    assert 'no_such_name' in str(e)\n"
        "else:\n"
        "    raise AssertionError\n"
        "assert d.events.__name__ == 'goatherd.domain.events'\n"
    )
    modules_after(code)
