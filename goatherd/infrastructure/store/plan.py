"""Prepare an append: shape checks, batch digest, contexts, witnesses, staging.

This is the pure half of ``append`` and ``preview_record_ids`` (kernel-spec
5.1-5.3): given a batch, its operation context and what the store already
holds (fetched set-wise beforehand into a :class:`StoredState`), compute every
id, ordinal, commit number, context and witness the append would write. It
performs no I/O; the writer persists the resulting :class:`AppendPlan`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from json.encoder import encode_basestring

from goatherd.domain.canonical import (
    CANONICAL_PREFIX,
    canonical_json_text,
    sha256_hex,
)
from goatherd.domain.contexts import OperationContext
from goatherd.domain.errors import (
    BatchShapeError,
    RecordInputError,
    TraceStoreError,
    UnknownFactError,
)
from goatherd.domain.identity import (
    ROOT_WITNESS_SCHEMA_REF,
    WITNESS_SCHEMA_REF,
    record_digest,
    root_witness_body,
    root_witness_record_id,
    validate_mode,
    validate_schema_ref,
    validate_witness_body,
)
from goatherd.domain.records import (
    WITNESS_OWNER,
    AppendBatch,
    AppendGroup,
    AppendReceipt,
    RecordDraft,
    RetainedContext,
    RetainedContextDraft,
)
from goatherd.infrastructure.store.codec import storage_json

__all__ = [
    "AppendPlan",
    "ContextRequest",
    "NormalizedDraft",
    "StagedRecord",
    "StagedWitness",
    "StoredState",
    "batch_digest",
    "context_requests",
    "explicit_parents",
    "plan_append",
    "validate_batch",
]

ROOT_WITNESS_ID = root_witness_record_id()
ROOT_WITNESS_BODY_JSON = storage_json({"payload": root_witness_body()})


@dataclass(frozen=True, slots=True)
class NormalizedDraft:
    """A draft whose payload went through a storage-JSON round trip (quirk 18.1).

    Attributes:
        draft: the caller's draft.
        payload: the payload parsed back from its storage JSON.
        payload_json: the payload's storage-flavour JSON (stored, batch digest).
        digest_json: the payload's digest-flavour JSON (the record id input).
    """

    draft: RecordDraft
    payload: dict[str, object]
    payload_json: str
    digest_json: str


@dataclass(frozen=True, slots=True)
class ContextRequest:
    """How a non-empty group's context resolves: a reuse by id or a new context."""

    group_index: int
    reuse_id: str | None = None
    new: RetainedContext | None = None

    @property
    def context_id(self) -> str:
        """The id this group's context has (reused or new)."""
        if self.new is not None:
            return self.new.context_id
        assert self.reuse_id is not None
        return self.reuse_id


@dataclass(frozen=True, slots=True)
class StoredState:
    """What the store holds that preparation needs, fetched before planning.

    Attributes:
        next_ordinals: stored next ordinal per owner (absent = 0).
        contexts: stored contexts by id (reused ids and new ids, for clashes).
        existing_parents: explicit parent ids known to exist as records.
        next_commit: the stored global commit sequence.
        check_parents: ``False`` for preview, which does not check parents.
    """

    next_ordinals: Mapping[str, int] = field(default_factory=dict)
    contexts: Mapping[str, RetainedContext] = field(default_factory=dict)
    existing_parents: frozenset[str] = frozenset()
    next_commit: int = 0
    check_parents: bool = True


@dataclass(frozen=True, slots=True)
class StagedWitness:
    """A witness the batch relies on (inserted only if it is missing)."""

    record_id: str
    schema_ref: str
    kind_label: str
    payload: dict[str, object]
    body_json: str
    witness_ref: str


@dataclass(frozen=True, slots=True)
class StagedRecord:
    """One draft, resolved: its record and the path entry the append adds."""

    record_id: str
    schema_ref: str
    mode: str
    witness_ref: str
    parents: tuple[str, ...]
    payload: dict[str, object]
    body_json: str
    owner: str
    ordinal: int
    context_id: str
    kind_label: str
    position: int


@dataclass(frozen=True, slots=True)
class AppendPlan:
    """Everything one append writes, in persistence order (kernel-spec 5.4)."""

    receipt: AppendReceipt
    new_contexts: tuple[RetainedContext, ...]
    witnesses: tuple[StagedWitness, ...]
    staged: tuple[StagedRecord, ...]
    next_ordinals: Mapping[str, int]
    next_commit: int


