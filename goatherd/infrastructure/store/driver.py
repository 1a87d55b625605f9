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

from goatherd.domain.errors import ReadRequestError

__all__ = ["Driver", "Row", "placeholders"]

Row = tuple[Any, ...]


class Driver:
    """Execute qmark-style SQL (``?``) on a Connection's DBAPI connection."""

    __slots__ = ("_postgres", "_raw")

    def __init__(self, conn: Connection) -> None:
        self._postgres = conn.dialect.name == "postgresql"
        self._raw: Any = conn.connection.driver_connection

    @classmethod
    def of(cls, raw: Any, *, postgres: bool) -> Driver:
        """Return a driver over a bare DBAPI connection (sqlite3 or psycopg)."""
        driver = cls.__new__(cls)
        driver._postgres = postgres
        driver._raw = raw
        return driver

    @property
    def raw(self) -> Any:
        """The DBAPI connection."""
        return self._raw

    @property
    def postgres(self) -> bool:
        """Whether the connection is PostgreSQL (else SQLite)."""
        return self._postgres

    def rows(self, sql: str, params: Sequence[object] = ()) -> list[Row]:
        """Return every row of a query."""
        if not self._postgres:
            # sqlite3's own execute: its cursor lives and dies in C.
            try:
                return list(self._raw.execute(sql, params).fetchall())
            except UnicodeEncodeError as error:
                raise _bad_text(error) from error
        cursor = self._raw.cursor()
        try:
            cursor.execute(self._sql(sql), tuple(params))
            return list(cursor.fetchall())
        except UnicodeEncodeError as error:
            raise _bad_text(error) from error
        finally:
            cursor.close()

    def rows_many(
        self, queries: Sequence[tuple[str, Sequence[object]]]
    ) -> list[list[Row]]:
        """Return the rows of several queries (one round trip in a pipeline)."""
        cursors = []
        try:
            for sql, params in queries:
                cursor = self._raw.cursor()
                cursors.append(cursor)
                cursor.execute(self._sql(sql), tuple(params))
            return [list(cursor.fetchall()) for cursor in cursors]
        except UnicodeEncodeError as error:
            raise _bad_text(error) from error
        finally:
            for cursor in cursors:
                cursor.close()

    def run(self, sql: str, params: Sequence[object] = ()) -> int:
        """Execute one statement; return the number of rows it changed."""
        if not self._postgres:
            try:
                return int(self._raw.execute(sql, params).rowcount)
            except UnicodeEncodeError as error:
                raise _bad_text(error) from error
        cursor = self._raw.cursor()
        try:
            cursor.execute(self._sql(sql), tuple(params))
            return int(cursor.rowcount)
        except UnicodeEncodeError as error:
            raise _bad_text(error) from error
        finally:
            cursor.close()

    def run_many(self, sql: str, rows: Sequence[Row]) -> int:
        """Execute one statement once per row; return the rows changed in total.

        The count is meaningless inside a PostgreSQL pipeline (the append
        path's writes there do not use it).
        """
        if not rows:
            return 0
        if len(rows) == 1:
            return self.run(sql, rows[0])
        if not self._postgres:
            try:
                return int(self._raw.executemany(sql, rows).rowcount)
            except UnicodeEncodeError as error:
                raise _bad_text(error) from error
        cursor = self._raw.cursor()
        try:
            cursor.executemany(self._sql(sql), rows)
            return int(cursor.rowcount)
        except UnicodeEncodeError as error:
            raise _bad_text(error) from error
        finally:
            cursor.close()

    def _sql(self, sql: str) -> str:
        return _format_style(sql) if self._postgres else sql


def _bad_text(error: UnicodeEncodeError) -> ReadRequestError:
    # Appends refuse invalid text before any SQL runs; a read naming such
    # text (a lone surrogate in an id) fails in the driver's encoder: report
    # it as the caller's bad request.
    return ReadRequestError(
        f"a query argument is not valid text: {error.reason} "
        f"({error.object[error.start : error.end]!r})"
    )


@lru_cache(maxsize=512)
def _format_style(sql: str) -> str:
    # psycopg uses %s; the statements here contain no literal '?' or '%'.
    return sql.replace("?", "%s")


@lru_cache(maxsize=1024)
def placeholders(count: int) -> str:
    """Return ``(?, ?, ...)`` with ``count`` placeholders, for an ``IN`` list."""
    return "(" + ", ".join("?" * count) + ")"
