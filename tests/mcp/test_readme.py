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
import shutil
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import StdioServerParameters

from tests.mcp.agents import agent
from tests.mcp.conftest import needs_landlock

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
