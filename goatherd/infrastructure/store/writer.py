"""Persist an :class:`AppendPlan` inside the append transaction (kernel-spec 5.4).

The one append path: every row of the trace tables is written here, in the
reference's persistence order, with set-wise statements (one ``executemany``
per table). Content clashes with rows already retained raise before commit, so
the transaction rolls back whole.
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import Connection, insert, update
from sqlalchemy.dialects import postgresql, sqlite

from goatherd.domain.errors import TraceStoreError
from goatherd.domain.records import WITNESS_OWNER
from goatherd.infrastructure.store.codec import (
    encode_receipt,
    encode_refs,
    storage_json,
)
from goatherd.infrastructure.store.plan import AppendPlan, StagedRecord, StagedWitness
from goatherd.infrastructure.store.reader import RecordContent, StoreReader
from goatherd.infrastructure.store.schema import (
    META_NEXT_COMMIT,
    append_intents,
    contexts,
    meta,
    owner_ordinals,
    path_entries,
    record_edges,
    records,
)

__all__ = ["persist_plan"]


def persist_plan(
    reader: StoreReader,
    intent_id: str,
    digest: str,
    plan: AppendPlan,
    witness_next: int,
) -> list[str]:
    """Write ``plan`` on the reader's connection; return the inserted witness ids.

    Args:
        reader: the append transaction's reader (its connection writes).
        intent_id: the batch's intent.
        digest: the batch digest.
        plan: the staged append.
        witness_next: the witness path's stored next ordinal.

    Raises:
        TraceStoreError: a witness or record id that already names different
            content.
    """
    conn = reader.conn
    conn.execute(
        insert(append_intents),
        {
            "append_intent_id": intent_id,
            "batch_digest": digest,
            "receipt_json": encode_receipt(plan.receipt),
        },
    )
    _insert_contexts(conn, intent_id, plan)
    ids = [w.record_id for w in plan.witnesses] + [s.record_id for s in plan.staged]
    existing = _existing(reader, ids)
    new_witnesses = _persist_witnesses(reader, intent_id, plan, existing, witness_next)
    _persist_records(conn, intent_id, plan.staged, existing)
    next_ordinals = dict(plan.next_ordinals)
    if new_witnesses:
        next_ordinals[WITNESS_OWNER] = witness_next + len(new_witnesses)
    _upsert_ordinals(conn, next_ordinals)
    if plan.staged:
        conn.execute(
            update(meta)
            .where(meta.c.key == META_NEXT_COMMIT)
            .values(value=str(plan.next_commit))
        )
    return new_witnesses


def _existing(reader: StoreReader, ids: list[str]) -> dict[str, RecordContent]:
    verified = reader.cache.witnesses
    return reader.records(record_id for record_id in ids if record_id not in verified)


def _insert_contexts(conn: Connection, intent_id: str, plan: AppendPlan) -> None:
    if not plan.new_contexts:
        return
    conn.execute(
        insert(contexts),
        [
            {
                "context_id": c.context_id,
                "active_binding_refs_json": encode_refs(c.active_binding_refs),
                "capability_witness_refs_json": encode_refs(c.capability_witness_refs),
                "semantic_environment_refs_json": encode_refs(
                    c.semantic_environment_refs
                ),
                "visibility_policy_refs_json": encode_refs(c.visibility_policy_refs),
                "substrate_ref": c.substrate_ref,
                "containment": c.containment,
                "append_intent_id": intent_id,
            }
            for c in plan.new_contexts
        ],
    )


def _persist_witnesses(
    reader: StoreReader,
    intent_id: str,
    plan: AppendPlan,
    existing: dict[str, RecordContent],
    witness_next: int,
) -> list[str]:
    verified = reader.cache.witnesses
    new: list[StagedWitness] = []
    stored_ids = [w.record_id for w in plan.witnesses if w.record_id in existing]
    labels = reader.first_entries(stored_ids) if stored_ids else {}
    for witness in plan.witnesses:
        if witness.record_id in verified:
            continue
        stored = existing.get(witness.record_id)
        if stored is None:
            new.append(witness)
            continue
        entry = labels.get(witness.record_id)
        label = entry.kind_label if entry else ""
        if not _same_witness(witness, stored, label):
            raise TraceStoreError(
                f"witness record id {witness.record_id} already names a different "
                "witness"
            )
    if new:
        _insert_witnesses(reader.conn, intent_id, new, witness_next)
    return [w.record_id for w in new]


def _same_witness(witness: StagedWitness, stored: RecordContent, label: str) -> bool:
    envelope, body = stored
    return (
        envelope.digest == witness.record_id
        and envelope.schema_ref == witness.schema_ref
        and envelope.mode == "capture"
        and envelope.witness_ref == witness.witness_ref
        and envelope.caused_by_record_ids == ()
        and label == witness.kind_label
        and storage_json(body.payload) == storage_json(witness.payload)
    )


def _insert_witnesses(
    conn: Connection, intent_id: str, new: list[StagedWitness], first_ordinal: int
) -> None:
    conn.execute(
        insert(records),
        [
            {
                "record_id": w.record_id,
                "digest": w.record_id,
                "schema_ref": w.schema_ref,
                "mode": "capture",
                "witness_ref": w.witness_ref,
                "caused_by_json": "[]",
                "body_json": w.body_json,
                "append_intent_id": intent_id,
            }
            for w in new
        ],
    )
    conn.execute(
        insert(path_entries),
        [
            {
                "path_ref": WITNESS_OWNER,
                "path_ordinal": first_ordinal + offset,
                "record_id": w.record_id,
                "retained_context_ref": "",
                "kind_label": w.kind_label,
                "append_intent_id": intent_id,
                "commit_receipt": f"witness:{w.record_id}",
                "position": None,
            }
            for offset, w in enumerate(new)
        ],
    )


def _persist_records(
    conn: Connection,
    intent_id: str,
    staged: tuple[StagedRecord, ...],
    existing: dict[str, RecordContent],
) -> None:
    fresh: dict[str, StagedRecord] = {}
    for record in staged:
        stored = existing.get(record.record_id)
        if stored is not None:
            _check_same_record(record, stored)
        elif record.record_id not in fresh:
            fresh[record.record_id] = record
    if fresh:
        conn.execute(
            insert(records), [_record_row(r, intent_id) for r in fresh.values()]
        )
        edges = list(_edge_rows(fresh.values()))
        if edges:
            conn.execute(insert(record_edges), edges)
    if staged:
        conn.execute(insert(path_entries), [_entry_row(r, intent_id) for r in staged])


def _check_same_record(record: StagedRecord, stored: RecordContent) -> None:
    envelope, body = stored
    same = (
        envelope.digest == record.record_id
        and envelope.schema_ref == record.schema_ref
        and envelope.mode == record.mode
        and envelope.witness_ref == record.witness_ref
        and envelope.caused_by_record_ids == record.parents
        and '{"payload":' + storage_json(body.payload) + "}" == record.body_json
    )
    if not same:
        raise TraceStoreError(
            f"record id {record.record_id} already names different content"
        )


def _record_row(record: StagedRecord, intent_id: str) -> dict[str, object]:
    return {
        "record_id": record.record_id,
        "digest": record.record_id,
        "schema_ref": record.schema_ref,
        "mode": record.mode,
        "witness_ref": record.witness_ref,
        "caused_by_json": storage_json(list(record.parents)),
        "body_json": record.body_json,
        "append_intent_id": intent_id,
    }


def _edge_rows(fresh: Iterable[StagedRecord]) -> Iterable[dict[str, object]]:
    for record in fresh:
        for position, parent in enumerate(record.parents):
            yield {
                "child_record_id": record.record_id,
                "parent_position": position,
                "parent_record_id": parent,
            }


def _entry_row(record: StagedRecord, intent_id: str) -> dict[str, object]:
    return {
        "path_ref": record.owner,
        "path_ordinal": record.ordinal,
        "record_id": record.record_id,
        "retained_context_ref": record.context_id,
        "kind_label": record.kind_label,
        "append_intent_id": intent_id,
        "commit_receipt": f"commit:{record.position}",
        "position": record.position,
    }


def _upsert_ordinals(conn: Connection, next_ordinals: dict[str, int]) -> None:
    if not next_ordinals:
        return
    dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
    stmt = dialect.insert(owner_ordinals)
    stmt = stmt.on_conflict_do_update(
        index_elements=[owner_ordinals.c.trace_owner_id],
        set_={"next_ordinal": stmt.excluded.next_ordinal},
    )
    conn.execute(
        stmt,
        [
            {"trace_owner_id": owner, "next_ordinal": value}
            for owner, value in next_ordinals.items()
        ],
    )
