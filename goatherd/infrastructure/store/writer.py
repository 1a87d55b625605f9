"""Persist an :class:`AppendPlan` inside the append transaction (kernel-spec 5.4).

The one append path: every row of the trace tables is written here, in the
reference's persistence order, with set-wise statements (one ``executemany``
per table). Content clashes with rows already retained raise before commit, so
the transaction rolls back whole.
"""

from __future__ import annotations

from collections.abc import Iterable

from goatherd.domain.errors import TraceStoreError
from goatherd.domain.records import WITNESS_OWNER
from goatherd.infrastructure.store.codec import (
    decode_record,
    encode_receipt,
    encode_refs,
    storage_json,
)
from goatherd.infrastructure.store.driver import Driver, Row, placeholders
from goatherd.infrastructure.store.plan import AppendPlan, StagedRecord, StagedWitness
from goatherd.infrastructure.store.reader import RecordContent, StoreReader
from goatherd.infrastructure.store.schema import (
    META_HEAD,
    META_NEXT_COMMIT,
)

__all__ = ["persist_plan"]


def persist_plan(
    reader: StoreReader,
    intent_id: str,
    digest: str,
    plan: AppendPlan,
    witness_next: int,
    commit_seq: int,
) -> list[str]:
    """Write ``plan`` on the reader's connection; return the inserted witness ids.

    Args:
        reader: the append transaction's reader (its connection writes).
        intent_id: the batch's intent.
        digest: the batch digest.
        plan: the staged append.
        witness_next: the witness path's stored next ordinal.
        commit_seq: this commit's number (the count of earlier commits).

    Raises:
        TraceStoreError: a witness or record id that already names different
            content.
    """
    sql = reader.driver
    sql.run(
        _INSERT_INTENT,
        (intent_id, digest, encode_receipt(plan.receipt), commit_seq),
    )
    _insert_contexts(reader, intent_id, plan)
    witness_ids = [w.record_id for w in plan.witnesses]
    existing = _existing(reader, witness_ids)
    new_witnesses = _persist_witnesses(reader, intent_id, plan, existing, witness_next)
    _persist_records(reader, intent_id, plan.staged)
    next_ordinals = dict(plan.next_ordinals)
    if new_witnesses:
        next_ordinals[WITNESS_OWNER] = witness_next + len(new_witnesses)
    sql.run_many(_UPSERT_ORDINAL, list(next_ordinals.items()))
    meta_rows = [(META_HEAD, str(commit_seq + 1))]
    if plan.staged:
        meta_rows.append((META_NEXT_COMMIT, str(plan.next_commit)))
    sql.run_many(_UPSERT_META, meta_rows)
    return new_witnesses


def _existing(reader: StoreReader, ids: list[str]) -> dict[str, RecordContent]:
    verified = reader.cache.witnesses
    unverified = [record_id for record_id in ids if record_id not in verified]
    return reader.records(unverified) if unverified else {}


def _insert_contexts(reader: StoreReader, intent_id: str, plan: AppendPlan) -> None:
    # A new context's id hashes its (uncommitted) intent, so a stored row
    # with that id is next to impossible; should one exist anyway, the insert
    # keeps it and the exact comparison below decides, as planning would.
    rows = [
        (
            c.context_id,
            encode_refs(c.active_binding_refs),
            encode_refs(c.capability_witness_refs),
            encode_refs(c.semantic_environment_refs),
            encode_refs(c.visibility_policy_refs),
            c.substrate_ref,
            c.containment,
            intent_id,
        )
        for c in plan.new_contexts
    ]
    if reader.driver.run_many(_INSERT_CONTEXT, rows) == len(rows):
        return
    stored = reader.contexts(c.context_id for c in plan.new_contexts)
    for context in plan.new_contexts:
        if stored.get(context.context_id, context) != context:
            raise TraceStoreError(
                f"context id {context.context_id} already names a different context"
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
        _insert_witnesses(reader.driver, intent_id, new, witness_next)
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
    sql: Driver, intent_id: str, new: list[StagedWitness], first_ordinal: int
) -> None:
    sql.run_many(
        _INSERT_RECORD,
        [
            (
                w.record_id,
                w.record_id,
                w.schema_ref,
                "capture",
                w.witness_ref,
                "[]",
                w.body_json,
                intent_id,
            )
            for w in new
        ],
    )
    sql.run_many(
        _INSERT_ENTRY,
        [
            (
                WITNESS_OWNER,
                first_ordinal + offset,
                w.record_id,
                "",
                w.kind_label,
                intent_id,
                f"witness:{w.record_id}",
                None,
            )
            for offset, w in enumerate(new)
        ],
    )


