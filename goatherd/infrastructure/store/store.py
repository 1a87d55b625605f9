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

import dataclasses
import json
import logging
import os
import select as select_module
import threading
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol, Self, TypeVar

from sqlalchemy import Connection, Engine, and_, func, select

from goatherd.domain.contexts import OperationContext
from goatherd.domain.effects import EffectEvent
from goatherd.domain.errors import (
    CheckpointBlobTooLargeError,
    DomainError,
    ReadOnlyStoreError,
    ReadRequestError,
    StoreUnavailableError,
    TraceStoreError,
    UnknownFactError,
)
from goatherd.domain.log import CheckpointBlob, LogEntry
from goatherd.domain.materialization import MAX_OWNER_ORDINAL
from goatherd.domain.records import (
    CLOSURE_POLICIES,
    AppendBatch,
    AppendReceipt,
    ClosurePolicy,
    Cut,
    CutSpec,
    Record,
    RecordEnvelope,
    RecordView,
    RetainedContext,
    TraceSlice,
    VisibleRecord,
)
from goatherd.domain.store import AppendAuthority, ReadAuthority
from goatherd.domain.workspace import WorkspaceState
from goatherd.infrastructure.store import engine as engine_module
from goatherd.infrastructure.store import ledgers
from goatherd.infrastructure.store import postgres as pg
from goatherd.infrastructure.store.authority import (
    append_context,
    publish_context,
    read_context,
)
from goatherd.infrastructure.store.chain import ChainReport, TraceHead, parse_head
from goatherd.infrastructure.store.checkpointer import WalCheckpointer
from goatherd.infrastructure.store.codec import decode_receipt, decode_record
from goatherd.infrastructure.store.commits import CommitQueue
from goatherd.infrastructure.store.driver import Driver, placeholders
from goatherd.infrastructure.store.engine import (
    BUSY_TIMEOUT_MS,
    DURABILITY_LEVELS,
    WRITE_OPTION,
    begin_immediate,
    ensure_schema,
    sqlite_engine,
)
from goatherd.infrastructure.store.limits import (
    DEFAULT_LIMITS,
    INT64_MAX,
    AppendLimits,
    check_expected_heads,
    check_int,
    check_text,
)
from goatherd.infrastructure.store.outages import outages
from goatherd.infrastructure.store.postgres import SAFE_SQL
from goatherd.infrastructure.store.reader import (
    DEFAULT_CACHE_BYTES,
    CachedRecord,
    ContentCache,
    StoreReader,
    record_size,
)
from goatherd.infrastructure.store.schema import (
    SCHEMA_V1,
    SCHEMA_VERSION,
    append_intents,
    contexts,
    owner_ordinals,
    path_entries,
    records,
)
from goatherd.infrastructure.store.sealing import (
    linked_head,
    read_head,
    seal,
    verify_chain,
)
from goatherd.infrastructure.store.slices import (
    assemble_slice,
    check_mode_filter,
    visible_record,
)

if TYPE_CHECKING:
    from goatherd.infrastructure.store.appending import Member
    from goatherd.infrastructure.store.redaction import ErasedBodies, Redaction
    from goatherd.infrastructure.store.staging import MemberPlan

# The append path (``appending``, ``plan``, ``staging``, ``writer``), the
# redaction and the erasure modules are imported by the methods that run
# them: a read-only command never loads them, nor the runtime events' decoders
# the plan validates payloads with (ADR 0089).

__all__ = [
    "DEFAULT_CHECKPOINT_BLOB_LIMIT",
    "EffectPublisher",
    "SQLiteTraceStore",
    "SqlAlchemyTraceStore",
]

DEFAULT_CHECKPOINT_BLOB_LIMIT = ledgers.DEFAULT_CHECKPOINT_BLOB_LIMIT
_LOG = logging.getLogger(__name__)
_R = TypeVar("_R")
_TAIL_SQL = "SELECT max(position) FROM path_entries"
_ADAPTER_LOCK_SQL = f"SELECT pg_advisory_xact_lock(1617391936 # {pg.TRACE_SALT})"


_T = TypeVar("_T")


class EffectPublisher(Protocol):
    """What ``with_bus`` needs of a bus: a non-blocking ``publish``."""

    def publish(self, event: EffectEvent) -> None:
        """Hand ``event`` to the subscribers without blocking."""
        ...


