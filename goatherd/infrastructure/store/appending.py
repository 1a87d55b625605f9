"""The append transaction and the cut publication built on it (kernel-spec 5, 7.4-7.5).

Both run inside a write transaction the store opened (and serialized); they
read what preparation needs set-wise, plan, and persist through the writer.
Nothing is cached or published here: the store does that after commit.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from functools import lru_cache

from sqlalchemy import func, insert, select

from goatherd.domain.contexts import OperationContext
from goatherd.domain.errors import (
    AppendIntentConflictError,
    BatchShapeError,
    OrdinalConflictError,
    TraceStoreError,
    UnknownFactError,
    UnknownFrontierError,
)
from goatherd.domain.records import (
    CAPTURE,
    FRONTIER_KIND_LABEL,
    FRONTIER_SCHEMA_REF,
    WITNESS_OWNER,
    AppendBatch,
    AppendGroup,
    AppendReceipt,
    Cut,
    CutSpec,
    RecordDraft,
    RetainedContextDraft,
)
from goatherd.infrastructure.store.codec import decode_receipt
from goatherd.infrastructure.store.driver import placeholders
from goatherd.infrastructure.store.plan import (
    AppendPlan,
    NormalizedDraft,
    StoredState,
    batch_digest,
    context_requests,
    explicit_parents,
    plan_append,
    validate_batch,
)
from goatherd.infrastructure.store.reader import StoreReader
from goatherd.infrastructure.store.schema import (
    META_HEAD,
    META_NEXT_COMMIT,
    frontiers,
    path_entries,
)
from goatherd.infrastructure.store.writer import persist_plan

__all__ = ["AppendOutcome", "append_in", "prepare", "publish_in", "read_cutoff"]

# The append's opening read: the commit sequence (tag 0), the intent's stored
# digest and receipt (tag 1) and the owners' next ordinals (tag 2).
_STATE_SQL = (
    "SELECT 0, value, NULL FROM meta WHERE key = ? "
    "UNION ALL SELECT 3, value, NULL FROM meta WHERE key = ? "
    "UNION ALL SELECT 1, batch_digest, receipt_json FROM append_intents "
    "WHERE append_intent_id = ? "
    "UNION ALL SELECT 2, trace_owner_id, CAST(next_ordinal AS TEXT) "
    "FROM owner_ordinals WHERE trace_owner_id IN "
)
_FRONTIER_FIELDS = (
    "frontier_id",
    "target_trace_owner_id",
    "through_fact_id",
    "through_owner_ordinal",
)


@dataclass(frozen=True, slots=True)
class AppendOutcome:
    """What one append did: the receipt, and the plan when it was a new append."""

    receipt: AppendReceipt
    plan: AppendPlan | None = None
    new_witnesses: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Prepared:
    """A shape-checked batch with its digest (computed before the transaction)."""

    context: OperationContext
    batch: AppendBatch
    groups: tuple[tuple[NormalizedDraft, ...], ...]
    digest: str


def prepare(context: OperationContext, batch: AppendBatch) -> Prepared:
    """Shape-check ``batch`` and compute its digest (kernel-spec 5.1 steps 3-4)."""
    groups = validate_batch(batch)
    return Prepared(context, batch, groups, batch_digest(context, batch, groups))


def append_in(
    reader: StoreReader,
    prepared: Prepared,
    expected_heads: Mapping[str, int] | None = None,
) -> AppendOutcome:
    """Append a prepared batch on the transaction's connection, or replay its intent.

    Raises:
        AppendIntentConflictError: the intent committed with another digest.
        OrdinalConflictError: an owner's head differs from ``expected_heads``.
        TraceStoreError, UnknownFactError, BatchShapeError, RecordInputError:
            preparation and persistence failures (nothing is written).
    """
    batch = prepared.batch
    owners = {group.trace_owner_id for group in batch.groups}
    owners.update(expected_heads or {})
    owners.add(WITNESS_OWNER)
    opened = _open_state(reader, batch.append_intent_id, owners)
    stored = _stored_receipt(opened.intent, batch.append_intent_id, prepared.digest)
    if stored is not None:
        return AppendOutcome(stored)
    _check_heads(opened.ordinals, expected_heads)
    requests = context_requests(prepared.context, batch)
    # A new context's id hashes this (uncommitted) intent, so it cannot be
    # stored yet: only reused ids are looked up. The writer's insert still
    # compares any row it finds (ON CONFLICT DO NOTHING, then an exact check).
    state = StoredState(
        next_ordinals=opened.ordinals,
        contexts=reader.contexts(r.context_id for r in requests if r.new is None),
        existing_parents=frozenset(reader.existing_ids(explicit_parents(batch))),
        next_commit=opened.next_commit,
    )
    plan = plan_append(prepared.context, batch, prepared.groups, requests, state)
    new_witnesses = persist_plan(
        reader,
        batch.append_intent_id,
        prepared.digest,
        plan,
        opened.ordinals.get(WITNESS_OWNER, 0),
        opened.commits,
    )
    return AppendOutcome(plan.receipt, plan, tuple(new_witnesses))


@dataclass(frozen=True, slots=True)
class _Opened:
    next_commit: int
    intent: tuple[str, str] | None
    ordinals: dict[str, int]
    commits: int


def _open_state(
    reader: StoreReader, intent_id: str, owners: Collection[str]
) -> _Opened:
    """Read the commit sequence, the intent and the owners' heads in one query."""
    names = list(owners)
    next_commit: int | None = None
    intent: tuple[str, str] | None = None
    ordinals: dict[str, int] = {}
    commits = 0
    params = (META_NEXT_COMMIT, META_HEAD, intent_id, *names)
    for tag, first, second in reader.driver.rows(_state_sql(len(names)), params):
        if tag == 0:
            next_commit = int(first)
        elif tag == 1:
            intent = (first, second)
        elif tag == 2:
            ordinals[first] = int(second)
        else:
            commits = int(str(first).split(" ", 1)[0])
    if next_commit is None:
        raise TraceStoreError("trace store meta is missing next_commit_seq")
    return _Opened(next_commit, intent, ordinals, commits)


