"""The human side: the ``goatherd`` command line in its own process.

Each helper runs the command a user types (``goatherd scopes``, ``diff``,
``settle``) in a new process.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from goatherd.application import Sandbox, ScopeManager
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


def scopes(db: str) -> dict[str, Any]:
    """The scope tree with outputs and checkpoints, as ``goatherd scopes`` has it."""
    done = goatherd("scopes", "--db", db, "--json")
    assert done.returncode == 0, done.stderr
    listed: dict[str, Any] = json.loads(done.stdout)
    return listed


def diff(db: str, output: str) -> str:
    """What ``output`` changes, as ``goatherd diff OUTPUT`` prints it."""
    done = goatherd("diff", output, "--db", db)
    assert done.returncode == 0, done.stderr
    return done.stdout


def settle(db: str, output: str, action: str) -> str:
    """Settle ``output`` as a human would; return ``""`` or the one-line error."""
    done = goatherd("settle", output, action, "--db", db)
    return "" if done.returncode == 0 else done.stderr.strip()


@contextmanager
def manager_for(db: str, repo: Path) -> Iterator[ScopeManager]:
    """A scope manager on a fresh runtime of ``db`` (another process's view)."""
    runtime = open_runtime(db, bus=False)

    def resolve(scope_id: str, backend: str, path: str) -> Sandbox | None:
        if not backend and not path:
            return new_local_git_sandbox(repo)
        return new_worktree_sandbox(repo, path) if Path(path).is_dir() else None

    try:
        yield scope_manager_for(runtime.store, resolver=resolve)
    finally:
        runtime.close()
