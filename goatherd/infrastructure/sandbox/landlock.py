"""The Landlock containment backend (Linux): confine a command to writable roots.

The command runs below a small stdlib-only launcher (``launch/launcher.py``)
started with an empty environment: it receives the request over a pipe,
forks, and the forked process restricts itself (``PR_SET_NO_NEW_PRIVS``, then
``landlock_restrict_self``) before it ``execve``s the command with the
request's environment, so nothing from the request runs unconfined. The
launcher stays outside the sandbox and kills the command's whole process
tree when the command exits or times out (``process_control``).

The backend is fail-closed. No Landlock, a network denial on an ABI below 4,
or an ABI that cannot keep one of the backend's guarantees (``LandlockGap``)
makes ``probe`` and ``run`` refuse instead of running with less; a caller
may accept named gaps explicitly. ``docs/containment.md`` lists, per ABI,
what is confined, what is refused and what is not confined.
"""

from __future__ import annotations

import enum
import functools
import os
import sys
import sysconfig
from collections.abc import Iterable, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Final, TypeVar

from goatherd.application.errors import (
    ContainmentError,
    ContainmentUnavailableError,
    SandboxConfigError,
    SandboxError,
)
from goatherd.application.ports import ExecRequest, ExecResult, NetworkMode
from goatherd.infrastructure.sandbox.exec_request import (
    checked_output_limit,
    checked_request,
)
from goatherd.infrastructure.sandbox.launch import landlock_sys, seccomp
from goatherd.infrastructure.sandbox.process_control import (
    ProcessControl,
    ProcessControlChoice,
    describe_process_control,
    open_exec_tree,
)
from goatherd.infrastructure.sandbox.supervised import run_supervised

__all__ = [
    "LANDLOCK_TIER",
    "LandlockBackend",
    "LandlockGap",
    "NETWORK_MIN_ABI",
    "ProcessControl",
    "ProcessControlChoice",
    "landlock_abi",
]

LANDLOCK_TIER: Final = "native-syscall-deny"
NETWORK_MIN_ABI: Final = 4
_ALWAYS_WRITABLE: Final = ("/dev/null",)
_DEFAULT_TIMEOUT: Final = 600.0
_E = TypeVar("_E", bound=enum.StrEnum)


class LandlockGap(enum.StrEnum):
    """A guarantee of the backend that an older Landlock ABI cannot keep.

    ``run`` refuses on such an ABI unless the gap is in ``accept_gaps``.
    """

    TRUNCATE = "truncate"
    SIGNALS = "signals"


_GAP_ABI: Final = {LandlockGap.TRUNCATE: 3, LandlockGap.SIGNALS: 6}
_GAP_TEXT: Final = {
    LandlockGap.TRUNCATE: (
        "truncate() of files outside the writable roots is not denied "
        "(needs ABI 3, Linux 6.2)"
    ),
    LandlockGap.SIGNALS: (
        "signals to processes outside the sandbox, its supervisor included, "
        "are not denied (needs ABI 6, Linux 6.12)"
    ),
}


def landlock_abi() -> int:
    """Return this kernel's Landlock ABI version (0: no Landlock)."""
    return landlock_sys.abi_version()


def _member(kind: type[_E], value: object, what: str) -> _E:
    """Return ``value`` as a member of the string enum ``kind``, or refuse it."""
    if isinstance(value, str) and value in {m.value for m in kind}:
        return kind(value)
    known = ", ".join(kind)
    raise SandboxConfigError(f"landlock: unknown {what} {value!r} (known: {known})")


def _gaps(values: object) -> frozenset[LandlockGap]:
    if isinstance(values, str | bytes) or not isinstance(values, Iterable):
        raise SandboxConfigError(
            f"landlock: accept_gaps must be a set of gap names, got {values!r}"
        )
    return frozenset(_member(LandlockGap, v, "gap in accept_gaps") for v in values)


def _checked_max_abi(value: object) -> None:
    if value is not None and (type(value) is not int or value < 0):
        raise SandboxConfigError(
            f"landlock: max_abi must be None or an integer >= 0, got {value!r}"
        )


