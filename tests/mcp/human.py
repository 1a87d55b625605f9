"""The human side: the ``goatherd`` command line in its own process.

Each helper uses the command a user types (``goatherd scopes``, ``diff``,
``settle``). Where this build's command line does not have it yet, it falls
back to what the command does: ``goatherd recover`` lists the same scope tree,
and the diff and the settle go through a fresh runtime's manager (another
process's view of the same trace, the same commands and checks).
"""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from returns.result import Failure

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


@functools.cache
def has_command(name: str) -> bool:
    """Whether this build's command line has ``name``."""
    return goatherd(name, "--help").returncode == 0


def scopes(db: str) -> dict[str, Any]:
    """The scope tree with outputs and checkpoints, as the command line prints it."""
    if has_command("scopes"):
        done = goatherd("scopes", "--db", db, "--json")
    else:
        done = goatherd("recover", db, "--json")
    assert done.returncode == 0, done.stderr
    listed: dict[str, Any] = json.loads(done.stdout)
    return listed


def diff(db: str, repo: Path, output: str) -> str:
    """What ``output`` changes, as ``goatherd diff OUTPUT`` prints it."""
    if has_command("diff"):
        done = goatherd("diff", output, "--db", db)
        assert done.returncode == 0, done.stderr
        return done.stdout
    with manager_for(db, repo) as manager:
        found = manager.output(output)
        assert found is not None, output
        return found.diff


def settle(db: str, repo: Path, output: str, action: str) -> str:
    """Settle ``output`` as a human would; return ``""`` or the one-line error."""
    if has_command("settle"):
        done = goatherd("settle", output, action, "--db", db)
        return "" if done.returncode == 0 else done.stderr.strip()
    with manager_for(db, repo) as manager:
        verb = {"select": "selected", "apply": "applied", "discard": "discarded"}
        result = manager.settle(output, verb.get(action, action))
        return str(result.failure()) if isinstance(result, Failure) else ""


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
