"""Runtime ports, the process-wide sequence, intent ids and the public handles.

The runtime reaches the trace through one port, :class:`RuntimeEventStore`:
aggregates are loaded by folding their owner paths and saved as one kernel
append batch under an append-intent id; the raw :class:`RuntimeTraceStore`
behind it serves intent lookups, checkpoint blobs and recovery scans. The
eventsourcing adapter is ``goatherd.infrastructure.TraceEventStore``.

Intent ids follow runtime-spec section 1. Their ``<seq>`` comes from one
process-wide counter seeded randomly (never 0, never the wall clock), so a
restarted process never regenerates an id a previous one committed. A caller
that retries a command passes the same ``seq`` back and so the same intent.
"""

from __future__ import annotations

import secrets
import threading
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol, TypeAlias, TypeVar

from goatherd.application.errors import SandboxError
from goatherd.domain import (
    AppendReceipt,
    CheckpointState,
    RuntimeRuleError,
    TraceAggregate,
    TraceStoreError,
    WorkspaceState,
)
from goatherd.domain.log import CheckpointBlob, LogEntry

__all__ = [
    "Checkpoint",
    "FaultHook",
    "IntentSequence",
    "RuntimeEventStore",
    "RuntimeFailure",
    "RuntimeTraceStore",
    "checkpoint_intent",
    "claim_intent",
    "fork_intent",
    "lifecycle_intent",
    "restore_intent",
    "seal_intent",
    "settle_intent",
    "workspace_intent",
]

TAgg = TypeVar("TAgg", bound=TraceAggregate)

FaultHook: TypeAlias = Callable[[str, str], None]
"""Called at every write boundary with ``(boundary, intent_id)``; a hook that
raises simulates a crash there (tests). Boundaries: ``before-commit`` and
``after-commit`` around every append batch, ``after-blob`` between a
checkpoint's blob and its record, ``after-effect`` between a workspace effect
(restore, settle select/apply) and its record."""

RuntimeFailure: TypeAlias = RuntimeRuleError | SandboxError | TraceStoreError
"""The expected failures of runtime commands: a broken rule, a sandbox
failure, or a trace-store law (an intent conflict, a lost optimistic race)."""


class RuntimeTraceStore(Protocol):
    """The part of the kernel store the runtime uses beside aggregate streams."""

    @property
    def checkpoint_blob_limit(self) -> int:
        """The snapshot size limit in bytes."""
        ...

    def read_append_intent(self, intent_id: str) -> AppendReceipt | None:
        """Return the stored receipt of a committed intent, else ``None``."""
        ...

    def persist_checkpoint_blob(
        self,
        checkpoint_id: str,
        scope_id: str,
        seq: int,
        state: WorkspaceState,
        snapshot: bytes,
        created_at_ns: int,
    ) -> None:
        """Persist a checkpoint's state and snapshot (hard)."""
        ...

    def delete_checkpoint_blob(self, checkpoint_id: str) -> None:
        """Delete a checkpoint blob (missing is fine)."""
        ...

    def load_checkpoint_blobs(
        self,
    ) -> tuple[tuple[CheckpointBlob, ...], tuple[str, ...]]:
        """Return the blobs oldest first and the ids of corrupt rows."""
        ...

    def scan_records_by_schema(self, *schema_refs: str) -> tuple[LogEntry, ...]:
        """Return every path entry of records with those schemas."""
        ...


