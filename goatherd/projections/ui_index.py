"""The trace UI's index: every ordinary path entry, ready to serve as JSON.

Each log entry becomes one :class:`UiEntry`: the columns the UI filters on
(owner, ordinal, mode, position) plus the record pre-encoded as the JSON object
``/api/records`` returns, so serving a page is a range query and a join.

Pure: :func:`ui_entry` builds the row; the view stores it. The JSON text is
assembled from escaped parts by :func:`ui_record_json` (one C-encoder call for
the payload) rather than a ``json.dumps`` of a fresh dict per record; it is
byte-identical to ``json.dumps(ui_record_object(...), sort_keys=True,
separators=(",", ":"))``, which a test checks.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from json.encoder import (  # type: ignore[attr-defined]
    c_make_encoder,
    encode_basestring_ascii,
)
from typing import Final, Protocol

from goatherd.domain.log import LogEntry
from goatherd.domain.records import Record
from goatherd.projections.framework import ALL_SCHEMAS, Projection, View, on

__all__ = [
    "UiEntry",
    "UiIndexProjection",
    "UiIndexView",
    "ui_entry",
    "ui_record_json",
    "ui_record_object",
]

_str: Final[Callable[[str], str]] = encode_basestring_ascii
# The C encoder built once (json.dumps builds an encoder per call): sorted
# keys, compact separators, ASCII escapes - the trace's storage flavour.
_payload_chunks: Final[Callable[[object, int], list[str]]] = c_make_encoder(
    None, None, encode_basestring_ascii, None, ":", ",", True, False, False
)


def _payload_json(payload: object) -> str:
    return "".join(_payload_chunks(payload, 0))


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
    An erased record (ADR 0062) has an empty payload and ``redacted_by``.
    """
    envelope = record.envelope
    shown: dict[str, object] = {
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
    if record.redacted_by is not None:
        shown["redacted_by"] = record.redacted_by
    return shown


def ui_record_json(record: Record, *, position: int | None, intent: str = "") -> str:
    """Return :func:`ui_record_object` as compact, key-sorted, ASCII JSON text.

    Byte-identical to ``json.dumps(ui_record_object(record, position=position,
    intent=intent), sort_keys=True, separators=(",", ":"))`` at a third of
    the cost: the fixed keys are written in sorted order, strings go through
    the C escaper, and only the payload is encoded by the JSON encoder.
    """
    envelope = record.envelope
    view = record.view
    owner, ordinal, context, kind = (
        (
            view.trace_owner_id,
            view.owner_ordinal,
            view.retained_context_ref,
            view.kind_label,
        )
        if view is not None
        else ("", -1, "", "")
    )
    parents = ",".join(map(_str, envelope.caused_by_record_ids))
    return (
        f'{{"context":{_str(context)},"digest":{_str(envelope.digest)},'
        f'"id":{_str(envelope.record_id)},"intent":{_str(intent)},'
        f'"kind":{_str(kind or envelope.schema_ref)},"mode":{_str(envelope.mode)},'
        f'"ordinal":{int(ordinal)},"owner":{_str(owner)},"parents":[{parents}],'
        f'"payload":{_payload_json(record.payload)},'
        f'"position":{"null" if position is None else int(position)},'
        f"{_redacted(record)}"
        f'"schema":{_str(envelope.schema_ref)},"witness":{_str(envelope.witness_ref)}}}'
    )


def _redacted(record: Record) -> str:
    erased_by = record.redacted_by
    return "" if erased_by is None else f'"redacted_by":{_str(erased_by)},'


def ui_entry(entry: LogEntry) -> UiEntry:
    """Build the index row of ``entry`` (deterministic: sorted keys, compact)."""
    record = entry.record
    envelope = record.envelope
    view = record.view
    return UiEntry(
        entry.position,
        view.trace_owner_id if view is not None else "",
        view.owner_ordinal if view is not None else -1,
        envelope.record_id,
        envelope.schema_ref,
        envelope.mode,
        ui_record_json(record, position=entry.position, intent=entry.append_intent_id),
    )


class UiIndexView(View, Protocol):
    """Where the UI index keeps its rows."""

    def add(self, entry: UiEntry) -> None:
        """Store one row (a position is stored once)."""
        ...


class UiIndexProjection(Projection[UiIndexView]):
    """Index every ordinary path entry for the trace UI."""

    name = "goatherd.traceui_index"
    version = 2  # 2: the record_key column replaced the index on record_id

    @on(ALL_SCHEMAS)
    def indexed(self, view: UiIndexView, entry: LogEntry) -> None:
        """Store the entry's row."""
        view.add(ui_entry(entry))
