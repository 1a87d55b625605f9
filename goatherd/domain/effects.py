"""Effect events: the transient notice the store publishes after each commit.

An :class:`EffectEvent` is NOT a retained record: it is a bus message that
carries just enough of one newly retained ordinary path entry for live
observation (supervisor, SSE clients, projection runners). The trace store is
the durable record; a subscriber that fell behind re-reads the store.

Pure values only: the timestamp is stamped by whoever publishes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from goatherd.domain.records import Payload

__all__ = ["EffectEvent"]


@dataclass(frozen=True, slots=True)
class EffectEvent:
    """One newly committed ordinary path entry, as published on the bus.

    Attributes:
        record_id: the content-addressed id of the retained record.
        intent_id: the append intent that committed it (the idempotency key).
        trace_owner_id: the owner path of this path entry.
        owner_ordinal: the entry's ordinal on that path.
        position: the store-global log position (``n`` of ``commit:n``).
        mode: ``capture`` or ``declaration``.
        schema_ref: the record's schema.
        kind_label: the path entry's kind label.
        payload: the record's payload.
        causal_parents: group parents then the draft's explicit parents, in order.
        timestamp: wall clock at publish; not part of any identity.
    """

    record_id: str
    intent_id: str
    trace_owner_id: str
    owner_ordinal: int
    position: int
    mode: str
    schema_ref: str
    kind_label: str
    payload: Payload = field(default_factory=dict)
    causal_parents: tuple[str, ...] = ()
    timestamp: datetime | None = None
