"""A real git repository, a trace file and one sealed output for the runtime tests."""

from __future__ import annotations

import subprocess
from pathlib import Path

from goatherd.application.ports import SandboxSpec
from goatherd.infrastructure.bootstrap import scope_manager_for
from goatherd.infrastructure.sandbox import (
    GitSandbox,
    new_local_git_sandbox,
    new_worktree_sandbox,
)
from goatherd.infrastructure.store import SQLiteTraceStore


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=Test", "-c", "user.email=t@example.com", *args],
        cwd=cwd,
        capture_output=True,
        check=True,
    )
    return done.stdout.decode()


def make_repo(path: Path, files: dict[str, bytes] | None = None) -> Path:
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    for name, data in (files or {"README.md": b"hello\n"}).items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_bytes(data)
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "initial")
    return path


def root_sandbox(repo: Path) -> GitSandbox:
    sandbox = new_local_git_sandbox(repo)
    sandbox.create(SandboxSpec())
    return sandbox


def worktree(repo: Path, where: Path) -> GitSandbox:
    sandbox = new_worktree_sandbox(repo, where)
    sandbox.create(SandboxSpec())
    return sandbox


def sealed_output(tmp: Path) -> tuple[Path, Path, str]:
    """Return (trace file, repository, output id) of one sealed isolated child."""
    repo = make_repo(tmp / "repo")
    db = tmp / "trace.db"
    with SQLiteTraceStore(db) as store:
        mgr = scope_manager_for(store)
        root = mgr.create("agent:main", root_sandbox(repo)).unwrap()
        wt = worktree(repo, tmp / "wt-try")
        child = mgr.fork_isolated(root.id, "agent:try", None, wt).unwrap()
        (tmp / "wt-try" / "answer.txt").write_bytes(b"42\n")  # the agent's work
        out = mgr.seal(child.id).unwrap()
    return db, repo, out.id