class SqlAlchemyTraceStore:
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

    def __init__(
        self,
        engine: Engine,
        *,
        read_only: bool = False,
        serialize_reads: bool = False,
        cache_bytes: int = DEFAULT_CACHE_BYTES,
        schema: str = SCHEMA_VERSION,
        busy_timeout_ms: int = BUSY_TIMEOUT_MS,
        limits: AppendLimits = DEFAULT_LIMITS,
    ) -> None:
        if not isinstance(limits, AppendLimits):
            raise TypeError(
                f"limits must be an AppendLimits, got {type(limits).__name__}"
            )
        self._limits = limits
        self._engine = engine
        self._schema = schema
        self._busy_timeout_ms = busy_timeout_ms
        self._write_engine = engine.execution_options(**{WRITE_OPTION: True})
        self._read_only = read_only
        self._serialize_reads = serialize_reads
        self._lock = threading.RLock()
        self._cache = ContentCache(cache_bytes)
        self._bus: EffectPublisher | None = None
        self._blob_limit = DEFAULT_CHECKPOINT_BLOB_LIMIT
        self._postgres = engine.dialect.name == "postgresql"
        self._high_water = self._postgres and schema != SCHEMA_V1
        # Appends reuse one connection (held while the store is open): a pool
        # checkout, reset and checkin (and on PostgreSQL a pre-ping round
        # trip) per append cost as much as the append's own statements.
        self._writer: Connection | None = None
        self._checkpointer: WalCheckpointer | None = None
        self._queue: CommitQueue[Member] = CommitQueue(self._commit_group)
        self._contexts: dict[object, OperationContext] = {}
        self._shared: dict[str, object] = {}
        # The highest position this store object committed (PostgreSQL
        # readers of this store wait until every append below it ended).
        self._own_position = -1

    # ------------------------------------------------------------ lifecycle

    def shared(self, key: str, build: Callable[[], _T]) -> _T:
        """Return the adapter this store object shares under ``key`` (built once).

        Adapters that must be one per store object in a process (the runtime
        model, the blob store) live here: they go when the store goes.
        """
        with self._lock:
            found = self._shared.get(key)
            if found is None:
                found = build()
                self._shared[key] = found
            return found  # type: ignore[return-value]

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
                # Discarded, not pooled: its busy timeout is the append path's.
                self._writer.invalidate()
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

    def _reading(self) -> AbstractContextManager[StoreReader]:
        if self._serialize_reads:
            return _locked_read(self._lock, self._engine, self._cache)
        return _read(self._engine, self._cache)

    def _held_writer(self) -> Connection:
        """Return the held write connection, (re)connecting when needed.

        Instead of a pre-ping round trip, an idle PostgreSQL connection is
        checked for pending input: a server that ended the session left its
        goodbye (or end of file) on the socket, so a readable idle socket
        means a dead connection, replaced before the append uses it.
        """
        writer = self._writer
        if (
            writer is not None
            and self._postgres
            and not writer.invalidated
            and _has_pending_input(writer.connection.driver_connection)
        ):
            writer.invalidate()
        if writer is None or writer.invalidated or writer.closed:
            if writer is not None:
                writer.close()
            writer = self._writer = self._write_engine.connect()
            if not self._postgres:
                # This connection waits for other writers in begin_immediate
                # (fine-grained), never in SQLite's busy handler.
                writer.exec_driver_sql("PRAGMA busy_timeout=0")
                writer.rollback()
        return writer

    def _write(self, work: Callable[[StoreReader], _R], *, pipeline: bool = True) -> _R:
        """Run ``work`` in one write transaction on the held connection.

        Driver-level ``BEGIN IMMEDIATE``/``COMMIT`` on SQLite (SQLAlchemy's
        begin and commit bookkeeping cost about as much as two statements),
        the connection's own transaction on PostgreSQL, pipelined unless
        ``work`` streams with server-side cursors. The caller holds the store
        lock.
        """
        self._refuse_if_read_only()
        try:
            with outages:
                writer = self._held_writer()
                raw = writer.connection.driver_connection
                assert raw is not None
                reader = StoreReader(writer, self._cache)
                if self._postgres:
                    result = _pipelined(raw, lambda: work(reader), pipeline)
                else:
                    begin_immediate(raw, self._busy_timeout_ms)
                    try:
                        result = work(reader)
                        raw.execute("COMMIT")
                    except BaseException:
                        _rollback(raw, False)
                        raise
        except StoreUnavailableError:
            if self._writer is not None:
                self._writer.invalidate()
            raise
        return result

    @contextmanager
    def transaction(self) -> Iterator[Connection]:
        """Open a write transaction for adapters' own rows beside the trace.

        For projection views, tracking rows and snapshots. Such transactions
        are serialized with each other across processes (SQLite's write lock;
        an advisory lock on PostgreSQL) and, in this process, with this
        store's appends. The trace tables are written only by ``append`` (and
        by an import into an empty store).
        """
        self._refuse_if_read_only()
        with self._lock:
            try:
                with outages:
                    writer = self._held_writer()
                    with writer.begin():
                        if self._postgres:
                            writer.exec_driver_sql(_ADAPTER_LOCK_SQL)
                        yield writer
            except StoreUnavailableError:
                if self._writer is not None:
                    self._writer.invalidate()
                raise
        self._nudge()

    def _nudge(self) -> None:
        if self._checkpointer is not None:
            self._checkpointer.nudge()

    def _refuse_if_read_only(self) -> None:
        if self._read_only:
            raise ReadOnlyStoreError("this trace store was opened read-only")

    def _safe_position(self) -> int:
        """Return the log position every reader may read up to (PostgreSQL).

        At or below it every append has ended (ADR 0036). A store also reads
        its own appends: when it committed past that mark, it waits (up to
        its busy timeout) for the appends still running below them.

        Raises:
            StoreUnavailableError: an append below this store's own stayed
                unfinished beyond the busy timeout.
        """
        deadline = None
        delay = 0.0005
        while True:
            with self._reading() as reader:
                ((safe,),) = reader.driver.rows(SAFE_SQL)
            position = int(safe[0])
            if position >= self._own_position:
                return position
            now = time.monotonic()
            if deadline is None:
                deadline = now + self._busy_timeout_ms / 1000
            elif now >= deadline:
                raise StoreUnavailableError(
                    f"trace store unavailable: an append below position "
                    f"{self._own_position} has not finished in "
                    f"{self._busy_timeout_ms} ms"
                )
            time.sleep(delay)
            delay = min(delay * 2, 0.02)

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

        Every refusal is a :class:`TraceStoreError`, and nothing of a refused
        batch is written.

        Raises:
            ContextTypeError: ``context`` is no write context (``None``, a
                read context).
            TraceStoreError: untrusted or wrong context, and the store laws.
            AppendIntentConflictError: the intent committed with other content.
            OrdinalConflictError: an owner head differs from ``expected_heads``.
            UnknownFactError: an unknown causal parent.
            BatchRefusedError, RecordRefusedError, PayloadRefusedError: a
                malformed batch (an :class:`AppendRefusedError`, and also the
                ``BatchShapeError``, ``RecordInputError`` or
                ``CanonicalEncodingError`` the check found).
            RuntimeRecordRefusedError: a runtime record the runtime cannot fold.
            UnheldBlobError: a runtime record naming bytes no blob holder holds.
            ReadOnlyStoreError: the store is read-only.
            StoreUnavailableError: the database could not commit.
        """
        operation = self._append_context(context)
        self._refuse_if_read_only()
        from goatherd.infrastructure.store.appending import Member
        from goatherd.infrastructure.store.door import refused
        from goatherd.infrastructure.store.plan import prepare

        try:
            check_expected_heads(expected_heads)
            prepared = prepare(operation, batch, self._cache.contexts, self._limits)
        except DomainError as error:
            wrapped = refused(error)
            if wrapped is error:
                raise
            raise wrapped from error
        member = Member(prepared, expected_heads)
        self._queue.submit(member)
        if member.error is not None:
            if isinstance(member.error, DomainError):
                raise refused(member.error)
            raise member.error
        assert member.outcome is not None
        return member.outcome.receipt

    def _append_context(self, context: object) -> OperationContext:
        # Contexts are frozen values, mostly one per process: coerce each once.
        try:
            found = self._contexts.get(context)
        except TypeError:
            return append_context(context)
        if found is None:
            found = append_context(context)
            if len(self._contexts) < 64:
                self._contexts[context] = found
        return found

    def _commit_group(self, members: list[Member]) -> None:
        """Commit one group (the commit queue's leader calls this)."""
        from goatherd.infrastructure.store.appending import run_group

        try:
            with self._lock:
                plans = self._write(lambda reader: run_group(reader, members))
                self._after_commit(plans)
        except Exception as error:
            for member in members:
                member.outcome = None
            if len(members) == 1 or isinstance(error, StoreUnavailableError):
                for member in members:
                    member.error = error
                return
            # Not one member's own error: find whose, committing the others.
            for member in members:
                member.error = None
                self._commit_group([member])
        except BaseException as error:
            for member in members:
                if not member.finished:
                    member.error = error
            raise
        finally:
            self._nudge()

    def preview_record_ids(
        self, context: AppendAuthority, batch: AppendBatch
    ) -> tuple[str, ...]:
        """Return the record ids ``append`` would allocate; persist nothing.

        Parents are not checked for existence, the intent table is not
        consulted and named blobs are not looked up; a batch ``append`` would
        refuse as malformed is refused the same way (an
        :class:`AppendRefusedError`).
        """
        from goatherd.infrastructure.store.door import refused
        from goatherd.infrastructure.store.plan import prepare, resolve_ids

        operation = append_context(context)
        try:
            prepared = prepare(operation, batch, self._cache.contexts, self._limits)
            if prepared.deferred is not None:
                raise prepared.deferred
            ids = prepared.ids
            if ids is None:
                with self._reading() as reader:
                    stored = reader.contexts(prepared.reused_contexts())
                ids = resolve_ids(prepared, stored)
        except DomainError as error:
            wrapped = refused(error)
            if wrapped is error:
                raise
            raise wrapped from error
        return tuple(found.record_id for found in ids)

    preview_fact_ids = preview_record_ids

    def publish_cut(self, context: AppendAuthority, spec: CutSpec) -> Cut:
        """Publish an immutable cut through the append path (idempotent by intent).

        Raises:
            TraceStoreError: wrong context or untrusted; a frontier id that
                already names a different cutoff.
            UnknownFactError: the through record is not on the target path.
            BatchShapeError: an empty frontier id or a duplicate parent.
        """
        from goatherd.infrastructure.store.appending import publish_in

        operation = publish_context(context)
        with self._lock:
            cut, _, plans = self._write(
                lambda reader: publish_in(reader, operation, spec, self._cache.contexts)
            )
            self._after_commit(plans)
        self._nudge()
        return cut

    publish_frontier = publish_cut

    def redact(
        self,
        context: AppendAuthority,
        redaction_id: str,
        record_ids: Collection[str],
        reason: str,
        *,
        compact: bool = False,
        wait_seconds: float | None = None,
    ) -> Redaction:
        """Erase the payloads of ``record_ids`` by a recorded redaction (ADR 0062).

        In one transaction: appends a ``goatherd.trace.redaction.v1`` record on
        ``goatherd:redactions`` naming every erased id and ``reason`` (idempotent
        under ``redaction_id`` like every append), and replaces each erased
        record's stored body with ``{"redacted_by":"<redaction record id>"}``.
        Ids, schemas, modes, witnesses, parents and path entries stay, and so
        does the head chain. On SQLite the transaction runs with
        ``secure_delete``, the WAL is then checkpointed and truncated (waiting
        up to the store's busy timeout for readers on an old snapshot and for
        the background checkpointer), and the file and its ``-wal`` are read
        back for pieces of every erased body: ``Redaction.wal_truncated`` and
        ``Redaction.bytes_left`` say what remains, if anything.

        On PostgreSQL the old row versions stay in the table files; with
        ``compact`` the store then runs ``VACUUM (FULL)`` of the payload
        tables, ``CHECKPOINT`` and ``pg_switch_wal()`` where the role may,
        reads the table files and ``pg_wal`` back for the erased bytes and
        lists what remains (ADR 0077): ``Redaction.steps``,
        ``Redaction.remains``, ``Redaction.bytes_left``,
        ``Redaction.complete``. ``VACUUM (FULL)`` locks each table it rewrites
        against every reader and writer while it runs; a transaction open
        since before the redaction keeps the old row versions through a
        rewrite, so the store rewrites again until they are gone or
        ``wait_seconds`` (default: the busy timeout, 30 s) passed.

        Raises:
            RedactionRefusedError: a witness, a redaction record, a runtime or
                frontier record, an already erased record, or a bad request.
            UnknownFactError: an id that names no record.
            AppendIntentConflictError: ``redaction_id`` committed other content.
            ReadOnlyStoreError, StoreUnavailableError: as for ``append``.
        """
        from goatherd.infrastructure.store.redaction import redact_in, redaction_batch

        operation = self._append_context(context)
        self._refuse_if_read_only()
        batch = redaction_batch(redaction_id, record_ids, reason)
        contexts, limits = self._cache.contexts, self._limits
        with self._lock:
            raw = None if self._postgres else self._held_writer_raw()
            if raw is not None:
                with outages:
                    raw.execute("PRAGMA secure_delete=ON")
            try:
                redaction, plans, old = self._write(
                    lambda r: redact_in(r, operation, batch, contexts, limits)
                )
            finally:
                if raw is not None:
                    _secure_delete_off(raw)
            self._cache.forget_records(set(redaction.erased))
            self._after_commit(plans)
            if raw is not None and plans:
                redaction = self._check_erased(raw, redaction, old.bodies)
        if self._postgres:
            wait = (
                self._busy_timeout_ms / 1000 if wait_seconds is None else wait_seconds
            )
            redaction = self._check_erased_pg(redaction, old, compact, wait)
        self._nudge()
        return redaction

    def _check_erased_pg(
        self, redaction: Redaction, old: ErasedBodies, compact: bool, wait: float
    ) -> Redaction:
        """PostgreSQL: compact when asked, then say what remains (ADR 0077)."""
        from goatherd.infrastructure.store.erasure_pg import compact as pg_compact
        from goatherd.infrastructure.store.erasure_pg import (
            not_compacted as pg_not_compacted,
        )

        if not compact:
            report = pg_not_compacted()
        else:
            try:
                with outages:
                    report = pg_compact(self._engine, old.bodies, old.compressed, wait)
            except StoreUnavailableError as error:
                # Committed already: the erasure stands; what the server still
                # holds is unknown, so it is reported as left.
                _LOG.exception("compacting after a redaction failed")
                report = pg_not_compacted()
                report.remains.insert(0, f"compaction: stopped ({error})")
                report.bytes_left.update(old.bodies)
        return dataclasses.replace(
            redaction,
            bytes_left=tuple(sorted(report.bytes_left)),
            steps=tuple(report.steps),
            remains=tuple(report.remains),
        )

    def _check_erased(
        self, raw: Any, redaction: Redaction, old: dict[str, str]
    ) -> Redaction:
        """Checkpoint and truncate the WAL, then look for the erased bytes."""
        from goatherd.infrastructure.store.erasure import (
            bytes_left,
            live_pieces,
            truncate_wal,
        )

        try:
            with outages:
                truncated = truncate_wal(raw, self._busy_timeout_ms / 1000)
                left = bytes_left(raw, old, live_pieces(raw, old))
        except StoreUnavailableError:
            # Committed already: the erasure stands; what the disk still
            # holds is unknown, so it is reported as left.
            _LOG.exception("checking the erased bytes after a redaction failed")
            return dataclasses.replace(
                redaction, wal_truncated=False, bytes_left=tuple(sorted(old))
            )
        return dataclasses.replace(redaction, wal_truncated=truncated, bytes_left=left)

    def _held_writer_raw(self) -> Any:
        with outages:
            raw = self._held_writer().connection.driver_connection
        assert raw is not None
        return raw

    def _after_commit(self, plans: list[MemberPlan]) -> None:
        for plan in plans:
            if plan.records:
                self._own_position = max(self._own_position, plan.records[-1].position)
        cache = self._cache
        cache.add_contexts(c for plan in plans for c in plan.new_contexts)
        cache.add_records(
            (
                r.record_id,
                (
                    RecordEnvelope(
                        r.record_id,
                        r.record_id,
                        r.schema_ref,
                        r.mode,
                        r.witness_ref,
                        r.parents,
                    ),
                    '{"payload":' + r.payload_json + "}",
                ),
                record_size(r.payload_json, decoded=False),
            )
            for plan in plans
            for r in plan.records
        )
        witnesses = [w.record_id for plan in plans for w, _ in plan.new_witnesses]
        if witnesses:
            with cache.lock:
                cache.witnesses.update(witnesses)
        if self._bus is not None:
            for plan in plans:
                self._publish(plan)

    def _publish(self, plan: MemberPlan) -> None:
        assert self._bus is not None
        now = datetime.now(UTC)
        intent = plan.prepared.intent_id
        for staged in plan.records:
            event = EffectEvent(
                record_id=staged.record_id,
                intent_id=intent,
                trace_owner_id=staged.owner,
                owner_ordinal=staged.ordinal,
                position=staged.position,
                mode=staged.mode,
                schema_ref=staged.schema_ref,
                kind_label=staged.kind_label,
                payload=json.loads(staged.payload_json),
                causal_parents=staged.parents,
                timestamp=now,
            )
            try:
                self._bus.publish(event)
            except Exception:
                # The append has committed; a failing bus must not make it
                # look failed. Subscribers repair from the store.
                _LOG.exception("effect bus publish failed for %s", staged.record_id)

    # ----------------------------------------------------------------- chain

    def trace_head(self) -> TraceHead:
        """Return the trace's head: how many commits, and the chained digest.

        Note it down outside the trace (``str(head)``); a later
        ``verify_chain(expect=head)`` tells whether anything it covers was
        rewritten or truncated since. A writable store links any commit not
        linked yet first (PostgreSQL writers link lazily, ADR 0038); a
        read-only store computes those links without storing them.
        """
        if not self._read_only:
            return self.seal()
        with self._reading() as reader:
            return self._head_of(reader.driver)

    def head_at(self, conn: Connection) -> TraceHead:
        """Return the head as ``conn``'s snapshot sees it; never writes.

        For a reader that must name the head of exactly what it read in one
        transaction (``export`` writes it into its end line).
        """
        return self._head_of(Driver(conn))

    def _head_of(self, driver: Driver) -> TraceHead:
        if not self._legacy:
            head = linked_head(driver, side=self._side)
            if head is not None:
                return head
        return verify_chain(driver, legacy=self._legacy, side=self._side).head

    def _link_if_needed(self) -> None:
        """Link a trace a previous version (or an import) left unlinked.

        On PostgreSQL every writer seals when it opens, which also records the
        numbers a writer that died before its ``COMMIT`` abandoned (ADR 0076).
        """
        with self._reading() as reader:
            _, digest = read_head(reader.driver)
        if digest is None or self._postgres:
            self.seal()

    def seal(self) -> TraceHead:
        """Link every commit that can be linked now; return the stored head.

        Idempotent. Needed explicitly only after rows were written other than
        by ``append`` (an import into an empty store); appends link themselves
        (SQLite) or are linked by the next ``trace_head``/``seal`` (PostgreSQL).

        Raises:
            ReadOnlyStoreError: the store is read-only.
            TraceStoreError: a row too malformed to digest (``verify`` says more).
        """
        with self._lock:
            return self._write(lambda reader: seal(reader.driver), pipeline=False)

    def verify_chain(self, expect: str | TraceHead | None = None) -> ChainReport:
        """Recompute the whole chain from the rows and compare it with the stored.

        Never writes. ``expect``: a head noted earlier (``TraceHead`` or its
        printed form); ``report.expected`` says whether the trace still has it.

        Raises:
            ValueError: ``expect`` is not a head.
        """
        wanted = parse_head(expect) if isinstance(expect, str) else expect
        with self._reading() as reader:
            return verify_chain(
                reader.driver, wanted, legacy=self._legacy, side=self._side
            )

    @property
    def _legacy(self) -> bool:
        """A schema v1 trace read as it is (numbered as its upgrade will)."""
        return self._schema == SCHEMA_V1

    @property
    def _side(self) -> bool:
        """Whether the trace has ``side_writes`` (schema v3, ADR 0064)."""
        return self._schema == SCHEMA_VERSION

    # ----------------------------------------------------------------- reads

    def read_fact(
        self, context: ReadAuthority, record_id: str, visibility: str | None = None
    ) -> VisibleRecord:
        """Read one record through its first path entry in (path, ordinal) order.

        Raises:
            UnknownFactError: ``unknown fact id: X``.
        """
        operation = read_context(context, visibility)
        check_text(record_id, "record_id")
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
        through: int = MAX_OWNER_ORDINAL,
        mode_filter: str = "both",
    ) -> TraceSlice:
        """Read an owner path's entries with ordinal <= ``through`` (default: all)."""
        operation = read_context(context)
        check_mode_filter(mode_filter)
        check_text(owner, "owner")
        check_int(through, "through", -(2**63))
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
        from goatherd.infrastructure.store.appending import read_cutoff

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
        from goatherd.infrastructure.store.appending import read_cutoff

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
        check_text(intent_id, "intent_id")
        with self._reading() as reader:
            text = reader.conn.execute(
                select(append_intents.c.receipt_json).where(
                    append_intents.c.append_intent_id == intent_id
                )
            ).scalar_one_or_none()
        return None if text is None else decode_receipt(text)

    def heads(self, owners: Collection[str]) -> dict[str, int]:
        """Return each owner's stored next ordinal (0 for an unknown owner), at once."""
        wanted = sorted({check_text(owner, "owner") for owner in owners})
        if not wanted:
            return {}
        with self._reading() as reader:
            rows = reader.conn.execute(
                select(
                    owner_ordinals.c.trace_owner_id, owner_ordinals.c.next_ordinal
                ).where(owner_ordinals.c.trace_owner_id.in_(wanted))
            ).all()
        found = {str(owner): int(value) for owner, value in rows}
        return {owner: found.get(owner, 0) for owner in wanted}

    def head_records(self, owners: Collection[str]) -> dict[str, tuple[int, str]]:
        """Return each owner's next ordinal and the record id at its head, at once.

        The record id is ``""`` for an empty (or unknown) path. Both come from
        one statement, so the id is the record at exactly that head: what an
        append guarded by that head cites as the path's head (ADR 0087).
        """
        wanted = sorted({check_text(owner, "owner") for owner in owners})
        if not wanted:
            return {}
        owner: Any = owner_ordinals.c.trace_owner_id
        if self._postgres:  # path_ref is C-collated: compare in that collation
            owner = owner.collate("C")
        joined = owner_ordinals.outerjoin(
            path_entries,
            and_(
                path_entries.c.path_ref == owner,
                path_entries.c.path_ordinal == owner_ordinals.c.next_ordinal - 1,
            ),
        )
        stmt = (
            select(
                owner_ordinals.c.trace_owner_id,
                owner_ordinals.c.next_ordinal,
                path_entries.c.record_id,
            )
            .select_from(joined)
            .where(owner_ordinals.c.trace_owner_id.in_(wanted))
        )
        with self._reading() as reader:
            rows = reader.conn.execute(stmt).all()
        found = {str(o): (int(n), str(r or "")) for o, n, r in rows}
        return {o: found.get(o, (0, "")) for o in wanted}

    def intent_committed_at(self, intent_id: str) -> datetime | None:
        """Return when an intent committed (the ledger's clock; ``None``: not).

        Informational: commit times are outside every record's identity.
        """
        check_text(intent_id, "intent_id")
        with self._reading() as reader:
            text = reader.conn.execute(
                select(append_intents.c.committed_at).where(
                    append_intents.c.append_intent_id == intent_id
                )
            ).scalar_one_or_none()
        return None if text is None else _parse_commit_time(str(text))

    def head(self, owner: str) -> int:
        """Return the owner's stored next ordinal (0 for an unknown owner)."""
        check_text(owner, "owner")
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
        """Return ordinary path entries with position > ``after``, ascending.

        On PostgreSQL only positions below the safe high-water mark are
        returned (ADR 0036): a reader never passes a position that a
        transaction still running will commit.

        Raises:
            ReadRequestError: ``after`` or ``limit`` outside 64-bit integers
                (``after`` from -1), or a schema ref that is not text.
        """
        check_int(after, "after", -1)
        check_int(limit, "limit", -INT64_MAX)
        if schema_refs is not None:
            schema_refs = [check_text(ref, "schema ref") for ref in schema_refs]
        if not self._postgres:
            return self._read_log_sqlite(after, max(limit, 0), schema_refs)
        stmt = (
            select(*_LOG_COLUMNS)
            .where(path_entries.c.position > after)
            .order_by(path_entries.c.position)
            .limit(max(limit, 0))
        )
        if self._high_water:
            stmt = stmt.where(path_entries.c.position <= self._safe_position())
        if schema_refs is not None:
            stmt = stmt.join(
                records, records.c.record_id == path_entries.c.record_id
            ).where(records.c.schema_ref.in_(list(schema_refs)))
        return self._log_entries(stmt)

    def cheap_tail(self) -> int | None:
        """Return the highest committed log position, if one cheap read tells it.

        On SQLite: one read of the position index's last key, straight on the
        driver of the held write connection between this store's
        transactions (so it sees every commit: this store's and other
        connections' and processes'). ``None`` where that is not the answer
        a reader may act on: on PostgreSQL (positions commit out of order;
        readers read below the safe mark, ADR 0036) and on a read-only
        store. The caller then reads the log itself.
        """
        if self._postgres or self._read_only:
            return None
        with self._lock:
            try:
                with outages:
                    raw = self._held_writer().connection.driver_connection
                    if raw is None or raw.in_transaction:
                        return None  # inside this thread's own transaction()
                    (value,) = raw.execute(_TAIL_SQL).fetchone()
            except StoreUnavailableError:
                if self._writer is not None:
                    self._writer.invalidate()
                raise
        return -1 if value is None else int(value)

    def max_position(self) -> int:
        """Return the highest committed log position (-1 when empty).

        On PostgreSQL, the highest below the safe high-water mark.
        """
        stmt = select(func.max(path_entries.c.position))
        if self._high_water:
            stmt = stmt.where(path_entries.c.position <= self._safe_position())
        with self._reading() as reader:
            value = reader.conn.execute(stmt).scalar()
        return -1 if value is None else int(value)

    def read_path(
        self, owner: str, after_ordinal: int = -1, limit: int | None = None
    ) -> tuple[LogEntry, ...]:
        """Return ``owner``'s path entries with ordinal > ``after_ordinal``, in order.

        Witness path entries (which have no log position) report position -1.

        Raises:
            ReadRequestError: a bad owner, ordinal or limit.
        """
        check_text(owner, "owner")
        check_int(after_ordinal, "after_ordinal", -1)
        if limit is not None:
            check_int(limit, "limit", -INT64_MAX)
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
        refs = [check_text(ref, "schema ref") for ref in schema_refs]
        stmt = (
            select(*_LOG_COLUMNS)
            .join(records, records.c.record_id == path_entries.c.record_id)
            .where(records.c.schema_ref.in_(refs))
            .order_by(path_entries.c.path_ref, path_entries.c.path_ordinal)
        )
        return self._log_entries(stmt)

    def _read_log_sqlite(
        self, after: int, limit: int, schema_refs: list[str] | None
    ) -> tuple[LogEntry, ...]:
        """``read_log`` on SQLite: entries and records in one driver-level join.

        A projection's catch-up reads the whole log through here, so each
        entry costs one joined row and, unless the record is cached, one
        decode; SQLAlchemy's statement building and row objects and a second
        query for the records cost about as much as the rest together.
        """
        params: tuple[object, ...]
        if schema_refs is None:
            sql, params = _LOG_SQL, (after, limit)
        else:
            sql = _LOG_SQL_SCHEMAS.format(placeholders(len(schema_refs)))
            params = (after, *schema_refs, limit)
        entries = []
        fresh: list[tuple[str, CachedRecord, int]] = []
        with self._reading() as reader:
            rows = reader.driver.rows(sql, params)
            cache = reader.cache
            cached = cache.records
            for row in rows:
                record_id = row[6]
                content = cached.get(record_id)
                if content is None:
                    envelope, body = decode_record(*row[6:])
                    fresh.append(
                        (
                            record_id,
                            (envelope, body),
                            record_size(row[12], decoded=True),
                        )
                    )
                elif isinstance(content[1], str):
                    envelope, body = cache.decoded(record_id, content)
                else:
                    envelope, body = content  # type: ignore[assignment]
                entries.append(
                    LogEntry(
                        position=row[4],
                        append_intent_id=row[5],
                        record=Record(
                            envelope=envelope,
                            body=body,
                            view=RecordView(row[0], row[1], row[2], row[3]),
                        ),
                    )
                )
        if fresh:
            cache.add_records(fresh)
        return tuple(entries)

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


