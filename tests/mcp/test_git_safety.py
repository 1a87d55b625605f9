"""The MCP tools' git runs nothing the repository or the agent names (ADR 0067).

The agent's confined ``run`` can write its worktree: a ``.gitattributes``
naming a filter or diff driver, or a crafted git directory put in place of the
worktree's ``.git`` file. The repository's own configuration may define those
drivers, an fsmonitor or hooks (written earlier by an agent working in place).
``open_environment``, ``diff``, ``checkpoint`` and ``propose`` must then run
none of it: the payload would leave a marker outside every root.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from goatherd.integrations.mcp import WorkspaceTools
from tests.mcp.agents import agent, server_parameters, text
from tests.mcp.conftest import ToolsFactory, git, needs_landlock

pytestmark = [needs_landlock, pytest.mark.integration]


def _payload(tmp_path: Path) -> tuple[Path, Path]:
    outside = tmp_path / "outside"
    outside.mkdir()
    marker = outside / "marker"
    payload = outside / "payload.sh"
    payload.write_text(f"#!/bin/sh\necho ran >> '{marker}'\ncat\n")
    payload.chmod(0o755)
    return payload, marker


def _poison_repository(project: Path, payload: Path) -> None:
    """What an agent working in place could have left in the repository."""
    for key, value in [
        ("core.fsmonitor", str(payload)),
        ("filter.evil.clean", str(payload)),
        ("filter.evil.smudge", str(payload)),
        ("filter.evil.process", str(payload)),
        ("diff.external", str(payload)),
        ("diff.evil.textconv", str(payload)),
    ]:
        git(project, "config", key, value)
    hooks = project / ".git" / "hooks"
    hooks.mkdir(exist_ok=True)
    for hook in ("post-checkout", "post-index-change"):
        (hooks / hook).write_text(payload.read_text())
        (hooks / hook).chmod(0o755)


def _open(tools: WorkspaceTools) -> str:
    reply = tools.open_environment("work")
    assert not reply.is_error, reply.text
    return str(reply.data["environment_id"])


def _swap_command(project: Path, payload: Path) -> str:
    """A shell command the agent runs: a crafted git dir in place of ``.git``."""
    head = git(project, "rev-parse", "HEAD").strip()
    objects = project / ".git" / "objects"
    return (
        "mkdir -p .crafted/objects/info .crafted/refs"
        f" && echo '{objects}' > .crafted/objects/info/alternates"
        f" && echo {head} > .crafted/HEAD"
        f" && printf '[core]\\n\\tfsmonitor = {payload}\\n' > .crafted/config"
        " && rm .git && echo 'gitdir: .crafted' > .git"
    )


def test_repository_drivers_fsmonitor_and_hooks_never_run_through_the_tools(
    make_tools: ToolsFactory, project: Path, tmp_path: Path
) -> None:
    payload, marker = _payload(tmp_path)
    _poison_repository(project, payload)
    tools = make_tools()
    env = _open(tools)  # git worktree add: post-checkout would run here
    written = tools.write_file(env, ".gitattributes", "* filter=evil diff=evil\n")
    assert not written.is_error, written.text
    reply = tools.edit_file(env, "calc.py", "a - b", "a + b")
    assert not reply.is_error, reply.text
    diff = tools.diff(env)
    assert not diff.is_error, diff.text
    assert "+    return a + b" in diff.text
    checkpoint = tools.checkpoint(env)
    assert not checkpoint.is_error, checkpoint.text
    proposed = tools.propose(env, "add adds")
    assert not proposed.is_error, proposed.text
    assert not marker.exists(), marker.read_text()


def test_a_swapped_dot_git_is_refused_by_diff_checkpoint_and_propose(
    make_tools: ToolsFactory, project: Path, tmp_path: Path
) -> None:
    payload, marker = _payload(tmp_path)
    tools = make_tools()
    env = _open(tools)
    command = _swap_command(project, payload)
    ran = tools.run(env, command)
    assert ran.data["exit_code"] == 0, ran.text
    for reply in (tools.diff(env), tools.checkpoint(env), tools.propose(env)):
        assert reply.is_error
        assert "\n" not in reply.text, reply.text
        assert "not the worktree link goatherd made" in reply.text, reply.text
    assert not marker.exists(), marker.read_text()


def test_a_swapped_dot_git_is_refused_over_a_real_mcp_session(
    project: Path, tmp_path: Path
) -> None:
    payload, marker = _payload(tmp_path)
    command = _swap_command(project, payload)

    async def main() -> list[tuple[bool, str]]:
        params = server_parameters(project, str(tmp_path / "t.sqlite"), tmp_path / "w")
        async with agent(params) as me:
            await me.open("swap")
            await me.ok("run", command=command)
            replies = []
            for tool in ("diff", "checkpoint", "propose"):
                result = await me.call(tool)
                replies.append((bool(result.is_error), text(result)))
            return replies

    for is_error, message in anyio.run(main):
        assert is_error, message
        assert "not the worktree link goatherd made" in message, message
    assert not marker.exists(), marker.read_text()
