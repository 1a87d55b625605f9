"""One commit group in one transaction, and the cut publication built on it.

:func:`run_group` runs inside a write transaction the store opened: it reads
what the group's appends need in one query (the counters, the intents, the
owners' heads, the parents' existence), stages each append in queue order
(``staging.py``), draws positions and commit numbers on PostgreSQL, and
persists every plan (``writer.py``). Each member gets its outcome or its own
error; an error that is not the member's own (an outage, a clash found while
writing) propagates, and the store then rolls back and retries the members
one by one. Nothing is cached or published here: the store does that after
the commit.

On PostgreSQL the transaction first takes advisory transaction locks on the
group's intents and owners (and on the witness path when a witness may be
new), in one sorted order, so appends that share nothing never wait for each
other (ADR 0036).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from goatherd.domain.contexts import OperationContext
from goatherd.domain.errors import (
    BatchShapeError,
    DomainError,
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
    RetainedContext,
    RetainedContextDraft,
)
from goatherd.infrastructure.store import postgres as pg
from goatherd.infrastructure.store.chain import (
    commit_digest,
    commit_time,
    link,
    parse_meta,
)
from goatherd.infrastructure.store.codec import (
    decode_envelope,
    storage_json,
)
from goatherd.infrastructure.store.door import check_held
from goatherd.infrastructure.store.driver import Driver, placeholders
from goatherd.infrastructure.store.plan import (
    ROOT_WITNESS,
    ContextLookup,
    Prepared,
    StagedWitness,
    group_context,
    prepare,
    witness_for_context,
)
from goatherd.infrastructure.store.reader import CachedRecord, StoreReader
from goatherd.infrastructure.store.schema import META_HEAD, META_NEXT_COMMIT
from goatherd.infrastructure.store.sealing import seal
from goatherd.infrastructure.store.staging import (
    GroupReplay,
    MemberPlan,
    TxnState,
    stage,
)
from goatherd.infrastructure.store.writer import persist_group

__all__ = [
    "AppendOutcome",
    "Member",
    "publish_in",
    "read_cutoff",
    "run_group",
]


@dataclass(frozen=True, slots=True)
class AppendOutcome:
    """What one append did: the receipt, and the plan when it was a new append."""

    receipt: AppendReceipt
    plan: MemberPlan | None = None


@dataclass(slots=True)
class Member:
    """One append in a commit group, and (once run) its outcome or its error."""

    prepared: Prepared
    expected_heads: Mapping[str, int] | None = None
    outcome: AppendOutcome | None = None
    error: BaseException | None = None
    frontier: tuple[str, str, str, int, str] | None = None

    @property
    def finished(self) -> bool:
        """Whether the member's group committed (or failed for it)."""
        return self.error is not None or (
            self.outcome is not None and self.outcome.receipt is not _UNBOUND
        )


def run_group(reader: StoreReader, members: Sequence[Member]) -> list[MemberPlan]:
    """Stage and persist ``members`` in the reader's open write transaction.

    Sets each member's ``outcome`` (a new append's receipt, or the stored
    receipt of a replay) or ``error`` (its own broken law: kernel-spec 5.1).

    Returns:
        The plans written, in commit order (for the post-commit cache and bus).

    Raises:
        StoreUnavailableError, TraceStoreError, and anything unexpected: the
        group as a whole failed (a member's own error is not raised).
    """
    postgres = reader.driver.postgres
    state = _open_state(reader, members, postgres)
    plans: list[MemberPlan] = []
    replays: list[tuple[Member, MemberPlan]] = []
    for member in members:
        try:
            if member.prepared.blobs and member.prepared.intent_id not in state.intents:
                check_held(reader.driver, member.prepared.blobs)
            result = stage(member.prepared, state, member.expected_heads)
        except DomainError as error:
            member.error = error
            continue
        if isinstance(result, MemberPlan):
            plans.append(result)
            member.outcome = AppendOutcome(_UNBOUND, result)
            result.frontier = (
                None
                if member.frontier is None
                else (
                    *member.frontier,
                    result.records[0].record_id,
                )
            )
        elif isinstance(result, GroupReplay):
            replays.append((member, result.plan))
        else:
            member.outcome = AppendOutcome(result)
    if not plans:
        return plans
    if postgres:
        _read_retained(reader, plans, state)
    txid = _bind(reader.driver, plans, state, postgres)
    _chain(plans, state, postgres)
    persist_group(reader, plans, state, txid=txid, counters=not postgres)
    if postgres:
        pg.reached("written")
    for member in members:
        if member.outcome is not None and member.outcome.plan is not None:
            plan = member.outcome.plan
            assert plan.receipt is not None
            member.outcome = AppendOutcome(plan.receipt, plan)
    for member, plan in replays:
        assert plan.receipt is not None
        member.outcome = AppendOutcome(plan.receipt)
    return plans