def validate_batch(batch: AppendBatch) -> tuple[tuple[NormalizedDraft, ...], ...]:
    """Check a batch's shape and normalize every payload (kernel-spec 5.1 step 3).

    Returns:
        the normalized drafts of each group, in batch order.

    Raises:
        BatchShapeError: the reference's shape errors, and a group targeting
            the witness owner path (quirk 18.15).
        CanonicalTypeError: a payload value JSON cannot hold.
        CanonicalValueError: NaN, an infinity or a lone surrogate in a payload.
    """
    if not batch.append_intent_id:
        raise BatchShapeError("append_intent_id is required")
    if batch.atomicity != "atomic":
        raise BatchShapeError("SQLiteTraceStore only supports atomic append batches")
    local_ids: set[str] = set()
    return tuple(_validate_group(group, local_ids) for group in batch.groups)


def _validate_group(
    group: AppendGroup, local_ids: set[str]
) -> tuple[NormalizedDraft, ...]:
    if not group.trace_owner_id:
        raise BatchShapeError("trace_owner_id is required")
    if group.trace_owner_id == WITNESS_OWNER:
        raise BatchShapeError(
            f"cannot append to the witness owner path {WITNESS_OWNER!r}: "
            "the store alone retains witnesses there"
        )
    return tuple(_validate_draft(draft, local_ids) for draft in group.fact_drafts)


def _validate_draft(draft: RecordDraft, local_ids: set[str]) -> NormalizedDraft:
    try:  # the kernel's validators; a failure is a batch shape error here
        validate_mode(draft.mode, subject="fact mode")
        if draft.append_local_id is not None:
            if draft.append_local_id in local_ids:
                raise BatchShapeError(
                    f"duplicate append-local id: {draft.append_local_id}"
                )
            local_ids.add(draft.append_local_id)
        validate_schema_ref(draft.schema_ref)
    except RecordInputError as error:
        raise BatchShapeError(str(error)) from None
    if not isinstance(draft.payload, Mapping):
        raise BatchShapeError(
            f"fact payload must be a JSON object, got {type(draft.payload).__name__}"
        )
    # One strict encoding serves the stored JSON, the batch digest and the
    # record id: both flavours differ only in how non-ASCII text is written,
    # and a parsed-back payload encodes to the same text (floats and ints
    # print as they parse, keys stay sorted), so the round trip of quirk
    # 18.1 changes no byte of either.
    value = dict(draft.payload)
    digest_json = canonical_json_text(value, root="payload")
    if digest_json.isascii():
        payload_json = digest_json
    else:
        payload_json = storage_json(value, root="payload")
    return NormalizedDraft(
        draft=draft,
        payload=json.loads(payload_json),
        payload_json=payload_json,
        digest_json=digest_json,
    )


def batch_digest(
    context: OperationContext,
    batch: AppendBatch,
    groups: tuple[tuple[NormalizedDraft, ...], ...],
) -> str:
    """Return the batch digest idempotency compares (kernel-spec 5.2): bare hex.

    The batch is encoded once with every payload left out (``null``), and the
    payloads' storage JSON, already computed, is spliced in at their keys.
    """
    drafts = [item for group in groups for item in group]
    skeleton = storage_json(
        _batch_digest_input(context, batch, groups, with_payloads=False),
        root="batch",
    )
    parts = skeleton.split(_PAYLOAD_SLOT)
    if len(parts) != len(drafts) + 1:
        # Another '"payload":null' in the batch's own fields: encode it whole.
        whole = _batch_digest_input(context, batch, groups, with_payloads=True)
        return sha256_hex(storage_json(whole, root="batch"))
    pieces = [parts[0]]
    for item, rest in zip(drafts, parts[1:], strict=True):
        pieces.append('"payload":')
        pieces.append(item.payload_json)
        pieces.append(rest)
    return sha256_hex("".join(pieces))


_PAYLOAD_SLOT = '"payload":null'


def _batch_digest_input(
    context: OperationContext,
    batch: AppendBatch,
    groups: tuple[tuple[NormalizedDraft, ...], ...],
    *,
    with_payloads: bool,
) -> dict[str, object]:
    return {
        "append_intent_id": batch.append_intent_id,
        "atomicity": batch.atomicity,
        "actor_ref": context.actor_ref,
        "schema_version_set": context.schema_environment_ref,
        "groups": [
            _group_digest_input(group, drafts, with_payloads)
            for group, drafts in zip(batch.groups, groups, strict=True)
        ],
    }


