"""The scope aggregate: one branch of agent work, folded from the trace.

A scope is identified by its owner path (its id is ``scope:<owner>``). Its
state is an immutable value: :mod:`goatherd.domain.runtime_state` folds the
runtime's events into it (``with_*`` methods return the next value), and the
decision methods check a rule and return the event to record, never
changing the value themselves (decide, then evolve). A scope that no record
names is not a scope: :meth:`ScopeAggregate.bare` is what an unknown owner
folds to.

A scope also tracks the workspace it owns (a root, or an isolated child):
``workspace_digest`` is the digest of the last state the trace recorded for
it (a fork baseline, a capture, a restore, a settlement that landed) and
``workspace_claim`` names the checkpoint or output whose claimed workspace
effect has not been recorded as finished. Shared children use their
ancestor's workspace.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Final

from goatherd.domain.events import (
    GuidanceInjected,
    ScopeCreated,
    ScopeDiscarded,
    ScopeForked,
    ScopeHalted,
    ScopeMerged,
    ScopePruned,
)
from goatherd.domain.runtime_errors import (
    InconsistentTraceError,
    NotAChildError,
    ScopeExistsError,
    ScopeStateError,
)
from goatherd.domain.workspace import WorkspaceState

__all__ = [
    "SCOPE_PREFIX",
    "ScopeAggregate",
    "ScopeState",
    "owner_in_sequenced_id",
    "owner_of_scope",
    "scope_id_for",
]

SCOPE_PREFIX: Final = "scope:"


class ScopeState(StrEnum):
    """A scope's lifecycle state (a halt ends a scope as ``discarded``)."""

    ACTIVE = "active"
    MERGED = "merged"
    DISCARDED = "discarded"


def scope_id_for(owner: str) -> str:
    """Return the scope id of an owner path (``scope:<owner>``)."""
    return SCOPE_PREFIX + owner


def owner_of_scope(scope_id: str) -> str:
    """Return the owner path of a scope id (the id minus ``scope:``)."""
    return scope_id.removeprefix(SCOPE_PREFIX)


def owner_in_sequenced_id(identifier: str, prefix: str) -> str:
    """Return ``<owner>`` of an id ``<prefix><owner>:<seq>`` (``""`` if malformed).

    Checkpoint (``cp:``) and output (``out:``) ids name their scope's owner this way.
    """
    if not identifier.startswith(prefix) or ":" not in identifier[len(prefix) :]:
        return ""
    return identifier[len(prefix) :].rsplit(":", 1)[0]


