"""The kernel store as the eventsourcing library's application recorder.

The notification log is the store's global commit log (notification id =
position + 1) with a polling subscription; ``insert_events`` is one kernel
append batch under the ``append_intent_id`` keyword, with the events' versions
as expected heads.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from typing import Any

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
    OrdinalConflictError,
    RecordDraft,
)
from goatherd.domain.canonical import canonical_json_text
from goatherd.infrastructure.eventstore.streams import TraceEventStore
from goatherd.infrastructure.store import SqlAlchemyTraceStore

__all__ = ["KernelRecorder"]


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
