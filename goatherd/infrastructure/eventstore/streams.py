"""Aggregate streams over the kernel store: load by folding, save as one batch.

One aggregate is one owner path. :class:`TraceEventStore` saves every pending
event of several aggregates as ONE kernel append batch under one append-intent
id, with each aggregate's loaded head as the expected head (optimistic
concurrency), and loads an aggregate by folding its path.

Loading is incremental. An in-process cache keeps the last fold of each
(aggregate class, owner); a load clones it and fast-forwards by reading only
the path entries after the cached version (``store.read_path``), so another
process's appends are always seen and a command never re-reads a whole path.
A cold load starts from the snapshot table (:mod:`.snapshots`) when a row
there still matches the path, else from a bare aggregate; a fold that read at
least ``snapshot_every`` records past the last snapshot writes a new one.
Both caches are derived from the trace and are never trusted beyond it.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Collection, Iterator, Sequence
from typing import Final, TypeVar

from sqlalchemy.exc import SQLAlchemyError

from goatherd.domain import (
    TRUSTED_APPEND_CONTEXT,
    AppendBatch,
    AppendGroup,
    AppendReceipt,
    TraceAggregate,
    TraceEvent,
)
from goatherd.domain.errors import StoreUnavailableError
from goatherd.infrastructure.eventstore.mapping import event_from_entry, event_to_draft
from goatherd.infrastructure.eventstore.snapshots import (
    SNAPSHOT_FORMAT,
    AggregateSnapshot,
    SnapshotTable,
)
from goatherd.infrastructure.store import SqlAlchemyTraceStore

__all__ = ["DEFAULT_AGGREGATE_CACHE", "DEFAULT_SNAPSHOT_EVERY", "TraceEventStore"]

TAgg = TypeVar("TAgg", bound=TraceAggregate)
DEFAULT_AGGREGATE_CACHE: Final = 4096
DEFAULT_SNAPSHOT_EVERY: Final = 500
_PROBE: Final = 64
_Key = tuple[type[TraceAggregate], str]


def _kind(cls: type[TraceAggregate]) -> str:
    return (
        f"{cls.__module__}.{cls.__qualname__}:{cls.SNAPSHOT_VERSION}:{SNAPSHOT_FORMAT}"
    )


class TraceEventStore:
    """The runtime's persistence port over one kernel store (thread-safe)."""

    def __init__(
        self,
        store: SqlAlchemyTraceStore,
        *,
        cache_size: int = DEFAULT_AGGREGATE_CACHE,
        snapshot_every: int = DEFAULT_SNAPSHOT_EVERY,
    ) -> None:
        """Serve aggregates from ``store``.

        Args:
            store: the kernel store.
            cache_size: how many folds the in-process cache keeps (0: none).
            snapshot_every: write a snapshot after folding this many records
                past the last one (0: never read or write snapshots).
        """
        self._store = store
        self._cache: OrderedDict[_Key, TraceAggregate] = OrderedDict()
        self._cache_size = max(cache_size, 0)
        self._snapshot_every = max(snapshot_every, 0)
        self._snapshotted: dict[_Key, int] = {}
        self._lock = threading.Lock()
        self._snapshots = SnapshotTable(store) if self._snapshot_every else None

    @property
    def trace(self) -> SqlAlchemyTraceStore:
        """The kernel store behind the streams."""
        return self._store

    # ------------------------------------------------------------- reading

    def stream(self, owner: str, after: int = -1) -> Iterator[TraceEvent]:
        """Yield the events on ``owner``'s path with ordinal > ``after``."""
        for entry in self._store.read_path(owner, after):
            yield event_from_entry(entry)

    def load(self, cls: type[TAgg], owner: str, *, fresh: bool = True) -> TAgg:
        """Fold ``owner``'s path into a ``cls`` (bare when the path is empty).

        With ``fresh=False`` a cached fold is returned as is, without reading
        the path's tail: for decisions whose save is guarded by the expected
        head anyway (a lost race drops the cached fold, so the retry reads).
        """
        key: _Key = (cls, owner)
        with self._lock:
            cached = self._cache.get(key)
            if cached is not None:
                self._cache.move_to_end(key)
        if cached is not None:
            agg = cached.clone()
            assert isinstance(agg, cls)
            if not fresh:
                return agg
            if not self._fold(agg, agg.version):
                return agg
        else:
            agg = self._cold_load(cls, owner)
        self._remember(key, agg)  # keeps its own copy
        self._maybe_snapshot(key, agg)
        return agg

    def load_many(self, cls: type[TAgg], owners: Collection[str]) -> dict[str, TAgg]:
        """Fold several paths."""
        return {owner: self.load(cls, owner) for owner in owners}

    def forget(self, *owners: str) -> None:
        """Drop cached folds of ``owners`` (all when none is named)."""
        with self._lock:
            if not owners:
                self._cache.clear()
                self._snapshotted.clear()
                return
            wanted = set(owners)
            for key in [k for k in self._cache if k[1] in wanted]:
                del self._cache[key]

    def _fold(self, agg: TraceAggregate, after: int) -> int:
        entries = self._store.read_path(agg.id, after)
        for entry in entries:
            event_from_entry(entry).mutate(agg)
        return len(entries)

    def _cold_load(self, cls: type[TAgg], owner: str) -> TAgg:
        agg = cls.bare(owner)
        if self._snapshots is None:
            self._fold(agg, -1)
            return agg
        # A short path (the common case: a new scope, output or checkpoint)
        # costs one read; only a long one looks for a snapshot.
        probe = min(self._snapshot_every, _PROBE)
        head = self._store.read_path(owner, -1, limit=probe)
        if len(head) < probe:
            for entry in head:
                event_from_entry(entry).mutate(agg)
            return agg
        resumed = self._from_snapshot(cls, owner)
        if resumed is not None:
            return resumed
        self._fold(agg, -1)
        return agg

    def _from_snapshot(self, cls: type[TAgg], owner: str) -> TAgg | None:
        snapshot = self._read_snapshot(cls, owner)
        if snapshot is None:
            return None
        entries = self._store.read_path(owner, snapshot.version - 1)
        first = entries[0].record if entries else None
        if (
            first is None
            or first.owner_ordinal != snapshot.version
            or first.record_id != snapshot.record_id
        ):
            return None
        try:
            agg = cls.from_snapshot(owner, snapshot.version, snapshot.state)
        except (ValueError, TypeError, KeyError):
            return None
        with self._lock:
            self._snapshotted[(cls, owner)] = snapshot.version
        for entry in entries[1:]:
            event_from_entry(entry).mutate(agg)
        return agg

    def _read_snapshot(
        self, cls: type[TraceAggregate], owner: str
    ) -> AggregateSnapshot | None:
        if self._snapshots is None:
            return None
        return self._snapshots.read(owner, _kind(cls))

    def _maybe_snapshot(
        self, key: _Key, agg: TraceAggregate, record_id: str = ""
    ) -> None:
        """Write a snapshot every ``snapshot_every`` versions (a cache: best effort)."""
        if self._snapshots is None or not self._snapshots.writable or agg.version < 0:
            return
        with self._lock:
            last = self._snapshotted.get(key, -1)
            if agg.version - last < self._snapshot_every:
                return
            self._snapshotted[key] = agg.version
        try:
            if not record_id:
                entries = self._store.read_path(agg.id, agg.version - 1, limit=1)
                if not entries:
                    return
                record_id = entries[0].record.record_id
            self._snapshots.write(
                AggregateSnapshot(
                    agg.id,
                    _kind(type(agg)),
                    agg.version,
                    record_id,
                    agg.snapshot_state(),
                )
            )
        except (SQLAlchemyError, StoreUnavailableError):
            return  # a cache write never fails a load or a save

    def _remember(self, key: _Key, agg: TraceAggregate) -> None:
        if not self._cache_size:
            return
        with self._lock:
            current = self._cache.get(key)
            if current is not None and current.version > agg.version:
                return
            self._cache[key] = agg.clone()
            self._cache.move_to_end(key)
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)

    # ------------------------------------------------------------- writing

    def save(
        self, aggregates: Sequence[TraceAggregate], intent_id: str
    ) -> AppendReceipt:
        """Append every pending event as ONE batch under ``intent_id``.

        Each aggregate's path must still be at the head it was loaded at
        (``OrdinalConflictError`` otherwise, nothing written), including an
        aggregate with no pending event: passing one GUARDS a decision that
        read it. An exact replay of a committed intent returns the stored
        receipt.
        """
        groups: list[AppendGroup] = []
        expected: dict[str, int] = {}
        spans: dict[str, tuple[int, int]] = {}
        last_ids: dict[str, str] = {}
        for agg in aggregates:
            pending = agg.pending()
            if not pending:
                expected.setdefault(agg.id, agg.head)
                continue
            expected.setdefault(agg.id, pending[0].originator_version)
            spans[agg.id] = (
                pending[0].originator_version,
                pending[-1].originator_version,
            )
            last_ids[agg.id] = pending[-1].record_id
            drafts = tuple(event_to_draft(e) for e in pending)
            groups.append(AppendGroup(agg.id, fact_drafts=drafts))
        batch = AppendBatch(intent_id, tuple(groups))
        try:
            receipt = self._store.append(
                TRUSTED_APPEND_CONTEXT, batch, expected_heads=expected
            )
        except BaseException:
            self.forget(*expected)
            raise
        for agg in aggregates:
            agg.collect_events()
            # Cache only what this batch itself placed (a replay may differ).
            if receipt.owner_ordinal_ranges.get(agg.id) == spans.get(agg.id):
                self._remember((type(agg), agg.id), agg)
                if agg.id in last_ids:
                    self._maybe_snapshot((type(agg), agg.id), agg, last_ids[agg.id])
            else:
                self.forget(agg.id)
        return receipt
