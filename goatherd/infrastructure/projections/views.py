"""SQL views for the built-in read models (SQLAlchemy Core, SQLite and PostgreSQL).

Each view is bound to one connection inside the projection runner's open
transaction, so its rows commit together with the runner's tracked position.

- :class:`SqlRowView`: a keyed table of frozen dataclass rows stored as JSON
  (the scope tree, checkpoints, retained outputs; and user read models that
  want a table without writing SQL).
- :class:`SqlUiIndexView`: the trace UI's index, one row per path entry,
  buffered as tuples and written with one driver-level ``executemany`` per
  batch (SQLAlchemy Core's per-row parameter processing cost as much as the
  insert itself).

The index is the write-heavy one: 100,000 records must catch up in under
5 s. Its primary key is the log position (a rowid alias on SQLite), and the
by-record lookup goes through a 32-bit CRC of the record id
(:func:`record_key`) instead of an index on the 71-character id: inserting
random text keys into a B-tree was three quarters of the catch-up time.
"""

from __future__ import annotations

import dataclasses
import json
import zlib
from collections.abc import Callable
from typing import Any, Final, Generic, TypeVar

from sqlalchemy import (
    BigInteger,
    Column,
    Connection,
    Index,
    Integer,
    MetaData,
    Table,
    Text,
    select,
)

from goatherd.domain import (
    CheckpointAggregate,
    RetainedOutputAggregate,
    ScopeAggregate,
)
from goatherd.infrastructure.store.driver import Driver
from goatherd.projections import UiEntry, decode_aggregate, encode_aggregate

