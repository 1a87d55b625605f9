"""The human side: the ``goatherd`` command line in its own process."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from returns.result import Failure

from goatherd.application import Sandbox
from goatherd.infrastructure import open_runtime, scope_manager_for
from goatherd.infrastructure.sandbox import new_local_git_sandbox, new_worktree_sandbox


def goatherd(*args: str) -> subprocess.CompletedProcess[str]:
    """Run the command line as a user does (a new process)."""
    return subprocess.run(
        [sys.executable, "-m", "goatherd", *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )


def has_command(name: str) -> bool:
    """Whether this build's command line has ``name``."""
    return goatherd(name, "--help").returncode == 0


def settle(db: str, repo: Path, output: str, action: str) -> str:
    """Settle ``output`` as a human would; return ``""`` or the one-line error.

    Uses ``goatherd settle`` where the command line has it, else the same
    command through the manager (a fresh runtime: another process's view).
    """
    if has_command("settle"):
        done = goatherd("settle", output, action, "--db", db)
        return "" if done.returncode == 0 else done.stderr.strip()
    runtime = open_runtime(db, bus=False)

    def resolve(scope_id: str, backend: str, path: str) -> Sandbox | None:
        if not backend and not path:
            return new_local_git_sandbox(repo)
        return new_worktree_sandbox(repo, path) if Path(path).is_dir() else None

    try:
        manager = scope_manager_for(runtime.store, resolver=resolve)
        verb = {"select": "selected", "apply": "applied", "discard": "discarded"}
        result = manager.settle(output, verb.get(action, action))
        return str(result.failure()) if isinstance(result, Failure) else ""
    finally:
        runtime.close()