@dataclass(frozen=True, slots=True)
class ScopeAggregate:
    """A scope as the trace shows it.

    Attributes:
        owner: the owner path.
        listed: whether the runtime knows it as a scope (created, a fork end,
            or the scope of a checkpoint or sealed output).
        created: whether a ``scope.created`` record started it (a root).
        parent_owner: the parent's owner (``None`` for a root).
        fork_point: the fork record's id (``""`` for a root).
        baseline: the parent's state at the fork (``None`` if none).
        isolated: forked with its own sandbox.
        sandbox_backend: the recorded sandbox backend (``""``: none recorded).
        sandbox_path: the recorded sandbox address (``""``: none).
        children: the owners forked from it, in fork order.
        state: the lifecycle state.
        terminal_record: the record that ended it (``""`` while active).
        inconsistent: why the trace contradicts itself about it (``""``).
        pruned: hidden from listings by ``prune_terminal``.
        sandbox_destroyed: its owned sandbox was torn down.
        workspace_digest: the last recorded digest of the workspace it owns.
        workspace_claim: the checkpoint/output whose claimed effect on that
            workspace is unfinished (``""``: none).
        first_position: the log position that introduced it (``-1``: none).
    """

    owner: str
    listed: bool = False
    created: bool = False
    parent_owner: str | None = None
    fork_point: str = ""
    baseline: WorkspaceState | None = None
    isolated: bool = False
    sandbox_backend: str = ""
    sandbox_path: str = ""
    children: tuple[str, ...] = ()
    state: ScopeState = ScopeState.ACTIVE
    terminal_record: str = ""
    inconsistent: str = ""
    pruned: bool = False
    sandbox_destroyed: bool = False
    workspace_digest: str = ""
    workspace_claim: str = ""
    first_position: int = -1

    @classmethod
    def bare(cls, owner: str) -> ScopeAggregate:
        """Return what an owner no runtime record names folds to."""
        return cls(owner)

    @property
    def scope_id(self) -> str:
        """The scope id (``scope:<owner>``)."""
        return scope_id_for(self.owner)

    @property
    def is_active(self) -> bool:
        """Whether the scope is active."""
        return self.state is ScopeState.ACTIVE

    @property
    def owns_workspace(self) -> bool:
        """Whether the scope has a workspace of its own (a root or isolated)."""
        return self.parent_owner is None or self.isolated

    # ------------------------------------------------------------- rules

    def require_active(self, message: str) -> None:
        """Raise :class:`ScopeStateError` with ``message`` unless active.

        Raises:
            InconsistentTraceError: the trace contradicts itself about it.
            ScopeStateError: the scope is merged or discarded.
        """
        self.require_consistent()
        if not self.is_active:
            raise ScopeStateError(
                f"{message} {self.scope_id} in state {self.state}",
                self.scope_id,
                self.state,
            )

    def require_consistent(self) -> None:
        """Raise :class:`InconsistentTraceError` if the trace contradicts itself."""
        if self.inconsistent:
            raise InconsistentTraceError(self.scope_id, self.inconsistent)

    def create(
        self, *, sandbox_backend: str = "", sandbox_path: str = ""
    ) -> ScopeCreated:
        """Decide to create this owner as a root scope.

        A root may start on a path that already holds other records (an
        agent's own facts); it may not start on an owner the runtime knows.

        Raises:
            ScopeExistsError: the owner is a scope already.
        """
        if self.listed or self.state is not ScopeState.ACTIVE:
            raise ScopeExistsError(self.scope_id)
        return ScopeCreated(
            owner=self.owner,
            sandbox_backend=sandbox_backend or None,
            sandbox_path=sandbox_path or None,
        )

    def fork(
        self,
        child: ScopeAggregate,
        *,
        child_head: int,
        baseline: WorkspaceState | None,
        isolated: bool = False,
        sandbox_backend: str = "",
        sandbox_path: str = "",
        workspace: ScopeAggregate | None = None,
    ) -> ScopeForked:
        """Decide to fork ``child`` (a fresh owner) from this scope.

        ``workspace`` is the scope whose workspace this one works in (an
        isolated ancestor or the root; ``None`` or this scope when its own).
        A shared scope whose isolated ancestor ended has no workspace left to
        share: its sandbox went with that ancestor.

        Raises:
            ScopeStateError: this scope is not active, or the scope whose
                workspace it works in has ended.
            ScopeExistsError: the child is a scope, or its path holds records.
        """
        self.require_workspace(workspace, "cannot fork scope")
        if child.listed or child_head > 0 or child.owner == self.owner:
            raise ScopeExistsError(child.scope_id)
        present = baseline is not None and baseline.present
        return ScopeForked(
            child_owner=child.owner,
            parent_owner=self.owner,
            isolated=True if isolated else None,
            sandbox_backend=sandbox_backend if isolated and sandbox_backend else None,
            sandbox_path=sandbox_path if isolated and sandbox_path else None,
            baseline_digest=baseline.digest() if present and baseline else None,
            baseline=baseline if present else None,
        )

    def require_workspace(self, workspace: ScopeAggregate | None, message: str) -> None:
        """Raise :class:`ScopeStateError` unless active with its workspace standing.

        ``workspace`` is the scope whose workspace this one works in (itself,
        or for a shared scope the nearest ancestor owning one). A shared scope
        whose workspace owner ended (merged, discarded, halted) or whose
        sandbox was destroyed has no workspace to fork, checkpoint, seal or
        restore in, though it stays active in the trace.

        Raises:
            InconsistentTraceError: the trace contradicts itself about it.
            ScopeStateError: the scope is not active, or its workspace ended.
        """
        self.require_active(message)
        if self._workspace_ended(workspace):
            assert workspace is not None
            ended = (
                f"which is {workspace.state}"
                if not workspace.is_active
                else "whose sandbox was destroyed"
            )
            raise ScopeStateError(
                f"{message} {self.scope_id}: it works in the workspace "
                f"of {workspace.scope_id}, {ended}",
                self.scope_id,
                self.state,
            )

    def _workspace_ended(self, workspace: ScopeAggregate | None) -> bool:
        if workspace is None or workspace.owner == self.owner:
            return False
        return not workspace.is_active or workspace.sandbox_destroyed

    def merge(self, child: ScopeAggregate) -> ScopeMerged:
        """Decide to merge ``child`` (causal only).

        Raises:
            ScopeStateError: this scope or the child is not active.
            NotAChildError: ``child`` is not this scope's child.
        """
        self._check_child(child, "merge")
        return ScopeMerged(
            caused_by=child._fork_cause(),
            child_owner=child.owner,
            child_scope=child.scope_id,
        )

    def discard(self, child: ScopeAggregate) -> ScopeDiscarded:
        """Decide to discard ``child``; its records remain.

        Raises:
            ScopeStateError: this scope or the child is not active.
            NotAChildError: ``child`` is not this scope's child.
        """
        self._check_child(child, "discard")
        return ScopeDiscarded(
            caused_by=child._fork_cause(),
            child_owner=child.owner,
            child_scope=child.scope_id,
        )

    def halt(self) -> ScopeHalted | None:
        """Decide to halt; ``None`` when already discarded (idempotent).

        Raises:
            ScopeStateError: the scope is merged (a halt would contradict it).
        """
        self.require_consistent()
        if self.state is ScopeState.DISCARDED:
            return None
        self.require_active("cannot halt scope")
        return ScopeHalted()

    def inject(self, guidance: str) -> GuidanceInjected:
        """Decide to record guidance for the scope's next turn.

        Raises:
            ScopeStateError: the scope is not active.
        """
        self.require_active("cannot inject into scope")
        return GuidanceInjected(guidance=guidance)

    def prune(self) -> ScopePruned | None:
        """Decide to prune a terminal scope (``None``: active or pruned already)."""
        if self.is_active or self.pruned:
            return None
        return ScopePruned(owner=self.owner)

    def _check_child(self, child: ScopeAggregate, verb: str) -> None:
        preposition = "into" if verb == "merge" else "from"
        self.require_active(f"cannot {verb} {preposition} scope")
        child.require_active(f"cannot {verb} scope")
        if child.parent_owner != self.owner:
            raise NotAChildError(child.scope_id, self.scope_id)

    def _fork_cause(self) -> tuple[str, ...]:
        return (self.fork_point,) if self.fork_point else ()

    # ------------------------------------------------------------- evolve

    def with_position(self, position: int) -> ScopeAggregate:
        """Return the value with ``first_position`` set once."""
        if self.first_position >= 0 or position < 0:
            return self
        return replace(self, first_position=position)

    def with_listed(self) -> ScopeAggregate:
        """Return the value known as a scope."""
        return self if self.listed else replace(self, listed=True)

    def with_created(self, event: ScopeCreated) -> ScopeAggregate:
        """Fold ``scope.created``."""
        return replace(
            self,
            listed=True,
            created=True,
            sandbox_backend=self.sandbox_backend or (event.sandbox_backend or ""),
            sandbox_path=self.sandbox_path or (event.sandbox_path or ""),
        )

    def with_child(self, child_owner: str) -> ScopeAggregate:
        """Fold a fork of ``child_owner`` from this scope."""
        if child_owner in self.children:
            return self.with_listed()
        return replace(self, listed=True, children=(*self.children, child_owner))

    def with_genesis(
        self, event: ScopeForked, parent_owner: str, record_id: str
    ) -> ScopeAggregate:
        """Fold the fork that made this scope ``parent_owner``'s child."""
        if self.fork_point and self.fork_point != record_id:
            return self._contradicted(
                f"owner {self.owner} is forked twice"
                f" ({self.fork_point} and {record_id})"
            )
        baseline = event.baseline if event.baseline and event.baseline.present else None
        return replace(
            self,
            listed=True,
            parent_owner=parent_owner,
            fork_point=record_id,
            isolated=bool(event.isolated),
            sandbox_backend=event.sandbox_backend or "",
            sandbox_path=event.sandbox_path or "",
            baseline=baseline,
        )

    def with_end(self, state: ScopeState, record_id: str) -> ScopeAggregate:
        """Fold a merge, discard or halt (a second, different end contradicts)."""
        if self.state is ScopeState.ACTIVE:
            return replace(self, state=state, terminal_record=record_id)
        if self.state is not state:
            return self._contradicted(
                f"owner {self.owner} is recorded both {self.state} and {state}"
            )
        return self

    def with_pruned(self) -> ScopeAggregate:
        """Fold ``scope.pruned``."""
        return replace(self, pruned=True)

    def with_sandbox_destroyed(self) -> ScopeAggregate:
        """Fold ``scope.sandbox_destroyed``."""
        return replace(self, sandbox_destroyed=True)

    def with_workspace(self, digest: str, *, ends_claim: str = "") -> ScopeAggregate:
        """Fold a recorded state of the owned workspace (``""``: unknown).

        ``ends_claim`` names a claim the record finishes.
        """
        claim = self.workspace_claim
        if ends_claim and claim == ends_claim:
            claim = ""
        return replace(self, workspace_digest=digest, workspace_claim=claim)

    def with_workspace_claim(self, holder: str) -> ScopeAggregate:
        """Fold a claim of the owned workspace by ``holder``."""
        return replace(self, workspace_claim=holder)

    def without_workspace_claim(self, holder: str) -> ScopeAggregate:
        """Fold the end of ``holder``'s claim without a recorded result."""
        if self.workspace_claim != holder:
            return self
        return replace(self, workspace_claim="", workspace_digest="")

    def _contradicted(self, reason: str) -> ScopeAggregate:
        return self if self.inconsistent else replace(self, inconsistent=reason)
