"""How a recorded intervention's occurrence is identified (its append intent).

The supervisor records each intervention under an append intent, so a replay
of the same occurrence records it once (ADR 0018). An event that is a record
names itself: its record id at its log position. A synthetic event (a merge
review, a pre-tool gate call that is not recorded yet) has no record id; it is
identified by a caller-provided ``seq`` when given, else by the digest of its
content and verdict at the watched path's head.

The head excludes the path's TRAILING intervention records: recording the
intervention moves the head, and a retry must find the same key. So two
identical synthetic events with nothing else recorded on the path between
them are the same occurrence; a host that means two occurrences there passes
distinct ``seq`` values.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from goatherd.domain import (
    CanonicalEncodingError,
    Intervention,
    LogEntry,
    SupervisedEvent,
    sha256_hex,
    storage_digest,
)

__all__ = [
    "InterventionPathReader",
    "intervention_occurrence_key",
    "settled_head",
]


class InterventionPathReader(Protocol):
    """The reads of the trace store that find a path's head."""

    def head(self, owner: str) -> int:
        """Return the owner's next ordinal (0 for an unknown owner)."""
        ...

    def read_path(
        self, owner: str, after_ordinal: int = -1, limit: int | None = None
    ) -> Sequence[LogEntry]:
        """Return ``owner``'s path entries after ``after_ordinal``, in order."""
        ...


def settled_head(reader: InterventionPathReader, owner: str, skip_schema: str) -> int:
    """Return ``owner``'s head, not counting its trailing ``skip_schema`` records."""
    head = reader.head(owner)
    while head > 0:
        last = reader.read_path(owner, head - 2, 1)
        if not last or last[0].record.envelope.schema_ref != skip_schema:
            break
        head -= 1
    return head


def intervention_occurrence_key(
    reader: InterventionPathReader,
    owner: str,
    event: SupervisedEvent,
    intervention: Intervention,
    *,
    skip_schema: str,
    seq: int | None = None,
) -> str:
    """Return the key that tells this intervention's occurrence apart.

    Args:
        reader: the store the intervention is recorded in.
        owner: the path it is recorded on.
        event: the triggering event (a record or a synthetic event).
        intervention: the verdict (part of a synthetic event's identity).
        skip_schema: the interventions' schema (trailing ones do not count
            in the head).
        seq: a caller-provided occurrence number (wins for synthetic events).

    Returns:
        ``<record id>@<position>`` for a recorded event, ``seq:<n>`` for a
        synthetic one with a ``seq``, else ``event:<digest>@<settled head>``.
    """
    trigger = getattr(event, "record_id", "") or ""
    if trigger:
        # The same content can be appended many times (one record id, several
        # path entries); the log position tells those occurrences apart.
        return f"{trigger}@{getattr(event, 'position', None)}"
    if seq is not None:
        return f"seq:{seq}"
    digest = _content_digest(event, intervention)
    return f"event:{digest}@{settled_head(reader, owner, skip_schema)}"


def _content_digest(event: SupervisedEvent, intervention: Intervention) -> str:
    content = {
        "trace_owner_id": event.trace_owner_id,
        "mode": str(event.mode),
        "schema_ref": event.schema_ref,
        "kind_label": event.kind_label,
        "payload": {str(k): _plain(v, deep=True) for k, v in event.payload.items()},
        "verdict": {
            "type": intervention.type.value,
            "scope_id": intervention.scope_id,
            "payload": _plain(intervention.payload),
        },
    }
    try:
        return storage_digest(content)
    except CanonicalEncodingError:
        return sha256_hex(repr(content))


def _plain(value: object, *, deep: bool = False) -> object:
    # JSON scalars as they are, else str(); deep keeps lists and mappings.
    if value is None or isinstance(value, str | int | float | bool):
        return value
    if deep and isinstance(value, list | tuple):
        return [_plain(item, deep=True) for item in value]
    if deep and isinstance(value, dict):
        return {str(k): _plain(v, deep=True) for k, v in value.items()}
    return str(value)
