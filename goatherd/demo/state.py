"""The demo session as the trace tells it (the trace is the registry).

:func:`read_session` folds what the demo needs to resume and to summarize
from the trace alone: the rounds the session planned (``demo.round.started``
on the root's path), every attempt scope forked from the root with its
state, agent, run record, outputs, test verdict and gate denials, and
whether the session completed. Nothing here writes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from goatherd.application import RuntimeModel
from goatherd.demo.agent_runner import TOOL_SCHEMAS
from goatherd.demo.agents import StepKind
from goatherd.demo.rules import blocked_calls
from goatherd.domain import (
    CheckpointRestored,
    MergeProposed,
    OpaqueRecord,
    OutputSealed,
    OutputState,
    Record,
    RunCompleted,
    RuntimeEvent,
    ScopeForked,
    ScopeState,
    SettlementAction,
    SupervisorDecided,
    decode_fact,
)
from goatherd.infrastructure import SqlAlchemyTraceStore

__all__ = [
    "AttemptView",
    "COMPLETED_SCHEMA",
    "OutputView",
    "ROOT_OWNER",
    "ROUND_SCHEMA",
    "RoundPlan",
    "SessionState",
    "read_session",
    "tests_verdict",
]

ROOT_OWNER: Final = "demo:main"
ROUND_SCHEMA: Final = "demo.round.started.v1"
COMPLETED_SCHEMA: Final = "demo.session.completed.v1"
_WINNING: Final = frozenset({SettlementAction.SELECT, SettlementAction.APPLY})


@dataclass(frozen=True, slots=True)
class RoundPlan:
    """One best-of-n round: its attempts' owner prefix and agents, in order."""

    number: int
    owner_prefix: str
    agents: tuple[str, ...]

    def owner(self, index: int) -> str:
        """The owner best-of-n gives attempt ``index`` of this round."""
        return f"{self.owner_prefix}-{index}"


@dataclass(frozen=True, slots=True)
class OutputView:
    """A sealed output of an attempt and how far its settlement got."""

    output_id: str
    state: OutputState
    action: SettlementAction | None
    claimed_by: str

    @property
    def won(self) -> bool:
        """Whether it settled ``selected`` or ``applied``."""
        return self.action in _WINNING


@dataclass(frozen=True, slots=True)
class AttemptView:
    """One attempt scope (a child of the root) as the trace records it.

    Attributes:
        scope_id: ``scope:<owner>``.
        owner: the trace owner.
        state: the scope's lifecycle state.
        round: the round that planned it (0: unknown).
        agent: the agent that ran in it (``""``: unknown).
        sandbox_path: the worktree recorded at fork.
        run: the last ``goatherd.run.completed.v1`` payload (``None``: none).
        outputs: its sealed outputs, in seal order.
        tests_passed: the last test run's verdict (``None``: never ran).
        test_summary: that run's summary line.
        denials: the gate's recorded denials of its tool calls.
        blocked: the commands of its denied shell calls.
        restores: checkpoints restored in the scope.
        proposal: the last ``merge.proposed`` record (id, payload), if any.
        decision_action: the action of the root's decision on it (``""``).
    """

    scope_id: str
    owner: str
    state: ScopeState
    round: int = 0
    agent: str = ""
    sandbox_path: str = ""
    run: Mapping[str, object] | None = None
    outputs: tuple[OutputView, ...] = ()
    tests_passed: bool | None = None
    test_summary: str = ""
    denials: tuple[str, ...] = ()
    blocked: tuple[str, ...] = ()
    restores: int = 0
    proposal: tuple[str, Mapping[str, object]] | None = None
    decision_action: str = ""

    @property
    def status(self) -> str:
        """The run record's status (``""``: the run never recorded itself)."""
        return "" if self.run is None else str(self.run.get("status") or "")

    @property
    def winning_output(self) -> OutputView | None:
        """The output that settled as winner, if any."""
        return next((o for o in self.outputs if o.won), None)

    @property
    def claimed_output(self) -> OutputView | None:
        """An unconsumed output a winner's settlement claimed, if any."""
        return next(
            (o for o in self.outputs if o.claimed_by and o.action is None), None
        )


@dataclass(frozen=True, slots=True)
class SessionState:
    """The whole demo session as recorded."""

    rounds: tuple[RoundPlan, ...] = ()
    attempts: tuple[AttemptView, ...] = ()
    completed: Mapping[str, object] | None = None

    @property
    def winner(self) -> AttemptView | None:
        """The attempt whose output settled as winner, if any."""
        return next((a for a in self.attempts if a.winning_output), None)

    def round_of(self, number: int) -> RoundPlan | None:
        """Return the plan of round ``number``, if recorded."""
        return next((r for r in self.rounds if r.number == number), None)


