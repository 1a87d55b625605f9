"""What the CLI's commands share: opening a trace, resolving sandboxes.

Read commands open the trace with the read-only opener; write commands
(``settle``, ``discard``, ``restore``, ``cut publish``, ``projections``) first
prove that the trace exists with that same opener, so that no command ever
creates a database it was not asked to create (only ``import`` creates one).

Sandboxes come back the way recovery brings them back: the trace records the
backend and directory of every isolated (worktree) child; a root scope's
workspace is not recorded, so the user names it with ``--workspace [SCOPE=]DIR``
(default ``$GOATHERD_WORKSPACE``). A scope whose sandbox cannot be found
resolves to none, and a command that needs it says so in one line.
"""

from __future__ import annotations

import argparse
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

from returns.result import Failure, Result

from goatherd.application import Sandbox, SandboxResolver, ScopeManager
from goatherd.cli.parser import WORKSPACE_ENV
from goatherd.infrastructure import (
    Runtime,
    new_local_git_sandbox,
    new_worktree_sandbox,
    open_runtime,
)
from goatherd.infrastructure.store import (
    SqlAlchemyTraceStore,
    open_trace_store,
    open_trace_store_read_only,
)

__all__ = [
    "open_read_only",
    "open_writable",
    "recovered",
    "repository_of",
    "unwrap",
    "workspace_resolver",
]

T = TypeVar("T")


def open_read_only(db: str) -> SqlAlchemyTraceStore:
    """Open an existing trace without ever writing to it."""
    return open_trace_store_read_only(db)


def _require_existing(db: str) -> None:
    """Refuse a missing, empty or foreign trace before opening it for writing."""
    open_trace_store_read_only(db).close()


def open_writable(db: str) -> SqlAlchemyTraceStore:
    """Open an EXISTING trace for writing (never creates one)."""
    _require_existing(db)
    return open_trace_store(db)


def unwrap(result: Result[T, object]) -> T:
    """Return a Success's value; raise a Failure's error (or describe it)."""
    if isinstance(result, Failure):
        failure = result.failure()
        if isinstance(failure, BaseException):
            raise failure
        raise RuntimeError(str(failure))
    return result.unwrap()


def _workspaces(specs: list[str]) -> tuple[Path | None, dict[str, Path]]:
    """Split ``[SCOPE=]DIR`` values into a default and per-scope directories."""
    default: Path | None = None
    named: dict[str, Path] = {}
    env = os.environ.get(WORKSPACE_ENV)
    for spec in [env] if env and not specs else specs:
        scope, sep, directory = spec.rpartition("=")
        if sep and scope.startswith("scope:"):
            named[scope] = Path(directory)
        else:
            default = Path(spec)
    return default, named


def repository_of(worktree: Path) -> Path:
    """Return the main working directory of the repository ``worktree`` is in."""
    out = subprocess.run(
        # git is looked up on PATH by design, as the sandboxes do.
        ["git", "rev-parse", "--path-format=absolute", "--git-common-dir"],  # noqa: S607
        cwd=worktree,
        capture_output=True,
        text=True,
        check=True,
    )
    return Path(out.stdout.strip()).parent


def workspace_resolver(specs: list[str]) -> SandboxResolver:
    """Return recovery's resolver for the CLI (see the module docstring)."""
    default, named = _workspaces(specs)

    def resolve(scope_id: str, backend: str, path: str) -> Sandbox | None:
        if not backend and not path:
            root = named.get(scope_id, default)
            if root is None:
                return None
            return new_local_git_sandbox(root)
        if backend == "git" and path and Path(path).is_dir():
            return new_worktree_sandbox(repository_of(Path(path)), path)
        return None

    return resolve


@contextmanager
def recovered(
    args: argparse.Namespace, *, writable: bool = False, sandboxes: bool = False
) -> Iterator[tuple[Runtime, ScopeManager, SqlAlchemyTraceStore]]:
    """Yield the scope manager recovery rebuilds from ``args.db``.

    ``writable`` opens the existing trace for writing (else read-only);
    ``sandboxes`` re-adopts workspaces through :func:`workspace_resolver`.
    """
    specs: list[str] = getattr(args, "workspace", [])
    if writable:
        _require_existing(args.db)
    runtime = open_runtime(args.db, bus=False, read_only=not writable)
    try:
        resolver = workspace_resolver(specs) if sandboxes else None
        manager = unwrap(runtime.recover(resolver))
        yield runtime, manager, runtime.store
    finally:
        runtime.close()
