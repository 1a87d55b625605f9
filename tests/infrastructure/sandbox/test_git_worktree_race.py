"""Worktree sandboxes of one repository made and removed by several processes.

``git worktree add``, ``remove`` and ``prune`` race with each other (a prune
or an add that runs while another add is half done fails it, or deletes its
administrative directory), so the git sandbox serializes them with a lock in
the repository's git directory. Without it this test fails a few cycles out
of sixty on two cores.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.infrastructure.sandbox import gitfixtures as fx

pytestmark = pytest.mark.integration

_WORKER = """
import sys
from pathlib import Path
from goatherd.application import SandboxSpec
from goatherd.infrastructure.sandbox import new_worktree_sandbox

repo, base, name, cycles = sys.argv[1], Path(sys.argv[2]), sys.argv[3], int(sys.argv[4])
for i in range(cycles):
    box = new_worktree_sandbox(repo, base / f"{name}-{i}")
    try:
        box.create(SandboxSpec())
        assert (base / f"{name}-{i}" / "README.md").is_file()
        box.destroy()
    except Exception as error:
        print(f"{name}-{i}: {error}", flush=True)
"""


def test_processes_adding_and_removing_worktrees_at_once_all_succeed(
    tmp_path: Path,
) -> None:
    repo = fx.make_repo(tmp_path / "repo", {"README.md": b"hello\n"})
    base = tmp_path / "worktrees"
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", _WORKER, str(repo), str(base), f"w{n}", "15"],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for n in range(4)
    ]
    failures = [worker.communicate(timeout=300)[0] for worker in workers]
    assert [worker.returncode for worker in workers] == [0, 0, 0, 0], failures
    assert "".join(failures) == ""
    listed = fx.git(repo, "worktree", "list", "--porcelain")
    assert listed.count("worktree ") == 1
    assert not list(base.iterdir())
