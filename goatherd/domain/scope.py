"""The scope aggregate: one branch of agent execution, folded from its owner path.

A scope's stream is its owner path (the scope id is ``scope:<owner>``). The
lifecycle facts are the seed's records (runtime-spec Appendix A): a fork is
ONE ``goatherd.scope.forked.v1`` record placed on the parent's path (the
seed's placement) and on the child's path (its genesis); merged and discarded
are placed on the parent's path and the child's; halt, inject and the
workspace records sit on the scope's own path. The forked payload also names
``parent_owner`` (an open-map addition, ADR 0008) because it is the child's
genesis.

Rules are checked in the command methods; the ``evolve`` fold is pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Final

from goatherd.domain.records import RecordMode
from goatherd.domain.runtime_errors import (
    NotAChildError,
    ScopeExistsError,
    ScopeStateError,
)
from goatherd.domain.trace_aggregate import (
    RecordAppended,
    TraceAggregate,
    TraceEvent,
    register_trace_event,
)
from goatherd.domain.workspace import WorkspaceState

__all__ = [
    "GuidanceInjected",
    "MergeProposed",
    "SCHEMA_MERGE_PROPOSED",
    "SCHEMA_SCOPE_DISCARDED",
    "SCHEMA_SCOPE_FORKED",
    "SCHEMA_SCOPE_MERGED",
    "SCHEMA_SUPERVISOR_DECISION",
    "SCHEMA_SUPERVISOR_HALT",
    "SCHEMA_SUPERVISOR_INJECT",
    "SCHEMA_WORKSPACE_APPLIED",
    "SCHEMA_WORKSPACE_CAPTURED",
    "ScopeAggregate",
    "ScopeDiscarded",
    "ScopeForked",
    "ScopeHalted",
    "ScopeMerged",
    "ScopeState",
    "SupervisorDecided",
    "WorkspaceApplied",
    "WorkspaceCaptured",
    "owner_in_sequenced_id",
    "owner_of_scope",
    "scope_id_for",
]

SCHEMA_SCOPE_FORKED: Final = "goatherd.scope.forked.v1"
SCHEMA_SCOPE_MERGED: Final = "goatherd.scope.merged.v1"
SCHEMA_SCOPE_DISCARDED: Final = "goatherd.scope.discarded.v1"
SCHEMA_SUPERVISOR_INJECT: Final = "goatherd.supervisor.inject.v1"
SCHEMA_SUPERVISOR_HALT: Final = "goatherd.supervisor.halt.v1"
SCHEMA_WORKSPACE_CAPTURED: Final = "goatherd.workspace.captured.v1"
SCHEMA_WORKSPACE_APPLIED: Final = "goatherd.workspace.applied.v1"
SCHEMA_MERGE_PROPOSED: Final = "goatherd.merge.proposed.v1"
SCHEMA_SUPERVISOR_DECISION: Final = "goatherd.supervisor.decision.v1"


class ScopeState(StrEnum):
    """A scope's lifecycle state (halt folds into ``discarded``)."""

    ACTIVE = "active"
    MERGED = "merged"
    DISCARDED = "discarded"


def scope_id_for(owner: str) -> str:
    """Return the scope id of an owner path (``scope:<owner>``)."""
    return "scope:" + owner


def owner_in_sequenced_id(identifier: str, prefix: str) -> str:
    """Return ``<owner>`` of an id ``<prefix><owner>:<seq>`` (``""`` if malformed).

    Checkpoint (``cp:``) and output (``out:``) ids name their scope's owner this way.
    """
    if not identifier.startswith(prefix) or ":" not in identifier[len(prefix) :]:
        return ""
    return identifier[len(prefix) :].rsplit(":", 1)[0]


def owner_of_scope(scope_id: str) -> str:
    """Return the owner path of a scope id (the id minus ``scope:``)."""
    return scope_id.removeprefix("scope:")


