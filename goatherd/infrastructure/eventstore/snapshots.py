"""Aggregate snapshots: a rebuildable cache table beside the trace tables.

``aggregate_snapshots`` holds, per (owner path, aggregate kind), the folded
state at one version plus the record id found at that ordinal. It is never a
source of truth: a row is used only when the path still holds that record at
that ordinal and the aggregate's snapshot format matches; anything else is a
miss (and the row is replaced by the next snapshot). Dropping the table loses
nothing. The trace tables are never touched here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Final

from sqlalchemy import (
    BigInteger,
    Column,
    MetaData,
    Table,
    Text,
    delete,
    insert,
    select,
)
from sqlalchemy.exc import SQLAlchemyError

from goatherd.infrastructure.store import SqlAlchemyTraceStore

__all__ = [
    "AggregateSnapshot",
    "SNAPSHOT_FORMAT",
    "SnapshotTable",
    "snapshot_table",
]

SNAPSHOT_FORMAT: Final = "goatherd.aggregate-snapshot.v1"


def snapshot_table(metadata: MetaData | None = None) -> Table:
    """Return the ``aggregate_snapshots`` table (one row per owner and kind)."""
    return Table(
        "aggregate_snapshots",
        metadata or MetaData(),
        Column("owner", Text, primary_key=True),
        Column("kind", Text, primary_key=True),
        Column("version", BigInteger, nullable=False),
        Column("record_id", Text, nullable=False),
        Column("state_json", Text, nullable=False),
    )


_METADATA: Final = MetaData()
_TABLE: Final = snapshot_table(_METADATA)


@dataclass(frozen=True, slots=True)
class AggregateSnapshot:
    """One cached fold: the state at ``version`` whose record is ``record_id``."""

    owner: str
    kind: str
    version: int
    record_id: str
    state: dict[str, object]


class SnapshotTable:
    """Read and replace snapshot rows in the store's database."""

    def __init__(self, store: SqlAlchemyTraceStore) -> None:
        """Create the table if absent (a read-only store gets a reader only)."""
        self._store = store
        self._writable = not store.read_only
        if self._writable:
            # Inside the store's write transaction (BEGIN IMMEDIATE on SQLite, the
            # meta row lock on PostgreSQL): a deferred transaction that reads the
            # schema and then creates the table fails at once with "database is
            # locked" when another process is writing, instead of waiting.
            with store.transaction() as conn:
                _METADATA.create_all(conn, checkfirst=True)

    @property
    def writable(self) -> bool:
        """Whether snapshots can be written."""
        return self._writable

    def read(self, owner: str, kind: str) -> AggregateSnapshot | None:
        """Return the row for ``owner`` and ``kind`` (``None``: absent, unreadable)."""
        stmt = select(_TABLE).where(_TABLE.c.owner == owner, _TABLE.c.kind == kind)
        try:
            with self._store.engine.connect() as conn:
                row = conn.execute(stmt).first()
        except SQLAlchemyError:  # a missing table (read-only store) is a miss
            return None
        if row is None:
            return None
        try:
            state = json.loads(row.state_json)
        except ValueError:
            return None
        if not isinstance(state, dict):
            return None
        return AggregateSnapshot(
            owner, kind, int(row.version), str(row.record_id), state
        )

    def write(self, snapshot: AggregateSnapshot) -> None:
        """Replace the row for the snapshot's owner and kind."""
        if not self._writable:
            return
        key = (_TABLE.c.owner == snapshot.owner) & (_TABLE.c.kind == snapshot.kind)
        with self._store.transaction() as conn:
            conn.execute(delete(_TABLE).where(key))
            conn.execute(
                insert(_TABLE).values(
                    owner=snapshot.owner,
                    kind=snapshot.kind,
                    version=snapshot.version,
                    record_id=snapshot.record_id,
                    state_json=json.dumps(snapshot.state, sort_keys=True),
                )
            )

    def drop_all(self) -> None:
        """Delete every snapshot (they rebuild on the next long folds)."""
        if self._writable:
            with self._store.transaction() as conn:
                conn.execute(delete(_TABLE))
