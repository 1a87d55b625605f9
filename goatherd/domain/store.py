"""The structural ``TraceStore`` protocol (kernel-spec 4-7 plus runtime support).

Projections and the application depend on this protocol, never on the SQL
store, so that the layers keep pointing inward. The methods' semantics are the
kernel specification's; ``goatherd.infrastructure.store`` implements them.

Pure typing: nothing here runs.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Protocol, runtime_checkable

from goatherd.domain.contexts import AppendContext, OperationContext, ReadContext
from goatherd.domain.log import CheckpointBlob, LogEntry
from goatherd.domain.materialization import MAX_OWNER_ORDINAL
from goatherd.domain.records import (
    AppendBatch,
    AppendReceipt,
    Cut,
    CutSpec,
    RetainedContext,
    TraceSlice,
    VisibleRecord,
)
from goatherd.domain.workspace import WorkspaceState

__all__ = ["AppendAuthority", "ReadAuthority", "TraceStore"]

AppendAuthority = AppendContext | OperationContext
"""What a write method accepts as its context."""

ReadAuthority = ReadContext | OperationContext
"""What a read method accepts as its context."""


@runtime_checkable
class TraceStore(Protocol):
    """An append-only, content-addressed, causally linked trace store."""

    # ------------------------------------------------------------ kernel ABI

    def append(
        self,
        context: AppendAuthority,
        batch: AppendBatch,
        *,
        expected_heads: Mapping[str, int] | None = None,
    ) -> AppendReceipt:
        """Append ``batch`` atomically, or return the stored receipt of its intent."""
        ...

    def preview_record_ids(
        self, context: AppendAuthority, batch: AppendBatch
    ) -> tuple[str, ...]:
        """Return the record ids ``append`` would allocate, persisting nothing."""
        ...

    def read_fact(
        self, context: ReadAuthority, record_id: str, visibility: str | None = None
    ) -> VisibleRecord:
        """Read one record through its first path entry."""
        ...

    def read_owner_prefix(
        self,
        context: ReadAuthority,
        owner: str,
        through: int = MAX_OWNER_ORDINAL,
        mode_filter: str = "both",
    ) -> TraceSlice:
        """Read an owner path's entries with ordinal <= ``through`` (default: all)."""
        ...

    def read_causal_closure(
        self,
        context: ReadAuthority,
        roots: Sequence[str],
        *,
        visibility: str | None = None,
        mode_filter: str = "both",
        closure_policy: str = "include_external_anchors",
    ) -> TraceSlice:
        """Read ``roots`` and all their causal ancestors."""
        ...

    def publish_cut(self, context: AppendAuthority, spec: CutSpec) -> Cut:
        """Publish an immutable cut through the append path."""
        ...

    def resolve_cut(
        self,
        context: ReadAuthority,
        cut_id: str,
        visibility: str | None = None,
        mode_filter: str = "both",
    ) -> TraceSlice:
        """Resolve a published cut into the slice it addresses."""
        ...

    def read_owner_cutoff(self, frontier_id: str) -> Cut:
        """Return the verified cut retained under ``frontier_id``."""
        ...

    def read_context(self, context_id: str) -> RetainedContext:
        """Return a stored retained context (diagnostic, no authorization)."""
        ...

    def fact_count(self) -> int:
        """Return the number of retained records, witnesses included."""
        ...

    def context_count(self) -> int:
        """Return the number of retained contexts."""
        ...

    def read_append_intent(self, intent_id: str) -> AppendReceipt | None:
        """Return the stored receipt of a committed intent, or ``None``."""
        ...

    # ------------------------------------------------------- runtime support

    def head(self, owner: str) -> int:
        """Return the owner's stored next ordinal (0 for an unknown owner)."""
        ...

    def read_log(
        self,
        after: int = -1,
        limit: int = 1000,
        *,
        schema_refs: Collection[str] | None = None,
    ) -> tuple[LogEntry, ...]:
        """Return ordinary path entries with position > ``after``, ascending."""
        ...

    def max_position(self) -> int:
        """Return the highest committed log position (-1 when empty)."""
        ...

    def scan_records_by_schema(self, *schema_refs: str) -> tuple[LogEntry, ...]:
        """Return every path entry of records with these schemas, by (path, ordinal)."""
        ...

    @property
    def checkpoint_blob_limit(self) -> int:
        """The largest snapshot, in bytes, a checkpoint may persist."""
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
        """Persist (or replace) a checkpoint's restorable halves."""
        ...

    def delete_checkpoint_blob(self, checkpoint_id: str) -> None:
        """Delete a persisted checkpoint (absent ids are fine)."""
        ...

    def load_checkpoint_blobs(
        self,
    ) -> tuple[tuple[CheckpointBlob, ...], tuple[str, ...]]:
        """Return the persisted checkpoints oldest first, and the corrupt rows' ids."""
        ...

    def read_completed_materialization(self, intent: str) -> tuple[str, str] | None:
        """Return ``(request_digest, receipt_json)`` of a completed intent."""
        ...

    def record_completed_materialization(
        self, intent: str, request_digest: str, receipt_json: str
    ) -> None:
        """Record a completed materialization in the ledger (idempotent by digest)."""
        ...

    def close(self) -> None:
        """Release the store's connections."""
        ...
