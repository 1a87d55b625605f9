"""The materialize orchestrator: apply recorded declarations, record captures.

``materialize`` reads declarations from an explicit owner path, selects the
substrate named by their witnesses (never guessed from schemas), lets it act on
the world, appends its capture drafts under the request's own intent id with a
witness stamped by the substrate, and finally writes the completed-intent
ledger row, which is the idempotency commit point (kernel-spec 13.2,
runtime-spec 14.2):

* a same-intent retry with the same request digest returns the stored receipt
  without calling the substrate; another digest is an
  :class:`~goatherd.domain.AppendIntentConflictError`, before any dispatch;
* captures land before the ledger row; a crash between the two re-dispatches
  the substrate on retry (at-least-once). A deterministic substrate then gets
  the store's stored capture receipt back; a non-deterministic one fails
  loudly as an append-intent conflict instead of writing twice;
* a ``clean_failure`` that carries capture drafts contradicts itself and is
  refused before any append (a deliberate divergence from the Python
  reference, following the Go runtime); with no ledger row it stays retryable.

Expected refusals are returned as ``Failure`` values; anything else a
substrate raises propagates with nothing recorded.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol, TypeAlias

from returns.result import Failure, Result, Success

from goatherd.application.substrates import (
    Substrate,
    SubstrateError,
    SubstrateRegistry,
)
from goatherd.domain import (
    CAPTURE,
    DECLARATION,
    AppendBatch,
    AppendGroup,
    AppendIntentConflictError,
    AppendReceipt,
    MaterializationOutcome,
    MaterializationReceipt,
    MaterializationRequest,
    MaterializationRequestError,
    MaterializationResult,
    OperationContext,
    OperationKind,
    ReadContext,
    Record,
    RetainedContextDraft,
    TraceSlice,
    TraceStoreError,
    VisibleRecord,
    materialization_request_digest,
)

__all__ = [
    "MATERIALIZE_READ_CONTEXT",
    "MaterializationRefusedError",
    "MaterializationStore",
    "MaterializeFailure",
    "materialize",
]

MATERIALIZE_READ_CONTEXT = ReadContext(actor_ref="vnext:materialize")
"""The plain payload read the orchestrator uses for targets and witnesses."""


class MaterializationRefusedError(TraceStoreError):
    """Raised (as a failure value) when a materialization breaks a kernel law.

    Examples: a wrong or untrusted context, a target absent from its owner path
    or not a declaration, targets naming several substrates, a schema the
    substrate does not accept, a result with an unknown outcome, a non-capture
    or undeclared capture draft, a ``clean_failure`` carrying captures.
    Nothing was appended and no ledger row was written.
    """


MaterializeFailure: TypeAlias = (
    MaterializationRequestError | TraceStoreError | SubstrateError
)
"""Why a materialization was refused (conflicts included); nothing changed."""


class MaterializationStore(Protocol):
    """The part of the trace store the orchestrator uses."""

    def append(
        self,
        context: OperationContext,
        batch: AppendBatch,
        *,
        expected_heads: Mapping[str, int] | None = None,
    ) -> AppendReceipt:
        """Append a batch (idempotent by intent)."""
        ...

    def read_fact(
        self,
        context: ReadContext | OperationContext,
        record_id: str,
        visibility: str | None = None,
    ) -> VisibleRecord:
        """Read one record by id."""
        ...

    def read_owner_prefix(
        self,
        context: ReadContext | OperationContext,
        owner: str,
        through: int,
        mode_filter: str = "both",
    ) -> TraceSlice:
        """Read an owner path through an ordinal."""
        ...

    def read_completed_materialization(self, intent: str) -> tuple[str, str] | None:
        """Return ``(request_digest, receipt_json)`` of a completed intent."""
        ...

    def record_completed_materialization(
        self, intent: str, request_digest: str, receipt_json: str
    ) -> None:
        """Write the ledger row (same digest again is fine)."""
        ...


def materialize(
    store: MaterializationStore,
    operation_context: OperationContext,
    request: MaterializationRequest,
    registry: SubstrateRegistry,
) -> Result[MaterializationReceipt, MaterializeFailure]:
    """Materialize ``request``'s declarations through their substrate.

    Idempotent per intent once completed (the stored receipt is returned
    without a dispatch); at-least-once dispatch before that.

    Returns:
        ``Success(receipt)`` whatever the outcome (``success``,
        ``clean_failure`` or ``split_state``), or ``Failure(error)`` when the
        request was refused; a failure appended nothing and wrote no ledger row.
    """
    try:
        return Success(_materialize(store, operation_context, request, registry))
    except (MaterializationRequestError, TraceStoreError, SubstrateError) as error:
        return Failure(error)


def _materialize(
    store: MaterializationStore,
    context: OperationContext,
    request: MaterializationRequest,
    registry: SubstrateRegistry,
) -> MaterializationReceipt:
    _authorize(context)
    request.validate()
    digest = materialization_request_digest(request, context)
    stored = _stored_receipt(store, request.append_intent_id, digest)
    if stored is not None:
        return stored
    targets = _read_targets(store, request)
    substrate = registry.get(_substrate_ref(store, targets))
    _check_accepted(substrate, targets)
    result = _checked(substrate, substrate.materialize(targets))
    produced = _append_captures(store, context, request, substrate, result)
    receipt = MaterializationReceipt(
        outcome=result.outcome,
        substrate_ref=substrate.substrate_ref,
        target_record_ids=request.target_record_ids,
        produced_record_ids=produced,
        failure_reason=result.failure_reason,
        world_side_anchors=tuple(dict(a) for a in result.world_side_anchors),
    )
    store.record_completed_materialization(
        request.append_intent_id, digest, receipt.to_json()
    )
    return receipt


def _authorize(context: OperationContext) -> None:
    if context.operation != OperationKind.MATERIALIZE:
        raise MaterializationRefusedError(
            "materialize operation requires OperationContext with "
            "Operation = materialize"
        )
    if not context.write_trusted:
        raise MaterializationRefusedError(
            "materialize requires trusted internal witness"
        )


def _stored_receipt(
    store: MaterializationStore, intent: str, digest: str
) -> MaterializationReceipt | None:
    row = store.read_completed_materialization(intent)
    if row is None:
        return None
    stored_digest, receipt_json = row
    if stored_digest != digest:
        raise AppendIntentConflictError(
            f"materialize intent '{intent}' was already committed "
            "with different content"
        )
    return MaterializationReceipt.from_json(receipt_json)


def _read_targets(
    store: MaterializationStore, request: MaterializationRequest
) -> tuple[Record, ...]:
    owner = request.target_trace_owner_id
    slice_ = store.read_owner_prefix(
        MATERIALIZE_READ_CONTEXT, owner, request.target_through_owner_ordinal
    )
    on_path = set(slice_.owner_paths.get(owner, ()))
    targets = []
    for record_id in request.target_record_ids:
        record = slice_.facts_by_id.get(record_id)
        if record_id not in on_path or not isinstance(record, Record):
            raise MaterializationRefusedError(
                f"materialize target '{record_id}' is not present on owner path "
                f"'{owner}'"
            )
        if record.envelope.mode != DECLARATION:
            raise MaterializationRefusedError(
                "materialize targets must be declaration records"
            )
        targets.append(record)
    return tuple(targets)


def _substrate_ref(store: MaterializationStore, targets: Sequence[Record]) -> str:
    refs: list[str] = []
    for target in targets:
        ref = _witness_substrate_ref(store, target)
        if ref not in refs:
            refs.append(ref)
    if len(refs) != 1:
        raise MaterializationRefusedError(
            "materialize batch must target exactly one substrate"
        )
    return refs[0]


def _witness_substrate_ref(store: MaterializationStore, target: Record) -> str:
    witness = store.read_fact(MATERIALIZE_READ_CONTEXT, target.envelope.witness_ref)
    ref = witness.payload.get("substrate_ref") if isinstance(witness, Record) else None
    if not isinstance(ref, str) or not ref:
        raise MaterializationRefusedError(
            f"materialize target '{target.record_id}' has no witness substrate_ref"
        )
    return ref


def _check_accepted(substrate: Substrate, targets: Sequence[Record]) -> None:
    refused = sorted(
        {t.envelope.schema_ref for t in targets} - substrate.declaration_schemas
    )
    if refused:
        raise MaterializationRefusedError(
            f"substrate '{substrate.substrate_ref}' does not accept schemas: "
            + ", ".join(refused)
        )


def _checked(
    substrate: Substrate, result: MaterializationResult
) -> MaterializationResult:
    if result.outcome not in tuple(MaterializationOutcome):
        raise MaterializationRefusedError(
            f"unknown materialization outcome: {result.outcome!r}"
        )
    for draft in result.capture_drafts:
        if draft.mode != CAPTURE:
            raise MaterializationRefusedError(
                "materialize substrates may only emit capture drafts"
            )
        if draft.schema_ref not in substrate.capture_schemas:
            raise MaterializationRefusedError(
                f"substrate '{substrate.substrate_ref}' emitted unsupported "
                f"capture schema: {draft.schema_ref}"
            )
    if result.outcome == MaterializationOutcome.CLEAN_FAILURE and (
        result.capture_drafts
    ):
        raise MaterializationRefusedError(
            f"substrate '{substrate.substrate_ref}' claimed clean_failure but "
            "emitted capture drafts: a clean failure touched nothing"
        )
    return MaterializationResult(
        MaterializationOutcome(result.outcome),
        result.capture_drafts,
        result.failure_reason,
        result.world_side_anchors,
    )


def _append_captures(
    store: MaterializationStore,
    context: OperationContext,
    request: MaterializationRequest,
    substrate: Substrate,
    result: MaterializationResult,
) -> tuple[str, ...]:
    if not result.capture_drafts:
        return ()
    group = AppendGroup(
        trace_owner_id=request.capture_owner,
        retained_context=RetainedContextDraft(
            capability_witness_refs=context.presented_authority_refs,
            semantic_environment_refs=(context.schema_environment_ref,),
            substrate_ref=substrate.substrate_ref,
            containment=substrate.containment,
        ),
        fact_drafts=result.capture_drafts,
    )
    batch = AppendBatch(request.append_intent_id, (group,))
    append_context = OperationContext(
        actor_ref=context.actor_ref,
        operation=OperationKind.APPEND,
        presented_authority_refs=context.presented_authority_refs,
        schema_environment_ref=context.schema_environment_ref,
        visibility_profile=context.visibility_profile,
        trust_mode=context.trust_mode,
    )
    return store.append(append_context, batch).fact_ids
