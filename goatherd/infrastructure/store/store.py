"""The SQLAlchemy trace store: the kernel ABI over SQLite or PostgreSQL.

:class:`SqlAlchemyTraceStore` implements every method of the ``TraceStore``
protocol on one engine; :class:`SQLiteTraceStore` opens it over a SQLite path.
All trace writes go through the one append path (``appending.py`` ->
``writer.py``) inside a serialized write transaction: ``BEGIN IMMEDIATE`` on
SQLite, a ``SELECT ... FOR UPDATE`` of the ``meta`` row on PostgreSQL, so that
log positions are assigned in commit order. Reads fetch set-wise and never
write. Committed, immutable content (records, contexts, verified witnesses) is
cached in-process; the caches are filled only after commit.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from types import TracebackType
from typing import Protocol, Self

from sqlalchemy import Connection, Engine, func, select

from goatherd.domain.effects import EffectEvent
from goatherd.domain.errors import (
    CheckpointBlobTooLargeError,
    ReadOnlyStoreError,
    ReadRequestError,
    TraceStoreError,
    UnknownFactError,
)
from goatherd.domain.log import CheckpointBlob, LogEntry
from goatherd.domain.records import (
    CLOSURE_POLICIES,
    AppendBatch,
    AppendReceipt,
    ClosurePolicy,
    Cut,
    CutSpec,
    Record,
    RecordBody,
    RecordEnvelope,
    RecordView,
    RetainedContext,
    TraceSlice,
    VisibleRecord,
)
from goatherd.domain.store import AppendAuthority, ReadAuthority
from goatherd.domain.workspace import WorkspaceState
from goatherd.infrastructure.store import ledgers
from goatherd.infrastructure.store.appending import (
    AppendOutcome,
    append_in,
    prepare,
    publish_in,
    read_cutoff,
)
from goatherd.infrastructure.store.authority import (
    append_context,
    publish_context,
    read_context,
)
from goatherd.infrastructure.store.checkpointer import WalCheckpointer
from goatherd.infrastructure.store.codec import decode_receipt
from goatherd.infrastructure.store.engine import (
    BUSY_TIMEOUT_MS,
    DURABILITY_LEVELS,
    WRITE_OPTION,
    ensure_schema,
    sqlite_engine,
)
from goatherd.infrastructure.store.outages import outages
from goatherd.infrastructure.store.plan import (
    StoredState,
    context_requests,
    plan_append,
)
from goatherd.infrastructure.store.reader import ContentCache, StoreReader
from goatherd.infrastructure.store.schema import (
    META_NEXT_COMMIT,
    append_intents,
    contexts,
    owner_ordinals,
    path_entries,
    records,
)
from goatherd.infrastructure.store.slices import (
    assemble_slice,
    check_mode_filter,
    visible_record,
)

__all__ = [
    "DEFAULT_CHECKPOINT_BLOB_LIMIT",
    "EffectPublisher",
    "SQLiteTraceStore",
    "SqlAlchemyTraceStore",
]

DEFAULT_CHECKPOINT_BLOB_LIMIT = ledgers.DEFAULT_CHECKPOINT_BLOB_LIMIT
_LOG = logging.getLogger(__name__)
_NEXT_COMMIT_FOR_UPDATE = "SELECT value FROM meta WHERE key = ? FOR UPDATE"


class EffectPublisher(Protocol):
    """What ``with_bus`` needs of a bus: a non-blocking ``publish``."""

    def publish(self, event: EffectEvent) -> None:
        """Hand ``event`` to the subscribers without blocking."""
        ...


class SqlAlchemyTraceStore:
    """The trace store over a SQLAlchemy engine (SQLite or PostgreSQL).

    Thread-safe: appends of one store object serialize on a re-entrant lock
    and, across processes, on the database's write lock. The returned payload
    objects are shared with the store's cache: treat them as read-only.
    """

    def __init__(
        self,
        engine: Engine,
        *,
        read_only: bool = False,
        serialize_reads: bool = False,
    ) -> None:
        self._engine = engine
        self._write_engine = engine.execution_options(**{WRITE_OPTION: True})
        self._read_only = read_only
        self._serialize_reads = serialize_reads
        self._lock = threading.RLock()
        self._cache = ContentCache()
        self._bus: EffectPublisher | None = None
        self._blob_limit = DEFAULT_CHECKPOINT_BLOB_LIMIT
        self._postgres = engine.dialect.name == "postgresql"
        # SQLite appends reuse one connection (held while the store is open):
        # a pool checkout, reset and checkin per append cost as much as the
        # append's statements. PostgreSQL keeps the pool (and its pre-ping).
        self._hold_writer = not self._postgres
        self._writer: Connection | None = None
        self._checkpointer: WalCheckpointer | None = None

    # ------------------------------------------------------------ lifecycle

    @property
    def engine(self) -> Engine:
        """The store's engine (for adapters that keep their own tables beside it)."""
        return self._engine

    @property
    def read_only(self) -> bool:
        """Whether every write method raises ``ReadOnlyStoreError``."""
        return self._read_only

    def close(self) -> None:
        """Release the store's connections."""
        if self._checkpointer is not None:
            self._checkpointer.close()
        with self._lock:
            if self._writer is not None:
                self._writer.close()
                self._writer = None
        self._engine.dispose()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def with_bus(self, bus: EffectPublisher) -> Self:
        """Publish one ``EffectEvent`` per new ordinary path entry after each commit."""
        self._bus = bus
        return self

    # ---------------------------------------------------------- transactions

    @contextmanager
    def _reading(self) -> Iterator[StoreReader]:
        if self._serialize_reads:
            with outages(), self._lock, self._engine.begin() as conn:
                yield StoreReader(conn, self._cache)
        else:
            with outages(), self._engine.begin() as conn:
                yield StoreReader(conn, self._cache)

    @contextmanager
    def _writing(self) -> Iterator[StoreReader]:
        self._refuse_if_read_only()
        with outages(), self._lock, self._write_transaction() as conn:
            reader = StoreReader(conn, self._cache)
            if self._postgres:
                # The meta row is the serialization point on PostgreSQL;
                # SQLite already holds its write lock since BEGIN IMMEDIATE.
                reader.driver.rows(_NEXT_COMMIT_FOR_UPDATE, (META_NEXT_COMMIT,))
            yield reader

    @contextmanager
    def _write_transaction(self) -> Iterator[Connection]:
        if not self._hold_writer:
            with self._write_engine.begin() as conn:
                yield conn
            return
        if self._writer is None or self._writer.invalidated:
            self._writer = self._write_engine.connect()
        with self._writer.begin():
            yield self._writer

    @contextmanager
    def _appending(self) -> Iterator[StoreReader]:
        """Open an append's write transaction (the caller holds the store lock).

        On SQLite the append's transaction runs straight on the held driver
        connection (``BEGIN IMMEDIATE`` ... ``COMMIT``): SQLAlchemy's begin and
        commit bookkeeping cost about as much as two of the append's
        statements. The append path issues only driver-level statements, so
        the SQLAlchemy connection never sees this transaction.
        """
        if not self._hold_writer:
            with self._writing() as reader:
                yield reader
            return
        self._refuse_if_read_only()
        with outages():
            if self._writer is None or self._writer.invalidated:
                self._writer = self._write_engine.connect()
            raw = self._writer.connection.driver_connection
            assert raw is not None
            raw.execute("BEGIN IMMEDIATE")
            try:
                yield StoreReader(self._writer, self._cache)
                raw.execute("COMMIT")
            except BaseException:
                if raw.in_transaction:
                    raw.execute("ROLLBACK")
                raise

    @contextmanager
    def transaction(self) -> Iterator[Connection]:
        """Open a write transaction serialized with appends, for non-trace tables.

        For adapters that keep their own rows beside the trace (projection
        views, tracking rows). The trace tables are written only by ``append``.
        """
        with self._writing() as reader:
            yield reader.conn
        self._nudge()

    def _nudge(self) -> None:
        if self._checkpointer is not None:
            self._checkpointer.nudge()

    def _refuse_if_read_only(self) -> None:
        if self._read_only:
            raise ReadOnlyStoreError("this trace store was opened read-only")

    # ---------------------------------------------------------------- append

    def append(
        self,
        context: AppendAuthority,
        batch: AppendBatch,
        *,
        expected_heads: Mapping[str, int] | None = None,
    ) -> AppendReceipt:
        """Append ``batch`` atomically, or return the stored receipt of its intent.

        Idempotent by intent: an exact replay (same batch digest) returns the
        stored receipt, across restarts, and writes nothing.

        Raises:
            TraceStoreError: untrusted or wrong context, and the store laws.
            AppendIntentConflictError: the intent committed with other content.
            OrdinalConflictError: an owner head differs from ``expected_heads``.
            UnknownFactError: an unknown causal parent.
            BatchShapeError, RecordInputError: a malformed batch.
            ReadOnlyStoreError: the store is read-only.
        """
        operation = append_context(context)
        self._refuse_if_read_only()
        prepared = prepare(operation, batch)
        # Publish before releasing the store lock, so that the events of one
        # store reach subscribers in commit (position) order.
        with self._lock:
            with self._appending() as reader:
                outcome = append_in(reader, prepared, expected_heads)
            self._after_commit(outcome)
        self._nudge()
        return outcome.receipt

    def preview_record_ids(
        self, context: AppendAuthority, batch: AppendBatch
    ) -> tuple[str, ...]:
        """Return the record ids ``append`` would allocate; persist nothing.

        Parents are not checked for existence and the intent table is not
        consulted.
        """
        operation = append_context(context)
        prepared = prepare(operation, batch)
        requests = context_requests(operation, batch)
        with self._reading() as reader:
            state = StoredState(
                contexts=reader.contexts(r.context_id for r in requests),
                check_parents=False,
            )
        plan = plan_append(operation, batch, prepared.groups, requests, state)
        return plan.receipt.fact_ids

    preview_fact_ids = preview_record_ids

    def publish_cut(self, context: AppendAuthority, spec: CutSpec) -> Cut:
        """Publish an immutable cut through the append path (idempotent by intent).

        Raises:
            TraceStoreError: wrong context or untrusted; a frontier id that
                already names a different cutoff.
            UnknownFactError: the through record is not on the target path.
            BatchShapeError: an empty frontier id or a duplicate parent.
        """
        operation = publish_context(context)
        with self._lock:
            with self._writing() as reader:
                cut, outcome = publish_in(reader, operation, spec)
            self._after_commit(outcome)
        self._nudge()
        return cut

    publish_frontier = publish_cut

    def _after_commit(self, outcome: AppendOutcome) -> None:
        plan = outcome.plan
        if plan is None:
            return
        self._cache.add_contexts(plan.new_contexts)
        self._cache.add_records(
            (
                s.record_id,
                (
                    RecordEnvelope(
                        s.record_id,
                        s.record_id,
                        s.schema_ref,
                        s.mode,
                        s.witness_ref,
                        s.parents,
                    ),
                    RecordBody(s.payload),
                ),
            )
            for s in plan.staged
        )
        with self._cache.lock:
            self._cache.witnesses.update(w.record_id for w in plan.witnesses)
        if self._bus is not None:
            self._publish(outcome)

    def _publish(self, outcome: AppendOutcome) -> None:
        assert self._bus is not None
        assert outcome.plan is not None
        now = datetime.now(UTC)
        intent = outcome.receipt.append_intent_id
        for staged in outcome.plan.staged:
            event = EffectEvent(
                record_id=staged.record_id,
                intent_id=intent,
                trace_owner_id=staged.owner,
                owner_ordinal=staged.ordinal,
                position=staged.position,
                mode=staged.mode,
                schema_ref=staged.schema_ref,
                kind_label=staged.kind_label,
                payload=staged.payload,
                causal_parents=staged.parents,
                timestamp=now,
            )
            try:
                self._bus.publish(event)
            except Exception:
                # The append has committed; a failing bus must not make it
                # look failed. Subscribers repair from the store.
                _LOG.exception("effect bus publish failed for %s", staged.record_id)

    # ----------------------------------------------------------------- reads

    def read_fact(
        self, context: ReadAuthority, record_id: str, visibility: str | None = None
    ) -> VisibleRecord:
        """Read one record through its first path entry in (path, ordinal) order.

        Raises:
            UnknownFactError: ``unknown fact id: X``.
        """
        operation = read_context(context, visibility)
        with self._reading() as reader:
            entry = reader.first_entries((record_id,)).get(record_id)
            if entry is None:
                raise UnknownFactError(f"unknown fact id: {record_id}")
            content = reader.record(record_id)
        return visible_record(content, entry, operation.visibility_profile)

    def read_owner_prefix(
        self,
        context: ReadAuthority,
        owner: str,
        through: int,
        mode_filter: str = "both",
    ) -> TraceSlice:
        """Read an owner path's entries with ordinal <= ``through`` (anchors on)."""
        operation = read_context(context)
        check_mode_filter(mode_filter)
        with self._reading() as reader:
            entries = reader.owner_entries(owner, through)
            return assemble_slice(
                reader,
                entries,
                profile=operation.visibility_profile,
                mode_filter=mode_filter,
                anchors=True,
            )

    read_path_prefix = read_owner_prefix

    def read_causal_closure(
        self,
        context: ReadAuthority,
        roots: Sequence[str],
        *,
        visibility: str | None = None,
        mode_filter: str = "both",
        closure_policy: str = "include_external_anchors",
    ) -> TraceSlice:
        """Read ``roots`` and all their causal ancestors, each once at its first entry.

        Raises:
            UnknownFactError: an unknown root.
            ReadRequestError: an unknown mode filter or closure policy.
        """
        operation = read_context(context, visibility)
        check_mode_filter(mode_filter)
        if closure_policy not in CLOSURE_POLICIES:
            raise ReadRequestError(f"unknown closure policy: {closure_policy}")
        with self._reading() as reader:
            entries = reader.closure_entries(list(dict.fromkeys(roots)))
            return assemble_slice(
                reader,
                entries,
                profile=operation.visibility_profile,
                mode_filter=mode_filter,
                anchors=closure_policy == ClosurePolicy.INCLUDE_EXTERNAL_ANCHORS,
            )

    def read_owner_cutoff(self, frontier_id: str) -> Cut:
        """Return the verified cut of ``frontier_id`` (no context, no authorization).

        Raises:
            UnknownFrontierError: no such frontier.
            TraceStoreError: the retained record and the index disagree.
        """
        with self._reading() as reader:
            return read_cutoff(reader, frontier_id)

    def resolve_cut(
        self,
        context: ReadAuthority,
        cut_id: str,
        visibility: str | None = None,
        mode_filter: str = "both",
    ) -> TraceSlice:
        """Resolve a published cut into its slice (later appends never change it).

        Raises:
            UnknownFrontierError: no such cut.
            UnknownFactError: the through record moved off its entry.
        """
        operation = read_context(context, visibility)
        check_mode_filter(mode_filter)
        with self._reading() as reader:
            cut = read_cutoff(reader, cut_id)
            entries = reader.owner_entries(
                cut.target_trace_owner_id, cut.through_owner_ordinal
            )
            if (
                not entries
                or entries[-1].ordinal != cut.through_owner_ordinal
                or (entries[-1].record_id != cut.through_fact_id)
            ):
                raise UnknownFactError(
                    f"unknown fact path entry: {cut.through_fact_id}"
                )
            return assemble_slice(
                reader,
                entries,
                profile=operation.visibility_profile,
                mode_filter=mode_filter,
                anchors=True,
                frontier=cut,
            )

    resolve_frontier = resolve_cut

    def read_context(self, context_id: str) -> RetainedContext:
        """Return a stored retained context (diagnostic, no authorization).

        Raises:
            TraceStoreError: ``unknown context id: X``.
        """
        with self._reading() as reader:
            found = reader.contexts((context_id,)).get(context_id)
        if found is None:
            raise TraceStoreError(f"unknown context id: {context_id}")
        return found

    def fact_count(self) -> int:
        """Return the number of retained records, witnesses included."""
        return self._scalar(select(func.count()).select_from(records))

    def context_count(self) -> int:
        """Return the number of retained contexts."""
        return self._scalar(select(func.count()).select_from(contexts))

    def read_append_intent(self, intent_id: str) -> AppendReceipt | None:
        """Return the stored receipt of a committed intent, or ``None``."""
        with self._reading() as reader:
            text = reader.conn.execute(
                select(append_intents.c.receipt_json).where(
                    append_intents.c.append_intent_id == intent_id
                )
            ).scalar_one_or_none()
        return None if text is None else decode_receipt(text)

    def head(self, owner: str) -> int:
        """Return the owner's stored next ordinal (0 for an unknown owner)."""
        with self._reading() as reader:
            value = reader.conn.execute(
                select(owner_ordinals.c.next_ordinal).where(
                    owner_ordinals.c.trace_owner_id == owner
                )
            ).scalar_one_or_none()
        return 0 if value is None else int(value)

    def read_log(
        self,
        after: int = -1,
        limit: int = 1000,
        *,
        schema_refs: Collection[str] | None = None,
    ) -> tuple[LogEntry, ...]:
        """Return ordinary path entries with position > ``after``, ascending."""
        stmt = (
            select(*_LOG_COLUMNS)
            .where(path_entries.c.position > after)
            .order_by(path_entries.c.position)
            .limit(max(limit, 0))
        )
        if schema_refs is not None:
            stmt = stmt.join(
                records, records.c.record_id == path_entries.c.record_id
            ).where(records.c.schema_ref.in_(list(schema_refs)))
        return self._log_entries(stmt)

    def max_position(self) -> int:
        """Return the highest committed log position (-1 when empty)."""
        with self._reading() as reader:
            value = reader.conn.execute(
                select(func.max(path_entries.c.position))
            ).scalar()
        return -1 if value is None else int(value)

    def read_path(
        self, owner: str, after_ordinal: int = -1, limit: int | None = None
    ) -> tuple[LogEntry, ...]:
        """Return ``owner``'s path entries with ordinal > ``after_ordinal``, in order.

        Witness path entries (which have no log position) report position -1.
        """
        stmt = (
            select(*_LOG_COLUMNS)
            .where(path_entries.c.path_ref == owner)
            .where(path_entries.c.path_ordinal > after_ordinal)
            .order_by(path_entries.c.path_ordinal)
        )
        if limit is not None:
            stmt = stmt.limit(max(limit, 0))
        return self._log_entries(stmt)

    def scan_records_by_schema(self, *schema_refs: str) -> tuple[LogEntry, ...]:
        """Return every path entry of records with these schemas, by (path, ordinal).

        Witness path entries (which have no log position) report position -1.
        """
        stmt = (
            select(*_LOG_COLUMNS)
            .join(records, records.c.record_id == path_entries.c.record_id)
            .where(records.c.schema_ref.in_(list(schema_refs)))
            .order_by(path_entries.c.path_ref, path_entries.c.path_ordinal)
        )
        return self._log_entries(stmt)

    def _log_entries(self, stmt: object) -> tuple[LogEntry, ...]:
        with self._reading() as reader:
            rows = list(reader.conn.execute(stmt))  # type: ignore[call-overload]
            contents = reader.records(row.record_id for row in rows)
        entries = []
        for row in rows:
            envelope, body = contents[row.record_id]
            view = RecordView(
                row.path_ref,
                int(row.path_ordinal),
                row.retained_context_ref,
                row.kind_label,
            )
            entries.append(
                LogEntry(
                    position=-1 if row.position is None else int(row.position),
                    append_intent_id=row.append_intent_id,
                    record=Record(envelope=envelope, body=body, view=view),
                )
            )
        return tuple(entries)

    def _scalar(self, stmt: object) -> int:
        with self._reading() as reader:
            return int(reader.conn.execute(stmt).scalar_one())  # type: ignore[call-overload]

    # ------------------------------------------------------- checkpoint blobs

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

    # ------------------------------------------------ materialization ledger

    def read_completed_materialization(self, intent: str) -> tuple[str, str] | None:
        """Return ``(request_digest, receipt_json)`` of a completed intent."""
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