@contextmanager
def _read(engine: Engine, cache: ContentCache) -> Iterator[StoreReader]:
    with outages, engine.begin() as conn:
        yield StoreReader(conn, cache)


@contextmanager
def _locked_read(
    lock: threading.RLock, engine: Engine, cache: ContentCache
) -> Iterator[StoreReader]:
    with outages, lock, engine.begin() as conn:
        yield StoreReader(conn, cache)


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


def _secure_delete_off(raw: Any) -> None:
    """Turn ``secure_delete`` off again, never masking the error being raised.

    After a failed write (a full disk, a lost file) the connection may be
    closed already; the error that caused it is the one the caller must see.
    """
    try:
        raw.execute("PRAGMA secure_delete=OFF")
    except Exception:
        _LOG.debug("could not reset secure_delete", exc_info=True)


def _timeout(busy_timeout_ms: int | None) -> int:
    # Read at call time: tests lower the module default for stores they open.
    return engine_module.BUSY_TIMEOUT_MS if busy_timeout_ms is None else busy_timeout_ms


def _pipelined(raw: Any, work: Callable[[], _R], pipeline: bool = True) -> _R:
    """Run ``work`` and commit in a psycopg pipeline: writes go out together."""
    try:
        if not pipeline:
            result = work()
            pg.reached("committing")
            raw.commit()
            return result
        with raw.pipeline():
            result = work()
            pg.reached("committing")
            raw.commit()
    except BaseException:
        _rollback(raw, True)
        raise
    return result


