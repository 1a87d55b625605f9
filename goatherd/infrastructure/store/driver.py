"""Run the append path's fixed statements straight on the DBAPI connection.

SQLAlchemy Core builds each statement object, derives its cache key and wraps
the call in an execution context: 50-100 us per statement on this project's
machine, which made up most of a single-record append (about a dozen
statements; see ``docs/benchmarks.md``, "Trace store"). The append path's
statements are fixed, plain SQL that SQLite and PostgreSQL both accept, except
for the placeholder style, so they run on the driver connection of the
SQLAlchemy ``Connection`` that opened the transaction (same transaction, same
locks). Everything else keeps using SQLAlchemy Core.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from sqlalchemy import Connection

__all__ = ["Driver", "Row", "placeholders"]

Row = tuple[Any, ...]


class Driver:
    """Execute qmark-style SQL (``?``) on a Connection's DBAPI connection."""

    __slots__ = ("_postgres", "_raw")

    def __init__(self, conn: Connection) -> None:
        self._postgres = conn.dialect.name == "postgresql"
        self._raw: Any = conn.connection.driver_connection

    @property
    def postgres(self) -> bool:
        """Whether the connection is PostgreSQL (else SQLite)."""
        return self._postgres

    def rows(self, sql: str, params: Sequence[object] = ()) -> list[Row]:
        """Return every row of a query."""
        cursor = self._raw.cursor()
        try:
            cursor.execute(self._sql(sql), tuple(params))
            return list(cursor.fetchall())
        finally:
            cursor.close()

    def run(self, sql: str, params: Sequence[object] = ()) -> None:
        """Execute one statement."""
        cursor = self._raw.cursor()
        try:
            cursor.execute(self._sql(sql), tuple(params))
        finally:
            cursor.close()

    def run_many(self, sql: str, rows: Sequence[Row]) -> None:
        """Execute one statement once per row (nothing for no rows)."""
        if not rows:
            return
        cursor = self._raw.cursor()
        try:
            if len(rows) == 1:
                cursor.execute(self._sql(sql), rows[0])
            else:
                cursor.executemany(self._sql(sql), rows)
        finally:
            cursor.close()

    def _sql(self, sql: str) -> str:
        return _format_style(sql) if self._postgres else sql


@lru_cache(maxsize=512)
def _format_style(sql: str) -> str:
    # psycopg uses %s; the statements here contain no literal '?' or '%'.
    return sql.replace("?", "%s")


@lru_cache(maxsize=1024)
def placeholders(count: int) -> str:
    """Return ``(?, ?, ...)`` with ``count`` placeholders, for an ``IN`` list."""
    return "(" + ", ".join("?" * count) + ")"
