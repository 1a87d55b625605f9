"""Stage the appends of one commit group against what the transaction holds.

A commit group is one or more appends committed in one transaction (the
commit queue's leader runs it, ``commits.py``). :class:`TxnState` holds what
the store held when the transaction opened (read set-wise, once for the whole
group) and is advanced by every append staged before the next one, so each
append sees exactly the store the appends before it produced: the same
outcome as committing them one by one, in queue order.

:func:`stage` decides one append (kernel-spec 5.1 steps 5-6 and 5.3): a
replay returns the stored receipt, a conflict or a broken law raises and
changes nothing in the state, anything else returns a :class:`MemberPlan`.
Positions and commit numbers are counted from the state's counters; on
PostgreSQL these are offsets until the transaction draws its numbers
(:meth:`MemberPlan.bind`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from goatherd.domain.errors import (
    AppendIntentConflictError,
    OrdinalConflictError,
    TraceStoreError,
    UnknownFactError,
)
from goatherd.domain.records import WITNESS_OWNER, AppendReceipt, RetainedContext
from goatherd.infrastructure.store.chain import CommitContent, FrontierRow
from goatherd.infrastructure.store.codec import (
    decode_receipt,
    encode_receipt,
    encode_refs,
)
from goatherd.infrastructure.store.plan import (
    ROOT_WITNESS,
    DraftIds,
    Prepared,
    StagedWitness,
    group_context,
    legacy_digest,
    resolve_ids,
    witness_for_context,
)
from goatherd.infrastructure.store.reader import CachedRecord

__all__ = ["GroupReplay", "MemberPlan", "StagedRecord", "TxnState", "stage"]


@dataclass(slots=True)
class TxnState:
    """What the transaction's store holds, advanced append by append.

    Attributes:
        positions: the next log position (an offset on PostgreSQL).
        commits: the next commit number (an offset on PostgreSQL).
        ordinals: next ordinal per owner (absent = 0); loaded for every owner
            the group names.
        intents: intent -> (batch digest, stored receipt JSON or the plan of
            an append staged earlier in this group).
        existing: record ids known to be retained (parents, staged records).
        contexts: contexts by id: reused ones loaded, new ones staged.
        witnesses: witness record ids known to be retained.
        stored_records: on PostgreSQL, the stored content of staged record
            ids that were already retained (read before writing, since a
            pipelined insert reports no row count).
        head: the chained head after the last commit (SQLite, where every
            commit links itself; ``None`` on PostgreSQL).
    """

    positions: int
    commits: int
    ordinals: dict[str, int] = field(default_factory=dict)
    intents: dict[str, tuple[str, str | MemberPlan]] = field(default_factory=dict)
    existing: set[str] = field(default_factory=set)
    contexts: dict[str, RetainedContext] = field(default_factory=dict)
    witnesses: set[str] = field(default_factory=set)
    stored_records: dict[str, CachedRecord] = field(default_factory=dict)
    head: str | None = None


@dataclass(frozen=True, slots=True)
class StagedRecord:
    """One draft, resolved: its record and the path entry the append adds."""

    record_id: str
    schema_ref: str
    mode: str
    witness_ref: str
    parents: tuple[str, ...]
    payload_json: str
    owner: str
    ordinal: int
    context_id: str
    kind_label: str
    position: int


@dataclass(slots=True)
class MemberPlan:
    """Everything one append writes (kernel-spec 5.4), and its receipt."""

    prepared: Prepared
    records: list[StagedRecord]
    new_contexts: list[RetainedContext]
    new_witnesses: list[tuple[StagedWitness, int]]
    ranges: dict[str, tuple[int, int]]
    context_receipts: tuple[str, ...]
    edges: tuple[tuple[str, str], ...]
    commit_seq: int
    receipt: AppendReceipt | None = None
    receipt_json: str = ""
    frontier: FrontierRow | None = None
    commit_digest: str | None = None
    head_digest: str | None = None
    committed_at: str = ""

    def bind(self, first_position: int, first_commit: int) -> None:
        """Shift offsets by the drawn numbers (0, 0 on SQLite) and build the receipt."""
        if first_position:
            self.records = [_shift(r, first_position) for r in self.records]
        self.commit_seq += first_commit
        self.receipt = AppendReceipt(
            append_intent_id=self.prepared.intent_id,
            fact_ids=tuple(r.record_id for r in self.records),
            commit_receipts=tuple(f"commit:{r.position}" for r in self.records),
            owner_ordinal_ranges=self.ranges,
            causal_edges=self.edges,
            context_receipts=self.context_receipts,
        )
        self.receipt_json = encode_receipt(self.receipt)

    def content(self) -> CommitContent:
        """Return what this commit writes, in the form the chain covers."""
        prepared = self.prepared
        return CommitContent(
            commit_seq=self.commit_seq,
            append_intent_id=prepared.intent_id,
            batch_digest=prepared.digest,
            receipt_json=self.receipt_json,
            committed_at=self.committed_at,
            contexts=[
                (
                    c.context_id,
                    encode_refs(c.active_binding_refs),
                    encode_refs(c.capability_witness_refs),
                    encode_refs(c.semantic_environment_refs),
                    encode_refs(c.visibility_policy_refs),
                    c.substrate_ref,
                    c.containment,
                )
                for c in self.new_contexts
            ],
            entries=[
                *(
                    (
                        WITNESS_OWNER,
                        n,
                        w.record_id,
                        "",
                        w.kind_label,
                        f"witness:{w.record_id}",
                        None,
                    )
                    for w, n in self.new_witnesses
                ),
                *(
                    (
                        r.owner,
                        r.ordinal,
                        r.record_id,
                        r.context_id,
                        r.kind_label,
                        f"commit:{r.position}",
                        r.position,
                    )
                    for r in self.records
                ),
            ],
            records=[
                *(
                    (
                        w.record_id,
                        w.record_id,
                        w.schema_ref,
                        "capture",
                        w.witness_ref,
                        (),
                    )
                    for w, _ in self.new_witnesses
                ),
                *(
                    (
                        r.record_id,
                        r.record_id,
                        r.schema_ref,
                        r.mode,
                        r.witness_ref,
                        r.parents,
                    )
                    for r in self.records
                ),
            ],
            frontiers=() if self.frontier is None else (self.frontier,),
        )


@dataclass(frozen=True, slots=True)
class GroupReplay:
    """An exact replay of an intent staged earlier in the same group."""

    plan: MemberPlan


def _shift(record: StagedRecord, offset: int) -> StagedRecord:
    return StagedRecord(
        record.record_id,
        record.schema_ref,
        record.mode,
        record.witness_ref,
        record.parents,
        record.payload_json,
        record.owner,
        record.ordinal,
        record.context_id,
        record.kind_label,
        record.position + offset,
    )


def stage(
    prepared: Prepared,
    state: TxnState,
    expected_heads: Mapping[str, int] | None = None,
) -> MemberPlan | AppendReceipt | GroupReplay:
    """Decide one append against ``state``; advance the state if it will commit.

    Returns:
        The stored receipt of an exact replay (or, for an intent staged
        earlier in the group, that plan), or the plan of a new append.

    Raises:
        AppendIntentConflictError: the intent committed with another digest.
        OrdinalConflictError: an owner's head differs from ``expected_heads``.
        TraceStoreError, UnknownFactError, BatchShapeError, RecordInputError:
            the preparation errors of kernel-spec 5.1 step 6.
    """
    stored = state.intents.get(prepared.intent_id)
    if stored is not None:
        if stored[0] != prepared.digest and stored[0] != legacy_digest(prepared):
            raise AppendIntentConflictError(
                f"append intent '{prepared.intent_id}' was already committed "
                "with different content"
            )
        if isinstance(stored[1], MemberPlan):
            return GroupReplay(stored[1])
        return decode_receipt(stored[1])
    for owner, expected in (expected_heads or {}).items():
        actual = state.ordinals.get(owner, 0)
        if actual != expected:
            raise OrdinalConflictError(owner, expected, actual)
    if prepared.deferred is not None:
        raise prepared.deferred
    plan = _plan(prepared, state)
    _advance(state, plan)
    return plan


def _plan(prepared: Prepared, state: TxnState) -> MemberPlan:
    contexts = _resolve_contexts(prepared, state.contexts)
    ids = prepared.ids or resolve_ids(prepared, {**state.contexts, **contexts})
    _check_parents(prepared, ids, state.existing)
    witnesses = _new_witnesses(prepared, state, {**state.contexts, **contexts})
    ordinals: dict[str, int] = {}
    ranges: dict[str, tuple[int, int]] = {}
    records: list[StagedRecord] = []
    edges: list[tuple[str, str]] = []
    context_receipts: list[str] = []
    position = state.positions
    draft_ids = iter(ids)
    actor = prepared.context.actor_ref
    for group in prepared.groups:
        retained = group_context(group, {**state.contexts, **contexts})
        context_receipts.append(retained.context_id)
        witness = witness_for_context(actor, retained).record_id
        owner = group.owner
        ordinal = ordinals.get(owner, state.ordinals.get(owner, 0))
        for item in group.drafts:
            draft, found = item.draft, next(draft_ids)
            records.append(
                StagedRecord(
                    found.record_id,
                    draft.schema_ref,
                    draft.mode,
                    witness,
                    found.parents,
                    item.payload_json,
                    owner,
                    ordinal,
                    retained.context_id,
                    draft.kind_label or draft.schema_ref,
                    position,
                )
            )
            edges.extend((parent, found.record_id) for parent in found.parents)
            first = ranges.get(owner, (ordinal, ordinal))[0]
            ranges[owner] = (first, ordinal)
            ordinal += 1
            position += 1
        ordinals[owner] = ordinal
    return MemberPlan(
        prepared,
        records,
        list(contexts.values()),
        witnesses,
        ranges,
        tuple(context_receipts),
        tuple(edges),
        state.commits,
    )


def _resolve_contexts(
    prepared: Prepared, stored: Mapping[str, RetainedContext]
) -> dict[str, RetainedContext]:
    """Return this append's new contexts; check reuses exist and new ids don't clash."""
    new: dict[str, RetainedContext] = {}
    for group in prepared.groups:
        request = group.context
        known = stored.get(request.context_id)
        if request.new is None:
            if known is None and request.context_id not in new:
                raise TraceStoreError(f"unknown context id: {request.context_id}")
            continue
        if known is not None and known != request.new:
            raise TraceStoreError(
                f"context id {request.context_id} already names a different context"
            )
        if known is None:
            new.setdefault(request.context_id, request.new)
    return new


def _check_parents(
    prepared: Prepared, ids: tuple[DraftIds, ...], existing: set[str]
) -> None:
    staged: set[str] = set()
    for found in ids:
        for parent in found.parents:
            if parent not in staged and parent not in existing:
                raise UnknownFactError(f"causal parent does not exist: {parent}")
        staged.add(found.record_id)


def _new_witnesses(
    prepared: Prepared,
    state: TxnState,
    contexts: Mapping[str, RetainedContext],
) -> list[tuple[StagedWitness, int]]:
    if not prepared.groups:
        return []
    planned: dict[str, StagedWitness] = {ROOT_WITNESS.record_id: ROOT_WITNESS}
    actor = prepared.context.actor_ref
    for group in prepared.groups:
        witness = witness_for_context(actor, group_context(group, contexts))
        planned.setdefault(witness.record_id, witness)
    ordinal = state.ordinals.get(WITNESS_OWNER, 0)
    new = []
    for witness in planned.values():
        if witness.record_id not in state.witnesses:
            new.append((witness, ordinal))
            ordinal += 1
    return new


def _advance(state: TxnState, plan: MemberPlan) -> None:
    prepared = plan.prepared
    state.intents[prepared.intent_id] = (prepared.digest, plan)
    for owner, (_, last) in plan.ranges.items():
        state.ordinals[owner] = last + 1
    if plan.new_witnesses:
        state.ordinals[WITNESS_OWNER] = plan.new_witnesses[-1][1] + 1
        state.witnesses.update(w.record_id for w, _ in plan.new_witnesses)
    state.existing.update(r.record_id for r in plan.records)
    for context in plan.new_contexts:
        state.contexts[context.context_id] = context
    state.positions += len(plan.records)
    state.commits += 1
