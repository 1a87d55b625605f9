"""The trace UI's index: every ordinary path entry, ready to serve as JSON.

Each log entry becomes one :class:`UiEntry`: the columns the UI filters on
(owner, ordinal, mode, position) plus the record pre-encoded as the JSON object
``/api/records`` returns, so serving a page is a range query and a join.

Pure: :func:`ui_entry` builds the row; the view stores it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Protocol

from goatherd.domain.log import LogEntry
from goatherd.domain.records import Record
from goatherd.projections.framework import ALL_SCHEMAS, Projection, View, on

__all__ = [
    "UiEntry",
    "UiIndexProjection",
    "UiIndexView",
    "ui_entry",
    "ui_record_object",
]


@dataclass(frozen=True, slots=True)
class UiEntry:
    """One path entry as the trace UI stores it."""

    position: int
    owner: str
    ordinal: int
    record_id: str
    schema_ref: str
    mode: str
    record_json: str


def ui_record_object(
    record: Record, *, position: int | None, intent: str = ""
) -> dict[str, object]:
    """Return the JSON object the UI serves for one path entry of ``record``.

    Arrays are never null: a record without parents has ``"parents": []``.
    """
    envelope = record.envelope
    return {
        "position": position,
        "id": envelope.record_id,
        "digest": envelope.digest,
        "schema": envelope.schema_ref,
        "mode": envelope.mode,
        "kind": record.fact_kind,
        "owner": record.trace_owner_id,
        "ordinal": record.owner_ordinal,
        "context": record.retained_context_ref,
        "witness": envelope.witness_ref,
        "parents": list(envelope.caused_by_record_ids),
        "intent": intent,
        "payload": record.payload,
    }


def ui_entry(entry: LogEntry) -> UiEntry:
    """Build the index row of ``entry`` (deterministic: sorted keys, compact)."""
    record = entry.record
    obj = ui_record_object(
        record, position=entry.position, intent=entry.append_intent_id
    )
    return UiEntry(
        position=entry.position,
        owner=record.trace_owner_id,
        ordinal=record.owner_ordinal,
        record_id=record.record_id,
        schema_ref=record.envelope.schema_ref,
        mode=record.envelope.mode,
        record_json=json.dumps(obj, sort_keys=True, separators=(",", ":")),
    )


class UiIndexView(View, Protocol):
    """Where the UI index keeps its rows."""

    def add(self, entry: UiEntry) -> None:
        """Store one row (a position is stored once)."""
        ...


class UiIndexProjection(Projection[UiIndexView]):
    """Index every ordinary path entry for the trace UI."""

    name = "goatherd.traceui_index"
    version = 1

    @on(ALL_SCHEMAS)
    def indexed(self, view: UiIndexView, entry: LogEntry) -> None:
        """Store the entry's row."""
        view.add(ui_entry(entry))
