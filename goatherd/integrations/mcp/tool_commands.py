"""The command tool: ``run`` a shell command in an environment, confined.

``CommandTools`` checks a command's arguments, checkpoints first when the
command removes files of the worktree itself, runs it in the environment's
sandbox under a halt watch, and turns its result, timeout or halt into the
reply and the capture. Imports ``tool_calls``.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping

from goatherd.application import (
    ExecRequest,
    ExecResult,
    ExecTimeoutError,
    InvalidExecRequestError,
    SandboxError,
)
from goatherd.integrations.mcp.environments import (
    Environment,
    command_environment,
    unwrap,
)
from goatherd.integrations.mcp.errors import ToolInputError, ToolRefusedError
from goatherd.integrations.mcp.files import WorkspaceFiles
from goatherd.integrations.mcp.halting import MARKER, HaltWatch
from goatherd.integrations.mcp.policy import destructive_reason, own_removal_targets
from goatherd.integrations.mcp.recording import bounded_text
from goatherd.integrations.mcp.tool_calls import ToolCalls, ToolReply, _Done, _text

__all__ = [
    "CommandTools",
]


class CommandTools(ToolCalls):
    """The ``run`` tool: a confined shell command in the environment's worktree."""

    # ------------------------------------------------------------ run

    def run(
        self,
        environment_id: str,
        command: str,
        cwd: str = "",
        timeout_seconds: float | None = None,
    ) -> ToolReply:
        """Run a shell command in the environment's worktree, confined."""
        _text(command, "command", limit=64 * 1024)
        if not command.strip():
            raise ToolInputError("command is empty")
        if "\0" in command:
            raise ToolInputError("command contains a NUL byte")
        _text(cwd, "cwd", limit=4096)
        timeout = self._timeout(timeout_seconds)
        args = {"cmd": command, "cwd": cwd, "timeout_seconds": timeout}
        taken: dict[str, str] = {}

        def prepare(env: Environment) -> Mapping[str, object]:
            removes = self._own_removals(env, command, cwd)
            if not removes:
                return {}
            manager = self.environments.manager
            cp = unwrap(manager.create_checkpoint(env.scope_id, b""))
            taken["checkpoint_id"] = cp.id
            return {"checkpoint_id": cp.id, "removes": list(removes[:100])}

        def body(env: Environment) -> _Done:
            done = self._run(env, command, cwd, timeout)
            if not taken:
                return done
            checkpoint = taken["checkpoint_id"]
            text = (
                f"checkpoint {checkpoint} was taken before this removal;"
                f" restore it to get the files back\n{done.text}"
            )
            data = {**done.data, "checkpoint_id": checkpoint}
            record = {**done.record, "checkpoint_id": checkpoint}
            return _Done(text, data, record, done.success, done.is_error)

        return self._call(environment_id, "run", args, body, prepare)

    def _own_removals(self, env: Environment, command: str, cwd: str) -> list[str]:
        """The targets of an ``rm -r`` confined to the worktree, else nothing.

        Only a line the rule would deny but for its own-worktree exception
        qualifies, and only when every target resolves (symlinks followed)
        inside the worktree, not at its root, not in ``.git``.
        """
        if destructive_reason(command) is None:
            return []
        targets = own_removal_targets(command, cwd)
        if targets is None:
            return []
        files = WorkspaceFiles(env.worktree)
        try:
            for target in targets:
                files.check_target(target)
        except ToolInputError:
            return []
        return list(targets)

    def _timeout(self, value: object) -> float:
        if value is None:
            return self._settings.default_timeout
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ToolInputError(f"timeout_seconds must be a number, got {value!r}")
        if not math.isfinite(value) or not 0 < value <= self._settings.max_timeout:
            raise ToolInputError(
                "timeout_seconds must be above 0 and at most"
                f" {self._settings.max_timeout:g}, got {value!r}"
            )
        return float(value)

    def _run(self, env: Environment, command: str, cwd: str, timeout: float) -> _Done:
        sandbox = self.environments.sandbox_of(env)
        watch = HaltWatch(self._store, env.owner)
        base = command_environment(env.tmp, self._settings.pass_env, os.environ)
        (env.tmp / "home").mkdir(parents=True, exist_ok=True)
        request = ExecRequest(
            "/bin/sh",
            ("-c", command),
            cwd=cwd,
            env={
                **base,
                "GOATHERD_ENVIRONMENT": env.env_id,
                "PYTHONDONTWRITEBYTECODE": "1",
                MARKER: watch.token,
            },
            timeout=timeout,
            output_limit=self._settings.output_limit,
            inherit_env=False,
        )
        try:
            with watch:
                result = sandbox.exec(request)
        except ExecTimeoutError as error:
            return _timed_out(error, timeout, self._settings.output_limit)
        except InvalidExecRequestError as error:
            raise ToolInputError(str(error)) from None
        except SandboxError as error:
            if watch.halted:
                return _halted_run()
            raise ToolRefusedError(str(error)) from None
        if watch.halted:
            return _halted_run()
        return _ran(result, self._settings.output_limit)