_UNBOUND = AppendReceipt(append_intent_id="")


def _bind(
    sql: Driver, plans: list[MemberPlan], state: TxnState, postgres: bool
) -> int | None:
    if not postgres:
        for plan in plans:
            plan.bind(0, 0)
        return None
    ((numbers,),) = sql.rows(pg.ALLOCATE_SQL, (state.positions, state.commits))
    txid, first_position, first_commit = (int(n) for n in numbers)
    pg.reached("allocated")
    for plan in plans:
        plan.bind(max(first_position, 0), max(first_commit, 0))
    state.positions += max(first_position, 0)
    state.commits += max(first_commit, 0)
    return txid


def _chain(plans: Sequence[MemberPlan], state: TxnState, postgres: bool) -> None:
    """Digest each commit; on SQLite also link it (its predecessor is known)."""
    committed_at = commit_time(postgres=postgres)
    for plan in plans:
        plan.committed_at = committed_at
        plan.commit_digest = commit_digest(plan.content(), checked=False)
        if not postgres:
            assert state.head is not None
            state.head = plan.head_digest = link(state.head, plan.commit_digest)


# ------------------------------------------------------------------ state


def _open_state(
    reader: StoreReader, members: Sequence[Member], postgres: bool
) -> TxnState:
    """Read what the group needs, in one query (plus cache misses)."""
    cache = reader.cache
    intents = list(dict.fromkeys(m.prepared.intent_id for m in members))
    owners: dict[str, None] = {}
    parents: dict[str, None] = {}
    for member in members:
        owners.update(dict.fromkeys(member.prepared.owners))
        owners.update(dict.fromkeys(member.expected_heads or ()))
        parents.update(dict.fromkeys(member.prepared.parents))
    witnesses = _witnesses(members, _cached_contexts(reader, members))
    maybe_new = witnesses is None or not witnesses.keys() <= cache.witnesses
    if maybe_new:
        owners[WITNESS_OWNER] = None
    unknown = [p for p in parents if p not in cache.records]
    if postgres:
        state = _read_state_postgres(
            reader, members, intents, list(owners), unknown, maybe_new
        )
    else:
        state = _read_state(reader.driver, intents, list(owners), unknown, False)
    state.existing.update(p for p in parents if p in cache.records)
    state.witnesses.update(cache.witnesses)
    reused = [c for m in members for c in m.prepared.reused_contexts()]
    state.contexts.update(reader.contexts(reused))
    if maybe_new:
        _verify_witnesses(reader, _witnesses(members, state.contexts) or {}, state)
    return state


def _cached_contexts(
    reader: StoreReader, members: Sequence[Member]
) -> dict[str, RetainedContext]:
    found = {}
    for member in members:
        for context_id in member.prepared.reused_contexts():
            context = reader.cache.contexts.get(context_id)
            if context is not None:
                found[context_id] = context
    return found


def _witnesses(
    members: Sequence[Member], contexts: Mapping[str, RetainedContext]
) -> dict[str, StagedWitness] | None:
    """Return the witnesses the members need (``None``: a context is unknown)."""
    found: dict[str, StagedWitness] = {}
    for member in members:
        prepared = member.prepared
        if prepared.groups:
            found[ROOT_WITNESS.record_id] = ROOT_WITNESS
        for group in prepared.groups:
            try:
                retained = group_context(group, contexts)
                witness = witness_for_context(prepared.context.actor_ref, retained)
            except TraceStoreError:
                return None
            except DomainError:
                continue  # a bad witness body: that member's own error
            found[witness.record_id] = witness
    return found


