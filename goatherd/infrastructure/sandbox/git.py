"""The ``git`` sandbox: a repository in place, or a detached worktree per scope.

In-place mode materializes on the user's repository (``create`` only
validates, ``destroy`` is a no-op: it never deletes what it did not create).
Worktree mode creates a detached worktree on ``create`` and removes it on
``destroy``. Both capture content-addressed states (see ``gitstate``), apply
them exactly (``reset --hard`` to the captured HEAD, ``clean -fd``, then the
captured tree's paths), diff against the captured tree, and merge deltas
three-way: per path, and line by line with ``git merge-file`` (ADR 0083).
With a containment backend (``with_exec(backend,
placement)``, the seed's ``git.WithExec``), ``exec`` runs commands confined:
in the workspace itself (``ExecPlacement.PADDOCK``) or in a throwaway copy of
its current state (``ExecPlacement.JAIL``). The backend self-registers as
``git``.

:class:`GitSandbox` is built up in layers: :mod:`.gitoptions` holds its
configuration and the ``with_exec`` option, :mod:`.gitworkdir` its
directories and the checked git runner (ADR 0067), :mod:`.gitapply` its
states (capture, apply, diff, the three-way delta merge). This module adds
the worktree's lifecycle, ``exec`` and the commits, and the constructors.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from goatherd.application.errors import (
    GitError,
    SandboxConfigError,
    SandboxError,
    UnsupportedError,
)
from goatherd.application.ports import (
    CONTAINMENT_BUFFERED,
    CONTAINMENT_CONTAINED,
    CONTAINMENT_UNCONTAINED,
    ContainmentBackend,
    ExecRequest,
    ExecResult,
    SandboxCapabilities,
    SandboxSpec,
    StateCommit,
)
from goatherd.infrastructure.sandbox import gitcommit
from goatherd.infrastructure.sandbox.gitapply import GitApply
from goatherd.infrastructure.sandbox.gitoptions import (
    ExecPlacement,
    GitExec,
    GitSandboxConfig,
    with_exec,
)
from goatherd.infrastructure.sandbox.gitrunner import GitRunner
from goatherd.infrastructure.sandbox.gitstate import GIT_BACKEND
from goatherd.infrastructure.sandbox.paths import resolve_inside
from goatherd.infrastructure.sandbox.registry import register_sandbox

__all__ = [
    "DEFAULT_EXEC_TIMEOUT_SECONDS",
    "ExecPlacement",
    "GitExec",
    "GitSandbox",
    "GitSandboxConfig",
    "new_local_git_sandbox",
    "new_worktree_sandbox",
    "with_exec",
]

DEFAULT_EXEC_TIMEOUT_SECONDS = 600.0


class GitSandbox(GitApply):
    """A git working tree as a sandbox (in place or a detached worktree)."""

    # ------------------------------------------------------------ identity
    @property
    def workdir(self) -> Path:
        """The directory this sandbox works in (the worktree, else the repo)."""
        return self._worktree or self._repo

    @property
    def exec_placement(self) -> ExecPlacement:
        """Where a confined command runs."""
        return self._placement

    def backend(self) -> str:
        return GIT_BACKEND

    def address(self) -> str:
        """Return the normalized absolute path of the working directory."""
        return str(self.workdir)

    def capabilities(self) -> SandboxCapabilities:
        isolated = self._worktree is not None
        if self._exec_backend is not None:
            containment = CONTAINMENT_CONTAINED
        else:
            containment = CONTAINMENT_BUFFERED if isolated else CONTAINMENT_UNCONTAINED
        return SandboxCapabilities(
            lifecycle=isolated,
            exec=self._exec_backend is not None,
            file_io=False,
            diff=True,
            isolated=isolated,
            containment=containment,
        )

    # ------------------------------------------------------------ lifecycle
    def create(self, spec: SandboxSpec) -> None:
        """Validate the repository; in worktree mode add the detached worktree.

        Raises:
            SandboxError: the repository is not one, the worktree path lies
                inside the repository or already holds files.
        """
        self._spec = spec
        repo_git = self._repo_git()
        head = self._validate_repository(repo_git)
        if self._worktree is None:
            return
        with self._lock:
            self._add_worktree(repo_git, head, self._worktree)

    def _validate_repository(self, repo_git: GitRunner) -> str:
        if not self._repo.is_dir():
            raise SandboxError(f"git sandbox: {self._repo} is not a git repository")
        try:
            top, head = repo_git.text("rev-parse", "--show-toplevel", "HEAD").split(
                "\n"
            )
        except GitError as exc:
            if _killed(exc):
                raise  # git was killed: nothing is wrong with the repository
            raise SandboxError(
                f"git sandbox: {self._repo} is not a git repository "
                f"with a commit: {exc.stderr}"
            ) from exc
        if os.path.realpath(top) != os.path.realpath(self._repo):
            raise SandboxError(
                f"git sandbox: {self._repo} is inside the repository {top}, not its top"
            )
        return head

    def _add_worktree(self, repo_git: GitRunner, head: str, target: Path) -> None:
        real_repo = os.path.realpath(self._repo)
        real_target = os.path.realpath(target)
        if real_target.startswith(real_repo + os.sep):
            raise SandboxError(
                f"git sandbox: worktree path {target} lies inside the repository "
                f"{self._repo}; its captures would swallow the worktree"
            )
        with _worktree_admin(self._repo, repo_git):
            repo_git.run("worktree", "prune")
            if target.exists() and (not target.is_dir() or any(target.iterdir())):
                raise SandboxError(
                    f"git sandbox: worktree path {target} already exists and is not"
                    " empty (another scope's worktree or user data); refusing to"
                    " reuse it"
                )
            target.parent.mkdir(parents=True, exist_ok=True)
            repo_git.run("worktree", "add", "--detach", str(target), head)

    def destroy(self) -> None:
        """Remove the worktree (in place: nothing). Idempotent.

        Raises:
            SandboxError: naming both failures when neither ``git worktree
                remove`` nor the directory removal fallback worked.
        """
        if self._worktree is None:
            return
        with self._lock:
            self._remove_worktree(self._worktree)

    def _remove_worktree(self, target: Path) -> None:
        repo_git = GitRunner(self._repo)
        with _worktree_admin(self._repo, repo_git):
            self._remove_worktree_locked(repo_git, target)

    @staticmethod
    def _remove_worktree_locked(repo_git: GitRunner, target: Path) -> None:
        if target.exists():
            try:
                repo_git.run("worktree", "remove", "--force", str(target))
            except (GitError, SandboxError) as first:
                if _killed(first):
                    # git was killed (or timed out) halfway: the next guarded
                    # call finishes the removal it left (ADR 0069).
                    repo_git.run("worktree", "prune")
                if target.exists():
                    _remove_fallback(target, first)
        repo_git.run("worktree", "prune")

    # ------------------------------------------------------------ exec
    def exec(self, request: ExecRequest) -> ExecResult:
        """Run a command confined by the exec backend, where the placement says.

        Paddock: in the workspace. Jail: in a copy of the workspace's current
        state, removed afterwards (the workspace is not changed).

        Raises:
            UnsupportedError: without an exec backend.
            WorkspaceEscapeError: when ``request.cwd`` leaves the workspace.
            ContainmentUnavailableError: when confinement cannot be enforced
                (the command does not run).
        """
        backend = self._exec_backend
        if backend is None:
            raise UnsupportedError(
                GIT_BACKEND,
                "exec",
                "this backend owns git state only; give it an exec backend",
            )
        cwd = resolve_inside(self.workdir, request.cwd, allow_root=True)
        if self._placement is ExecPlacement.JAIL:
            return self._exec_jailed(backend, request, cwd.relative_to(self.workdir))
        return self._exec_in(backend, request, self.workdir, cwd)

    def _exec_in(
        self, backend: ContainmentBackend, request: ExecRequest, top: Path, cwd: Path
    ) -> ExecResult:
        if not cwd.is_dir():
            raise SandboxError(
                f"git sandbox: working directory {request.cwd!r} does not exist"
            )
        env = {**self._spec.env, **request.env}
        timeout = request.timeout or self._spec.timeout or DEFAULT_EXEC_TIMEOUT_SECONDS
        confined = ExecRequest(
            request.command,
            request.args,
            str(cwd),
            env,
            timeout,
            request.stdin,
            request.output_limit,
            request.inherit_env,
        )
        roots = (str(top), *self._extra_roots)
        return backend.run(confined, writable_roots=roots, cwd=str(cwd))

    def _exec_jailed(
        self, backend: ContainmentBackend, request: ExecRequest, relative: Path
    ) -> ExecResult:
        state = self.capture()
        with tempfile.TemporaryDirectory(prefix="goatherd-jail-") as parent:
            cell = Path(parent) / "cell"
            jail = GitSandbox(GitSandboxConfig(self._repo, cell))
            jail.create(self._spec)
            try:
                jail.apply(state)
                return self._exec_in(backend, request, cell, cell / relative)
            finally:
                jail.destroy()

    def read_file(self, path: str) -> bytes:
        raise UnsupportedError(
            GIT_BACKEND, "read_file", "this backend owns git state only"
        )

    def write_file(self, path: str, data: bytes, perm: int = 0o644) -> None:
        raise UnsupportedError(
            GIT_BACKEND, "write_file", "this backend owns git state only"
        )

    # ------------------------------------------------------------ commits
    def check_committable(self, author: str | None = None) -> None:
        """Refuse a detached HEAD or a missing identity (see ``gitcommit``)."""
        gitcommit.check_committable(self._git, author)

    def find_commit(self, trailer: str, value: str) -> StateCommit | None:
        """Return the recent commit of HEAD's history with ``trailer: value``."""
        return gitcommit.find_commit(self._git, trailer, value)

    def commit_paths(
        self, paths: Sequence[str], message: str, *, author: str | None = None
    ) -> StateCommit:
        """Commit ``paths`` as they stand onto HEAD's branch (see ``gitcommit``)."""
        with self._lock:
            return gitcommit.commit_paths(self._git, paths, message, author=author)


