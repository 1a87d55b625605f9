"""Persist the plans of one commit group inside its transaction (kernel-spec 5.4).

The one append path: every row of the trace tables is written here, with
set-wise statements (one ``executemany`` per table for the whole group), in
the reference's persistence order. A record that is already retained gets a
new path entry but no new row; its stored content is compared exactly first
(from the post-commit cache, or read back when the insert skipped it), and a
clash raises before commit, so the transaction rolls back whole.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence

from goatherd.domain.errors import TraceStoreError
from goatherd.domain.records import WITNESS_OWNER, RecordBody, RetainedContext
from goatherd.infrastructure.store.chain import meta_value
from goatherd.infrastructure.store.codec import (
    decode_body,
    decode_envelope,
    encode_refs,
    redacted_by,
    storage_json,
)
from goatherd.infrastructure.store.driver import Driver, Row, placeholders
from goatherd.infrastructure.store.reader import CachedRecord, StoreReader
from goatherd.infrastructure.store.schema import META_HEAD, META_NEXT_COMMIT
from goatherd.infrastructure.store.staging import MemberPlan, StagedRecord, TxnState

__all__ = ["persist_group"]


def persist_group(
    reader: StoreReader,
    plans: Sequence[MemberPlan],
    state: TxnState,
    *,
    txid: int | None = None,
    counters: bool = True,
) -> None:
    """Write every plan of a group on the transaction's connection.

    Args:
        reader: the transaction's reader (its driver writes).
        plans: the group's new appends, in commit order, bound.
        state: the state after staging them (final owner heads, counters).
        txid: the PostgreSQL transaction id stamped on the rows, else ``None``.
        counters: write ``next_commit_seq`` and the head count to ``meta``
            (SQLite; PostgreSQL draws them from sequences).

    Raises:
        TraceStoreError: a witness, record or context id that already names
            different content.
    """
    sql = reader.driver
    sql.run_many(
        _INSERT_INTENT,
        [
            (
                p.prepared.intent_id,
                p.prepared.digest,
                p.receipt_json,
                p.committed_at,
                p.commit_seq,
                p.commit_digest,
                p.head_digest,
                txid,
            )
            for p in plans
        ],
    )
    _insert_contexts(reader, plans)
    _insert_witnesses(sql, plans, txid)
    _insert_records(reader, plans, state)
    sql.run_many(
        _INSERT_ENTRY, [_entry_row(r, p, txid) for p in plans for r in p.records]
    )
    sql.run_many(
        _INSERT_FRONTIER,
        [(*p.frontier, p.prepared.intent_id) for p in plans if p.frontier is not None],
    )
    owners = {owner for p in plans for owner in p.ranges}
    if any(p.new_witnesses for p in plans):
        owners.add(WITNESS_OWNER)
    sql.run_many(_UPSERT_ORDINAL, [(o, state.ordinals[o]) for o in sorted(owners)])
    if counters:
        assert state.head is not None
        sql.run(
            _UPSERT_META_PAIR,
            (
                META_NEXT_COMMIT,
                str(state.positions),
                META_HEAD,
                meta_value(state.commits, state.head),
            ),
        )


def _insert_contexts(reader: StoreReader, plans: Sequence[MemberPlan]) -> None:
    # A new context's id hashes its (uncommitted) intent, so a stored row
    # with that id is next to impossible; should one exist anyway, the insert
    # keeps it and the exact comparison below decides, as planning would.
    new: list[tuple[RetainedContext, str]] = [
        (c, p.prepared.intent_id) for p in plans for c in p.new_contexts
    ]
    if not new:
        return
    rows: list[Row] = [
        (
            c.context_id,
            encode_refs(c.active_binding_refs),
            encode_refs(c.capability_witness_refs),
            encode_refs(c.semantic_environment_refs),
            encode_refs(c.visibility_policy_refs),
            c.substrate_ref,
            c.containment,
            intent,
        )
        for c, intent in new
    ]
    sql = reader.driver
    if sql.run_many(_INSERT_CONTEXT, rows) == len(rows) or sql.postgres:
        # PostgreSQL: staging already compared any stored row with a new id
        # (read with the state), and a pipelined insert reports no count.
        return
    stored = reader.contexts(c.context_id for c, _ in new)
    for context, _ in new:
        if stored.get(context.context_id, context) != context:
            raise TraceStoreError(
                f"context id {context.context_id} already names a different context"
            )


def _insert_witnesses(
    sql: Driver, plans: Sequence[MemberPlan], txid: int | None
) -> None:
    new = [(w, ordinal, p) for p in plans for w, ordinal in p.new_witnesses]
    if not new:
        return
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
                p.prepared.intent_id,
            )
            for w, _, p in new
        ],
    )
    sql.run_many(
        _INSERT_ENTRY,
        [
            (
                WITNESS_OWNER,
                ordinal,
                w.record_id,
                "",
                w.kind_label,
                p.prepared.intent_id,
                f"witness:{w.record_id}",
                None,
                txid,
            )
            for w, ordinal, p in new
        ],
    )


def _insert_records(
    reader: StoreReader, plans: Sequence[MemberPlan], state: TxnState
) -> None:
    fresh: dict[str, tuple[StagedRecord, str]] = {}
    cached = reader.cache.records
    retained = state.stored_records
    for plan in plans:
        for record in plan.records:
            stored = cached.get(record.record_id) or retained.get(record.record_id)
            if stored is not None:
                _check_same_record(record, stored)
            elif record.record_id in fresh:
                _check_same_staged(record, fresh[record.record_id][0])
            else:
                fresh[record.record_id] = (record, plan.prepared.intent_id)
    if not fresh:
        return
    sql = reader.driver
    # Sorted ids: two PostgreSQL writers inserting the same new records wait
    # for each other in one order, never in a cycle.
    ordered = sorted(fresh) if sql.postgres else list(fresh)
    rows = [_record_row(*fresh[record_id]) for record_id in ordered]
    if sql.postgres:
        # Retained rows were read (and compared) before; a row another writer
        # commits meanwhile has this id, hence this content: both inserts
        # skip it quietly.
        sql.run_many(_INSERT_NEW_RECORD, rows)
        _credit_first_placement(sql, fresh)
        edges = [r for record_id in ordered for r in _edge_rows((fresh[record_id][0],))]
        sql.run_many(_INSERT_NEW_EDGE, edges)
        return
    if sql.run_many(_INSERT_NEW_RECORD, rows) != len(rows):
        intents = sorted({p.prepared.intent_id for p in plans})
        _drop_retained(reader, intents, fresh)
    sql.run_many(_INSERT_EDGE, list(_edge_rows(r for r, _ in fresh.values())))


def _credit_first_placement(
    sql: Driver, fresh: dict[str, tuple[StagedRecord, str]]
) -> None:
    """Credit a record to the intent that places it first in the log (PostgreSQL).

    Positions are drawn in allocation order, not commit order: a writer that
    drew later positions may commit the same new record first. Its row then
    names its intent although this append places the record earlier, which
    is what ``verify`` and ``import`` credit. A statement after the insert
    sees that writer's committed entries (the insert waited for it), so the
    row is re-credited here, before this transaction commits.
    """
    taken = sql.rows(
        _TAKEN_BY_OTHERS_SQL, (list(fresh), sorted({i for _, i in fresh.values()}))
    )
    sql.run_many(
        _RECREDIT_SQL,
        [(fresh[row[0]][1], row[0], fresh[row[0]][0].position) for row in taken],
    )


def _drop_retained(
    reader: StoreReader, intents: list[str], fresh: dict[str, tuple[StagedRecord, str]]
) -> None:
    """Compare and drop from ``fresh`` the records an earlier commit retained.

    The insert skipped them (``ON CONFLICT DO NOTHING``); a row this group
    inserted carries one of the group's intents, so any other intent marks a
    row committed before.
    """
    ids = list(fresh)
    prefix = _PRIOR_RECORDS_SQL.format(placeholders(len(intents)))
    for start in range(0, len(ids), _CHUNK):
        chunk = ids[start : start + _CHUNK]
        rows = reader.driver.rows(prefix + placeholders(len(chunk)), (*intents, *chunk))
        for row in rows:
            record, _ = fresh.pop(row[0])
            envelope = decode_envelope(*row[:6])
            body = row[6] if isinstance(row[6], str) else ""
            _check_same_record(record, (envelope, body))


def _check_same_record(record: StagedRecord, stored: CachedRecord) -> None:
    envelope, body = stored
    erased_by = redacted_by(body) if isinstance(body, str) else body.redacted_by
    if erased_by is not None:
        raise TraceStoreError(
            f"record id {record.record_id} was erased by redaction {erased_by}: "
            "its content cannot be appended again"
        )
    same = (
        envelope.digest == record.record_id
        and envelope.schema_ref == record.schema_ref
        and envelope.mode == record.mode
        and envelope.witness_ref == record.witness_ref
        and envelope.caused_by_record_ids == record.parents
        and _same_payload(body, record.payload_json)
    )
    if not same:
        raise TraceStoreError(
            f"record id {record.record_id} already names different content"
        )


def _same_payload(body: RecordBody | str, payload_json: str) -> bool:
    if isinstance(body, str):
        if body == '{"payload":' + payload_json + "}":
            return True
        stored = decode_body(body)
    else:
        stored = dict(body.payload)
    # Stored text may spell the same payload differently (a row an older
    # version wrote): compare the storage encodings of the parsed payloads.
    return storage_json(stored) == storage_json(json.loads(payload_json))


def _check_same_staged(record: StagedRecord, first: StagedRecord) -> None:
    same = (
        record.schema_ref == first.schema_ref
        and record.mode == first.mode
        and record.witness_ref == first.witness_ref
        and record.parents == first.parents
        and record.payload_json == first.payload_json
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
        '{"payload":' + record.payload_json + "}",
        intent_id,
    )


def _edge_rows(fresh: Iterable[StagedRecord]) -> Iterable[Row]:
    for record in fresh:
        for position, parent in enumerate(record.parents):
            yield (record.record_id, position, parent)


def _entry_row(record: StagedRecord, plan: MemberPlan, txid: int | None) -> Row:
    return (
        record.owner,
        record.ordinal,
        record.record_id,
        record.context_id,
        record.kind_label,
        plan.prepared.intent_id,
        f"commit:{record.position}",
        record.position,
        txid,
    )


# The append path's statements, in plain SQL that SQLite and PostgreSQL share
# (``driver.py`` says why they bypass SQLAlchemy Core).
_INSERT_INTENT = (
    "INSERT INTO append_intents (append_intent_id, batch_digest, receipt_json, "
    "committed_at, commit_seq, commit_digest, head_digest, txid) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
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
_TAKEN_BY_OTHERS_SQL = (
    "SELECT record_id FROM records WHERE record_id = ANY(?) "
    "AND append_intent_id <> ALL(?)"
)
_RECREDIT_SQL = (
    "UPDATE records SET append_intent_id = ? WHERE record_id = ? AND "
    "(SELECT min(e.position) FROM path_entries e "
    "WHERE e.record_id = records.record_id) > ?"
)
_PRIOR_RECORDS_SQL = (
    "SELECT record_id, digest, schema_ref, mode, witness_ref, caused_by_json, "
    "body_json FROM records WHERE append_intent_id NOT IN {} AND record_id IN "
)
_CHUNK = 800
_INSERT_EDGE = (
    "INSERT INTO record_edges (child_record_id, parent_position, parent_record_id) "
    "VALUES (?, ?, ?)"
)
_INSERT_NEW_EDGE = _INSERT_EDGE + " ON CONFLICT DO NOTHING"
_INSERT_ENTRY = (
    "INSERT INTO path_entries (path_ref, path_ordinal, record_id, "
    "retained_context_ref, kind_label, append_intent_id, commit_receipt, position, "
    "txid) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_UPSERT_ORDINAL = (
    "INSERT INTO owner_ordinals (trace_owner_id, next_ordinal) VALUES (?, ?) "
    "ON CONFLICT (trace_owner_id) DO UPDATE SET next_ordinal = excluded.next_ordinal"
)
_INSERT_FRONTIER = (
    "INSERT INTO frontiers (frontier_id, target_trace_owner_id, through_fact_id, "
    "through_owner_ordinal, publisher_trace_owner_id, created_by_fact_id, "
    "append_intent_id) VALUES (?, ?, ?, ?, ?, ?, ?)"
)
_UPSERT_META_PAIR = (  # both counters in one statement
    "INSERT INTO meta (key, value) VALUES (?, ?), (?, ?) "
    "ON CONFLICT (key) DO UPDATE SET value = excluded.value"
)
