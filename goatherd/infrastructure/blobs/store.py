"""The blob store: bytes the trace addresses by digest, beside the trace tables.

``content_blobs`` keeps each distinct byte string once, under its address
``sha256:<hex>``; ``blob_holders`` says who holds it (a checkpoint's snapshot,
an output's diff). A holder holds one blob; storing again for the same holder
replaces its hold. Releasing the last hold deletes the bytes. Both steps run
in one write transaction serialized with the store's appends, and on
PostgreSQL they also lock the blob's row, so a release can never delete bytes
a concurrent store just re-held.

Nothing here is trusted: the runtime checks every byte string it reads
against the digest its trace record carries.
"""

from __future__ import annotations

import hashlib
from typing import Final

from sqlalchemy import (
    BigInteger,
    Column,
    Connection,
    LargeBinary,
    MetaData,
    Table,
    Text,
    delete,
    func,
    insert,
    select,
)
from sqlalchemy.exc import OperationalError, ProgrammingError

from goatherd.infrastructure.store import SqlAlchemyTraceStore

__all__ = ["SqlBlobStore", "blob_tables"]

_PREFIX: Final = "sha256:"
_METADATA: Final = MetaData()
_BLOBS: Final = Table(
    "content_blobs",
    _METADATA,
    Column("digest", Text, primary_key=True),
    Column("size", BigInteger, nullable=False),
    Column("data", LargeBinary, nullable=False),
)
_HOLDERS: Final = Table(
    "blob_holders",
    _METADATA,
    Column("holder", Text, primary_key=True),
    Column("digest", Text, nullable=False, index=True),
)
_HOLDER_SQL: Final = "SELECT digest FROM blob_holders WHERE holder = ?"
_BYTES_SQL: Final = "SELECT data FROM content_blobs WHERE digest = ?"
_DELETE_BYTES_SQL: Final = "DELETE FROM content_blobs WHERE digest = ?"
_INSERT_BYTES_SQL: Final = (
    "INSERT INTO content_blobs (digest, size, data) VALUES (?, ?, ?)"
)
_DELETE_HOLDER_SQL: Final = "DELETE FROM blob_holders WHERE holder = ?"
_INSERT_HOLDER_SQL: Final = "INSERT INTO blob_holders (holder, digest) VALUES (?, ?)"


def blob_tables() -> tuple[Table, Table]:
    """Return the ``content_blobs`` and ``blob_holders`` tables."""
    return _BLOBS, _HOLDERS


class SqlBlobStore:
    """A content-addressed blob store in the trace's database."""

    def __init__(self, store: SqlAlchemyTraceStore) -> None:
        """Create the tables if absent (a read-only store only reads)."""
        self._store = store
        self._postgres = store.engine.dialect.name == "postgresql"
        if not store.read_only:
            # Inside the store's write transaction: a deferred transaction that
            # reads the schema and then creates a table fails at once with
            # "database is locked" when another process is writing.
            with store.transaction() as conn:
                _METADATA.create_all(conn, checkfirst=True)

    def put(self, holder: str, data: bytes) -> str:
        """Store ``data`` for ``holder`` (idempotent); return its digest."""
        digest = _PREFIX + hashlib.sha256(data).hexdigest()
        with self._store.transaction() as conn:
            if not self._postgres:
                self._put_sqlite(conn, holder, digest, data)
                return digest
            previous = conn.execute(
                select(_HOLDERS.c.digest).where(_HOLDERS.c.holder == holder)
            ).scalar_one_or_none()
            if previous == digest:
                self._ensure_bytes(conn, digest, data)
                return digest
            self._ensure_bytes(conn, digest, data)
            if previous is not None:
                conn.execute(delete(_HOLDERS).where(_HOLDERS.c.holder == holder))
                self._collect(conn, previous)
            conn.execute(insert(_HOLDERS).values(holder=holder, digest=digest))
        return digest

    def _put_sqlite(
        self, conn: Connection, holder: str, digest: str, data: bytes
    ) -> None:
        """:meth:`put`'s steps on SQLite, straight on the driver (a seal's path).

        The same statements as the portable path (SQLite's write lock, taken
        by the transaction, already keeps a concurrent release out), without
        building them per call.
        """
        raw = conn.connection.driver_connection
        assert raw is not None
        row = raw.execute(_HOLDER_SQL, (holder,)).fetchone()
        previous = None if row is None else str(row[0])
        stored = raw.execute(_BYTES_SQL, (digest,)).fetchone()
        if stored is not None and bytes(stored[0]) != data:
            raw.execute(_DELETE_BYTES_SQL, (digest,))  # an edited row
            stored = None
        if stored is None:
            raw.execute(_INSERT_BYTES_SQL, (digest, len(data), data))
        if previous == digest:
            return
        if previous is not None:
            raw.execute(_DELETE_HOLDER_SQL, (holder,))
            self._collect(conn, previous)
        raw.execute(_INSERT_HOLDER_SQL, (holder, digest))

    def get(self, digest: str) -> bytes | None:
        """Return the bytes stored under ``digest`` (``None``: absent)."""
        try:
            with self._store.engine.connect() as conn:
                value = conn.execute(
                    select(_BLOBS.c.data).where(_BLOBS.c.digest == digest)
                ).scalar_one_or_none()
        except (OperationalError, ProgrammingError):
            return None  # a read-only trace written before blobs had a table
        return None if value is None else bytes(value)

    def release(self, holder: str, digest: str) -> None:
        """Drop ``holder``'s hold on ``digest``; delete unheld bytes."""
        with self._store.transaction() as conn:
            conn.execute(
                delete(_HOLDERS).where(
                    _HOLDERS.c.holder == holder, _HOLDERS.c.digest == digest
                )
            )
            self._collect(conn, digest)

    def holders(self, digest: str) -> list[str]:
        """Return who holds ``digest`` (for inspection and tests)."""
        with self._store.engine.connect() as conn:
            rows = conn.execute(
                select(_HOLDERS.c.holder)
                .where(_HOLDERS.c.digest == digest)
                .order_by(_HOLDERS.c.holder)
            )
            return [row[0] for row in rows]

    def _lock(self, conn: Connection, digest: str) -> bool:
        stmt = select(_BLOBS.c.digest).where(_BLOBS.c.digest == digest)
        if self._postgres:
            stmt = stmt.with_for_update()
        return conn.execute(stmt).first() is not None

    def _ensure_bytes(self, conn: Connection, digest: str, data: bytes) -> None:
        if not self._lock(conn, digest):
            conn.execute(
                insert(_BLOBS).values(digest=digest, size=len(data), data=data)
            )
            return
        stored = conn.execute(
            select(_BLOBS.c.data).where(_BLOBS.c.digest == digest)
        ).scalar_one()
        if bytes(stored) != data:  # an edited row: store the true bytes again
            conn.execute(delete(_BLOBS).where(_BLOBS.c.digest == digest))
            conn.execute(
                insert(_BLOBS).values(digest=digest, size=len(data), data=data)
            )

    def _collect(self, conn: Connection, digest: str) -> None:
        if not self._lock(conn, digest):
            return
        held = conn.execute(
            select(func.count())
            .select_from(_HOLDERS)
            .where(_HOLDERS.c.digest == digest)
        ).scalar_one()
        if not held:
            conn.execute(delete(_BLOBS).where(_BLOBS.c.digest == digest))