def _exec_option(
    options: tuple[GitExec, ...], exec_backend: ContainmentBackend | None
) -> GitExec | None:
    for option in options:
        if not isinstance(option, GitExec):
            raise SandboxConfigError(
                "git sandbox: options must come from with_exec(backend, placement), "
                f"got {type(option).__name__}"
            )
    if len(options) + (exec_backend is not None) > 1:
        raise SandboxConfigError(
            "git sandbox: give the exec backend once (one with_exec option, "
            "or exec_backend=)"
        )
    if exec_backend is not None:
        return GitExec(exec_backend)
    return options[0] if options else None


def _config(
    repo_path: str | os.PathLike[str],
    worktree_path: str | os.PathLike[str] | None,
    option: GitExec | None,
) -> GitSandboxConfig:
    if option is None:
        return GitSandboxConfig(repo_path, worktree_path)
    return GitSandboxConfig(
        repo_path, worktree_path, option.backend, exec_placement=option.placement
    )


def _killed(error: SandboxError) -> bool:
    """Whether git was killed by a signal or timed out (not a refusal)."""
    return isinstance(error, GitError) and (
        error.returncode is None or error.returncode < 0
    )


def _remove_fallback(target: Path, first: SandboxError) -> None:
    if not (target / ".git").is_file():
        raise SandboxError(
            f"git sandbox: {target} is not a worktree we created; "
            f"left in place ({first})"
        ) from first
    try:
        shutil.rmtree(target)
    except OSError as second:
        raise SandboxError(
            f"git sandbox: cannot remove worktree {target}: "
            f"{first}; fallback removal failed: {second}"
        ) from second


