"""Execute a scripted agent in its scope: gate each call, act, record it.

For every tool call the runner builds the call's declaration event, asks the
supervisor's synchronous pre-tool gate (``check_call``), performs the call in
the scope's worktree only when the gate lets it through, and records the call
with its result on the scope's path (``Scope.append_fact``). A denial is
recorded too, and ends the agent's turn. Checkpoint and restore steps go
through the scope manager; the checkpoint's snapshot is the agent's
conversation so far, and a restore puts that conversation back.

The git sandbox has no file IO capability, so edits write the worktree's
files directly (its ``address()`` is the worktree path) and the tests run in
a subprocess with a timeout.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Protocol, TypeVar

from returns.result import Failure, Result

from goatherd.application import Checkpoint, Scope
from goatherd.demo.agents import TASK, Agent, Step, StepKind
from goatherd.demo.project import run_tests
from goatherd.domain import (
    BASH_SCHEMA_REF,
    DECLARATION,
    GoatherdError,
    Intervention,
    InterventionType,
    SupervisedEvent,
    canonical_json_bytes,
)
from goatherd.infrastructure import resolve_inside

__all__ = [
    "AGENT_RESTORED_SCHEMA",
    "AGENT_STARTED_SCHEMA",
    "AgentReport",
    "CallGate",
    "CheckpointPort",
    "TOOL_SCHEMAS",
    "ToolCallEvent",
    "run_agent",
]

AGENT_STARTED_SCHEMA: Final = "demo.agent.started.v1"
AGENT_RESTORED_SCHEMA: Final = "demo.agent.restored.v1"
TOOL_SCHEMAS: Final[Mapping[StepKind, str]] = {
    StepKind.EDIT: "demo.tool.edit.v1",
    StepKind.RUN_TESTS: "demo.tool.run_tests.v1",
    StepKind.BASH: "demo.tool.bash.v1",
}
# The declaration a shell call presents to the gate is the standard bash call,
# which DestructiveToolGuard blocks; the structured tools are the demo's own.
_EVENT_SCHEMAS: Final[Mapping[StepKind, str]] = {
    **TOOL_SCHEMAS,
    StepKind.BASH: BASH_SCHEMA_REF,
}
_STOPPING: Final = frozenset({InterventionType.DENY, InterventionType.HALT})
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class ToolCallEvent:
    """A tool call's declaration, presented to the gate before it runs."""

    trace_owner_id: str
    schema_ref: str
    kind_label: str
    payload: Mapping[str, object]
    mode: str = DECLARATION


class CallGate(Protocol):
    """The supervisor's synchronous pre-tool gate."""

    def check_call(self, event: SupervisedEvent) -> Intervention | None:
        """Return ``None`` to proceed, else the intervention."""
        ...


class CheckpointPort(Protocol):
    """The scope manager's checkpoint commands."""

    def create_checkpoint(
        self, scope_id: str, snapshot: bytes = b"", *, seq: int | None = None
    ) -> Result[Checkpoint, GoatherdError]:
        """Checkpoint the scope's workspace with an opaque snapshot."""
        ...

    def restore_checkpoint(
        self, checkpoint_id: str, *, seq: int | None = None
    ) -> Result[bytes, GoatherdError]:
        """Restore a checkpoint once; return its snapshot."""
        ...


@dataclass(slots=True)
class AgentReport:
    """What one agent's turn did (the handler's return value).

    Attributes:
        agent: the agent's name.
        denied: the gate's reason when a call was denied (``""``: none).
        tests_passed: the last test run's verdict (``None``: never ran).
        messages: the conversation, restores included.
    """

    agent: str
    denied: str = ""
    tests_passed: bool | None = None
    messages: list[dict[str, str]] = field(default_factory=list)


def run_agent(
    agent: Agent, scope: Scope, gate: CallGate, checkpoints: CheckpointPort
) -> AgentReport:
    """Run ``agent``'s script in ``scope``; stop at the first denial.

    Raises:
        GoatherdError: the trace refused a record or a checkpoint step failed
            (the reversible run then ends the attempt as failed).
    """
    runner = _AgentRun(agent, scope, gate, checkpoints)
    return runner.run()


