"""The materialize orchestrator: apply recorded declarations, record captures.

``materialize`` reads declarations from an explicit owner path, selects the
substrate named by their witnesses (never guessed from schemas), lets it act on
the world, appends its capture drafts under the request's own intent id with a
witness stamped by the substrate, and finally writes the completed-intent
ledger row, which is the idempotency commit point.

The delivery guarantee (ADR 0074, docs/materialize.md):

* **idempotent at the ledger**: once the ledger row is written, a same-intent
  retry with the same request digest returns the stored receipt without
  calling the substrate, in any process, after any crash; another digest is an
  :class:`~goatherd.domain.AppendIntentConflictError`, before any dispatch;
* **an interrupted effect** (a crash after the substrate started and before
  the ledger row) is delivered as the substrate's delivery says
  (:func:`~goatherd.application.substrates.delivery_of`):

  - ``at_least_once`` (the default): the retry dispatches the substrate again,
    so the effect may apply more than once. A deterministic substrate then gets
    the store's stored capture receipt back; a non-deterministic one fails
    loudly as an append-intent conflict instead of writing twice;
  - ``at_most_once``: a started marker is written to the ledger before the
    dispatch. A retry that finds it never dispatches: it is a
    :class:`MaterializationInDoubtError` until the caller resolves the intent
    with :func:`resolve_in_doubt` (run it again, or abandon it as a
    ``split_state``);
  - ``exactly_once``: the substrate's ``materialize_once`` receives the
    intent's idempotency key (the request digest) and applies it at most once
    in its own medium, so the retry applies nothing twice and gets the same
    captures back;

* a ``clean_failure`` that carries capture drafts contradicts itself and is
  refused before any append (a deliberate divergence from the Python
  reference, following the Go runtime); with no ledger row it stays retryable.

Expected refusals are returned as ``Failure`` values; anything else a
substrate raises propagates with nothing recorded (an at-most-once marker is
withdrawn: a substrate that raises touched nothing).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import Protocol, TypeAlias, runtime_checkable

from returns.result import Failure, Result, Success

from goatherd.application.substrates import (
    ExactlyOnceSubstrate,
    Substrate,
    SubstrateError,
    SubstrateRegistry,
    delivery_of,
)
from goatherd.domain import (
    CAPTURE,
    DECLARATION,
    MAX_OWNER_ORDINAL,
    AppendBatch,
    AppendGroup,
    AppendIntentConflictError,
    AppendReceipt,
    MaterializationDelivery,
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
    canonical_json_ascii_bytes,
    materialization_request_digest,
)

__all__ = [
    "InDoubtResolution",
    "MATERIALIZE_READ_CONTEXT",
    "MaterializationInDoubtError",
    "MaterializationRefusedError",
    "MaterializationStore",
    "MaterializeFailure",
    "materialize",
    "resolve_in_doubt",
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


class MaterializationInDoubtError(TraceStoreError):
    """Raised (as a failure value) for an at-most-once intent that may have run.

    Its started marker is in the ledger without a completed receipt: a run
    started and was interrupted (a crash, a kill) or is still running in
    another process. The substrate is not dispatched again until the caller
    resolves the intent with :func:`resolve_in_doubt`.

    Attributes:
        intent: the request's ``append_intent_id``.
    """

    def __init__(self, intent: str) -> None:
        """Name the in-doubt ``intent``."""
        super().__init__(
            f"materialize intent '{intent}' is in doubt: an at-most-once run "
            "started and did not complete; resolve it (retry or abandon) "
            "before materializing it again"
        )
        self.intent = intent


class InDoubtResolution(StrEnum):
    """How the caller resolves an in-doubt at-most-once intent.

    ``retry``: the caller has checked that the effect did not happen (or
    accepts that it runs again): the marker is withdrawn and the next
    ``materialize`` dispatches the substrate. ``abandon``: the intent is
    completed without running again, as a ``split_state`` receipt saying so.
    """

    RETRY = "retry"
    ABANDON = "abandon"


MaterializeFailure: TypeAlias = (
    MaterializationRequestError | TraceStoreError | SubstrateError
)
"""Why a materialization was refused (conflicts included); nothing changed."""


@runtime_checkable
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
        through: int = MAX_OWNER_ORDINAL,
        mode_filter: str = "both",
    ) -> TraceSlice:
        """Read an owner path through an ordinal."""
        ...

    def read_completed_materialization(self, intent: str) -> tuple[str, str] | None:
        """Return ``(request_digest, receipt_json)`` of the intent's ledger row.

        The receipt is a completed one, or an at-most-once started marker.
        """
        ...

    def record_completed_materialization(
        self, intent: str, request_digest: str, receipt_json: str
    ) -> None:
        """Write the ledger row (same digest again is fine)."""
        ...

    def replace_materialization(
        self,
        intent: str,
        request_digest: str,
        expected_receipt_json: str,
        receipt_json: str | None,
    ) -> bool:
        """Swap (or delete) a ledger row still holding the expected receipt."""
        ...

    def read_append_intent(self, intent_id: str) -> AppendReceipt | None:
        """Return the stored receipt of a committed append intent, or ``None``."""
        ...


def materialize(
    store: MaterializationStore,
    operation_context: OperationContext,
    request: MaterializationRequest,
    registry: SubstrateRegistry,
) -> Result[MaterializationReceipt, MaterializeFailure]:
    """Materialize ``request``'s declarations through their substrate.

    Idempotent per intent once completed (the stored receipt is returned
    without a dispatch). An interrupted run is delivered again at least once,
    at most once (then in doubt) or exactly once, as the substrate's delivery
    says (see the module docstring).

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
    delivery = delivery_of(substrate, targets)
    marker: str | None = None
    if delivery is MaterializationDelivery.AT_MOST_ONCE:
        started = _mark_started(store, context, request, digest, substrate)
        if isinstance(started, MaterializationReceipt):
            return started
        marker = started
    try:
        raw = _dispatch(substrate, delivery, targets, digest)
    except Exception:
        if marker is not None:
            # A substrate that raises touched nothing: nothing is in doubt.
            store.replace_materialization(
                request.append_intent_id, digest, marker, None
            )
        raise
    result = _checked(substrate, raw)
    produced = _append_captures(store, context, request, substrate, result)
    receipt = MaterializationReceipt(
        outcome=result.outcome,
        substrate_ref=substrate.substrate_ref,
        target_record_ids=request.target_record_ids,
        produced_record_ids=produced,
        failure_reason=result.failure_reason,
        world_side_anchors=tuple(dict(a) for a in result.world_side_anchors),
    )
    return _complete(store, request.append_intent_id, digest, marker, receipt)


