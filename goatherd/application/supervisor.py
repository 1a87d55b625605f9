"""The supervisor: a rules engine on the effect bus that can intervene.

A :class:`Supervisor` subscribes to the effect bus and evaluates its rules on
every event in a background thread (runtime-spec 11.2):

* asynchronously, EVERY matching rule's action is called (stateful rules must
  see every event) and the FIRST intervention is kept;
* :meth:`Supervisor.check_call` is the synchronous pre-tool gate: the first
  intervention wins and later rules are not consulted;
* interventions go to a bounded queue (64) that drops its OLDEST entry when
  full, so a slow consumer never blocks the supervisor, and the bus never
  blocks the agent it watches (a slow supervisor only loses old events).

Every intervention and gate decision is recorded in the trace as a
``goatherd.supervisor.intervention.v1`` capture on the watched scope's owner
path, caused by the triggering record when there is one (ADR 0018). Captures
are ignored by the built-in rules, so recording never feeds back.

The application layer depends only on the Protocols below, never on the bus
or the scope manager implementations.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Final, Protocol, runtime_checkable

from returns.result import Failure, Result, Success

from goatherd.application.intervention_key import intervention_occurrence_key
from goatherd.domain import (
    DECLARATION,
    SCOPE_ID_PREFIX,
    TRUSTED_APPEND_CONTEXT,
    AppendBatch,
    AppendContext,
    AppendGroup,
    AppendReceipt,
    GoatherdError,
    Intervention,
    LogEntry,
    MergeProposal,
    MergeProposed,
    ScopeNotFoundError,
    SupervisedEvent,
    SupervisionRule,
    SupervisorIntervened,
)

__all__ = [
    "DEFAULT_INTERVENTION_CAPACITY",
    "EffectSource",
    "INTERVENTION_KIND_LABEL",
    "INTERVENTION_SCHEMA_REF",
    "InterventionQueue",
    "InterventionRecorder",
    "MERGE_PROPOSED_KIND_LABEL",
    "MERGE_PROPOSED_SCHEMA_REF",
    "ReviewEvent",
    "ScopeDirectory",
    "SupervisedScope",
    "Supervisor",
    "SupervisorFailure",
]

DEFAULT_INTERVENTION_CAPACITY: Final = 64
INTERVENTION_SCHEMA_REF: Final = SupervisorIntervened.SCHEMA
INTERVENTION_KIND_LABEL: Final = SupervisorIntervened.KIND_LABEL
MERGE_PROPOSED_SCHEMA_REF: Final = MergeProposed.SCHEMA
MERGE_PROPOSED_KIND_LABEL: Final = MergeProposed.KIND_LABEL


SupervisorFailure = ScopeNotFoundError | GoatherdError
"""Why ``inject``/``halt`` did nothing: an unknown scope, or the scope refused."""


@runtime_checkable
class EffectSource(Protocol):
    """The bus as the supervisor sees it: subscriptions iterate until closed."""

    def subscribe(self, subscriber_id: str) -> Iterable[SupervisedEvent]:
        """Return a subscription that yields events until it is closed."""
        ...

    def unsubscribe(self, subscriber_id: str) -> None:
        """Close ``subscriber_id``'s subscription."""
        ...


@runtime_checkable
class SupervisedScope(Protocol):
    """The scope operations a supervisor triggers (each records itself)."""

    def inject(self, guidance: str) -> object:
        """Record guidance the sub-agent sees on its next turn."""
        ...

    def halt(self) -> object:
        """Force-stop the scope (recorded; the scope becomes discarded)."""
        ...


@runtime_checkable
class ScopeDirectory(Protocol):
    """Looks scopes up by id (the scope manager)."""

    def get(self, scope_id: str) -> object:
        """Return the scope, ``None``, or a ``Result`` holding the scope."""
        ...


