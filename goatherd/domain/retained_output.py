"""The retained-output aggregate: a sealed child result, settle-able exactly once.

An output's stream is its own owner path, the output id ``out:<owner>:<seq>``.
``goatherd.run_output.sealed.v1`` is placed on the sealing scope's path (the
seed's placement) and on the output's path (its genesis);
``goatherd.run_output.settled.v1`` likewise, caused by the sealed record. A
second settlement meets an occupied ordinal on the output's path, so
consume-once is optimistic concurrency.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

from goatherd.domain.records import RecordMode
from goatherd.domain.runtime_errors import (
    NoBaselineError,
    OutputClaimedError,
    OutputConsumedError,
)
from goatherd.domain.scope import (
    ScopeAggregate,
    owner_in_sequenced_id,
    scope_id_for,
)
from goatherd.domain.settlement import (
    OutputState,
    SettlementAction,
    terminal_state_for,
)
from goatherd.domain.trace_aggregate import (
    TraceAggregate,
    TraceEvent,
    register_trace_event,
)
from goatherd.domain.workspace import WorkspaceState

__all__ = [
    "OutputClaimed",
    "OutputSealed",
    "OutputSettled",
    "RetainedOutputAggregate",
    "SCHEMA_RUN_OUTPUT_CLAIMED",
    "SCHEMA_RUN_OUTPUT_SEALED",
    "SCHEMA_RUN_OUTPUT_SETTLED",
    "output_id_for",
    "owner_of_output",
]

SCHEMA_RUN_OUTPUT_SEALED: Final = "goatherd.run_output.sealed.v1"
SCHEMA_RUN_OUTPUT_SETTLED: Final = "goatherd.run_output.settled.v1"
SCHEMA_RUN_OUTPUT_CLAIMED: Final = "goatherd.run_output.claimed.v1"


def output_id_for(owner: str, seq: int) -> str:
    """Return the output id ``out:<owner>:<seq>``."""
    return f"out:{owner}:{seq}"


def owner_of_output(output_id: str) -> str:
    """Return the sealing scope's owner named by an output id (``""`` if malformed)."""
    return owner_in_sequenced_id(output_id, "out:")


@register_trace_event
class OutputSealed(TraceEvent):
    """A scope's workspace was sealed as an output (scope path + output genesis)."""

    TOPIC = SCHEMA_RUN_OUTPUT_SEALED
    MODE = RecordMode.DECLARATION
    KIND_LABEL = "run_output:sealed"
    SHARED = True

    output_id: str
    scope: str
    backend: str
    revision: str
    state_digest: str
    baseline_digest: str
    change_count: int
    state: Mapping[str, object]
    baseline: Mapping[str, object]
    changes: list[dict[str, str]]


@register_trace_event
class OutputSettled(TraceEvent):
    """An output was consumed (scope path + output path, caused by the seal)."""

    TOPIC = SCHEMA_RUN_OUTPUT_SETTLED
    MODE = RecordMode.CAPTURE
    KIND_LABEL = "run_output:settled"
    SHARED = True

    output_id: str
    action: str
    state_digest: str


@register_trace_event
class OutputClaimed(TraceEvent):
    """A settle claimed the output before its workspace effect (output path only).

    Attributes:
        output_id: the output.
        action: the claiming settle's verb.
        settle_intent: the claiming settle's append-intent id.
    """

    TOPIC = SCHEMA_RUN_OUTPUT_CLAIMED
    MODE = RecordMode.DECLARATION
    KIND_LABEL = "run_output:claimed"

    output_id: str
    action: str
    settle_intent: str