def read_session(store: SqlAlchemyTraceStore, model: RuntimeModel) -> SessionState:
    """Fold the demo session from ``store``'s trace (``model`` is its runtime fold)."""
    rounds: list[RoundPlan] = []
    completed: Mapping[str, object] | None = None
    decisions: dict[str, str] = {}
    for entry in store.read_path(ROOT_OWNER):
        event = _event(entry.record)
        if isinstance(event, SupervisorDecided):
            decisions[event.child_scope] = event.action or ""
        elif isinstance(event, OpaqueRecord) and event.record_schema == ROUND_SCHEMA:
            rounds.append(_round_plan(event.record_payload))
        elif (
            isinstance(event, OpaqueRecord) and event.record_schema == COMPLETED_SCHEMA
        ):
            completed = event.record_payload
    model.refresh()
    root = model.scope(ROOT_OWNER)
    attempts = tuple(
        _attempt(store, model, owner, rounds, decisions) for owner in root.children
    )
    return SessionState(tuple(rounds), attempts, completed)


def _event(record: Record) -> RuntimeEvent:
    return decode_fact(record).event


def _round_plan(payload: Mapping[str, object]) -> RoundPlan:
    agents = payload.get("agents")
    names = tuple(str(a) for a in agents) if isinstance(agents, list) else ()
    return RoundPlan(
        int(str(payload.get("round", 0))), str(payload.get("owner_prefix")), names
    )


def _place(owner: str, rounds: Sequence[RoundPlan]) -> tuple[int, str]:
    for plan in rounds:
        for index, agent in enumerate(plan.agents):
            if plan.owner(index) == owner:
                return plan.number, agent
    return 0, ""


def _attempt(
    store: SqlAlchemyTraceStore,
    model: RuntimeModel,
    owner: str,
    rounds: Sequence[RoundPlan],
    decisions: Mapping[str, str],
) -> AttemptView:
    number, agent = _place(owner, rounds)
    scope_id = f"scope:{owner}"
    found = _PathFacts()
    for entry in store.read_path(owner):
        found.see(entry.record)
    outputs = tuple(_output(model, oid) for oid in found.output_ids)
    return AttemptView(
        scope_id=scope_id,
        owner=owner,
        state=model.scope(owner).state,
        round=number,
        agent=agent,
        sandbox_path=found.sandbox_path,
        run=found.run,
        outputs=outputs,
        tests_passed=found.tests_passed,
        test_summary=found.test_summary,
        denials=tuple(blocked_calls(store, owner)),
        blocked=tuple(found.blocked),
        restores=found.restores,
        proposal=found.proposal,
        decision_action=decisions.get(scope_id, ""),
    )


def _output(model: RuntimeModel, output_id: str) -> OutputView:
    agg = model.output(output_id)
    return OutputView(output_id, agg.state, agg.action, agg.claimed_by)


class _PathFacts:
    """Collects what an attempt's path says, record by record."""

    def __init__(self) -> None:
        self.run: Mapping[str, object] | None = None
        self.output_ids: list[str] = []
        self.tests_passed: bool | None = None
        self.test_summary = ""
        self.restores = 0
        self.sandbox_path = ""
        self.proposal: tuple[str, Mapping[str, object]] | None = None
        self.blocked: list[str] = []

    def see(self, record: Record) -> None:
        fact = decode_fact(record)
        event = fact.event
        if isinstance(event, RunCompleted):
            self.run = event.payload()
        elif isinstance(event, OutputSealed):
            self.output_ids.append(event.output_id)
        elif isinstance(event, CheckpointRestored):
            self.restores += 1
        elif isinstance(event, MergeProposed):
            self.proposal = (fact.record_id, event.payload())
        elif isinstance(event, ScopeForked):
            self.sandbox_path = event.sandbox_path or ""
        elif isinstance(event, OpaqueRecord):
            self._tool(event.record_schema, event.record_payload)

    def _tool(self, schema: str, payload: Mapping[str, object]) -> None:
        if schema == TOOL_SCHEMAS[StepKind.RUN_TESTS]:
            self._tests(payload)
        elif schema == TOOL_SCHEMAS[StepKind.BASH]:
            self._bash(payload)

    def _bash(self, payload: Mapping[str, object]) -> None:
        args, result = payload.get("args"), payload.get("result")
        if isinstance(result, Mapping) and result.get("denied"):
            cmd = args.get("cmd") if isinstance(args, Mapping) else None
            self.blocked.append(str(cmd or "?"))

    def _tests(self, payload: Mapping[str, object]) -> None:
        result = payload.get("result")
        if isinstance(result, Mapping) and "passed" in result:
            self.tests_passed = bool(result.get("passed"))
            self.test_summary = str(result.get("summary") or "")


def tests_verdict(store: SqlAlchemyTraceStore, owner: str) -> bool | None:
    """Return the last recorded test run's verdict on ``owner``'s path."""
    found = _PathFacts()
    schema = TOOL_SCHEMAS[StepKind.RUN_TESTS]
    for entry in store.read_path(owner):
        if entry.record.envelope.schema_ref == schema:
            found.see(entry.record)
    return found.tests_passed