def _read_state_postgres(
    reader: StoreReader,
    members: Sequence[Member],
    intents: list[str],
    owners: list[str],
    parents: list[str],
    witness: bool,
) -> TxnState:
    """Lock, then read the state and the group's known new ids, in one round trip."""
    keys = {pg.lock_key("i", i) for i in intents}
    keys.update(pg.lock_key("o", o) for o in owners if o != WITNESS_OWNER)
    # The witness path last: a transaction holding it never waits for an
    # owner, so the lock order stays acyclic.
    locks: list[tuple[str, Sequence[object]]] = [(_LOCK_SQL, (sorted(keys),))]
    if witness:
        locks.append((_LOCK_SQL, ([pg.lock_key("o", WITNESS_OWNER)],)))
    staged = _known_new_ids(reader, members)
    contexts = list(
        dict.fromkeys(
            g.context.context_id
            for m in members
            for g in m.prepared.groups
            if g.context.new is not None
        )
    )
    query = _pg_state_sql(
        len(intents), len(owners), len(parents), len(staged), len(contexts)
    )
    results = reader.driver.rows_many(
        [*locks, (query, (*intents, *owners, *parents, *staged, *contexts))]
    )
    state_rows: list[Sequence[Any]] = []
    retained: list[Sequence[Any]] = []
    clashing: list[str] = []
    for row in results[-1]:
        tag = row[0]
        if tag == 4:
            retained.append(row[1:])
        elif tag == 5:
            clashing.append(row[1])
        else:
            state_rows.append(row[:4])
    state = TxnState(positions=0, commits=0)
    _fill_state(state, state_rows)
    state.stored_records.update(_retained(row) for row in retained)
    if clashing:
        state.contexts.update(reader.contexts(clashing))
    return state


def _known_new_ids(reader: StoreReader, members: Sequence[Member]) -> list[str]:
    cached = reader.cache.records
    ids: dict[str, None] = {}
    for member in members:
        for found in member.prepared.ids or ():
            if found.record_id not in cached:
                ids[found.record_id] = None
    return list(ids)


def _read_retained(
    reader: StoreReader, plans: Sequence[MemberPlan], state: TxnState
) -> None:
    """Read the staged records the opening read could not name (PostgreSQL)."""
    cached = reader.cache.records
    missing = list(
        dict.fromkeys(
            r.record_id
            for p in plans
            if p.prepared.ids is None
            for r in p.records
            if r.record_id not in cached and r.record_id not in state.stored_records
        )
    )
    if missing:
        rows = reader.driver.rows(_RECORDS_AMONG + placeholders(len(missing)), missing)
        state.stored_records.update(_retained(row) for row in rows)


def _retained(row: Sequence[Any]) -> tuple[str, CachedRecord]:
    """A stored record as the writer compares it: envelope and stored body text."""
    envelope = decode_envelope(*row[:6])
    return row[0], (envelope, row[6] if isinstance(row[6], str) else "")


_LOCK_SQL = (  # a constant salt, no input: S608 does not apply
    f"SELECT count(pg_advisory_xact_lock(k # {pg.TRACE_SALT}))"  # noqa: S608
    " FROM unnest(?::bigint[]) AS k"
)
_RECORDS_AMONG = (
    "SELECT record_id, digest, schema_ref, mode, witness_ref, caused_by_json, "
    "body_json FROM records WHERE record_id IN "
)


def _read_state(
    sql: Driver,
    intents: list[str],
    owners: list[str],
    parents: list[str],
    postgres: bool,
) -> TxnState:
    query = _state_sql(not postgres, len(intents), len(owners), len(parents))
    params = (*(() if postgres else _META_KEYS), *intents, *owners, *parents)
    state = TxnState(positions=0, commits=0)
    meta = _fill_state(state, sql.rows(query, params))
    if not postgres:
        if META_NEXT_COMMIT not in meta:
            raise TraceStoreError("trace store meta is missing next_commit_seq")
        state.positions = int(meta[META_NEXT_COMMIT])
        state.commits, state.head = parse_meta(meta.get(META_HEAD))
        if state.head is None:
            # A trace not linked yet (written before the chain, imported):
            # link it inside this transaction, once.
            sealed = seal(sql)
            state.commits, state.head = sealed.commits, sealed.digest
    return state