def _group_digest_input(
    group: AppendGroup, drafts: tuple[NormalizedDraft, ...], with_payloads: bool
) -> dict[str, object]:
    return {
        "trace_owner_id": group.trace_owner_id,
        "retained_context": _raw_context_draft(group.retained_context),
        "causal_parents": list(group.causal_parents),
        "fact_drafts": [
            {
                "append_local_id": item.draft.append_local_id,
                "kind_label": item.draft.kind_label,
                "mode": item.draft.mode,
                "schema_ref": item.draft.schema_ref,
                "payload": item.payload if with_payloads else None,
                "caused_by_fact_ids": list(item.draft.caused_by_fact_ids),
                "caused_by_local_refs": list(item.draft.caused_by_local_refs),
            }
            for item in drafts
        ],
    }


def _raw_context_draft(
    value: RetainedContextDraft | RetainedContext | str | None,
) -> dict[str, object]:
    if isinstance(value, RetainedContext):
        value = RetainedContextDraft(reuse_context_id=value.context_id)
    elif isinstance(value, str):
        value = RetainedContextDraft(reuse_context_id=value)
    elif value is None:
        value = RetainedContextDraft()
    return {
        "active_binding_refs": list(value.active_binding_refs),
        "capability_witness_refs": list(value.capability_witness_refs),
        "semantic_environment_refs": list(value.semantic_environment_refs),
        "visibility_policy_refs": list(value.visibility_policy_refs),
        "substrate_ref": value.substrate_ref,
        "containment": value.containment,
        "reuse_context_id": value.reuse_context_id,
    }


def context_requests(
    context: OperationContext, batch: AppendBatch
) -> tuple[ContextRequest, ...]:
    """Return how each non-empty group's context resolves (kernel-spec 4.6)."""
    requests = []
    for index, group in enumerate(batch.groups):
        if group.fact_drafts:
            requests.append(_context_request(context, batch, index, group))
    return tuple(requests)


def _context_request(
    context: OperationContext, batch: AppendBatch, index: int, group: AppendGroup
) -> ContextRequest:
    value = group.retained_context
    if isinstance(value, RetainedContext):
        return ContextRequest(index, reuse_id=value.context_id)
    if isinstance(value, str):
        return ContextRequest(index, reuse_id=value)
    draft = RetainedContextDraft() if value is None else value
    if draft.reuse_context_id is not None:
        return ContextRequest(index, reuse_id=draft.reuse_context_id)
    environment = tuple(
        dict.fromkeys(
            (*draft.semantic_environment_refs, context.schema_environment_ref)
        )
    )
    payload = {
        "active_binding_refs": list(draft.active_binding_refs),
        "capability_witness_refs": list(draft.capability_witness_refs),
        "semantic_environment_refs": list(environment),
        "visibility_policy_refs": list(draft.visibility_policy_refs),
        "substrate_ref": draft.substrate_ref,
        "containment": draft.containment,
    }
    encoded = storage_json(payload, root="retained_context")
    digest = sha256_hex(f"{batch.append_intent_id}\0{index}\0{encoded}")
    new = RetainedContext(
        context_id="context:" + digest[:32],
        active_binding_refs=tuple(draft.active_binding_refs),
        capability_witness_refs=tuple(draft.capability_witness_refs),
        semantic_environment_refs=environment,
        visibility_policy_refs=tuple(draft.visibility_policy_refs),
        substrate_ref=draft.substrate_ref,
        containment=draft.containment,
    )
    return ContextRequest(index, new=new)


def explicit_parents(batch: AppendBatch) -> tuple[str, ...]:
    """Return every parent id a batch names directly (group and draft parents)."""
    ids: dict[str, None] = {}
    for group in batch.groups:
        ids.update(dict.fromkeys(group.causal_parents))
        for draft in group.fact_drafts:
            ids.update(dict.fromkeys(draft.caused_by_fact_ids))
    return tuple(ids)


