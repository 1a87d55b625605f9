"""The git sandbox's configuration: where ``exec`` runs, and the option for it.

:class:`GitSandboxConfig` is what ``open_sandbox("git", config)`` takes;
:class:`ExecPlacement` names where a confined command runs (the paddock or
the jail) and :func:`with_exec` builds the :class:`GitExec` option the
constructors of :mod:`.git` accept. It imports the application's ports and
errors only.
"""

from __future__ import annotations

import enum
import os
from dataclasses import dataclass, field

from goatherd.application.errors import SandboxConfigError
from goatherd.application.ports import ContainmentBackend

__all__ = ["ExecPlacement", "GitExec", "GitSandboxConfig", "with_exec"]


class ExecPlacement(enum.StrEnum):
    """Where a git sandbox runs a confined command (``docs/containment.md``).

    Attributes:
        PADDOCK: in the workspace itself (the worktree, or the repository in
            place): the command reads and writes the scope's files, and may
            write nowhere else but the extra writable roots.
        JAIL: in a copy of the workspace's current state, made for this one
            command in a new temporary directory (a detached worktree of the
            same repository) and deleted when it ends: the command may write
            only in the copy (and the extra roots), so the workspace is never
            changed. The copy holds what a capture holds: tracked and
            untracked files, not ignored ones.
    """

    PADDOCK = "paddock"
    JAIL = "jail"


@dataclass(frozen=True, slots=True)
class GitExec:
    """A git sandbox option (the seed's ``git.WithExec``): confine ``exec``.

    Attributes:
        backend: the containment backend that confines each command.
        placement: where each command runs.
    """

    backend: ContainmentBackend
    placement: ExecPlacement = ExecPlacement.PADDOCK


def with_exec(
    backend: ContainmentBackend, placement: ExecPlacement | str = ExecPlacement.PADDOCK
) -> GitExec:
    """Return the option that gives a git sandbox a confined ``exec``.

    ``new_local_git_sandbox(repo, with_exec(backend, ExecPlacement.PADDOCK))``
    is the seed's ``git.NewLocalGitSandbox(repo, git.WithExec(backend,
    confinement.PlacementPaddock))``.

    Raises:
        SandboxConfigError: ``placement`` names no placement.
    """
    return GitExec(backend, _placement(placement))


def _placement(value: object) -> ExecPlacement:
    if isinstance(value, str) and value in {p.value for p in ExecPlacement}:
        return ExecPlacement(value)
    known = ", ".join(p.value for p in ExecPlacement)
    raise SandboxConfigError(
        f"git sandbox: unknown exec placement {value!r} (known: {known})"
    )


@dataclass(frozen=True, slots=True)
class GitSandboxConfig:
    """Configuration for ``open_sandbox("git", config)``.

    Attributes:
        repo_path: the repository's top-level directory.
        worktree_path: a detached worktree to create (``None``: in place).
        exec_backend: a containment backend that confines ``exec``
            (``None``: ``exec`` is unsupported).
        extra_writable_roots: more directories a confined command may write
            (the workspace itself always is, in the paddock placement).
        exec_placement: where a confined command runs.
    """

    repo_path: str | os.PathLike[str]
    worktree_path: str | os.PathLike[str] | None = None
    exec_backend: ContainmentBackend | None = None
    extra_writable_roots: tuple[str, ...] = field(default_factory=tuple)
    exec_placement: ExecPlacement = ExecPlacement.PADDOCK
