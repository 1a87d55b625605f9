"""Materialization values: request, substrate result, receipt (kernel-spec 13.1).

Materialization applies recorded declarations to the world through a substrate
and records what happened as captures. The values here are pure: the request
and its digest (the idempotency key's content, pinned by
``materialize_vectors_v0.json``), the substrate's result, the receipt and its
stored JSON form, and the outcome honesty rules a result must obey.

Nothing here performs I/O; the orchestrator lives in the application layer.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

from goatherd.domain.canonical import canonical_json_ascii_bytes, storage_digest
from goatherd.domain.contexts import OperationContext
from goatherd.domain.errors import DomainError
from goatherd.domain.records import RecordDraft

__all__ = [
    "MAX_OWNER_ORDINAL",
    "MaterializationDelivery",
    "MaterializationOutcome",
    "MaterializationReceipt",
    "MaterializationRequest",
    "MaterializationRequestError",
    "MaterializationResult",
    "WorldSideAnchor",
    "materialization_request_digest",
]

MAX_OWNER_ORDINAL: Final = 2**63 - 1
"""A through ordinal meaning "everything on the path" (0 is a real cutoff)."""

WorldSideAnchor = Mapping[str, object]
"""Where a materialization touched the world, e.g. ``{"kind": "kv_key", ...}``."""


class MaterializationOutcome(StrEnum):
    """How a materialization ended.

    ``clean_failure`` may be claimed only when nothing was attempted; a failure
    after the world may have changed is ``split_state``.
    """

    SUCCESS = "success"
    CLEAN_FAILURE = "clean_failure"
    SPLIT_STATE = "split_state"


class MaterializationDelivery(StrEnum):
    """How often an interrupted materialization may apply its effect.

    The ledger makes a *completed* intent never run again, whatever the
    delivery. The delivery says what happens to an effect interrupted between
    its start and the ledger row (ADR 0074):

    * ``at_least_once``: a retry dispatches the substrate again, so the effect
      may apply twice (a substrate must be idempotent for that to be harmless);
    * ``at_most_once``: a started marker is written to the ledger before the
      dispatch; a retry that finds it refuses with an in-doubt error and never
      dispatches until the caller resolves the intent explicitly;
    * ``exactly_once``: the substrate receives the intent's idempotency key
      and checks and applies it atomically in the effect's own medium, so a
      re-dispatch applies nothing twice.
    """

    AT_LEAST_ONCE = "at_least_once"
    AT_MOST_ONCE = "at_most_once"
    EXACTLY_ONCE = "exactly_once"


class MaterializationRequestError(DomainError, ValueError):
    """Raised when a materialization request is malformed (reference messages)."""


@dataclass(frozen=True, slots=True)
class MaterializationRequest:
    """What to materialize: declarations named by owner path and ordinal.

    Targets are owner-path explicit: the same content under two owners is the
    same record id, so a bare id is not enough.

    Attributes:
        append_intent_id: the idempotency key, shared with the capture append.
        target_trace_owner_id: the path the declarations are read from.
        target_record_ids: the declarations, in the order to apply them.
        target_through_owner_ordinal: read the path through this ordinal.
        capture_trace_owner_id: where captures land (``None`` = the target owner).
    """

    append_intent_id: str
    target_trace_owner_id: str
    target_record_ids: tuple[str, ...]
    target_through_owner_ordinal: int = MAX_OWNER_ORDINAL
    capture_trace_owner_id: str | None = None

    @property
    def capture_owner(self) -> str:
        """Return the owner path the captures land on."""
        if self.capture_trace_owner_id is None:
            return self.target_trace_owner_id
        return self.capture_trace_owner_id

    def validate(self) -> None:
        """Raise :class:`MaterializationRequestError` if the request is malformed."""
        if not self.append_intent_id:
            raise MaterializationRequestError("append_intent_id is required")
        if not self.target_trace_owner_id:
            raise MaterializationRequestError("target_trace_owner_id is required")
        if not self.target_record_ids:
            raise MaterializationRequestError(
                "materialize requires at least one target record id"
            )
        if self.capture_trace_owner_id == "":
            raise MaterializationRequestError("capture_trace_owner_id cannot be empty")
        if self.target_through_owner_ordinal < 0:
            raise MaterializationRequestError(
                "target_through_owner_ordinal must be >= 0"
            )


def materialization_request_digest(
    request: MaterializationRequest, context: OperationContext
) -> str:
    """Return the request digest: bare SHA-256 of the storage JSON of nine keys.

    The substrate and the visibility are deliberately not part of it. An empty
    trust mode counts as unset (``null``), as in the reference.
    """
    return storage_digest(
        {
            "append_intent_id": request.append_intent_id,
            "target_trace_owner_id": request.target_trace_owner_id,
            "target_record_ids": list(request.target_record_ids),
            "target_through_owner_ordinal": request.target_through_owner_ordinal,
            "capture_trace_owner_id": request.capture_trace_owner_id,
            "actor_ref": context.actor_ref,
            "authority_refs": list(context.presented_authority_refs),
            "schema_environment_ref": context.schema_environment_ref,
            "trust_mode": context.trust_mode or None,
        },
        root="request",
    )


@dataclass(frozen=True, slots=True)
class MaterializationResult:
    """What a substrate reports: an outcome, capture drafts and world anchors.

    Substrates never append; the orchestrator appends the drafts.
    """

    outcome: MaterializationOutcome
    capture_drafts: tuple[RecordDraft, ...] = ()
    failure_reason: str = ""
    world_side_anchors: tuple[WorldSideAnchor, ...] = ()


@dataclass(frozen=True, slots=True)
class MaterializationReceipt:
    """The durable result of one materialization intent (lists never null)."""

    outcome: MaterializationOutcome
    substrate_ref: str
    target_record_ids: tuple[str, ...]
    produced_record_ids: tuple[str, ...] = ()
    failure_reason: str = ""
    world_side_anchors: tuple[WorldSideAnchor, ...] = ()

    def to_dict(self) -> dict[str, object]:
        """Return the receipt as the six-key JSON object of the ledger."""
        return {
            "outcome": self.outcome.value,
            "substrate_ref": self.substrate_ref,
            "target_record_ids": list(self.target_record_ids),
            "produced_record_ids": list(self.produced_record_ids),
            "failure_reason": self.failure_reason,
            "world_side_anchors": [dict(a) for a in self.world_side_anchors],
        }

    def to_json(self) -> str:
        """Return the storage-flavour (ASCII) JSON stored in the ledger."""
        return canonical_json_ascii_bytes(self.to_dict(), root="receipt").decode(
            "ascii"
        )

    @classmethod
    def from_json(cls, text: str) -> MaterializationReceipt:
        """Decode a ledger receipt, keeping int and float numbers apart.

        Raises:
            MaterializationRequestError: the text is not a receipt object.
        """
        data = json.loads(text)
        if not isinstance(data, dict):
            raise MaterializationRequestError("stored receipt is not a JSON object")
        return cls.from_dict(data)

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> MaterializationReceipt:
        """Build a receipt from its six-key JSON object (a vector or the ledger)."""
        anchors = data.get("world_side_anchors") or []
        if not isinstance(anchors, list) or not all(
            isinstance(a, dict) for a in anchors
        ):
            raise MaterializationRequestError("world_side_anchors must be objects")
        return cls(
            outcome=MaterializationOutcome(str(data["outcome"])),
            substrate_ref=str(data["substrate_ref"]),
            target_record_ids=_string_tuple(data.get("target_record_ids")),
            produced_record_ids=_string_tuple(data.get("produced_record_ids")),
            failure_reason=str(data.get("failure_reason") or ""),
            world_side_anchors=tuple(anchors),
        )


def _string_tuple(value: object) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise MaterializationRequestError(f"expected a list of ids, got {value!r}")
    return tuple(str(item) for item in value)
