"""Aggregate streams over the kernel store: the runtime's eventsourcing adapter.

One aggregate is one owner path. :func:`event_to_draft` maps an event to a
kernel record draft (schema = the event's ``TOPIC``, its mode and kind label,
payload = its fields, parents = its ``caused_by``); :func:`record_to_event`
maps a stored path entry back, folding unknown schemas as ``RecordAppended``.
:class:`TraceEventStore` saves every pending event of several aggregates as
ONE kernel append batch under one append-intent id, with each aggregate's
loaded head as the expected head (optimistic concurrency), and loads an
aggregate by folding its path, reading the path entries directly (read-only
SQL over the trace tables; every write goes through ``append``).

:class:`KernelRecorder` exposes the store as the eventsourcing library's
``ApplicationRecorder``: the notification log is the store's global commit
log (notification id = position + 1) with a polling subscription.
"""

from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import Collection, Iterator, Sequence
from typing import Any, TypeVar

from eventsourcing.persistence import (
    ApplicationRecorder,
    IntegrityError,
    Notification,
    StoredEvent,
    Subscription,
)
from sqlalchemy import select

from goatherd.domain import (
    TRUSTED_APPEND_CONTEXT,
    AppendBatch,
    AppendGroup,
    AppendReceipt,
    OrdinalConflictError,
    RecordAppended,
    RecordDraft,
    TraceAggregate,
    TraceEvent,
    event_class_for_schema,
)
from goatherd.domain.canonical import canonical_json_text
from goatherd.infrastructure.store import SqlAlchemyTraceStore
from goatherd.infrastructure.store.schema import path_entries, records

__all__ = [
    "KernelRecorder",
    "TraceEventStore",
    "event_to_draft",
    "record_to_event",
]

TAgg = TypeVar("TAgg", bound=TraceAggregate)
_BASE = frozenset({"originator_id", "originator_version", "timestamp", "caused_by"})
_FIELDS_CACHE: dict[type[TraceEvent], frozenset[str]] = {}


def event_to_draft(event: TraceEvent) -> RecordDraft:
    """Return the kernel draft an event is persisted as."""
    return RecordDraft(
        mode=event.mode.value,
        schema_ref=event.schema_ref,
        payload=event.payload(),
        kind_label=event.kind_label,
        caused_by_fact_ids=tuple(event.caused_by),
    )


def _fields_of(cls: type[TraceEvent]) -> frozenset[str]:
    names = _FIELDS_CACHE.get(cls)
    if names is None:
        names = frozenset(f.name for f in dataclasses.fields(cls)) - _BASE
        _FIELDS_CACHE[cls] = names
    return names


def record_to_event(
    owner: str,
    ordinal: int,
    *,
    record_id: str,
    schema_ref: str,
    mode: str,
    kind_label: str,
    payload: dict[str, Any],
    caused_by: Sequence[str],
) -> TraceEvent:
    """Rebuild the event a path entry holds (``RecordAppended`` if unknown)."""
    base: dict[str, Any] = {
        "originator_id": owner,
        "originator_version": ordinal,
        "timestamp": TraceEvent.create_timestamp(),
        "caused_by": tuple(caused_by),
    }
    cls = event_class_for_schema(schema_ref)
    event: TraceEvent | None = None
    if cls is not None and mode == cls.MODE.value:
        known = _fields_of(cls)
        if known.issuperset(payload):
            try:
                event = cls(**base, **payload)
            except TypeError:
                event = None
    if event is None:
        event = RecordAppended(  # type: ignore[call-arg]
            **base,
            record_schema=schema_ref,
            record_mode=mode,
            record_kind_label=kind_label,
            record_payload=payload,
        )
    # The stored id is authoritative (and saves re-digesting on every load).
    event.__dict__["record_id"] = record_id
    return event


_STREAM_COLUMNS = (
    path_entries.c.path_ordinal,
    path_entries.c.record_id,
    path_entries.c.kind_label,
    records.c.schema_ref,
    records.c.mode,
    records.c.body_json,
    records.c.caused_by_json,
)


class TraceEventStore:
    """The runtime's persistence port over one kernel store (thread-safe)."""

    def __init__(self, store: SqlAlchemyTraceStore) -> None:
        self._store = store

    @property
    def trace(self) -> SqlAlchemyTraceStore:
        return self._store

    # ------------------------------------------------------------- reading

    def stream(self, owner: str, after: int = -1) -> Iterator[TraceEvent]:
        """Yield the events on ``owner``'s path with ordinal > ``after``."""
        stmt = (
            select(*_STREAM_COLUMNS)
            .join(records, records.c.record_id == path_entries.c.record_id)
            .where(path_entries.c.path_ref == owner)
            .where(path_entries.c.path_ordinal > after)
            .order_by(path_entries.c.path_ordinal)
        )
        with self._store.engine.connect() as conn:
            rows = conn.execute(stmt).all()
        for row in rows:
            yield record_to_event(
                owner,
                int(row.path_ordinal),
                record_id=row.record_id,
                schema_ref=row.schema_ref,
                mode=row.mode,
                kind_label=row.kind_label,
                payload=json.loads(row.body_json).get("payload", {}),
                caused_by=json.loads(row.caused_by_json),
            )

    def load(self, cls: type[TAgg], owner: str) -> TAgg:
        agg = cls.bare(owner)
        for event in self.stream(owner):
            event.mutate(agg)
        return agg

    def load_many(self, cls: type[TAgg], owners: Collection[str]) -> dict[str, TAgg]:
        return {owner: self.load(cls, owner) for owner in owners}

    # ------------------------------------------------------------- writing

    def save(
        self, aggregates: Sequence[TraceAggregate], intent_id: str
    ) -> AppendReceipt:
        groups: list[AppendGroup] = []
        expected: dict[str, int] = {}
        for agg in aggregates:
            pending = agg.pending()
            if not pending:
                continue
            expected.setdefault(agg.id, pending[0].originator_version)
            drafts = tuple(event_to_draft(e) for e in pending)
            groups.append(AppendGroup(agg.id, fact_drafts=drafts))
        batch = AppendBatch(intent_id, tuple(groups))
        receipt = self._store.append(
            TRUSTED_APPEND_CONTEXT, batch, expected_heads=expected
        )
        for agg in aggregates:
            agg.collect_events()
        return receipt


