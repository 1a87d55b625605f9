"""What a command imports: only what it runs (the modules, never the time).

Start-up cost is decided by the import graph, which does not vary with the
machine's load, so these tests run each command in a fresh interpreter and
look at ``sys.modules`` afterwards. ``bench/bench_startup.py`` measures the
time itself.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from goatherd.application import SandboxSpec
from goatherd.infrastructure import open_runtime
from goatherd.infrastructure.sandbox import MemorySandbox, MemorySandboxConfig
from tests.cli.conftest import build_trace
from tests.imports import modules_after

ROOT = Path(__file__).resolve().parents[2]

# Never needed by a command that reads or settles a trace.
FOREIGN = (
    "eventsourcing",
    "httpx",
    "hypothesis",
    "langchain_core",
    "langgraph",
    "mcp",
    "mcp_types",
    "psycopg",
    "pydantic",
    "starlette",
    "uvicorn",
)
# goatherd modules a trace command that needs no workspace leaves alone.
NO_WORKSPACE = (
    "goatherd.application.best_of_n",
    "goatherd.application.materialize",
    "goatherd.application.tasks",
    "goatherd.infrastructure.bus",
    "goatherd.infrastructure.sandbox",
    "goatherd.infrastructure.traceui",
    "goatherd.integrations",
    "goatherd.projections",
)
# ... and a command that only reads rows (no runtime fold) leaves these too.
ROWS_ONLY = (
    *NO_WORKSPACE,
    "goatherd.application",
    "goatherd.infrastructure.bootstrap",
    "goatherd.infrastructure.integrity",
)


def _command_modules(argv: list[str]) -> set[str]:
    code = (
        "import contextlib, io\n"
        "from goatherd.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    code = main({argv!r})\n"
        "assert code == 0, code\n"
    )
    return modules_after(code)


def _loaded(modules: set[str], prefixes: tuple[str, ...]) -> list[str]:
    return sorted(
        m for m in modules if any(m == p or m.startswith(p + ".") for p in prefixes)
    )


@pytest.fixture
def scoped_trace(tmp_path: Path) -> Path:
    """A trace with a root scope, a forked child and its sealed output."""
    path = tmp_path / "scopes.sqlite"
    with open_runtime(str(path), bus=False) as runtime:
        manager = runtime.new_manager()
        sandbox = MemorySandbox(MemorySandboxConfig(files={"a.txt": b"1\n"}))
        sandbox.create(SandboxSpec())
        root = manager.create("agent:main", sandbox).unwrap()
        child = manager.fork(root.id, "agent:main:try").unwrap()
        manager.seal(child.id).unwrap()
    return path


def test_scopes_folds_the_runtime_without_sandboxes_or_frameworks(
    scoped_trace: Path,
) -> None:
    loaded = _command_modules(["--db", str(scoped_trace), "scopes"])
    assert "goatherd.application.manager" in loaded  # it did fold the trace
    assert _loaded(loaded, FOREIGN) == []
    assert _loaded(loaded, NO_WORKSPACE) == []


@pytest.mark.parametrize(
    "argv",
    [["stats"], ["log", "--tail", "2"], ["show", "sha256:"]],
    ids=["stats", "log", "show"],
)
def test_row_commands_load_no_runtime(tmp_path: Path, argv: list[str]) -> None:
    path = tmp_path / "trace.sqlite"
    ids = build_trace(path)
    if argv[0] == "show":
        argv = ["show", ids["call"][:20]]
    loaded = _command_modules(["--db", str(path), *argv])
    assert "goatherd.infrastructure.store.store" in loaded
    assert _loaded(loaded, FOREIGN) == []
    assert _loaded(loaded, ROWS_ONLY) == []


def test_the_mcp_server_module_loads_no_sdk_client_and_no_other_integration() -> None:
    pytest.importorskip("mcp")
    loaded = modules_after("import goatherd.integrations.mcp.server")
    assert "mcp.server.mcpserver" in loaded
    assert _loaded(loaded, ("mcp.client", "langgraph", "hypothesis")) == []


def test_the_sdk_package_still_offers_its_client_to_whoever_asks() -> None:
    pytest.importorskip("mcp")
    code = (
        "import goatherd.integrations.mcp.server\n"
        "from mcp import Client, StdioServerParameters\n"
        "import mcp\n"
        "assert mcp.Client is Client and mcp.types.Tool\n"
    )
    loaded = modules_after(code)
    assert "mcp.client.client" in loaded
