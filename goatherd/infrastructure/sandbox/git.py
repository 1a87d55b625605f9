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
"""

from __future__ import annotations

import enum
import fcntl
import os
import shutil
import stat
import tempfile
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from goatherd.application.errors import (
    ApplyConflictError,
    ConflictHunk,
    GitError,
    SandboxConfigError,
    SandboxError,
    UnsafeGitDirError,
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
    truncate_diff,
)
from goatherd.domain.workspace import WorkspaceState
from goatherd.infrastructure.sandbox import gitcommit
from goatherd.infrastructure.sandbox.gitrunner import (
    GitRunner,
    RawChange,
    nul_list,
    scratch_index,
)
from goatherd.infrastructure.sandbox.gitstate import (
    GIT_BACKEND,
    GitTreeState,
    capture_state,
    capture_tree,
    changes_between,
    locate,
    materialize,
    resolve_state,
)
from goatherd.infrastructure.sandbox.merge import (
    CLASH,
    Side,
    conflicting_paths,
    merge_lines,
    merge_reason,
)
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
_DIFF_FLAGS = (
    "--no-ext-diff",
    "--no-textconv",
    "--no-color",
    "--no-renames",
    "--src-prefix=a/",
)
_POINTER_LIMIT = 4096


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


def _absolute(path: str | os.PathLike[str]) -> Path:
    return Path(os.path.normpath(os.path.abspath(os.fspath(path))))


class GitSandbox:
    """A git working tree as a sandbox (in place or a detached worktree)."""

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

    # ------------------------------------------------------------ states
    def capture(self) -> WorkspaceState:
        """Capture the working tree (index and files untouched)."""
        return capture_state(self._git)

    def apply(self, state: WorkspaceState) -> None:
        """Reset the working tree exactly to ``state`` (reusable).

        The state is validated before anything changes. Then HEAD is reset
        to the captured HEAD (rolling back later commits), untracked files
        are cleaned (ignored ones stay), and the captured tree's paths are
        written; the index is left at the captured HEAD, so the captured
        changes show as unstaged.
        """
        resolved = resolve_state(self._git, state)
        changes = changes_between(self._git, resolved.head_tree, resolved.tree)
        with self._lock:
            self._git.run("reset", "-q", "--hard", resolved.head)
            self._git.run("clean", "-fdq")
            materialize(self._git, resolved.tree, changes.values())

    def diff(self, state: WorkspaceState, max_lines: int = 0) -> tuple[str, list[str]]:
        """Diff the captured tree against the working tree now (read-only)."""
        resolved = resolve_state(self._git, state)
        head, real_index = locate(self._git)
        with scratch_index(real_index) as scratch:
            if not scratch.seeded:
                self._git.run("read-tree", head, env=scratch.env)
            self._git.run("add", "-A", env=scratch.env)
            base = ("diff", "--cached", *_DIFF_FLAGS, "--dst-prefix=b/", resolved.tree)
            names = self._git.run(*base, "--name-only", "-z", env=scratch.env)
            text = self._git.run(*base, env=scratch.env)
        decoded = text.decode("utf-8", "replace")
        return truncate_diff(decoded, max_lines), nul_list(names)

    def apply_delta(
        self, delta: WorkspaceState, base: WorkspaceState | None = None
    ) -> None:
        """Merge ``delta``'s changes since ``base`` into the working tree.

        ``base`` defaults to the HEAD the delta was captured on. Paths only
        the delta changed are written (the index is not touched, so staged
        work survives); paths both sides changed identically are fine; a text
        file both sides changed differently is merged line by line with
        ``git merge-file`` and written merged (ADR 0083).

        Raises:
            ApplyConflictError: naming the paths, and the line hunks, git's
                merge could not reconcile; the working tree is untouched.
        """
        theirs, todo, merged = self._plan_delta(delta, base)
        if not todo:
            return
        with self._lock:
            materialize(self._git, merged or theirs.tree, todo)

    def check_delta(
        self, delta: WorkspaceState, base: WorkspaceState | None = None
    ) -> None:
        """Raise what :meth:`apply_delta` would raise, changing nothing."""
        self._plan_delta(delta, base)

    def _plan_delta(
        self, delta: WorkspaceState, base: WorkspaceState | None
    ) -> tuple[GitTreeState, list[RawChange], str]:
        """Return the delta, the paths to write and the merged tree (or "")."""
        theirs = resolve_state(self._git, delta)
        base_tree = resolve_state(self._git, base).tree if base else theirs.head_tree
        ours = capture_tree(self._git)
        their_changes = changes_between(self._git, base_tree, theirs.tree)
        our_changes = changes_between(self._git, base_tree, ours.tree)
        both = conflicting_paths(their_changes, our_changes)
        todo = [c for p, c in their_changes.items() if our_changes.get(p) != c]
        if not both:
            return theirs, todo, ""
        reasons: dict[str, str] = {}
        hunks: list[ConflictHunk] = []
        written: dict[str, RawChange] = {}
        for path in both:
            mine, new = our_changes.get(path), their_changes.get(path)
            if mine is None or new is None:
                reasons[path] = CLASH
                continue
            reason = self._reason(mine, new)
            if reason:
                reasons[path] = reason
                continue
            result = merge_lines(
                path, self._blob(new.old_sha), self._blob(mine.sha), self._blob(new.sha)
            )
            if result.hunks:
                hunks += result.hunks
                continue
            sha = self._git.text("hash-object", "-w", "--no-filters", "--stdin",
                                 stdin=result.data)  # fmt: skip
            written[path] = RawChange(path, mine.mode, sha, new.old_mode, new.old_sha)
        if reasons or hunks:
            raise ApplyConflictError(
                both, "the delta and the workspace both changed", hunks=hunks,
                reasons=reasons,
            )  # fmt: skip
        return theirs, todo, self._merged_tree(theirs.tree, written.values())

    def _reason(self, mine: RawChange, new: RawChange) -> str | None:
        def side(mode: str, sha: str) -> Side | None:
            if mode == "000000":
                return None
            data = self._blob(sha) if mode.startswith("100") else b""
            return Side(int(mode, 8), data)

        return merge_reason(
            side(new.old_mode, new.old_sha),
            side(mine.mode, mine.sha),
            side(new.mode, new.sha),
            clash=False,
        )

    def _blob(self, sha: str) -> bytes:
        return self._git.run("cat-file", "blob", sha)

    def _merged_tree(self, tree: str, merged: Iterable[RawChange]) -> str:
        """Return ``tree`` with the merged paths' blobs in place."""
        info = b"".join(
            f"{c.mode} {c.sha}\t".encode() + c.path.encode("utf-8", "surrogateescape")
            + b"\0"
            for c in merged
        )  # fmt: skip
        with scratch_index(None) as scratch:
            self._git.run("read-tree", tree, env=scratch.env)
            self._git.run("update-index", "-z", "--index-info", env=scratch.env,
                          stdin=info)  # fmt: skip
            return self._git.text("write-tree", env=scratch.env)

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
