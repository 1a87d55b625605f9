"""Follow a trace that other processes write: tail the log onto an effect bus.

The store publishes on its own bus only for the appends it makes itself. A
viewer of a trace written by another process (``goatherd traceui``) starts a
:class:`LogTailer`: a thread that polls ``read_log`` after the last position
it saw and publishes one :class:`EffectEvent` per new log entry, so SSE
clients get the same stream as in-process subscribers. Positions equal commit
order, so resuming after the last position read never skips a commit.
"""

from __future__ import annotations

import logging
import threading
from typing import Final, Protocol

from goatherd.domain.effects import EffectEvent
from goatherd.domain.log import LogEntry
from goatherd.infrastructure.store import EffectPublisher

__all__ = ["LogTailer", "entry_event"]

_PAGE: Final = 1000
_LOG = logging.getLogger(__name__)


class _Log(Protocol):
    def read_log(self, after: int = -1, limit: int = 1000) -> tuple[LogEntry, ...]:
        """Return entries after a position."""
        ...

    def max_position(self) -> int:
        """Return the head position."""
        ...


def entry_event(entry: LogEntry) -> EffectEvent:
    """Return the bus event of one log entry (no timestamp: not known here)."""
    record = entry.record
    return EffectEvent(
        record_id=record.record_id,
        intent_id=entry.append_intent_id,
        trace_owner_id=record.trace_owner_id,
        owner_ordinal=record.owner_ordinal,
        position=entry.position,
        mode=record.envelope.mode,
        schema_ref=record.envelope.schema_ref,
        kind_label=record.fact_kind,
        payload=record.payload,
        causal_parents=tuple(record.envelope.caused_by_record_ids),
    )


class LogTailer:
    """Publish every log entry committed after ``start`` (default: the head)."""

    def __init__(
        self,
        store: _Log,
        bus: EffectPublisher,
        *,
        interval: float = 0.25,
        after: int | None = None,
    ) -> None:
        self._store = store
        self._bus = bus
        self._interval = interval
        self._after = store.max_position() if after is None else after
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name="goatherd-log-tailer", daemon=True
        )

    @property
    def position(self) -> int:
        """The last log position published."""
        return self._after

    def poll(self) -> int:
        """Publish what is new now; return how many entries were published."""
        published = 0
        while True:
            entries = self._store.read_log(self._after, _PAGE)
            for entry in entries:
                self._bus.publish(entry_event(entry))
            published += len(entries)
            if entries:
                self._after = entries[-1].position
            if len(entries) < _PAGE:
                return published

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.poll()
            except Exception:
                # An outage (a locked or briefly missing database) must not
                # end the stream; the next poll resumes at the same position.
                _LOG.exception("trace UI: reading new log entries failed")
            self._stop.wait(self._interval)

    def start(self) -> LogTailer:
        """Start polling in a daemon thread."""
        self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Stop polling (idempotent)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout)
