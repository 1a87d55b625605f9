"""The runtime's one fold: facts in log order -> scopes, checkpoints, outputs.

Every answer the runtime gives about scopes, checkpoints and retained outputs
is read from this fold of the trace, and every read model of them folds with
it too (:class:`RuntimeFold` over a :class:`Catalog`: an in-memory one for
the runtime, view-backed ones for the projections). So a restart, a second
process and a rebuilt view all compute the same values from the same records.

Routing follows the payload, not only the path a record sits on: a fork names
its child (and its parent, or sits on the parent's path in the seed's
layout), a merge or discard names the child, a checkpoint or output record
names its id. A decision is one record placed on several paths, so the log
holds it once per path: every handler is idempotent per record (a second
occurrence of the same record changes nothing; a *different* record that
contradicts an earlier one marks the aggregate ``inconsistent``).

A scope owns a workspace when it is a root or an isolated child; a shared
child uses its nearest owning ancestor's. Workspace records (fork baselines,
captures, restores, settlements) update the owning scope's
``workspace_digest``; claims set and finish its ``workspace_claim``.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from functools import singledispatchmethod
from typing import Protocol

from goatherd.domain.checkpoint import CheckpointAggregate, owner_of_checkpoint
from goatherd.domain.events import (
    CheckpointClaimed,
    CheckpointCreated,
    CheckpointInvalidated,
    CheckpointPruned,
    CheckpointRestored,
    OutputClaimed,
    OutputSealed,
    OutputSettled,
    PlacedEvent,
    RuntimeEvent,
    SandboxDestroyed,
    ScopeCreated,
    ScopeDiscarded,
    ScopeForked,
    ScopeHalted,
    ScopeMerged,
    ScopePruned,
    WorkspaceApplied,
    WorkspaceCaptured,
    schemas_of,
)
from goatherd.domain.retained_output import RetainedOutputAggregate
from goatherd.domain.scope import ScopeAggregate, ScopeState
from goatherd.domain.settlement import SettlementAction

__all__ = [
    "Catalog",
    "MemoryCatalog",
    "RuntimeFold",
    "runtime_fold_schemas",
    "workspace_owner_of",
]

_EFFECTS = (SettlementAction.SELECT, SettlementAction.APPLY)


class Catalog(Protocol):
    """Where a fold keeps its aggregates (read, then replaced whole)."""

    def scope(self, owner: str) -> ScopeAggregate | None:
        """Return the scope of ``owner``, if folded."""
        ...

    def checkpoint(self, checkpoint_id: str) -> CheckpointAggregate | None:
        """Return the checkpoint, if folded."""
        ...

    def output(self, output_id: str) -> RetainedOutputAggregate | None:
        """Return the output, if folded."""
        ...

    def put_scope(self, scope: ScopeAggregate) -> None:
        """Store the scope's new value."""
        ...

    def put_checkpoint(self, checkpoint: CheckpointAggregate) -> None:
        """Store the checkpoint's new value."""
        ...

    def put_output(self, output: RetainedOutputAggregate) -> None:
        """Store the output's new value."""
        ...


class MemoryCatalog:
    """A :class:`Catalog` in dictionaries (first-fold order is kept)."""

    def __init__(self) -> None:
        """Start empty."""
        self.scopes: dict[str, ScopeAggregate] = {}
        self.checkpoints: dict[str, CheckpointAggregate] = {}
        self.outputs: dict[str, RetainedOutputAggregate] = {}

    def scope(self, owner: str) -> ScopeAggregate | None:
        """Return the scope of ``owner``, if folded."""
        return self.scopes.get(owner)

    def checkpoint(self, checkpoint_id: str) -> CheckpointAggregate | None:
        """Return the checkpoint, if folded."""
        return self.checkpoints.get(checkpoint_id)

    def output(self, output_id: str) -> RetainedOutputAggregate | None:
        """Return the output, if folded."""
        return self.outputs.get(output_id)

    def put_scope(self, scope: ScopeAggregate) -> None:
        """Store the scope's new value."""
        self.scopes[scope.owner] = scope

    def put_checkpoint(self, checkpoint: CheckpointAggregate) -> None:
        """Store the checkpoint's new value."""
        self.checkpoints[checkpoint.checkpoint_id] = checkpoint

    def put_output(self, output: RetainedOutputAggregate) -> None:
        """Store the output's new value."""
        self.outputs[output.output_id] = output


def workspace_owner_of(catalog: Catalog, owner: str) -> str:
    """Return the owner of the workspace ``owner`` works in (itself or an ancestor)."""
    seen = {owner}
    current = owner
    while True:
        scope = catalog.scope(current)
        if scope is None or scope.owns_workspace or scope.parent_owner is None:
            return current
        if scope.parent_owner in seen:  # a forged cycle: stop where it closes
            return current
        current = scope.parent_owner
        seen.add(current)