def _persist_records(
    reader: StoreReader, intent_id: str, staged: tuple[StagedRecord, ...]
) -> None:
    fresh: dict[str, StagedRecord] = {}
    cached = reader.cache.records
    for record in staged:
        stored = cached.get(record.record_id)
        if stored is not None:
            _check_same_record(record, stored)
        elif record.record_id not in fresh:
            fresh[record.record_id] = record
    sql = reader.driver
    rows = [_record_row(r, intent_id) for r in fresh.values()]
    if sql.run_many(_INSERT_NEW_RECORD, rows) != len(rows):
        _drop_retained(reader, intent_id, fresh)
    sql.run_many(_INSERT_EDGE, list(_edge_rows(fresh.values())))
    sql.run_many(_INSERT_ENTRY, [_entry_row(r, intent_id) for r in staged])


def _drop_retained(
    reader: StoreReader, intent_id: str, fresh: dict[str, StagedRecord]
) -> None:
    """Compare and drop from ``fresh`` the records an earlier intent retained.

    The insert skipped them (``ON CONFLICT DO NOTHING``); a row this append
    inserted carries its intent, so any other intent marks a prior row.
    """
    ids = list(fresh)
    for start in range(0, len(ids), _CHUNK):
        chunk = ids[start : start + _CHUNK]
        rows = reader.driver.rows(
            _PRIOR_RECORDS_SQL + placeholders(len(chunk)), (intent_id, *chunk)
        )
        for row in rows:
            _check_same_record(fresh.pop(row[0]), decode_record(*row))


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


def _record_row(record: StagedRecord, intent_id: str) -> Row:
    return (
        record.record_id,
        record.record_id,
        record.schema_ref,
        record.mode,
        record.witness_ref,
        storage_json(list(record.parents)) if record.parents else "[]",
        record.body_json,
        intent_id,
    )


def _edge_rows(fresh: Iterable[StagedRecord]) -> Iterable[Row]:
    for record in fresh:
        for position, parent in enumerate(record.parents):
            yield (record.record_id, position, parent)


def _entry_row(record: StagedRecord, intent_id: str) -> Row:
    return (
        record.owner,
        record.ordinal,
        record.record_id,
        record.context_id,
        record.kind_label,
        intent_id,
        f"commit:{record.position}",
        record.position,
    )


# The append path's statements, in plain SQL that SQLite and PostgreSQL share
# (``driver.py`` says why they bypass SQLAlchemy Core).
_INSERT_INTENT = (
    "INSERT INTO append_intents (append_intent_id, batch_digest, receipt_json, "
    "commit_seq) VALUES (?, ?, ?, ?)"
)
_INSERT_CONTEXT = (
    "INSERT INTO contexts (context_id, active_binding_refs_json, "
    "capability_witness_refs_json, semantic_environment_refs_json, "
    "visibility_policy_refs_json, substrate_ref, containment, append_intent_id) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (context_id) DO NOTHING"
)
_INSERT_RECORD = (
    "INSERT INTO records (record_id, digest, schema_ref, mode, witness_ref, "
    "caused_by_json, body_json, append_intent_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)
_INSERT_NEW_RECORD = _INSERT_RECORD + " ON CONFLICT (record_id) DO NOTHING"
_PRIOR_RECORDS_SQL = (
    "SELECT record_id, digest, schema_ref, mode, witness_ref, caused_by_json, "
    "body_json FROM records WHERE append_intent_id <> ? AND record_id IN "
)
_CHUNK = 900
_INSERT_EDGE = (
    "INSERT INTO record_edges (child_record_id, parent_position, parent_record_id) "
    "VALUES (?, ?, ?)"
)
_INSERT_ENTRY = (
    "INSERT INTO path_entries (path_ref, path_ordinal, record_id, "
    "retained_context_ref, kind_label, append_intent_id, commit_receipt, position) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)
_UPSERT_ORDINAL = (
    "INSERT INTO owner_ordinals (trace_owner_id, next_ordinal) VALUES (?, ?) "
    "ON CONFLICT (trace_owner_id) DO UPDATE SET next_ordinal = excluded.next_ordinal"
)
_UPSERT_META = (
    "INSERT INTO meta (key, value) VALUES (?, ?) "
    "ON CONFLICT (key) DO UPDATE SET value = excluded.value"
)
