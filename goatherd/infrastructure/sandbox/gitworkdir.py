"""A git sandbox's working directory, and the git runner that checks it first.

:class:`GitWorkdir` is the base of :class:`~.git.GitSandbox`: it holds the
configuration and hands out a :class:`GitRunner` for the workspace only
after checking its git directory (ADR 0067): the worktree's ``.git`` link
and its administrative directory both ways, and no ``alternates`` borrowing
objects from elsewhere. It imports the application's ports and errors,
:mod:`.gitrunner` and :mod:`.gitoptions`.
"""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

from goatherd.application.errors import GitError, SandboxConfigError, UnsafeGitDirError
from goatherd.application.ports import SandboxSpec
from goatherd.infrastructure.sandbox.gitoptions import GitSandboxConfig, _placement
from goatherd.infrastructure.sandbox.gitrunner import GitRunner

__all__ = ["GitWorkdir"]

_POINTER_LIMIT = 4096


def _absolute(path: str | os.PathLike[str]) -> Path:
    return Path(os.path.normpath(os.path.abspath(os.fspath(path))))


class GitWorkdir:
    """A git working tree's configuration and its checked git directory."""

    def __init__(self, config: GitSandboxConfig) -> None:
        self._repo = _absolute(config.repo_path)
        self._worktree = (
            None if config.worktree_path is None else _absolute(config.worktree_path)
        )
        if self._worktree is not None and self._worktree == self._repo:
            raise SandboxConfigError(
                f"git sandbox: worktree path {self._worktree} is the repository itself"
            )
        self._exec_backend = config.exec_backend
        self._placement = _placement(config.exec_placement)
        self._extra_roots = tuple(config.extra_writable_roots)
        self._spec = SandboxSpec()
        self._lock = threading.Lock()
        self._common: Path | None = None

    # ------------------------------------------------------------ git dirs
    @property
    def _git(self) -> GitRunner:
        """A runner for the workspace, its git directory checked first (ADR 0067).

        Raises:
            UnsafeGitDirError: the worktree's ``.git`` or the git directory is
                not the one goatherd made; git is not run.
        """
        if self._worktree is None:
            return self._repo_git()
        if not self._worktree.is_dir():
            return GitRunner(self._worktree)  # locate names the missing directory
        admin = _worktree_git_dir(self._common_dir(), self._worktree)
        return GitRunner(self._worktree, git_dir=admin, work_tree=self._worktree)

    def _repo_git(self) -> GitRunner:
        """A runner for the repository in place, with its git directory explicit."""
        dot_git = self._repo / ".git"
        try:
            mode = os.lstat(dot_git).st_mode
        except OSError:
            return GitRunner(self._repo)  # rev-parse names what is wrong
        if stat.S_ISDIR(mode):
            _refuse_alternates(dot_git)
            return GitRunner(self._repo, git_dir=dot_git, work_tree=self._repo)
        # The repository is itself a linked worktree (or a submodule): let git
        # resolve its pointer, under the safe configuration, then check it.
        plain = GitRunner(self._repo)
        try:
            git_dir, common = plain.text(
                "rev-parse", "--path-format=absolute", "--git-dir", "--git-common-dir"
            ).split("\n")
        except (GitError, ValueError):
            return plain
        _refuse_alternates(Path(common))
        return GitRunner(self._repo, git_dir=Path(git_dir), work_tree=self._repo)

    def _common_dir(self) -> Path:
        """The repository's common git directory (where worktrees are recorded)."""
        if self._common is None:
            repo_git = self._repo_git()
            common = repo_git.text(
                "rev-parse", "--path-format=absolute", "--git-common-dir"
            )
            self._common = Path(os.path.realpath(common))
        _refuse_alternates(self._common)
        return self._common


def _refuse_alternates(common: Path) -> None:
    """Refuse a git directory that borrows objects from elsewhere.

    goatherd never writes ``objects/info/alternates``; one present is either
    the user's (a shared clone, not supported as a workspace) or planted to
    make a crafted git directory look like the real one.
    """
    alternates = common / "objects" / "info" / "alternates"
    if os.path.lexists(alternates):
        raise UnsafeGitDirError(
            f"git sandbox: {alternates} exists; goatherd does not run git on a "
            "repository that borrows objects through alternates"
        )


def _worktree_git_dir(common: Path, worktree: Path) -> Path:
    """Return the administrative directory of ``worktree``, checked both ways.

    The worktree's ``.git`` must be a regular file holding one ``gitdir:``
    line naming a directory directly under ``<common>/worktrees``, whose
    ``gitdir`` file names this ``.git`` back and whose ``commondir`` leads to
    ``common``: what ``git worktree add`` wrote. Anything else was swapped.

    Raises:
        UnsafeGitDirError: naming the first link that disagrees.
    """
    dot_git = worktree / ".git"

    def refuse(why: str) -> UnsafeGitDirError:
        return UnsafeGitDirError(
            f"git sandbox: {dot_git} is not the worktree link goatherd made ({why});"
            " refusing to run git there"
        )

    try:
        mode = os.lstat(dot_git).st_mode
    except OSError as exc:
        raise refuse("it is missing") from exc
    if not stat.S_ISREG(mode):
        raise refuse("it is not a regular file")
    with open(dot_git, "rb") as handle:
        raw = handle.read(_POINTER_LIMIT + 1)
    line = raw.decode("utf-8", "surrogateescape").removesuffix("\n")
    if len(raw) > _POINTER_LIMIT or "\n" in line or not line.startswith("gitdir: "):
        raise refuse("it is not one gitdir: line")
    admin = Path(line.removeprefix("gitdir: "))
    if not admin.is_absolute():
        admin = worktree / admin
    real_admin = Path(os.path.realpath(admin))
    if real_admin.parent != Path(os.path.realpath(common / "worktrees")):
        raise refuse(f"it points to {admin}, outside {common / 'worktrees'}")
    try:
        back = (real_admin / "gitdir").read_text("utf-8").strip()
        common_link = (real_admin / "commondir").read_text("utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise refuse(f"{real_admin} lacks its gitdir or commondir") from exc
    if os.path.realpath(back) != os.path.realpath(dot_git):
        raise refuse(f"{real_admin} belongs to {back}")
    if Path(os.path.realpath(real_admin / common_link)) != Path(
        os.path.realpath(common)
    ):
        raise refuse(f"{real_admin}'s commondir is not {common}")
    return real_admin
