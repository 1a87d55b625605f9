"""The substrate contract, the fail-closed registry and the echo substrate.

A substrate applies recorded declarations to some world (a key-value store, a
sandboxed workspace) and reports what happened as capture drafts; it never
appends. The orchestrator (:mod:`goatherd.application.materialize`) selects
the substrate by the declarations' witnesses and appends the captures.

The registry is process-local and fails closed: an unknown ref is an error,
never a guess. :class:`EchoSubstrate` is the deterministic test substrate.

Delivery (ADR 0074). A plain substrate is delivered at least once: the
ledger never re-runs a *completed* intent, but an effect interrupted before
its ledger row is dispatched again on retry. A substrate may say otherwise
per batch with ``delivery_for`` (:class:`DeliveryAwareSubstrate`):
``at_most_once`` makes the orchestrator write a started marker first and
refuse to re-dispatch after a crash (the intent is then in doubt until the
caller resolves it); ``exactly_once`` requires ``materialize_once``
(:class:`ExactlyOnceSubstrate`), which receives the intent's idempotency key
and must check and apply it in one atomic step of its own medium.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from typing import Protocol, runtime_checkable

from goatherd.domain import (
    CAPTURE,
    DEFAULT_CONTAINMENT,
    GoatherdError,
    MaterializationDelivery,
    MaterializationOutcome,
    MaterializationResult,
    Record,
    RecordDraft,
)
from goatherd.domain.arguments import string_tuple

__all__ = [
    "DeliveryAwareSubstrate",
    "EchoSubstrate",
    "ExactlyOnceSubstrate",
    "Substrate",
    "SubstrateError",
    "SubstrateRegistry",
    "UnknownSubstrateError",
    "delivery_of",
]


class SubstrateError(GoatherdError, RuntimeError):
    """Raised when a substrate is misused or refuses its input.

    Examples: a different substrate registered under a taken ref, a malformed
    KV put payload (the whole batch is refused before any write).
    """


class UnknownSubstrateError(SubstrateError):
    """Raised when no substrate is registered under a ref (fail closed).

    Attributes:
        substrate_ref: the ref that was looked up.
    """

    def __init__(self, substrate_ref: str) -> None:
        """Name the unknown ``substrate_ref``."""
        super().__init__(f"unknown substrate: {substrate_ref}")
        self.substrate_ref = substrate_ref


@runtime_checkable
class Substrate(Protocol):
    """Applies declarations to a world and reports captures; never appends."""

    @property
    def substrate_ref(self) -> str:
        """The ref declarations' witnesses name to select this substrate."""
        ...

    @property
    def declaration_schemas(self) -> frozenset[str]:
        """The declaration schemas this substrate accepts."""
        ...

    @property
    def capture_schemas(self) -> frozenset[str]:
        """The capture schemas this substrate may emit."""
        ...

    @property
    def containment(self) -> str:
        """The containment its captures' witness records."""
        ...

    def materialize(self, records: Sequence[Record]) -> MaterializationResult:
        """Apply ``records`` (declarations, in request order) and report.

        Raises on a refusal that touched nothing; the orchestrator records
        nothing in that case.
        """
        ...


@runtime_checkable
class DeliveryAwareSubstrate(Protocol):
    """A substrate that says how a batch is delivered (absent: at least once)."""

    def delivery_for(self, records: Sequence[Record]) -> MaterializationDelivery:
        """Return the delivery the orchestrator must give ``records``."""
        ...


@runtime_checkable
class ExactlyOnceSubstrate(Protocol):
    """A substrate that can check and apply an idempotency key atomically."""

    def materialize_once(
        self, records: Sequence[Record], idempotency_key: str
    ) -> MaterializationResult:
        """Apply ``records`` unless ``idempotency_key`` was already applied.

        The check and the effect must be one atomic step of the substrate's
        own medium (one transaction, one rename): after a crash anywhere, the
        key is applied with its effect or neither is. An applied key returns
        the same result (the same capture drafts) without applying again.
        """
        ...


