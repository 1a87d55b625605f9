"""What an import already wrote, read back: the records and contexts of earlier lines.

:class:`Lookup` answers an intent line's questions about earlier lines from
the rows already written in the import's transaction (records, contexts,
intents, frontier rows and path entries), reading each line's names in a few
``IN`` queries and keeping the witnesses cached, bounded; ``_Known`` is what
the proofs need of a retained record. It imports the domain's witness
schemas, the audit rows' context names and the store's schema (reads only).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Final

from sqlalchemy import Connection, Table, bindparam, case, select

from goatherd.domain.identity import ROOT_WITNESS_SCHEMA_REF, WITNESS_SCHEMA_REF
from goatherd.infrastructure.audit.rows import CONTEXT_REF_NAMES
from goatherd.infrastructure.store.schema import contexts, path_entries, records

__all__ = ["Lookup"]

_WITNESS_SCHEMAS: Final = (ROOT_WITNESS_SCHEMA_REF, WITNESS_SCHEMA_REF)


@dataclass(frozen=True, slots=True)
class _Known:
    """What the checks need of a retained record."""

    schema_ref: str
    witness_ref: str
    caused_by: tuple[str, ...]
    payload: dict[str, Any] | None


_RECORDS_IN: Final = select(
    records.c.record_id,
    records.c.schema_ref,
    records.c.witness_ref,
    records.c.caused_by_json,
    case(
        (records.c.schema_ref.in_(_WITNESS_SCHEMAS), records.c.body_json),
        else_=None,
    ),
).where(records.c.record_id.in_(bindparam("ids", expanding=True)))
_CONTEXTS_IN: Final = select(contexts).where(
    contexts.c.context_id.in_(bindparam("ids", expanding=True))
)
_CHUNK: Final = 500
_WITNESS_CACHE: Final = 4096


class Lookup:
    """Questions about earlier lines, answered from the rows already written.

    :meth:`prefetch` reads every record and context a line names in a few
    ``IN`` queries; witnesses (few, and cited by every record) stay cached
    across lines, bounded.
    """

    def __init__(self, conn: Connection) -> None:
        """Read through ``conn`` (the import's transaction)."""
        self._conn = conn
        self._records: dict[str, _Known | None] = {}
        self._contexts: dict[str, dict[str, Any] | None] = {}
        self._witnesses: dict[str, _Known] = {}

    def prefetch(self, record_ids: set[str], context_ids: set[str]) -> None:
        """Read the named records and contexts (absent ones are remembered too)."""
        self._records = dict.fromkeys(record_ids - set(self._witnesses))
        for chunk in _chunks(sorted(self._records)):
            for row in self._conn.execute(_RECORDS_IN, {"ids": chunk}):
                self._remember(row)
        self._contexts = dict.fromkeys(context_ids)
        for chunk in _chunks(sorted(context_ids)):
            for row in self._conn.execute(_CONTEXTS_IN, {"ids": chunk}):
                self._contexts[row.context_id] = _context_content(row)

    def _remember(self, row: Any) -> None:
        body = row[4]
        known = _Known(
            row.schema_ref,
            row.witness_ref,
            tuple(json.loads(row.caused_by_json)),
            None if body is None else json.loads(body)["payload"],
        )
        self._records[row.record_id] = known
        if body is not None and len(self._witnesses) < _WITNESS_CACHE:
            self._witnesses[row.record_id] = known

    def record(self, record_id: str) -> _Known | None:
        """Return a written record (its payload only for witnesses)."""
        if record_id in self._witnesses:
            return self._witnesses[record_id]
        if record_id not in self._records:
            self.prefetch({*self._records, record_id}, set(self._contexts))
        return self._records.get(record_id)

    def context(self, context_id: str) -> dict[str, Any] | None:
        """Return a written context's six content fields."""
        if context_id not in self._contexts:
            self.prefetch(set(self._records), {*self._contexts, context_id})
        return self._contexts.get(context_id)

    def exists(self, table: Table, column: str, value: str) -> bool:
        """Whether a written row of ``table`` has ``value`` in ``column``."""
        found = self._conn.execute(
            select(table.c[column]).where(table.c[column] == value).limit(1)
        ).first()
        return found is not None

    def entry_at(self, path: str, ordinal: int) -> str | None:
        """Return the record written at ``path#ordinal``."""
        found = self._conn.execute(
            select(path_entries.c.record_id).where(
                path_entries.c.path_ref == path, path_entries.c.path_ordinal == ordinal
            )
        ).scalar_one_or_none()
        return None if found is None else str(found)


def _chunks(items: list[str]) -> list[list[str]]:
    return [items[i : i + _CHUNK] for i in range(0, len(items), _CHUNK)]


def _context_content(row: Any) -> dict[str, Any]:
    content: dict[str, Any] = {
        name: json.loads(getattr(row, f"{name}_json")) for name in CONTEXT_REF_NAMES
    }
    content["substrate_ref"] = row.substrate_ref
    content["containment"] = row.containment
    return content
