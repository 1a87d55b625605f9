"""The rows of one trace, indexed once: the base every family of checks shares.

:class:`IndexedRows` holds what ``verify`` read (:class:`StoredRows`), the
``report`` and ``tick`` callbacks, and the indexes the checks look rows up
in (records, intents and contexts by id, entries by record, intent and path,
each record's first logged entry), with the orderings several families use:
the log order of the records and an intent's logged entries. It also holds
:func:`parse_timestamp`, which the checks and import share. It imports the
domain, the audit rows and rules, and nothing of the store's write path.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Final

from goatherd.domain.identity import ROOT_WITNESS_SCHEMA_REF, WITNESS_SCHEMA_REF
from goatherd.infrastructure.audit.rows import EntryRow, RecordRow, StoredRows
from goatherd.infrastructure.audit.rules import LoggedEntry, is_timestamp

__all__ = ["IndexedRows", "parse_timestamp"]

Report = Callable[[str, str, "str | None"], None]
Tick = Callable[[str, int, int], None]

_WITNESS_SCHEMAS: Final = (ROOT_WITNESS_SCHEMA_REF, WITNESS_SCHEMA_REF)


def parse_timestamp(value: str) -> datetime | None:
    """Parse a commit timestamp as SQLite or PostgreSQL wrote it (UTC if naive)."""
    if not is_timestamp(value):
        return None
    text = value.replace("Z", "+00:00")
    if len(text) >= 3 and text[-3] in "+-" and text[-2:].isdigit():
        text += ":00"
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


class IndexedRows:
    """One trace's rows, indexed for the checks that read them."""

    def __init__(self, rows: StoredRows, report: Report, tick: Tick) -> None:
        """Index ``rows``; problems go to ``report``, progress to ``tick``."""
        self.rows = rows
        self.report = report
        self.tick = tick
        self.records = {r.record_id: r for r in rows.records}
        self.intents = {i.intent_id: i for i in rows.intents}
        self.contexts = {c.context_id: c for c in rows.contexts}
        self.by_record: dict[str, list[EntryRow]] = {}
        self.by_intent: dict[str, list[EntryRow]] = {}
        self.by_path: dict[str, list[EntryRow]] = {}
        for entry in rows.entries:
            self.by_record.setdefault(entry.record_id, []).append(entry)
            self.by_intent.setdefault(entry.intent, []).append(entry)
            self.by_path.setdefault(entry.path, []).append(entry)
        self.first: dict[str, EntryRow] = {}
        for entry in sorted(
            (e for e in rows.entries if e.position is not None),
            key=lambda e: e.position or 0,
        ):
            self.first.setdefault(entry.record_id, entry)

    def _log_order(self) -> list[RecordRow]:
        def key(record: RecordRow) -> tuple[int, str]:
            entry = self.first.get(record.record_id)
            return (-1 if entry is None else entry.position or 0, record.record_id)

        return sorted(self.rows.records, key=key)

    def _logged(self, intent_id: str) -> list[LoggedEntry]:
        entries = sorted(
            (e for e in self.by_intent.get(intent_id, []) if e.position is not None),
            key=lambda e: e.position or 0,
        )
        return [
            LoggedEntry(
                position=e.position or 0,
                path=e.path,
                ordinal=e.ordinal,
                record_id=e.record_id,
                context=e.context,
                parents=self._parents(e.record_id),
            )
            for e in entries
        ]

    def _parents(self, record_id: str) -> tuple[str, ...]:
        record = self.records.get(record_id)
        return () if record is None else record.caused_by
