"""Fixtures for the MCP server tests: a real git project, a trace, the tools.

The project is a tiny Python package whose test fails (``add`` subtracts);
commands run confined by Landlock, so the tests skip on a kernel without it.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from goatherd.infrastructure import Runtime, open_runtime
from goatherd.infrastructure.sandbox import landlock_abi
from goatherd.integrations.mcp import McpSettings, WorkspaceTools
from tests.infrastructure.backends import backend_url

needs_landlock = pytest.mark.skipif(
    landlock_abi() < 1, reason="this kernel has no Landlock"
)
TRACE_BACKENDS = [
    pytest.param("sqlite-file", id="sqlite"),
    pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
]
CALC = "def add(a, b):\n    return a - b\n"
TEST_CALC = (
    "import unittest\n"
    "from calc import add\n\n\n"
    "class AddTest(unittest.TestCase):\n"
    "    def test_add(self):\n"
    "        self.assertEqual(add(2, 3), 5)\n"
)
GIT_ENV = {
    "GIT_AUTHOR_NAME": "test",
    "GIT_AUTHOR_EMAIL": "test@example.invalid",
    "GIT_COMMITTER_NAME": "test",
    "GIT_COMMITTER_EMAIL": "test@example.invalid",
}


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", *args],
        cwd=repo,
        env={**os.environ, **GIT_ENV},
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


def make_project(path: Path) -> Path:
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    (path / "calc.py").write_text(CALC)
    (path / "test_calc.py").write_text(TEST_CALC)
    (path / "README.txt").write_text("a calculator\n")
    git(path, "add", "-A")
    git(path, "commit", "-qm", "start")
    return path


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return make_project(tmp_path / "project")


@pytest.fixture(params=TRACE_BACKENDS)
def trace_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    yield from backend_url(request.param, tmp_path)


@pytest.fixture
def sqlite_trace(tmp_path: Path) -> str:
    return str(tmp_path / "trace.sqlite")


ToolsFactory = Callable[..., WorkspaceTools]


@pytest.fixture
def make_tools(
    project: Path, tmp_path: Path, sqlite_trace: str
) -> Iterator[ToolsFactory]:
    """Build WorkspaceTools (one runtime each, closed at the end)."""
    runtimes: list[Runtime] = []

    def build(db: str | None = None, **overrides: object) -> WorkspaceTools:
        trace = db or sqlite_trace
        runtime = open_runtime(trace, bus=False)
        runtimes.append(runtime)
        options: dict[str, Any] = {
            "repo": project,
            "db": trace,
            "worktrees": tmp_path / "worktrees",
            **overrides,
        }
        return WorkspaceTools(runtime, McpSettings(**options))

    yield build
    for runtime in runtimes:
        runtime.close()
