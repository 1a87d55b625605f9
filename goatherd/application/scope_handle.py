"""The :class:`Scope` handle, the registry entries and the ``Result`` wrapper.

A handle holds no lifecycle state: every property reads the scope's
aggregate from the trace (through its manager), so two managers over one
trace see the same state. What a handle does own is process state the trace
cannot hold: the sandbox object and the caller's opaque fork snapshot.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol, TypeVar

from returns.result import Failure, Result, Success

from goatherd.application.errors import SandboxError
from goatherd.application.ports import Sandbox
from goatherd.application.runtime import RuntimeFailure
from goatherd.domain import (
    RuntimeRuleError,
    ScopeAggregate,
    ScopeState,
    TraceStoreError,
    WorkspaceState,
    scope_id_for,
)

__all__ = ["Scope", "ScopeHost", "attempt"]

T = TypeVar("T")
_EXPECTED = (RuntimeRuleError, SandboxError, TraceStoreError)


def attempt(fn: Callable[[], T]) -> Result[T, RuntimeFailure]:
    """Run ``fn``; expected failures become ``Failure`` values, bugs raise."""
    try:
        return Success(fn())
    except _EXPECTED as error:
        return Failure(error)


@dataclass(slots=True)
class ScopeEntry:
    """What a manager holds beside a scope's aggregate (process state)."""

    sandbox: Sandbox | None = None
    owns_sandbox: bool = False
    snapshot: object = None


@dataclass(slots=True)
class CheckpointEntry:
    """A checkpoint's restorable halves (from the blob table) in the registry."""

    seq: int
    workspace: WorkspaceState
    snapshot: bytes
    created_at: datetime
    invalid: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)


class ScopeHost(Protocol):
    """What a :class:`Scope` handle needs from its manager (the scope manager)."""

    def _aggregate(self, owner: str) -> ScopeAggregate: ...

    def _entry(self, owner: str) -> ScopeEntry: ...

    def _merge_or_discard(
        self, parent_owner: str, child_owner: str, verb: str, seq: int | None = None
    ) -> Result[None, RuntimeFailure]: ...

    def halt(
        self, scope_id: str, *, seq: int | None = None
    ) -> Result[None, RuntimeFailure]:
        """Halt the scope."""
        ...

    def inject(
        self, scope_id: str, guidance: str, *, seq: int | None = None
    ) -> Result[str, RuntimeFailure]:
        """Record guidance for the scope."""
        ...

    def append_fact(
        self,
        scope_id: str,
        schema_ref: str,
        kind_label: str,
        payload: Mapping[str, object],
        *,
        seq: int | None = None,
    ) -> Result[str, RuntimeFailure]:
        """Append a capture on the scope's path."""
        ...

    def capture_workspace(
        self, scope_id: str
    ) -> Result[WorkspaceState, RuntimeFailure]:
        """Capture the scope's workspace."""
        ...

    def apply_workspace(
        self, scope_id: str, state: WorkspaceState
    ) -> Result[None, RuntimeFailure]:
        """Reset the scope's workspace."""
        ...

    def diff_workspace(
        self, scope_id: str, state: WorkspaceState, max_lines: int = 0
    ) -> Result[tuple[str, list[str]], RuntimeFailure]:
        """Diff the scope's workspace."""
        ...


class Scope:
    """A handle on one scope: its sandbox here, its state in the trace."""

    def __init__(self, manager: ScopeHost, owner: str) -> None:
        """Bind the handle to ``manager`` (use the manager's commands to get one)."""
        self._manager = manager
        self._owner = owner

    def __repr__(self) -> str:
        """Show the id and state."""
        return f"Scope({self.id!r}, state={self.state.value!r})"

    def __eq__(self, other: object) -> bool:
        """Handles on the same owner are equal."""
        return isinstance(other, Scope) and other._owner == self._owner

    def __hash__(self) -> int:
        """Hash by owner."""
        return hash(self._owner)

    @property
    def id(self) -> str:
        """The scope id (``scope:<owner>``)."""
        return scope_id_for(self._owner)

    @property
    def owner_id(self) -> str:
        """The trace owner path the scope writes to."""
        return self._owner

    @property
    def state(self) -> ScopeState:
        """The lifecycle state (from the aggregate)."""
        return self._manager._aggregate(self._owner).state

    @property
    def fork_point(self) -> str:
        """The fork record's id (``""`` for a root)."""
        return self._manager._aggregate(self._owner).fork_point

    @property
    def parent(self) -> Scope | None:
        """The parent scope (``None`` for a root)."""
        parent = self._manager._aggregate(self._owner).parent_owner
        return None if parent is None else Scope(self._manager, parent)

    @property
    def children(self) -> list[Scope]:
        """The forked children, in fork order."""
        agg = self._manager._aggregate(self._owner)
        return [Scope(self._manager, owner) for owner in agg.children]

    @property
    def sandbox(self) -> Sandbox | None:
        """The scope's sandbox (``None``: pure-causal)."""
        return self._manager._entry(self._owner).sandbox

    @property
    def owns_sandbox(self) -> bool:
        """Whether merge/discard/halt destroy the sandbox."""
        return self._manager._entry(self._owner).owns_sandbox

    @property
    def snapshot(self) -> object:
        """The opaque value given at fork (never persisted)."""
        return self._manager._entry(self._owner).snapshot

    def baseline(self) -> WorkspaceState | None:
        """The parent's state captured at fork (``None`` if none)."""
        return self._manager._aggregate(self._owner).baseline

    def merge(self, child: Scope) -> Result[None, RuntimeFailure]:
        """Merge ``child`` into this scope (causal only)."""
        return self._manager._merge_or_discard(self._owner, child.owner_id, "merge")

    def discard(self, child: Scope) -> Result[None, RuntimeFailure]:
        """Discard ``child``; its records remain, semantically abandoned."""
        return self._manager._merge_or_discard(self._owner, child.owner_id, "discard")

    def halt(self, *, seq: int | None = None) -> Result[None, RuntimeFailure]:
        """Halt the scope (supervisor): it becomes ``discarded``."""
        return self._manager.halt(self.id, seq=seq)

    def inject(
        self, guidance: str, *, seq: int | None = None
    ) -> Result[str, RuntimeFailure]:
        """Record guidance for the scope's next turn; returns the record id."""
        return self._manager.inject(self.id, guidance, seq=seq)

    def append_fact(
        self,
        schema_ref: str,
        kind_label: str,
        payload: Mapping[str, object],
        *,
        seq: int | None = None,
    ) -> Result[str, RuntimeFailure]:
        """Append one free-form capture on the scope's path; returns its record id."""
        return self._manager.append_fact(
            self.id, schema_ref, kind_label, payload, seq=seq
        )

    def capture_workspace(self) -> Result[WorkspaceState, RuntimeFailure]:
        """Capture the workspace (reusable state); the record is advisory."""
        return self._manager.capture_workspace(self.id)

    def apply_workspace(self, state: WorkspaceState) -> Result[None, RuntimeFailure]:
        """Reset the workspace to ``state`` (not consumed); the record is advisory."""
        return self._manager.apply_workspace(self.id, state)

    def diff_workspace(
        self, state: WorkspaceState, max_lines: int = 0
    ) -> Result[tuple[str, list[str]], RuntimeFailure]:
        """Diff the workspace against ``state`` (records nothing)."""
        return self._manager.diff_workspace(self.id, state, max_lines)
