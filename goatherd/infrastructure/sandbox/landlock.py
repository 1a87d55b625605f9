"""The Landlock containment backend (Linux): confine a command to writable roots.

The command is launched through ``landlock_child.py``, a small stdlib-only
launcher that restricts itself (``PR_SET_NO_NEW_PRIVS`` then
``landlock_restrict_self``) and then ``execvp``s the command, so the command
and everything it spawns can write only beneath the roots. The backend
probes fail-closed: a kernel without Landlock, or one too old for a
requested network denial (TCP needs ABI 4), makes ``run`` refuse instead of
running unconfined. What Landlock does not confine is listed in
``docs/containment.md`` (reads, UDP, most of the process model).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from goatherd.application.errors import (
    ContainmentError,
    ContainmentUnavailableError,
    ExecTimeoutError,
    SandboxError,
)
from goatherd.application.ports import ExecRequest, ExecResult, NetworkMode
from goatherd.infrastructure.sandbox import landlock_child

__all__ = [
    "LANDLOCK_TIER",
    "LandlockBackend",
    "NETWORK_MIN_ABI",
    "landlock_abi",
]

LANDLOCK_TIER: Final = "native-syscall-deny"
NETWORK_MIN_ABI: Final = 4
_LAUNCHER: Final = Path(landlock_child.__file__).resolve()
_ALWAYS_WRITABLE: Final = ("/dev/null",)
_DEFAULT_TIMEOUT: Final = 600.0


def landlock_abi() -> int:
    """Return this kernel's Landlock ABI version (0: no Landlock)."""
    return landlock_child.abi_version()


@dataclass(frozen=True, slots=True)
class LandlockBackend:
    """Confines commands with Landlock.

    Attributes:
        network: ``deny`` blocks TCP bind and connect (ABI >= 4).
        max_abi: use at most this ABI (``None``: what the kernel reports);
            pins the feature set a host validated, and ``0`` simulates a
            kernel without Landlock.
    """

    network: NetworkMode = NetworkMode.ALLOW
    max_abi: int | None = None

    def name(self) -> str:
        return "landlock"

    def tier(self) -> str:
        return LANDLOCK_TIER

    def abi(self) -> int:
        """Return the ABI this backend will use (kernel's, capped)."""
        kernel = landlock_abi()
        return kernel if self.max_abi is None else min(kernel, self.max_abi)

    def probe(self) -> None:
        """Raise unless this kernel can enforce the policy.

        Raises:
            ContainmentUnavailableError: no Landlock, or network denial
                requested on an ABI below 4.
        """
        self._checked_abi()

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
        return abi

    def run(
        self, request: ExecRequest, *, writable_roots: Sequence[str], cwd: str
    ) -> ExecResult:
        """Run ``request`` confined; a nonzero exit is a result, not an error.

        Raises:
            ContainmentUnavailableError: the policy cannot be enforced here.
            ContainmentError: confinement failed in the child (nothing ran).
            SandboxError: the command could not be executed, or a root is
                missing.
            ExecTimeoutError: the command outran its timeout and was killed.
        """
        policy = {
            "writable": self._roots(writable_roots),
            "deny_network": self.network is NetworkMode.DENY,
            "abi": self._checked_abi(),
        }
        read_end, write_end = os.pipe()
        try:
            try:
                process = self._spawn(request, cwd, policy, write_end)
            finally:
                os.close(write_end)
            result = self._wait(process, request)
        finally:
            status = _drain(read_end)
        if status.startswith("confine:"):
            raise ContainmentError(f"landlock: {status}; the command did not run")
        if status:
            raise SandboxError(f"landlock: {status}")
        return result

    @staticmethod
    def _roots(roots: Sequence[str]) -> list[str]:
        resolved = []
        for root in roots:
            if not os.path.isdir(root):
                raise SandboxError(f"landlock: writable root {root} is not a directory")
            resolved.append(os.path.realpath(root))
        return resolved + [p for p in _ALWAYS_WRITABLE if os.path.exists(p)]

    @staticmethod
    def _spawn(
        request: ExecRequest, cwd: str, policy: dict[str, object], status: int
    ) -> subprocess.Popen[bytes]:
        argv = [sys.executable, "-I", "-S", "-B", str(_LAUNCHER), str(status)]
        argv += [json.dumps(policy), "--", request.command, *request.args]
        return subprocess.Popen(  # noqa: S603 - fixed launcher, caller's argv
            argv,
            cwd=cwd,
            env={**os.environ, **request.env},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            pass_fds=(status,),
            start_new_session=True,
        )

    @staticmethod
    def _wait(process: subprocess.Popen[bytes], request: ExecRequest) -> ExecResult:
        started = time.monotonic()
        timeout = request.timeout or _DEFAULT_TIMEOUT
        try:
            out, err = process.communicate(request.stdin, timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
            raise ExecTimeoutError(
                f"landlock: {request.command} outran its {timeout:g}s timeout "
                "and was killed"
            ) from exc
        return ExecResult(process.returncode, out, err, time.monotonic() - started)


def _drain(fd: int) -> str:
    chunks = []
    try:
        while chunk := os.read(fd, 4096):
            chunks.append(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks).decode("utf-8", "replace")
