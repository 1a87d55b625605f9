"""The tools an agent calls, independent of the protocol that carries them.

Every call on an environment goes the same way (:meth:`WorkspaceTools._call`):

1. the environment is looked up in the trace (unknown, halted, discarded or
   settled: a one-line error, nothing recorded);
2. the call's declaration is recorded on the environment's owner path;
3. the supervisor's gate judges the declaration: a denial (or halt) is
   recorded as its decision, the call does not run, and the agent gets a tool
   error naming the rule; guidance comes back with the result;
4. the call runs; its capture (outcome, ``success``) is recorded, caused by
   the declaration, and the gate judges the capture too (the error-rate rule);
5. guidance recorded on the environment since the last call (an ``inject``
   from any process) is delivered with the result.

A refused call (a path outside the worktree, text not found, a checkpoint of
another environment) changes no file and is recorded with its error.
"""

from __future__ import annotations

import json
import logging
import math
import os
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final, cast

from returns.result import Failure

from goatherd.application import (
    ExecRequest,
    ExecResult,
    ExecTimeoutError,
    InvalidExecRequestError,
    RetainedOutput,
    SandboxError,
    Supervisor,
)
from goatherd.domain import (
    GoatherdError,
    Intervention,
    InterventionType,
    OutputState,
    ScopeClaimedError,
    SupervisedEvent,
    SupervisionRule,
)
from goatherd.infrastructure import Runtime
from goatherd.infrastructure.store import SqlAlchemyTraceStore
from goatherd.integrations.mcp.environments import (
    Environment,
    Environments,
    McpSettings,
    Observation,
    command_environment,
    unwrap,
)
from goatherd.integrations.mcp.errors import (
    EnvironmentUnavailableError,
    ToolInputError,
    ToolRefusedError,
)
from goatherd.integrations.mcp.files import (
    MAX_SEARCH_MATCHES,
    MAX_TREE_DEPTH,
    MAX_TREE_ENTRIES,
    WorkspaceFiles,
    shown_name,
)
from goatherd.integrations.mcp.halting import MARKER, HaltWatch
from goatherd.integrations.mcp.patching import MAX_PATCH_BYTES, apply_patch
from goatherd.integrations.mcp.policy import (
    default_rules,
    destructive_reason,
    own_removal_targets,
)
from goatherd.integrations.mcp.recording import (
    CallRecorder,
    RecordedCall,
    bounded_text,
    text_fields,
)

__all__ = [
    "MAX_ARGUMENT_BYTES",
    "MAX_DIFF_BYTES",
    "MAX_RECENT_RECORDS",
    "ToolReply",
    "WorkspaceTools",
]

MAX_ARGUMENT_BYTES: Final = 4 * 1024 * 1024
MAX_DIFF_BYTES: Final = 256 * 1024
MAX_RECENT_RECORDS: Final = 200
_STOPPING: Final = (InterventionType.DENY, InterventionType.HALT)
_LOG = logging.getLogger("goatherd.mcp")


@dataclass(frozen=True, slots=True)
class ToolReply:
    """What a tool call returns to the agent.

    Attributes:
        text: what the agent reads.
        data: the same as structured values.
        is_error: the call did not do what it was asked.
        guidance: the supervisor's guidance delivered with this result.
    """

    text: str
    data: Mapping[str, object]
    is_error: bool = False
    guidance: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class _Done:
    """A call's outcome: the reply and what its capture records."""

    text: str
    data: Mapping[str, object]
    record: Mapping[str, object] = field(default_factory=dict)
    success: bool = True
    is_error: bool = False


class _Fired(threading.local):
    rule: str = ""


def _named(rule: SupervisionRule, fired: _Fired) -> SupervisionRule:
    """Wrap ``rule`` so the gate's caller learns which rule intervened."""

    def action(event: SupervisedEvent) -> Intervention | None:
        verdict = rule.action(event)
        if verdict is not None:
            fired.rule = rule.name
        return verdict

    return SupervisionRule(rule.name, rule.match, action)