def _fill_state(state: TxnState, rows: Iterable[Sequence[Any]]) -> dict[str, str]:
    meta: dict[str, str] = {}
    for tag, first, second, third in rows:
        if tag == 1:
            state.intents[first] = (second, third)
        elif tag == 2:
            state.ordinals[first] = int(second)
        elif tag == 3:
            state.existing.add(first)
        else:
            meta[first] = second
    return meta


_META_KEYS = (META_NEXT_COMMIT, META_HEAD)


@lru_cache(maxsize=256)
def _state_sql(meta: bool, intents: int, owners: int, parents: int) -> str:
    parts = [_META_STATE] if meta else []
    parts.append(_INTENT_STATE + placeholders(intents))
    if owners:
        parts.append(_OWNER_STATE + placeholders(owners))
    if parents:
        parts.append(_PARENT_STATE + placeholders(parents))
    return " UNION ALL ".join(parts)


@lru_cache(maxsize=256)
def _pg_state_sql(
    intents: int, owners: int, parents: int, staged: int, contexts: int
) -> str:
    """The PostgreSQL state read and the group's known new ids, one statement.

    Tags 1-3 as on SQLite, then the stored rows among the records the group
    stages (4: the full row, to compare) and the stored contexts among its
    new ones (5). Every part has the record row's eight columns.
    """
    parts = [_PG_INTENT_STATE + placeholders(intents)]
    for count, part in (
        (owners, _PG_OWNER_STATE),
        (parents, _PG_PARENT_STATE),
        (staged, _PG_STORED_AMONG_STAGED),
        (contexts, _PG_STORED_AMONG_NEW_CONTEXTS),
    ):
        if count:
            parts.append(part + placeholders(count))
    return " UNION ALL ".join(parts)


def _widened(part: str) -> str:
    """A four-column part of the state read, padded to the record row's eight."""
    select, keyword, rest = part.partition(" FROM ")
    return select + ", NULL, NULL, NULL, NULL" + keyword + rest


# The group's opening read, tagged: meta counters (0, SQLite only), stored
# intents (1), owner heads (2), parents that exist (3).
_META_STATE = "SELECT 0, key, value, NULL FROM meta WHERE key IN (?, ?)"
_INTENT_STATE = (
    "SELECT 1, append_intent_id, batch_digest, receipt_json FROM append_intents "
    "WHERE append_intent_id IN "
)
_OWNER_STATE = (
    "SELECT 2, trace_owner_id, CAST(next_ordinal AS TEXT), NULL "
    "FROM owner_ordinals WHERE trace_owner_id IN "
)
_PARENT_STATE = "SELECT 3, record_id, NULL, NULL FROM records WHERE record_id IN "
# The same parts on PostgreSQL, where one statement also carries the stored
# rows among the records a group stages (4) and the stored contexts among its
# new ones (5).
_PG_INTENT_STATE = _widened(_INTENT_STATE)
_PG_OWNER_STATE = _widened(_OWNER_STATE)
_PG_PARENT_STATE = _widened(_PARENT_STATE)
_PG_STORED_AMONG_STAGED = "SELECT 4, " + _RECORDS_AMONG.removeprefix("SELECT ")
_PG_STORED_AMONG_NEW_CONTEXTS = _widened(
    "SELECT 5, context_id, NULL, NULL FROM contexts WHERE context_id IN "
)


def _verify_witnesses(
    reader: StoreReader, needed: Mapping[str, StagedWitness], state: TxnState
) -> None:
    """Mark the needed witnesses the store retains (each compared once, exactly).

    Raises:
        TraceStoreError: a stored witness id names a different witness.
    """
    cache = reader.cache
    unverified = [w for w in needed if w not in cache.witnesses]
    if not unverified:
        return
    stored = reader.records(unverified)
    labels = reader.first_entries(stored) if stored else {}
    for witness_id, (envelope, body) in stored.items():
        entry = labels.get(witness_id)
        witness = needed[witness_id]
        same = (
            envelope.digest == witness.record_id
            and envelope.schema_ref == witness.schema_ref
            and envelope.mode == "capture"
            and envelope.witness_ref == witness.witness_ref
            and envelope.caused_by_record_ids == ()
            and (entry.kind_label if entry else "") == witness.kind_label
            and storage_json(dict(body.payload)) == storage_json(witness.payload)
        )
        if not same:
            raise TraceStoreError(
                f"witness record id {witness_id} already names a different witness"
            )
    with cache.lock:
        cache.witnesses.update(stored)
    state.witnesses.update(stored)