class RuntimeFold:
    """Folds runtime facts, in log order, into a :class:`Catalog`."""

    def __init__(self, catalog: Catalog) -> None:
        """Fold into ``catalog``."""
        self.catalog = catalog

    def fold(self, facts: Iterable[PlacedEvent]) -> None:
        """Fold ``facts`` in order."""
        for fact in facts:
            self.apply(fact)

    def apply(self, fact: PlacedEvent) -> None:
        """Fold one fact (facts of no runtime event change nothing)."""
        # The dispatcher itself: ``self._on`` builds a bound wrapper on every
        # access (functools.singledispatchmethod), several times the cost of
        # the lookup, on every fact folded.
        _dispatch(type(fact.event))(self, fact.event, fact)

    # ------------------------------------------------------------ helpers

    def _scope(self, owner: str) -> ScopeAggregate:
        return self.catalog.scope(owner) or ScopeAggregate.bare(owner)

    def _put(self, scope: ScopeAggregate, fact: PlacedEvent) -> None:
        self.catalog.put_scope(scope.with_position(fact.position))

    def _list(self, owner: str, fact: PlacedEvent) -> None:
        if owner:
            self._put(self._scope(owner).with_listed(), fact)

    def _workspace(self, owner: str) -> ScopeAggregate:
        return self._scope(workspace_owner_of(self.catalog, owner))

    def _checkpoint(self, checkpoint_id: str) -> CheckpointAggregate:
        found = self.catalog.checkpoint(checkpoint_id)
        return found or CheckpointAggregate.bare(checkpoint_id)

    def _output(self, output_id: str) -> RetainedOutputAggregate:
        found = self.catalog.output(output_id)
        return found or RetainedOutputAggregate.bare(output_id)

    # ------------------------------------------------------------ dispatch

    @singledispatchmethod
    def _on(self, event: RuntimeEvent, fact: PlacedEvent) -> None:
        """Records that change no runtime state (agents' own, the merge gate's)."""

    @_on.register
    def _created(self, event: ScopeCreated, fact: PlacedEvent) -> None:
        owner = event.owner or fact.owner
        self._put(self._scope(owner).with_created(event), fact)

    @_on.register
    def _forked(self, event: ScopeForked, fact: PlacedEvent) -> None:
        child = event.child_owner
        here = fact.owner
        # The seed's layout: the fork sits on the parent's path only and does
        # not name the parent. A fork on the child's own path without a
        # parent names nothing usable, as recovery always read it.
        parent = event.parent_owner or (here if here != child else "")
        if not child or not parent or parent == child:
            return
        self._put(self._scope(parent).with_child(child), fact)
        genesis = self._scope(child).with_genesis(event, parent, fact.record_id)
        self._put(genesis, fact)
        if event.baseline_digest:
            ws = self._workspace(parent)
            self.catalog.put_scope(ws.with_workspace(event.baseline_digest))

    @_on.register
    def _merged(self, event: ScopeMerged, fact: PlacedEvent) -> None:
        self._end(event.child_owner, ScopeState.MERGED, fact)

    @_on.register
    def _discarded(self, event: ScopeDiscarded, fact: PlacedEvent) -> None:
        self._end(event.child_owner, ScopeState.DISCARDED, fact)

    @_on.register
    def _halted(self, event: ScopeHalted, fact: PlacedEvent) -> None:
        self._end(fact.owner, ScopeState.DISCARDED, fact)

    def _end(self, owner: str, state: ScopeState, fact: PlacedEvent) -> None:
        if owner:
            self._put(self._scope(owner).with_end(state, fact.record_id), fact)

    @_on.register
    def _pruned(self, event: ScopePruned, fact: PlacedEvent) -> None:
        self._put(self._scope(event.owner or fact.owner).with_pruned(), fact)

    @_on.register
    def _destroyed(self, event: SandboxDestroyed, fact: PlacedEvent) -> None:
        scope = self._scope(event.owner or fact.owner)
        self._put(scope.with_sandbox_destroyed(), fact)

    @_on.register
    def _captured(self, event: WorkspaceCaptured, fact: PlacedEvent) -> None:
        self._workspace_record(event.state_digest, fact)

    @_on.register
    def _applied(self, event: WorkspaceApplied, fact: PlacedEvent) -> None:
        self._workspace_record(event.state_digest, fact)

    def _workspace_record(self, digest: str, fact: PlacedEvent) -> None:
        ws = self._workspace(fact.owner)
        self.catalog.put_scope(ws.with_workspace(digest))

    # ------------------------------------------------------------ checkpoints

    def _checkpoint_scope(self, checkpoint_id: str, fact: PlacedEvent) -> str:
        owner = owner_of_checkpoint(checkpoint_id)
        if owner:
            return owner
        return fact.owner if fact.owner != checkpoint_id else ""

    @_on.register
    def _cp_created(self, event: CheckpointCreated, fact: PlacedEvent) -> None:
        cp_id = event.checkpoint_id
        scope_owner = self._checkpoint_scope(cp_id, fact)
        cp = self._checkpoint(cp_id)
        if not cp.scope_owner and scope_owner:
            cp = replace(cp, scope_owner=scope_owner)
        self.catalog.put_checkpoint(cp.with_created(event, fact.record_id, fact.intent))
        self._list(scope_owner, fact)
        if event.state_digest and scope_owner:
            ws = self._workspace(scope_owner)
            self.catalog.put_scope(ws.with_workspace(event.state_digest))

    @_on.register
    def _cp_claimed(self, event: CheckpointClaimed, fact: PlacedEvent) -> None:
        cp = self._checkpoint(event.checkpoint_id)
        first = not cp.claimed_by
        self.catalog.put_checkpoint(cp.with_claim(event))
        if first and event.workspace_owner:
            ws = self._scope(event.workspace_owner)
            self.catalog.put_scope(ws.with_workspace_claim(event.checkpoint_id))

    @_on.register
    def _cp_restored(self, event: CheckpointRestored, fact: PlacedEvent) -> None:
        cp = self._checkpoint(event.checkpoint_id)
        self.catalog.put_checkpoint(cp.with_restored(event))
        owner = cp.claim_workspace or (
            workspace_owner_of(self.catalog, cp.scope_owner) if cp.scope_owner else ""
        )
        if owner:
            ws = self._scope(owner)
            done = ws.with_workspace(event.state_digest, ends_claim=cp.checkpoint_id)
            self.catalog.put_scope(done)

    @_on.register
    def _cp_invalidated(self, event: CheckpointInvalidated, fact: PlacedEvent) -> None:
        cp = self._checkpoint(event.checkpoint_id)
        self.catalog.put_checkpoint(cp.with_invalidated(event))
        if cp.claim_workspace:
            ws = self._scope(cp.claim_workspace)
            self.catalog.put_scope(ws.without_workspace_claim(cp.checkpoint_id))

    @_on.register
    def _cp_pruned(self, event: CheckpointPruned, fact: PlacedEvent) -> None:
        cp = self._checkpoint(event.checkpoint_id)
        self.catalog.put_checkpoint(cp.with_pruned(event))

    # ------------------------------------------------------------ outputs

    @_on.register
    def _sealed(self, event: OutputSealed, fact: PlacedEvent) -> None:
        out = self._output(event.output_id)
        sealed = out.with_sealed(event, fact.record_id, fact.intent)
        self.catalog.put_output(sealed)
        self._list(sealed.scope_owner, fact)

    @_on.register
    def _out_claimed(self, event: OutputClaimed, fact: PlacedEvent) -> None:
        out = self._output(event.output_id)
        first = not out.claimed_by
        self.catalog.put_output(out.with_claim(event))
        if first and event.parent_owner:
            ws = self._workspace(event.parent_owner)
            self.catalog.put_scope(ws.with_workspace_claim(event.output_id))

    @_on.register
    def _settled(self, event: OutputSettled, fact: PlacedEvent) -> None:
        out = self._output(event.output_id)
        first = not out.settled_record
        self.catalog.put_output(out.with_settled(event, fact.record_id, fact.intent))
        if not first:
            return
        if event.action in _EFFECTS and event.parent_owner and event.result_digest:
            ws = self._workspace(event.parent_owner)
            done = ws.with_workspace(event.result_digest, ends_claim=out.output_id)
            self.catalog.put_scope(done)
        elif out.claim_parent:
            ws = self._workspace(out.claim_parent)
            self.catalog.put_scope(ws.without_workspace_claim(out.output_id))


_dispatch: Callable[
    [type], Callable[[RuntimeFold, RuntimeEvent, PlacedEvent], None]
] = RuntimeFold.__dict__["_on"].dispatcher.dispatch


def runtime_fold_schemas() -> frozenset[str]:
    """Return the schema refs :class:`RuntimeFold` folds (current and retired).

    Readers of the log that feed the fold filter on these: other runtime
    records (executions, interventions, run outcomes) change no scope,
    checkpoint or output, and need not even be decoded.
    """
    method = RuntimeFold.__dict__["_on"]  # the singledispatchmethod itself
    registry: Mapping[type, object] = method.dispatcher.registry
    handled = [cls for cls in registry if cls not in (RuntimeEvent, object)]
    return schemas_of(handled)