def _dispatch(
    substrate: Substrate,
    delivery: MaterializationDelivery,
    targets: Sequence[Record],
    digest: str,
) -> MaterializationResult:
    if delivery is MaterializationDelivery.EXACTLY_ONCE:
        assert isinstance(substrate, ExactlyOnceSubstrate)  # delivery_of checked
        return substrate.materialize_once(targets, digest)
    return substrate.materialize(targets)


def _complete(
    store: MaterializationStore,
    intent: str,
    digest: str,
    marker: str | None,
    receipt: MaterializationReceipt,
) -> MaterializationReceipt:
    if marker is not None and store.replace_materialization(
        intent, digest, marker, receipt.to_json()
    ):
        return receipt
    # No marker, or it was resolved while this run went on: insert if absent
    # and return what the ledger holds.
    store.record_completed_materialization(intent, digest, receipt.to_json())
    stored = _stored_receipt(store, intent, digest)
    return receipt if stored is None else stored


_STARTED: str = "started"


def _mark_started(
    store: MaterializationStore,
    context: OperationContext,
    request: MaterializationRequest,
    digest: str,
    substrate: Substrate,
) -> str | MaterializationReceipt:
    """Write this run's started marker; return it, or the receipt already stored.

    The marker carries a fresh attempt id, so that of two racing runs only the
    one whose marker the ledger kept goes on (the other gets in doubt).
    """
    marker = canonical_json_ascii_bytes(
        {
            "state": _STARTED,
            "attempt": uuid.uuid4().hex,
            "started_by": context.actor_ref,
            "substrate_ref": substrate.substrate_ref,
            "target_record_ids": list(request.target_record_ids),
            "produced_record_ids": [],
        },
        root="receipt",
    ).decode("ascii")
    intent = request.append_intent_id
    store.record_completed_materialization(intent, digest, marker)
    row = store.read_completed_materialization(intent)
    if row is not None and row[1] == marker:
        return marker
    stored = _stored_receipt(store, intent, digest)
    if stored is None:  # withdrawn at once by a concurrent retry resolution
        raise MaterializationInDoubtError(intent)
    return stored


