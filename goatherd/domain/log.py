"""Values the store returns beside slices: the global log and checkpoint blobs.

:class:`LogEntry` is one ordinary path entry at its store-global position (the
``n`` of its ``commit:n`` receipt), which is what projections, the
eventsourcing notification log and the trace UI page through.
:class:`CheckpointBlob` is one persisted checkpoint as recovery receives it
(runtime-spec 4.3).

Pure values only.
"""

from __future__ import annotations

from dataclasses import dataclass

from goatherd.domain.records import Record
from goatherd.domain.workspace import WorkspaceState

__all__ = ["CheckpointBlob", "LogEntry"]


@dataclass(frozen=True, slots=True)
class LogEntry:
    """One ordinary path entry at its store-global position.

    Attributes:
        position: 0-based, gap-free, equal to commit order.
        append_intent_id: the intent that placed the record on this path.
        record: the record, whose ``view`` is this path entry's view.
    """

    position: int
    append_intent_id: str
    record: Record


@dataclass(frozen=True, slots=True)
class CheckpointBlob:
    """One persisted checkpoint: the restorable halves of a checkpoint.

    Attributes:
        checkpoint_id: the checkpoint id (``cp:<owner>:<seq>``).
        scope_id: the scope the checkpoint belongs to.
        seq: the checkpoint's monotonic sequence number (unsigned 64-bit).
        state: the captured workspace state.
        snapshot: opaque host bytes (empty when the host passed none).
        created_at_ns: creation time in Unix nanoseconds.
    """

    checkpoint_id: str
    scope_id: str
    seq: int
    state: WorkspaceState
    snapshot: bytes
    created_at_ns: int
