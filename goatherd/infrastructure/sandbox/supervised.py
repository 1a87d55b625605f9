"""The host side of the launcher: start it, feed it, time it out, read its reports.

``run_supervised`` starts ``launch/launcher.py`` with an empty environment in
its own session, sends the request as one frame on the control pipe and
keeps that pipe open while the command runs. Closing it asks the launcher to
kill the command's tree; the launcher also sees it close when the host dies.
On a timeout the host closes the pipe and, with a cgroup leaf, kills the leaf
itself; a launcher that does not finish within a grace period is frozen and
killed with everything below it.
"""

from __future__ import annotations

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
from goatherd.infrastructure.sandbox.exchange import Exchange, Pumped
from goatherd.infrastructure.sandbox.launch import proctree
from goatherd.infrastructure.sandbox.launch.launcher import BOOTSTRAP, frame, unframe
from goatherd.infrastructure.sandbox.process_control import ExecTree

__all__ = ["run_supervised"]

_SANDBOX_DIR: Final = Path(__file__).resolve().parent
_GRACE: Final = 5.0


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
    data = frame(config)
    try:
        while data:
            data = data[os.write(pipes.control, data) :]
    except BrokenPipeError:
        pass  # the launcher is gone; its report (or its absence) says why


def _abandon(process: subprocess.Popen[bytes]) -> None:
    process.kill()
    process.wait()
    raise ContainmentError(
        "landlock: the launcher ended but processes of the command still hold "
        "its output; they could not all be stopped"
    )


def _stop(
    process: subprocess.Popen[bytes], pipes: _Pipes, tree: ExecTree, io: Exchange
) -> None:
    """Kill the command's tree and finish the launcher.

    Raises:
        ContainmentError: when processes of the command could not be stopped.
    """
    tree.kill()
    pipes.close_control()
    if io.pump(time.monotonic() + _GRACE) is not Pumped.DONE:
        proctree.kill_tree(process.pid, include_root=True)
        tree.kill()
        if io.pump(time.monotonic() + _GRACE) is not Pumped.DONE:
            _abandon(process)
    process.wait()


def _reports(fd: int) -> list[dict[str, object]]:
    chunks = []
    while chunk := os.read(fd, 65536):
        chunks.append(chunk)
    return unframe(b"".join(chunks))


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


def run_supervised(
    config: dict[str, object],
    stdin: bytes,
    timeout: float,
    tree: ExecTree,
    output_limit: int | None = None,
) -> ExecResult:
    """Run the command ``config`` describes below the launcher.

    ``output_limit`` bounds what is kept of each output stream (its head and
    tail; see ``ExecRequest.output_limit``).

    Raises:
        ExecTimeoutError: the command outran ``timeout``; its tree was killed.
        ContainmentError: the command could not be confined (it did not run),
            or the launcher was killed from outside.
        SandboxError: the command could not be executed.
    """
    command = str(config["argv"][0])  # type: ignore[index]
    process, pipes = _spawn()
    try:
        io = Exchange(process, stdin, output_limit)
    except BaseException:
        pipes.close()  # the launcher sees no request and ends
        process.kill()
        process.wait()
        raise
    started = time.monotonic()
    try:
        _send(pipes, {**config, "cgroup": str(tree.leaf or "")})
        pumped = io.pump(started + timeout)
        if pumped is Pumped.DEADLINE:
            _stop(process, pipes, tree, io)
            out, err = io.output()
            dropped_out, dropped_err = io.dropped()
            raise ExecTimeoutError(
                f"landlock: {command} outran its {timeout:g}s timeout; "
                "its whole process tree was killed",
                stdout=out,
                stderr=err,
                stdout_dropped=dropped_out,
                stderr_dropped=dropped_err,
                duration=time.monotonic() - started,
            )
        if pumped is Pumped.ORPHANED:  # the launcher was killed from outside
            tree.kill()
            if io.pump(time.monotonic() + _GRACE) is not Pumped.DONE:
                _abandon(process)
        process.wait()
        duration = time.monotonic() - started
        out, err = io.output()
        code = _outcome(_reports(pipes.status), process.returncode, err)
        dropped_out, dropped_err = io.dropped()
        return ExecResult(code, out, err, duration, dropped_out, dropped_err)
    finally:
        if process.poll() is None:
            _stop(process, pipes, tree, io)
        io.close()
        pipes.close()
