"""Drive ``goatherd mcp`` subprocesses with the SDK's own client over stdio."""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcp import Client, StdioServerParameters
from mcp_types import CallToolResult

from tests.zygote import Zygote


def server_parameters(
    repo: Path, db: str, worktrees: Path, *extra: str, zygote: Zygote | None = None
) -> StdioServerParameters:
    """The command an MCP client runs to start the server (as a user would).

    With ``zygote``, the server is a fork of that pre-imported Python (for
    tests that start it dozens of times; see ``tests/zygote.py``).
    """
    args = ["mcp", "--repo", str(repo), "--db", db]
    args += ["--worktrees", str(worktrees), *extra]
    argv = [sys.executable, "-m", "goatherd", *args]
    if zygote is not None:
        argv = zygote.command("goatherd", *args)
    return StdioServerParameters(command=argv[0], args=argv[1:], env=dict(os.environ))


@dataclass
class Agent:
    """One MCP client session and the calls it made (tool, arguments, result)."""

    client: Client
    calls: list[tuple[str, dict[str, Any], CallToolResult]] = field(
        default_factory=list
    )
    environment: str = ""

    async def call(self, tool: str, **arguments: Any) -> CallToolResult:
        if self.environment and tool not in ("open_environment", "list_environments"):
            arguments = {"environment_id": self.environment, **arguments}
        result = await self.client.call_tool(tool, arguments)
        self.calls.append((tool, arguments, result))
        return result

    async def ok(self, tool: str, **arguments: Any) -> dict[str, Any]:
        result = await self.call(tool, **arguments)
        assert not result.is_error, text(result)
        return dict(result.structured_content or {})

    async def open(self, name: str) -> str:
        data = await self.ok("open_environment", name=name)
        self.environment = str(data["environment_id"])
        return self.environment


def text(result: CallToolResult) -> str:
    return "\n".join(getattr(block, "text", "") for block in result.content)


@asynccontextmanager
async def agent(parameters: StdioServerParameters) -> AsyncIterator[Agent]:
    async with Client(parameters) as client:
        yield Agent(client)
