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

The row types live in :mod:`.stored_rows`, the raw reading and the typed
access to one row's cells in :mod:`.row_cells`; this module parses each
table's rows and assembles :class:`StoredRows` (:func:`load_rows`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import Connection, inspect

from goatherd.infrastructure.audit.row_cells import (
    Report,
    _absent,
    _Cells,
    _parse_all,
    _short,
)
from goatherd.infrastructure.audit.stored_rows import (
    CONTEXT_REF_NAMES,
    BlobRow,
    ContentRow,
    ContextRow,
    EdgeRow,
    EntryRow,
    FrontierRow,
    HolderRow,
    IntentRow,
    LedgerRow,
    RecordRow,
    SideRow,
    StoredRows,
)
from goatherd.infrastructure.blobs.store import blob_tables
from goatherd.infrastructure.store.codec import redacted_by
from goatherd.infrastructure.store.schema import (
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