@contextmanager
def _worktree_admin(repo: Path, repo_git: GitRunner) -> Iterator[None]:
    """Hold the repository's worktree lock, across processes, while inside.

    ``git worktree add``, ``remove`` and ``prune`` are not safe against each
    other: a prune (or another add) that runs while an add has made the new
    worktree's administrative directory but not yet filled it removes that
    directory or fails reading it, and the add fails. Every worktree change a
    git sandbox makes takes an exclusive ``flock`` on
    ``goatherd-worktrees.lock`` in the repository's common git directory; the
    kernel releases it when the holder dies.
    """
    dot_git = repo / ".git"
    if dot_git.is_dir():
        common = dot_git
    else:
        common = Path(
            repo_git.text("rev-parse", "--path-format=absolute", "--git-common-dir")
        )
    fd = os.open(common / "goatherd-worktrees.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def new_local_git_sandbox(
    repo_path: str | os.PathLike[str],
    *options: GitExec,
    exec_backend: ContainmentBackend | None = None,
) -> GitSandbox:
    """Return an in-place sandbox on ``repo_path`` (``destroy`` is a no-op).

    ``options``: at most one :func:`with_exec`; ``exec_backend=b`` is
    ``with_exec(b)`` (the paddock placement).

    Raises:
        SandboxConfigError: an option that is no :func:`with_exec`, or two.
    """
    option = _exec_option(options, exec_backend)
    return GitSandbox(_config(repo_path, None, option))


def new_worktree_sandbox(
    repo_path: str | os.PathLike[str],
    worktree_path: str | os.PathLike[str],
    *options: GitExec,
    exec_backend: ContainmentBackend | None = None,
) -> GitSandbox:
    """Return a sandbox that owns a detached worktree of ``repo_path``.

    ``options`` as for :func:`new_local_git_sandbox`.
    """
    option = _exec_option(options, exec_backend)
    return GitSandbox(_config(repo_path, worktree_path, option))


def _open_git(config: object) -> GitSandbox:
    if not isinstance(config, GitSandboxConfig):
        raise SandboxConfigError(
            "git sandbox: config must be a GitSandboxConfig, "
            f"got {type(config).__name__}"
        )
    return GitSandbox(config)


register_sandbox(GIT_BACKEND, _open_git)
