"""Ports: the sandbox seam, its values, and the containment-backend contract.

A :class:`Sandbox` is the substrate a scope forks, snapshots, restores, diffs
and executes in; the runtime never inspects a backend beyond the opaque
:class:`~goatherd.domain.workspace.WorkspaceState` it captures. Optional
capabilities are separate protocols (:class:`DeltaApplier`, :class:`Addressed`,
:class:`StateCommitter`) detected with ``isinstance``. A
:class:`ContainmentBackend` confines the commands a sandbox executes. Nothing
here performs I/O; adapters live in ``goatherd.infrastructure.sandbox``.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, Protocol, runtime_checkable

from goatherd.domain.workspace import WorkspaceState

__all__ = [
    "Addressed",
    "CONTAINMENT_BUFFERED",
    "CONTAINMENT_CONTAINED",
    "CONTAINMENT_FULL",
    "CONTAINMENT_UNCONTAINED",
    "ContainmentBackend",
    "DIFF_TRUNCATED_MARKER",
    "DeltaApplier",
    "ExecRequest",
    "ExecResult",
    "NetworkMode",
    "Sandbox",
    "SandboxCapabilities",
    "SandboxSpec",
    "StateCommit",
    "StateCommitter",
    "truncate_diff",
]

CONTAINMENT_FULL: Final = "full"
CONTAINMENT_CONTAINED: Final = "contained"
CONTAINMENT_BUFFERED: Final = "buffered"
CONTAINMENT_UNCONTAINED: Final = "uncontained"
DIFF_TRUNCATED_MARKER: Final = "...[diff truncated]"


@dataclass(frozen=True, slots=True)
class SandboxCapabilities:
    """What a backend really implements; check it before calling.

    Attributes:
        lifecycle: ``create``/``destroy`` manage real resources.
        exec: ``exec`` runs commands.
        file_io: ``read_file``/``write_file`` work.
        diff: ``diff`` works.
        isolated: the backend does not mutate the host tree in place.
        containment: the witness containment level (``full``, ``contained``,
            ``buffered``, ``uncontained``) stamped into witnesses.
    """

    lifecycle: bool = False
    exec: bool = False
    file_io: bool = False
    diff: bool = False
    isolated: bool = False
    containment: str = CONTAINMENT_UNCONTAINED


@dataclass(frozen=True, slots=True)
class SandboxSpec:
    """Per-call ``create`` options; backend configuration lives on the constructor.

    Attributes:
        workdir: a working directory hint, relative to the workspace.
        env: environment variables every ``exec`` inherits.
        timeout: default ``exec`` timeout in seconds (``None``: the backend's).
    """

    workdir: str = ""
    env: Mapping[str, str] = field(default_factory=dict)
    timeout: float | None = None


@dataclass(frozen=True, slots=True)
class ExecRequest:
    """One command to run inside a sandbox.

    Attributes:
        command: the program (looked up on ``PATH`` when it has no slash).
        args: its arguments.
        cwd: the working directory, relative to the workspace root.
        env: variables layered over the spec's and the process environment.
        timeout: seconds before the command is killed (``None``: the default).
        stdin: bytes fed to standard input.
        output_limit: keep at most this many bytes of each of stdout and
            stderr, the first half and the last half; the bytes between are
            read and counted, never held (``None``: keep everything).
        inherit_env: start from the calling process's environment (``True``,
            the default) or from nothing but ``env`` and the spec's (``False``:
            no API key or token of the caller reaches the command).
    """

    command: str
    args: tuple[str, ...] = ()
    cwd: str = ""
    env: Mapping[str, str] = field(default_factory=dict)
    timeout: float | None = None
    stdin: bytes = b""
    output_limit: int | None = None
    inherit_env: bool = True


@dataclass(frozen=True, slots=True)
class ExecResult:
    """What a command did; a nonzero exit code is an observation, not an error.

    Attributes:
        exit_code: the exit status (negative: killed by that signal).
        stdout: captured standard output.
        stderr: captured standard error.
        duration: wall time in seconds.
        stdout_dropped: bytes cut from the middle of stdout by the request's
            ``output_limit`` (they followed its first ``output_limit // 2``).
        stderr_dropped: the same for stderr.
    """

    exit_code: int
    stdout: bytes = b""
    stderr: bytes = b""
    duration: float = 0.0
    stdout_dropped: int = 0
    stderr_dropped: int = 0


class NetworkMode(enum.StrEnum):
    """The network axis of a containment policy."""

    ALLOW = "allow"
    DENY = "deny"


@runtime_checkable
class Sandbox(Protocol):
    """The workspace a scope forks, snapshots, restores, diffs and executes in.

    Unimplemented operations raise ``UnsupportedError``. ``capture`` and
    ``diff`` never mutate the workspace (nor a git index). ``destroy`` never
    removes what the backend did not create. Methods are synchronous and
    every local backend imposes its own time ceiling.
    """

    def backend(self) -> str:
        """Return the backend name written into captured states."""
        ...

    def capabilities(self) -> SandboxCapabilities:
        """Return what this sandbox implements."""
        ...

    def create(self, spec: SandboxSpec) -> None:
        """Provision (or validate) the workspace; ``open_sandbox`` does not."""
        ...

    def destroy(self) -> None:
        """Release what ``create`` provisioned; never the user's own data."""
        ...

    def capture(self) -> WorkspaceState:
        """Snapshot the workspace without changing it; the state is reusable."""
        ...

    def apply(self, state: WorkspaceState) -> None:
        """Reset the workspace exactly to ``state``.

        Raises:
            InvalidWorkspaceStateError: before touching anything, for a state
                from another backend or repository, or a corrupt one.
        """
        ...

    def diff(self, state: WorkspaceState, max_lines: int = 0) -> tuple[str, list[str]]:
        """Return the unified diff from ``state`` to now and the changed paths.

        ``max_lines > 0`` keeps that many lines and appends
        ``...[diff truncated]``; the path list is never truncated.
        """
        ...

    def exec(self, request: ExecRequest) -> ExecResult:
        """Run a command in the workspace (confined when the backend says so)."""
        ...

    def read_file(self, path: str) -> bytes:
        """Return a workspace file's bytes (``path`` relative, inside)."""
        ...

    def write_file(self, path: str, data: bytes, perm: int = 0o644) -> None:
        """Write a workspace file, creating parent directories."""
        ...


@runtime_checkable
class DeltaApplier(Protocol):
    """A sandbox that can merge a captured state's changes without a reset."""

    def apply_delta(
        self, delta: WorkspaceState, base: WorkspaceState | None = None
    ) -> None:
        """Apply ``delta``'s changes relative to ``base`` onto the workspace.

        ``base`` defaults to the timeline position the delta was captured on
        (its revision). Per path: unchanged in the delta keeps the workspace;
        unchanged in the workspace takes the delta; changed identically on
        both sides is fine; a text file changed differently on both sides is
        merged line by line on git's merge machinery (``git merge-file``), and
        the merged content is written. Overlapping line edits, and changes no
        line merge applies to (binary content, a mode change, a deletion
        against a modification, an addition on both sides, a file against a
        directory), are conflicts. A clean delta is a no-op.

        Raises:
            ApplyConflictError: naming every conflicting path, with the line
                hunks (``hunks``) or the reason (``reasons``); the workspace
                is untouched.
        """
        ...

    def check_delta(
        self, delta: WorkspaceState, base: WorkspaceState | None = None
    ) -> None:
        """Raise what :meth:`apply_delta` would raise, changing nothing (a dry run).

        Raises:
            ApplyConflictError: as :meth:`apply_delta` would.
        """

    ...


@runtime_checkable
class Addressed(Protocol):
    """A sandbox with a durable address recovery can re-adopt it by."""

    def address(self) -> str:
        """Return the normalized absolute address (e.g. the worktree path)."""
        ...


@dataclass(frozen=True, slots=True)
class StateCommit:
    """A commit a :class:`StateCommitter` made (or found) on the workspace's branch.

    Attributes:
        sha: the commit's object id.
        branch: the branch it is on (``refs/heads/...``).
        parent: the commit it was made on top of.
        tree: its tree's object id.
        paths: the paths it changed, sorted.
    """

    sha: str
    branch: str
    parent: str
    tree: str
    paths: tuple[str, ...] = ()


@runtime_checkable
class StateCommitter(Protocol):
    """A sandbox that can turn paths of its working tree into a commit.

    The commit is made on the branch HEAD is on, from the working tree's
    content of exactly the given paths over HEAD's tree; every other path
    keeps its committed content, so the user's unrelated uncommitted work
    stays uncommitted. No hook, filter or other program of the repository
    runs.
    """

    def check_committable(self, author: str | None = None) -> None:
        """Refuse, before anything changes, a workspace no commit can be made in.

        Raises:
            SettleCommitError: HEAD is detached (or the repository has no
                commit yet), or no author identity is known.
        """
        ...

    def find_commit(self, trailer: str, value: str) -> StateCommit | None:
        """Return the recent commit of HEAD's history with trailer ``value``."""
        ...

    def commit_paths(
        self,
        paths: Sequence[str],
        message: str,
        *,
        author: str | None = None,
    ) -> StateCommit:
        """Commit ``paths`` as they stand in the working tree onto HEAD's branch.

        ``message`` is the whole message (trailers included); ``author`` is
        ``"Name <email>"`` (``None``: the repository's configured identity).
        The index entries of ``paths`` are set to the commit's.

        Raises:
            SettleCommitError: the checks of :meth:`check_committable`, or
                the paths hold nothing HEAD does not already hold, or the
                branch moved while the commit was made.
        """
        ...


@runtime_checkable
class ContainmentBackend(Protocol):
    """An OS mechanism that launches a command confined to writable roots.

    Fail-closed: when the platform cannot enforce the policy (including a
    requested network mode), ``probe`` and ``run`` raise
    ``ContainmentUnavailableError`` and nothing runs.
    """

    def name(self) -> str:
        """Return the backend name (``landlock``)."""
        ...

    def tier(self) -> str:
        """Return the enforcement tier (``native-syscall-deny``)."""
        ...

    def probe(self) -> None:
        """Check that the policy is enforceable here; raise if it is not."""
        ...

    def run(
        self, request: ExecRequest, *, writable_roots: Sequence[str], cwd: str
    ) -> ExecResult:
        """Run ``request`` in ``cwd`` able to write only beneath the roots."""
        ...


def truncate_diff(diff: str, max_lines: int) -> str:
    """Keep the first ``max_lines`` lines of ``diff`` and mark the cut.

    ``max_lines <= 0`` means unbounded. A diff that fits is returned as is.
    """
    if max_lines <= 0:
        return diff
    lines = diff.splitlines()
    if len(lines) <= max_lines:
        return diff
    return "\n".join([*lines[:max_lines], DIFF_TRUNCATED_MARKER])