@runtime_checkable
class InterventionRecorder(Protocol):
    """The part of the trace store that records interventions.

    Besides appending, it reads a path's head, which identifies an
    intervention triggered by a synthetic (unrecorded) event.
    """

    def append(
        self,
        context: AppendContext,
        batch: AppendBatch,
        *,
        expected_heads: Mapping[str, int] | None = None,
    ) -> AppendReceipt:
        """Append a batch (idempotent by intent)."""
        ...

    def head(self, owner: str) -> int:
        """Return the owner's next ordinal (0 for an unknown owner)."""
        ...

    def read_path(
        self, owner: str, after_ordinal: int = -1, limit: int | None = None
    ) -> Sequence[LogEntry]:
        """Return ``owner``'s path entries after ``after_ordinal``, in order."""
        ...


@dataclass(frozen=True, slots=True)
class ReviewEvent:
    """An unrecorded event presenting a merge proposal to the rules."""

    trace_owner_id: str
    payload: Mapping[str, object] = field(default_factory=dict)
    mode: str = DECLARATION
    schema_ref: str = MERGE_PROPOSED_SCHEMA_REF
    kind_label: str = MERGE_PROPOSED_KIND_LABEL
    record_id: str = ""
    timestamp: datetime | None = None


class InterventionQueue:
    """A bounded FIFO of interventions that drops its OLDEST entry when full."""

    def __init__(self, capacity: int = DEFAULT_INTERVENTION_CAPACITY) -> None:
        """Hold at most ``capacity`` interventions (``<= 0`` means 64)."""
        size = capacity if capacity > 0 else DEFAULT_INTERVENTION_CAPACITY
        self._items: deque[Intervention] = deque()
        self._capacity = size
        self._cond = threading.Condition()
        self._closed = False
        self.dropped = 0

    def put(self, intervention: Intervention) -> None:
        """Enqueue without blocking; a full queue loses its oldest entry."""
        with self._cond:
            if self._closed:
                return
            if len(self._items) >= self._capacity:
                self._items.popleft()
                self.dropped += 1
            self._items.append(intervention)
            self._cond.notify_all()

    def get(self, timeout: float | None = None) -> Intervention | None:
        """Return the next intervention, or ``None`` on timeout or closed and empty."""
        with self._cond:
            self._cond.wait_for(lambda: bool(self._items) or self._closed, timeout)
            return self._items.popleft() if self._items else None

    def drain(self) -> tuple[Intervention, ...]:
        """Remove and return every queued intervention, oldest first."""
        with self._cond:
            items = tuple(self._items)
            self._items.clear()
            return items

    def close(self) -> None:
        """End iteration once the queued interventions are consumed."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    @property
    def closed(self) -> bool:
        """Whether the queue was closed."""
        return self._closed

    def __len__(self) -> int:
        """Return how many interventions are queued."""
        with self._cond:
            return len(self._items)

    def __iter__(self) -> Iterator[Intervention]:
        """Yield interventions until the queue is closed and empty."""
        while (item := self.get()) is not None:
            yield item


class Supervisor:
    """Watches the effect bus with rules and emits (and records) interventions."""

    def __init__(
        self,
        manager: ScopeDirectory,
        bus: EffectSource | None,
        *,
        recorder: InterventionRecorder | None = None,
        capacity: int = DEFAULT_INTERVENTION_CAPACITY,
    ) -> None:
        """Supervise ``manager``'s scopes from ``bus``'s events.

        Args:
            manager: resolves scope ids for :meth:`inject` and :meth:`halt`.
            bus: the effect bus (``None``: :meth:`start` is a no-op).
            recorder: the trace store interventions are recorded in (``None``:
                not recorded).
            capacity: the intervention queue's bound (drop oldest).
        """
        self._manager = manager
        self._bus = bus
        self._recorder = recorder
        self._rules: list[SupervisionRule] = []
        self._rules_lock = threading.Lock()
        self._queue = InterventionQueue(capacity)
        self._lock = threading.Lock()
        self._subscriber_id: str | None = None
        self._thread: threading.Thread | None = None
        self._closed = False
        self.record_errors: list[BaseException] = []

    def add_rule(self, rule: SupervisionRule) -> None:
        """Append ``rule``; rules are evaluated in insertion order."""
        with self._rules_lock:
            self._rules.append(rule)

    def _snapshot_rules(self) -> tuple[SupervisionRule, ...]:
        with self._rules_lock:
            return tuple(self._rules)

    def interventions(self) -> InterventionQueue:
        """Return the intervention queue (iterate it; it ends after :meth:`close`)."""
        return self._queue

    def start(self, subscriber_id: str) -> None:
        """Subscribe to the bus and evaluate events in a background thread.

        A no-op when already started, closed, or without a bus.
        """
        with self._lock:
            if self._thread is not None or self._closed or self._bus is None:
                return
            subscription = self._bus.subscribe(subscriber_id)
            self._subscriber_id = subscriber_id
            self._thread = threading.Thread(
                target=self._loop,
                args=(subscription,),
                name=f"supervisor {subscriber_id}",
                daemon=True,
            )
            self._thread.start()

    def _loop(self, subscription: Iterable[SupervisedEvent]) -> None:
        try:
            for event in subscription:
                self._evaluate(event)
        finally:
            self._queue.close()

    def _evaluate(self, event: SupervisedEvent) -> None:
        chosen: tuple[SupervisionRule, Intervention] | None = None
        for rule in self._snapshot_rules():
            if not rule.match(event):
                continue
            intervention = rule.action(event)
            if intervention is not None and chosen is None:
                chosen = (rule, intervention)
        if chosen is not None:
            self._emit(event, *chosen, gate=False)

    def check_call(
        self, event: SupervisedEvent, *, seq: int | None = None
    ) -> Intervention | None:
        """Gate one tool call synchronously: the first rule's verdict wins.

        ``None`` means proceed; ``deny`` means block and tell the model the
        reason; ``inject`` means proceed with guidance; ``halt`` means stop.
        The decision is recorded; later rules are not consulted. A call that
        is not a record yet is recorded once per occurrence: ``seq`` names the
        occurrence, else its content at the path's head does (a retry records
        nothing new; see :mod:`.intervention_key`).
        """
        for rule in self._snapshot_rules():
            if not rule.match(event):
                continue
            intervention = rule.action(event)
            if intervention is not None:
                return self._stamp_and_record(
                    event, rule, intervention, gate=True, seq=seq
                )
        return None

    def review_merge(
        self, scope_id: str, proposal: MergeProposal, *, seq: int | None = None
    ) -> Intervention | None:
        """Present a merge proposal to the rules as a ``merge:proposed`` event.

        The event is synthetic (never recorded); the verdict is advisory: the
        caller acts on it (typically denying on ``discard`` or ``deny``). A
        replayed review of the same proposal records its verdict once; pass
        ``seq`` to tell deliberate repeats apart.
        """
        owner = proposal.child_scope_id.removeprefix(SCOPE_ID_PREFIX)
        event = ReviewEvent(
            trace_owner_id=owner,
            payload={
                "child_scope": proposal.child_scope_id,
                "baseline_digest": proposal.baseline_digest,
                "paths": list(proposal.paths),
                "change_count": len(proposal.changes),
            },
            timestamp=datetime.now(UTC),
        )
        verdict = self.check_call(event, seq=seq)
        if verdict is not None and not verdict.scope_id:
            verdict = replace(verdict, scope_id=scope_id)
        return verdict

    def _emit(
        self,
        event: SupervisedEvent,
        rule: SupervisionRule,
        intervention: Intervention,
        *,
        gate: bool,
    ) -> None:
        self._queue.put(self._stamp_and_record(event, rule, intervention, gate=gate))

    def _stamp_and_record(
        self,
        event: SupervisedEvent,
        rule: SupervisionRule,
        intervention: Intervention,
        *,
        gate: bool,
        seq: int | None = None,
    ) -> Intervention:
        stamped = replace(intervention, time=datetime.now(UTC))
        if self._recorder is not None:
            try:
                self._record(event, rule, stamped, gate=gate, seq=seq)
            except GoatherdError as error:
                # A refused record must not kill the loop; it stays inspectable.
                self.record_errors.append(error)
        return stamped

    def _record(
        self,
        event: SupervisedEvent,
        rule: SupervisionRule,
        intervention: Intervention,
        *,
        gate: bool,
        seq: int | None,
    ) -> None:
        assert self._recorder is not None
        trigger = getattr(event, "record_id", "") or ""
        owner = (intervention.scope_id or event.trace_owner_id).removeprefix(
            SCOPE_ID_PREFIX
        )
        source = "gate" if gate else "watch"
        position = getattr(event, "position", None)
        key = intervention_occurrence_key(
            self._recorder,
            owner,
            event,
            intervention,
            skip_schema=INTERVENTION_SCHEMA_REF,
            seq=seq,
        )
        draft = SupervisorIntervened(
            type=intervention.type.value,
            scope_id=intervention.scope_id,
            rule=rule.name,
            source=source,
            intervention_payload=_json_payload(intervention.payload),
            trigger_record_id=trigger or None,
            trigger_position=position if isinstance(position, int) else None,
            trigger_schema_ref=event.schema_ref,
        ).draft()
        group = AppendGroup(owner, None, (trigger,) if trigger else (), (draft,))
        intent = f"{owner}:intervention:{source}:{rule.name}:{key}"
        self._recorder.append(TRUSTED_APPEND_CONTEXT, AppendBatch(intent, (group,)))

    def inject(self, scope_id: str, guidance: str) -> Result[None, SupervisorFailure]:
        """Record ``guidance`` on the scope (``goatherd.supervisor.inject.v1``)."""
        return self._on_scope(scope_id, lambda scope: scope.inject(guidance))

    def halt(self, scope_id: str) -> Result[None, SupervisorFailure]:
        """Halt the scope: recorded, discarded, its owned sandbox destroyed."""
        return self._on_scope(scope_id, lambda scope: scope.halt())

    def _on_scope(
        self, scope_id: str, action: _ScopeAction
    ) -> Result[None, SupervisorFailure]:
        scope = _unwrap_scope(self._manager.get(scope_id))
        if scope is None:
            return Failure(ScopeNotFoundError(scope_id))
        outcome = action(scope)
        failure = _failure_of(outcome)
        return Success(None) if failure is None else Failure(failure)

    def close(self) -> None:
        """Stop watching (idempotent): unsubscribe and end the interventions."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            thread, subscriber = self._thread, self._subscriber_id
        if self._bus is not None and subscriber is not None:
            self._bus.unsubscribe(subscriber)
        if thread is not None:
            thread.join()
        self._queue.close()


class _ScopeAction(Protocol):
    def __call__(self, scope: SupervisedScope) -> object: ...


def _unwrap_scope(found: object) -> SupervisedScope | None:
    # The manager may return the scope, None, or a returns.Result holding it.
    if isinstance(found, Success):
        found = found.unwrap()
    elif isinstance(found, Failure):
        return None
    if found is None:
        return None
    if not (hasattr(found, "inject") and hasattr(found, "halt")):
        raise TypeError(f"scope manager returned {type(found).__name__}, not a scope")
    return found


def _failure_of(outcome: object) -> GoatherdError | None:
    if isinstance(outcome, Failure):
        error = outcome.failure()
        if isinstance(error, GoatherdError):
            return error
        return GoatherdError(str(error))
    return None


def _json_payload(payload: object) -> object:
    if payload is None or isinstance(payload, str | int | float | bool):
        return payload
    return str(payload)
