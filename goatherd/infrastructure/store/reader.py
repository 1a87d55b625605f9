"""Set-wise reads of the trace tables, backed by the store's immutable caches.

One :class:`StoreReader` serves one read (or one append's lookups) on one
connection. Each method fetches what it needs in one query (chunked only past
the driver's parameter limit), never one query per record. Decoded record
content and contexts are immutable once committed, so they are kept in the
store's in-process :class:`ContentCache` keyed by id.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Iterable, Iterator
from typing import Final, Generic, NamedTuple, TypeVar

from sqlalchemy import Connection

from goatherd.domain.errors import UnknownFactError
from goatherd.domain.records import (
    RecordBody,
    RecordEnvelope,
    RetainedContext,
    VisibleRecord,
)
from goatherd.infrastructure.store.codec import (
    decode_context,
    decode_record,
    decode_record_body,
)
from goatherd.infrastructure.store.driver import Driver, Row, placeholders

__all__ = [
    "CachedRecord",
    "ContentCache",
    "DEFAULT_CACHE_BYTES",
    "EntryRow",
    "RecordContent",
    "StoreReader",
    "next_log_position",
    "record_size",
]

RecordContent = tuple[RecordEnvelope, RecordBody]
CachedRecord = tuple[RecordEnvelope, "RecordBody | str"]
"""A cached record: its body decoded, or still its stored ``body_json`` text."""
_CHUNK = 900
_T = TypeVar("_T")
_K = TypeVar("_K")
ViewKey = tuple["EntryRow", str]

DEFAULT_CACHE_BYTES: Final = 8 << 20
"""The default budget of a store's in-process content cache (8 MiB)."""

# Rough resident sizes, for the budget: the objects around a record (envelope,
# ids, tuples, the dict slot) and a decoded payload per byte of its JSON.
_RECORD_OVERHEAD: Final = 600
_DECODED_PER_BYTE: Final = 5
_VIEW_SIZE: Final = 500
_CONTEXT_SIZE: Final = 900


class EntryRow(NamedTuple):
    """One path entry: where a record sits and the view it has there."""

    record_id: str
    path_ref: str
    ordinal: int
    context_ref: str
    kind_label: str


class _Bounded(Generic[_K, _T]):
    """A map that forgets its oldest entries when their sizes outgrow a budget."""

    __slots__ = ("_items", "budget", "used")

    def __init__(self, budget: int) -> None:
        self._items: dict[_K, tuple[_T, int]] = {}
        self.budget = budget
        self.used = 0

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def get(self, key: _K) -> _T | None:
        found = self._items.get(key)
        return None if found is None else found[0]

    def lookup(self) -> Callable[[_K], tuple[_T, int] | None]:
        """Return the map's own ``get`` of ``(value, size)``, for a hot loop."""
        return self._items.get

    def put_many(self, items: Iterable[tuple[_K, _T, int]]) -> None:
        """``put`` each ``(key, value, size)``, shrinking at most once, at the end."""
        entries = self._items
        used = self.used
        for key, value, size in items:
            old = entries.pop(key, None)
            if old is not None:
                used -= old[1]
            entries[key] = (value, size)
            used += size
        self.used = used
        if used > self.budget:
            self._shrink()

    def has_room(self) -> bool:
        """Tell whether the map holds less than its budget."""
        return self.used < self.budget

    def admit_many(self, items: Iterable[tuple[_K, _T, int]]) -> None:
        """Add each new ``(key, value, size)`` while it fits the free room."""
        entries = self._items
        room = self.budget - self.used
        for key, value, size in items:
            if size > room:
                break
            if key not in entries:
                entries[key] = (value, size)
                room -= size
        self.used = self.budget - room

    def put(self, key: _K, value: _T, size: int) -> None:
        self.put_many(((key, value, size),))

    def discard(self, keys: Iterable[_K]) -> None:
        for key in keys:
            old = self._items.pop(key, None)
            if old is not None:
                self.used -= old[1]

    def key_list(self) -> list[_K]:
        return list(self._items)

    def _shrink(self) -> None:
        # Oldest first (insertion order) down to half the budget, so that a
        # steady stream of new entries shrinks the map rarely, not per put.
        items = self._items
        target = self.budget // 2
        doomed = []
        freed = 0
        for key, (_, size) in items.items():
            if self.used - freed <= target:
                break
            doomed.append(key)
            freed += size
        for key in doomed:
            del items[key]
        self.used -= freed