def delivery_of(
    substrate: Substrate, records: Sequence[Record]
) -> MaterializationDelivery:
    """Return how ``substrate`` delivers ``records`` (at least once by default).

    Raises:
        SubstrateError: the substrate claims ``exactly_once`` without a
            ``materialize_once``, or names no known delivery.
    """
    if not isinstance(substrate, DeliveryAwareSubstrate):
        return MaterializationDelivery.AT_LEAST_ONCE
    claimed = substrate.delivery_for(records)
    try:
        delivery = MaterializationDelivery(claimed)
    except ValueError:
        raise SubstrateError(
            f"substrate '{substrate.substrate_ref}' names an unknown delivery: "
            f"{claimed!r}"
        ) from None
    if delivery is MaterializationDelivery.EXACTLY_ONCE and not isinstance(
        substrate, ExactlyOnceSubstrate
    ):
        raise SubstrateError(
            f"substrate '{substrate.substrate_ref}' claims exactly_once "
            "delivery but has no materialize_once"
        )
    return delivery


class SubstrateRegistry:
    """A thread-safe map from substrate ref to substrate."""

    def __init__(self) -> None:
        """Start empty."""
        self._lock = threading.Lock()
        self._substrates: dict[str, Substrate] = {}

    def register(self, substrate: Substrate) -> None:
        """Register ``substrate`` under its ref (idempotent for the same object).

        Raises:
            SubstrateError: a different object is registered under that ref.
        """
        ref = substrate.substrate_ref
        with self._lock:
            existing = self._substrates.get(ref)
            if existing is not None and existing is not substrate:
                raise SubstrateError(f'substrate "{ref}" is already registered')
            self._substrates[ref] = substrate

    def get(self, substrate_ref: str) -> Substrate:
        """Return the substrate registered under ``substrate_ref``.

        Raises:
            UnknownSubstrateError: nothing is registered under it.
        """
        with self._lock:
            substrate = self._substrates.get(substrate_ref)
        if substrate is None:
            raise UnknownSubstrateError(substrate_ref)
        return substrate

    def refs(self) -> tuple[str, ...]:
        """Return the registered refs, sorted."""
        with self._lock:
            return tuple(sorted(self._substrates))


class EchoSubstrate:
    """A deterministic substrate that captures each declaration's payload as is.

    Each target becomes a capture with the same schema, the target's kind label
    and a copy of its payload, caused by the target. Capture schemas equal the
    declaration schemas; the outcome is always ``success``.
    """

    def __init__(
        self,
        substrate_ref: str,
        declaration_schemas: Iterable[str],
        containment: str = DEFAULT_CONTAINMENT,
    ) -> None:
        """Accept ``declaration_schemas`` under ``substrate_ref``.

        Raises:
            TypeError: ``declaration_schemas`` is a bare string (one schema:
                pass ``("schema.v1",)``) or holds a non-string.
        """
        self._ref = substrate_ref
        self._schemas = frozenset(
            string_tuple(declaration_schemas, "EchoSubstrate declaration_schemas")
        )
        self._containment = containment

    @property
    def substrate_ref(self) -> str:
        """The ref given at construction."""
        return self._ref

    @property
    def declaration_schemas(self) -> frozenset[str]:
        """The accepted declaration schemas."""
        return self._schemas

    @property
    def capture_schemas(self) -> frozenset[str]:
        """The same as :attr:`declaration_schemas`."""
        return self._schemas

    @property
    def containment(self) -> str:
        """The containment given at construction."""
        return self._containment

    def materialize(self, records: Sequence[Record]) -> MaterializationResult:
        """Echo every record as a capture caused by it."""
        drafts = tuple(
            RecordDraft(
                mode=CAPTURE,
                schema_ref=record.envelope.schema_ref,
                payload=dict(record.payload),
                kind_label=record.fact_kind,
                caused_by_fact_ids=(record.record_id,),
            )
            for record in records
        )
        return MaterializationResult(MaterializationOutcome.SUCCESS, drafts)