# ---------------------------------------------------------------- recorder


def _notification(entry: Any) -> Notification:
    record = entry.record
    state = canonical_json_text(
        {
            "record_id": record.record_id,
            "mode": record.envelope.mode,
            "kind_label": record.fact_kind,
            "payload": dict(record.payload),
            "caused_by": list(record.envelope.caused_by_record_ids),
        }
    ).encode()
    return Notification(
        originator_id=record.trace_owner_id,
        originator_version=record.owner_ordinal,
        topic=record.envelope.schema_ref,
        state=state,
        id=entry.position + 1,
    )


class KernelRecorder(ApplicationRecorder):
    """The kernel store as the library's application recorder.

    Stored events carry the schema ref as topic and, as state, the canonical
    JSON of ``{mode, kind_label, payload, caused_by}``; ``insert_events``
    needs an ``append_intent_id`` keyword (one batch per call).
    """

    def __init__(self, store: SqlAlchemyTraceStore, poll_interval: float = 0.2):
        self.store = store
        self.poll_interval = poll_interval

    def insert_events(
        self, stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> Sequence[int] | None:
        intent = kwargs.get("append_intent_id")
        if not intent:
            raise ValueError("insert_events needs append_intent_id=...")
        groups, expected = self._groups(stored_events)
        try:
            receipt = self.store.append(
                TRUSTED_APPEND_CONTEXT,
                AppendBatch(str(intent), tuple(groups)),
                expected_heads=expected,
            )
        except OrdinalConflictError as error:
            raise IntegrityError(str(error)) from error
        return [int(c.split(":", 1)[1]) + 1 for c in receipt.commit_receipts]

    @staticmethod
    def _groups(
        stored_events: Sequence[StoredEvent],
    ) -> tuple[list[AppendGroup], dict[str, int]]:
        groups: list[AppendGroup] = []
        expected: dict[str, int] = {}
        for stored in stored_events:
            owner = str(stored.originator_id)
            state = json.loads(stored.state)
            draft = RecordDraft(
                mode=state.get("mode", "capture"),
                schema_ref=stored.topic,
                payload=state.get("payload", {}),
                kind_label=state.get("kind_label", ""),
                caused_by_fact_ids=tuple(state.get("caused_by", ())),
            )
            expected.setdefault(owner, stored.originator_version)
            if groups and groups[-1].trace_owner_id == owner:
                last = groups[-1]
                groups[-1] = AppendGroup(owner, fact_drafts=(*last.fact_drafts, draft))
            else:
                groups.append(AppendGroup(owner, fact_drafts=(draft,)))
        return groups, expected

    def select_events(
        self,
        originator_id: Any,
        *,
        gt: int | None = None,
        lte: int | None = None,
        desc: bool = False,
        limit: int | None = None,
    ) -> Sequence[StoredEvent]:
        events = TraceEventStore(self.store).stream(
            str(originator_id), -1 if gt is None else gt
        )
        out = [
            StoredEvent(
                originator_id=e.originator_id,
                originator_version=e.originator_version,
                topic=e.schema_ref,
                state=canonical_json_text(
                    {
                        "mode": e.mode.value,
                        "kind_label": e.kind_label,
                        "payload": e.payload(),
                        "caused_by": list(e.caused_by),
                    }
                ).encode(),
            )
            for e in events
            if lte is None or e.originator_version <= lte
        ]
        if desc:
            out.reverse()
        return out[:limit] if limit is not None else out

    def select_notifications(
        self,
        start: int | None,
        limit: int,
        stop: int | None = None,
        topics: Sequence[str] = (),
        *,
        inclusive_of_start: bool = True,
    ) -> Sequence[Notification]:
        # notification id = log position + 1
        after = -1
        if start is not None:
            after = start - 2 if inclusive_of_start else start - 1
        entries = self.store.read_log(after, limit, schema_refs=list(topics) or None)
        out = [_notification(e) for e in entries]
        if stop is not None:
            out = [n for n in out if n.id <= stop]
        return out

    def max_notification_id(self) -> int | None:
        position = self.store.max_position()
        return None if position < 0 else position + 1

    def subscribe(
        self, gt: int | None = None, topics: Sequence[str] = ()
    ) -> Subscription[ApplicationRecorder]:
        return _PollingSubscription(self, gt, topics)


class _PollingSubscription(Subscription[ApplicationRecorder]):
    def __init__(
        self, recorder: KernelRecorder, gt: int | None, topics: Sequence[str]
    ) -> None:
        super().__init__(recorder=recorder, gt=gt, topics=topics)
        self._kernel = recorder
        self._buffer: list[Notification] = []
        self._wake = threading.Event()

    def __next__(self) -> Notification:
        while not self._has_been_stopped:
            if self._buffer:
                notification = self._buffer.pop(0)
                self._last_notification_id = notification.id
                return notification
            after = self._last_notification_id or 0
            self._buffer = list(
                self._kernel.select_notifications(
                    after, 100, topics=self._topics, inclusive_of_start=False
                )
            )
            if not self._buffer:
                self._wake.wait(self._kernel.poll_interval)
        raise StopIteration

    def stop(self) -> None:
        super().stop()
        self._wake.set()