# ------------------------------------------------------------------ cuts


def publish_in(
    reader: StoreReader,
    context: OperationContext,
    spec: CutSpec,
    contexts: ContextLookup,
) -> tuple[Cut, Member, list[MemberPlan]]:
    """Publish a cut through the append path, inside the transaction (7.4).

    Returns:
        The cut, the frontier record's member (its outcome set) and the plans
        written (for the post-commit cache and bus).

    Raises:
        BatchShapeError: an empty frontier id, or a duplicate causal parent.
        UnknownFactError: the through record is not on the target path.
        TraceStoreError: the frontier id already names a different cutoff.
    """
    if not spec.frontier_id:
        raise BatchShapeError("frontier_id is required")
    through_ordinal = _latest_entry(
        reader.driver, spec.target_trace_owner_id, spec.through_fact_id
    )
    publisher = spec.publisher_trace_owner_id or spec.target_trace_owner_id
    batch = _frontier_batch(context, spec, publisher, through_ordinal)
    exists = bool(reader.driver.rows(_FRONTIER_EXISTS_SQL, (spec.frontier_id,)))
    member = Member(
        prepare(context, batch, contexts, frontier=True),
        frontier=None
        if exists
        else (
            spec.frontier_id,
            spec.target_trace_owner_id,
            spec.through_fact_id,
            through_ordinal,
            publisher,
        ),
    )
    plans = run_group(reader, [member])
    if member.error is not None:
        raise member.error
    assert member.outcome is not None
    cut = Cut(
        frontier_id=spec.frontier_id,
        target_trace_owner_id=spec.target_trace_owner_id,
        through_fact_id=spec.through_fact_id,
        through_owner_ordinal=through_ordinal,
        publisher_trace_owner_id=publisher,
        created_by_fact_id=member.outcome.receipt.fact_ids[0],
    )
    if exists:  # a replay, or another intent naming the same frontier id
        stored = read_cutoff(reader, spec.frontier_id)
        if stored != cut:
            raise TraceStoreError(
                f"frontier id '{spec.frontier_id}' already names a different cutoff"
            )
        return stored, member, plans
    return cut, member, plans


def _latest_entry(sql: Driver, owner: str, record_id: str) -> int:
    ((ordinal,),) = sql.rows(_LATEST_ENTRY_SQL, (owner, record_id))
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


def read_cutoff(reader: StoreReader, frontier_id: str) -> Cut:
    """Return the cut the retained frontier record states, checked against the index.

    Raises:
        UnknownFrontierError: no index row for ``frontier_id``.
        TraceStoreError: the record is not a frontier record, lacks a payload
            field, or disagrees with the index row (a tampered index).
    """
    rows = reader.driver.rows(_FRONTIER_SQL, (frontier_id,))
    if not rows:
        raise UnknownFrontierError(frontier_id)
    (row,) = rows
    envelope, body = reader.record(row[5])
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
        frontier_id=row[0],
        target_trace_owner_id=row[1],
        through_fact_id=row[2],
        through_owner_ordinal=int(row[3]),
        publisher_trace_owner_id=row[4],
        created_by_fact_id=row[5],
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


_FRONTIER_FIELDS = (
    "frontier_id",
    "target_trace_owner_id",
    "through_fact_id",
    "through_owner_ordinal",
)
_FRONTIER_SQL = (
    "SELECT frontier_id, target_trace_owner_id, through_fact_id, "
    "through_owner_ordinal, publisher_trace_owner_id, created_by_fact_id "
    "FROM frontiers WHERE frontier_id = ?"
)
_FRONTIER_EXISTS_SQL = "SELECT 1 FROM frontiers WHERE frontier_id = ?"
_INSERT_FRONTIER = (
    "INSERT INTO frontiers (frontier_id, target_trace_owner_id, through_fact_id, "
    "through_owner_ordinal, publisher_trace_owner_id, created_by_fact_id, "
    "append_intent_id) VALUES (?, ?, ?, ?, ?, ?, ?)"
)
_LATEST_ENTRY_SQL = (
    "SELECT max(path_ordinal) FROM path_entries WHERE path_ref = ? AND record_id = ?"
)