def _halted_run() -> _Done:
    message = (
        "the supervisor halted the environment while the command ran; every"
        " process it started was killed. Stop working in this environment"
    )
    return _Done(
        message, {"halted": True}, {"halted": True, "error": message}, False, True
    )


def _timed_out(error: ExecTimeoutError, timeout: float, limit: int) -> _Done:
    """The reply to a killed command: what it printed before the kill, and why."""
    message = (
        f"the command outran its {timeout:g} s timeout; every process it"
        " started was killed"
    )
    stdout = _decoded(error.stdout, error.stdout_dropped, limit)
    stderr = _decoded(error.stderr, error.stderr_dropped, limit)
    text = message
    if stdout:
        text += f"\n--- stdout before the kill ---\n{stdout}"
    if stderr:
        text += f"\n--- stderr before the kill ---\n{stderr}"
    dropped = {
        "stdout_dropped_bytes": error.stdout_dropped,
        "stderr_dropped_bytes": error.stderr_dropped,
    }
    data = {"timed_out": True, "stdout": stdout, "stderr": stderr, **dropped}
    record = {
        "timed_out": True,
        "error": message,
        "stdout": bounded_text(stdout),
        "stderr": bounded_text(stderr),
        **dropped,
    }
    return _Done(text, data, record, False, True)


def _ran(result: ExecResult, limit: int) -> _Done:
    stdout = _decoded(result.stdout, result.stdout_dropped, limit)
    stderr = _decoded(result.stderr, result.stderr_dropped, limit)
    duration = round(result.duration, 3)
    text = f"exit code {result.exit_code} ({duration:g} s)"
    if stdout:
        text += f"\n--- stdout ---\n{stdout}"
    if stderr:
        text += f"\n--- stderr ---\n{stderr}"
    dropped = {
        "stdout_dropped_bytes": result.stdout_dropped,
        "stderr_dropped_bytes": result.stderr_dropped,
    }
    data = {
        "exit_code": result.exit_code,
        "duration_seconds": duration,
        "stdout": stdout,
        "stderr": stderr,
        **dropped,
    }
    record = {
        "exit_code": result.exit_code,
        "duration_seconds": duration,
        "stdout": bounded_text(stdout),
        "stderr": bounded_text(stderr),
        **dropped,
    }
    return _Done(text, data, record, result.exit_code == 0)


def _decoded(data: bytes, dropped: int, limit: int) -> str:
    if not dropped:
        return data.decode("utf-8", errors="replace")
    half = limit // 2
    head = data[:half].decode("utf-8", errors="replace")
    tail = data[half:].decode("utf-8", errors="replace")
    return f"{head}\n[... {dropped} bytes of output not kept ...]\n{tail}"
