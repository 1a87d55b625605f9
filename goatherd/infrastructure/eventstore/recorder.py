"""The kernel store as the eventsourcing library's application recorder.

The notification log is the store's global commit log (notification id =
position + 1) with a polling subscription. ``insert_events`` is ONE kernel
append batch: under the ``append_intent_id`` keyword when given (a replay of
a committed intent returns its stored ids), else under a fresh random intent;
each originator's first event version is its expected head, so a version
already taken (or a batch whose versions are not contiguous) is the
library's ``IntegrityError`` and nothing is written.

Stored events map to records in two ways. A state that is exactly the
canonical JSON of ``{caused_by, kind_label, mode, payload}`` (what
:func:`stored_state` makes) is a NATIVE record: its payload is the record's
payload, so the trace reads like any other. Any other state (the library's
own transcoded aggregates, raw bytes) is kept OPAQUE: a capture whose payload
holds the bytes base64-encoded under kind label ``eventsourcing:stored-event``;
reading returns the exact bytes. Originator ids are owner paths (strings;
UUIDs are stored as their text). Versions are path ordinals, 0-based.
"""

from __future__ import annotations

import base64
import json
import threading
import uuid
from collections.abc import Mapping, Sequence
from typing import Any, Final

from eventsourcing.persistence import (
    ApplicationRecorder,
    IntegrityError,
    Notification,
    StoredEvent,
    Subscription,
)

from goatherd.domain import (
    TRUSTED_APPEND_CONTEXT,
    AppendBatch,
    AppendGroup,
    AppendIntentConflictError,
    OrdinalConflictError,
    Record,
    RecordDraft,
)
from goatherd.domain.canonical import canonical_json_text
from goatherd.infrastructure.store import SqlAlchemyTraceStore

__all__ = [
    "KernelAggregateRecorder",
    "KernelRecorder",
    "OPAQUE_KIND_LABEL",
    "stored_state",
]

OPAQUE_KIND_LABEL: Final = "eventsourcing:stored-event"
_OPAQUE_KEY: Final = "eventsourcing_state"
_NATIVE_KEYS: Final = frozenset({"caused_by", "kind_label", "mode", "payload"})


def stored_state(
    mode: str, kind_label: str, payload: Mapping[str, object], caused_by: Sequence[str]
) -> bytes:
    """Return the state bytes of a native stored event (canonical JSON)."""
    return canonical_json_text(
        {
            "caused_by": list(caused_by),
            "kind_label": kind_label,
            "mode": mode,
            "payload": dict(payload),
        }
    ).encode()


def _draft(stored: StoredEvent) -> RecordDraft:
    native = _native(stored.state)
    if native is not None:
        return RecordDraft(
            mode=str(native["mode"]),
            schema_ref=stored.topic,
            payload=dict(native["payload"]),
            kind_label=str(native["kind_label"]),
            caused_by_fact_ids=tuple(str(p) for p in native["caused_by"]),
        )
    return RecordDraft(
        mode="capture",
        schema_ref=stored.topic,
        payload={_OPAQUE_KEY: base64.b64encode(stored.state).decode("ascii")},
        kind_label=OPAQUE_KIND_LABEL,
    )


def _native(state: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(state)
    except ValueError:
        return None
    if not isinstance(value, dict) or set(value) != _NATIVE_KEYS:
        return None
    if not isinstance(value["payload"], dict) or not isinstance(
        value["caused_by"], list
    ):
        return None
    try:
        exact = stored_state(
            value["mode"], value["kind_label"], value["payload"], value["caused_by"]
        )
    except (TypeError, ValueError):
        return None
    return value if exact == state else None


def _state_of(record: Record) -> bytes:
    payload = record.payload
    if record.fact_kind == OPAQUE_KIND_LABEL and set(payload) == {_OPAQUE_KEY}:
        return base64.b64decode(str(payload[_OPAQUE_KEY]))
    return stored_state(
        record.envelope.mode,
        record.view.kind_label if record.view else "",
        payload,
        record.envelope.caused_by_record_ids,
    )


def _groups(
    stored_events: Sequence[StoredEvent],
) -> tuple[list[AppendGroup], dict[str, int]]:
    groups: list[AppendGroup] = []
    expected: dict[str, int] = {}
    following: dict[str, int] = {}
    for stored in stored_events:
        owner = str(stored.originator_id)
        version = stored.originator_version
        if owner in following and following[owner] != version:
            raise IntegrityError(
                f"events of {owner} in one batch must have contiguous versions:"
                f" expected {following[owner]}, got {version}"
            )
        following[owner] = version + 1
        expected.setdefault(owner, version)
        draft = _draft(stored)
        if groups and groups[-1].trace_owner_id == owner:
            last = groups[-1]
            groups[-1] = AppendGroup(owner, fact_drafts=(*last.fact_drafts, draft))
        else:
            groups.append(AppendGroup(owner, fact_drafts=(draft,)))
    return groups, expected


class KernelRecorder(ApplicationRecorder):
    """The kernel store as the library's application recorder (see module docs)."""

    def __init__(self, store: SqlAlchemyTraceStore, poll_interval: float = 0.2) -> None:
        self.store = store
        self.poll_interval = poll_interval

    def insert_events(
        self, stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> Sequence[int] | None:
        if not stored_events:
            return None
        intent = str(kwargs.get("append_intent_id") or f"eventsourcing:{uuid.uuid4()}")
        groups, expected = _groups(stored_events)
        try:
            receipt = self.store.append(
                TRUSTED_APPEND_CONTEXT,
                AppendBatch(intent, tuple(groups)),
                expected_heads=expected,
            )
        except (OrdinalConflictError, AppendIntentConflictError) as error:
            raise IntegrityError(str(error)) from error
        return [int(c.split(":", 1)[1]) + 1 for c in receipt.commit_receipts]

    def select_events(
        self,
        originator_id: Any,
        *,
        gt: int | None = None,
        lte: int | None = None,
        desc: bool = False,
        limit: int | None = None,
    ) -> Sequence[StoredEvent]:
        entries = self.store.read_path(str(originator_id), -1 if gt is None else gt)
        out = [
            StoredEvent(
                originator_id=originator_id,
                originator_version=e.record.owner_ordinal,
                topic=e.record.envelope.schema_ref,
                state=_state_of(e.record),
            )
            for e in entries
            if lte is None or e.record.owner_ordinal <= lte
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
        out = [
            Notification(
                originator_id=e.record.trace_owner_id,
                originator_version=e.record.owner_ordinal,
                topic=e.record.envelope.schema_ref,
                state=_state_of(e.record),
                id=e.position + 1,
            )
            for e in entries
        ]
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


class KernelAggregateRecorder(KernelRecorder):
    """The same recorder as an aggregate recorder: inserts report no ids."""

    def insert_events(
        self, stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> Sequence[int] | None:
        super().insert_events(stored_events, **kwargs)
        return None


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