class RetainedOutputAggregate(TraceAggregate):
    """A retained output folded from its own path.

    Attributes:
        scope_owner: the owner of the scope that sealed it.
        workspace: the sealed state.
        baseline: the parent's fork-time state the changes are against.
        changes: ``{"path", "kind"}`` per change, frozen at seal time.
        sealed_record_id: the sealed record's id (what the settlement cites).
        state: the consume-once state.
        action: the verb that consumed it (``None`` until settled).
        claimed_by: the settle intent holding the effect claim (``""``: none).
    """

    def init_state(self) -> None:
        """Start as an unknown output."""
        self.scope_owner = owner_of_output(self.id)
        self.workspace = WorkspaceState(backend="")
        self.baseline = WorkspaceState(backend="")
        self.changes: list[dict[str, str]] = []
        self.sealed_record_id = ""
        self.state = OutputState.UNCONSUMED
        self.action: SettlementAction | None = None
        self.claimed_by = ""

    @classmethod
    def decode_snapshot_field(cls, name: str, value: object) -> object:
        """Decode the states, the consume-once state and the verb of a snapshot."""
        if name in ("workspace", "baseline"):
            if not isinstance(value, Mapping):
                raise ValueError(f"snapshot {name} is not an object: {value!r}")
            return WorkspaceState.from_json(value)
        if name == "state":
            return OutputState(str(value))
        if name == "action":
            return None if value is None else SettlementAction(str(value))
        return value

    @property
    def exists(self) -> bool:
        """Whether the output was sealed (its path holds its genesis)."""
        return self.version >= 0

    @property
    def scope_id(self) -> str:
        """The id of the scope that sealed it."""
        return scope_id_for(self.scope_owner)

    @property
    def change_paths(self) -> list[str]:
        """The changed paths, in change order."""
        return [change["path"] for change in self.changes]

    def seal(
        self,
        scope: ScopeAggregate,
        state: WorkspaceState,
        changes: Sequence[Mapping[str, str]],
    ) -> OutputSealed:
        """Record this (bare) output sealed from ``scope`` at ``state``.

        Raises:
            ScopeStateError: the scope is not active.
            NoBaselineError: the scope has no fork baseline to settle onto.
        """
        scope.require_active("cannot seal scope")
        baseline = scope.baseline
        if baseline is None:
            raise NoBaselineError(scope.scope_id, "base to settle onto")
        frozen = [{"path": c["path"], "kind": c["kind"]} for c in changes]
        event = self.record(
            OutputSealed,
            output_id=self.id,
            scope=scope.scope_id,
            backend=state.backend,
            revision=state.revision,
            state_digest=state.digest(),
            baseline_digest=baseline.digest(),
            change_count=len(frozen),
            state=state.to_json(),
            baseline=baseline.to_json(),
            changes=frozen,
        )
        assert isinstance(event, OutputSealed)
        scope.place(event)
        return event

    def check_unconsumed(self) -> None:
        """Raise :class:`OutputConsumedError` unless the output is unconsumed."""
        if self.state is not OutputState.UNCONSUMED:
            raise OutputConsumedError(self.id, self.state)

    def check_claimable(self, settle_intent: str) -> None:
        """Check ``settle_intent`` may perform a select/apply effect.

        Raises:
            OutputConsumedError: the output was already settled.
            OutputClaimedError: another intent holds the claim.
        """
        self.check_unconsumed()
        if self.claimed_by and self.claimed_by != settle_intent:
            raise OutputClaimedError(self.id, self.claimed_by)

    def claim(
        self, action: SettlementAction, settle_intent: str
    ) -> OutputClaimed | None:
        """Claim the output for ``settle_intent``'s effect (``None``: already ours).

        Raises:
            the errors of :meth:`check_claimable`.
        """
        self.check_claimable(settle_intent)
        if self.claimed_by == settle_intent:
            return None
        event = self.record(
            OutputClaimed,
            output_id=self.id,
            action=action.value,
            settle_intent=settle_intent,
        )
        assert isinstance(event, OutputClaimed)
        return event

    def settle(
        self,
        scope: ScopeAggregate,
        action: SettlementAction,
        settle_intent: str = "",
    ) -> OutputSettled:
        """Record the settlement (consume-once) on the output and ``scope``.

        A select/apply must hold the claim (``settle_intent``); release and
        discard end the output whoever claimed it.

        Raises:
            OutputConsumedError: the output was already settled.
            OutputClaimedError: a select/apply without this output's claim.
        """
        if action in (SettlementAction.SELECT, SettlementAction.APPLY):
            self.check_claimable(settle_intent)
        self.check_unconsumed()
        event = self.record(
            OutputSettled,
            caused_by=(self.sealed_record_id,),
            output_id=self.id,
            action=action.value,
            state_digest=self.workspace.digest(),
        )
        assert isinstance(event, OutputSettled)
        scope.place(event)
        return event

    def evolve(self, event: TraceEvent) -> None:
        """Fold one record of the output's path (pure, total)."""
        if isinstance(event, OutputSealed) and event.output_id == self.id:
            self.scope_owner = event.scope.removeprefix("scope:")
            self.workspace = WorkspaceState.from_json(event.state)
            self.baseline = WorkspaceState.from_json(event.baseline)
            self.changes = [dict(c) for c in event.changes]
            self.sealed_record_id = event.record_id
        elif isinstance(event, OutputSettled) and event.output_id == self.id:
            self._evolve_settled(event.action)
        elif isinstance(event, OutputClaimed) and event.output_id == self.id:
            self.claimed_by = event.settle_intent

    def _evolve_settled(self, action: str) -> None:
        try:
            verb = SettlementAction(action)
        except ValueError:
            return  # an unknown recorded verb leaves the output unconsumed
        self.action = verb
        self.state = terminal_state_for(verb)
