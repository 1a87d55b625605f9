"""Prepare an append before its transaction: shapes, encodings, digests and ids.

This is the pure half of ``append`` and ``preview_record_ids`` (kernel-spec
5.1-5.3). :func:`prepare` checks a batch's shape, encodes every payload once,
computes the batch digest, the new contexts and their witnesses, and every
record id whose witness it can know without the store (all of them unless a
group reuses a context this process has not seen). It runs before the append
joins the commit queue, so that the hashing of concurrent appends overlaps
the transaction of the appends before them. ``staging.py`` finishes the plan
against what the store holds.

Errors that the kernel raises only after the intent lookup (an unknown local
ref, a duplicate parent, a bad witness body: kernel-spec 5.1 step 6) are kept
in :attr:`Prepared.deferred` and raised by staging after that lookup, so the
order of errors is the reference's.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from json.encoder import encode_basestring
from json.encoder import encode_basestring_ascii as _quote_ascii
from typing import Final, Protocol

from goatherd.domain.canonical import (
    CANONICAL_PREFIX,
    canonical_json_text,
    sha256_hex,
)
from goatherd.domain.contexts import OperationContext
from goatherd.domain.errors import (
    BatchShapeError,
    DomainError,
    RecordInputError,
    RuntimeRecordRefusedError,
    TraceStoreError,
)
from goatherd.domain.events import RecordDecodeError, decode_payload, is_runtime_schema
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
    FRONTIER_SCHEMA_REF,
    REDACTION_OWNER,
    REDACTION_SCHEMA_REF,
    WITNESS_OWNER,
    AppendBatch,
    AppendGroup,
    RecordDraft,
    RetainedContext,
    RetainedContextDraft,
)
from goatherd.infrastructure.store.codec import storage_json
from goatherd.infrastructure.store.door import NamedBlob, named_blobs
from goatherd.infrastructure.store.limits import (
    DEFAULT_LIMITS,
    AppendLimits,
    check_batch,
    check_payload_size,
)

__all__ = [
    "ContextLookup",
    "ContextRequest",
    "DraftIds",
    "NormalizedDraft",
    "Prepared",
    "PreparedGroup",
    "ROOT_WITNESS",
    "StagedWitness",
    "batch_digest",
    "context_requests",
    "explicit_parents",
    "group_context",
    "legacy_digest",
    "prepare",
    "resolve_ids",
    "validate_batch",
    "witness_for_context",
]


class ContextLookup(Protocol):
    """Retained contexts by id (a mapping, or the store's bounded cache)."""

    def get(self, key: str, /) -> RetainedContext | None:
        """Return the context stored under ``key``, or ``None``."""
        ...

    def __contains__(self, key: object, /) -> bool:
        """Whether a context is stored under ``key``."""
        ...


@dataclass(frozen=True, slots=True)
class NormalizedDraft:
    """A draft with its payload encoded once (quirk 18.1).

    Attributes:
        draft: the caller's draft.
        payload_json: the payload's storage-flavour JSON (stored, batch digest).
        digest_json: the payload's digest-flavour JSON (the record id input).
    """

    draft: RecordDraft
    payload_json: str
    digest_json: str

    @property
    def payload(self) -> dict[str, object]:
        """The payload as the store keeps it (parsed back from its storage JSON)."""
        value: dict[str, object] = json.loads(self.payload_json)
        return value


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
class StagedWitness:
    """A witness the batch relies on (inserted only if it is missing)."""

    record_id: str
    schema_ref: str
    kind_label: str
    payload: dict[str, object]
    body_json: str
    witness_ref: str


@dataclass(frozen=True, slots=True)
class PreparedGroup:
    """One non-empty group: its owner, context and normalized drafts."""

    owner: str
    context: ContextRequest
    drafts: tuple[NormalizedDraft, ...]
    causal_parents: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class DraftIds:
    """The record id and the ordered parents of one draft, in batch order."""

    record_id: str
    parents: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Prepared:
    """A shape-checked batch with everything computable before the transaction.

    Attributes:
        context: the operation context (write trust already checked).
        batch: the caller's batch.
        digest: the batch digest (kernel-spec 5.2).
        groups: the non-empty groups, in batch order.
        owners: every owner a group names (empty groups too), first-seen order.
        parents: the parent ids the batch names directly (checked to exist).
        ids: each draft's id and parents, or ``None`` until reused contexts
            are known.
        deferred: a preparation error to raise after the intent lookup.
    """

    context: OperationContext
    batch: AppendBatch
    digest: str
    groups: tuple[PreparedGroup, ...]
    owners: tuple[str, ...]
    parents: tuple[str, ...]
    ids: tuple[DraftIds, ...] | None
    deferred: DomainError | None = None

    intent_id: str = ""
    """The batch's append intent id (set by :func:`prepare`)."""

    blobs: tuple[NamedBlob, ...] = ()
    """The blobs the batch's runtime records name (checked held at commit)."""

    def reused_contexts(self) -> tuple[str, ...]:
        """The ids of the stored contexts this batch reuses."""
        return tuple(
            g.context.reuse_id for g in self.groups if g.context.reuse_id is not None
        )


ROOT_WITNESS_ID = root_witness_record_id()
ROOT_WITNESS_BODY_JSON = storage_json({"payload": root_witness_body()})
ROOT_WITNESS = StagedWitness(
    record_id=ROOT_WITNESS_ID,
    schema_ref=ROOT_WITNESS_SCHEMA_REF,
    kind_label="witness_root",
    payload=root_witness_body(),
    body_json=ROOT_WITNESS_BODY_JSON,
    witness_ref="",
)


def prepare(
    context: OperationContext,
    batch: AppendBatch,
    contexts: ContextLookup,
    limits: AppendLimits = DEFAULT_LIMITS,
    *,
    redaction: bool = False,
    frontier: bool = False,
) -> Prepared:
    """Shape-check ``batch`` and compute what it can without the store.

    Args:
        context: the append's operation context.
        batch: the batch.
        contexts: retained contexts already known (for reused context ids).
        limits: the store's input limits.
        redaction: the batch is ``redact``'s own (only it may write
            redaction records and place records on the redaction path).
        frontier: the batch is ``publish_cut``'s own (only it may write
            frontier records: their index row is written beside them).

    Raises:
        BatchShapeError, CanonicalEncodingError: the field checks of
            ``limits.py`` and the shape checks of kernel-spec 5.1 step 3
            (raised at once).
    """
    normalized = validate_batch(batch, limits)
    if not redaction:
        _refuse_redaction_records(batch)
    if not frontier:
        _refuse_frontier_records(batch)
    _refuse_unreadable_runtime_records(batch, normalized)
    digest = batch_digest(context, batch, normalized)
    requests = {r.group_index: r for r in context_requests(context, batch)}
    groups = tuple(
        PreparedGroup(g.trace_owner_id, requests[i], normalized[i], g.causal_parents)
        for i, g in enumerate(batch.groups)
        if normalized[i]
    )
    owners = tuple(dict.fromkeys(g.trace_owner_id for g in batch.groups))
    prepared = Prepared(
        context,
        batch,
        digest,
        groups,
        owners,
        explicit_parents(batch),
        None,
        intent_id=batch.append_intent_id,
        blobs=named_blobs(batch),
    )
    if any(g.context.reuse_id not in contexts for g in groups if g.context.new is None):
        return prepared
    try:
        ids = resolve_ids(prepared, contexts)
    except (BatchShapeError, TraceStoreError, ValueError) as error:
        deferred = error if isinstance(error, DomainError) else _as_domain(error)
        return _with(prepared, None, deferred)
    return _with(prepared, ids, None)


def _with(
    prepared: Prepared, ids: tuple[DraftIds, ...] | None, deferred: DomainError | None
) -> Prepared:
    return Prepared(
        prepared.context,
        prepared.batch,
        prepared.digest,
        prepared.groups,
        prepared.owners,
        prepared.parents,
        ids,
        deferred,
        prepared.intent_id,
        prepared.blobs,
    )


def _as_domain(error: ValueError) -> DomainError:
    wrapped = BatchShapeError(str(error))
    wrapped.__cause__ = error
    return wrapped


def group_context(group: PreparedGroup, contexts: ContextLookup) -> RetainedContext:
    """Return the retained context of ``group`` (new, or reused from ``contexts``).

    Raises:
        TraceStoreError: ``unknown context id: X``.
    """
    if group.context.new is not None:
        return group.context.new
    found = contexts.get(group.context.context_id)
    if found is None:
        raise TraceStoreError(f"unknown context id: {group.context.context_id}")
    return found


def resolve_ids(prepared: Prepared, contexts: ContextLookup) -> tuple[DraftIds, ...]:
    """Compute every draft's record id and ordered parents (kernel-spec 5.3).

    Raises:
        TraceStoreError: an unknown context id or append-local causal ref.
        BatchShapeError: a duplicate causal parent.
        RecordInputError: a bad witness body, or a draft using the root schema.
    """
    actor = prepared.context.actor_ref
    local: dict[str, str] = {}
    out: list[DraftIds] = []
    for group in prepared.groups:
        witness = witness_for_context(actor, group_context(group, contexts)).record_id
        for item in group.drafts:
            draft = item.draft
            parents = _parents(group.causal_parents, draft, local)
            record_id = _record_id(item, parents, witness)
            if draft.append_local_id is not None:
                local[draft.append_local_id] = record_id
            out.append(DraftIds(record_id, parents))
    return tuple(out)


def _parents(
    group_parents: tuple[str, ...], draft: RecordDraft, local: dict[str, str]
) -> tuple[str, ...]:
    resolved = []
    for ref in draft.caused_by_local_refs:
        found = local.get(ref)
        if found is None:
            raise TraceStoreError(f"append-local causal parent does not exist: {ref}")
        resolved.append(found)
    parents = (*group_parents, *draft.caused_by_fact_ids, *resolved)
    if len(set(parents)) != len(parents):
        seen: set[str] = set()
        for parent in parents:
            if parent in seen:
                raise BatchShapeError(f"duplicate causal parent: {parent}")
            seen.add(parent)
    return parents


def witness_for_context(actor_ref: str, retained: RetainedContext) -> StagedWitness:
    """Return the ordinary witness of ``actor_ref`` under ``retained`` (3.4).

    Raises:
        RecordInputError: a bad containment or an empty substrate.
    """
    return _witness_for(
        actor_ref,
        retained.capability_witness_refs,
        retained.active_binding_refs,
        retained.semantic_environment_refs,
        retained.visibility_policy_refs,
        retained.substrate_ref,
        retained.containment,
    )


# ------------------------------------------------------------------ shapes


def validate_batch(
    batch: AppendBatch,
    limits: AppendLimits = DEFAULT_LIMITS,
    *,
    legacy_del: bool = False,
) -> tuple[tuple[NormalizedDraft, ...], ...]:
    """Check a batch's fields and shape, and encode every payload (5.1 step 3).

    ``legacy_del``: keep a raw DEL (U+007F) in the storage JSON, as versions
    before schema v2 did (only to recognize their stored batch digests).

    Returns:
        the normalized drafts of each group, in batch order.

    Raises:
        BatchShapeError: a field of the wrong type, with NUL, or over its
            limit; the reference's shape errors; a group targeting the
            witness owner path (quirk 18.15).
        CanonicalTypeError: a payload value JSON cannot hold.
        CanonicalValueError: NaN, an infinity or a lone surrogate in a payload.
    """
    check_batch(batch, limits)
    if not batch.append_intent_id:
        raise BatchShapeError("append_intent_id is required")
    if batch.atomicity != "atomic":
        raise BatchShapeError("SQLiteTraceStore only supports atomic append batches")
    local_ids: set[str] = set()
    groups = tuple(
        _validate_group(group, local_ids, f"groups[{index}]", limits, legacy_del)
        for index, group in enumerate(batch.groups)
    )
    total = sum(len(item.payload_json) for group in groups for item in group)
    if total > limits.batch_payload_bytes:
        raise BatchShapeError(
            f"the batch's payloads are {total} bytes of JSON, over the store's "
            f"{limits.batch_payload_bytes}-byte batch limit; append them in parts"
        )
    return groups


_WITNESS_SCHEMA_PREFIX: Final = "kernel.witness."


def _refuse_redaction_records(batch: AppendBatch) -> None:
    for group in batch.groups:
        if group.trace_owner_id == REDACTION_OWNER or any(
            d.schema_ref == REDACTION_SCHEMA_REF for d in group.fact_drafts
        ):
            raise BatchShapeError(
                f"cannot append {REDACTION_SCHEMA_REF} records or to the "
                f"{REDACTION_OWNER!r} path: only redact() records redactions"
            )


def _refuse_frontier_records(batch: AppendBatch) -> None:
    for group in batch.groups:
        if any(d.schema_ref == FRONTIER_SCHEMA_REF for d in group.fact_drafts):
            raise BatchShapeError(
                f"cannot append {FRONTIER_SCHEMA_REF} records: only publish_cut "
                "records a frontier (with the index row verify checks it against)"
            )


def _refuse_unreadable_runtime_records(
    batch: AppendBatch, normalized: tuple[tuple[NormalizedDraft, ...], ...]
) -> None:
    """Refuse a runtime-schema draft its typed event does not decode.

    The runtime folds every record of its schemas; one it cannot decode would
    stop every fold of the trace. Each is decoded here as the fold will read it
    back (its stored JSON parsed, on its group's path), so what the door lets
    in, the fold reads. Other schemas cost one set lookup.
    """
    for index, (group, items) in enumerate(zip(batch.groups, normalized, strict=True)):
        for position, item in enumerate(items):
            draft = item.draft
            if not is_runtime_schema(draft.schema_ref):
                continue
            try:
                decode_payload(
                    draft.schema_ref,
                    draft.mode,
                    json.loads(item.payload_json),
                    caused_by=tuple(draft.caused_by_fact_ids),
                    owner=group.trace_owner_id,
                )
            except RecordDecodeError as error:
                raise RuntimeRecordRefusedError(
                    f"groups[{index}].fact_drafts[{position}]",
                    group.trace_owner_id,
                    draft.schema_ref,
                    error.reason,
                ) from None


def _validate_group(
    group: AppendGroup,
    local_ids: set[str],
    path: str,
    limits: AppendLimits,
    legacy_del: bool,
) -> tuple[NormalizedDraft, ...]:
    if not group.trace_owner_id:
        raise BatchShapeError("trace_owner_id is required")
    if group.trace_owner_id == WITNESS_OWNER:
        raise BatchShapeError(
            f"cannot append to the witness owner path {WITNESS_OWNER!r}: "
            "the store alone retains witnesses there"
        )
    validated = tuple(
        _validate_draft(
            draft, local_ids, f"{path}.fact_drafts[{index}]", limits, legacy_del
        )
        for index, draft in enumerate(group.fact_drafts)
    )
    for index, draft in enumerate(group.fact_drafts):
        if (
            draft.schema_ref.startswith(_WITNESS_SCHEMA_PREFIX)
            and draft.schema_ref != ROOT_WITNESS_SCHEMA_REF
        ):
            # verify reads every record of a witness schema as a witness (its
            # kind label, its chain), so one appended on an ordinary path
            # would make the trace fail verify and refuse redaction. (The
            # root schema keeps the reference's own refusal, raised later.)
            raise BatchShapeError(
                f"{path}.fact_drafts[{index}].schema_ref: {draft.schema_ref!r} is "
                "the store's own witness schema; the store alone retains "
                "witnesses (use a schema of your own)"
            )
    return validated


def _validate_draft(
    draft: RecordDraft,
    local_ids: set[str],
    path: str,
    limits: AppendLimits,
    legacy_del: bool,
) -> NormalizedDraft:
    # The seed's rules are the kernel's validators (one implementation); the
    # store only names the mode a "fact mode" and refuses as a shape error.
    # Its own checks (type, NUL, valid text, size) ran in check_batch before.
    try:
        validate_mode(draft.mode, subject="fact mode")
    except RecordInputError as error:
        raise BatchShapeError(str(error)) from None
    if draft.append_local_id is not None:
        if draft.append_local_id in local_ids:
            raise BatchShapeError(f"duplicate append-local id: {draft.append_local_id}")
        local_ids.add(draft.append_local_id)
    try:
        validate_schema_ref(draft.schema_ref)
    except RecordInputError as error:
        raise BatchShapeError(str(error)) from None
    payload = draft.payload
    if not isinstance(payload, Mapping):
        raise BatchShapeError(
            f"fact payload must be a JSON object, got {type(payload).__name__}"
        )
    # One strict encoding serves the stored JSON, the batch digest and the
    # record id: both flavours differ only in how text outside printable
    # ASCII is written (the storage flavour escapes non-ASCII and DEL,
    # U+007F), and a parsed-back payload encodes to the same text (floats
    # and ints print as they parse, keys stay sorted), so the round trip of
    # quirk 18.1 changes no byte of either.
    value = payload if type(payload) is dict else dict(payload)
    digest_json = canonical_json_text(value, root="payload")
    if digest_json.isascii() and (legacy_del or "\x7f" not in digest_json):
        payload_json = digest_json
    else:
        payload_json = storage_json(value, root="payload")
    check_payload_size(path, len(payload_json), limits)
    return NormalizedDraft(draft, payload_json, digest_json)


def legacy_digest(prepared: Prepared) -> str | None:
    """Return the batch digest versions before schema v2 stored, if it differs.

    They kept a raw DEL (U+007F) in the storage JSON of an otherwise ASCII
    payload; other implementations escape it (and so do we now). Replaying
    such an intent must still find its stored receipt. ``None``: no DEL.
    """
    if not any(
        "\x7f" in item.digest_json for group in prepared.groups for item in group.drafts
    ):
        return None
    groups = validate_batch(prepared.batch, legacy_del=True)
    return batch_digest(prepared.context, prepared.batch, groups)


# ------------------------------------------------------------------ digests


def batch_digest(
    context: OperationContext,
    batch: AppendBatch,
    groups: tuple[tuple[NormalizedDraft, ...], ...],
) -> str:
    """Return the batch digest idempotency compares (kernel-spec 5.2): bare hex.

    The batch is encoded once with every payload left out (``null``), and the
    payloads' storage JSON, already computed, is spliced in at their keys.
    """
    try:
        text = _batch_text(context, batch, groups)
    except TypeError:  # a field of another type (unchecked input): the strict path
        text = None
    if text is not None:
        return sha256_hex(text)
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


def _batch_text(
    context: OperationContext,
    batch: AppendBatch,
    groups: tuple[tuple[NormalizedDraft, ...], ...],
) -> str | None:
    """Write the batch digest input's storage JSON directly (keys in sorted order).

    Every field was checked to be valid text by ``check_batch`` and every
    payload encoded strictly, so only quoting and the layout remain: the text
    equals ``storage_json`` of :func:`_batch_digest_input` with the payloads
    (a property test pins it). ``None`` or ``TypeError``: a field this
    shortcut does not take (not text, not a tuple of text, a surrogate
    escape): encode it the general way.
    """
    actor, environment = context.actor_ref, context.schema_environment_ref
    if type(actor) is not str or type(environment) is not str:
        return None
    quote = _quote_ascii
    parts = [
        '{"actor_ref":',
        quote(actor),
        ',"append_intent_id":',
        quote(batch.append_intent_id),
        ',"atomicity":',
        quote(batch.atomicity),
        ',"groups":[',
    ]
    for index, (group, drafts) in enumerate(zip(batch.groups, groups, strict=True)):
        if index:
            parts.append(",")
        parts.append('{"causal_parents":')
        parts.append(_text_list(group.causal_parents))
        parts.append(',"fact_drafts":[')
        for position, item in enumerate(drafts):
            draft = item.draft
            local = draft.append_local_id
            parts.extend(
                (
                    ',{"append_local_id":' if position else '{"append_local_id":',
                    "null" if local is None else quote(local),
                    ',"caused_by_fact_ids":',
                    _text_list(draft.caused_by_fact_ids),
                    ',"caused_by_local_refs":',
                    _text_list(draft.caused_by_local_refs),
                    ',"kind_label":',
                    quote(draft.kind_label),
                    ',"mode":',
                    quote(draft.mode),
                    ',"payload":',
                    item.payload_json,
                    ',"schema_ref":',
                    quote(draft.schema_ref),
                    "}",
                )
            )
        parts.append('],"retained_context":')
        parts.append(_context_draft_json(group.retained_context))
        parts.append(',"trace_owner_id":')
        parts.append(quote(group.trace_owner_id))
        parts.append("}")
    parts.append('],"schema_version_set":')
    parts.append(quote(environment))
    parts.append("}")
    text = "".join(parts)
    if "\\ud" in text:
        return None  # an escape that may hide a lone surrogate: the strict path
    return text


def _text_list(values: tuple[str, ...] | list[str]) -> str:
    if type(values) is not tuple and type(values) is not list:
        raise TypeError("not a tuple of text")
    if not values:
        return "[]"
    return "[" + ",".join(map(_quote_ascii, values)) + "]"


def _context_draft_json(
    value: RetainedContextDraft | RetainedContext | str | None,
) -> str:
    try:
        return _cached_context_draft_json(value)
    except TypeError:  # an unhashable field: encode without the memo
        return _cached_context_draft_json.__wrapped__(value)


@lru_cache(maxsize=1024)
def _cached_context_draft_json(
    value: RetainedContextDraft | RetainedContext | str | None,
) -> str:
    return storage_json(_raw_context_draft(value), root="batch")


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
        value = _DEFAULT_DRAFT
    return {
        "active_binding_refs": list(value.active_binding_refs),
        "capability_witness_refs": list(value.capability_witness_refs),
        "semantic_environment_refs": list(value.semantic_environment_refs),
        "visibility_policy_refs": list(value.visibility_policy_refs),
        "substrate_ref": value.substrate_ref,
        "containment": value.containment,
        "reuse_context_id": value.reuse_context_id,
    }


_DEFAULT_DRAFT = RetainedContextDraft()


# ------------------------------------------------------------------ contexts


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
    draft = _DEFAULT_DRAFT if value is None else value
    if draft.reuse_context_id is not None:
        return ContextRequest(index, reuse_id=draft.reuse_context_id)
    try:
        template, encoded = _context_template(draft, context.schema_environment_ref)
    except TypeError:  # an unhashable field: encode without the memo
        template, encoded = _context_template.__wrapped__(
            draft, context.schema_environment_ref
        )
    digest = sha256_hex(f"{batch.append_intent_id}\0{index}\0{encoded}")
    return ContextRequest(
        index, new=_context_with_id(template, "context:" + digest[:32])
    )


def _context_with_id(template: RetainedContext, context_id: str) -> RetainedContext:
    return RetainedContext(
        context_id,
        template.active_binding_refs,
        template.capability_witness_refs,
        template.semantic_environment_refs,
        template.visibility_policy_refs,
        template.substrate_ref,
        template.containment,
    )


@lru_cache(maxsize=1024)
def _context_template(
    draft: RetainedContextDraft, environment_ref: str
) -> tuple[RetainedContext, str]:
    # Pure in the (frozen, hashable) draft and the environment: most appends
    # repeat one draft, so its storage encoding is computed once.
    environment = tuple(
        dict.fromkeys((*draft.semantic_environment_refs, environment_ref))
    )
    payload = {
        "active_binding_refs": list(draft.active_binding_refs),
        "capability_witness_refs": list(draft.capability_witness_refs),
        "semantic_environment_refs": list(environment),
        "visibility_policy_refs": list(draft.visibility_policy_refs),
        "substrate_ref": draft.substrate_ref,
        "containment": draft.containment,
    }
    template = RetainedContext(
        context_id="",
        active_binding_refs=tuple(draft.active_binding_refs),
        capability_witness_refs=tuple(draft.capability_witness_refs),
        semantic_environment_refs=environment,
        visibility_policy_refs=tuple(draft.visibility_policy_refs),
        substrate_ref=draft.substrate_ref,
        containment=draft.containment,
    )
    return template, storage_json(payload, root="retained_context")


def explicit_parents(batch: AppendBatch) -> tuple[str, ...]:
    """Return every parent id a batch names directly (group and draft parents)."""
    ids: dict[str, None] = {}
    for group in batch.groups:
        ids.update(dict.fromkeys(group.causal_parents))
        for draft in group.fact_drafts:
            ids.update(dict.fromkeys(draft.caused_by_fact_ids))
    return tuple(ids)


# ------------------------------------------------------------------ ids


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
