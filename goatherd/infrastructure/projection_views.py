"""SQL views for the built-in read models (SQLAlchemy Core, SQLite and PostgreSQL).

Each view is bound to one connection inside the projection runner's open
transaction, so its rows commit together with the runner's tracked position.

- :class:`SqlRowView`: a keyed table of frozen dataclass rows stored as JSON
  (the scope tree, checkpoints, retained outputs; and user read models that
  want a table without writing SQL).
- :class:`SqlUiIndexView`: the trace UI's index, one row per path entry,
  buffered and written with one ``executemany`` per batch.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import Final, Generic, TypeVar

from sqlalchemy import (
    BigInteger,
    Column,
    Connection,
    Index,
    Integer,
    MetaData,
    Table,
    Text,
    insert,
    select,
)
from sqlalchemy.dialects import postgresql, sqlite

from goatherd.projections import UiEntry

__all__ = [
    "SqlRowView",
    "SqlUiIndexView",
    "row_view_factory",
    "ui_index_table",
]

RowT = TypeVar("RowT")

_ID_TYPE: Final = BigInteger().with_variant(Integer, "sqlite")


def _row_table(name: str) -> Table:
    return Table(
        name,
        MetaData(),
        Column("seq", _ID_TYPE, primary_key=True, autoincrement=True),
        Column("key", Text, nullable=False, unique=True),
        Column("row_json", Text, nullable=False),
    )


def _encode_row(row: object) -> str:
    assert dataclasses.is_dataclass(row)
    assert not isinstance(row, type)
    return json.dumps(dataclasses.asdict(row), sort_keys=True, separators=(",", ":"))


def _decode_row(row_type: type[RowT], text: str) -> RowT:
    fields = json.loads(text)
    return row_type(
        **{k: tuple(v) if isinstance(v, list) else v for k, v in fields.items()}
    )


def _upsert(conn: Connection, table: Table, values: dict[str, object]) -> None:
    dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
    statement = dialect.insert(table).values(**values)
    conn.execute(
        statement.on_conflict_do_update(
            index_elements=["key"], set_={"row_json": statement.excluded.row_json}
        )
    )


class SqlRowView(Generic[RowT]):
    """A keyed table of dataclass rows (``RowView``), in first-insertion order."""

    def __init__(self, conn: Connection, table_name: str, row_type: type[RowT]) -> None:
        self._conn = conn
        self._table = _row_table(table_name)
        self._row_type = row_type

    @property
    def connection(self) -> Connection:
        return self._conn

    def create(self) -> None:
        self._table.create(self._conn, checkfirst=True)

    def drop(self) -> None:
        self._table.drop(self._conn, checkfirst=True)

    def get(self, key: str) -> RowT | None:
        text = self._conn.execute(
            select(self._table.c.row_json).where(self._table.c.key == key)
        ).scalar_one_or_none()
        return None if text is None else _decode_row(self._row_type, text)

    def put(self, key: str, row: RowT) -> None:
        _upsert(self._conn, self._table, {"key": key, "row_json": _encode_row(row)})

    def rows(self) -> tuple[RowT, ...]:
        result = self._conn.execute(
            select(self._table.c.row_json).order_by(self._table.c.seq)
        )
        return tuple(_decode_row(self._row_type, text) for (text,) in result)


def row_view_factory(
    table_name: str, row_type: type[RowT]
) -> Callable[[object], SqlRowView[RowT]]:
    """Return a ``view_factory`` binding a :class:`SqlRowView` to a connection."""

    def bind(transaction: object) -> SqlRowView[RowT]:
        assert isinstance(transaction, Connection)
        return SqlRowView(transaction, table_name, row_type)

    return bind


def ui_index_table(metadata: MetaData | None = None) -> Table:
    """Return the trace UI index table (one row per ordinary path entry)."""
    table = Table(
        "traceui_entries",
        metadata or MetaData(),
        Column("position", BigInteger, primary_key=True, autoincrement=False),
        Column("owner", Text, nullable=False),
        Column("ordinal", BigInteger, nullable=False),
        Column("record_id", Text, nullable=False),
        Column("schema_ref", Text, nullable=False),
        Column("mode", Text, nullable=False),
        Column("record_json", Text, nullable=False),
    )
    Index("traceui_entries_owner_ordinal", table.c.owner, table.c.ordinal)
    Index("traceui_entries_record", table.c.record_id)
    return table


class SqlUiIndexView:
    """The UI index (``UiIndexView``): rows buffered, written on :meth:`flush`."""

    def __init__(self, conn: Connection) -> None:
        self._conn = conn
        self._table = ui_index_table()
        self._pending: list[dict[str, object]] = []

    @classmethod
    def bind(cls, transaction: object) -> SqlUiIndexView:
        assert isinstance(transaction, Connection)
        return cls(transaction)

    @property
    def connection(self) -> Connection:
        return self._conn

    def create(self) -> None:
        self._table.create(self._conn, checkfirst=True)

    def drop(self) -> None:
        self._table.drop(self._conn, checkfirst=True)

    def add(self, entry: UiEntry) -> None:
        # a literal dict: dataclasses.asdict deep-copies and was half the cost
        self._pending.append(
            {
                "position": entry.position,
                "owner": entry.owner,
                "ordinal": entry.ordinal,
                "record_id": entry.record_id,
                "schema_ref": entry.schema_ref,
                "mode": entry.mode,
                "record_json": entry.record_json,
            }
        )

    def flush(self) -> None:
        if self._pending:
            self._conn.execute(insert(self._table), self._pending)
            self._pending = []
