"""The runtime's ports, the process-wide sequence, intent ids and public values.

The runtime reaches the kernel store through :class:`RuntimeTrace` (appends
with expected heads, intent lookups, path heads, the log filtered by schema,
commit times) and keeps bytes the trace addresses by digest in a
:class:`BlobStore`. The adapters are ``goatherd.infrastructure``'s
``SqlAlchemyTraceStore`` and ``SqlBlobStore``.

Intent ids follow the seed's formats. Their ``<seq>`` comes from one
process-wide counter seeded randomly (never 0, never the wall clock), so a
restarted process never regenerates an id a previous one committed. A caller
that retries a command passes the same ``seq`` back and so the same intent.
"""

from __future__ import annotations

import hashlib
import secrets
import threading
from collections.abc import Callable, Collection
from dataclasses import dataclass
from datetime import datetime
from typing import Final, Protocol, TypeAlias, runtime_checkable

from goatherd.domain import (
    AppendBatch,
    AppendReceipt,
    CheckpointState,
    WorkspaceState,
)
from goatherd.domain.log import CheckpointBlob, LogEntry
from goatherd.domain.store import AppendAuthority

__all__ = [
    "BlobStore",
    "Checkpoint",
    "FaultHook",
    "IntentSequence",
    "RuntimeTrace",
    "blob_digest",
    "checkpoint_intent",
    "claim_intent",
    "fork_intent",
    "lifecycle_intent",
    "restore_intent",
    "seal_intent",
    "settle_intent",
    "workspace_intent",
]

FaultHook: TypeAlias = Callable[[str, str], None]
"""Called at every write boundary with ``(boundary, intent_id)``; a hook that
raises simulates a crash there (tests). Boundaries: ``before-commit`` and
``after-commit`` around every append batch, ``after-blob`` between stored
bytes and the record that addresses them, ``after-effect`` between a
workspace effect (restore, settle select/apply) and its record,
``after-release`` after a restore released its snapshot's bytes,
``after-git-commit`` between a settle's git commit and its record."""

BLOB_DIGEST_PREFIX: Final = "sha256:"


def blob_digest(data: bytes) -> str:
    """Return the address of ``data`` in a blob store (``sha256:<hex>``)."""
    return BLOB_DIGEST_PREFIX + hashlib.sha256(data).hexdigest()


@runtime_checkable
class RuntimeTrace(Protocol):
    """The part of the kernel store the runtime uses."""

    @property
    def checkpoint_blob_limit(self) -> int:
        """The snapshot size limit in bytes."""
        ...

    def append(
        self,
        context: AppendAuthority,
        batch: AppendBatch,
        *,
        expected_heads: dict[str, int] | None = None,
    ) -> AppendReceipt:
        """Append ``batch`` atomically; each named path must be at its head."""
        ...

    def read_append_intent(self, intent_id: str) -> AppendReceipt | None:
        """Return the stored receipt of a committed intent, else ``None``."""
        ...

    def head(self, owner: str) -> int:
        """Return the owner path's next ordinal (0 for an empty path)."""
        ...

    def heads(self, owners: Collection[str]) -> dict[str, int]:
        """Return several paths' next ordinals in one read."""
        ...

    def head_records(self, owners: Collection[str]) -> dict[str, tuple[int, str]]:
        """Return several paths' next ordinals and head record ids in one read."""
        ...

    def max_position(self) -> int:
        """Return the highest committed log position (``-1`` when empty)."""
        ...

    def cheap_tail(self) -> int | None:
        """Return :meth:`max_position` when one cheap read tells it, else ``None``."""
        ...

    def read_log(
        self,
        after: int = -1,
        limit: int = 1000,
        *,
        schema_refs: Collection[str] | None = None,
    ) -> tuple[LogEntry, ...]:
        """Return path entries with position > ``after`` (of these schemas)."""
        ...

    def intent_committed_at(self, intent_id: str) -> datetime | None:
        """Return when an intent committed (``None``: not committed)."""
        ...

    def load_checkpoint_blobs(
        self,
    ) -> tuple[tuple[CheckpointBlob, ...], tuple[str, ...]]:
        """Return the legacy checkpoint rows oldest first and the corrupt ids."""
        ...


@runtime_checkable
class BlobStore(Protocol):
    """Bytes addressed by their digest, each kept while a holder holds it."""

    def put(self, holder: str, data: bytes) -> str:
        """Store ``data`` for ``holder`` (idempotent); return its digest."""
        ...

    def get(self, digest: str) -> bytes | None:
        """Return the bytes stored under ``digest`` (``None``: absent)."""
        ...

    def release(self, holder: str, digest: str) -> None:
        """Drop ``holder``'s hold; delete the bytes when nobody holds them."""
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
        snapshot: the caller's opaque snapshot (``b""`` once not valid).
        created_at: when its record committed (``None``: not known).
        state: ``valid``, ``used`` or ``invalid``.
        snapshot_digest: the digest the trace records for the snapshot.
    """

    id: str
    seq: int
    scope_id: str
    workspace: WorkspaceState
    snapshot: bytes
    created_at: datetime | None
    state: CheckpointState
    snapshot_digest: str = ""
