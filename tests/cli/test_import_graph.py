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
from tests.cli.test_lifecycle import _session
from tests.imports import modules_after

ROOT = Path(__file__).resolve().parents[2]

# Never needed by a command that reads or settles a trace (on SQLite: the
# PostgreSQL dialect neither).
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
    "sqlalchemy.dialects.postgresql",
    "starlette",
    "uvicorn",
)
# The store's writing side: a command that only reads loads none of it (nor
# the schema upgrade, which only opening an old trace for writing runs).
APPEND_PATH = (
    "goatherd.infrastructure.store.appending",
    "goatherd.infrastructure.store.erasure",
    "goatherd.infrastructure.store.erasure_pg",
    "goatherd.infrastructure.store.migration",
    "goatherd.infrastructure.store.plan",
    "goatherd.infrastructure.store.redaction",
    "goatherd.infrastructure.store.staging",
    "goatherd.infrastructure.store.writer",
)
# The sandboxes that confine commands: a git worktree's diff or a settlement
# runs git, never a confined command.
CONFINEMENT = (
    "goatherd.infrastructure.sandbox.containment",
    "goatherd.infrastructure.sandbox.landlock",
    "goatherd.infrastructure.sandbox.launch",
    "goatherd.infrastructure.sandbox.supervised",
    "goatherd.infrastructure.sandbox.winacl",
)
# goatherd modules a trace command that needs no workspace leaves alone.
NO_WORKSPACE = (
    "goatherd.application.best_of_n",
    "goatherd.application.materialize",
    "goatherd.application.tasks",
    "goatherd.infrastructure.bus.effect_bus",
    "goatherd.infrastructure.sandbox",
    "goatherd.infrastructure.traceui",
    "goatherd.integrations",
    "goatherd.projections",
)
# ... and a command that only reads rows (no runtime fold) leaves these too,
# the runtime events' decoders included.
ROWS_ONLY = (
    *NO_WORKSPACE,
    *APPEND_PATH,
    "goatherd.application",
    "goatherd.domain.events",
    "goatherd.infrastructure.bootstrap",
    "goatherd.infrastructure.audit.verify",
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
    assert _loaded(loaded, APPEND_PATH) == []


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


@pytest.fixture
def git_session(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A git project, a root scope, two sealed attempts in their worktrees."""
    path = tmp_path / "git.sqlite"
    return path, _session(str(path), tmp_path)


@pytest.mark.parametrize("target", ["scope1", "out0"], ids=["scope", "output"])
def test_diff_runs_git_without_confinement_or_the_append_path(
    git_session: tuple[Path, dict[str, str]], target: str
) -> None:
    path, ids = git_session
    loaded = _command_modules(["--db", str(path), "diff", ids[target]])
    assert "goatherd.infrastructure.sandbox.git" in loaded  # it did read git
    assert _loaded(loaded, FOREIGN) == []
    assert _loaded(loaded, CONFINEMENT) == []
    assert _loaded(loaded, APPEND_PATH) == []


def test_settle_appends_and_runs_git_without_confinement(
    git_session: tuple[Path, dict[str, str]],
) -> None:
    path, ids = git_session
    argv = ["--db", str(path), "settle", ids["out1"], "select"]
    loaded = _command_modules([*argv, "--workspace", ids["repo"]])
    assert "goatherd.infrastructure.store.appending" in loaded  # it did append
    assert _loaded(loaded, FOREIGN) == []
    assert _loaded(loaded, CONFINEMENT) == []
    assert _loaded(loaded, ("goatherd.infrastructure.store.migration",)) == []
    assert _loaded(loaded, NO_WORKSPACE[:3]) == []