__all__ = [
    "SqlRowView",
    "SqlRuntimeStateView",
    "SqlUiIndexView",
    "record_key",
    "row_view_factory",
    "runtime_state_view_factory",
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


class SqlRowView(Generic[RowT]):
    """A keyed table of dataclass rows (``RowView``), in first-insertion order.

    Rows are stored as JSON: by default a dataclass's fields (lists read back
    as tuples); ``encode``/``decode`` replace that for richer rows.
    """

    def __init__(
        self,
        conn: Connection,
        table_name: str,
        row_type: type[RowT],
        *,
        encode: Callable[[RowT], object] | None = None,
        decode: Callable[[object], RowT] | None = None,
    ) -> None:
        self._conn = conn
        self._table = _row_table(table_name)
        self._row_type = row_type
        self._encode = encode
        self._decode = decode
        # The view lives inside one transaction that only it writes these
        # rows in, so what it read or wrote is what the table holds: a fold
        # reads each key from the database once (None: known absent).
        self._texts: dict[str, str | None] = {}
        # The driver-level statements skip SQLAlchemy's per-call compile and
        # parameter processing (most of a fold's time); the table name is
        # quoted by the dialect, the values are parameters.
        quoted = conn.dialect.identifier_preparer.quote(table_name)
        self._select_sql = f"SELECT row_json FROM {quoted} WHERE key = ?"  # noqa: S608
        self._upsert_sql = (
            f"INSERT INTO {quoted} (key, row_json) VALUES (?, ?)"  # noqa: S608
            " ON CONFLICT (key) DO UPDATE SET row_json = excluded.row_json"
        )

    @property
    def connection(self) -> Connection:
        return self._conn

    def create(self) -> None:
        self._table.create(self._conn, checkfirst=True)

    def drop(self) -> None:
        self._table.drop(self._conn, checkfirst=True)
        self._texts.clear()

    def get(self, key: str) -> RowT | None:
        if key in self._texts:
            text = self._texts[key]
        else:
            rows = Driver(self._conn).rows(self._select_sql, (key,))
            text = self._texts[key] = rows[0][0] if rows else None
        return None if text is None else self._read(text)

    def put(self, key: str, row: RowT) -> None:
        text = self._write(row)
        Driver(self._conn).run(self._upsert_sql, (key, text))
        self._texts[key] = text

    def rows(self) -> tuple[RowT, ...]:
        result = self._conn.execute(
            select(self._table.c.row_json).order_by(self._table.c.seq)
        )
        return tuple(self._read(text) for (text,) in result)

    def _read(self, text: str) -> RowT:
        if self._decode is None:
            return _decode_row(self._row_type, text)
        return self._decode(json.loads(text))

    def _write(self, row: RowT) -> str:
        if self._encode is None:
            return _encode_row(row)
        return json.dumps(self._encode(row), sort_keys=True, separators=(",", ":"))


def row_view_factory(
    table_name: str, row_type: type[RowT]
) -> Callable[[object], SqlRowView[RowT]]:
    """Return a ``view_factory`` binding a :class:`SqlRowView` to a connection."""

    def bind(transaction: object) -> SqlRowView[RowT]:
        assert isinstance(transaction, Connection)
        return SqlRowView(transaction, table_name, row_type)

    return bind


class SqlRuntimeStateView:
    """The runtime state read model in three tables (``RuntimeStateView``)."""

    def __init__(self, conn: Connection, prefix: str) -> None:
        self._scopes = _aggregate_view(conn, f"{prefix}scopes", ScopeAggregate)
        self._checkpoints = _aggregate_view(
            conn, f"{prefix}checkpoints", CheckpointAggregate
        )
        self._outputs = _aggregate_view(
            conn, f"{prefix}outputs", RetainedOutputAggregate
        )

    @property
    def connection(self) -> Connection:
        return self._scopes.connection

    def create(self) -> None:
        for view in self._views():
            view.create()

    def drop(self) -> None:
        for view in self._views():
            view.drop()

    def _views(self) -> tuple[SqlRowView[Any], ...]:
        return (self._scopes, self._checkpoints, self._outputs)

    def scope(self, owner: str) -> ScopeAggregate | None:
        return self._scopes.get(owner)

    def checkpoint(self, checkpoint_id: str) -> CheckpointAggregate | None:
        return self._checkpoints.get(checkpoint_id)

    def output(self, output_id: str) -> RetainedOutputAggregate | None:
        return self._outputs.get(output_id)

    def put_scope(self, scope: ScopeAggregate) -> None:
        self._scopes.put(scope.owner, scope)

    def put_checkpoint(self, checkpoint: CheckpointAggregate) -> None:
        self._checkpoints.put(checkpoint.checkpoint_id, checkpoint)

    def put_output(self, output: RetainedOutputAggregate) -> None:
        self._outputs.put(output.output_id, output)

    def scope_rows(self) -> tuple[ScopeAggregate, ...]:
        return self._scopes.rows()

    def checkpoint_rows(self) -> tuple[CheckpointAggregate, ...]:
        return self._checkpoints.rows()

    def output_rows(self) -> tuple[RetainedOutputAggregate, ...]:
        return self._outputs.rows()


AggT = TypeVar("AggT", ScopeAggregate, CheckpointAggregate, RetainedOutputAggregate)


def _aggregate_view(conn: Connection, table: str, cls: type[AggT]) -> SqlRowView[AggT]:
    def decode(data: object) -> AggT:
        assert isinstance(data, dict)
        return decode_aggregate(cls, data)

    return SqlRowView(conn, table, cls, encode=encode_aggregate, decode=decode)


def runtime_state_view_factory(
    prefix: str = "goatherd_",
) -> Callable[[object], SqlRuntimeStateView]:
    """Return a ``view_factory`` binding the runtime state's tables to a connection."""

    def bind(transaction: object) -> SqlRuntimeStateView:
        assert isinstance(transaction, Connection)
        return SqlRuntimeStateView(transaction, prefix)

    return bind


def record_key(record_id: str) -> int:
    """Return the indexed lookup key of ``record_id`` (CRC-32; collisions are fine).

    Queries match ``record_key`` first and then the exact ``record_id``.
    """
    return zlib.crc32(record_id.encode())


def ui_index_table(metadata: MetaData | None = None) -> Table:
    """Return the trace UI index table (one row per ordinary path entry)."""
    table = Table(
        "traceui_entries",
        metadata or MetaData(),
        Column("position", _ID_TYPE, primary_key=True, autoincrement=False),
        Column("owner", Text, nullable=False),
        Column("ordinal", BigInteger, nullable=False),
        Column("record_key", BigInteger, nullable=False),
        Column("record_id", Text, nullable=False),
        Column("schema_ref", Text, nullable=False),
        Column("mode", Text, nullable=False),
        Column("record_json", Text, nullable=False),
    )
    Index("traceui_entries_owner_ordinal", table.c.owner, table.c.ordinal)
    Index("traceui_entries_record_key", table.c.record_key)
    return table


_UI_INSERT: Final = (
    "INSERT INTO traceui_entries (position, owner, ordinal, record_key, record_id,"
    " schema_ref, mode, record_json) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)


class SqlUiIndexView:
    """The UI index (``UiIndexView``): rows buffered, written on :meth:`flush`."""

    def __init__(self, conn: Connection) -> None:
        self._conn = conn
        self._table = ui_index_table()
        self._pending: list[tuple[object, ...]] = []

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
        self._pending.append(
            (
                entry.position,
                entry.owner,
                entry.ordinal,
                zlib.crc32(entry.record_id.encode()),
                entry.record_id,
                entry.schema_ref,
                entry.mode,
                entry.record_json,
            )
        )

    def flush(self) -> None:
        if self._pending:
            Driver(self._conn).run_many(_UI_INSERT, self._pending)
            self._pending = []