def plan_append(
    context: OperationContext,
    batch: AppendBatch,
    groups: tuple[tuple[NormalizedDraft, ...], ...],
    requests: tuple[ContextRequest, ...],
    stored: StoredState,
) -> AppendPlan:
    """Stage every draft of a validated batch (kernel-spec 5.3).

    Raises:
        TraceStoreError: an unknown context id, a context id clash, or an
            unknown append-local causal ref.
        UnknownFactError: a causal parent that is neither staged earlier nor
            retained (only when ``stored.check_parents``).
        BatchShapeError: a duplicate causal parent.
        RecordInputError: a bad witness body, or a draft using the root schema.
    """
    builder = _PlanBuilder(context, batch.append_intent_id, stored)
    by_index = {request.group_index: request for request in requests}
    for index, (group, drafts) in enumerate(zip(batch.groups, groups, strict=True)):
        if drafts:
            builder.add_group(group, drafts, by_index[index])
    return builder.finish()


class _PlanBuilder:
    def __init__(
        self, context: OperationContext, intent_id: str, stored: StoredState
    ) -> None:
        self._context = context
        self._intent_id = intent_id
        self._stored = stored
        self._next = dict(stored.next_ordinals)
        self._local_ids: dict[str, str] = {}
        self._staged_ids: set[str] = set()
        self._staged: list[StagedRecord] = []
        self._witnesses: dict[str, StagedWitness] = {}
        self._new_contexts: dict[str, RetainedContext] = {}
        self._context_receipts: list[str] = []
        self._ranges: dict[str, tuple[int, int]] = {}
        self._edges: list[tuple[str, str]] = []

    def add_group(
        self,
        group: AppendGroup,
        drafts: tuple[NormalizedDraft, ...],
        request: ContextRequest,
    ) -> None:
        retained = self._resolve_context(request)
        self._context_receipts.append(retained.context_id)
        witness_id = self._plan_witness(retained)
        for item in drafts:
            self._stage(group, item, retained.context_id, witness_id)

    def _resolve_context(self, request: ContextRequest) -> RetainedContext:
        stored = self._stored.contexts.get(request.context_id)
        if request.new is None:
            if stored is None:
                stored = self._new_contexts.get(request.context_id)
            if stored is None:
                raise TraceStoreError(f"unknown context id: {request.context_id}")
            return stored
        if stored is not None and stored != request.new:
            raise TraceStoreError(
                f"context id {request.context_id} already names a different context"
            )
        if stored is None:
            self._new_contexts.setdefault(request.context_id, request.new)
        return request.new

    def _plan_witness(self, retained: RetainedContext) -> str:
        if ROOT_WITNESS_ID not in self._witnesses:
            self._witnesses[ROOT_WITNESS_ID] = _root_witness()
        witness = _ordinary_witness(self._context.actor_ref, retained)
        self._witnesses.setdefault(witness.record_id, witness)
        return witness.record_id

    def _stage(
        self,
        group: AppendGroup,
        item: NormalizedDraft,
        context_id: str,
        witness_id: str,
    ) -> None:
        draft = item.draft
        parents = self._parents(group, draft)
        owner = group.trace_owner_id
        ordinal = self._next.get(owner, 0)
        position = self._stored.next_commit + len(self._staged)
        record_id = _record_id(item, parents, witness_id)
        if draft.append_local_id is not None:
            self._local_ids[draft.append_local_id] = record_id
        self._staged.append(
            StagedRecord(
                record_id=record_id,
                schema_ref=draft.schema_ref,
                mode=draft.mode,
                witness_ref=witness_id,
                parents=parents,
                payload=item.payload,
                body_json='{"payload":' + item.payload_json + "}",
                owner=owner,
                ordinal=ordinal,
                context_id=context_id,
                kind_label=draft.kind_label or draft.schema_ref,
                position=position,
            )
        )
        self._edges.extend((parent, record_id) for parent in parents)
        self._staged_ids.add(record_id)
        self._next[owner] = ordinal + 1
        first = self._ranges.get(owner, (ordinal, ordinal))[0]
        self._ranges[owner] = (first, ordinal)

    def _parents(self, group: AppendGroup, draft: RecordDraft) -> tuple[str, ...]:
        resolved = []
        for ref in draft.caused_by_local_refs:
            if ref not in self._local_ids:
                raise TraceStoreError(
                    f"append-local causal parent does not exist: {ref}"
                )
            resolved.append(self._local_ids[ref])
        parents = (*group.causal_parents, *draft.caused_by_fact_ids, *resolved)
        seen: set[str] = set()
        for parent in parents:
            if parent in seen:
                raise BatchShapeError(f"duplicate causal parent: {parent}")
            seen.add(parent)
            self._check_parent(parent)
        return parents

    def _check_parent(self, parent: str) -> None:
        if not self._stored.check_parents or parent in self._staged_ids:
            return
        if parent not in self._stored.existing_parents:
            raise UnknownFactError(f"causal parent does not exist: {parent}")

    def finish(self) -> AppendPlan:
        staged = tuple(self._staged)
        receipt = AppendReceipt(
            append_intent_id=self._intent_id,
            fact_ids=tuple(s.record_id for s in staged),
            commit_receipts=tuple(f"commit:{s.position}" for s in staged),
            owner_ordinal_ranges=dict(self._ranges),
            causal_edges=tuple(self._edges),
            context_receipts=tuple(self._context_receipts),
        )
        next_commit = self._stored.next_commit + len(staged)
        return AppendPlan(
            receipt=receipt,
            new_contexts=tuple(self._new_contexts.values()),
            witnesses=tuple(self._witnesses.values()),
            staged=staged,
            next_ordinals={owner: self._next[owner] for owner in self._ranges},
            next_commit=next_commit,
        )


