"""Move a trace between databases as JSON lines: ``goatherd export`` / ``import``.

The export is one JSON object per line, in commit order:

* ``header``: format, ABI and schema versions;
* ``intent``: one committed append intent with everything it retained (its new
  contexts, new records, path entries, frontier index rows and its receipt);
* ``materialization`` and ``checkpoint``: the ledger rows and checkpoint blobs;
* ``end``: the number of lines before it and the SHA-256 of their bytes, so a
  truncated or reordered file is refused.

Import refuses anything it cannot prove: every record id is recomputed from its
content (a forged id or an edited payload is rejected), witness bodies and
chains, causal parents, gap-free ordinals and positions, commit receipts and
each intent's receipt are checked line by line, and the error names the line.
Only when the whole file is proven is it written, in ONE transaction, into an
empty store, so every id, ordinal, position and receipt is unchanged and a
refused file writes nothing. Import copies verified rows instead of replaying
appends because the original batches cannot be rebuilt (their actors' local
ids are not retained) and their stored batch digests must stay intact for
intent idempotency (ADR 0019).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import IO, Any, Final

from sqlalchemy import Connection, func, insert, select, update

from goatherd.domain.canonical import ABI_VERSION, canonical_json_text
from goatherd.domain.errors import DomainError, GoatherdError
from goatherd.domain.identity import (
    ROOT_WITNESS_SCHEMA_REF,
    WITNESS_SCHEMA_REF,
    record_digest,
    validate_witness_body,
)
from goatherd.domain.records import FRONTIER_SCHEMA_REF, WITNESS_OWNER
from goatherd.domain.workspace import WorkspaceState
from goatherd.infrastructure.store.codec import storage_json
from goatherd.infrastructure.store.driver import Driver
from goatherd.infrastructure.store.schema import (
    META_NEXT_COMMIT,
    SCHEMA_VERSION,
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
)
from goatherd.infrastructure.store.sealing import seal
from goatherd.infrastructure.store.store import SqlAlchemyTraceStore

__all__ = [
    "EXPORT_FORMAT",
    "ImportRejectedError",
    "ImportSummary",
    "export_trace",
    "import_trace",
]

EXPORT_FORMAT: Final = "goatherd.trace.jsonl.v1"
_CONTEXT_REFS: Final = (
    "active_binding_refs",
    "capability_witness_refs",
    "semantic_environment_refs",
    "visibility_policy_refs",
)
Progress = Callable[[str, int, int], None]
_INT64_MIN: Final = -(2**63)
_INT64_MAX: Final = 2**63 - 1


class ImportRejectedError(GoatherdError, ValueError):
    """Raised when an export file cannot be proven; nothing was written.

    Attributes:
        line: the 1-based line number at fault (0 for the file as a whole).
        reason: what is wrong there.
    """

    def __init__(self, line: int, reason: str) -> None:
        """Record the offending ``line`` and the ``reason``."""
        where = f"line {line}" if line else "file"
        super().__init__(f"{where}: {reason}")
        self.line = line
        self.reason = reason


@dataclass(frozen=True, slots=True)
class ImportSummary:
    """What an import wrote."""

    intents: int
    records: int
    path_entries: int
    checkpoints: int
    materializations: int


# ------------------------------------------------------------------- export


def export_trace(
    store: SqlAlchemyTraceStore, out: IO[str], *, progress: Progress | None = None
) -> int:
    """Write ``store``'s trace to ``out`` as JSON lines; return the line count."""
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
        conn.rollback()
    out.write(
        canonical_json_text(
            {"type": "end", "lines": count, "sha256": digest.hexdigest()}, root="line"
        )
        + "\n"
    )
    return count + 1


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
    stmt = (
        select(append_intents.c.append_intent_id)
        .outerjoin(first, first.c.append_intent_id == append_intents.c.append_intent_id)
        .order_by(
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
    new_contexts = _grouped(conn, contexts, "append_intent_id")
    new_records = _grouped(conn, records, "append_intent_id")
    entries = _grouped(conn, path_entries, "append_intent_id")
    index = _grouped(conn, frontiers, "append_intent_id")
    for done, intent_id in enumerate(order, start=1):
        row = intents[intent_id]
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
    return {
        "record_id": row["record_id"],
        "schema_ref": row["schema_ref"],
        "mode": row["mode"],
        "witness_ref": row["witness_ref"],
        "caused_by": json.loads(row["caused_by_json"]),
        "payload": json.loads(row["body_json"]).get("payload", {}),
    }


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


# ------------------------------------------------------------------- import


@dataclass
class _Plan:
    """Rows proven so far, ready to insert in one transaction."""

    intents: list[dict[str, Any]] = field(default_factory=list)
    contexts: list[dict[str, Any]] = field(default_factory=list)
    records: list[dict[str, Any]] = field(default_factory=list)
    edges: list[dict[str, Any]] = field(default_factory=list)
    entries: list[dict[str, Any]] = field(default_factory=list)
    frontiers: list[dict[str, Any]] = field(default_factory=list)
    materializations: list[dict[str, Any]] = field(default_factory=list)
    checkpoints: list[dict[str, Any]] = field(default_factory=list)
    known_records: dict[str, str] = field(default_factory=dict)
    known_contexts: set[str] = field(default_factory=set)
    next_ordinal: dict[str, int] = field(default_factory=dict)
    next_position: int = 0
    ledger_ids: set[str] = field(default_factory=set)


def import_trace(
    lines: Iterable[str],
    store: SqlAlchemyTraceStore,
    *,
    progress: Progress | None = None,
) -> ImportSummary:
    """Prove an exported trace line by line, then write it into the empty ``store``.

    Raises:
        ImportRejectedError: a line that cannot be proven, or a non-empty
            target; nothing is written.
    """
    plan = _prove(lines, progress)
    _write(store, plan)
    return ImportSummary(
        intents=len(plan.intents),
        records=len(plan.records),
        path_entries=len(plan.entries),
        checkpoints=len(plan.checkpoints),
        materializations=len(plan.materializations),
    )


def _prove(lines: Iterable[str], progress: Progress | None) -> _Plan:
    plan = _Plan()
    digest = hashlib.sha256()
    seen_end = False
    number = 0
    for number, raw in enumerate(lines, start=1):
        if seen_end:
            raise ImportRejectedError(number, "content after the end line")
        obj = _parse(number, raw)
        kind = obj.get("type")
        if number == 1:
            _prove_header(number, obj)
        elif kind == "end":
            _prove_end(number, obj, digest)
            seen_end = True
            continue
        else:
            _prove_line(number, obj, plan)
        digest.update(
            raw.encode("utf-8") if raw.endswith("\n") else (raw + "\n").encode("utf-8")
        )
        if progress is not None and number % 500 == 0:
            progress("import", number, 0)
    if number == 0:
        raise ImportRejectedError(0, "the file is empty")
    if not seen_end:
        raise ImportRejectedError(
            number, "the file ends without its end line (truncated?)"
        )
    return plan


def _parse(number: int, raw: str) -> dict[str, Any]:
    try:
        obj = json.loads(raw)
    except ValueError as exc:
        raise ImportRejectedError(number, f"not JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise ImportRejectedError(number, "a line must be a JSON object")
    return obj


def _prove_header(number: int, obj: dict[str, Any]) -> None:
    if obj.get("type") != "header" or obj.get("format") != EXPORT_FORMAT:
        raise ImportRejectedError(number, f"not a {EXPORT_FORMAT} export (bad header)")
    if obj.get("abi_version") != ABI_VERSION:
        raise ImportRejectedError(
            number, f"ABI {obj.get('abi_version')!r} is not {ABI_VERSION}"
        )


def _prove_end(number: int, obj: dict[str, Any], digest: Any) -> None:
    if obj.get("lines") != number - 1:
        raise ImportRejectedError(
            number, f"end line counts {obj.get('lines')} lines, found {number - 1}"
        )
    if obj.get("sha256") != digest.hexdigest():
        raise ImportRejectedError(
            number, "the lines do not match the end line's SHA-256"
        )


def _prove_line(number: int, obj: dict[str, Any], plan: _Plan) -> None:
    kind = obj.get("type")
    try:
        if kind == "intent":
            _prove_intent(obj, plan)
        elif kind == "materialization":
            _prove_materialization(obj, plan)
        elif kind == "checkpoint":
            _prove_checkpoint(obj, plan)
        else:
            raise ValueError(f"unknown line type {kind!r}")
    except ImportRejectedError:
        raise
    except (DomainError, KeyError, TypeError, ValueError, binascii.Error) as exc:
        reason = f"missing field {exc}" if isinstance(exc, KeyError) else str(exc)
        raise ImportRejectedError(number, reason) from None


def _text(obj: dict[str, Any], key: str) -> str:
    value = obj[key]
    if not isinstance(value, str):
        raise TypeError(f"{key} must be a string")
    return value


def _prove_intent(obj: dict[str, Any], plan: _Plan) -> None:
    intent_id = _text(obj, "append_intent_id")
    receipt = obj["receipt"]
    if not isinstance(receipt, dict) or receipt.get("append_intent_id") != intent_id:
        raise ValueError("the receipt does not belong to this intent")
    plan.intents.append(
        {
            "append_intent_id": intent_id,
            "batch_digest": _text(obj, "batch_digest"),
            "receipt_json": storage_json(receipt, root="receipt"),
            "committed_at": _text(obj, "committed_at"),
        }
    )
    for context in obj["contexts"]:
        _prove_context(context, intent_id, plan)
    for record in obj["records"]:
        _prove_record(record, intent_id, plan)
    positions = [_prove_entry(entry, intent_id, plan) for entry in obj["entries"]]
    ordinary = [rid for rid, position in positions if position is not None]
    if list(receipt.get("fact_ids", [])) != ordinary:
        raise ValueError(
            "the receipt's fact_ids disagree with the intent's path entries"
        )
    for row in obj["frontiers"]:
        _prove_frontier(row, intent_id, plan)


def _prove_context(context: dict[str, Any], intent_id: str, plan: _Plan) -> None:
    context_id = _text(context, "context_id")
    if context_id in plan.known_contexts:
        raise ValueError(f"context {context_id} appears twice")
    row: dict[str, Any] = {"context_id": context_id, "append_intent_id": intent_id}
    for name in _CONTEXT_REFS:
        refs = context[name]
        if not isinstance(refs, list) or not all(isinstance(r, str) for r in refs):
            raise TypeError(f"context {name} must be a list of strings")
        row[f"{name}_json"] = storage_json(refs, root=name)
    row["substrate_ref"] = _text(context, "substrate_ref")
    row["containment"] = _text(context, "containment")
    plan.contexts.append(row)
    plan.known_contexts.add(context_id)


def _prove_record(record: dict[str, Any], intent_id: str, plan: _Plan) -> None:
    record_id = _text(record, "record_id")
    schema_ref = _text(record, "schema_ref")
    mode = _text(record, "mode")
    witness_ref = _text(record, "witness_ref")
    caused_by = record["caused_by"]
    payload = record["payload"]
    if not isinstance(caused_by, list) or not isinstance(payload, dict):
        raise TypeError(
            f"record {record_id}: caused_by must be a list, payload an object"
        )
    if record_id in plan.known_records:
        raise ValueError(f"record {record_id} is retained twice")
    if schema_ref in (ROOT_WITNESS_SCHEMA_REF, WITNESS_SCHEMA_REF):
        validate_witness_body(schema_ref, payload)
        if schema_ref == WITNESS_SCHEMA_REF and plan.known_records.get(witness_ref) != (
            ROOT_WITNESS_SCHEMA_REF
        ):
            raise ValueError(f"witness {record_id} does not cite the root witness")
    elif plan.known_records.get(witness_ref) not in (
        ROOT_WITNESS_SCHEMA_REF,
        WITNESS_SCHEMA_REF,
    ):
        raise ValueError(
            f"record {record_id}: witness {witness_ref} is not a known witness"
        )
    recomputed = record_digest(schema_ref, mode, payload, caused_by, witness_ref)
    if recomputed != record_id:
        raise ValueError(
            f"record {record_id}: its content digests to {recomputed} "
            "(forged id or edited content)"
        )
    for index, parent in enumerate(caused_by):
        if parent not in plan.known_records:
            raise ValueError(
                f"record {record_id}: causal parent {parent} is not retained before it"
            )
        plan.edges.append(
            {
                "child_record_id": record_id,
                "parent_position": index,
                "parent_record_id": parent,
            }
        )
    plan.records.append(
        {
            "record_id": record_id,
            "digest": record_id,
            "schema_ref": schema_ref,
            "mode": mode,
            "witness_ref": witness_ref,
            "caused_by_json": storage_json(caused_by, root="caused_by"),
            "body_json": storage_json({"payload": payload}, root="payload"),
            "append_intent_id": intent_id,
        }
    )
    plan.known_records[record_id] = schema_ref


def _prove_entry(
    entry: dict[str, Any], intent_id: str, plan: _Plan
) -> tuple[str, int | None]:
    path_ref = _text(entry, "path_ref")
    record_id = _text(entry, "record_id")
    ordinal = entry["path_ordinal"]
    position = entry["position"]
    receipt = _text(entry, "commit_receipt")
    context_ref = _text(entry, "retained_context_ref")
    if record_id not in plan.known_records:
        raise ValueError(f"path entry cites unknown record {record_id}")
    expected = plan.next_ordinal.get(path_ref, 0)
    if ordinal != expected:
        raise ValueError(
            f"path {path_ref!r}: ordinal {ordinal} where {expected} is due"
        )
    if position is None:
        if path_ref != WITNESS_OWNER or receipt != f"witness:{record_id}":
            raise ValueError(f"entry on {path_ref!r} has no log position")
        if context_ref:
            raise ValueError(f"witness entry cites a context {context_ref!r}")
    else:
        if position != plan.next_position or receipt != f"commit:{position}":
            raise ValueError(
                f"log position {position} / {receipt} where {plan.next_position} is due"
            )
        plan.next_position += 1
        if path_ref == WITNESS_OWNER:
            raise ValueError(f"a logged entry on the witness path {path_ref!r}")
        if context_ref not in plan.known_contexts:
            raise ValueError(f"path entry cites unknown context {context_ref!r}")
    plan.next_ordinal[path_ref] = expected + 1
    plan.entries.append(
        {
            "path_ref": path_ref,
            "path_ordinal": ordinal,
            "record_id": record_id,
            "retained_context_ref": context_ref,
            "kind_label": _text(entry, "kind_label"),
            "append_intent_id": intent_id,
            "commit_receipt": receipt,
            "position": position,
        }
    )
    return record_id, position


def _prove_frontier(row: dict[str, Any], intent_id: str, plan: _Plan) -> None:
    created_by = _text(row, "created_by_fact_id")
    if plan.known_records.get(created_by) != FRONTIER_SCHEMA_REF:
        raise ValueError(
            f"frontier {row.get('frontier_id')!r}: {created_by} "
            "is not a frontier record"
        )
    stored = next(r for r in plan.records if r["record_id"] == created_by)
    payload = json.loads(stored["body_json"])["payload"]
    for key in (
        "frontier_id",
        "target_trace_owner_id",
        "through_fact_id",
        "through_owner_ordinal",
    ):
        if payload.get(key) != row[key]:
            raise ValueError(
                f"frontier {row['frontier_id']!r}: {key} disagrees with its record"
            )
    plan.frontiers.append({**row, "append_intent_id": intent_id})


def _prove_materialization(obj: dict[str, Any], plan: _Plan) -> None:
    receipt = obj["receipt"]
    if not isinstance(receipt, dict):
        raise TypeError("a materialization receipt must be an object")
    intent = _text(obj, "materialize_intent_id")
    _once(plan, "materialization", intent)
    plan.materializations.append(
        {
            "materialize_intent_id": intent,
            "request_digest": _text(obj, "request_digest"),
            "receipt_json": storage_json(receipt, root="receipt"),
            "completed_at": _text(obj, "completed_at"),
        }
    )


def _prove_checkpoint(obj: dict[str, Any], plan: _Plan) -> None:
    state = WorkspaceState.from_json(obj["state"])
    snapshot = base64.b64decode(_text(obj, "snapshot_b64"), validate=True)
    seq, created = obj["seq"], obj["created_at_unixnano"]
    if not isinstance(seq, int) or not isinstance(created, int):
        raise TypeError("checkpoint seq and created_at_unixnano must be integers")
    if not (_INT64_MIN <= seq <= _INT64_MAX and _INT64_MIN <= created <= _INT64_MAX):
        raise ValueError("checkpoint seq and created_at_unixnano must fit 64 bits")
    checkpoint_id = _text(obj, "checkpoint_id")
    _once(plan, "checkpoint", checkpoint_id)
    plan.checkpoints.append(
        {
            "checkpoint_id": checkpoint_id,
            "scope_id": _text(obj, "scope_id"),
            "seq": seq,
            "state_json": storage_json(state.to_json(), root="state"),
            "snapshot": snapshot,
            "created_at_unixnano": created,
        }
    )


def _once(plan: _Plan, kind: str, identifier: str) -> None:
    key = f"{kind}:{identifier}"
    if key in plan.ledger_ids:
        raise ValueError(f"{kind} {identifier!r} appears twice")
    plan.ledger_ids.add(key)


def _write(store: SqlAlchemyTraceStore, plan: _Plan) -> None:
    with store.transaction() as conn:
        present = conn.execute(
            select(func.count()).select_from(append_intents)
        ).scalar_one()
        if present:
            raise ImportRejectedError(
                0, "the target store is not empty; import into a new database"
            )
        for table, rows in (
            (append_intents, plan.intents),
            (contexts, plan.contexts),
            (records, plan.records),
            (record_edges, plan.edges),
            (path_entries, plan.entries),
            (frontiers, plan.frontiers),
            (materialization_intents, plan.materializations),
            (checkpoint_snapshots, plan.checkpoints),
        ):
            for start in range(0, len(rows), 1000):
                conn.execute(insert(table), rows[start : start + 1000])
        ordinals = [
            {"trace_owner_id": k, "next_ordinal": v}
            for k, v in plan.next_ordinal.items()
        ]
        if ordinals:
            conn.execute(insert(owner_ordinals), ordinals)
        conn.execute(
            update(meta)
            .where(meta.c.key == META_NEXT_COMMIT)
            .values(value=str(plan.next_position))
        )
        # Number the imported commits and link the chain (ADR 0038).
        seal(Driver(conn))
