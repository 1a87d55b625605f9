"""Checkpoint events: created, claimed, restored, invalidated, pruned.

A checkpoint's records sit on the checkpoint's own path (``cp:<owner>:<seq>``,
its stream) and on its scope's path. ``checkpoint.created`` carries the
captured workspace state and the digest of the caller's snapshot bytes, so a
restore can check the bytes it reads from the blob store against the trace
(records written before that carry only the state digest).

``checkpoint.claimed`` is appended before a restore touches the workspace;
``checkpoint.restored`` names the snapshot digest the restore releases (the
bytes go once the record commits; the digest stays in the trace);
``checkpoint.invalidated`` burns a checkpoint (a failed restore, a stale one
found by recovery); ``checkpoint.pruned`` removes it and names the blob
digests it released.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from goatherd.domain.events.base import (
    RuntimeEvent,
    register_event,
    state_contradiction,
)
from goatherd.domain.records import RecordMode
from goatherd.domain.workspace import WorkspaceState

__all__ = [
    "CheckpointClaimed",
    "CheckpointCreated",
    "CheckpointInvalidated",
    "CheckpointPruned",
    "CheckpointRestored",
]

_DECL: Final = RecordMode.DECLARATION
_CAPT: Final = RecordMode.CAPTURE


@register_event
@dataclass(frozen=True, kw_only=True)
class CheckpointCreated(RuntimeEvent):
    """A checkpoint was taken.

    Attributes:
        checkpoint_id: ``cp:<owner>:<seq>``.
        backend: the captured state's backend.
        revision: the captured state's revision (what staleness compares).
        state_digest: the captured state's digest.
        has_snapshot: whether the caller passed snapshot bytes.
        state: the captured state itself (absent in older records).
        snapshot_digest: ``sha256:<hex>`` of the snapshot bytes (absent in
            older records).
    """

    SCHEMA = "goatherd.checkpoint.created.v2"
    MODE = _DECL
    KIND_LABEL = "checkpoint:created"

    checkpoint_id: str
    backend: str
    revision: str
    state_digest: str
    has_snapshot: bool
    state: WorkspaceState | None = None
    snapshot_digest: str | None = None

    def contradiction(self) -> str | None:
        """Refuse a state digest, backend or revision its state disagrees with."""
        return state_contradiction(
            "state", self.state, self.state_digest, self.backend, self.revision
        )


@register_event
@dataclass(frozen=True, kw_only=True)
class CheckpointClaimed(RuntimeEvent):
    """A restore claimed the checkpoint before applying it.

    Attributes:
        checkpoint_id: the checkpoint.
        claimant: the restoring attempt's token (its sequence value).
        workspace_owner: the scope whose workspace the restore changes (the
            claim also sits on its path; absent in older records).
    """

    SCHEMA = "goatherd.checkpoint.claimed.v1"
    MODE = _DECL
    KIND_LABEL = "checkpoint:claimed"

    checkpoint_id: str
    claimant: str
    workspace_owner: str | None = None


@register_event
@dataclass(frozen=True, kw_only=True)
class CheckpointRestored(RuntimeEvent):
    """A checkpoint was restored and used up.

    Attributes:
        checkpoint_id: the checkpoint.
        backend: the restored state's backend.
        revision: the restored state's revision.
        state_digest: the restored state's digest.
        released: the blob digests the restore releases once this record
            commits (absent in records written before restores released them,
            and in the seed's).
    """

    SCHEMA = "goatherd.checkpoint.restored.v2"
    MODE = _CAPT
    KIND_LABEL = "checkpoint:restored"

    checkpoint_id: str
    backend: str
    revision: str
    state_digest: str
    released: tuple[str, ...] | None = None


@register_event
@dataclass(frozen=True, kw_only=True)
class CheckpointInvalidated(RuntimeEvent):
    """A checkpoint was burnt: it can never be restored.

    Attributes:
        checkpoint_id: the checkpoint.
        reason: why (a failed restore, a stale revision, bytes that do not
            match the trace).
    """

    SCHEMA = "goatherd.checkpoint.invalidated.v1"
    MODE = _CAPT
    KIND_LABEL = "checkpoint:invalidated"

    checkpoint_id: str
    reason: str


@register_event
@dataclass(frozen=True, kw_only=True)
class CheckpointPruned(RuntimeEvent):
    """A checkpoint was pruned; its blobs were released.

    Attributes:
        checkpoint_id: the checkpoint.
        released: the blob digests it no longer holds.
    """

    SCHEMA = "goatherd.checkpoint.pruned.v1"
    MODE = _CAPT
    KIND_LABEL = "checkpoint:pruned"

    checkpoint_id: str
    released: tuple[str, ...] = ()