@register_trace_event
class ScopeForked(TraceEvent):
    """A child scope was forked (parent path + the child's genesis)."""

    TOPIC = SCHEMA_SCOPE_FORKED
    MODE = RecordMode.DECLARATION
    KIND_LABEL = "scope:forked"
    SHARED = True

    child_owner: str
    parent_owner: str
    isolated: bool | None = None
    sandbox_backend: str | None = None
    sandbox_path: str | None = None
    baseline_digest: str | None = None
    baseline: Mapping[str, object] | None = None


@register_trace_event
class ScopeMerged(TraceEvent):
    """A child was merged into its parent (causal only; parent + child paths)."""

    TOPIC = SCHEMA_SCOPE_MERGED
    MODE = RecordMode.CAPTURE
    KIND_LABEL = "scope:merged"
    SHARED = True

    child_owner: str
    child_scope: str


@register_trace_event
class ScopeDiscarded(TraceEvent):
    """A child was discarded by its parent (parent + child paths)."""

    TOPIC = SCHEMA_SCOPE_DISCARDED
    MODE = RecordMode.CAPTURE
    KIND_LABEL = "scope:discarded"
    SHARED = True

    child_owner: str
    child_scope: str


@register_trace_event
class ScopeHalted(TraceEvent):
    """The supervisor halted the scope (own path; folds to ``discarded``)."""

    TOPIC = SCHEMA_SUPERVISOR_HALT
    MODE = RecordMode.DECLARATION
    KIND_LABEL = "supervisor:halt"


@register_trace_event
class GuidanceInjected(TraceEvent):
    """Guidance for the scope's next turn (own path)."""

    TOPIC = SCHEMA_SUPERVISOR_INJECT
    MODE = RecordMode.DECLARATION
    KIND_LABEL = "supervisor:inject"

    guidance: str


@register_trace_event
class WorkspaceCaptured(TraceEvent):
    """A workspace capture (advisory, own path)."""

    TOPIC = SCHEMA_WORKSPACE_CAPTURED
    MODE = RecordMode.DECLARATION
    KIND_LABEL = "workspace:captured"

    backend: str
    revision: str
    state_digest: str


@register_trace_event
class WorkspaceApplied(TraceEvent):
    """A workspace apply (advisory, own path)."""

    TOPIC = SCHEMA_WORKSPACE_APPLIED
    MODE = RecordMode.CAPTURE
    KIND_LABEL = "workspace:applied"

    backend: str
    revision: str
    state_digest: str


@register_trace_event
class MergeProposed(TraceEvent):
    """A child's merge proposal (child path, caused by its fork point)."""

    TOPIC = SCHEMA_MERGE_PROPOSED
    MODE = RecordMode.CAPTURE
    KIND_LABEL = "merge:proposed"

    child_scope: str
    baseline_digest: str
    change_count: int
    changes: list[dict[str, str]]
    diff_digest: str


@register_trace_event
class SupervisorDecided(TraceEvent):
    """A review verdict on a proposal (parent path, caused by the proposal)."""

    TOPIC = SCHEMA_SUPERVISOR_DECISION
    MODE = RecordMode.CAPTURE
    KIND_LABEL = "supervisor:decision"

    approved: bool
    child_scope: str
    reason: str | None = None
    action: str | None = None


def _state_json(state: WorkspaceState | None) -> dict[str, object] | None:
    return None if state is None else state.to_json()


