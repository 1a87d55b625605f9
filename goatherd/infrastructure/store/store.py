"""The SQLAlchemy trace store: the kernel ABI over SQLite or PostgreSQL.

:class:`SqlAlchemyTraceStore` implements every method of the ``TraceStore``
protocol on one engine; :class:`SQLiteTraceStore` opens it over a SQLite path.
All trace writes go through the one append path (``appending.py`` ->
``writer.py``) inside a serialized write transaction: ``BEGIN IMMEDIATE`` on
SQLite, a ``SELECT ... FOR UPDATE`` of the ``meta`` row on PostgreSQL, so that
log positions are assigned in commit order. Reads fetch set-wise and never
write. Committed, immutable content (records, contexts, verified witnesses) is
cached in-process; the caches are filled only after commit.

The class is assembled here from three modules, one per responsibility:
``transactions.py`` (connections, the write transaction, the commit queue and
what follows a commit), ``writes.py`` (append, cuts, redaction, the chained
head) and ``queries.py`` (every read). This module adds the checkpoint-blob
and materialization ledgers and opens SQLite files.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Self

from goatherd.domain.errors import CheckpointBlobTooLargeError, StoreUnavailableError
from goatherd.domain.log import CheckpointBlob
from goatherd.domain.workspace import WorkspaceState
from goatherd.infrastructure.store import engine as engine_module
from goatherd.infrastructure.store import ledgers
from goatherd.infrastructure.store.checkpointer import WalCheckpointer
from goatherd.infrastructure.store.engine import (
    DURABILITY_LEVELS,
    ensure_schema,
    sqlite_engine,
)
from goatherd.infrastructure.store.limits import DEFAULT_LIMITS, AppendLimits
from goatherd.infrastructure.store.outages import outages
from goatherd.infrastructure.store.queries import StoreQueries
from goatherd.infrastructure.store.reader import DEFAULT_CACHE_BYTES
from goatherd.infrastructure.store.transactions import EffectPublisher
from goatherd.infrastructure.store.writes import StoreWrites

__all__ = [
    "DEFAULT_CHECKPOINT_BLOB_LIMIT",
    "EffectPublisher",
    "SQLiteTraceStore",
    "SqlAlchemyTraceStore",
]

DEFAULT_CHECKPOINT_BLOB_LIMIT = ledgers.DEFAULT_CHECKPOINT_BLOB_LIMIT
_LOG = logging.getLogger(__name__)


class SqlAlchemyTraceStore(StoreWrites, StoreQueries):
    """The trace store over a SQLAlchemy engine (SQLite or PostgreSQL).

    Thread-safe. Appends go through a commit queue (``commits.py``): appends
    that arrive while a commit runs are committed together in the next
    transaction, each with its own receipt or error, returned only after that
    transaction's ``COMMIT``. Across processes, SQLite's write lock serializes
    the transactions; PostgreSQL writers lock only the owners and intents they
    touch. The returned payload objects are shared with the store's cache:
    treat them as read-only.

    ``cache_bytes`` bounds the in-process content cache (default 8 MiB);
    ``limits`` bounds what an append accepts (identifier and payload sizes,
    ``AppendLimits``).
    """

    @property
    def checkpoint_blob_limit(self) -> int:
        """The largest snapshot, in bytes, a checkpoint may persist."""
        return self._blob_limit

    def with_checkpoint_blob_limit(self, limit: int) -> Self:
        """Bound checkpoint snapshots to ``limit`` bytes (<= 0 restores 1 MiB)."""
        self._blob_limit = limit if limit > 0 else DEFAULT_CHECKPOINT_BLOB_LIMIT
        return self

    def persist_checkpoint_blob(
        self,
        checkpoint_id: str,
        scope_id: str,
        seq: int,
        state: WorkspaceState,
        snapshot: bytes,
        created_at_ns: int,
    ) -> None:
        """Persist (or replace) a checkpoint's restorable halves.

        Raises:
            CheckpointBlobTooLargeError: ``snapshot`` is over the limit; nothing
                is written.
            ReadOnlyStoreError: the store is read-only.
        """
        self._refuse_if_read_only()
        if len(snapshot) > self._blob_limit:
            raise CheckpointBlobTooLargeError(
                checkpoint_id, len(snapshot), self._blob_limit
            )
        with self.transaction() as conn:
            ledgers.write_blob(
                conn, checkpoint_id, scope_id, seq, state, snapshot, created_at_ns
            )

    def delete_checkpoint_blob(self, checkpoint_id: str) -> None:
        """Delete a persisted checkpoint (an absent id is fine)."""
        with self.transaction() as conn:
            ledgers.delete_blob(conn, checkpoint_id)

    def load_checkpoint_blobs(
        self,
    ) -> tuple[tuple[CheckpointBlob, ...], tuple[str, ...]]:
        """Return the checkpoints oldest first, and the ids of corrupt rows skipped."""
        with self._reading() as reader:
            return ledgers.load_blobs(reader.conn)

    def read_completed_materialization(self, intent: str) -> tuple[str, str] | None:
        """Return ``(request_digest, receipt_json)`` of an intent's ledger row.

        The receipt is ``materialize``'s JSON: a completed receipt, or the
        started marker of an at-most-once run (ADR 0074).
        """
        with self._reading() as reader:
            return ledgers.read_materialization(reader.conn, intent)

    def record_completed_materialization(
        self, intent: str, request_digest: str, receipt_json: str
    ) -> None:
        """Record a completed materialization (the same digest again is fine).

        Raises:
            AppendIntentConflictError: the intent completed with another digest.
        """
        with self.transaction() as conn:
            ledgers.record_materialization(conn, intent, request_digest, receipt_json)

    def replace_materialization(
        self,
        intent: str,
        request_digest: str,
        expected_receipt_json: str,
        receipt_json: str | None,
    ) -> bool:
        """Swap (or delete, given ``None``) a ledger row still holding the expected.

        Returns whether the row was swapped (ADR 0074).
        """
        with self.transaction() as conn:
            return ledgers.replace_materialization(
                conn, intent, request_digest, expected_receipt_json, receipt_json
            )


class SQLiteTraceStore(SqlAlchemyTraceStore):
    """The trace store over a SQLite file, or ``:memory:`` (one shared connection).

    Creates the schema if absent. Files run in WAL mode with
    ``synchronous=NORMAL`` (``durability="normal"``, survives a process crash)
    or ``FULL`` (``durability="full"``, survives power loss). A writer waits
    ``busy_timeout_ms`` (default 30 s) for another process's write lock, then
    raises ``StoreUnavailableError`` having written nothing. A schema v1 file
    is upgraded to v2 when opened (``migration.py``). ``cache_bytes`` bounds
    the in-process content cache.

    Raises:
        NotATraceStoreError: the file is not a SQLite database, or holds
            other tables but no trace schema.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] = ":memory:",
        *,
        durability: str = "normal",
        busy_timeout_ms: int | None = None,
        cache_bytes: int = DEFAULT_CACHE_BYTES,
        limits: AppendLimits = DEFAULT_LIMITS,
    ) -> None:
        location = os.fspath(path)
        created = _check_location(location)
        engine = sqlite_engine(location, durability, busy_timeout_ms)
        try:
            with outages:
                ensure_schema(engine, _timeout(busy_timeout_ms))
        except BaseException:
            engine.dispose()
            if created:
                _remove_created(location)
            raise
        super().__init__(
            engine,
            serialize_reads=location == ":memory:",
            cache_bytes=cache_bytes,
            busy_timeout_ms=_timeout(busy_timeout_ms),
            limits=limits,
        )
        self.path = location
        try:
            self._link_if_needed()
        except BaseException:
            self.close()
            raise
        if location != ":memory:":
            self._checkpointer = WalCheckpointer(
                location, synchronous=DURABILITY_LEVELS[durability]
            )


