"""Read-only questions about a stored trace, for the CLI and operators.

``trace_stats`` counts what a database holds; ``record_details`` gathers one
record with every path it sits on, its parents, children and witness chain;
``resolve_record_id`` accepts a unique prefix of an id; ``matching_ids``
lists the record ids, owner paths or cut ids a typed prefix could mean (the
CLI's resolver, ADR 0085). Nothing here writes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import func, select

from goatherd.domain.errors import UnknownFactError
from goatherd.domain.records import WITNESS_OWNER
from goatherd.infrastructure.store.codec import redacted_by
from goatherd.infrastructure.store.schema import (
    append_intents,
    checkpoint_snapshots,
    contexts,
    frontiers,
    materialization_intents,
    owner_ordinals,
    path_entries,
    record_edges,
    records,
)
from goatherd.infrastructure.store.store import SqlAlchemyTraceStore

__all__ = [
    "PathPlacement",
    "RecordDetails",
    "TraceStats",
    "matching_ids",
    "record_details",
    "resolve_record_id",
    "trace_stats",
]


@dataclass(frozen=True, slots=True)
class TraceStats:
    """What a trace database holds."""

    records: int
    witnesses: int
    path_entries: int
    log_positions: int
    owners: int
    contexts: int
    intents: int
    frontiers: int
    checkpoint_blobs: int
    materializations: int
    schemas: dict[str, int] = field(default_factory=dict)
    head: str = ""

    def to_json(self) -> dict[str, Any]:
        """Return the stats as a JSON object."""
        return {
            "records": self.records,
            "witnesses": self.witnesses,
            "path_entries": self.path_entries,
            "log_positions": self.log_positions,
            "owners": self.owners,
            "contexts": self.contexts,
            "intents": self.intents,
            "frontiers": self.frontiers,
            "checkpoint_blobs": self.checkpoint_blobs,
            "materializations": self.materializations,
            "schemas": dict(self.schemas),
            "head": self.head,
        }


@dataclass(frozen=True, slots=True)
class PathPlacement:
    """One path entry of a record."""

    path_ref: str
    ordinal: int
    kind_label: str
    context_ref: str
    append_intent_id: str
    commit_receipt: str
    position: int | None


@dataclass(frozen=True, slots=True)
class RecordDetails:
    """One record with its placements and its neighbours in the causal graph."""

    record_id: str
    schema_ref: str
    mode: str
    witness_ref: str
    caused_by: tuple[str, ...]
    payload: dict[str, Any]
    placements: tuple[PathPlacement, ...]
    children: tuple[str, ...]
    witness_chain: tuple[str, ...]
    redacted_by: str | None = None
    """The redaction record that erased the payload (ADR 0062), if any."""

    def to_json(self) -> dict[str, Any]:
        """Return the details as a JSON object."""
        return {
            "record_id": self.record_id,
            "schema_ref": self.schema_ref,
            "mode": self.mode,
            "witness_ref": self.witness_ref,
            "caused_by": list(self.caused_by),
            "payload": self.payload,
            "redacted_by": self.redacted_by,
            "placements": [
                {
                    "path_ref": p.path_ref,
                    "ordinal": p.ordinal,
                    "kind_label": p.kind_label,
                    "context_ref": p.context_ref,
                    "append_intent_id": p.append_intent_id,
                    "commit_receipt": p.commit_receipt,
                    "position": p.position,
                }
                for p in self.placements
            ],
            "children": list(self.children),
            "witness_chain": list(self.witness_chain),
        }


def _count(store: SqlAlchemyTraceStore, table: Any, *where: Any) -> int:
    with store.engine.connect() as conn:
        stmt = select(func.count()).select_from(table)
        for clause in where:
            stmt = stmt.where(clause)
        return int(conn.execute(stmt).scalar_one())


def trace_stats(store: SqlAlchemyTraceStore) -> TraceStats:
    """Count what the store holds (records include witnesses, as fact_count does).

    ``head`` is the trace's chained head digest (``<commits>:sha256:<hex>``):
    note it outside the trace and hand it to ``verify --expect-head`` later.
    """
    with store.engine.connect() as conn:
        schemas: dict[str, int] = dict(
            conn.execute(
                select(records.c.schema_ref, func.count())
                .group_by(records.c.schema_ref)
                .order_by(func.count().desc(), records.c.schema_ref)
            ).all()
        )
    return TraceStats(
        records=_count(store, records),
        witnesses=_count(store, path_entries, path_entries.c.path_ref == WITNESS_OWNER),
        path_entries=_count(store, path_entries),
        log_positions=_count(store, path_entries, path_entries.c.position.is_not(None)),
        owners=_count(store, owner_ordinals),
        contexts=_count(store, contexts),
        intents=_count(store, append_intents),
        frontiers=_count(store, frontiers),
        checkpoint_blobs=_count(store, checkpoint_snapshots),
        materializations=_count(store, materialization_intents),
        schemas={str(k): int(v) for k, v in schemas.items()},
        head=str(store.trace_head()),
    )


def resolve_record_id(store: SqlAlchemyTraceStore, text: str) -> str:
    """Return the full record id for ``text``: a full id or a unique hex prefix.

    Raises:
        UnknownFactError: no record, or several, match.
    """
    prefix = text if text.startswith("sha256:") else "sha256:" + text
    with store.engine.connect() as conn:
        found = list(
            conn.execute(
                select(records.c.record_id)
                .where(records.c.record_id.startswith(prefix, autoescape=True))
                .limit(2)
            ).scalars()
        )
    if not found:
        raise UnknownFactError(f"unknown record id: {text}")
    if len(found) > 1:
        raise UnknownFactError(f"record id prefix {text!r} is ambiguous")
    return str(found[0])


def matching_ids(
    store: SqlAlchemyTraceStore,
    kind: str,
    prefix: str,
    limit: int,
    *,
    segment: str = "",
) -> list[str]:
    """Return up to ``limit`` stored ids of ``kind`` that start with ``prefix``.

    ``kind`` is ``"record"`` (record ids), ``"owner"`` (owner paths that hold
    a record) or ``"cut"`` (published cut ids). Each is a primary-key range
    read. ``segment`` (owners only) instead returns the owner paths whose last
    ``:``-separated segment is exactly ``segment`` (an environment id).

    Raises:
        ValueError: an unknown ``kind``.
    """
    column = {
        "record": records.c.record_id,
        "owner": owner_ordinals.c.trace_owner_id,
        "cut": frontiers.c.frontier_id,
    }.get(kind)
    if column is None:
        raise ValueError(f"unknown id kind {kind!r}: record, owner or cut")
    if segment and kind == "owner":
        where = column.endswith(":" + segment, autoescape=True)
    else:
        where = column.startswith(prefix, autoescape=True)
    with store.engine.connect() as conn:
        found = conn.execute(select(column).where(where).order_by(column).limit(limit))
        return [str(value) for value in found.scalars()]


def record_details(store: SqlAlchemyTraceStore, record_id: str) -> RecordDetails:
    """Gather one record, its placements, children and witness chain.

    Raises:
        UnknownFactError: the record is not stored.
    """
    with store.engine.connect() as conn:
        row = conn.execute(
            select(records).where(records.c.record_id == record_id)
        ).first()
        if row is None:
            raise UnknownFactError(f"unknown record id: {record_id}")
        placements = tuple(
            PathPlacement(
                path_ref=p.path_ref,
                ordinal=int(p.path_ordinal),
                kind_label=p.kind_label,
                context_ref=p.retained_context_ref,
                append_intent_id=p.append_intent_id,
                commit_receipt=p.commit_receipt,
                position=None if p.position is None else int(p.position),
            )
            for p in conn.execute(
                select(path_entries)
                .where(path_entries.c.record_id == record_id)
                .order_by(path_entries.c.path_ref, path_entries.c.path_ordinal)
            )
        )
        children = tuple(
            str(c)
            for c in conn.execute(
                select(record_edges.c.child_record_id)
                .where(record_edges.c.parent_record_id == record_id)
                .order_by(record_edges.c.child_record_id)
            ).scalars()
        )
        chain: list[str] = []
        witness = str(row.witness_ref)
        while witness and witness not in chain:
            chain.append(witness)
            witness = str(
                conn.execute(
                    select(records.c.witness_ref).where(records.c.record_id == witness)
                ).scalar_one_or_none()
                or ""
            )
    return RecordDetails(
        record_id=str(row.record_id),
        schema_ref=str(row.schema_ref),
        mode=str(row.mode),
        witness_ref=str(row.witness_ref),
        caused_by=tuple(json.loads(row.caused_by_json)),
        payload=json.loads(row.body_json).get("payload", {}),
        placements=placements,
        children=children,
        witness_chain=tuple(chain),
        redacted_by=redacted_by(str(row.body_json)),
    )