class ScopeAggregate(TraceAggregate):
    """A scope folded from its owner path.

    Attributes:
        parent_owner: the parent's owner path (``None`` for a root).
        fork_point: the record id of the fork (``""`` for a root).
        baseline: the parent's state captured at fork (``None`` if none).
        isolated: forked with its own sandbox.
        sandbox_backend: the isolated sandbox's backend (``""`` if none).
        sandbox_path: the isolated sandbox's recorded address (``""`` if none).
        children: the owners forked from this scope, in fork order.
        state: the lifecycle state.
    """

    def init_state(self) -> None:
        """Start as a bare active root."""
        self.parent_owner: str | None = None
        self.fork_point = ""
        self.baseline: WorkspaceState | None = None
        self.isolated = False
        self.sandbox_backend = ""
        self.sandbox_path = ""
        self.children: list[str] = []
        self.state = ScopeState.ACTIVE

    @property
    def owner(self) -> str:
        """The scope's owner path."""
        return self.id

    @property
    def scope_id(self) -> str:
        """The scope id (``scope:<owner>``)."""
        return scope_id_for(self.id)

    @property
    def is_active(self) -> bool:
        """Whether the scope is active."""
        return self.state is ScopeState.ACTIVE

    @property
    def exists(self) -> bool:
        """Whether the path holds any record (a bare root holds none)."""
        return self.version >= 0

    def require_active(self, message: str) -> None:
        """Raise :class:`ScopeStateError` with ``message`` unless active."""
        if not self.is_active:
            raise ScopeStateError(
                f"{message} {self.scope_id} in state {self.state}",
                self.scope_id,
                self.state,
            )

    @classmethod
    def decode_snapshot_field(cls, name: str, value: object) -> object:
        """Decode the baseline and the state of a snapshot."""
        if name == "baseline":
            return None if value is None else _decode_baseline(_mapping(value))
        if name == "state":
            return ScopeState(str(value))
        return value

    # ----------------------------------------------------------- lifecycle

    def fork(
        self,
        child: ScopeAggregate,
        *,
        baseline: WorkspaceState | None,
        isolated: bool = False,
        sandbox_backend: str = "",
        sandbox_path: str = "",
    ) -> ScopeForked:
        """Fork ``child`` (a bare aggregate of a fresh owner) from this scope.

        Raises:
            ScopeStateError: this scope is not active.
            ScopeExistsError: the child's path already holds records.
        """
        self.require_active("cannot fork scope")
        if child.exists or child.id == self.id:
            raise ScopeExistsError(child.scope_id)
        present = baseline is not None and baseline.present
        event = self.record(
            ScopeForked,
            child_owner=child.id,
            parent_owner=self.id,
            isolated=True if isolated else None,
            sandbox_backend=sandbox_backend if isolated and sandbox_backend else None,
            sandbox_path=sandbox_path if isolated and sandbox_path else None,
            baseline_digest=baseline.digest() if present and baseline else None,
            baseline=_state_json(baseline) if present else None,
        )
        assert isinstance(event, ScopeForked)
        child.place(event)
        return event

    def merge(self, child: ScopeAggregate) -> ScopeMerged:
        """Merge ``child`` (causal only).

        Raises:
            ScopeStateError: this scope or the child is not active.
            NotAChildError: ``child`` is not this scope's child.
        """
        self._check_child(child, "merge")
        event = self.record(ScopeMerged, **self._child_fields(child))
        assert isinstance(event, ScopeMerged)
        child.place(event)
        return event

    def discard(self, child: ScopeAggregate) -> ScopeDiscarded:
        """Discard ``child``; its records remain, semantically abandoned.

        Raises:
            ScopeStateError: this scope or the child is not active.
            NotAChildError: ``child`` is not this scope's child.
        """
        self._check_child(child, "discard")
        event = self.record(ScopeDiscarded, **self._child_fields(child))
        assert isinstance(event, ScopeDiscarded)
        child.place(event)
        return event

    def halt(self) -> ScopeHalted | None:
        """Halt the scope; ``None`` when it is already discarded (idempotent).

        Raises:
            ScopeStateError: the scope is merged (a halt would contradict it).
        """
        if self.state is ScopeState.DISCARDED:
            return None
        self.require_active("cannot halt scope")
        event = self.record(ScopeHalted)
        assert isinstance(event, ScopeHalted)
        return event

    def inject(self, guidance: str) -> GuidanceInjected:
        """Record guidance for the scope's next turn.

        Raises:
            ScopeStateError: the scope is not active.
        """
        self.require_active("cannot inject into scope")
        event = self.record(GuidanceInjected, guidance=guidance)
        assert isinstance(event, GuidanceInjected)
        return event

    # ----------------------------------------------------------- records

    def workspace_captured(self, state: WorkspaceState) -> TraceEvent:
        """Record a workspace capture (the caller checked the scope is active)."""
        return self.record(WorkspaceCaptured, **_workspace_fields(state))

    def workspace_applied(self, state: WorkspaceState) -> TraceEvent:
        """Record a workspace apply (the caller checked the scope is active)."""
        return self.record(WorkspaceApplied, **_workspace_fields(state))

    def propose_merge(
        self,
        *,
        baseline_digest: str,
        changes: list[dict[str, str]],
        diff_digest: str,
    ) -> MergeProposed:
        """Record this child's merge proposal, caused by its fork point.

        Raises:
            ScopeStateError: the scope is not active.
        """
        self.require_active("cannot propose merge for scope")
        event = self.record(
            MergeProposed,
            caused_by=(self.fork_point,) if self.fork_point else (),
            child_scope=self.scope_id,
            baseline_digest=baseline_digest,
            change_count=len(changes),
            changes=changes,
            diff_digest=diff_digest,
        )
        assert isinstance(event, MergeProposed)
        return event

    def decide(
        self,
        *,
        child_scope: str,
        approved: bool,
        reason: str,
        action: str,
        proposed_record_id: str,
    ) -> SupervisorDecided:
        """Record a review verdict on this (parent) scope's path."""
        event = self.record(
            SupervisorDecided,
            caused_by=(proposed_record_id,) if proposed_record_id else (),
            approved=approved,
            child_scope=child_scope,
            reason=reason if not approved and reason else None,
            action=action or None,
        )
        assert isinstance(event, SupervisorDecided)
        return event

    def append_fact(
        self, schema_ref: str, kind_label: str, payload: Mapping[str, object]
    ) -> TraceEvent:
        """Record a free-form capture on the scope's path (any state).

        Raises:
            ValueError: for an empty schema ref.
        """
        if not schema_ref:
            raise ValueError("schema_ref is required")
        return self.record(
            RecordAppended,
            record_schema=schema_ref,
            record_mode=RecordMode.CAPTURE.value,
            record_kind_label=kind_label or schema_ref,
            record_payload=dict(payload),
        )

    # ----------------------------------------------------------- fold

    def evolve(self, event: TraceEvent) -> None:
        """Fold one record of the scope's path (pure, total)."""
        if isinstance(event, ScopeForked):
            self._evolve_forked(event)
        elif isinstance(event, ScopeMerged | ScopeDiscarded):
            if event.child_owner == self.id:
                merged = isinstance(event, ScopeMerged)
                self.state = ScopeState.MERGED if merged else ScopeState.DISCARDED
        elif isinstance(event, ScopeHalted):
            self.state = ScopeState.DISCARDED

    def _evolve_forked(self, event: ScopeForked) -> None:
        if event.child_owner != self.id:
            self.children.append(event.child_owner)
            return
        self.parent_owner = event.parent_owner
        self.fork_point = event.record_id
        self.isolated = bool(event.isolated)
        self.sandbox_backend = event.sandbox_backend or ""
        self.sandbox_path = event.sandbox_path or ""
        self.baseline = _decode_baseline(event.baseline)

    def _check_child(self, child: ScopeAggregate, verb: str) -> None:
        preposition = "into" if verb == "merge" else "from"
        self.require_active(f"cannot {verb} {preposition} scope")
        child.require_active(f"cannot {verb} scope")
        if child.parent_owner != self.id:
            raise NotAChildError(child.scope_id, self.scope_id)

    @staticmethod
    def _child_fields(child: ScopeAggregate) -> dict[str, object]:
        return {
            "caused_by": (child.fork_point,) if child.fork_point else (),
            "child_owner": child.id,
            "child_scope": child.scope_id,
        }


def _workspace_fields(state: WorkspaceState) -> dict[str, object]:
    return {
        "backend": state.backend,
        "revision": state.revision,
        "state_digest": state.digest(),
    }


def _mapping(value: object) -> Mapping[str, object]:
    if not isinstance(value, Mapping):
        raise ValueError(f"expected a workspace state object, got {value!r}")
    return value


def _decode_baseline(value: Mapping[str, object] | None) -> WorkspaceState | None:
    if value is None:
        return None
    state = WorkspaceState.from_json(value)
    return state if state.present else None