def _check_location(location: str) -> bool:
    """Refuse a path no trace can live at; return whether the file is new.

    Raises:
        StoreUnavailableError: a directory, or a missing parent directory.
    """
    if location == ":memory:":
        return False
    file = Path(location)
    try:
        if file.is_dir():
            raise StoreUnavailableError(
                f"cannot open trace store {location}: it is a directory"
            )
        if not file.parent.is_dir():
            raise StoreUnavailableError(
                f"cannot open trace store {location}: directory {file.parent} "
                "does not exist"
            )
        return not file.exists()
    except OSError as error:
        raise StoreUnavailableError(
            f"cannot open trace store {location}: {error.strerror or error}"
        ) from error


def _remove_created(location: str) -> None:
    # Creating the schema failed (a full disk, a read-only directory): leave
    # no empty or half-made file behind, so a retry starts clean.
    for suffix in ("", "-wal", "-shm", "-journal"):
        try:
            Path(location + suffix).unlink()
        except FileNotFoundError:
            continue
        except OSError:
            _LOG.warning("could not remove %s%s", location, suffix, exc_info=True)


def _timeout(busy_timeout_ms: int | None) -> int:
    # Read at call time: tests lower the module default for stores they open.
    return engine_module.BUSY_TIMEOUT_MS if busy_timeout_ms is None else busy_timeout_ms
