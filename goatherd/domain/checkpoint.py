"""The checkpoint aggregate: a single-use capture of a scope's workspace.

A checkpoint's stream is its own owner path, the checkpoint id
``cp:<owner>:<seq>``. ``goatherd.checkpoint.created.v2`` is placed on the
scope's path (the seed's placement) and on the checkpoint's path (its
genesis); ``goatherd.checkpoint.restored.v2`` likewise, so a second restore
meets an occupied ordinal on the checkpoint's path: single use is optimistic
concurrency. The workspace state and the caller's snapshot live in the blob
table, not here; ``invalid`` (a burnt or stale checkpoint) is decided by the
application from the blob table and the live workspace.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final

from goatherd.domain.records import RecordMode
from goatherd.domain.runtime_errors import (
    CheckpointClaimedError,
    CheckpointNotRestorableError,
    CheckpointScopeMismatchError,
)
from goatherd.domain.scope import (
    ScopeAggregate,
    owner_in_sequenced_id,
    scope_id_for,
)
from goatherd.domain.trace_aggregate import (
    TraceAggregate,
    TraceEvent,
    register_trace_event,
)
from goatherd.domain.workspace import WorkspaceState

__all__ = [
    "CheckpointAggregate",
    "CheckpointClaimed",
    "CheckpointCreated",
    "CheckpointRestored",
    "CheckpointState",
    "SCHEMA_CHECKPOINT_CLAIMED",
    "SCHEMA_CHECKPOINT_CREATED",
    "SCHEMA_CHECKPOINT_RESTORED",
    "checkpoint_id_for",
    "owner_of_checkpoint",
]

SCHEMA_CHECKPOINT_CREATED: Final = "goatherd.checkpoint.created.v2"
SCHEMA_CHECKPOINT_RESTORED: Final = "goatherd.checkpoint.restored.v2"
SCHEMA_CHECKPOINT_CLAIMED: Final = "goatherd.checkpoint.claimed.v1"


class CheckpointState(StrEnum):
    """Whether a checkpoint can still be restored."""

    VALID = "valid"
    USED = "used"
    INVALID = "invalid"


def checkpoint_id_for(owner: str, seq: int) -> str:
    """Return the checkpoint id ``cp:<owner>:<seq>``."""
    return f"cp:{owner}:{seq}"


def owner_of_checkpoint(checkpoint_id: str) -> str:
    """Return the scope owner named by a checkpoint id (``""`` if malformed)."""
    return owner_in_sequenced_id(checkpoint_id, "cp:")


@register_trace_event
class CheckpointCreated(TraceEvent):
    """A checkpoint was taken (scope path + the checkpoint's genesis)."""

    TOPIC = SCHEMA_CHECKPOINT_CREATED
    MODE = RecordMode.DECLARATION
    KIND_LABEL = "checkpoint:created"
    SHARED = True

    checkpoint_id: str
    backend: str
    revision: str
    state_digest: str
    has_snapshot: bool


@register_trace_event
class CheckpointRestored(TraceEvent):
    """A checkpoint was restored and used up (scope path + checkpoint path)."""

    TOPIC = SCHEMA_CHECKPOINT_RESTORED
    MODE = RecordMode.CAPTURE
    KIND_LABEL = "checkpoint:restored"
    SHARED = True

    checkpoint_id: str
    backend: str
    revision: str
    state_digest: str


@register_trace_event
class CheckpointClaimed(TraceEvent):
    """A restore claimed the checkpoint before applying it (checkpoint path only).

    Attributes:
        checkpoint_id: the checkpoint.
        claimant: the restoring attempt's token (its sequence value).
    """

    TOPIC = SCHEMA_CHECKPOINT_CLAIMED
    MODE = RecordMode.DECLARATION
    KIND_LABEL = "checkpoint:claimed"

    checkpoint_id: str
    claimant: str


class CheckpointAggregate(TraceAggregate):
    """A checkpoint folded from its own path.

    Attributes:
        scope_owner: the owner of the scope it belongs to.
        backend: the captured state's backend.
        revision: the captured state's revision (what staleness compares).
        state_digest: the captured state's digest.
        has_snapshot: whether a caller snapshot was stored.
        state: ``valid`` until restored, then ``used``.
        claimed_by: the restore attempt holding the claim (``""``: none).
    """

    def init_state(self) -> None:
        """Start as an unknown checkpoint."""
        self.scope_owner = owner_of_checkpoint(self.id)
        self.backend = ""
        self.revision = ""
        self.state_digest = ""
        self.has_snapshot = False
        self.state = CheckpointState.VALID
        self.claimed_by = ""

    @classmethod
    def decode_snapshot_field(cls, name: str, value: object) -> object:
        """Decode the state of a snapshot."""
        return CheckpointState(str(value)) if name == "state" else value

    @property
    def exists(self) -> bool:
        """Whether the checkpoint was created (its path holds its genesis)."""
        return self.version >= 0

    @property
    def scope_id(self) -> str:
        """The id of the scope it belongs to."""
        return scope_id_for(self.scope_owner)

    def create(
        self, scope: ScopeAggregate, state: WorkspaceState, *, has_snapshot: bool
    ) -> CheckpointCreated:
        """Record this (bare) checkpoint's creation on ``scope``.

        Raises:
            ScopeStateError: the scope is not active.
        """
        scope.require_active("cannot checkpoint scope")
        event = self.record(
            CheckpointCreated,
            checkpoint_id=self.id,
            backend=state.backend,
            revision=state.revision,
            state_digest=state.digest(),
            has_snapshot=has_snapshot,
        )
        assert isinstance(event, CheckpointCreated)
        scope.place(event)
        return event

    def check_restorable(self, scope: ScopeAggregate) -> None:
        """Check the rules of a restore on ``scope`` before any effect.

        Raises:
            ScopeStateError: the scope is not active.
            CheckpointScopeMismatchError: the checkpoint is another scope's.
            CheckpointNotRestorableError: the checkpoint is used.
        """
        scope.require_active("cannot restore in scope")
        if self.scope_owner != scope.id:
            raise CheckpointScopeMismatchError(self.id, self.scope_id, scope.scope_id)
        if self.state is not CheckpointState.VALID:
            raise CheckpointNotRestorableError(self.id, self.state)

    def check_claimable(self, scope: ScopeAggregate, claimant: str) -> None:
        """Check ``claimant`` may apply this checkpoint to ``scope``.

        Raises:
            the errors of :meth:`check_restorable`;
            CheckpointClaimedError: another restore holds the claim.
        """
        self.check_restorable(scope)
        if self.claimed_by and self.claimed_by != claimant:
            raise CheckpointClaimedError(self.id, self.claimed_by)

    def claim(self, scope: ScopeAggregate, claimant: str) -> CheckpointClaimed | None:
        """Claim the checkpoint for ``claimant``'s restore (``None``: already ours).

        Raises:
            the errors of :meth:`check_claimable`.
        """
        self.check_claimable(scope, claimant)
        if self.claimed_by == claimant:
            return None
        event = self.record(CheckpointClaimed, checkpoint_id=self.id, claimant=claimant)
        assert isinstance(event, CheckpointClaimed)
        return event

    def restore(self, scope: ScopeAggregate, claimant: str = "") -> CheckpointRestored:
        """Record the restore (single use) on the checkpoint and ``scope``.

        Raises:
            the errors of :meth:`check_claimable`.
        """
        self.check_claimable(scope, claimant)
        event = self.record(
            CheckpointRestored,
            checkpoint_id=self.id,
            backend=self.backend,
            revision=self.revision,
            state_digest=self.state_digest,
        )
        assert isinstance(event, CheckpointRestored)
        scope.place(event)
        return event

    def evolve(self, event: TraceEvent) -> None:
        """Fold one record of the checkpoint's path (pure, total)."""
        if isinstance(event, CheckpointCreated) and event.checkpoint_id == self.id:
            self.backend = event.backend
            self.revision = event.revision
            self.state_digest = event.state_digest
            self.has_snapshot = event.has_snapshot
        elif isinstance(event, CheckpointRestored) and event.checkpoint_id == self.id:
            self.state = CheckpointState.USED
        elif isinstance(event, CheckpointClaimed) and event.checkpoint_id == self.id:
            self.claimed_by = event.claimant
