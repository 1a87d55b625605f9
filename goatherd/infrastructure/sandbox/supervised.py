"""The host side of the launcher: start it, feed it, time it out, read its reports.

``run_supervised`` starts ``launch/launcher.py`` with an empty environment in
its own session, sends the request as one JSON line on the control pipe and
keeps that pipe open while the command runs. Closing it asks the launcher to
kill the command's tree; the launcher also sees it close when the host dies.
On a timeout the host closes the pipe and, with a cgroup leaf, kills the leaf
itself; a launcher that does not finish within a grace period is frozen and
killed with everything below it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from goatherd.application.errors import (
    ContainmentError,
    ContainmentUnavailableError,
    ExecTimeoutError,
    SandboxError,
)
from goatherd.application.ports import ExecResult
from goatherd.infrastructure.sandbox.launch import proctree
from goatherd.infrastructure.sandbox.launch.launcher import BOOTSTRAP
from goatherd.infrastructure.sandbox.process_control import ExecTree

__all__ = ["run_supervised"]

_SANDBOX_DIR: Final = Path(__file__).resolve().parent
_GRACE: Final = 5.0
_SLICE: Final = 0.1


@dataclass
class _Pipes:
    """The host's ends of the control and status pipes."""

    control: int
    status: int
    open: set[int] = field(default_factory=set)

    def close_control(self) -> None:
        if self.control in self.open:
            self.open.discard(self.control)
            os.close(self.control)

    def close(self) -> None:
        for fd in sorted(self.open):
            os.close(fd)
        self.open.clear()


def _spawn() -> tuple[subprocess.Popen[bytes], _Pipes]:
    if not sys.executable:
        raise ContainmentUnavailableError(
            "landlock: no Python interpreter path (sys.executable) to run the launcher"
        )
    control_r, control_w = os.pipe()
    status_r, status_w = os.pipe()
    pipes = _Pipes(control_w, status_r, {control_w, status_r})
    argv = [sys.executable, "-I", "-S", "-B", "-c", BOOTSTRAP, str(_SANDBOX_DIR)]
    try:
        process = subprocess.Popen(  # noqa: S603 - the fixed launcher
            [*argv, str(control_r), str(status_w)],
            cwd="/",
            env={},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            pass_fds=(control_r, status_w),
            start_new_session=True,
        )
    except BaseException:
        pipes.close()
        raise
    finally:
        os.close(control_r)
        os.close(status_w)
    return process, pipes


def _send(pipes: _Pipes, config: dict[str, object]) -> None:
    data = json.dumps(config).encode() + b"\n"
    try:
        while data:
            data = data[os.write(pipes.control, data) :]
    except BrokenPipeError:
        pass  # the launcher is gone; its report (or its absence) says why


def _abandon(process: subprocess.Popen[bytes]) -> tuple[bytes, bytes]:
    process.kill()
    process.wait()
    for stream in (process.stdin, process.stdout, process.stderr):
        if stream is not None:
            stream.close()
    raise ContainmentError(
        "landlock: the launcher ended but processes of the command still hold "
        "its output; they could not all be stopped"
    )


def _stop(
    process: subprocess.Popen[bytes], pipes: _Pipes, tree: ExecTree
) -> tuple[bytes, bytes]:
    """Kill the command's tree and finish the launcher; return the output."""
    tree.kill()
    pipes.close_control()
    try:
        return process.communicate(timeout=_GRACE)
    except subprocess.TimeoutExpired:
        pass
    proctree.kill_tree(process.pid, include_root=True)
    tree.kill()
    try:
        return process.communicate(timeout=_GRACE)
    except subprocess.TimeoutExpired:
        return _abandon(process)


def _reports(fd: int) -> list[dict[str, object]]:
    chunks = []
    while chunk := os.read(fd, 65536):
        chunks.append(chunk)
    lines = b"".join(chunks).decode("utf-8", "replace").splitlines()
    return [report for line in lines if isinstance(report := json.loads(line), dict)]


def _outcome(reports: list[dict[str, object]], returncode: int, err: bytes) -> int:
    """Return the command's exit code, or raise what its reports say."""
    for report in reports:
        stage, detail = report.get("refused"), report.get("detail")
        if stage == "exec":
            raise SandboxError(f"landlock: exec: {detail}")
        if stage is not None:
            raise ContainmentError(
                f"landlock: {stage}: {detail}; the command did not run"
            )
    for report in reports:
        if isinstance(code := report.get("exit"), int):
            return code
        if "failed" in report:
            raise ContainmentError(
                f"landlock: launcher: {report['failed']}; the command was killed"
            )
    last = err.decode("utf-8", "replace").strip().splitlines()[-1:] or ["-"]
    raise ContainmentError(
        f"landlock: the launcher ended (status {returncode}) without reporting "
        f"the command's exit (last line of its error output: {last[0]})"
    )


def _communicate(
    process: subprocess.Popen[bytes], stdin: bytes, timeout: float, tree: ExecTree
) -> tuple[bytes, bytes] | None:
    """Feed and drain the command; ``None`` when ``timeout`` passed first.

    Works in slices so that a launcher killed from outside is noticed while
    the command's processes still hold its output open: the tree is killed
    then (cgroup), or given a grace period before the output is abandoned.
    """
    deadline = time.monotonic() + timeout
    data: bytes | None = stdin
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        try:
            return process.communicate(data, timeout=min(_SLICE, left))
        except subprocess.TimeoutExpired:
            data = None
        if process.poll() is not None:
            return _after_launcher_death(process, tree)


def _after_launcher_death(
    process: subprocess.Popen[bytes], tree: ExecTree
) -> tuple[bytes, bytes]:
    tree.kill()
    try:
        return process.communicate(timeout=_GRACE)
    except subprocess.TimeoutExpired:
        return _abandon(process)


def run_supervised(
    config: dict[str, object], stdin: bytes, timeout: float, tree: ExecTree
) -> ExecResult:
    """Run the command ``config`` describes below the launcher.

    Raises:
        ExecTimeoutError: the command outran ``timeout``; its tree was killed.
        ContainmentError: the command could not be confined (it did not run),
            or the launcher was killed from outside.
        SandboxError: the command could not be executed.
    """
    command = str(config["argv"][0])  # type: ignore[index]
    process, pipes = _spawn()
    started = time.monotonic()
    try:
        _send(pipes, {**config, "cgroup": str(tree.leaf or "")})
        output = _communicate(process, stdin, timeout, tree)
        if output is None:
            _stop(process, pipes, tree)
            raise ExecTimeoutError(
                f"landlock: {command} outran its {timeout:g}s timeout; "
                "its whole process tree was killed"
            )
        duration = time.monotonic() - started
        code = _outcome(_reports(pipes.status), process.returncode, output[1])
        return ExecResult(code, *output, duration)
    finally:
        if process.poll() is None:
            _stop(process, pipes, tree)
        pipes.close()