class _AgentRun:
    def __init__(
        self, agent: Agent, scope: Scope, gate: CallGate, checkpoints: CheckpointPort
    ) -> None:
        self._agent = agent
        self._scope = scope
        self._gate = gate
        self._checkpoints = checkpoints
        self._report = AgentReport(agent.name)
        self._checkpoint_id = ""
        sandbox = scope.sandbox
        address = getattr(sandbox, "address", None)
        if not callable(address):
            raise GoatherdError(f"scope {scope.id} has no addressable worktree")
        self._root = Path(str(address()))

    def run(self) -> AgentReport:
        self._say("user", TASK)
        self._fact(
            AGENT_STARTED_SCHEMA,
            "agent:started",
            {"agent": self._agent.name, "character": self._agent.character},
        )
        for step in self._agent.steps:
            if step.thought:
                self._say("agent", step.thought)
            if not self._perform(step):
                break
        return self._report

    def _perform(self, step: Step) -> bool:
        if step.kind is StepKind.CHECKPOINT:
            self._checkpoint()
            return True
        if step.kind is StepKind.RESTORE:
            self._restore()
            return True
        return self._tool_call(step)

    # ------------------------------------------------------------ tools

    def _tool_call(self, step: Step) -> bool:
        args = dict(step.args)
        event = ToolCallEvent(
            self._scope.owner_id, _EVENT_SCHEMAS[step.kind], _label(step), args
        )
        verdict = self._gate.check_call(event)
        if verdict is not None and verdict.type in _STOPPING:
            reason = str(verdict.payload or f"supervisor {verdict.type.value}")
            self._record_call(
                step, _call_args(step), {"denied": True, "reason": reason}
            )
            self._report.denied = reason
            self._say("supervisor", reason)
            return False
        if verdict is not None and verdict.payload:
            self._say("supervisor", str(verdict.payload))
        result = self._execute(step)
        self._record_call(step, _call_args(step), {"denied": False, **result})
        return True

    def _execute(self, step: Step) -> dict[str, object]:
        if step.kind is StepKind.EDIT:
            target = resolve_inside(self._root, step.args["path"])
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(step.args["content"], encoding="utf-8")
            self._say("tool", f"wrote {step.args['path']}")
            return {"written": True}
        if step.kind is StepKind.RUN_TESTS:
            outcome = run_tests(self._root)
            self._report.tests_passed = outcome.passed
            self._say("tool", f"tests: {outcome.summary}")
            return {
                "passed": outcome.passed,
                "exit_code": outcome.exit_code,
                "summary": outcome.summary,
            }
        raise GoatherdError(f"the demo does not run {step.kind.value} calls")

    def _record_call(
        self, step: Step, args: Mapping[str, object], result: Mapping[str, object]
    ) -> None:
        self._fact(
            TOOL_SCHEMAS[step.kind],
            f"tool:{step.kind.value}",
            {"agent": self._agent.name, "args": dict(args), "result": dict(result)},
        )

    # ------------------------------------------------------------ checkpoints

    def _conversation(self) -> bytes:
        body = {"agent": self._agent.name, "messages": self._report.messages}
        return canonical_json_bytes(body)

    def _checkpoint(self) -> None:
        checkpoint = _ok(
            self._checkpoints.create_checkpoint(self._scope.id, self._conversation())
        )
        self._checkpoint_id = checkpoint.id
        self._say("runtime", f"checkpoint {checkpoint.id} taken")

    def _restore(self) -> None:
        if not self._checkpoint_id:
            raise GoatherdError(
                f"agent {self._agent.name} restores before a checkpoint"
            )
        snapshot = _ok(self._checkpoints.restore_checkpoint(self._checkpoint_id))
        restored = json.loads(snapshot)
        messages = [dict(m) for m in restored["messages"]]
        payload = {
            "checkpoint_id": self._checkpoint_id,
            "messages_restored": len(messages),
            "messages_dropped": len(self._report.messages) - len(messages),
        }
        self._report.messages = messages
        self._say("runtime", f"checkpoint {self._checkpoint_id} restored")
        self._fact(AGENT_RESTORED_SCHEMA, "agent:restored", payload)

    # ------------------------------------------------------------ helpers

    def _say(self, role: str, text: str) -> None:
        self._report.messages.append({"role": role, "text": text})

    def _fact(self, schema: str, label: str, payload: Mapping[str, object]) -> None:
        _ok(self._scope.append_fact(schema, label, payload))


def _label(step: Step) -> str:
    return "bash" if step.kind is StepKind.BASH else f"tool:{step.kind.value}"


def _call_args(step: Step) -> dict[str, object]:
    """The recorded arguments: an edit records its content's digest and size."""
    if step.kind is not StepKind.EDIT:
        return dict(step.args)
    content = step.args["content"].encode("utf-8")
    return {
        "path": step.args["path"],
        "sha256": hashlib.sha256(content).hexdigest(),
        "bytes": len(content),
    }


def _ok(result: Result[T, GoatherdError]) -> T:
    if isinstance(result, Failure):
        raise result.failure()
    return result.unwrap()
