"""The trace store's write methods: append, cuts, redaction and the chained head.

:class:`StoreWrites` adds to :class:`StoreBase` the kernel's write surface:
``append`` (through the commit queue), ``preview_record_ids``,
``publish_cut``, ``redact`` (with the check of what bytes remain), and the
chained head (``trace_head``, ``seal``, ``verify_chain``).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection

from goatherd.domain.contexts import OperationContext
from goatherd.domain.errors import DomainError, StoreUnavailableError
from goatherd.domain.records import AppendBatch, AppendReceipt, Cut, CutSpec
from goatherd.domain.store import AppendAuthority
from goatherd.infrastructure.store.authority import append_context, publish_context
from goatherd.infrastructure.store.chain import ChainReport, TraceHead, parse_head
from goatherd.infrastructure.store.driver import Driver
from goatherd.infrastructure.store.limits import check_expected_heads
from goatherd.infrastructure.store.outages import outages
from goatherd.infrastructure.store.schema import SCHEMA_V1, SCHEMA_VERSION
from goatherd.infrastructure.store.sealing import (
    linked_head,
    read_head,
    seal,
    verify_chain,
)
from goatherd.infrastructure.store.transactions import StoreBase

if TYPE_CHECKING:
    from goatherd.infrastructure.store.redaction import ErasedBodies, Redaction

# The append path (``appending``, ``plan``, ``staging``, ``writer``), the
# redaction and the erasure modules are imported by the methods that run
# them: a read-only command never loads them, nor the runtime events' decoders
# the plan validates payloads with (ADR 0089).

__all__ = ["StoreWrites"]

# Logged under the store's name, as before the methods were split out of it.
_LOG = logging.getLogger("goatherd.infrastructure.store.store")


class StoreWrites(StoreBase):
    """Append, publish a cut, redact, and link and verify the chained head."""

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


def _secure_delete_off(raw: Any) -> None:
    """Turn ``secure_delete`` off again, never masking the error being raised.

    After a failed write (a full disk, a lost file) the connection may be
    closed already; the error that caused it is the one the caller must see.
    """
    try:
        raw.execute("PRAGMA secure_delete=OFF")
    except Exception:
        _LOG.debug("could not reset secure_delete", exc_info=True)
