"""The application layer's exceptions for the sandbox seam and its backends.

Hierarchy::

    GoatherdError (domain)
      SandboxError                     a sandbox operation failed (root of this module)
        NoSandboxError                 a scope op ran on a pure-causal scope
        UnsupportedError               the backend lacks the capability (also
                                       ``NotImplementedError``)
        UnknownSandboxBackendError     ``open_sandbox`` got an unregistered name
        SandboxConfigError             a factory got a config it cannot use
        SandboxOwnershipError          ``with_sandbox`` claims an ownership the
                                       trace does not record (also ``ValueError``)
        WorkspaceEscapeError           a path leaves the workspace (also ``ValueError``)
        InvalidWorkspaceStateError     a state from another backend or repository,
                                       or a corrupt one (also ``ValueError``)
        ApplyConflictError             a delta or settlement cannot merge (hunks named)
        GitError                       a git subprocess failed (carries git's stderr)
        UnsafeGitDirError              a workspace's ``.git`` is not the one goatherd
                                       made (swapped pointer, alternates): nothing ran
        ContainmentError               a command could not be confined
          ContainmentUnavailableError  the kernel cannot enforce the policy
        ExecTimeoutError               a sandboxed command outran its timeout
        InvalidExecRequestError        an exec request field has the wrong type or
                                       bytes (also ``ValueError``)
        SettleCommitError              ``settle(..., commit=True)`` made no commit
                                       (not a git workspace, detached HEAD, no
                                       identity, nothing to commit)

Every message names what was wrong. A failing operation leaves the workspace as
it found it unless the docstring of the operation says otherwise.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from goatherd.domain.errors import GoatherdError

__all__ = [
    "ApplyConflictError",
    "ConflictHunk",
    "ContainmentError",
    "ContainmentUnavailableError",
    "ExecTimeoutError",
    "GitError",
    "InvalidExecRequestError",
    "InvalidWorkspaceStateError",
    "LineRange",
    "NoSandboxError",
    "SandboxConfigError",
    "SandboxError",
    "SandboxOwnershipError",
    "SettleCommitError",
    "UnknownSandboxBackendError",
    "UnsafeGitDirError",
    "UnsupportedError",
    "WorkspaceEscapeError",
]


class SandboxError(GoatherdError):
    """A sandbox operation failed; the root of the sandbox seam's errors."""


class UnsafeGitDirError(SandboxError):
    """Raised when a workspace's git directory is not the one goatherd made.

    A worktree whose ``.git`` file points anywhere but the administrative
    directory ``git worktree add`` made for it (or whose back-links disagree),
    or a git directory that borrows objects through ``objects/info/alternates``:
    goatherd refuses before running git there (ADR 0067).
    """


class NoSandboxError(SandboxError):
    """Raised by a workspace operation on a scope created without a sandbox."""

    def __init__(self, detail: str = "") -> None:
        """Build ``scope has no sandbox`` with an optional detail."""
        message = "scope has no sandbox"
        super().__init__(f"{message}: {detail}" if detail else message)


class UnsupportedError(SandboxError, NotImplementedError):
    """Raised when a backend does not implement a capability.

    Attributes:
        backend: the backend name.
        operation: the method that is not supported (``exec``, ``read_file``).
    """

    def __init__(self, backend: str, operation: str, reason: str = "") -> None:
        """Build ``sandbox capability not supported: <backend> <operation>``."""
        message = f"sandbox capability not supported: {backend} {operation}"
        super().__init__(f"{message} ({reason})" if reason else message)
        self.backend = backend
        self.operation = operation


class UnknownSandboxBackendError(SandboxError, LookupError):
    """Raised by ``open_sandbox`` for a name no backend registered.

    Attributes:
        backend: the requested name.
        available: the registered names at lookup time, sorted.
    """

    def __init__(self, backend: str, available: Sequence[str]) -> None:
        """Build ``unknown sandbox backend "<name>" (available: a, b)``."""
        listed = ", ".join(available) if available else "none"
        super().__init__(f'unknown sandbox backend "{backend}" (available: {listed})')
        self.backend = backend
        self.available = tuple(available)


class SandboxConfigError(SandboxError, TypeError):
    """Raised when a backend factory gets a config it cannot use."""


class SandboxOwnershipError(SandboxError, ValueError):
    """Raised when ``with_sandbox`` claims an ownership the trace does not record.

    Whether a scope owns (and so destroys) its sandbox is recorded at fork:
    isolated children own theirs; roots and shared children own none.
    """


class WorkspaceEscapeError(SandboxError, ValueError):
    """Raised for a path that would leave the workspace.

    Attributes:
        path: the offending path as given (``..``, absolute, NUL, or a symlink
            resolving outside the workspace).
    """

    def __init__(self, path: str, reason: str) -> None:
        """Name the ``path`` and why it escapes."""
        super().__init__(f"path {path!r} escapes the workspace: {reason}")
        self.path = path


class InvalidWorkspaceStateError(SandboxError, ValueError):
    """Raised before anything is touched for a state this sandbox cannot apply.

    A state from another backend, from another repository (its objects are
    missing), or with corrupt data.
    """


@dataclass(frozen=True, slots=True)
class LineRange:
    """Lines of one side of a conflict: ``count`` lines from line ``start`` (1-based).

    A ``count`` of 0 is an insertion before line ``start``.
    """

    start: int
    count: int

    def __str__(self) -> str:
        """Render ``lines 3-5``, ``line 3`` or ``before line 3``."""
        if self.count == 0:
            return f"before line {self.start}"
        if self.count == 1:
            return f"line {self.start}"
        return f"lines {self.start}-{self.start + self.count - 1}"


