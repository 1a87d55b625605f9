"""The rows ``verify`` reads, one frozen dataclass per table, every cell well-formed.

:class:`StoredRows` holds every well-formed row of one trace: the trace
tables' rows (:class:`RecordRow`, :class:`EntryRow`, :class:`IntentRow`,
...), the blob store's, the side steps (``None`` before schema v3) and the
schema columns the database lacks; :data:`CONTEXT_REF_NAMES` names a
context's four ref arrays. Plain data: it imports nothing of goatherd.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

__all__ = [
    "BlobRow",
    "CONTEXT_REF_NAMES",
    "ContentRow",
    "ContextRow",
    "EdgeRow",
    "EntryRow",
    "FrontierRow",
    "HolderRow",
    "IntentRow",
    "LedgerRow",
    "RecordRow",
    "SideRow",
    "StoredRows",
]

CONTEXT_REF_NAMES: Final = (
    "active_binding_refs",
    "capability_witness_refs",
    "semantic_environment_refs",
    "visibility_policy_refs",
)


@dataclass(frozen=True, slots=True)
class RecordRow:
    """One ``records`` row, every cell well-formed."""

    record_id: str
    digest: str
    schema_ref: str
    mode: str
    witness_ref: str
    caused_by: tuple[str, ...]
    payload: dict[str, Any]
    intent: str
    redacted_by: str | None = None
    """The redaction the stored body names (its exact redaction form), if any."""


@dataclass(frozen=True, slots=True)
class EntryRow:
    """One ``path_entries`` row."""

    path: str
    ordinal: int
    record_id: str
    context: str
    kind: str
    intent: str
    receipt: str
    position: int | None
    txid: int | None = None


@dataclass(frozen=True, slots=True)
class IntentRow:
    """One ``append_intents`` row, its receipt parsed."""

    intent_id: str
    batch_digest: str
    receipt: dict[str, Any]
    committed_at: str
    txid: int | None = None


@dataclass(frozen=True, slots=True)
class ContextRow:
    """One ``contexts`` row, its ref arrays parsed."""

    context_id: str
    refs: dict[str, tuple[str, ...]]
    substrate_ref: str
    containment: str
    intent: str


@dataclass(frozen=True, slots=True)
class EdgeRow:
    """One ``record_edges`` row."""

    child: str
    index: int
    parent: str


@dataclass(frozen=True, slots=True)
class FrontierRow:
    """One ``frontiers`` index row."""

    frontier_id: str
    target: str
    through_fact: str
    through_ordinal: int
    publisher: str | None
    created_by: str
    intent: str


@dataclass(frozen=True, slots=True)
class LedgerRow:
    """One ``materialization_intents`` row, its receipt parsed."""

    intent: str
    request_digest: str
    receipt: dict[str, Any]
    completed_at: str
    receipt_json: str = ""


@dataclass(frozen=True, slots=True)
class BlobRow:
    """One ``checkpoint_snapshots`` row, its state parsed."""

    checkpoint_id: str
    scope_id: str
    seq: int
    state: dict[str, Any]
    snapshot: bytes
    created_at_ns: int
    state_json: str = ""


@dataclass(frozen=True, slots=True)
class SideRow:
    """One ``side_writes`` row: a side step of the commit chain (ADR 0064)."""

    commit_seq: int
    table_name: str
    row_key: str
    row_digest: str | None


@dataclass(frozen=True, slots=True)
class ContentRow:
    """One ``content_blobs`` row of the blob store."""

    digest: str
    size: int
    data: bytes


@dataclass(frozen=True, slots=True)
class HolderRow:
    """One ``blob_holders`` row of the blob store."""

    holder: str
    digest: str


@dataclass(frozen=True, slots=True)
class StoredRows:
    """Every well-formed row of the trace tables."""

    meta: dict[str, str]
    intents: tuple[IntentRow, ...]
    contexts: tuple[ContextRow, ...]
    ordinals: dict[str, int]
    records: tuple[RecordRow, ...]
    edges: tuple[EdgeRow, ...]
    entries: tuple[EntryRow, ...]
    frontiers: tuple[FrontierRow, ...]
    ledger: tuple[LedgerRow, ...]
    blobs: tuple[BlobRow, ...]
    contents: tuple[ContentRow, ...] = ()
    holders: tuple[HolderRow, ...] = ()
    side: tuple[SideRow, ...] | None = None
    """The side steps; ``None``: the trace has no ``side_writes`` (before v3)."""
    postgres: bool = False
    absent_columns: tuple[str, ...] = ()
    """``table.column`` of every schema column the database lacks."""
