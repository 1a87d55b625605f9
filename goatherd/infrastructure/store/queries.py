"""The trace store's read methods: records, slices, cuts, heads and the log.

:class:`StoreQueries` adds to :class:`StoreBase` every read of the kernel
ABI (``read_fact``, ``read_owner_prefix``, ``read_causal_closure``,
``resolve_cut``) and the runtime's (``read_log``, ``read_path``, ``heads``,
``head_records``, ``cheap_tail``). Reads fetch set-wise and never write.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import and_, func, select

from goatherd.domain.errors import (
    ReadRequestError,
    StoreUnavailableError,
    TraceStoreError,
    UnknownFactError,
)
from goatherd.domain.log import LogEntry
from goatherd.domain.materialization import MAX_OWNER_ORDINAL
from goatherd.domain.records import (
    CLOSURE_POLICIES,
    AppendReceipt,
    ClosurePolicy,
    Cut,
    RetainedContext,
    TraceSlice,
    VisibleRecord,
)
from goatherd.domain.store import ReadAuthority
from goatherd.infrastructure.store.authority import read_context
from goatherd.infrastructure.store.builders import (
    build_log_entry,
    build_record,
    build_view,
)
from goatherd.infrastructure.store.codec import decode_receipt, decode_record
from goatherd.infrastructure.store.collector import collector_paused
from goatherd.infrastructure.store.driver import placeholders
from goatherd.infrastructure.store.limits import INT64_MAX, check_int, check_text
from goatherd.infrastructure.store.outages import outages
from goatherd.infrastructure.store.reader import CachedRecord, record_size
from goatherd.infrastructure.store.schema import (
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
from goatherd.infrastructure.store.transactions import StoreBase

# The append path (``appending``, ``plan``, ``staging``, ``writer``), the
# redaction and the erasure modules are imported by the methods that run
# them: a read-only command never loads them, nor the runtime events' decoders
# the plan validates payloads with (ADR 0089).

__all__ = ["StoreQueries"]

_TAIL_SQL = "SELECT max(position) FROM path_entries"


class StoreQueries(StoreBase):
    """Every read: records, slices, cuts, owner heads, the log and counts."""

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
        # A batch allocates some twenty objects per row (the driver's row, its
        # strings, the decoded values) and no reference cycle; the collector's
        # runs over them were a quarter of a projection's catch-up.
        with collector_paused():
            if not self._postgres:
                return self._read_log_sqlite(after, max(limit, 0), schema_refs)
            return self._read_log_postgres(after, max(limit, 0), schema_refs)

    def _read_log_postgres(
        self, after: int, limit: int, schema_refs: list[str] | None
    ) -> tuple[LogEntry, ...]:
        stmt = (
            select(*_LOG_COLUMNS)
            .where(path_entries.c.position > after)
            .order_by(path_entries.c.position)
            .limit(limit)
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
        query for the records cost about as much as the rest together. What it
        decodes is cached into the cache's free room only
        (``ContentCache.admit_records``). ``read_log`` runs it with the cyclic
        garbage collector paused (``collector.py``).
        """
        params: tuple[object, ...]
        if schema_refs is None:
            sql, params = _LOG_SQL, (after, limit)
        else:
            sql = _LOG_SQL_SCHEMAS.format(placeholders(len(schema_refs)))
            params = (after, *schema_refs, limit)
        entries: list[LogEntry] = []
        fresh: list[tuple[str, CachedRecord, int]] = []
        with self._reading() as reader:
            rows = reader.driver.rows(sql, params)
            cache = reader.cache
        lookup = cache.records.lookup()
        admit = cache.records.has_room()
        # Locals, not globals, in the loop that runs once per entry.
        decode, view_of, record_of = decode_record, build_view, build_record
        entry_of, add = build_log_entry, entries.append
        for row in rows:
            record_id = row[6]
            found = lookup(record_id)
            if found is None:
                envelope, body = decode(*row[6:])
                if admit:
                    fresh.append(
                        (
                            record_id,
                            (envelope, body),
                            record_size(row[12], decoded=True),
                        )
                    )
            elif isinstance(found[0][1], str):
                envelope, body = cache.decoded(record_id, found[0])
            else:
                envelope, body = found[0]  # type: ignore[assignment]
            view = view_of(row[0], row[1], row[2], row[3])
            add(entry_of(row[4], row[5], record_of(envelope, body, view)))
        if fresh:
            cache.admit_records(fresh)
        return tuple(entries)

    def _log_entries(self, stmt: object) -> tuple[LogEntry, ...]:
        with self._reading() as reader:
            rows = list(reader.conn.execute(stmt))  # type: ignore[call-overload]
            contents = reader.records(row.record_id for row in rows)
        entries = []
        for row in rows:
            envelope, body = contents[row.record_id]
            view = build_view(
                row.path_ref,
                int(row.path_ordinal),
                row.retained_context_ref,
                row.kind_label,
            )
            position = -1 if row.position is None else int(row.position)
            record = build_record(envelope, body, view)
            entries.append(build_log_entry(position, row.append_intent_id, record))
        return tuple(entries)

    def _scalar(self, stmt: object) -> int:
        with self._reading() as reader:
            return int(reader.conn.execute(stmt).scalar_one())  # type: ignore[call-overload]


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