@dataclass(frozen=True, slots=True)
class ConflictHunk:
    """One region git's line merge could not reconcile in ``path``.

    ``ours`` is the region in the workspace's file, ``theirs`` in the delta's.
    """

    path: str
    ours: LineRange
    theirs: LineRange

    def __str__(self) -> str:
        """Render ``ours lines 3-4 / theirs line 3``."""
        return f"ours {self.ours} / theirs {self.theirs}"


class ApplyConflictError(SandboxError):
    """Raised when a delta (or a settled output) cannot merge with the workspace.

    Both sides changed a path differently and git's line merge could not
    reconcile them: overlapping line edits (``hunks``), or a change no line
    merge applies to (``reasons``: binary content, a mode change, a deletion
    against a modification, an addition on both sides, a file against a
    directory). The workspace is left untouched and nothing is consumed.

    Attributes:
        paths: the conflicting paths, sorted.
        hunks: the conflicting line regions of text files, by path and line.
        reasons: for paths that could not be line-merged, why not.
    """

    def __init__(
        self,
        paths: Sequence[str],
        detail: str = "",
        *,
        hunks: Sequence[ConflictHunk] = (),
        reasons: Mapping[str, str] | None = None,
    ) -> None:
        """Build ``apply conflict: <detail>: a (ours line 2 / theirs line 2), b``."""
        self.paths = tuple(paths)
        self.hunks = tuple(hunks)
        self.reasons = dict(reasons or {})
        listed = ", ".join(self._describe(p) for p in self.paths)
        prefix = f"apply conflict: {detail}" if detail else "apply conflict"
        super().__init__(f"{prefix}: {listed}")

    def _describe(self, path: str) -> str:
        regions = [str(h) for h in self.hunks if h.path == path]
        if regions:
            return f"{path} ({'; '.join(regions)})"
        if path in self.reasons:
            return f"{path} ({self.reasons[path]})"
        return path


class GitError(SandboxError):
    """Raised when a git subprocess fails or times out.

    Attributes:
        git_args: the git arguments (without the ``git`` binary).
        stderr: git's own message, stripped.
        returncode: the exit status, or ``None`` after a timeout.
    """

    def __init__(
        self, git_args: Sequence[str], stderr: str, returncode: int | None
    ) -> None:
        """Name the command, its status and git's message."""
        command = "git " + " ".join(git_args)
        status = "timed out" if returncode is None else f"exited {returncode}"
        super().__init__(f"{command}: {status}: {stderr.strip() or '(no message)'}")
        self.git_args = tuple(git_args)
        self.stderr = stderr.strip()
        self.returncode = returncode


class ContainmentError(SandboxError):
    """Raised when a command could not be launched confined; it did not run."""


class ContainmentUnavailableError(ContainmentError):
    """Raised when the platform cannot enforce the requested containment.

    Fail-closed: the command is refused, never run unconfined.
    """


class ExecTimeoutError(SandboxError, TimeoutError):
    """Raised when a sandboxed command outran its timeout; it was killed.

    Attributes:
        stdout: what the command wrote to standard output before it was
            killed (bounded as ``ExecRequest.output_limit`` says).
        stderr: the same for standard error.
        stdout_dropped: bytes of standard output read but not kept.
        stderr_dropped: the same for standard error.
        duration: seconds from the start to the kill.
    """

    def __init__(
        self,
        message: str,
        *,
        stdout: bytes = b"",
        stderr: bytes = b"",
        stdout_dropped: int = 0,
        stderr_dropped: int = 0,
        duration: float = 0.0,
    ) -> None:
        """Keep the message and the output read before the kill."""
        super().__init__(message)
        self.stdout = stdout
        self.stderr = stderr
        self.stdout_dropped = stdout_dropped
        self.stderr_dropped = stderr_dropped
        self.duration = duration


class InvalidExecRequestError(SandboxError, ValueError):
    """Raised before anything runs for an exec request field of the wrong type or bytes.

    The message names the field (``command``, ``args[2]``, ``env NAME``,
    ``timeout``, ``stdin``) and what is wrong with it.
    """


class SettleCommitError(SandboxError):
    """Raised when ``settle(..., commit=True)`` made no git commit.

    Before the effect (the workspace is no git branch, HEAD is detached, no
    identity is known) nothing was settled. After it (nothing to commit, a
    branch that moved under the commit) the settlement stands and the same
    ``seq`` commits it once the cause is fixed.

    Attributes:
        reason: what kept the commit from being made.
        output_id: the output settled (``""``: not known yet).
        settled: whether the settlement itself stands.
        seq: the settle attempt's ``seq`` (``None``: not known yet).
    """

    def __init__(
        self,
        reason: str,
        *,
        output_id: str = "",
        settled: bool = False,
        seq: int | None = None,
    ) -> None:
        """Build ``settle OUT: no commit made: <reason>; <what stands>``."""
        message = f"no commit made: {reason}"
        if output_id:
            message = f"settle {output_id}: {message}"
            if settled:
                message += (
                    f"; the settlement stands: settle it again with seq={seq}"
                    " and commit=True to commit it"
                )
            else:
                message += "; nothing was settled"
        super().__init__(message)
        self.reason = reason
        self.output_id = output_id
        self.settled = settled
        self.seq = seq
