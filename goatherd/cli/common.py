"""What the CLI's commands share: opening a trace, resolving sandboxes.

Read commands open the trace with the read-only opener; write commands
(``settle``, ``discard``, ``restore``, ``cut publish``, ``projections``) first
prove that the trace exists with that same opener, so that no command ever
creates a database it was not asked to create (only ``import`` creates one).

Sandboxes come back the way the runtime re-adopts them: the trace records the
backend and address of every root (``scope.created``) and of every isolated
(worktree) child (``scope.forked``). An isolated child's worktree is used
where it was recorded; a root's repository is the one named with
``--workspace [SCOPE=]DIR`` (default ``$GOATHERD_WORKSPACE``), else the git
directory its record names, when it exists on this machine. A scope whose
sandbox cannot be found resolves to none, and a command that needs it says so
in one line. Sandboxes are resolved on demand by the command's manager, never
by recovery: recovery with a resolver would record stale checkpoints as
invalid, a write no command should make as a side effect.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Final, TypeVar

from returns.result import Failure, Result

from goatherd.cli.parser import WORKSPACE_ENV
from goatherd.domain.errors import GoatherdError
from goatherd.infrastructure.store import (
    SqlAlchemyTraceStore,
    open_trace_store,
    open_trace_store_read_only,
)

if TYPE_CHECKING:
    from goatherd.application import Sandbox, SandboxResolver, ScopeManager
    from goatherd.infrastructure import Runtime

__all__ = [
    "open_read_only",
    "open_writable",
    "recorded_roots",
    "recovered",
    "repository_of",
    "unwrap",
    "workspace_resolver",
]

T = TypeVar("T")
GIT_BACKEND: Final = "git"
"""The backend name of git sandboxes (``GitSandbox.backend()``)."""


def open_read_only(db: str, *, live: bool = False) -> SqlAlchemyTraceStore:
    """Open an existing trace without ever writing to it.

    ``live``: the reader stays open while writers work (``log --follow``,
    ``traceui``) and must see their commits, so SQLite reads through the WAL.
    Without it a file with no WAL is read as it stands, with no side files,
    which also works where this user may not write.
    """
    return open_trace_store_read_only(db, live=live and _can_follow(db))


def _can_follow(db: str) -> bool:
    """Whether a live SQLite reader can open ``db`` (PostgreSQL: always).

    Reading through the WAL needs its ``-shm``: one a writer left, or one this
    user may create beside the file. In a directory this user cannot write,
    with no ``-wal`` (no writer is connected: SQLite keeps the file while
    one is), the file is read as it stands.
    """
    if "://" in db:
        from sqlalchemy.engine import make_url

        url = make_url(db)
        if url.get_backend_name() != "sqlite" or not url.database:
            return True
        db = url.database
    file = Path(db)
    return Path(f"{file}-wal").exists() or os.access(file.parent, os.W_OK)


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
    from goatherd.infrastructure.sandbox.gitrunner import GitRunner

    common = GitRunner(worktree).text(  # the safe configuration (ADR 0067)
        "rev-parse", "--path-format=absolute", "--git-common-dir"
    )
    return Path(common).parent


def recorded_roots(runtime: Runtime) -> dict[str, Path]:
    """Return each root scope's recorded git directory that exists here."""
    from goatherd.domain.scope import scope_id_for

    runtime.model.refresh()
    return {
        scope_id_for(scope.owner): Path(scope.sandbox_path)
        for scope in runtime.model.scopes()
        if scope.parent_owner is None
        and scope.sandbox_backend == GIT_BACKEND
        and scope.sandbox_path
        and Path(scope.sandbox_path).is_dir()
    }


def workspace_resolver(
    specs: list[str], recorded: Mapping[str, Path] | None = None
) -> SandboxResolver:
    """Return the CLI's resolver (see the module docstring).

    Args:
        specs: the ``--workspace`` values (``[SCOPE=]DIR``).
        recorded: each root's recorded git directory (:func:`recorded_roots`).
    """
    from goatherd.application.errors import GitError, SandboxError
    from goatherd.infrastructure.sandbox import (
        new_local_git_sandbox,
        new_worktree_sandbox,
    )

    default, named = _workspaces(specs)
    known = dict(recorded or {})

    def resolve(scope_id: str, backend: str, path: str) -> Sandbox | None:
        if not backend and not path:  # a root, as the resolver contract asks
            root = named.get(scope_id, default) or known.get(scope_id)
            return None if root is None else new_local_git_sandbox(root)
        if backend == GIT_BACKEND and path and Path(path).is_dir():
            try:
                repository = repository_of(Path(path))
            except (GitError, SandboxError):
                return None  # not a worktree any more (its repository moved)
            return new_worktree_sandbox(repository, path)
        return None

    return resolve


@contextmanager
def recovered(
    args: argparse.Namespace, *, writable: bool = False, sandboxes: bool = False
) -> Iterator[tuple[Runtime, ScopeManager, SqlAlchemyTraceStore]]:
    """Yield a scope manager over ``args.db`` as recovery checks it.

    Recovery (without a resolver: it writes nothing) refuses an inconsistent
    or undecodable trace. ``writable`` opens the existing trace for writing
    (else read-only); ``sandboxes`` gives a manager that re-adopts workspaces
    on demand through :func:`workspace_resolver`. A runtime refusal that
    leaves the block is re-raised as the CLI's one line naming the command
    to type next (:func:`goatherd.cli.hints.refusal`).
    """
    from goatherd.infrastructure.bootstrap import open_runtime

    specs: list[str] = getattr(args, "workspace", [])
    if writable:
        _require_existing(args.db)
    runtime = open_runtime(args.db, bus=False, read_only=not writable)
    try:
        manager = unwrap(runtime.recover(None))
        if sandboxes:
            resolver = workspace_resolver(specs, recorded_roots(runtime))
            manager = runtime.new_manager(resolver)
        yield runtime, manager, runtime.store
    except GoatherdError as error:
        from goatherd.cli.hints import refusal

        translated = refusal(error, args, runtime.model)
        if translated is None:
            raise
        raise translated from error
    finally:
        runtime.close()
