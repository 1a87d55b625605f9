"""The facade is slim and lazy, and the start-up import graph stays small.

These tests look at which modules get imported, never at the time it takes:
the import graph is what decides start-up cost, and it does not vary with
the machine's load.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

import goatherd
from tests.imports import modules_after

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("sqlalchemy", "psycopg", "starlette", "uvicorn", "httpx")
LAYERS = ("domain", "projections", "application", "infrastructure")


def _heavy(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if m.split(".")[0] in HEAVY)


def test_importing_goatherd_loads_no_layer_and_no_framework() -> None:
    loaded = modules_after("import goatherd")
    assert _heavy(loaded) == []
    assert sorted(m for m in loaded if m.startswith("goatherd.")) == []


def test_importing_the_domain_loads_no_database_driver_or_web_framework() -> None:
    loaded = modules_after("import goatherd.domain")
    assert _heavy(loaded) == []
    assert not any(m.startswith("goatherd.infrastructure") for m in loaded)
    assert "returns" not in loaded


@pytest.mark.parametrize("argv", [["--version"], ["--help"], ["log", "--help"]])
def test_the_cli_parses_help_and_version_without_loading_the_layers(
    argv: list[str],
) -> None:
    code = (
        "import contextlib, io\n"
        "from goatherd.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    try:\n"
        f"        main({argv!r})\n"
        "    except SystemExit:\n"
        "        pass\n"
    )
    loaded = modules_after(code)
    assert _heavy(loaded) == []
    expected = [
        "goatherd.cli",
        "goatherd.cli.arguments",
        "goatherd.cli.command_groups",
        "goatherd.cli.defaults",
        "goatherd.cli.exits",
        "goatherd.cli.parser",
        "goatherd.cli.text",
    ]
    if argv[0] == "log":  # only the inspection commands' parsers: no defaults
        expected.remove("goatherd.cli.defaults")
    assert sorted(m for m in loaded if m.startswith("goatherd.")) == expected


def test_the_facade_is_tens_of_names_each_resolving_to_its_layer_object() -> None:
    names = [n for n in goatherd.__all__ if n != "__version__"]
    assert 20 <= len(names) <= 100
    for name in names:
        value = getattr(goatherd, name)
        homes = [
            layer
            for layer in LAYERS
            if name in importlib.import_module(f"goatherd.{layer}").__all__
        ]
        assert homes, f"{name} is in no layer's __all__"
        layer = importlib.import_module(f"goatherd.{homes[0]}")
        assert value is getattr(layer, name)


def test_a_layer_name_outside_the_facade_says_where_it_lives() -> None:
    with pytest.raises(AttributeError, match=r"import it from goatherd\.domain"):
        _ = goatherd.ScopeAggregate  # type: ignore[attr-defined]
    with pytest.raises(AttributeError, match="has no attribute 'nothing_here'"):
        _ = goatherd.nothing_here  # type: ignore[attr-defined]


def test_the_generated_facade_is_up_to_date() -> None:
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        gen_facade = importlib.import_module("gen_facade")
    finally:
        sys.path.pop(0)
    expected = gen_facade.render()
    actual = (ROOT / "goatherd" / "__init__.py").read_text(encoding="utf-8")
    # The generator's output is then sorted and formatted by ruff; compare the
    # names it exports, which is what a stale facade gets wrong.
    assert f"__version__ = {goatherd.__version__!r}".replace("'", '"') in expected
    assert sorted(goatherd.__all__) == [
        line.strip().strip('",')
        for line in expected.split("__all__ = [\n", 1)[1].split("]\n", 1)[0].split()
    ], "run: .venv/bin/python tools/gen_facade.py"
    for name in goatherd.__all__:
        assert f'"{name}"' in actual


def test_the_version_the_cli_shows_is_the_package_version() -> None:
    from goatherd.cli import parser

    assert goatherd.__version__ == parser.VERSION


def test_the_infrastructure_package_names_exactly_what_its_modules_export() -> None:
    infrastructure = importlib.import_module("goatherd.infrastructure")
    exported = {
        name: module
        for module in infrastructure.SUBMODULES
        for name in importlib.import_module(f"goatherd.infrastructure.{module}").__all__
    }
    assert exported == infrastructure._LAZY
    assert sorted(infrastructure.__all__) == sorted(exported)
    for name, module in exported.items():
        assert getattr(infrastructure, name) is getattr(
            importlib.import_module(f"goatherd.infrastructure.{module}"), name
        )


def test_a_store_command_loads_no_web_framework_or_sandbox() -> None:
    loaded = modules_after(
        "from goatherd.infrastructure import SQLiteTraceStore, open_trace_store"
    )
    assert not {"starlette", "uvicorn", "goatherd.infrastructure.sandbox"} & loaded
    assert "goatherd.infrastructure.traceui" not in loaded