@lru_cache(maxsize=64)
def _state_sql(owner_count: int) -> str:
    return _STATE_SQL + placeholders(owner_count)


def _stored_receipt(
    row: tuple[str, str] | None, intent_id: str, digest: str
) -> AppendReceipt | None:
    if row is None:
        return None
    if row[0] != digest:
        raise AppendIntentConflictError(
            f"append intent '{intent_id}' was already committed with different content"
        )
    return decode_receipt(row[1])


def _check_heads(
    ordinals: Mapping[str, int], expected_heads: Mapping[str, int] | None
) -> None:
    for owner, expected in (expected_heads or {}).items():
        actual = ordinals.get(owner, 0)
        if actual != expected:
            raise OrdinalConflictError(owner, expected, actual)


def publish_in(
    reader: StoreReader, context: OperationContext, spec: CutSpec
) -> tuple[Cut, AppendOutcome]:
    """Publish a cut through the append path, inside the transaction (7.4).

    Raises:
        BatchShapeError: an empty frontier id, or a duplicate causal parent.
        UnknownFactError: the through record is not on the target path.
        TraceStoreError: the frontier id already names a different cutoff.
    """
    if not spec.frontier_id:
        raise BatchShapeError("frontier_id is required")
    through_ordinal = _latest_entry(
        reader, spec.target_trace_owner_id, spec.through_fact_id
    )
    publisher = spec.publisher_trace_owner_id or spec.target_trace_owner_id
    batch = _frontier_batch(context, spec, publisher, through_ordinal)
    outcome = append_in(reader, prepare(context, batch))
    cut = Cut(
        frontier_id=spec.frontier_id,
        target_trace_owner_id=spec.target_trace_owner_id,
        through_fact_id=spec.through_fact_id,
        through_owner_ordinal=through_ordinal,
        publisher_trace_owner_id=publisher,
        created_by_fact_id=outcome.receipt.fact_ids[0],
    )
    if _has_frontier_row(reader, spec.frontier_id):
        stored = read_cutoff(reader, spec.frontier_id)
        if stored != cut:
            raise TraceStoreError(
                f"frontier id '{spec.frontier_id}' already names a different cutoff"
            )
        return stored, outcome
    reader.conn.execute(
        insert(frontiers),
        {
            "frontier_id": cut.frontier_id,
            "target_trace_owner_id": cut.target_trace_owner_id,
            "through_fact_id": cut.through_fact_id,
            "through_owner_ordinal": cut.through_owner_ordinal,
            "publisher_trace_owner_id": cut.publisher_trace_owner_id,
            "created_by_fact_id": cut.created_by_fact_id,
            "append_intent_id": batch.append_intent_id,
        },
    )
    return cut, outcome


