"""Move a trace between databases as JSON lines: ``goatherd export`` / ``import``.

The export is one JSON object per line, in commit order:

* ``header``: format, ABI and schema versions;
* ``intent``: one committed append intent with everything it retained (its new
  contexts, new records, path entries, frontier index rows and its receipt);
* ``side``: one write to a side table (ADR 0064): the table, the row key and
  the digest of the row it left (``null``: deleted), at its place among the
  intents in commit order, so that an import replays the same chain;
* ``materialization`` and ``checkpoint``: the ledger rows and legacy checkpoint
  rows; ``blob``: each byte string of the blob store with its holders;
* ``end``: the number of lines before it and the SHA-256 of their bytes, so a
  truncated or reordered file is refused, and the trace's chained head digest
  (``<commits>:sha256:<hex>``) at the moment of the export, to be noted down
  and compared later with ``goatherd verify --expect-head``.

Import (``trace_import``) proves every line with the rules ``verify`` uses and
writes it in one transaction, into a temporary file that becomes the target
only on success (ADR 0041).
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import IO, Any, Final

from sqlalchemy import Connection, func, inspect, select

from goatherd.domain.canonical import ABI_VERSION, canonical_json_text
from goatherd.infrastructure.blobs.store import blob_tables
from goatherd.infrastructure.portability.trace_import import (
    EXPORT_FORMAT,
    ImportRejectedError,
    ImportSummary,
    import_trace,
)
from goatherd.infrastructure.store.codec import redacted_by
from goatherd.infrastructure.store.schema import (
    SCHEMA_VERSION,
    append_intents,
    checkpoint_snapshots,
    contexts,
    frontiers,
    materialization_intents,
    path_entries,
    records,
    side_writes,
)
from goatherd.infrastructure.store.store import SqlAlchemyTraceStore

__all__ = [
    "EXPORT_FORMAT",
    "ExportSummary",
    "ImportRejectedError",
    "ImportSummary",
    "export_trace",
    "import_trace",
]

_CONTEXT_REFS: Final = (
    "active_binding_refs",
    "capability_witness_refs",
    "semantic_environment_refs",
    "visibility_policy_refs",
)
Progress = Callable[[str, int, int], None]
_INT64_MIN: Final = -(2**63)
_INT64_MAX: Final = 2**63 - 1


# ------------------------------------------------------------------- export


@dataclass(frozen=True, slots=True)
class ExportSummary:
    """What an export wrote: its line count and the head of what it read."""

    lines: int
    head: str


def export_trace(
    store: SqlAlchemyTraceStore, out: IO[str], *, progress: Progress | None = None
) -> ExportSummary:
    """Write ``store``'s trace to ``out`` as JSON lines.

    Everything is read in one transaction; the end line names the head of
    exactly that snapshot.
    """
    digest = hashlib.sha256()
    count = 0

    def emit(obj: dict[str, Any]) -> None:
        nonlocal count
        line = canonical_json_text(obj, root="line") + "\n"
        digest.update(line.encode("utf-8"))
        out.write(line)
        count += 1

    with store.engine.connect() as conn:
        emit(_header(conn))
        for obj in _intent_lines(conn, progress):
            emit(obj)
        for obj in _ledger_lines(conn):
            emit(obj)
        head = str(store.head_at(conn))
        conn.rollback()
    end = {"type": "end", "lines": count, "sha256": digest.hexdigest(), "head": head}
    out.write(canonical_json_text(end, root="line") + "\n")
    return ExportSummary(count + 1, head)


def _header(conn: Connection) -> dict[str, Any]:
    return {
        "type": "header",
        "format": EXPORT_FORMAT,
        "abi_version": ABI_VERSION,
        "schema_version": SCHEMA_VERSION,
        "records": int(
            conn.execute(select(func.count()).select_from(records)).scalar_one()
        ),
    }


def _intent_order(conn: Connection) -> list[str]:
    first = (
        select(
            path_entries.c.append_intent_id,
            func.min(path_entries.c.position).label("first_position"),
        )
        .group_by(path_entries.c.append_intent_id)
        .subquery()
    )
    # Commit order: the chain's numbers where the trace has them (schema v2),
    # else first log position (a v1 trace, numbered so by its upgrade).
    numbered = "commit_seq" in {
        c["name"] for c in inspect(conn).get_columns(append_intents.name)
    }
    keys = [append_intents.c.commit_seq.nulls_last()] if numbered else []
    stmt = (
        select(append_intents.c.append_intent_id)
        .outerjoin(first, first.c.append_intent_id == append_intents.c.append_intent_id)
        .order_by(
            *keys,
            first.c.first_position.nulls_last(),
            append_intents.c.committed_at,
            append_intents.c.append_intent_id,
        )
    )
    return [str(value) for value in conn.execute(stmt).scalars()]


def _grouped(conn: Connection, table: Any, column: Any) -> dict[str, list[Any]]:
    grouped: dict[str, list[Any]] = {}
    for row in conn.execute(select(table)).mappings():
        grouped.setdefault(str(row[column]), []).append(row)
    return grouped


def _intent_lines(
    conn: Connection, progress: Progress | None
) -> Iterator[dict[str, Any]]:
    order = _intent_order(conn)
    intents = {
        row["append_intent_id"]: row
        for row in conn.execute(select(append_intents)).mappings()
    }
    steps = deque(_side_steps(conn))
    new_contexts = _grouped(conn, contexts, "append_intent_id")
    new_records = _grouped(conn, records, "append_intent_id")
    entries = _grouped(conn, path_entries, "append_intent_id")
    index = _grouped(conn, frontiers, "append_intent_id")
    for done, intent_id in enumerate(order, start=1):
        row = intents[intent_id]
        seq = row.get("commit_seq")
        while steps and seq is not None and steps[0]["commit_seq"] < seq:
            yield _side_out(steps.popleft())
        yield {
            "type": "intent",
            "append_intent_id": intent_id,
            "batch_digest": row["batch_digest"],
            "committed_at": str(row["committed_at"]),
            "receipt": json.loads(row["receipt_json"]),
            "contexts": [_context_out(c) for c in new_contexts.get(intent_id, [])],
            "records": [
                _record_out(r)
                for r in _sorted_records(
                    new_records.get(intent_id, []), entries.get(intent_id, [])
                )
            ],
            "entries": [
                _entry_out(e) for e in _sorted_entries(entries.get(intent_id, []))
            ],
            "frontiers": [_frontier_out(f) for f in index.get(intent_id, [])],
        }
        if progress is not None and (done % 500 == 0 or done == len(order)):
            progress("export", done, len(order))
    for step in steps:
        yield _side_out(step)


def _side_steps(conn: Connection) -> list[Any]:
    """The side steps in commit order (none before schema v3: no table)."""
    if not inspect(conn).has_table(side_writes.name):
        return []
    stmt = select(side_writes).order_by(side_writes.c.commit_seq)
    return list(conn.execute(stmt).mappings())


def _side_out(row: Any) -> dict[str, Any]:
    return {
        "type": "side",
        "table": row["table_name"],
        "row_key": row["row_key"],
        "row_digest": row["row_digest"],
    }


def _sorted_entries(rows: list[Any]) -> list[Any]:
    # Witness entries (no position) come first: they were inserted first.
    return sorted(
        rows,
        key=lambda e: (
            e["position"] is not None,
            -1 if e["position"] is None else int(e["position"]),
            int(e["path_ordinal"]),
        ),
    )


def _sorted_records(rows: list[Any], entries: list[Any]) -> list[Any]:
    # Records in the order their first entry was inserted, so that parents and
    # witnesses always precede the records that cite them.
    order: dict[str, int] = {}
    for index, entry in enumerate(_sorted_entries(entries)):
        order.setdefault(str(entry["record_id"]), index)
    return sorted(
        rows, key=lambda r: (order.get(str(r["record_id"]), len(order)), r["record_id"])
    )


def _context_out(row: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"context_id": row["context_id"]}
    for name in _CONTEXT_REFS:
        out[name] = json.loads(row[f"{name}_json"])
    out["substrate_ref"] = row["substrate_ref"]
    out["containment"] = row["containment"]
    return out


def _record_out(row: Any) -> dict[str, Any]:
    out = {
        "record_id": row["record_id"],
        "schema_ref": row["schema_ref"],
        "mode": row["mode"],
        "witness_ref": row["witness_ref"],
        "caused_by": json.loads(row["caused_by_json"]),
    }
    erased_by = redacted_by(row["body_json"])
    if erased_by is not None:  # exported in redaction form (ADR 0062)
        out["redacted_by"] = erased_by
    else:
        out["payload"] = json.loads(row["body_json"]).get("payload", {})
    return out


def _entry_out(row: Any) -> dict[str, Any]:
    return {
        "path_ref": row["path_ref"],
        "path_ordinal": int(row["path_ordinal"]),
        "record_id": row["record_id"],
        "retained_context_ref": row["retained_context_ref"],
        "kind_label": row["kind_label"],
        "commit_receipt": row["commit_receipt"],
        "position": None if row["position"] is None else int(row["position"]),
    }


def _frontier_out(row: Any) -> dict[str, Any]:
    return {
        "frontier_id": row["frontier_id"],
        "target_trace_owner_id": row["target_trace_owner_id"],
        "through_fact_id": row["through_fact_id"],
        "through_owner_ordinal": int(row["through_owner_ordinal"]),
        "publisher_trace_owner_id": row["publisher_trace_owner_id"],
        "created_by_fact_id": row["created_by_fact_id"],
    }


def _ledger_lines(conn: Connection) -> Iterator[dict[str, Any]]:
    stmt = select(materialization_intents).order_by(
        materialization_intents.c.materialize_intent_id
    )
    for row in conn.execute(stmt).mappings():
        yield {
            "type": "materialization",
            "materialize_intent_id": row["materialize_intent_id"],
            "request_digest": row["request_digest"],
            "receipt": json.loads(row["receipt_json"]),
            "completed_at": str(row["completed_at"]),
        }
    stmt = select(checkpoint_snapshots).order_by(
        checkpoint_snapshots.c.created_at_unixnano, checkpoint_snapshots.c.checkpoint_id
    )
    for row in conn.execute(stmt).mappings():
        yield {
            "type": "checkpoint",
            "checkpoint_id": row["checkpoint_id"],
            "scope_id": row["scope_id"],
            "seq": int(row["seq"]),
            "state": json.loads(row["state_json"]),
            "snapshot_b64": base64.b64encode(bytes(row["snapshot"])).decode("ascii"),
            "created_at_unixnano": int(row["created_at_unixnano"]),
        }
    yield from _blob_lines(conn)


def _blob_lines(conn: Connection) -> Iterator[dict[str, Any]]:
    contents, holders = blob_tables()
    if not inspect(conn).has_table(contents.name):
        return
    held: dict[str, list[str]] = {}
    if inspect(conn).has_table(holders.name):
        for holder, digest in conn.execute(
            select(holders.c.holder, holders.c.digest).order_by(holders.c.holder)
        ):
            held.setdefault(str(digest), []).append(str(holder))
    stmt = select(contents.c.digest, contents.c.data).order_by(contents.c.digest)
    for digest, data in conn.execution_options(yield_per=100).execute(stmt):
        yield {
            "type": "blob",
            "digest": digest,
            "data_b64": base64.b64encode(bytes(data)).decode("ascii"),
            "holders": held.get(str(digest), []),
        }