def _has_pending_input(raw: Any) -> bool:
    try:
        ready, _, _ = select_module.select([raw.fileno()], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(ready)


def _rollback(raw: Any, postgres: bool) -> None:
    try:
        if postgres:
            raw.rollback()
        elif raw.in_transaction:
            raw.execute("ROLLBACK")
    except Exception:  # the connection is gone; the outage reports it
        _LOG.debug("rollback after a failed append failed", exc_info=True)


_LOG_SELECT = (
    "SELECT e.path_ref, e.path_ordinal, e.retained_context_ref, e.kind_label, "
    "e.position, e.append_intent_id, r.record_id, r.digest, r.schema_ref, r.mode, "
    "r.witness_ref, r.caused_by_json, r.body_json FROM path_entries e "
    "JOIN records r ON r.record_id = e.record_id WHERE e.position > ?"
)
_LOG_SQL = _LOG_SELECT + " ORDER BY e.position LIMIT ?"
_LOG_SQL_SCHEMAS = _LOG_SELECT + " AND r.schema_ref IN {} ORDER BY e.position LIMIT ?"
_LOG_COLUMNS = (
    path_entries.c.record_id,
    path_entries.c.path_ref,
    path_entries.c.path_ordinal,
    path_entries.c.retained_context_ref,
    path_entries.c.kind_label,
    path_entries.c.position,
    path_entries.c.append_intent_id,
)


def _parse_commit_time(text: str) -> datetime | None:
    """Read a ``CURRENT_TIMESTAMP`` text (UTC; SQLite has no zone, PostgreSQL +00)."""
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