def _latest_entry(reader: StoreReader, owner: str, record_id: str) -> int:
    ordinal = reader.conn.execute(
        select(func.max(path_entries.c.path_ordinal))
        .where(path_entries.c.path_ref == owner)
        .where(path_entries.c.record_id == record_id)
    ).scalar()
    if ordinal is None:
        raise UnknownFactError(f"unknown fact path entry: {record_id}")
    return int(ordinal)


def _frontier_batch(
    context: OperationContext, spec: CutSpec, publisher: str, through_ordinal: int
) -> AppendBatch:
    draft = RecordDraft(
        mode=CAPTURE,
        schema_ref=FRONTIER_SCHEMA_REF,
        kind_label=FRONTIER_KIND_LABEL,
        payload={
            "frontier_id": spec.frontier_id,
            "target_trace_owner_id": spec.target_trace_owner_id,
            "through_fact_id": spec.through_fact_id,
            "through_owner_ordinal": through_ordinal,
            "publisher_trace_owner_id": publisher,
        },
    )
    group = AppendGroup(
        trace_owner_id=publisher,
        retained_context=RetainedContextDraft(
            capability_witness_refs=context.presented_authority_refs,
            semantic_environment_refs=(context.schema_environment_ref,),
        ),
        causal_parents=(spec.through_fact_id, *spec.caused_by),
        fact_drafts=(draft,),
    )
    intent = spec.append_intent_id or f"frontier:{spec.frontier_id}"
    return AppendBatch(append_intent_id=intent, groups=(group,))


def _has_frontier_row(reader: StoreReader, frontier_id: str) -> bool:
    return (
        reader.conn.execute(
            select(frontiers.c.frontier_id).where(
                frontiers.c.frontier_id == frontier_id
            )
        ).first()
        is not None
    )


def read_cutoff(reader: StoreReader, frontier_id: str) -> Cut:
    """Return the cut the retained frontier record states, checked against the index.

    Raises:
        UnknownFrontierError: no index row for ``frontier_id``.
        TraceStoreError: the record is not a frontier record, lacks a payload
            field, or disagrees with the index row (a tampered index).
    """
    row = reader.conn.execute(
        select(frontiers).where(frontiers.c.frontier_id == frontier_id)
    ).first()
    if row is None:
        raise UnknownFrontierError(frontier_id)
    envelope, body = reader.record(row.created_by_fact_id)
    if envelope.schema_ref != FRONTIER_SCHEMA_REF:
        raise TraceStoreError(
            f"expected frontier_published fact, got '{envelope.schema_ref}'"
        )
    payload = body.payload
    for key in _FRONTIER_FIELDS:
        if key not in payload:
            raise TraceStoreError(f"frontier fact missing payload field: {key}")
    publisher = payload.get("publisher_trace_owner_id")
    from_record = Cut(
        frontier_id=str(payload["frontier_id"]),
        target_trace_owner_id=str(payload["target_trace_owner_id"]),
        through_fact_id=str(payload["through_fact_id"]),
        through_owner_ordinal=_as_int(payload["through_owner_ordinal"]),
        publisher_trace_owner_id=None if publisher is None else str(publisher),
        created_by_fact_id=envelope.record_id,
    )
    from_index = Cut(
        frontier_id=row.frontier_id,
        target_trace_owner_id=row.target_trace_owner_id,
        through_fact_id=row.through_fact_id,
        through_owner_ordinal=int(row.through_owner_ordinal),
        publisher_trace_owner_id=row.publisher_trace_owner_id,
        created_by_fact_id=row.created_by_fact_id,
    )
    if from_record != from_index:
        raise TraceStoreError("resolver index disagrees with retained frontier fact")
    return from_record


def _as_int(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int | str | float):
        raise TraceStoreError(
            f"frontier through_owner_ordinal is not an int: {value!r}"
        )
    return int(value)