def _record_id(item: NormalizedDraft, parents: tuple[str, ...], witness: str) -> str:
    """Return ``record_digest`` of a staged draft, from its digest-flavour JSON.

    The six-key canonical record input is written around the payload's
    canonical text instead of encoding the payload a second time. Anything
    unusual (a non-string field, text that is not valid UTF-8, the root
    witness schema) takes ``record_digest`` itself, with its exact errors.
    """
    draft = item.draft
    schema_ref, mode = draft.schema_ref, draft.mode
    if (
        type(schema_ref) is not str
        or schema_ref == ROOT_WITNESS_SCHEMA_REF
        or not all(type(parent) is str for parent in parents)
    ):
        return record_digest(schema_ref, mode, item.payload, parents, witness)
    text = "".join(
        (
            '{"body":',
            item.digest_json,
            ',"caused_by":[',
            ",".join(map(encode_basestring, parents)),
            '],"kind":"record","mode":',
            encode_basestring(mode),
            ',"schema_ref":',
            encode_basestring(schema_ref),
            ',"witness":',
            encode_basestring(witness),
            "}",
        )
    )
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:
        return record_digest(schema_ref, mode, item.payload, parents, witness)
    return "sha256:" + hashlib.sha256(CANONICAL_PREFIX + data).hexdigest()


def _root_witness() -> StagedWitness:
    return StagedWitness(
        record_id=ROOT_WITNESS_ID,
        schema_ref="kernel.witness.root.v1",
        kind_label="witness_root",
        payload=root_witness_body(),
        body_json=ROOT_WITNESS_BODY_JSON,
        witness_ref="",
    )


def _ordinary_witness(actor_ref: str, retained: RetainedContext) -> StagedWitness:
    return _witness_for(
        actor_ref,
        retained.capability_witness_refs,
        retained.active_binding_refs,
        retained.semantic_environment_refs,
        retained.visibility_policy_refs,
        retained.substrate_ref,
        retained.containment,
    )


@lru_cache(maxsize=4096)
def _witness_for(
    actor_ref: str,
    authority_refs: tuple[str, ...],
    binding_refs: tuple[str, ...],
    environment_refs: tuple[str, ...],
    visibility_refs: tuple[str, ...],
    substrate_ref: str,
    containment: str,
) -> StagedWitness:
    # Pure in its arguments, so memoizing it is safe; it spares a witness
    # digest on every append from the same actor and context content.
    body: dict[str, object] = {
        "actor_ref": actor_ref,
        "authority_refs": list(authority_refs),
        "active_binding_refs": list(binding_refs),
        "semantic_environment_refs": list(environment_refs),
        "visibility_policy_refs": list(visibility_refs),
        "provenance_policy_refs": [],
        "substrate_ref": substrate_ref,
        "containment": containment,
    }
    validate_witness_body(WITNESS_SCHEMA_REF, body)
    record_id = record_digest(WITNESS_SCHEMA_REF, "capture", body, (), ROOT_WITNESS_ID)
    return StagedWitness(
        record_id=record_id,
        schema_ref=WITNESS_SCHEMA_REF,
        kind_label="witness",
        payload=body,
        body_json=storage_json({"payload": body}, root="witness"),
        witness_ref=ROOT_WITNESS_ID,
    )
