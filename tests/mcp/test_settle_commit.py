"""``propose`` tells the human how to settle the proposal as a git commit.

The server has no settle tool (a human settles, not the agent): the reply of
``propose`` carries ``settle_commit``, the command line that lands the
proposal as one commit on the repository's branch. Run as written in a new
process, it commits the agent's change with the trailers that lead back to
the trace, and ``goatherd show HEAD`` (from the repository) finds the output.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from goatherd.integrations.mcp import WorkspaceTools
from tests.mcp.conftest import git
from tests.mcp.human import goatherd

pytestmark = pytest.mark.integration


def test_the_proposals_commit_command_commits_it(
    make_tools, project: Path, sqlite_trace: str
) -> None:
    tools: WorkspaceTools = make_tools()
    env = str(tools.open_environment("fix-add").data["environment_id"])
    assert not tools.edit_file(env, "calc.py", "a - b", "a + b").is_error
    reply = tools.propose(env, "add adds")
    assert not reply.is_error, reply.text
    output = str(reply.data["output_id"])
    command = str(reply.data["settle_commit"])
    assert command == f"goatherd settle {output} select --commit --db {sqlite_trace}"
    assert f"`{command}`" in reply.text
    git(project, "config", "user.name", "Ada Lovelace")
    git(project, "config", "user.email", "ada@example.com")
    before = git(project, "rev-parse", "HEAD").strip()
    argv = shlex.split(command)
    assert argv[0] == "goatherd"
    done = subprocess.run(
        [sys.executable, "-m", "goatherd", *argv[1:]],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    head = git(project, "rev-parse", "HEAD").strip()
    assert git(project, "rev-parse", "HEAD~1").strip() == before
    assert f"committed {head}" in done.stdout
    assert "return a + b" in (project / "calc.py").read_text()
    trailers = git(project, "log", "-1", "--format=%(trailers)")
    assert f"Goatherd-Output: {output}" in trailers
    shown = goatherd("show", head, "--repo", str(project), "--db", sqlite_trace)
    assert shown.returncode == 0, shown.stderr
    assert f"output     {output}  (selected)" in shown.stdout
    assert "the trace records this commit" in shown.stdout
