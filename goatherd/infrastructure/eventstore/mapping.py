"""The mapper between runtime events and kernel records.

:func:`event_to_draft` maps an event to a kernel record draft (schema = the
event's ``TOPIC``, its mode and kind label, payload = its fields, parents =
its ``caused_by``); :func:`event_from_entry` maps a stored path entry back,
folding unknown schemas (and known schemas whose payload the class cannot
hold) as ``RecordAppended``, which only advances the aggregate's version.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, Final

from goatherd.domain import (
    RecordAppended,
    RecordDraft,
    TraceEvent,
    event_class_for_schema,
)
from goatherd.domain.log import LogEntry

__all__ = ["event_from_entry", "event_to_draft", "record_to_event"]

_BASE: Final = frozenset(
    {"originator_id", "originator_version", "timestamp", "caused_by"}
)
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
    payload: Mapping[str, Any],
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
    if (
        cls is not None
        and mode == cls.MODE.value
        and _fields_of(cls).issuperset(payload)
    ):
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
            record_payload=dict(payload),
        )
    # The stored id is authoritative (and saves re-digesting on every load).
    event.__dict__["record_id"] = record_id
    return event


def event_from_entry(entry: LogEntry) -> TraceEvent:
    """Rebuild the event one path entry (of the store's log values) holds."""
    record = entry.record
    envelope = record.envelope
    view = record.view
    assert view is not None, "path entries always carry their view"
    return record_to_event(
        view.trace_owner_id,
        view.owner_ordinal,
        record_id=envelope.record_id,
        schema_ref=envelope.schema_ref,
        mode=envelope.mode,
        kind_label=view.kind_label,
        payload=record.payload,
        caused_by=envelope.caused_by_record_ids,
    )
