"""The human's other views of what agents did: the log and the trace UI.

An agent works through the tools (a run, an edit, a proposal); from another
process the human lists its calls with ``goatherd log --owner``, and serves
the trace UI, whose scope list shows the environment and whose records show
each call as a declaration and its capture.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from goatherd.integrations.mcp import WorkspaceTools
from tests.mcp.conftest import ToolsFactory, needs_landlock
from tests.mcp.human import goatherd

pytestmark = [needs_landlock, pytest.mark.integration]


def _work(tools: WorkspaceTools) -> tuple[str, str]:
    opened = tools.open_environment("seen")
    env = str(opened.data["environment_id"])
    assert tools.run(env, "python3 -m unittest -q").data["exit_code"] == 1
    assert not tools.edit_file(env, "calc.py", "a - b", "a + b").is_error
    proposed = tools.propose(env)
    assert not proposed.is_error, proposed.text
    return env, f"{tools.environments.root_owner}:{env}"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@contextmanager
def _trace_ui(sqlite_trace: str) -> Iterator[str]:
    """Start ``goatherd traceui`` on the trace; yield its base URL."""
    port = _free_port()
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "goatherd",
            "traceui",
            "--db",
            sqlite_trace,
            "--addr",
            f"127.0.0.1:{port}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                _get(base, "/api/health")
                break
            except OSError as error:
                if server.poll() is not None or time.monotonic() > deadline:
                    said = server.stderr.read() if server.stderr else ""
                    raise AssertionError(said) from error
                time.sleep(0.2)
        yield base
    finally:
        server.terminate()
        server.communicate(timeout=30)


def _get(base: str, path: str) -> Any:
    with urllib.request.urlopen(base + path, timeout=30) as reply:
        return json.loads(reply.read())


CALLS = [
    ("mcp.tool.open_environment.result.v1", "capture"),
    ("mcp.tool.run.v1", "declaration"),
    ("mcp.tool.run.result.v1", "capture"),
    ("mcp.tool.edit_file.v1", "declaration"),
    ("mcp.tool.edit_file.result.v1", "capture"),
    ("mcp.tool.propose.v1", "declaration"),
    ("mcp.tool.propose.result.v1", "capture"),
]


def _tool_records(
    records: list[dict[str, Any]], schema: str, parents: str
) -> list[dict[str, Any]]:
    calls = [r for r in records if str(r[schema]).startswith("mcp.tool.")]
    assert [(r[schema], r["mode"]) for r in calls] == CALLS
    for declaration, capture in zip(calls[1::2], calls[2::2], strict=True):
        assert declaration["payload"]["session"]
        assert capture[parents] == [
            declaration["record_id" if "record_id" in declaration else "id"]
        ]
    return calls


def test_the_log_lists_an_agents_calls_in_order(
    make_tools: ToolsFactory, sqlite_trace: str
) -> None:
    _, owner = _work(make_tools())
    done = goatherd("log", sqlite_trace, "--owner", owner, "--json")
    assert done.returncode == 0, done.stderr
    calls = _tool_records(json.loads(done.stdout), "schema_ref", "caused_by")
    assert calls[1]["payload"]["cmd"] == "python3 -m unittest -q"
    assert calls[2]["payload"]["exit_code"] == 1


def test_the_trace_ui_shows_the_environment_and_its_calls(
    make_tools: ToolsFactory, sqlite_trace: str
) -> None:
    env, owner = _work(make_tools())
    with _trace_ui(sqlite_trace) as base:
        scopes = _get(base, "/api/scopes")["scopes"]
        records = _get(base, f"/api/records?path={owner}")["records"]
    mine = [s for s in scopes if s["owner"] == owner]
    assert len(mine) == 1
    assert mine[0]["isolated"]
    assert mine[0]["state"] == "active"
    assert Path(mine[0]["sandbox_path"]).name == env
    calls = _tool_records(records, "schema", "parents")
    assert calls[2]["payload"]["exit_code"] == 1
