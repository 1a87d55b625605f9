"""The cells of a stored row, read raw and type-checked before any check sees them.

On SQLite each cell is read as ``typeof(cell)`` plus its raw bytes and
decoded here (``_sqlite_cells``), elsewhere as the driver returns it;
``_Cells`` gives the row parsers typed access to one row, and the first bad
cell (wrong type, NUL, past 64 bits, not JSON or not in the canonical storage
form) is reported naming its table, column and row, which ``_parse_all``
then leaves out. It imports the domain's canonical JSON, the store's codec
and schema (reads only).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any, Final, TypeVar

from sqlalchemy import Connection, Table, inspect

from goatherd.domain.canonical import canonical_json_text
from goatherd.domain.errors import DomainError
from goatherd.infrastructure.store.codec import storage_json
from goatherd.infrastructure.store.schema import TRACE_TABLES, side_writes

__all__ = ["Report"]

_INT64: Final = (-(2**63), 2**63 - 1)
_T = TypeVar("_T")

Report = Callable[[str, str, "str | None"], None]
"""``report(check, detail, record_id)``: how a malformed cell is named."""

_TEXT: Final = (str,)
_INTEGER: Final = (int,)
_BYTES: Final = (bytes, memoryview)
_KINDS: Final[dict[str, tuple[type, ...]]] = {
    "Text": _TEXT,
    "String": _TEXT,
    "Integer": _INTEGER,
    "BigInteger": _INTEGER,
    "LargeBinary": _BYTES,
}
_KIND_NAMES: Final[dict[tuple[type, ...], str]] = {
    _TEXT: "text",
    _INTEGER: "an integer",
    _BYTES: "bytes",
}


def _fits(value: object) -> bool:
    return isinstance(value, int) and _INT64[0] <= value <= _INT64[1]


class _Undecodable:
    """A SQLite text cell whose bytes are not UTF-8."""

    __slots__ = ()


_UNDECODABLE: Final = _Undecodable()


class _MalformedRowError(Exception):
    """Raised inside a row parser: the row is reported and skipped."""


class _Cells:
    """Typed access to one raw row; the first bad cell names the row and stops."""

    def __init__(
        self,
        table: str,
        row: dict[str, Any],
        label: str,
        record_id: str | None,
        report: Report,
    ) -> None:
        self._table = table
        self._row = row
        self._label = label
        self._record_id = record_id
        self._report = report

    def _bad(self, column: str, what: str) -> _MalformedRowError:
        value = self._row.get(column)
        shown = "bytes that are not UTF-8" if value is _UNDECODABLE else _short(value)
        where = f"{self._label}: " if self._label else ""
        self._report(
            "well-formed",
            f"{where}{self._table}.{column} {what} (found {shown})",
            self._record_id,
        )
        return _MalformedRowError()

    def declared(self, table: Table) -> None:
        """Check every column against its declared type and nullability.

        The parsers check the columns they read in detail; this covers every
        other column too (a column added by a later schema version included).
        """
        for column in table.columns:
            value = self._row.get(column.name)
            if value is None:
                if not column.nullable:
                    raise self._bad(column.name, "is NULL")
                continue
            kind = _KINDS.get(type(column.type).__name__)
            if kind is not None and not isinstance(value, kind):
                raise self._bad(column.name, f"is not {_KIND_NAMES[kind]}")
            if isinstance(value, str) and "\x00" in value:
                raise self._bad(column.name, "contains NUL")
            if kind is _INTEGER and (isinstance(value, bool) or not _fits(value)):
                raise self._bad(column.name, "does not fit 64 bits")

    def text(self, column: str, *, empty: bool = True) -> str:
        value = self._row.get(column)
        if not isinstance(value, str):
            raise self._bad(column, "is not text")
        if not empty and not value:
            raise self._bad(column, "is empty")
        return value

    def optional_text(self, column: str) -> str | None:
        return None if self._row.get(column) is None else self.text(column)

    def integer(self, column: str) -> int:
        value = self._row.get(column)
        if type(value) is not int:
            raise self._bad(column, "is not an integer")
        if not _INT64[0] <= value <= _INT64[1]:
            raise self._bad(column, "does not fit 64 bits")
        return value

    def optional_integer(self, column: str) -> int | None:
        return None if self._row.get(column) is None else self.integer(column)

    def blob(self, column: str) -> bytes:
        value = self._row.get(column)
        if isinstance(value, memoryview):
            value = bytes(value)
        if not isinstance(value, bytes):
            raise self._bad(column, "is not bytes")
        return value

    def json(self, column: str, shape: type) -> Any:
        text = self.text(column)
        try:
            value = json.loads(text)
        except (ValueError, RecursionError):
            raise self._bad(column, "is not JSON") from None
        if not isinstance(value, shape):
            raise self._bad(column, f"is not a JSON {shape.__name__}")
        try:
            canonical = storage_json(value, root=column)
        except (DomainError, RecursionError):
            raise self._bad(column, "holds a value JSON records cannot") from None
        if canonical != text and not _legacy_body(column, value, text):
            # The value itself is fine: name the form and keep the row.
            self._bad(column, "is not in the canonical storage form")
        return value

    def string_list(self, column: str) -> tuple[str, ...]:
        value = self.json(column, list)
        if not all(isinstance(item, str) for item in value):
            raise self._bad(column, "is not a list of strings")
        return tuple(value)


def _legacy_body(column: str, value: object, text: str) -> bool:
    """Whether ``text`` is the body form stores wrote before the U+007F fix.

    Those stores kept an ASCII payload in its digest form, which leaves
    U+007F unescaped; the content is the same, so the form is accepted.
    """
    if column != "body_json" or not text.isascii():
        return False
    try:
        return canonical_json_text(value, root=column) == text
    except DomainError:
        return False


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _present(conn: Connection, table: Table) -> list[str]:
    """The table's schema columns the database has (a v1 trace lacks some)."""
    have = {column["name"] for column in inspect(conn).get_columns(table.name)}
    return [column.name for column in table.columns if column.name in have]