@dataclass(frozen=True, slots=True)
class LandlockBackend:
    """Confines commands with Landlock and kills their process trees.

    Attributes:
        network: ``deny`` blocks TCP bind and connect (ABI >= 4), and a
            seccomp filter refuses the routes Landlock does not check (TCP,
            MPTCP, SCTP, raw and packet sockets, ``MSG_FASTOPEN``).
        max_abi: use at most this ABI (``None``: what the kernel reports);
            pins the feature set a host validated, and simulates older
            kernels (``0``: no Landlock).
        accept_gaps: the guarantees the caller accepts to lose on an older
            ABI (``{"truncate"}`` on ABI 1-2, ``{"signals"}`` below 6); empty
            means refuse such kernels.
        process_control: how the command's process tree is killed.
        deny_metadata: install a seccomp filter that refuses every mode,
            owner, time, xattr and inode-flag change, inside the roots too.
        allow_io_uring: keep io_uring usable under the seccomp filter a
            network or metadata denial installs. io_uring runs operations
            (xattr changes, socket creation, sends) that the filter cannot
            see, so this reopens those routes; without either denial there
            is no filter and io_uring is always usable.
    """

    network: NetworkMode = NetworkMode.ALLOW
    max_abi: int | None = None
    accept_gaps: AbstractSet[str] = field(default_factory=frozenset)
    process_control: ProcessControl = ProcessControl.AUTO
    deny_metadata: bool = False
    allow_io_uring: bool = False

    def __post_init__(self) -> None:
        _checked_max_abi(self.max_abi)
        for name in ("deny_metadata", "allow_io_uring"):
            value = getattr(self, name)
            if type(value) is not bool:
                raise SandboxConfigError(
                    f"landlock: {name} must be a bool, got {value!r}"
                )
        fix = object.__setattr__
        fix(self, "network", _member(NetworkMode, self.network, "network mode"))
        control = _member(ProcessControl, self.process_control, "process control")
        fix(self, "process_control", control)
        fix(self, "accept_gaps", _gaps(self.accept_gaps))

    def name(self) -> str:
        return "landlock"

    def tier(self) -> str:
        return LANDLOCK_TIER

    def abi(self) -> int:
        """Return the ABI this backend will use (kernel's, capped)."""
        kernel = landlock_abi()
        return kernel if self.max_abi is None else min(kernel, self.max_abi)

    def gaps(self) -> tuple[LandlockGap, ...]:
        """Return the guarantees the ABI in use cannot keep (accepted or not)."""
        abi = self.abi()
        return tuple(gap for gap in LandlockGap if abi < _GAP_ABI[gap])

    def probe(self) -> None:
        """Raise unless this kernel can enforce the policy.

        Raises:
            ContainmentUnavailableError: no Landlock, network denial on an
                ABI below 4, a gap the caller did not accept, a required
                cgroup that cannot be made, or ``deny_metadata`` or a network
                denial on a machine without seccomp tables.
        """
        self._checked_abi()
        self.process_control_in_use()

    def process_control_in_use(self) -> ProcessControlChoice:
        """Return which mechanism kills the process trees here, and why.

        Raises:
            ContainmentUnavailableError: ``ProcessControl.CGROUP`` was
                required and no cgroup leaf can be made.
        """
        return describe_process_control(self.process_control)

    def _checked_abi(self) -> int:
        abi = self.abi()
        if abi < 1:
            raise ContainmentUnavailableError(
                "landlock: this kernel does not provide Landlock "
                f"(platform {sys.platform}); refusing to run the command unconfined"
            )
        if self.network is NetworkMode.DENY and abi < NETWORK_MIN_ABI:
            raise ContainmentUnavailableError(
                f"landlock: network denial needs Landlock ABI {NETWORK_MIN_ABI}, "
                f"this kernel has ABI {abi}; refusing rather than ignoring "
                "the network axis"
            )
        missing = [gap for gap in self.gaps() if gap not in self.accept_gaps]
        if missing:
            raise ContainmentUnavailableError(_gap_message(abi, missing))
        if self.deny_metadata or self.network is NetworkMode.DENY:
            _check_seccomp_tables()
        return abi

    def run(
        self, request: ExecRequest, *, writable_roots: Sequence[str], cwd: str
    ) -> ExecResult:
        """Run ``request`` confined; a nonzero exit is a result, not an error.

        When ``run`` returns or raises, no process the command started is
        left running.

        Raises:
            ContainmentUnavailableError: the policy cannot be enforced here.
            ContainmentError: confinement failed in the child, or a writable
                root overlaps what the launcher runs (nothing ran).
            InvalidExecRequestError: a request field has the wrong type or
                bytes (nothing ran).
            SandboxError: the command could not be executed, or a root or
                the working directory is missing.
            ExecTimeoutError: the command outran its timeout; its whole
                process tree was killed.
        """
        abi = self._checked_abi()
        argv, env, timeout = checked_request(request, _DEFAULT_TIMEOUT)
        limit = checked_output_limit(request.output_limit)
        config = {
            "argv": argv,
            "env": {**(os.environ if request.inherit_env else {}), **env},
            "cwd": _directory(cwd, "working directory"),
            "writable": self._roots(writable_roots),
            "deny_network": self.network is NetworkMode.DENY,
            "deny_metadata": self.deny_metadata,
            "allow_io_uring": self.allow_io_uring,
            "abi": abi,
        }
        tree = open_exec_tree(self.process_control)
        try:
            return run_supervised(config, request.stdin, timeout, tree, limit)
        finally:
            tree.close()

    @staticmethod
    def _roots(roots: Sequence[str]) -> list[str]:
        if isinstance(roots, str) or not isinstance(roots, Sequence):
            raise SandboxError(
                f"landlock: writable_roots must be a sequence of paths, got {roots!r}"
            )
        resolved = [_directory(root, "writable root") for root in roots]
        for root in resolved:
            _refuse_launcher_inside(root)
        return resolved + [p for p in _ALWAYS_WRITABLE if os.path.exists(p)]