def _text(value: object, name: str, *, limit: int = MAX_ARGUMENT_BYTES) -> str:
    if not isinstance(value, str):
        raise ToolInputError(f"{name} must be a string, got {type(value).__name__}")
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError as error:
        raise ToolInputError(
            f"{name} is not valid Unicode (a lone surrogate at {error.start})"
        ) from None
    if size > limit:
        raise ToolInputError(f"{name} is {size} bytes; at most {limit} are accepted")
    return value


def _count(value: object, name: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ToolInputError(f"{name} must be a whole number, got {value!r}")
    if not low <= value <= high:
        raise ToolInputError(f"{name} must be {low} to {high}, got {value}")
    return value


class WorkspaceTools:
    """The server's tools over one repository and one trace."""

    def __init__(
        self,
        runtime: Runtime,
        settings: McpSettings,
        *,
        recorder: CallRecorder | None = None,
    ) -> None:
        """Serve ``settings.repo`` from ``runtime``'s trace.

        Raises:
            ContainmentUnavailableError: commands cannot be confined here.
            EnvironmentUnavailableError: the trace serves another repository
                under this root's name.
        """
        self._runtime = runtime
        self._store = runtime.store
        self._recorder = recorder or CallRecorder(runtime.store)
        self.environments = Environments(runtime, settings, self._recorder)
        self._settings = settings
        self._fired = _Fired()
        self.supervisor = Supervisor(
            self.environments.manager, None, recorder=runtime.store
        )
        for rule in settings.rules if settings.rules is not None else default_rules():
            self.supervisor.add_rule(_named(rule, self._fired))
        self._recorder.started(
            self.environments.root_owner,
            {"repo": str(settings.repo), "worktrees": str(settings.worktrees)},
        )
        self.environments.recover_opens(self._finish_recovered_open)
        self.environments.sweep_tmp()

    @property
    def store(self) -> SqlAlchemyTraceStore:
        """The trace store the calls are recorded in."""
        return self._store

    @property
    def session(self) -> str:
        """This server's session id (recorded on every declaration)."""
        return self._recorder.session.session

    # ------------------------------------------------------------ the call

    def _call(
        self,
        environment_id: object,
        tool: str,
        args: Mapping[str, object],
        body: Callable[[Environment], _Done],
        prepare: Callable[[Environment], Mapping[str, object]] | None = None,
    ) -> ToolReply:
        owner = self.environments.owner_of(environment_id)
        with self.environments.lock(owner):
            seen = self.environments.observe(owner)
            extra = prepare(seen.env) if prepare is not None else {}
            # What prepare recorded (a checkpoint) now ends the path.
            after = None if extra else seen.last
            call = self._recorder.declare(owner, tool, {**args, **extra}, after)
            return self._judged(seen, call, body)

    def _judged(
        self,
        seen: Observation,
        call: RecordedCall,
        body: Callable[[Environment], _Done],
    ) -> ToolReply:
        env, cursor = seen.env, seen.cursor
        verdict, rule = self._gate(call)
        if verdict is not None and verdict.type in _STOPPING:
            return self._stopped(env, call, verdict, rule)
        guidance = [str(verdict.payload)] if verdict is not None else []
        guidance += seen.guidance
        try:
            done = body(env)
        except (ToolRefusedError, GoatherdError) as error:
            message = str(error)
            done = _Done(message, {"error": message}, {"error": message}, False, True)
        except Exception as error:
            self._failed(env, call, cursor, "internal error", error)
            raise
        outcome = {"success": done.success, **done.record}
        try:
            capture = self._capture(env, call, outcome, guidance, cursor)
        except Exception as error:
            self._failed(env, call, cursor, "the outcome could not be recorded", error)
            raise
        if capture is not None:
            after, _ = self._gate(capture)
            if after is not None and after.payload:
                guidance.append(str(after.payload))
        return ToolReply(done.text, done.data, done.is_error, tuple(guidance))

    def _capture(
        self,
        env: Environment,
        call: RecordedCall,
        outcome: Mapping[str, object],
        guidance: list[str],
        cursor: int,
    ) -> RecordedCall | None:
        payload = dict(outcome)
        if guidance:
            payload["guidance"] = [bounded_text(text) for text in guidance]
        payload["guidance_through"] = cursor
        recorded = self._recorder.capture(env.owner, call.record_id, call.tool, payload)
        if recorded is not None:
            self.environments.followed(env.owner, recorded.record_id)
        return recorded

    def _failed(
        self,
        env: Environment,
        call: RecordedCall,
        cursor: int,
        what: str,
        error: Exception,
    ) -> None:
        """Close ``call`` with an error capture before ``error`` propagates."""
        text = f"{what}: {type(error).__name__}: {error}"
        message = bounded_text(text.encode("utf-8", "backslashreplace").decode())
        self._capture(env, call, {"success": False, "error": message}, [], cursor)

    def _gate(self, call: RecordedCall) -> tuple[Intervention | None, str]:
        self._fired.rule = ""
        verdict = self.supervisor.check_call(call)
        return verdict, self._fired.rule

    def _stopped(
        self, env: Environment, call: RecordedCall, verdict: Intervention, rule: str
    ) -> ToolReply:
        reason = str(verdict.payload or f"supervisor {verdict.type.value}")
        if verdict.type is InterventionType.HALT:
            halted = self.environments.manager.halt(env.scope_id)
            refused = halted.failure() if isinstance(halted, Failure) else None
            if isinstance(refused, ScopeClaimedError):
                # A settle or restore another process claimed must finish
                # first (a claim is the end of the race): the call is still
                # denied, and the halt is for the supervisor to repeat.
                reason = f"{reason} (the halt itself was refused: {refused})"
            else:
                unwrap(halted)
        denied = {"rule": rule, "type": verdict.type.value, "reason": reason}
        self._recorder.capture(
            env.owner, call.record_id, call.tool, {"success": False, "denied": denied}
        )
        verb = (
            "halted the environment"
            if verdict.type is InterventionType.HALT
            else "denied this call"
        )
        text = f"the supervisor {verb} (rule {rule}): {reason}"
        return ToolReply(text, {"denied": denied}, True)

    # ------------------------------------------------------------ environments

    def open_environment(
        self,
        name: str | None = None,
        environment_id: str | None = None,
        client: Mapping[str, str] | None = None,
    ) -> ToolReply:
        """Open a new environment forked from the repository, or resume one."""
        who = dict(client or {})
        if environment_id is not None:
            return self._call(
                environment_id,
                "open_environment",
                {"resume": True, "client": who},
                lambda env: self._opened(env, resumed=True),
            )
        if name is not None:
            _text(name, "name", limit=256)
        env_id = self.environments.new_id(name)
        root = self.environments.root_owner
        args = {"environment_id": env_id, "name": name, "client": who}
        call = self._recorder.declare(root, "open_environment", args)
        stopped, guidance = self._root_gate(call)
        if stopped is not None:
            return stopped
        try:
            env = self.environments.create(env_id)
        except (GoatherdError, OSError) as error:
            message = f"could not open an environment: {error}"
            outcome = {"success": False, "error": message}
            self._recorder.capture(root, call.record_id, call.tool, outcome)
            return ToolReply(message, {"error": message}, True, guidance)
        done = self._opened(env, resumed=False)
        self._recorder.capture(
            env.owner, call.record_id, call.tool, {"success": True, **done.record}
        )
        return ToolReply(done.text, done.data, False, guidance)

    def _root_gate(
        self, call: RecordedCall
    ) -> tuple[ToolReply | None, tuple[str, ...]]:
        """Judge a call on the root path: a stopping verdict ends it there."""
        verdict, rule = self._gate(call)
        if verdict is None:
            return None, ()
        if verdict.type not in _STOPPING:
            return None, (str(verdict.payload),)
        reason = str(verdict.payload or f"supervisor {verdict.type.value}")
        denied = {"rule": rule, "type": verdict.type.value, "reason": reason}
        outcome = {"success": False, "denied": denied}
        self._recorder.capture(call.trace_owner_id, call.record_id, call.tool, outcome)
        text = f"the supervisor denied this call (rule {rule}): {reason}"
        return ToolReply(text, {"denied": denied}, True), ()

    def _finish_recovered_open(self, env: Environment, call_id: str) -> None:
        outcome = {
            "success": True,
            "recovered": True,
            **self._opened(env, resumed=False).record,
        }
        self._recorder.capture(env.owner, call_id, "open_environment", outcome)

    def _opened(self, env: Environment, *, resumed: bool) -> _Done:
        data = {
            "environment_id": env.env_id,
            "scope_id": env.scope_id,
            "resumed": resumed,
            "checkpoints": dict(self.environments.checkpoints(env)) if resumed else {},
        }
        verb = "resumed" if resumed else "opened"
        text = (
            f"{verb} environment {env.env_id} (scope {env.scope_id}): an isolated"
            " worktree holding the repository's files. Work in it with run,"
            " read_file, write_file, edit_file and list_files; checkpoint before"
            " risky steps; propose when done."
        )
        return _Done(text, data, {"environment_id": env.env_id, "resumed": resumed})

    def list_environments(self) -> ToolReply:
        """List the repository's environments and their outputs.

        Recorded on the repository's root path (it names no environment).
        """
        root = self.environments.root_owner
        call = self._recorder.declare(root, "list_environments", {})
        stopped, guidance = self._root_gate(call)
        if stopped is not None:
            return stopped
        infos = [info.as_dict() for info in self.environments.infos()]
        self._recorder.capture(
            root, call.record_id, call.tool, {"success": True, "count": len(infos)}
        )
        return ToolReply(_listing(infos), {"environments": infos}, False, guidance)

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

    # ------------------------------------------------------------ files

    def read_file(
        self,
        environment_id: str,
        path: str,
        start_line: int = 1,
        max_lines: int = 2000,
        line_numbers: bool = False,
    ) -> ToolReply:
        """Return lines of a text file in the worktree (numbered when asked)."""
        _text(path, "path", limit=4096)
        first = _count(start_line, "start_line", 1, 2**31)
        count = _count(max_lines, "max_lines", 1, 100_000)
        if not isinstance(line_numbers, bool):
            raise ToolInputError(
                f"line_numbers must be true or false, got {line_numbers!r}"
            )
        args = {"path": path, "start_line": first, "max_lines": count}
        if line_numbers:
            args["line_numbers"] = True

        def body(env: Environment) -> _Done:
            read = WorkspaceFiles(env.worktree).read_text(path, first, count)
            more = read.last_line < read.total_lines
            note = (
                f"\n[lines {read.first_line}-{read.last_line} of {read.total_lines};"
                f" read on with start_line={read.last_line + 1}]"
                if more
                else ""
            )
            data = {
                "path": path,
                "content": read.text,
                "first_line": read.first_line,
                "last_line": read.last_line,
                "total_lines": read.total_lines,
                "size": read.size,
            }
            record = {"lines": [read.first_line, read.last_line], "size": read.size}
            shown = _numbered(read.text, read.first_line) if line_numbers else read.text
            return _Done(shown + note, data, record)

        return self._call(environment_id, "read_file", args, body)

    def write_file(self, environment_id: str, path: str, content: str) -> ToolReply:
        """Create or replace a file in the worktree."""
        _text(path, "path", limit=4096)
        _text(content, "content")
        args = {"path": path, **text_fields("content", content)}

        def body(env: Environment) -> _Done:
            size, created = WorkspaceFiles(env.worktree).write_text(path, content)
            verb = "created" if created else "replaced"
            data = {"path": path, "bytes": size, "created": created}
            return _Done(f"{verb} {path} ({size} bytes)", data, data)

        return self._call(environment_id, "write_file", args, body)

    def edit_file(
        self,
        environment_id: str,
        path: str,
        old_text: str,
        new_text: str,
        replace_all: bool = False,
    ) -> ToolReply:
        """Replace exact text in a file of the worktree."""
        _text(path, "path", limit=4096)
        _text(old_text, "old_text")
        _text(new_text, "new_text")
        if not isinstance(replace_all, bool):
            raise ToolInputError(
                f"replace_all must be true or false, got {replace_all!r}"
            )
        args = {
            "path": path,
            **text_fields("old_text", old_text),
            **text_fields("new_text", new_text),
            "replace_all": replace_all,
        }

        def body(env: Environment) -> _Done:
            count = WorkspaceFiles(env.worktree).edit_text(
                path, old_text, new_text, replace_all
            )
            data = {"path": path, "replacements": count}
            return _Done(f"edited {path}: {count} replacement(s)", data, data)

        return self._call(environment_id, "edit_file", args, body)

    def delete_path(
        self, environment_id: str, path: str, recursive: bool = False
    ) -> ToolReply:
        """Remove a file, a symlink, or (``recursive``) a directory of the worktree."""
        _text(path, "path", limit=4096)
        if not isinstance(recursive, bool):
            raise ToolInputError(f"recursive must be true or false, got {recursive!r}")
        args = {"path": path, "recursive": recursive}

        def body(env: Environment) -> _Done:
            kind = WorkspaceFiles(env.worktree).delete(path, recursive)
            data = {"path": path, "kind": kind}
            return _Done(f"removed {kind} {shown_name(path)}", data, data)

        return self._call(environment_id, "delete_path", args, body)

    def move_path(
        self, environment_id: str, source: str, destination: str
    ) -> ToolReply:
        """Rename a file or directory of the worktree (to a name not taken)."""
        _text(source, "source", limit=4096)
        _text(destination, "destination", limit=4096)
        args = {"source": source, "destination": destination}

        def body(env: Environment) -> _Done:
            kind = WorkspaceFiles(env.worktree).move(source, destination)
            data = {"source": source, "destination": destination, "kind": kind}
            text = f"moved {kind} {shown_name(source)} to {shown_name(destination)}"
            return _Done(text, data, data)

        return self._call(environment_id, "move_path", args, body)

    def list_files(
        self, environment_id: str, path: str = "", recursive: bool = False
    ) -> ToolReply:
        """List a directory of the worktree."""
        _text(path, "path", limit=4096)
        if not isinstance(recursive, bool):
            raise ToolInputError(f"recursive must be true or false, got {recursive!r}")
        args = {"path": path, "recursive": recursive}

        def body(env: Environment) -> _Done:
            listing = WorkspaceFiles(env.worktree).list_entries(path, recursive)
            rows = [
                f"{e.path}/"
                if e.kind == "directory"
                else f"{e.path} ({e.size} bytes)"
                if e.kind == "file"
                else f"{e.path} [{e.kind}]"
                for e in listing.entries
            ]
            if listing.truncated:
                rows.append(f"[... cut at {len(listing.entries)} entries]")
            entries = [
                {"path": e.path, "kind": e.kind, "size": e.size}
                for e in listing.entries
            ]
            data = {"entries": entries, "truncated": listing.truncated}
            record = {"count": len(entries), "truncated": listing.truncated}
            return _Done("\n".join(rows) or "(empty)", data, record)

        return self._call(environment_id, "list_files", args, body)

    def search(
        self,
        environment_id: str,
        pattern: str,
        path: str = "",
        glob: str = "",
        ignore_case: bool = False,
        max_matches: int = 200,
    ) -> ToolReply:
        """Return the worktree's lines matching a regular expression (bounded)."""
        _text(pattern, "pattern", limit=4096)
        if not pattern:
            raise ToolInputError("pattern is empty")
        _text(path, "path", limit=4096)
        _text(glob, "glob", limit=1024)
        if not isinstance(ignore_case, bool):
            raise ToolInputError(
                f"ignore_case must be true or false, got {ignore_case!r}"
            )
        most = _count(max_matches, "max_matches", 1, MAX_SEARCH_MATCHES)
        args = {
            "pattern": pattern,
            "path": path,
            "glob": glob,
            "ignore_case": ignore_case,
            "max_matches": most,
        }

        def body(env: Environment) -> _Done:
            found = WorkspaceFiles(env.worktree).search(
                pattern, path, glob=glob, ignore_case=ignore_case, max_matches=most
            )
            rows = [f"{m.path}:{m.line}:{m.text}" for m in found.matches]
            if found.truncated:
                rows.append(f"[... {found.reason}]")
            matches = [
                {"path": m.path, "line": m.line, "text": m.text} for m in found.matches
            ]
            data = {
                "matches": matches,
                "files_searched": found.files_searched,
                "files_skipped": found.files_skipped,
                "truncated": found.truncated,
                "reason": found.reason,
            }
            record = {
                "count": len(matches),
                "files_searched": found.files_searched,
                "truncated": found.truncated,
                "reason": found.reason,
            }
            return _Done("\n".join(rows) or "no matches", data, record)

        return self._call(environment_id, "search", args, body)

    def tree(
        self,
        environment_id: str,
        path: str = "",
        depth: int = 3,
        max_entries: int = 500,
    ) -> ToolReply:
        """Show a directory of the worktree as a tree (bounded depth and entries)."""
        _text(path, "path", limit=4096)
        levels = _count(depth, "depth", 1, MAX_TREE_DEPTH)
        most = _count(max_entries, "max_entries", 1, MAX_TREE_ENTRIES)
        args = {"path": path, "depth": levels, "max_entries": most}

        def body(env: Environment) -> _Done:
            listing = WorkspaceFiles(env.worktree).tree(path, levels, most)
            rows = [path.rstrip("/") + "/" if path else "./"]
            for e in listing.entries:
                name = e.path.rsplit("/", 1)[-1]
                mark = (
                    "/"
                    if e.kind == "directory"
                    else f" -> {e.target}"
                    if e.kind == "symlink"
                    else ""
                    if e.kind == "file"
                    else f" [{e.kind}]"
                )
                rows.append(f"{'  ' * e.depth}{name}{mark}")
            if listing.truncated:
                rows.append(f"[... cut at {len(listing.entries)} entries]")
            entries = [
                {
                    "path": e.path,
                    "kind": e.kind,
                    "depth": e.depth,
                    "size": e.size,
                    **({"target": e.target} if e.kind == "symlink" else {}),
                }
                for e in listing.entries
            ]
            data = {"entries": entries, "truncated": listing.truncated}
            record = {"count": len(entries), "truncated": listing.truncated}
            return _Done("\n".join(rows), data, record)

        return self._call(environment_id, "tree", args, body)

    def apply_patch(self, environment_id: str, patch: str) -> ToolReply:
        """Apply a unified diff to the worktree, whole or not at all."""
        _text(patch, "patch", limit=MAX_PATCH_BYTES)
        args = text_fields("patch", patch)

        def body(env: Environment) -> _Done:
            files = apply_patch(env.worktree, patch)
            changed = [
                {"path": shown_name(f.path), "added": f.added, "deleted": f.deleted}
                for f in files
            ]
            data = {"files": changed}
            names = ", ".join(str(f["path"]) for f in changed[:50])
            more = f" and {len(changed) - 50} more" if len(changed) > 50 else ""
            record = {"files": changed[:500], "count": len(changed)}
            return _Done(f"applied the patch to {names}{more}", data, record)

        return self._call(environment_id, "apply_patch", args, body)

    # ------------------------------------------------------------ checkpoints

    def checkpoint(
        self, environment_id: str, conversation: str | None = None, label: str = ""
    ) -> ToolReply:
        """Checkpoint the worktree, with an optional conversation snapshot."""
        snapshot = (
            _text(conversation, "conversation") if conversation is not None else ""
        )
        _text(label, "label", limit=1024)
        args = {"label": label, **text_fields("conversation", snapshot)}

        def body(env: Environment) -> _Done:
            manager = self.environments.manager
            cp = unwrap(
                manager.create_checkpoint(env.scope_id, snapshot.encode("utf-8"))
            )
            data = {"checkpoint_id": cp.id, "label": label}
            text = f"checkpoint {cp.id} taken; restore rolls back to it, once"
            return _Done(text, data, data)

        return self._call(environment_id, "checkpoint", args, body)

    def restore(self, environment_id: str, checkpoint_id: str) -> ToolReply:
        """Restore a checkpoint of this environment (once); return its conversation."""
        _text(checkpoint_id, "checkpoint_id", limit=1024)
        args = {"checkpoint_id": checkpoint_id}

        def body(env: Environment) -> _Done:
            manager = self.environments.manager
            found = manager.checkpoint(checkpoint_id)
            if found is None:
                raise ToolInputError(f"no checkpoint {checkpoint_id!r}")
            if found.scope_id != env.scope_id:
                raise ToolInputError(
                    f"checkpoint {checkpoint_id!r} belongs to another environment"
                )
            snapshot = unwrap(manager.restore_checkpoint(checkpoint_id))
            conversation = snapshot.decode("utf-8", errors="replace")
            data = {"checkpoint_id": checkpoint_id, "conversation": conversation}
            text = f"restored {checkpoint_id}; the worktree is as it was then."
            if conversation:
                text += f"\nconversation snapshot:\n{conversation}"
            return _Done(text, data, {"checkpoint_id": checkpoint_id})

        return self._call(environment_id, "restore", args, body)

    # ------------------------------------------------------------ review

    def diff(self, environment_id: str, max_lines: int = 2000) -> ToolReply:
        """Return the worktree's unified diff against its base (the fork)."""
        lines = _count(max_lines, "max_lines", 1, 100_000)

        def body(env: Environment) -> _Done:
            text, files = self._diff(env, lines)
            data = {"diff": text, "files": files}
            record = {"files": files[:500], **text_fields("diff", text)}
            return _Done(text or "no changes against the base", data, record)

        return self._call(environment_id, "diff", {"max_lines": lines}, body)

    def _diff(self, env: Environment, max_lines: int) -> tuple[str, list[str]]:
        manager = self.environments.manager
        scope = manager.get(env.scope_id)
        baseline = scope.baseline() if scope is not None else None
        if baseline is None:
            raise EnvironmentUnavailableError(f"environment {env.env_id} has no base")
        text, files = unwrap(manager.diff_workspace(env.scope_id, baseline, max_lines))
        data = text.encode("utf-8")
        if len(data) > MAX_DIFF_BYTES:
            cut = data[:MAX_DIFF_BYTES].decode("utf-8", errors="ignore")
            text = f"{cut}\n[... diff cut at {MAX_DIFF_BYTES} bytes]\n"
        return text, [shown_name(name) for name in files]

    def propose(self, environment_id: str, summary: str = "") -> ToolReply:
        """Seal the environment as an output for a human to settle."""
        _text(summary, "summary", limit=64 * 1024)
        args = text_fields("summary", summary)

        def body(env: Environment) -> _Done:
            manager = self.environments.manager
            standing = self._unchanged_proposal(env)
            if standing is not None:
                return self._proposed(standing, again=True)
            proposal = unwrap(manager.propose_merge(env.scope_id, 1))
            _proposable(proposal.paths)
            self._fired.rule = ""
            verdict = self.supervisor.review_merge(env.scope_id, proposal)
            if verdict is not None and verdict.type in _STOPPING:
                raise ToolRefusedError(
                    f"the supervisor denied the proposal (rule {self._fired.rule}):"
                    f" {verdict.payload}"
                )
            return self._proposed(unwrap(manager.seal(env.scope_id)), again=False)

        return self._call(environment_id, "propose", args, body)

    def _unchanged_proposal(self, env: Environment) -> RetainedOutput | None:
        """The environment's latest unsettled output, if the worktree still holds it."""
        outputs = self.environments.manager.outputs_for_scope(env.scope_id)
        if not outputs or outputs[-1].state is not OutputState.UNCONSUMED:
            return None
        latest = outputs[-1]
        current = self.environments.sandbox_of(env).capture()
        return latest if current.digest() == latest.workspace().digest() else None

    def _proposed(self, out: RetainedOutput, *, again: bool) -> _Done:
        changes = [dict(change) for change in out.changes()]
        settle = f"goatherd settle {out.id} select --db {self._settings.db}"
        commit = f"goatherd settle {out.id} select --commit --db {self._settings.db}"
        data = {
            "output_id": out.id,
            "changes": changes,
            "settle": settle,
            "settle_commit": commit,
            "unchanged": again,
        }
        if again:
            text = (
                f"nothing changed since {out.id} was proposed; it stands"
                f" ({len(changes)} changed path(s)), e.g. `{settle}`"
            )
        else:
            text = (
                f"proposed as {out.id} ({len(changes)} changed path(s)); a human"
                f" settles it, e.g. `{settle}` (or as a git commit on the"
                f" repository's branch: `{commit}`). You may keep working and propose"
                " again; a human settles one proposal of an environment, and the"
                " others then can no longer be selected or applied."
            )
        record = {"output_id": out.id, "changes": changes[:500], "unchanged": again}
        return _Done(text, data, record)

    # ------------------------------------------------------------ resources

    def recent_records(self, environment_id: str, limit: int = 50) -> str:
        """Return the environment's latest path entries as JSON (records nothing)."""
        count = _count(limit, "limit", 1, MAX_RECENT_RECORDS)
        owner = self.environments.owner_of(environment_id)
        self.environments.known(owner)
        head = self._store.head(owner)
        entries = self._store.read_path(owner, max(-1, head - count - 1))
        rows = [
            {
                "ordinal": entry.record.owner_ordinal,
                "position": entry.position,
                "record_id": entry.record.record_id,
                "mode": entry.record.envelope.mode,
                "schema": entry.record.envelope.schema_ref,
                "kind": entry.record.fact_kind,
                "payload": _shown(entry.record.payload),
            }
            for entry in entries
        ]
        return json.dumps(
            {"environment_id": owner.rsplit(":", 1)[1], "records": rows}, indent=1
        )

    def diff_text(self, environment_id: str) -> str:
        """Return the environment's diff against its base (records nothing)."""
        env = self.environments.lookup(environment_id)
        with self.environments.lock(env.owner):
            text, _ = self._diff(env, 0)
        return text


def _listing(infos: list[dict[str, object]]) -> str:
    lines = []
    for info in infos:
        outputs = cast("list[dict[str, str]]", info["outputs"])
        line = f"{info['environment_id']}: {info['state']}"
        lines.extend(
            [line + "".join(f", {o['output_id']} {o['state']}" for o in outputs)]
        )
    return "\n".join(lines) or "no environments yet"


def _proposable(paths: Iterable[str]) -> None:
    """Refuse a proposal with a file name the trace cannot hold as text."""
    for path in paths:
        shown = shown_name(path)
        if shown != path:
            named = shown if shown.isprintable() else repr(shown)
            raise ToolInputError(
                f"the file name {named} is not valid UTF-8, so it cannot be"
                " proposed: rename or remove it first"
            )


def _shown(payload: Mapping[str, object]) -> object:
    text = json.dumps(payload, ensure_ascii=False, sort_keys=True)
    if len(text) <= 4096:
        return payload
    return {"truncated": bounded_text(text, 4096)}


def _halted_run() -> _Done:
    message = (
        "the supervisor halted the environment while the command ran; every"
        " process it started was killed. Stop working in this environment"
    )
    return _Done(
        message, {"halted": True}, {"halted": True, "error": message}, False, True
    )


def _numbered(text: str, first: int) -> str:
    """``text`` with each line prefixed by its number and a tab (as ``cat -n``)."""
    lines = text.splitlines(keepends=True)
    width = len(str(first + len(lines) - 1))
    return "".join(f"{n:>{width}}\t{line}" for n, line in enumerate(lines, first))


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
