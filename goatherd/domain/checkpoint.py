"""The checkpoint aggregate: a single-use capture of a scope's workspace.

A checkpoint (``cp:<owner>:<seq>``) is folded from its records; its stream is
its own path, and its records also sit on its scope's path. Single use is
optimistic concurrency on that path: a restore first appends
``checkpoint.claimed`` under the checkpoint's head, so of several attempts
exactly one holds the claim, and only the claimant applies the workspace.

The snapshot bytes live in the blob store, addressed by the digest the
``checkpoint.created`` record carries; the workspace state is in the record
itself (older records carry only its digest, and the state is read from the
legacy blob table and checked against it). A restore releases the snapshot
(``checkpoint.restored`` names the digest), a prune releases what is still
held: the digests stay in the trace, the bytes go.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Final

from goatherd.domain.events import (
    CheckpointClaimed,
    CheckpointCreated,
    CheckpointInvalidated,
    CheckpointPruned,
    CheckpointRestored,
)
from goatherd.domain.runtime_errors import (
    CheckpointClaimedError,
    CheckpointNotFoundError,
    CheckpointNotRestorableError,
    CheckpointScopeMismatchError,
    InconsistentTraceError,
)
from goatherd.domain.scope import ScopeAggregate, owner_in_sequenced_id, scope_id_for
from goatherd.domain.workspace import WorkspaceState

__all__ = [
    "CHECKPOINT_PREFIX",
    "CheckpointAggregate",
    "CheckpointState",
    "checkpoint_id_for",
    "owner_of_checkpoint",
    "seq_of_sequenced_id",
]

CHECKPOINT_PREFIX: Final = "cp:"


class CheckpointState(StrEnum):
    """Whether a checkpoint can still be restored."""

    VALID = "valid"
    USED = "used"
    INVALID = "invalid"


def checkpoint_id_for(owner: str, seq: int) -> str:
    """Return the checkpoint id ``cp:<owner>:<seq>``."""
    return f"{CHECKPOINT_PREFIX}{owner}:{seq}"


def owner_of_checkpoint(checkpoint_id: str) -> str:
    """Return the scope owner named by a checkpoint id (``""`` if malformed)."""
    return owner_in_sequenced_id(checkpoint_id, CHECKPOINT_PREFIX)


def seq_of_sequenced_id(identifier: str) -> int:
    """Return the ``<seq>`` of a ``<prefix><owner>:<seq>`` id (``0`` if malformed)."""
    tail = identifier.rsplit(":", 1)[-1]
    return int(tail) if tail.isdigit() else 0


@dataclass(frozen=True, slots=True)
class CheckpointAggregate:
    """A checkpoint as the trace shows it.

    Attributes:
        checkpoint_id: ``cp:<owner>:<seq>``.
        scope_owner: the owner of the scope it belongs to.
        exists: whether ``checkpoint.created`` was recorded.
        backend: the captured state's backend.
        revision: the captured state's revision (what staleness compares).
        state_digest: the captured state's digest (``""``: a v1 record).
        workspace: the captured state (``None``: recorded before states were).
        has_snapshot: whether snapshot bytes were stored.
        snapshot_digest: their digest (``None``: recorded before digests).
        state: ``valid``, ``used`` or ``invalid``.
        claimed_by: the restore attempt holding the claim (``""``: none).
        claim_workspace: the scope whose workspace that claim holds.
        invalid_reason: why it was invalidated.
        pruned: whether it was pruned (its blobs released).
        released: the blob digests its records say were released (by its
            restore or its prune).
        created_record: the ``checkpoint.created`` record id.
        created_intent: the intent that recorded it (for its commit time).
        inconsistent: why the trace contradicts itself about it.
    """

    checkpoint_id: str
    scope_owner: str = ""
    exists: bool = False
    backend: str = ""
    revision: str = ""
    state_digest: str = ""
    workspace: WorkspaceState | None = None
    has_snapshot: bool = False
    snapshot_digest: str | None = None
    state: CheckpointState = CheckpointState.VALID
    claimed_by: str = ""
    claim_workspace: str = ""
    invalid_reason: str = ""
    pruned: bool = False
    released: tuple[str, ...] = ()
    created_record: str = ""
    created_intent: str = ""
    inconsistent: str = ""

    @classmethod
    def bare(cls, checkpoint_id: str) -> CheckpointAggregate:
        """Return what an unknown checkpoint id folds to."""
        return cls(checkpoint_id, scope_owner=owner_of_checkpoint(checkpoint_id))

    @property
    def scope_id(self) -> str:
        """The id of the scope it belongs to."""
        return scope_id_for(self.scope_owner)

    @property
    def seq(self) -> int:
        """The sequence value in its id (the ordering key)."""
        return seq_of_sequenced_id(self.checkpoint_id)

    @property
    def is_valid(self) -> bool:
        """Whether it can still be restored (valid and not pruned)."""
        return self.exists and not self.pruned and self.state is CheckpointState.VALID

    # ------------------------------------------------------------- rules

    def create(
        self,
        scope: ScopeAggregate,
        state: WorkspaceState,
        *,
        snapshot_digest: str,
        has_snapshot: bool,
        workspace: ScopeAggregate | None = None,
    ) -> CheckpointCreated:
        """Decide to record this (new) checkpoint of ``scope`` at ``state``.

        ``workspace`` is the scope owning the workspace ``scope`` works in.

        Raises:
            ScopeStateError: the scope is not active, or its workspace ended.
        """
        scope.require_workspace(workspace, "cannot checkpoint scope")
        return CheckpointCreated(
            checkpoint_id=self.checkpoint_id,
            backend=state.backend,
            revision=state.revision,
            state_digest=state.digest(),
            has_snapshot=has_snapshot,
            state=state,
            snapshot_digest=snapshot_digest,
        )

    def check_restorable(
        self, scope: ScopeAggregate, workspace: ScopeAggregate | None = None
    ) -> None:
        """Check a restore of this checkpoint on ``scope`` before any effect.

        ``workspace`` is the scope owning the workspace ``scope`` works in.

        Raises:
            CheckpointNotFoundError: never created, or pruned.
            InconsistentTraceError: the trace contradicts itself about it.
            ScopeStateError: the scope is not active, or its workspace ended.
            CheckpointScopeMismatchError: the checkpoint is another scope's.
            CheckpointNotRestorableError: used, invalid, or not verifiable.
        """
        if not self.exists or self.pruned:
            raise CheckpointNotFoundError(self.checkpoint_id)
        if self.inconsistent:
            raise InconsistentTraceError(self.checkpoint_id, self.inconsistent)
        scope.require_workspace(workspace, "cannot restore in scope")
        if self.scope_owner != scope.owner:
            raise CheckpointScopeMismatchError(
                self.checkpoint_id, self.scope_id, scope.scope_id
            )
        if self.state is not CheckpointState.VALID:
            raise CheckpointNotRestorableError(self.checkpoint_id, self.state)
        if not self.state_digest or (self.has_snapshot and not self.snapshot_digest):
            raise CheckpointNotRestorableError(
                self.checkpoint_id,
                "unverifiable (recorded without the digest of its"
                f" {'snapshot' if self.state_digest else 'workspace state'})",
            )

    def check_claimable(
        self,
        scope: ScopeAggregate,
        claimant: str,
        workspace: ScopeAggregate | None = None,
    ) -> None:
        """Check ``claimant`` may apply this checkpoint to ``scope``.

        Raises:
            the errors of :meth:`check_restorable`;
            CheckpointClaimedError: another restore holds the claim.
        """
        self.check_restorable(scope, workspace)
        if self.claimed_by and self.claimed_by != claimant:
            raise CheckpointClaimedError(self.checkpoint_id, self.claimed_by)

    def claim(
        self,
        scope: ScopeAggregate,
        claimant: str,
        workspace_owner: str,
        workspace: ScopeAggregate | None = None,
    ) -> CheckpointClaimed | None:
        """Decide to claim it for ``claimant`` (``None``: the claim is ours).

        Raises:
            the errors of :meth:`check_claimable`.
        """
        self.check_claimable(scope, claimant, workspace)
        if self.claimed_by == claimant:
            return None
        return CheckpointClaimed(
            checkpoint_id=self.checkpoint_id,
            claimant=claimant,
            workspace_owner=workspace_owner,
        )

    def restore(
        self,
        scope: ScopeAggregate,
        claimant: str,
        workspace: ScopeAggregate | None = None,
    ) -> CheckpointRestored:
        """Decide to record the restore (single use) by the claimant.

        Raises:
            the errors of :meth:`check_claimable`.
        """
        self.check_claimable(scope, claimant, workspace)
        return CheckpointRestored(
            checkpoint_id=self.checkpoint_id,
            backend=self.backend,
            revision=self.revision,
            state_digest=self.state_digest,
            released=self._held() or None,
        )

    def _held(self) -> tuple[str, ...]:
        """The blob digests it still holds by its records (the snapshot's)."""
        digest = self.snapshot_digest
        return (digest,) if digest and digest not in self.released else ()

    def invalidate(self, reason: str) -> CheckpointInvalidated | None:
        """Decide to burn a valid checkpoint (``None``: not valid anyway)."""
        if not self.is_valid:
            return None
        return CheckpointInvalidated(checkpoint_id=self.checkpoint_id, reason=reason)

    def prune(self) -> CheckpointPruned | None:
        """Decide to prune it, releasing its blobs (``None``: gone already)."""
        if not self.exists or self.pruned:
            return None
        return CheckpointPruned(checkpoint_id=self.checkpoint_id, released=self._held())

    # ------------------------------------------------------------- evolve

    def with_created(
        self, event: CheckpointCreated, record_id: str, intent: str
    ) -> CheckpointAggregate:
        """Fold ``checkpoint.created`` (a second, different one contradicts)."""
        if self.exists:
            if self.created_record == record_id:
                return self
            return self._contradicted(
                f"checkpoint {self.checkpoint_id} is created twice"
            )
        return replace(
            self,
            exists=True,
            backend=event.backend,
            revision=event.revision,
            state_digest=event.state_digest,
            workspace=event.state,
            has_snapshot=event.has_snapshot,
            snapshot_digest=event.snapshot_digest,
            created_record=record_id,
            created_intent=intent,
        )

    def with_claim(self, event: CheckpointClaimed) -> CheckpointAggregate:
        """Fold ``checkpoint.claimed`` (the first claim holds)."""
        if self.claimed_by:
            return self
        return replace(
            self,
            claimed_by=event.claimant,
            claim_workspace=event.workspace_owner or "",
        )

    def with_restored(self, event: CheckpointRestored) -> CheckpointAggregate:
        """Fold ``checkpoint.restored`` (and the digests it released)."""
        if self.state is CheckpointState.INVALID:
            return self._contradicted(
                f"checkpoint {self.checkpoint_id} is restored after it was burnt"
            )
        return replace(
            self,
            state=CheckpointState.USED,
            released=self._with_released(event.released or ()),
        )

    def with_invalidated(self, event: CheckpointInvalidated) -> CheckpointAggregate:
        """Fold ``checkpoint.invalidated`` (a used checkpoint stays used)."""
        if self.state is not CheckpointState.VALID:
            return self
        return replace(self, state=CheckpointState.INVALID, invalid_reason=event.reason)

    def with_pruned(self, event: CheckpointPruned) -> CheckpointAggregate:
        """Fold ``checkpoint.pruned`` (and the digests it released)."""
        return replace(self, pruned=True, released=self._with_released(event.released))

    def _with_released(self, digests: tuple[str, ...]) -> tuple[str, ...]:
        return self.released + tuple(d for d in digests if d not in self.released)

    def _contradicted(self, reason: str) -> CheckpointAggregate:
        return self if self.inconsistent else replace(self, inconsistent=reason)
