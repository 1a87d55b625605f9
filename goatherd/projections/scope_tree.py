"""The scope tree read model: scopes, their parents and lifecycle states.

It folds the scope lifecycle records (runtime-spec 2.5-2.8) the way recovery
does: a fork record on the parent's path adds the child (and the parent as a
root if unseen); merged/discarded name the child in their payload; a halt on a
scope's own path makes it discarded. A second, different terminal state for
one scope is kept as the first state plus an ``inconsistent`` reason, where
recovery would refuse the trace.

Pure: handlers write through a :class:`~goatherd.projections.RowView`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Final

from goatherd.domain.log import LogEntry
from goatherd.projections.framework import Projection, RowView, on

__all__ = [
    "SCHEMA_SCOPE_DISCARDED",
    "SCHEMA_SCOPE_FORKED",
    "SCHEMA_SCOPE_MERGED",
    "SCHEMA_SUPERVISOR_HALT",
    "ScopeNode",
    "ScopeTreeProjection",
    "ScopeTreeView",
]

SCHEMA_SCOPE_FORKED: Final = "goatherd.scope.forked.v1"
SCHEMA_SCOPE_MERGED: Final = "goatherd.scope.merged.v1"
SCHEMA_SCOPE_DISCARDED: Final = "goatherd.scope.discarded.v1"
SCHEMA_SUPERVISOR_HALT: Final = "goatherd.supervisor.halt.v1"

_ACTIVE: Final = "active"


@dataclass(frozen=True, slots=True)
class ScopeNode:
    """One scope as the trace shows it.

    Attributes:
        owner: the scope's owner path (its id is ``scope:<owner>``).
        parent_owner: the parent's owner, ``None`` for a root.
        fork_point: the fork record's id, ``None`` for a root.
        state: ``active``, ``merged`` or ``discarded``.
        isolated: whether the fork was isolated (owns its sandbox).
        sandbox_backend: the isolated child's backend ("" if none recorded).
        sandbox_path: the isolated child's recorded sandbox address.
        baseline_digest: the fork baseline's digest ("" if none).
        terminal_fact_id: the record that ended the scope.
        inconsistent: why the trace contradicts itself about this scope ("").
        first_position: the log position that introduced the scope.
    """

    owner: str
    parent_owner: str | None = None
    fork_point: str | None = None
    state: str = _ACTIVE
    isolated: bool = False
    sandbox_backend: str = ""
    sandbox_path: str = ""
    baseline_digest: str = ""
    terminal_fact_id: str | None = None
    inconsistent: str = ""
    first_position: int = -1

    @property
    def scope_id(self) -> str:
        """The scope id, ``scope:<owner>``."""
        return f"scope:{self.owner}"


ScopeTreeView = RowView[ScopeNode]


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


class ScopeTreeProjection(Projection[ScopeTreeView]):
    """Fold scope lifecycle records into :class:`ScopeNode` rows keyed by owner."""

    name = "goatherd.scope_tree"
    version = 1

    @on(SCHEMA_SCOPE_FORKED)
    def forked(self, view: ScopeTreeView, entry: LogEntry) -> None:
        """Add the child under the record's owner (the parent)."""
        payload = entry.record.payload
        child = _text(payload.get("child_owner"))
        if not child:
            return
        parent = entry.record.trace_owner_id
        if view.get(parent) is None:
            view.put(parent, ScopeNode(parent, first_position=entry.position))
        existing = view.get(child) or ScopeNode(child, first_position=entry.position)
        view.put(
            child,
            replace(
                existing,
                parent_owner=parent,
                fork_point=entry.record.record_id,
                isolated=payload.get("isolated") is True,
                sandbox_backend=_text(payload.get("sandbox_backend")),
                sandbox_path=_text(payload.get("sandbox_path")),
                baseline_digest=_text(payload.get("baseline_digest")),
            ),
        )

    @on(SCHEMA_SCOPE_MERGED)
    def merged(self, view: ScopeTreeView, entry: LogEntry) -> None:
        """End the named child as ``merged``."""
        child = _text(entry.record.payload.get("child_owner"))
        self._end(view, entry, child, "merged")

    @on(SCHEMA_SCOPE_DISCARDED)
    def discarded(self, view: ScopeTreeView, entry: LogEntry) -> None:
        """End the named child as ``discarded``."""
        child = _text(entry.record.payload.get("child_owner"))
        self._end(view, entry, child, "discarded")

    @on(SCHEMA_SUPERVISOR_HALT)
    def halted(self, view: ScopeTreeView, entry: LogEntry) -> None:
        """End the record's own scope as ``discarded`` (a halt is a discard)."""
        self._end(view, entry, entry.record.trace_owner_id, "discarded")

    @staticmethod
    def _end(view: ScopeTreeView, entry: LogEntry, owner: str, state: str) -> None:
        if not owner:
            return
        node = view.get(owner) or ScopeNode(owner, first_position=entry.position)
        if node.state == _ACTIVE:
            node = replace(node, state=state, terminal_fact_id=entry.record.record_id)
        elif node.state != state and not node.inconsistent:
            node = replace(
                node,
                inconsistent=f"owner {owner} is recorded both {node.state} and {state}",
            )
        view.put(owner, node)