class RuntimeEventStore(Protocol):
    """Aggregate streams over the kernel store (the runtime's persistence port)."""

    @property
    def trace(self) -> RuntimeTraceStore:
        """The kernel store behind the streams."""
        ...

    def load(self, cls: type[TAgg], owner: str, *, fresh: bool = True) -> TAgg:
        """Fold ``owner``'s path into a ``cls`` (bare when the path is empty).

        ``fresh=False`` may return a cached fold without reading the path's
        tail: only for decisions whose save checks the expected head.
        """
        ...

    def forget(self, *owners: str) -> None:
        """Drop cached folds of ``owners`` (all when none is named)."""
        ...

    def load_many(self, cls: type[TAgg], owners: Collection[str]) -> dict[str, TAgg]:
        """Fold several paths (an implementation may batch the reads)."""
        ...

    def save(
        self, aggregates: Sequence[TraceAggregate], intent_id: str
    ) -> AppendReceipt:
        """Append every pending event as ONE batch under ``intent_id``.

        Each aggregate's path must still be at the head it was loaded at
        (``OrdinalConflictError`` otherwise, nothing written), also one with
        no pending event (it guards a decision that read it). An exact replay
        of a committed intent returns the stored receipt.
        """
        ...


class IntentSequence:
    """The process-wide 64-bit counter behind intent ids (seeded randomly)."""

    def __init__(self, start: int | None = None) -> None:
        """Start at ``start`` (tests) or at a random non-zero 64-bit value."""
        base = start if start is not None else secrets.randbits(64)
        self._value = base or 1
        self._lock = threading.Lock()

    def next(self) -> int:
        """Return the next value (incremented before use, wraps at 2**64)."""
        with self._lock:
            self._value = (self._value + 1) % 2**64 or 1
            return self._value


def fork_intent(parent_owner: str, child_owner: str, seq: int) -> str:
    """Return ``<parentOwner>:fork:<childOwner>:<seq>``."""
    return f"{parent_owner}:fork:{child_owner}:{seq}"


def lifecycle_intent(verb: str, owner: str, other: str, seq: int) -> str:
    """Return ``<owner>:<verb>:<other>:<seq>`` (merge/discard) or with no other."""
    return f"{owner}:{verb}:{other}:{seq}" if other else f"{owner}:{verb}:{seq}"


def checkpoint_intent(owner: str, seq: int) -> str:
    """Return ``<owner>:checkpoint:<cpSeq>``."""
    return f"{owner}:checkpoint:{seq}"


def restore_intent(owner: str, seq: int) -> str:
    """Return ``<owner>:restore:<cpSeq>`` (the checkpoint's own seq)."""
    return f"{owner}:restore:{seq}"


def workspace_intent(owner: str, kind_label: str, seq: int) -> str:
    """Return ``<owner>:workspace:<kindLabel>:<seq>``."""
    return f"{owner}:workspace:{kind_label}:{seq}"


def seal_intent(owner: str, seq: int) -> str:
    """Return ``<owner>:seal:<outSeq>`` (the output's own seq)."""
    return f"{owner}:seal:{seq}"


def settle_intent(owner: str, action: str, seq: int) -> str:
    """Return ``<owner>:settle:<action>:<seq>``."""
    return f"{owner}:settle:{action}:{seq}"


def claim_intent(intent: str, claimant: str = "") -> str:
    """Return the intent of the claim record a settle/restore appends first.

    ``<intent>:claim`` for a settle (its intent already names the attempt),
    ``<intent>:claim:<claimant>`` for a restore (whose intent is shared by
    every attempt on the checkpoint).
    """
    return f"{intent}:claim:{claimant}" if claimant else f"{intent}:claim"


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A checkpoint as seen at one moment (a value; query again for news).

    Attributes:
        id: ``cp:<owner>:<seq>``.
        seq: the process-wide sequence value (the ordering key).
        scope_id: the scope it belongs to.
        workspace: the captured workspace state.
        snapshot: the caller's opaque snapshot (``b""`` once used).
        created_at: when it was taken (informational; ties are possible).
        state: ``valid``, ``used`` or ``invalid``.
    """

    id: str
    seq: int
    scope_id: str
    workspace: WorkspaceState
    snapshot: bytes
    created_at: datetime
    state: CheckpointState


def changes_of(values: Sequence[dict[str, str]]) -> list[dict[str, str]]:
    """Copy a ``[{path, kind}]`` list."""
    return [dict(v) for v in values]