class SQLiteTraceStore(SqlAlchemyTraceStore):
    """The trace store over a SQLite file, or ``:memory:`` (one shared connection).

    Creates the schema if absent. Files run in WAL mode with
    ``synchronous=NORMAL`` (``durability="normal"``, survives a process crash)
    or ``FULL`` (``durability="full"``, survives power loss). A writer waits
    ``busy_timeout_ms`` (default 30 s) for another process's write lock, then
    raises ``StoreUnavailableError`` having written nothing.

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
    ) -> None:
        location = os.fspath(path)
        engine = sqlite_engine(location, durability, busy_timeout_ms)
        try:
            ensure_schema(engine, busy_timeout_ms or BUSY_TIMEOUT_MS)
        except BaseException:
            engine.dispose()
            raise
        super().__init__(engine, serialize_reads=location == ":memory:")
        self.path = location
        if location != ":memory:":
            self._checkpointer = WalCheckpointer(
                location, synchronous=DURABILITY_LEVELS[durability]
            )


_LOG_COLUMNS = (
    path_entries.c.record_id,
    path_entries.c.path_ref,
    path_entries.c.path_ordinal,
    path_entries.c.retained_context_ref,
    path_entries.c.kind_label,
    path_entries.c.position,
    path_entries.c.append_intent_id,
)
