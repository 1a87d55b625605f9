"""Read every stored row for ``verify``, checking the type of every cell first.

SQLite stores any value in any column, so a tampered file can hold text where
an ordinal belongs or bytes that are not UTF-8 where an id belongs. On SQLite
each cell is read as ``typeof(cell)`` plus its raw bytes and decoded here, so
nothing the driver would choke on ever raises: a malformed cell becomes a
``well-formed`` problem naming its table, column and row, and the row is left
out of the later checks. PostgreSQL enforces its column types, so there the
driver's values are taken as they are. NUL in text is a problem: appends
refuse it on every backend (issue 13 item 4). A schema v1 trace (read as it
is) lacks the chain columns of v2; they read as NULL. A trace before schema
v3 has no ``side_writes`` table: ``StoredRows.side`` is then ``None``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Final, TypeVar

from sqlalchemy import Connection, Table, inspect

from goatherd.domain.canonical import canonical_json_text
from goatherd.domain.errors import DomainError
from goatherd.infrastructure.blobs.store import blob_tables
from goatherd.infrastructure.store.codec import redacted_by, storage_json
from goatherd.infrastructure.store.schema import (
    TRACE_TABLES,
    append_intents,
    checkpoint_snapshots,
    contexts,
    frontiers,
    materialization_intents,
    meta,
    owner_ordinals,
    path_entries,
    record_edges,
    records,
    side_writes,
)

__all__ = [
    "BlobRow",
    "CONTEXT_REF_NAMES",
    "ContentRow",
    "ContextRow",
    "EdgeRow",
    "EntryRow",
    "FrontierRow",
    "HolderRow",
    "IntentRow",
    "LedgerRow",
    "RecordRow",
    "SideRow",
    "StoredRows",
    "load_rows",
]

CONTEXT_REF_NAMES: Final = (
    "active_binding_refs",
    "capability_witness_refs",
    "semantic_environment_refs",
    "visibility_policy_refs",
)
_INT64: Final = (-(2**63), 2**63 - 1)
_T = TypeVar("_T")

Report = Callable[[str, str, "str | None"], None]
"""``report(check, detail, record_id)``: how a malformed cell is named."""


@dataclass(frozen=True, slots=True)
class RecordRow:
    """One ``records`` row, every cell well-formed."""

    record_id: str
    digest: str
    schema_ref: str
    mode: str
    witness_ref: str
    caused_by: tuple[str, ...]
    payload: dict[str, Any]
    intent: str
    redacted_by: str | None = None
    """The redaction the stored body names (its exact redaction form), if any."""


@dataclass(frozen=True, slots=True)
class EntryRow:
    """One ``path_entries`` row."""

    path: str
    ordinal: int
    record_id: str
    context: str
    kind: str
    intent: str
    receipt: str
    position: int | None
    txid: int | None = None


@dataclass(frozen=True, slots=True)
class IntentRow:
    """One ``append_intents`` row, its receipt parsed."""

    intent_id: str
    batch_digest: str
    receipt: dict[str, Any]
    committed_at: str
    txid: int | None = None


@dataclass(frozen=True, slots=True)
class ContextRow:
    """One ``contexts`` row, its ref arrays parsed."""

    context_id: str
    refs: dict[str, tuple[str, ...]]
    substrate_ref: str
    containment: str
    intent: str


@dataclass(frozen=True, slots=True)
class EdgeRow:
    """One ``record_edges`` row."""

    child: str
    index: int
    parent: str


@dataclass(frozen=True, slots=True)
class FrontierRow:
    """One ``frontiers`` index row."""

    frontier_id: str
    target: str
    through_fact: str
    through_ordinal: int
    publisher: str | None
    created_by: str
    intent: str


@dataclass(frozen=True, slots=True)
class LedgerRow:
    """One ``materialization_intents`` row, its receipt parsed."""

    intent: str
    request_digest: str
    receipt: dict[str, Any]
    completed_at: str
    receipt_json: str = ""


@dataclass(frozen=True, slots=True)
class BlobRow:
    """One ``checkpoint_snapshots`` row, its state parsed."""

    checkpoint_id: str
    scope_id: str
    seq: int
    state: dict[str, Any]
    snapshot: bytes
    created_at_ns: int
    state_json: str = ""


@dataclass(frozen=True, slots=True)
class SideRow:
    """One ``side_writes`` row: a side step of the commit chain (ADR 0064)."""

    commit_seq: int
    table_name: str
    row_key: str
    row_digest: str | None


@dataclass(frozen=True, slots=True)
class ContentRow:
    """One ``content_blobs`` row of the blob store."""

    digest: str
    size: int
    data: bytes


@dataclass(frozen=True, slots=True)
class HolderRow:
    """One ``blob_holders`` row of the blob store."""

    holder: str
    digest: str


@dataclass(frozen=True, slots=True)
class StoredRows:
    """Every well-formed row of the trace tables."""

    meta: dict[str, str]
    intents: tuple[IntentRow, ...]
    contexts: tuple[ContextRow, ...]
    ordinals: dict[str, int]
    records: tuple[RecordRow, ...]
    edges: tuple[EdgeRow, ...]
    entries: tuple[EntryRow, ...]
    frontiers: tuple[FrontierRow, ...]
    ledger: tuple[LedgerRow, ...]
    blobs: tuple[BlobRow, ...]
    contents: tuple[ContentRow, ...] = ()
    holders: tuple[HolderRow, ...] = ()
    side: tuple[SideRow, ...] | None = None
    """The side steps; ``None``: the trace has no ``side_writes`` (before v3)."""
    postgres: bool = False
    absent_columns: tuple[str, ...] = ()
    """``table.column`` of every schema column the database lacks."""


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


def _record(c: _Cells) -> RecordRow:
    erased_by = redacted_by(c.text("body_json"))
    if erased_by is not None:
        payload: dict[str, Any] = {}
    else:
        body = c.json("body_json", dict)
        payload = body.get("payload")
        if not isinstance(payload, dict) or set(body) != {"payload"}:
            raise c._bad("body_json", 'is not {"payload": {...}}')
    return RecordRow(
        record_id=c.text("record_id", empty=False),
        digest=c.text("digest"),
        schema_ref=c.text("schema_ref"),
        mode=c.text("mode"),
        witness_ref=c.text("witness_ref"),
        caused_by=c.string_list("caused_by_json"),
        payload=payload,
        intent=c.text("append_intent_id"),
        redacted_by=erased_by,
    )


def _entry(c: _Cells) -> EntryRow:
    return EntryRow(
        path=c.text("path_ref", empty=False),
        ordinal=c.integer("path_ordinal"),
        record_id=c.text("record_id"),
        context=c.text("retained_context_ref"),
        kind=c.text("kind_label"),
        intent=c.text("append_intent_id"),
        receipt=c.text("commit_receipt"),
        position=c.optional_integer("position"),
        txid=c.optional_integer("txid"),
    )


def _intent(c: _Cells) -> IntentRow:
    return IntentRow(
        intent_id=c.text("append_intent_id", empty=False),
        batch_digest=c.text("batch_digest"),
        receipt=c.json("receipt_json", dict),
        committed_at=c.text("committed_at"),
        txid=c.optional_integer("txid"),
    )


def _context(c: _Cells) -> ContextRow:
    return ContextRow(
        context_id=c.text("context_id", empty=False),
        refs={name: c.string_list(f"{name}_json") for name in CONTEXT_REF_NAMES},
        substrate_ref=c.text("substrate_ref"),
        containment=c.text("containment"),
        intent=c.text("append_intent_id"),
    )


def _edge(c: _Cells) -> EdgeRow:
    return EdgeRow(
        child=c.text("child_record_id"),
        index=c.integer("parent_position"),
        parent=c.text("parent_record_id"),
    )


def _frontier(c: _Cells) -> FrontierRow:
    return FrontierRow(
        frontier_id=c.text("frontier_id", empty=False),
        target=c.text("target_trace_owner_id"),
        through_fact=c.text("through_fact_id"),
        through_ordinal=c.integer("through_owner_ordinal"),
        publisher=c.optional_text("publisher_trace_owner_id"),
        created_by=c.text("created_by_fact_id"),
        intent=c.text("append_intent_id"),
    )


def _ledger(c: _Cells) -> LedgerRow:
    return LedgerRow(
        intent=c.text("materialize_intent_id", empty=False),
        request_digest=c.text("request_digest"),
        receipt=c.json("receipt_json", dict),
        completed_at=c.text("completed_at"),
        receipt_json=c.text("receipt_json"),
    )


def _blob(c: _Cells) -> BlobRow:
    return BlobRow(
        checkpoint_id=c.text("checkpoint_id", empty=False),
        scope_id=c.text("scope_id"),
        seq=c.integer("seq"),
        state=c.json("state_json", dict),
        snapshot=c.blob("snapshot"),
        created_at_ns=c.integer("created_at_unixnano"),
        state_json=c.text("state_json"),
    )


def _side(c: _Cells) -> SideRow:
    c.text("commit_digest", empty=False)
    c.optional_text("head_digest")
    return SideRow(
        commit_seq=c.integer("commit_seq"),
        table_name=c.text("table_name", empty=False),
        row_key=c.text("row_key"),
        row_digest=c.optional_text("row_digest"),
    )


def _side_rows(conn: Connection, report: Report) -> tuple[SideRow, ...] | None:
    if side_writes.name not in set(inspect(conn).get_table_names()):
        return None
    return _parse_all(conn, side_writes, _side_who, _side, report)


def _side_who(row: dict[str, Any]) -> tuple[str, str | None]:
    return f"side write {_short(row.get('commit_seq'))}", None


def _pair(key: str, value: str) -> Callable[[_Cells], tuple[str, str]]:
    def parse(c: _Cells) -> tuple[str, str]:
        return c.text(key, empty=False), c.text(value)

    return parse


def _ordinal(c: _Cells) -> tuple[str, int]:
    return c.text("trace_owner_id", empty=False), c.integer("next_ordinal")


def _key(
    column: str, noun: str, *, is_record: bool = False
) -> Callable[[dict[str, Any]], tuple[str, str | None]]:
    def who(row: dict[str, Any]) -> tuple[str, str | None]:
        value = row.get(column)
        if not isinstance(value, str):
            return f"{noun} with an unreadable key", None
        return ("", value) if is_record else (f"{noun} {value!r}", None)

    return who


def _entry_who(row: dict[str, Any]) -> tuple[str, str | None]:
    place = f"entry {_short(row.get('path_ref'))}#{_short(row.get('path_ordinal'))}"
    record_id = row.get("record_id")
    return place, record_id if isinstance(record_id, str) else None


def _content(c: _Cells) -> ContentRow:
    return ContentRow(
        digest=c.text("digest", empty=False),
        size=c.integer("size"),
        data=c.blob("data"),
    )


def _holder(c: _Cells) -> HolderRow:
    return HolderRow(holder=c.text("holder", empty=False), digest=c.text("digest"))


def _blob_store_rows(
    conn: Connection, report: Report
) -> tuple[tuple[ContentRow, ...], tuple[HolderRow, ...]]:
    contents_table, holders_table = blob_tables()
    names = set(inspect(conn).get_table_names())
    contents: tuple[ContentRow, ...] = ()
    holders: tuple[HolderRow, ...] = ()
    if contents_table.name in names:
        contents = _parse_all(
            conn, contents_table, _key("digest", "blob"), _content, report
        )
    if holders_table.name in names:
        holders = _parse_all(
            conn, holders_table, _key("holder", "blob holder"), _holder, report
        )
    return contents, holders


def load_rows(conn: Connection, report: Report) -> StoredRows:
    """Read every trace table and the blob store; report malformed cells."""
    contents, holders = _blob_store_rows(conn, report)
    return StoredRows(
        postgres=conn.dialect.name == "postgresql",
        absent_columns=_absent(conn),
        contents=contents,
        holders=holders,
        meta=dict(
            _parse_all(
                conn, meta, _key("key", "meta key"), _pair("key", "value"), report
            )
        ),
        intents=_parse_all(
            conn, append_intents, _key("append_intent_id", "intent"), _intent, report
        ),
        contexts=_parse_all(
            conn, contexts, _key("context_id", "context"), _context, report
        ),
        ordinals=dict(
            _parse_all(
                conn, owner_ordinals, _key("trace_owner_id", "owner"), _ordinal, report
            )
        ),
        records=_parse_all(
            conn, records, _key("record_id", "record", is_record=True), _record, report
        ),
        edges=_parse_all(
            conn,
            record_edges,
            _key("child_record_id", "edge", is_record=True),
            _edge,
            report,
        ),
        entries=_parse_all(conn, path_entries, _entry_who, _entry, report),
        frontiers=_parse_all(
            conn,
            frontiers,
            _key("created_by_fact_id", "frontier", is_record=True),
            _frontier,
            report,
        ),
        ledger=_parse_all(
            conn,
            materialization_intents,
            _key("materialize_intent_id", "materialization"),
            _ledger,
            report,
        ),
        blobs=_parse_all(
            conn,
            checkpoint_snapshots,
            _key("checkpoint_id", "checkpoint"),
            _blob,
            report,
        ),
        side=_side_rows(conn, report),
    )
