"""Guidance across a restart of the MCP server: delivered exactly once.

docs/mcp.md: guidance reaches the agent with its next result. Each result's
capture records how far on the environment's path guidance was delivered
(``guidance_through``); a server starting on the trace resumes from there. So
guidance delivered before a restart is not delivered again, and guidance
recorded while no server ran (or after the last result) is not lost: the
first call after the restart delivers it, once.
"""

from __future__ import annotations

from returns.result import Success

from goatherd.application import Supervisor
from goatherd.infrastructure import open_runtime
from goatherd.integrations.mcp import WorkspaceTools
from tests.mcp.conftest import ToolsFactory


def _open(tools: WorkspaceTools, name: str = "work") -> str:
    reply = tools.open_environment(name)
    assert not reply.is_error, reply.text
    return str(reply.data["environment_id"])


def _inject(trace: str, scope_id: str, text: str) -> None:
    """Record guidance from another process's runtime."""
    with open_runtime(trace, bus=False) as other:
        supervisor = Supervisor(other.new_manager(), None, recorder=other.store)
        assert isinstance(supervisor.inject(scope_id, text), Success)


def test_guidance_is_delivered_once_across_restarts(
    make_tools: ToolsFactory, sqlite_trace: str
) -> None:
    first = make_tools()
    env = _open(first)
    scope_id = f"scope:{first.environments.root_owner}:{env}"
    _inject(sqlite_trace, scope_id, "run the tests first")
    assert first.list_files(env).guidance == ("run the tests first",)
    # Recorded after the last result of the first server, before it stops.
    _inject(sqlite_trace, scope_id, "then read calc.py")

    second = make_tools()  # a restarted server on the same trace
    assert second.list_files(env).guidance == ("then read calc.py",)
    assert second.list_files(env).guidance == ()

    # Recorded while no server runs: the next server delivers both, once.
    _inject(sqlite_trace, scope_id, "one")
    _inject(sqlite_trace, scope_id, "two")
    third = make_tools()
    assert third.read_file(env, "calc.py").guidance == ("one", "two")
    assert third.list_files(env).guidance == ()
    fourth = make_tools()
    assert fourth.list_files(env).guidance == ()


def test_a_restart_before_any_result_delivers_what_was_recorded(
    make_tools: ToolsFactory, sqlite_trace: str
) -> None:
    first = make_tools()
    env = _open(first)
    scope_id = f"scope:{first.environments.root_owner}:{env}"
    _inject(sqlite_trace, scope_id, "start with the tests")
    second = make_tools()  # the first server never answered a call there
    assert second.list_files(env).guidance == ("start with the tests",)
    again = make_tools()
    assert again.list_files(env).guidance == ()


def test_a_server_still_running_does_not_deliver_what_another_delivered(
    make_tools: ToolsFactory, sqlite_trace: str
) -> None:
    old = make_tools()
    env = _open(old)
    scope_id = f"scope:{old.environments.root_owner}:{env}"
    assert old.list_files(env).guidance == ()
    _inject(sqlite_trace, scope_id, "once only")
    new = make_tools()  # the client started another server; the old one lives on
    assert new.list_files(env).guidance == ("once only",)
    assert old.list_files(env).guidance == ()