def _started_marker(receipt_json: str) -> Mapping[str, object] | None:
    try:
        data = json.loads(receipt_json)
    except ValueError:
        return None
    if isinstance(data, dict) and data.get("state") == _STARTED:
        return data
    return None


def resolve_in_doubt(
    store: MaterializationStore,
    operation_context: OperationContext,
    request: MaterializationRequest,
    resolution: InDoubtResolution | str,
) -> Result[MaterializationReceipt | None, MaterializeFailure]:
    """Resolve an in-doubt at-most-once intent explicitly (ADR 0074).

    ``request`` must be the same request (same digest) whose run is in
    doubt. ``retry`` withdraws the started marker and returns
    ``Success(None)``: the next :func:`materialize` dispatches again.
    ``abandon`` completes the intent without running it as a ``split_state``
    receipt naming the resolving actor, and returns ``Success(receipt)``.

    Returns:
        ``Failure(MaterializationRefusedError)`` if the intent is not in
        doubt (never started, or completed) or the resolution is unknown;
        ``Failure(AppendIntentConflictError)`` for another request digest.
    """
    try:
        return Success(_resolve(store, operation_context, request, resolution))
    except (MaterializationRequestError, TraceStoreError, SubstrateError) as error:
        return Failure(error)


def _resolve(
    store: MaterializationStore,
    context: OperationContext,
    request: MaterializationRequest,
    resolution: InDoubtResolution | str,
) -> MaterializationReceipt | None:
    _authorize(context)
    request.validate()
    known = {r.value for r in InDoubtResolution}
    if resolution not in known:
        raise MaterializationRefusedError(
            f"unknown in-doubt resolution {resolution!r} (known: "
            + ", ".join(sorted(known))
            + ")"
        )
    intent = request.append_intent_id
    digest = materialization_request_digest(request, context)
    row = store.read_completed_materialization(intent)
    marker = None if row is None else _started_marker(row[1])
    if row is None or marker is None:
        raise MaterializationRefusedError(
            f"materialize intent '{intent}' is not in doubt"
        )
    if row[0] != digest:
        raise AppendIntentConflictError(
            f"materialize intent '{intent}' was started with different content"
        )
    appended = store.read_append_intent(intent)
    produced = () if appended is None else appended.fact_ids
    if resolution == InDoubtResolution.RETRY:
        if appended is not None:
            raise MaterializationRefusedError(
                f"materialize intent '{intent}' cannot be retried: its captures "
                "were recorded, so its effect ran; abandon it instead"
            )
        if not store.replace_materialization(intent, digest, row[1], None):
            raise MaterializationRefusedError(
                f"materialize intent '{intent}' changed while being resolved"
            )
        return None
    receipt = MaterializationReceipt(
        outcome=MaterializationOutcome.SPLIT_STATE,
        substrate_ref=str(marker.get("substrate_ref", "")),
        target_record_ids=request.target_record_ids,
        produced_record_ids=produced,
        failure_reason=(
            "in doubt: an at-most-once run started and did not complete"
            + ("" if appended is None else " (its captures were recorded)")
            + f"; abandoned by {context.actor_ref}"
        ),
    )
    if not store.replace_materialization(intent, digest, row[1], receipt.to_json()):
        raise MaterializationRefusedError(
            f"materialize intent '{intent}' changed while being resolved"
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
    if stored_digest == digest and _started_marker(receipt_json) is not None:
        raise MaterializationInDoubtError(intent)
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
