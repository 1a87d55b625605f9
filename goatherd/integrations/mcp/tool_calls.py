"""The path every tool call takes, and the base class of ``WorkspaceTools``.

``ToolReply`` (what a call returns to the agent) and ``_Done`` (a call's
outcome and what its capture records); the argument checks every tool uses
(``_text``, ``_count``); and ``ToolCalls``: the tools' construction (the
environments, the supervisor with its named rules, recovery of interrupted
opens) and a call's way through declaration, the supervisor's gate, the
body and the capture, on an environment's path or on the root path. The tool
families (``tool_environments``, ``tool_commands``, ``tool_files``) build on
it; it imports none of them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Final

from returns.result import Failure

from goatherd.application import Supervisor
from goatherd.domain import (
    GoatherdError,
    Intervention,
    InterventionType,
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
    unwrap,
)
from goatherd.integrations.mcp.errors import ToolInputError, ToolRefusedError
from goatherd.integrations.mcp.policy import default_rules
from goatherd.integrations.mcp.recording import CallRecorder, RecordedCall, bounded_text

__all__ = [
    "MAX_ARGUMENT_BYTES",
    "ToolCalls",
    "ToolReply",
    "_Done",
    "_STOPPING",
    "_count",
    "_text",
]

MAX_ARGUMENT_BYTES: Final = 4 * 1024 * 1024
_STOPPING: Final = (InterventionType.DENY, InterventionType.HALT)


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


class ToolCalls:
    """The tools' construction and the recorded, judged path of every call."""

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