def _check_seccomp_tables() -> None:
    try:
        seccomp.metadata_filter(os.uname().machine)
    except seccomp.SeccompError as exc:
        raise ContainmentUnavailableError(
            "landlock: deny_metadata and network denial need a seccomp filter, "
            f"which is not available here ({exc.strerror}); refusing rather "
            "than running without it"
        ) from exc


def _gap_message(abi: int, missing: list[LandlockGap]) -> str:
    listed = "; ".join(f"{gap.value}: {_GAP_TEXT[gap]}" for gap in missing)
    names = ", ".join(f'"{gap.value}"' for gap in missing)
    return (
        f"landlock: Landlock ABI {abi} cannot keep what this backend guarantees "
        f"({listed}); refusing to run. To run without it, pass "
        f"LandlockBackend(accept_gaps={{{names}}}) - docs/containment.md lists "
        "what each ABI confines"
    )


@functools.cache
def _launcher_paths() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """What the unconfined launcher runs, as (code directories, prefixes).

    No writable root may contain, or lie inside, a code directory (the
    launcher's modules and their bytecode, the interpreter, the standard
    library); none may contain an installation prefix (``pyvenv.cfg`` there
    chooses the standard library).
    """
    paths = sysconfig.get_paths()
    code = {
        os.path.dirname(landlock_sys.__file__),
        os.path.dirname(os.path.realpath(sys.executable)),
        os.path.dirname(sys.executable),
        paths["stdlib"],
        paths["platstdlib"],
    }
    prefixes = {sys.prefix, sys.base_prefix, sys.exec_prefix}
    real = [os.path.realpath(p) for p in code]
    return tuple(sorted(real)), tuple(sorted(os.path.realpath(p) for p in prefixes))


def _within(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory.rstrip("/") + "/")


def _refuse_launcher_inside(root: str) -> None:
    code, prefixes = _launcher_paths()
    clashes = [p for p in code if _within(p, root) or _within(root, p)]
    clashes += [p for p in prefixes if _within(p, root)]
    if clashes:
        raise ContainmentError(
            f"landlock: writable root {root} overlaps {clashes[0]}, which the "
            "unconfined launcher runs; a confined command could change it. "
            "Refusing; keep goatherd and Python outside the writable roots"
        )


def _directory(path: object, what: str) -> str:
    if not isinstance(path, str) or "\0" in path or not os.path.isdir(path):
        raise SandboxError(f"landlock: {what} {path!r} is not a directory")
    return os.path.realpath(path)
