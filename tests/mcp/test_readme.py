"""The client configuration the README and docs/mcp.md give works as written.

The one-line ``mcpServers`` entry is read from each document, its repository
path replaced by a test project, and started the way a client starts it (the
``goatherd`` executable, no ``--db`` or ``--worktrees``: the defaults). The
SDK's client then opens an environment and lists it, and the trace lands where
the documents say (``goatherd/trace.sqlite`` in the repository's git
directory).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import StdioServerParameters

from goatherd.integrations.mcp import WorkspaceTools
from tests.mcp.agents import agent
from tests.mcp.conftest import ToolsFactory, needs_landlock

pytestmark = [needs_landlock, pytest.mark.integration]

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [ROOT / "README.md", ROOT / "docs" / "mcp.md"]
PLACEHOLDER = "/path/to/repo"


def _configuration(document: Path) -> dict[str, Any]:
    lines = [
        line
        for line in document.read_text().splitlines()
        if line.startswith('{"mcpServers"')
    ]
    assert len(lines) == 1, f"{document.name}: one client configuration line"
    entry: dict[str, Any] = json.loads(lines[0])["mcpServers"]["goatherd"]
    return entry


def _claude_code_line(document: Path) -> list[str]:
    found = re.search(r"`claude mcp add goatherd -- ([^`]+)`", document.read_text())
    assert found, f"{document.name}: the Claude Code line"
    return found.group(1).split()


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: p.name)
def test_the_documented_client_configuration_starts_a_working_server(
    document: Path, project: Path, tmp_path: Path
) -> None:
    entry = _configuration(document)
    assert [entry["command"], *entry["args"]] == _claude_code_line(document)
    assert entry["command"] == "goatherd"
    executable = shutil.which("goatherd", path=str(Path(sys.executable).parent))
    assert executable is not None
    env = {k: v for k, v in os.environ.items() if k != "GOATHERD_DB"}
    env["XDG_STATE_HOME"] = str(tmp_path / "state")
    parameters = StdioServerParameters(
        command=executable,
        args=[str(project) if a == PLACEHOLDER else a for a in entry["args"]],
        env=env,
    )

    async def main() -> list[str]:
        async with agent(parameters) as me:
            env_id = await me.open("from-the-readme")
            listed = await me.ok("list_environments")
            assert [e["environment_id"] for e in listed["environments"]] == [env_id]
            tools = await me.client.list_tools()
            return [tool.name for tool in tools.tools]

    names = anyio.run(main)
    assert "run" in names
    assert "propose" in names
    assert (project / ".git" / "goatherd" / "trace.sqlite").is_file()
    assert list((tmp_path / "state" / "goatherd" / "worktrees").iterdir())


WALK_THROUGH = re.compile(r"## MCP coding agents.*?```sh\n(.*?)```", re.DOTALL)
EXAMPLE_OUTPUTS = ("out:mcp:repo:fix-add-1a2b3c:7", "out:mcp:repo:other-4d5e6f:8")


def _walk_through() -> list[list[str]]:
    block = WALK_THROUGH.search((ROOT / "README.md").read_text(encoding="utf-8"))
    assert block is not None
    return [shlex.split(line, comments=True) for line in block.group(1).splitlines()]


def _proposals(make_tools: ToolsFactory, db: str) -> tuple[WorkspaceTools, list[str]]:
    fixer, noter = make_tools(db), make_tools(db)
    outputs = []
    for tools, name, change in (
        (
            fixer,
            "fix-add",
            lambda env: fixer.edit_file(env, "calc.py", "a - b", "a + b"),
        ),
        (noter, "other", lambda env: noter.write_file(env, "NOTES.md", "notes\n")),
    ):
        env = str(tools.open_environment(name).data["environment_id"])
        assert not change(env).is_error
        outputs.append(str(tools.propose(env).data["output_id"]))
    return fixer, outputs


def test_the_readme_walk_through_runs(
    make_tools: ToolsFactory, project: Path, tmp_path: Path
) -> None:
    (project / ".git" / "goatherd").mkdir()
    db = str(project / ".git" / "goatherd" / "trace.sqlite")
    agent_tools, outputs = _proposals(make_tools, db)
    names = dict(zip(EXAMPLE_OUTPUTS, outputs, strict=True))
    env = dict(os.environ)
    ran = []
    for line in _walk_through():
        argv = [names.get(a, a.replace(PLACEHOLDER, str(project))) for a in line]
        if argv[0] == "export":
            key, _, value = argv[1].partition("=")
            env[key] = value
            continue
        assert argv[0] == "goatherd"
        ran.append(argv[1])
        if "--follow" in argv:
            assert _follow(argv[1:], env, agent_tools)
        elif argv[1] == "traceui":
            assert _serves(argv[1:], env)
        else:
            done = subprocess.run(
                [sys.executable, "-m", "goatherd", *argv[1:]],
                capture_output=True,
                text=True,
                env=env,
                timeout=300,
                check=False,
            )
            assert done.returncode == 0, (argv, done.stderr)
            if argv[1] == "diff":
                assert "+    return a + b" in done.stdout
    assert ran == ["scopes", "diff", "settle", "settle", "log", "traceui"]
    assert "a + b" in (project / "calc.py").read_text()
    assert not (project / "NOTES.md").exists()


def _follow(argv: list[str], env: dict[str, str], tools: WorkspaceTools) -> bool:
    """Follow the log while an agent opens an environment; see its call."""
    follower = subprocess.Popen(
        [sys.executable, "-m", "goatherd", *argv, "--interval", "0.05"],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        time.sleep(1.0)
        assert not tools.open_environment("later").is_error
        assert follower.stdout is not None
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if "open_environment" in follower.stdout.readline():
                return True
        return False
    finally:
        follower.terminate()
        follower.communicate(timeout=30)


def _serves(argv: list[str], env: dict[str, str]) -> bool:
    """Start the trace UI on a free loopback port; see it announce its URL."""
    server = subprocess.Popen(
        [sys.executable, "-m", "goatherd", *argv, "--addr", "127.0.0.1:0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    try:
        assert server.stdout is not None
        return "http://127.0.0.1:" in server.stdout.readline()
    finally:
        server.terminate()
        server.communicate(timeout=30)
