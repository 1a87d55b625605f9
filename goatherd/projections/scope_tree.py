"""The scope tree read model: scopes, their parents and lifecycle states.

It shows what :func:`goatherd.application.recover_scopes` shows after a
restart, folded incrementally from the global log. The runtime places each
lifecycle record on several paths (a fork on the parent's and the child's, a
merge/discard likewise, a checkpoint on the scope's and the checkpoint's, a
sealed output on the scope's and the output's), so the log carries one entry
per path: every handler reads a record once whatever copy it sees.

- Which scopes exist (``listed``) follows recovery (runtime-spec 9): the two
  ends of every fork, the scope of every created checkpoint and of every
  sealed output. A halt alone does not make a scope: a root that never forked
  and was halted is kept with ``listed=False`` (its state is remembered for
  the day it forks), and the trace UI leaves it out.
- The parent comes from the fork: the payload's ``parent_owner``, else the
  path of the copy that is not the child's. A fork naming its own path as
  the child, without a parent, is ignored, as recovery ignores it.
- The state follows the scope's aggregate: merged/discarded name the child
  in their payload, a halt on a scope's own path discards it. A second,
  different terminal state is kept as the first state plus an
  ``inconsistent`` reason, where recovery would refuse the trace.

Recovery also drops checkpoints whose blob was deleted (a burnt restore, a
prune); blobs are not in the trace, so a scope known only through such a
checkpoint stays listed here.

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
    "listed_scopes",
]

SCHEMA_SCOPE_FORKED: Final = "goatherd.scope.forked.v1"
SCHEMA_SCOPE_MERGED: Final = "goatherd.scope.merged.v1"
SCHEMA_SCOPE_DISCARDED: Final = "goatherd.scope.discarded.v1"
SCHEMA_SUPERVISOR_HALT: Final = "goatherd.supervisor.halt.v1"
_CHECKPOINT_CREATED: Final = "goatherd.checkpoint.created.v2"
_OUTPUT_SEALED: Final = "goatherd.run_output.sealed.v1"
_SCOPE_PREFIX: Final = "scope:"

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
        first_position: the log position that introduced the owner.
        listed: whether recovery lists the scope (a fork end, or the scope of
            a checkpoint or a sealed output); ``False`` for an owner known
            only from a halt or a terminal record.
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
    listed: bool = False

    @property
    def scope_id(self) -> str:
        """The scope id, ``scope:<owner>``."""
        return f"scope:{self.owner}"


ScopeTreeView = RowView[ScopeNode]


def listed_scopes(nodes: tuple[ScopeNode, ...]) -> tuple[ScopeNode, ...]:
    """Return the nodes recovery lists (``listed``), in first-insertion order."""
    return tuple(node for node in nodes if node.listed)


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def _node(view: ScopeTreeView, owner: str, position: int) -> ScopeNode:
    return view.get(owner) or ScopeNode(owner, first_position=position)


def _list(view: ScopeTreeView, owner: str, position: int) -> None:
    node = _node(view, owner, position)
    if not node.listed:
        view.put(owner, replace(node, listed=True))


class ScopeTreeProjection(Projection[ScopeTreeView]):
    """Fold scope lifecycle records into :class:`ScopeNode` rows keyed by owner."""

    name = "goatherd.scope_tree"
    version = 2  # 2: one read per record whatever its copies; recovery's listing

    @on(SCHEMA_SCOPE_FORKED)
    def forked(self, view: ScopeTreeView, entry: LogEntry) -> None:
        """List both ends of the fork and give the child its parent."""
        record = entry.record
        payload = record.payload
        child = _text(payload.get("child_owner"))
        here = record.trace_owner_id
        parent = _text(payload.get("parent_owner")) or (here if here != child else "")
        if not child or not parent or parent == child:
            return
        _list(view, parent, entry.position)
        node = _node(view, child, entry.position)
        forked = replace(
            node,
            parent_owner=parent,
            fork_point=record.record_id,
            isolated=payload.get("isolated") is True,
            sandbox_backend=_text(payload.get("sandbox_backend")),
            sandbox_path=_text(payload.get("sandbox_path")),
            baseline_digest=_text(payload.get("baseline_digest")),
            listed=True,
        )
        if forked != node:
            view.put(child, forked)

    @on(_CHECKPOINT_CREATED)
    def checkpointed(self, view: ScopeTreeView, entry: LogEntry) -> None:
        """List the checkpointed scope (the copy not on the checkpoint's path)."""
        here = entry.record.trace_owner_id
        if here and here != _text(entry.record.payload.get("checkpoint_id")):
            _list(view, here, entry.position)

    @on(_OUTPUT_SEALED)
    def sealed(self, view: ScopeTreeView, entry: LogEntry) -> None:
        """List the scope named by a sealed output."""
        payload = entry.record.payload
        output_id = _text(payload.get("output_id"))
        owner = _text(payload.get("scope")).removeprefix(_SCOPE_PREFIX)
        if owner and output_id and entry.record.trace_owner_id != output_id:
            _list(view, owner, entry.position)

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
        node = _node(view, owner, entry.position)
        record_id = entry.record.record_id
        if node.state == _ACTIVE:
            node = replace(node, state=state, terminal_fact_id=record_id)
        elif node.state != state and not node.inconsistent:
            node = replace(
                node,
                inconsistent=f"owner {owner} is recorded both {node.state} and {state}",
            )
        else:
            return  # another copy of the ending record, or the same state again
        view.put(owner, node)
