"""Scope events: lifecycle, supervision, workspace records and the merge gate.

Placement (which paths a record sits on) is the application's; the classes
say what each record means:

- ``scope.created`` starts a root on its own path (a root used to leave no
  record; now every process sees it).
- ``scope.forked`` is one record on the parent's path and the child's. The
  seed placed it on the parent's path only, without ``parent_owner``: such a
  record is read with the parent taken from the path it sits on.
- ``scope.merged`` and ``scope.discarded`` name the child; they sit on the
  parent's path and the child's (the seed: the parent's only).
- ``supervisor.halt`` (own path) ends a scope as ``discarded``.
- ``scope.pruned`` (own path) hides a terminal scope from scope listings
  (``prune_terminal``); ``scope.sandbox_destroyed`` records that an owned
  sandbox was torn down.
- ``workspace.captured`` / ``workspace.applied`` record a workspace state
  digest on the path of the scope that captured or applied it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from goatherd.domain.events.base import (
    RuntimeEvent,
    count_contradiction,
    register_event,
    state_contradiction,
)
from goatherd.domain.records import RecordMode
from goatherd.domain.workspace import WorkspaceState

__all__ = [
    "GuidanceInjected",
    "MergeProposed",
    "SandboxDestroyed",
    "ScopeCreated",
    "ScopeDiscarded",
    "ScopeForked",
    "ScopeHalted",
    "ScopeMerged",
    "ScopePruned",
    "SupervisorDecided",
    "WorkspaceApplied",
    "WorkspaceCaptured",
]

_DECL: Final = RecordMode.DECLARATION
_CAPT: Final = RecordMode.CAPTURE


@register_event
@dataclass(frozen=True, kw_only=True)
class ScopeCreated(RuntimeEvent):
    """A root scope was created (own path).

    Attributes:
        owner: the root's owner path.
        sandbox_backend: the backend of the sandbox it was created with.
        sandbox_path: the sandbox's absolute address, when it has one.
    """

    SCHEMA = "goatherd.scope.created.v1"
    MODE = _DECL
    KIND_LABEL = "scope:created"

    owner: str
    sandbox_backend: str | None = None
    sandbox_path: str | None = None


@register_event
@dataclass(frozen=True, kw_only=True)
class ScopeForked(RuntimeEvent):
    """A child scope was forked (parent's path + the child's genesis).

    The runtime records it citing the record at the head of the parent's
    path (the seed's cites nothing; ADR 0087); its id is the child's fork
    point either way.

    Attributes:
        child_owner: the child's owner path.
        parent_owner: the parent's owner path (absent in the seed's layout).
        isolated: ``True`` for a child with its own sandbox.
        sandbox_backend: the isolated child's backend.
        sandbox_path: the isolated child's absolute sandbox address.
        baseline_digest: the digest of the parent's state at the fork.
        baseline: that state (what the child's changes are measured against).
    """

    SCHEMA = "goatherd.scope.forked.v1"
    MODE = _DECL
    KIND_LABEL = "scope:forked"

    child_owner: str
    parent_owner: str | None = None
    isolated: bool | None = None
    sandbox_backend: str | None = None
    sandbox_path: str | None = None
    baseline_digest: str | None = None
    baseline: WorkspaceState | None = None

    def contradiction(self) -> str | None:
        """Refuse a baseline digest its baseline disagrees with."""
        return state_contradiction(
            "baseline", self.baseline, self.baseline_digest or ""
        )


@register_event
@dataclass(frozen=True, kw_only=True)
class ScopeMerged(RuntimeEvent):
    """A child was merged into its parent (causal only)."""

    SCHEMA = "goatherd.scope.merged.v1"
    MODE = _CAPT
    KIND_LABEL = "scope:merged"

    child_owner: str
    child_scope: str


@register_event
@dataclass(frozen=True, kw_only=True)
class ScopeDiscarded(RuntimeEvent):
    """A child was discarded by its parent; its records remain."""

    SCHEMA = "goatherd.scope.discarded.v1"
    MODE = _CAPT
    KIND_LABEL = "scope:discarded"

    child_owner: str
    child_scope: str


@register_event
@dataclass(frozen=True, kw_only=True)
class ScopeHalted(RuntimeEvent):
    """The supervisor halted the scope (own path; it ends ``discarded``)."""

    SCHEMA = "goatherd.supervisor.halt.v1"
    MODE = _DECL
    KIND_LABEL = "supervisor:halt"


@register_event
@dataclass(frozen=True, kw_only=True)
class GuidanceInjected(RuntimeEvent):
    """Guidance for the scope's next turn (own path)."""

    SCHEMA = "goatherd.supervisor.inject.v1"
    MODE = _DECL
    KIND_LABEL = "supervisor:inject"

    guidance: str


@register_event
@dataclass(frozen=True, kw_only=True)
class ScopePruned(RuntimeEvent):
    """A terminal scope was pruned from scope listings (own path)."""

    SCHEMA = "goatherd.scope.pruned.v1"
    MODE = _CAPT
    KIND_LABEL = "scope:pruned"

    owner: str


@register_event
@dataclass(frozen=True, kw_only=True)
class SandboxDestroyed(RuntimeEvent):
    """A scope's owned sandbox was torn down (own path).

    Attributes:
        owner: the scope.
        backend: the sandbox's backend.
        sandbox_path: its address, when it had one.
    """

    SCHEMA = "goatherd.scope.sandbox_destroyed.v1"
    MODE = _CAPT
    KIND_LABEL = "scope:sandbox_destroyed"

    owner: str
    backend: str
    sandbox_path: str | None = None


@register_event
@dataclass(frozen=True, kw_only=True)
class WorkspaceCaptured(RuntimeEvent):
    """A workspace capture (own path)."""

    SCHEMA = "goatherd.workspace.captured.v1"
    MODE = _DECL
    KIND_LABEL = "workspace:captured"

    backend: str
    revision: str
    state_digest: str


@register_event
@dataclass(frozen=True, kw_only=True)
class WorkspaceApplied(RuntimeEvent):
    """A workspace apply (own path)."""

    SCHEMA = "goatherd.workspace.applied.v1"
    MODE = _CAPT
    KIND_LABEL = "workspace:applied"

    backend: str
    revision: str
    state_digest: str


@register_event
@dataclass(frozen=True, kw_only=True)
class MergeProposed(RuntimeEvent):
    """A child's merge proposal (child's path, caused by its fork point)."""

    SCHEMA = "goatherd.merge.proposed.v1"
    MODE = _CAPT
    KIND_LABEL = "merge:proposed"

    child_scope: str
    baseline_digest: str
    change_count: int
    changes: tuple[Mapping[str, str], ...]
    diff_digest: str

    def contradiction(self) -> str | None:
        """Refuse a change count its change list disagrees with."""
        return count_contradiction(self.change_count, self.changes)


@register_event
@dataclass(frozen=True, kw_only=True)
class SupervisorDecided(RuntimeEvent):
    """A review verdict on a proposal (parent's path, caused by the proposal)."""

    SCHEMA = "goatherd.supervisor.decision.v1"
    MODE = _CAPT
    KIND_LABEL = "supervisor:decision"

    approved: bool
    child_scope: str
    reason: str | None = None
    action: str | None = None