def _absent(conn: Connection) -> tuple[str, ...]:
    absent: list[str] = []
    names = set(inspect(conn).get_table_names())
    for table in TRACE_TABLES:
        if table is side_writes and table.name not in names:
            continue  # a trace before schema v3: StoredRows.side is None
        present = set(_present(conn, table))
        absent += (
            f"{table.name}.{column.name}"
            for column in table.columns
            if column.name not in present
        )
    return tuple(absent)


def _sqlite_cells(conn: Connection, table: Table) -> Iterator[dict[str, Any]]:
    names = _present(conn, table)
    keys = ", ".join(f'"{c.name}"' for c in table.primary_key.columns)
    cells = ", ".join(f'typeof("{name}"), CAST("{name}" AS BLOB)' for name in names)
    sql = f'SELECT {cells} FROM "{table.name}" ORDER BY {keys}'  # noqa: S608
    for raw in conn.exec_driver_sql(sql):
        yield {
            name: _sqlite_value(raw[2 * i], raw[2 * i + 1])
            for i, name in enumerate(names)
        }


def _sqlite_value(kind: str, data: bytes | None) -> object:
    if data is None or kind == "null":
        return None
    if kind == "blob":
        return bytes(data)
    try:
        text = bytes(data).decode("utf-8")
    except UnicodeDecodeError:
        return _UNDECODABLE
    if kind == "integer":
        return int(text)
    if kind == "real":
        return float(text)
    return text


def _driver_cells(conn: Connection, table: Table) -> Iterator[dict[str, Any]]:
    keys = ", ".join(f'"{c.name}"' for c in table.primary_key.columns)
    names = ", ".join(f'"{name}"' for name in _present(conn, table))
    sql = f'SELECT {names} FROM "{table.name}" ORDER BY {keys}'  # noqa: S608
    for row in conn.exec_driver_sql(sql).mappings():
        yield dict(row)


def _cells(conn: Connection, table: Table) -> Iterator[dict[str, Any]]:
    if conn.dialect.name == "sqlite":
        return _sqlite_cells(conn, table)
    return _driver_cells(conn, table)


def _parse_all(
    conn: Connection,
    table: Table,
    who: Callable[[dict[str, Any]], tuple[str, str | None]],
    parse: Callable[[_Cells], _T],
    report: Report,
) -> tuple[_T, ...]:
    parsed: list[_T] = []
    for row in _cells(conn, table):
        label, record_id = who(row)
        cells = _Cells(table.name, row, label, record_id, report)
        try:
            cells.declared(table)
            parsed.append(parse(cells))
        except _MalformedRowError:
            continue
    return tuple(parsed)
