"""A halt from another process ends the command an environment is running.

A real MCP session (``goatherd mcp`` over stdio) runs a long ``sleep``; a
second process halts the environment's scope with the supervisor's public
API; the ``run`` answers promptly that the environment was halted, and no
process of the command is left.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from returns.result import Success

from goatherd.application import Supervisor
from goatherd.infrastructure import open_runtime
from goatherd.integrations.mcp import root_owner_for
from tests.infrastructure.backends import backend_url
from tests.mcp.agents import agent, server_parameters, text
from tests.mcp.conftest import TRACE_BACKENDS, make_project, needs_landlock

pytestmark = [needs_landlock, pytest.mark.integration]

SLEEP = "47.25"  # an odd length, to find the process by its command line


def _sleepers() -> list[int]:
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as handle:
                argv = handle.read().split(b"\0")
        except OSError:
            continue
        if argv[:2] == [b"sleep", SLEEP.encode()]:
            found.append(int(name))
    return found


def _halt_when_sleeping(db: str, scope_id: str, halted: list[float]) -> None:
    deadline = time.monotonic() + 30
    while not _sleepers() and time.monotonic() < deadline:
        time.sleep(0.1)
    with open_runtime(db, bus=False) as other:
        supervisor = Supervisor(other.new_manager(), None, recorder=other.store)
        assert isinstance(supervisor.halt(scope_id), Success)
    halted.append(time.monotonic())


@pytest.fixture(params=TRACE_BACKENDS)
def trace(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    yield from backend_url(request.param, tmp_path)


def test_a_halt_from_another_process_ends_a_running_command(
    tmp_path: Path, trace: str
) -> None:
    project = make_project(tmp_path / "project")
    db = trace
    halted: list[float] = []

    async def main() -> tuple[bool, str, float]:
        async with agent(server_parameters(project, db, tmp_path / "w")) as me:
            env = await me.open("halted")
            scope_id = f"scope:{root_owner_for(project)}:{env}"
            halter = threading.Thread(
                target=_halt_when_sleeping, args=(db, scope_id, halted), daemon=True
            )
            halter.start()
            result = await me.call(
                "run", command=f"sleep {SLEEP}; echo finished", timeout_seconds=120
            )
            answered = time.monotonic()
            halter.join(30)
            later = await me.call("list_files")
            assert later.is_error
            assert "halted" in text(later)
            return result.is_error, text(result), answered

    is_error, reply, answered = anyio.run(main)
    assert halted, "the halt did not happen"
    took = answered - halted[0]
    assert took < 10, f"the run answered {took:.1f} s after the halt: {reply}"
    assert is_error, reply
    assert "halted" in reply, reply
    assert "finished" not in reply
    assert _sleepers() == []
