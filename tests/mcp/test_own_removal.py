"""``rm -r`` in the agent's own worktree runs after a checkpoint; elsewhere, denied.

The server takes the checkpoint first (recorded, named in the reply), so a
restore brings the directory back; a target outside the worktree, in
``.git``, the worktree itself, the human's repository, or one the rule
cannot resolve (a glob, a variable, ``~``, a ``cd`` before it) stays denied
and no checkpoint is taken.
"""

from __future__ import annotations

from pathlib import Path
from typing import cast

import pytest

from goatherd.integrations.mcp import (
    DESTRUCTIVE_COMMAND_RULE,
    WorkspaceTools,
    own_removal_targets,
)
from goatherd.integrations.mcp.recording import is_call
from tests.mcp.conftest import ToolsFactory, needs_landlock

pytestmark = [needs_landlock, pytest.mark.integration]


def _open(tools: WorkspaceTools) -> tuple[str, Path]:
    reply = tools.open_environment("rm")
    assert not reply.is_error, reply.text
    env = str(reply.data["environment_id"])
    return env, tools.environments.lookup(env).worktree


def _scratch(tools: WorkspaceTools, env: str) -> None:
    for name in ("scratch/a.txt", "scratch/deep/b.txt"):
        assert not tools.write_file(env, name, name).is_error


def _checkpoints(tools: WorkspaceTools, env: str) -> list[str]:
    scope = tools.environments.lookup(env).scope_id
    return [cp.id for cp in tools.environments.manager.checkpoints_for_scope(scope)]


def test_rm_r_inside_the_own_worktree_runs_after_a_checkpoint_that_restores_it(
    make_tools: ToolsFactory, trace_url: str
) -> None:
    tools = make_tools(trace_url)
    env, worktree = _open(tools)
    _scratch(tools, env)
    assert _checkpoints(tools, env) == []

    reply = tools.run(env, "rm -rf scratch/deep && rm -r -- scratch")
    assert not reply.is_error, reply.text
    checkpoint = str(reply.data["checkpoint_id"])
    assert reply.text.startswith(f"checkpoint {checkpoint} was taken")
    assert not (worktree / "scratch").exists()
    assert _checkpoints(tools, env) == [checkpoint]

    owner = f"{tools.environments.root_owner}:{env}"
    declared = [e for e in tools.store.read_path(owner) if is_call(e)][-1]
    assert declared.record.payload["checkpoint_id"] == checkpoint
    assert declared.record.payload["removes"] == ["scratch/deep", "scratch"]

    restored = tools.restore(env, checkpoint)
    assert not restored.is_error, restored.text
    assert (worktree / "scratch" / "deep" / "b.txt").read_text() == (
        "scratch/deep/b.txt"
    )


def test_rm_r_in_a_subdirectory_cwd_is_resolved_from_there(
    make_tools: ToolsFactory,
) -> None:
    tools = make_tools()
    env, worktree = _open(tools)
    _scratch(tools, env)
    reply = tools.run(env, "rm -r deep", cwd="scratch")
    assert not reply.is_error, reply.text
    assert "checkpoint_id" in reply.data
    assert (worktree / "scratch" / "a.txt").exists()
    assert not (worktree / "scratch" / "deep").exists()


DENIED = [
    "rm -r ../project",
    "rm -rf {repo}",
    "rm -rf {outside}",
    "rm -rf .git",
    "rm -rf scratch/../.git",
    "rm -rf .",
    "rm -r scratch*",
    'D=scratch; rm -r "$D"',
    "rm -r ~",
    "cd scratch && rm -r deep",
    "rm -r scratch; git reset --hard",
    "rm -r out",
    "sh -c 'rm -r scratch'",
    "rm --no-preserve-root -r scratch",
]


@pytest.mark.parametrize("command", DENIED)
def test_rm_r_of_anything_else_stays_denied_and_takes_no_checkpoint(
    make_tools: ToolsFactory, project: Path, tmp_path: Path, command: str
) -> None:
    tools = make_tools()
    env, worktree = _open(tools)
    _scratch(tools, env)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("keep")
    (worktree / "out").symlink_to(outside)
    line = command.format(repo=project, outside=outside)
    reply = tools.run(env, line)
    assert reply.is_error, line
    assert DESTRUCTIVE_COMMAND_RULE in reply.text
    denied = cast("dict[str, object]", reply.data["denied"])
    assert "rm -r" in str(denied["reason"]) or "git reset" in str(denied["reason"])
    assert _checkpoints(tools, env) == []
    assert (worktree / "scratch" / "deep" / "b.txt").exists()
    assert (outside / "keep.txt").exists()
    assert (project / "calc.py").exists()


def test_the_lexical_reading_of_own_removals() -> None:
    assert own_removal_targets("rm -rf build dist/x") == ("build", "dist/x")
    assert own_removal_targets("rm -r ./a/./b/", "sub") == ("sub/a/b",)
    assert own_removal_targets("ls && rm -rv a || echo no") == ("a",)
    assert own_removal_targets("rm -f a") is None  # nothing destructive to allow
    for line in DENIED:
        assert own_removal_targets(line.format(repo="/r", outside="/o")) in (
            None,
            ("out",),  # a symlink: only the worktree check sees where it leads
        ), line
    assert own_removal_targets("rm -r a", "../up") is None
    assert own_removal_targets("rm -r a", ".git") is None
