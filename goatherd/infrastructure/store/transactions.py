"""The trace store's connections and transactions, shared by its read and write methods.

:class:`StoreBase` holds what every store method stands on: the engine, the
held write connection, the serialized write transaction (``BEGIN IMMEDIATE``
on SQLite, the connection's own transaction, pipelined, on PostgreSQL), the
commit queue and what happens after a commit (the content cache filled, one
effect published per new entry). ``writes.py`` and ``queries.py`` add the
append and read methods; ``store.py`` puts them together.
"""

from __future__ import annotations

import json
import logging
import select as select_module
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from datetime import UTC, datetime
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol, Self, TypeVar

from sqlalchemy import Connection, Engine

from goatherd.domain.contexts import OperationContext
from goatherd.domain.effects import EffectEvent
from goatherd.domain.errors import ReadOnlyStoreError, StoreUnavailableError
from goatherd.domain.records import RecordEnvelope
from goatherd.infrastructure.store import ledgers
from goatherd.infrastructure.store import postgres as pg
from goatherd.infrastructure.store.checkpointer import WalCheckpointer
from goatherd.infrastructure.store.commits import CommitQueue
from goatherd.infrastructure.store.engine import (
    BUSY_TIMEOUT_MS,
    WRITE_OPTION,
    begin_immediate,
)
from goatherd.infrastructure.store.limits import DEFAULT_LIMITS, AppendLimits
from goatherd.infrastructure.store.outages import outages
from goatherd.infrastructure.store.postgres import SAFE_SQL
from goatherd.infrastructure.store.reader import (
    DEFAULT_CACHE_BYTES,
    ContentCache,
    StoreReader,
    record_size,
)
from goatherd.infrastructure.store.schema import SCHEMA_V1, SCHEMA_VERSION

if TYPE_CHECKING:
    from goatherd.infrastructure.store.appending import Member
    from goatherd.infrastructure.store.staging import MemberPlan

# The append path (``appending``, ``plan``, ``staging``, ``writer``), the
# redaction and the erasure modules are imported by the methods that run
# them: a read-only command never loads them, nor the runtime events' decoders
# the plan validates payloads with (ADR 0089).

__all__ = ["EffectPublisher", "StoreBase"]

# Logged under the store's name, as before the methods were split out of it.
_LOG = logging.getLogger("goatherd.infrastructure.store.store")
_R = TypeVar("_R")
_T = TypeVar("_T")
_ADAPTER_LOCK_SQL = f"SELECT pg_advisory_xact_lock(1617391936 # {pg.TRACE_SALT})"


class EffectPublisher(Protocol):
    """What ``with_bus`` needs of a bus: a non-blocking ``publish``."""

    def publish(self, event: EffectEvent) -> None:
        """Hand ``event`` to the subscribers without blocking."""
        ...


class StoreBase:
    """The engine, the held write connection and the transactions on them.

    Not used alone: :class:`SqlAlchemyTraceStore` (``store.py``) is this
    plus its write and read methods.
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
        self._blob_limit = ledgers.DEFAULT_CHECKPOINT_BLOB_LIMIT
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
            # COMMIT as one more statement of the pipeline: the Sync that
            # ends the pipeline sends it and reads its result (or error).
            # ``raw.commit()`` here would sync once for the COMMIT and the
            # pipeline's end once more: a round trip per append.
            raw.execute("COMMIT")
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