def record_size(body_json: str, *, decoded: bool) -> int:
    """Return the budget charge of a cached record stored as ``body_json``."""
    factor = _DECODED_PER_BYTE if decoded else 1
    return _RECORD_OVERHEAD + factor * len(body_json)


class ContentCache:
    """Immutable committed content by id: records, contexts, verified witnesses.

    Safe because records and contexts are content-addressed and never change
    once committed; an entry is added only for committed rows (read back, or
    written by an append that committed). Payload dicts are shared with
    callers: treat what a read returns as read-only. The cache is bounded by
    an estimate of the memory it holds (``budget`` bytes, split between
    records, read views and contexts), so a long-running writer stays small.
    """

    def __init__(self, budget: int = DEFAULT_CACHE_BYTES) -> None:
        self.records: _Bounded[str, CachedRecord] = _Bounded(budget * 3 // 4)
        self.contexts: _Bounded[str, RetainedContext] = _Bounded(budget // 16)
        self.witnesses: set[str] = set()
        # Visible records by (path entry row, visibility profile): an entry
        # row, like its record, never changes once committed.
        self.views: _Bounded[ViewKey, VisibleRecord] = _Bounded(budget * 3 // 16)
        self.lock = threading.Lock()

    def add_views(self, items: Iterable[tuple[ViewKey, VisibleRecord]]) -> None:
        with self.lock:
            for key, view in items:
                self.views.put(key, view, _VIEW_SIZE)

    def add_records(self, items: Iterable[tuple[str, CachedRecord, int]]) -> None:
        """Cache records: ``(record id, content, size)`` (see :func:`record_size`)."""
        with self.lock:
            self.records.put_many(items)

    def admit_records(self, items: Iterable[tuple[str, CachedRecord, int]]) -> None:
        """Cache records a log read decoded, into free room only (evicting none).

        A log read is sequential: a projection's catch-up over more records
        than the cache holds would, oldest-first, evict each record before it
        is read again, so the next catch-up would hit nothing and every read
        would pay for the churn. Records read by id (owner prefixes, cuts,
        one record), which do repeat, and those an append wrote, keep
        evicting the oldest; a log read fills only the room they leave.
        """
        with self.lock:
            self.records.admit_many(items)

    def add_contexts(self, items: Iterable[RetainedContext]) -> None:
        with self.lock:
            for context in items:
                self.contexts.put(context.context_id, context, _CONTEXT_SIZE)

    def forget_records(self, ids: Collection[str]) -> None:
        """Drop ``ids`` and their read views (their stored bodies were redacted)."""
        with self.lock:
            self.records.discard(ids)
            views = self.views
            views.discard([k for k in views.key_list() if k[0].record_id in ids])

    def decoded(self, record_id: str, content: CachedRecord) -> RecordContent:
        """Return ``content`` with its body decoded (and cache the decoded form)."""
        envelope, body = content
        if not isinstance(body, str):
            return envelope, body
        decoded = decode_record_body(body)
        size = record_size(body, decoded=True)
        with self.lock:
            if self.records.get(record_id) is content:
                self.records.put(record_id, (envelope, decoded), size)
        return envelope, decoded


class StoreReader:
    """Reads on one connection, filling the shared cache with committed rows."""

    def __init__(self, conn: Connection, cache: ContentCache) -> None:
        self.conn = conn
        self.cache = cache
        self._driver: Driver | None = None

    @property
    def driver(self) -> Driver:
        """The connection's driver-level executor (the append path's statements)."""
        if self._driver is None:
            self._driver = Driver(self.conn)
        return self._driver

    def records(self, ids: Iterable[str]) -> dict[str, RecordContent]:
        """Return the content of every known id among ``ids`` (unknown ids absent)."""
        found: dict[str, RecordContent] = {}
        missing = []
        cache = self.cache
        cached = cache.records
        for record_id in dict.fromkeys(ids):
            content = cached.get(record_id)
            if content is None:
                missing.append(record_id)
            elif isinstance(content[1], str):
                found[record_id] = cache.decoded(record_id, content)
            else:
                found[record_id] = content  # type: ignore[assignment]
        if missing:
            loaded = self._load_records(missing)
            cache.add_records((k, v, s) for k, (v, s) in loaded.items())
            found.update((k, v) for k, (v, _) in loaded.items())
        return found

    def record(self, record_id: str) -> RecordContent:
        """Return one record's content, or raise ``UnknownFactError``."""
        content = self.records((record_id,)).get(record_id)
        if content is None:
            raise UnknownFactError(f"unknown fact id: {record_id}")
        return content

    def _load_records(self, ids: list[str]) -> dict[str, tuple[RecordContent, int]]:
        loaded = {}
        for chunk in _chunks(ids):
            rows = self.driver.rows(_RECORDS_SQL + placeholders(len(chunk)), chunk)
            for row in rows:
                size = record_size(row[6], decoded=True)
                loaded[row[0]] = (decode_record(*row), size)
        return loaded

    def existing_ids(self, ids: Collection[str]) -> set[str]:
        """Return which of ``ids`` are retained records."""
        known = {record_id for record_id in ids if record_id in self.cache.records}
        missing = [record_id for record_id in ids if record_id not in known]
        for chunk in _chunks(missing):
            sql = _RECORD_IDS_SQL + placeholders(len(chunk))
            known.update(row[0] for row in self.driver.rows(sql, chunk))
        return known

    def contexts(self, ids: Iterable[str]) -> dict[str, RetainedContext]:
        """Return the stored contexts among ``ids`` (unknown ids absent)."""
        found: dict[str, RetainedContext] = {}
        missing = []
        for context_id in dict.fromkeys(ids):
            context = self.cache.contexts.get(context_id)
            if context is None:
                missing.append(context_id)
            else:
                found[context_id] = context
        loaded: list[RetainedContext] = []
        for chunk in _chunks(missing):
            rows = self.driver.rows(_CONTEXTS_SQL + placeholders(len(chunk)), chunk)
            loaded.extend(
                decode_context(dict(zip(_CONTEXT_COLUMNS, row, strict=True)))
                for row in rows
            )
        self.cache.add_contexts(loaded)
        found.update((c.context_id, c) for c in loaded)
        return found

    def next_ordinals(self, owners: Collection[str]) -> dict[str, int]:
        """Return the stored next ordinal of each known owner among ``owners``."""
        result: dict[str, int] = {}
        for chunk in _chunks(list(owners)):
            rows = self.driver.rows(_ORDINALS_SQL + placeholders(len(chunk)), chunk)
            result.update((row[0], int(row[1])) for row in rows)
        return result

    def first_entries(self, ids: Iterable[str]) -> dict[str, EntryRow]:
        """Return each record's first path entry in (path_ref, ordinal) order."""
        first: dict[str, EntryRow] = {}
        for chunk in _chunks(list(dict.fromkeys(ids))):
            sql = _ENTRIES_OF_SQL.format(placeholders(len(chunk)))
            for row in self.driver.rows(sql, chunk):
                entry = EntryRow._make(row)
                if entry.record_id not in first or _before(entry, first):
                    first[entry.record_id] = entry
        return first

    def owner_entries(self, owner: str, through: int) -> list[EntryRow]:
        """Return an owner path's entries with ordinal <= ``through``, ascending."""
        if through < 0:
            return []
        rows = self.driver.rows(_OWNER_ENTRIES_SQL, (owner, min(through, _MAX_ORDINAL)))
        return list(map(EntryRow._make, rows))

    def closure_entries(self, roots: Collection[str]) -> list[EntryRow]:
        """Return the first path entry of every record in the roots' causal closure.

        One recursive query over ``record_edges``; the result is ordered by
        (path_ref, ordinal), each record once.

        Raises:
            UnknownFactError: a root that is not a retained record.
        """
        if not roots:
            return []
        ids = list(roots)
        sql = _CLOSURE_ENTRIES_SQL.format(placeholders(len(ids)))
        entries: dict[str, EntryRow] = {}
        for row in self._closure_rows(sql, ids):
            entries.setdefault(row[0], EntryRow._make(row))
        for root in roots:
            if root not in entries:
                raise UnknownFactError(f"unknown fact id: {root}")
        return list(entries.values())

    def _closure_rows(self, sql: str, ids: list[str]) -> list[Row]:
        if not self.driver.postgres:
            return self.driver.rows(sql, ids)
        # PostgreSQL estimates the recursive work table at 10 rows and hashes
        # a sequential scan of record_edges on EVERY step while the table is
        # small: O(depth x edges), 0.4 s for a 1,000-record chain. Index
        # lookups per step are right at every size; scoped to this query.
        # (A failed query aborts the transaction, which ends the setting too.)
        self.driver.run("SET LOCAL enable_seqscan = off")
        rows = self.driver.rows(sql, ids)
        self.driver.run("SET LOCAL enable_seqscan = on")
        return rows


_MAX_ORDINAL = 2**63 - 1

_RECORDS_SQL = (
    "SELECT record_id, digest, schema_ref, mode, witness_ref, caused_by_json, "
    "body_json FROM records WHERE record_id IN "
)
_RECORD_IDS_SQL = "SELECT record_id FROM records WHERE record_id IN "
_CONTEXT_COLUMNS = (
    "context_id",
    "active_binding_refs_json",
    "capability_witness_refs_json",
    "semantic_environment_refs_json",
    "visibility_policy_refs_json",
    "substrate_ref",
    "containment",
)
_CONTEXTS_SQL = (
    "SELECT context_id, active_binding_refs_json, capability_witness_refs_json, "
    "semantic_environment_refs_json, visibility_policy_refs_json, substrate_ref, "
    "containment FROM contexts WHERE context_id IN "
)
_ENTRY_SQL = (
    "SELECT record_id, path_ref, path_ordinal, retained_context_ref, kind_label "
    "FROM path_entries "
)
_ENTRIES_OF_SQL = _ENTRY_SQL + "WHERE record_id IN {} ORDER BY path_ref, path_ordinal"
_OWNER_ENTRIES_SQL = (
    _ENTRY_SQL + "WHERE path_ref = ? AND path_ordinal <= ? ORDER BY path_ordinal"
)
# The causal closure in one recursive query over the ordered parent edges.
_CLOSURE_ENTRIES_SQL = (
    "WITH RECURSIVE closure(record_id) AS ("
    "SELECT record_id FROM records WHERE record_id IN {} "
    "UNION SELECT e.parent_record_id FROM record_edges e "
    "JOIN closure c ON e.child_record_id = c.record_id) "
    "SELECT record_id, path_ref, path_ordinal, retained_context_ref, kind_label "
    "FROM path_entries WHERE record_id IN (SELECT record_id FROM closure) "
    "ORDER BY path_ref, path_ordinal"
)
_ORDINALS_SQL = (
    "SELECT trace_owner_id, next_ordinal FROM owner_ordinals WHERE trace_owner_id IN "
)


def next_log_position(conn: Connection) -> int | None:
    """Return the store's next log position as its counter states it.

    SQLite keeps it in ``meta.next_commit_seq``; PostgreSQL writers draw
    positions from a sequence and do not serialize on ``meta`` (ADR 0036), so
    there it is one past the highest committed position (or the ``meta``
    value an upgrade or import left, if higher). ``None``: no counter.
    """
    stored = conn.exec_driver_sql(
        "SELECT value FROM meta WHERE key = 'next_commit_seq'"
    ).scalar_one_or_none()
    if conn.dialect.name != "postgresql":
        return None if stored is None else int(stored)
    highest = conn.exec_driver_sql(
        "SELECT COALESCE(MAX(position) + 1, 0) FROM path_entries"
    ).scalar_one()
    return max(int(highest), int(stored or 0))


def _before(entry: EntryRow, first: dict[str, EntryRow]) -> bool:
    current = first[entry.record_id]
    return (entry.path_ref, entry.ordinal) < (current.path_ref, current.ordinal)


def _chunks(items: list[str]) -> Iterator[list[str]]:
    for start in range(0, len(items), _CHUNK):
        yield items[start : start + _CHUNK]
