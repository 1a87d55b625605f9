"""Guarded appends on one execution's path: decide on the trace, then commit.

:class:`ExecutionPath` keeps an execution's aggregate
(:class:`~goatherd.domain.ExecutionAggregate`) folded from its owner path and
records decisions on it. A decision is taken on the aggregate as folded
through head ``h`` and appended with ``expected_heads={path: h}``: if anything
landed on the path meanwhile (another process ended the run, published on
it, ...), the store refuses the batch and writes nothing, and the decision is
taken again on the new state, where it fails with the rule that state breaks
(``ExecutionTerminalError`` for a second terminal or a fact after the end).
So of several processes recording on one execution, the path never holds two
terminal records or a fact after its terminal record.

An intent already committed with the same content replays (the store checks
intents before heads). An intent committed with other content is decided
again first: when that content ended the run, the loser sees
``ExecutionTerminalError``; otherwise the store's ``AppendIntentConflictError``
stands.

The aggregate is a per-object cache any process rebuilds from the path.
Decisions are taken on it without reading the path first (optimistic: the
expected head is the check); a lost race, a replayed receipt or a refusal on
it makes it refold the path, and a refusal is only final on the refolded
state. Queries (:meth:`ExecutionPath.state`) read the head first.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import replace

from goatherd.application.decisions import DECISION_RETRIES
from goatherd.domain import (
    MAX_OWNER_ORDINAL,
    TRUSTED_APPEND_CONTEXT,
    TRUSTED_READ_CONTEXT,
    AppendBatch,
    AppendGroup,
    AppendIntentConflictError,
    AppendReceipt,
    ExecutionAggregate,
    OrdinalConflictError,
    PlacedEvent,
    RuntimeEvent,
    RuntimeRuleError,
    decode_fact,
    fold_execution,
)
from goatherd.domain.store import TraceStore
from goatherd.projections import require_record

__all__ = ["ExecutionDecision", "ExecutionPath", "execution_batch"]

ExecutionDecision = Callable[[ExecutionAggregate], Sequence[RuntimeEvent]]
"""Decide on the folded execution: return the events to record or raise a rule."""


def execution_batch(
    intent: str, owner: str, events: Sequence[RuntimeEvent]
) -> AppendBatch:
    """Return the one-group batch recording ``events`` on ``owner``.

    The events' shared causal parents become the group's parents and the
    drafts cite nothing more: the layout the kernel's vectors pin (a draft
    that repeated them would give the batch another digest).

    Raises:
        ValueError: the events do not share their causal parents.
    """
    parents = {event.caused_by for event in events}
    if len(parents) > 1:
        raise ValueError(f"the events of intent {intent} cite different parents")
    drafts = tuple(replace(event.draft(), caused_by_fact_ids=()) for event in events)
    group = AppendGroup(owner, None, next(iter(parents), ()), drafts)
    return AppendBatch(intent, (group,))


class ExecutionPath:
    """One execution's aggregate, kept from its path, and its guarded appends.

    Decisions are taken optimistically on the kept aggregate, without reading
    the path first: the append's expected head is the check. A lost race
    (the head moved) or a refusal on a kept state that may be stale makes it
    refold the path and decide again.
    """

    def __init__(self, store: TraceStore, execution_id: str) -> None:
        """Keep ``execution_id``'s path of ``store``; nothing is read yet."""
        self._store = store
        self._execution_id = execution_id
        # Until something is read, the path is assumed empty: an opening on a
        # new path then costs no read, and a wrong guess fails its append.
        self._cached = ExecutionAggregate(execution_id)
        self._stale = False
        self._lock = threading.Lock()

    @property
    def execution_id(self) -> str:
        """The execution (its owner path)."""
        return self._execution_id

    def state(self, *, verified: bool = True) -> ExecutionAggregate:
        """Return the aggregate as folded.

        Args:
            verified: fold through the path's current head (one head read and,
                if the path moved, a refold); ``False`` returns the kept state:
                the fold of a prefix of the path (this object's last append or
                read), without what others appended since.

        Raises:
            RecordDecodeError: a record on the path does not decode.
        """
        with self._lock:
            if self._stale:
                return self._reload()
            if not verified:
                return self._cached
            if self._store.head(self._execution_id) == self._cached.head:
                return self._cached
            return self._reload()

    def forget(self) -> None:
        """Drop the kept state: a record this object did not append landed.

        The next decision refolds the path instead of losing a race first
        (a spawned child's frontier lands on its parent's path).
        """
        with self._lock:
            self._stale = True

    def record(
        self, intent: str, decide: ExecutionDecision
    ) -> tuple[AppendReceipt, tuple[RuntimeEvent, ...]]:
        """Decide on the kept state and append under its head, retrying races.

        Returns:
            The receipt and the events recorded (or replayed).

        Raises:
            The rule errors ``decide`` raises on the path as it is
            (``ExecutionTerminalError``...);
            AppendIntentConflictError: ``intent`` committed other content that
                the rules do not refuse;
            OrdinalConflictError: the path kept moving through every retry;
            RecordDecodeError: a record on the path does not decode.
        """
        with self._lock:
            last: OrdinalConflictError | None = None
            for _ in range(DECISION_RETRIES):
                state, events = self._decide(decide)
                try:
                    receipt = self._append(intent, state, events)
                except OrdinalConflictError as conflict:
                    last = conflict
                    self._stale = True
                    continue
                except AppendIntentConflictError:
                    decide(self._reload())
                    raise
                self._advance(state, events, receipt)
                return receipt, events
            assert last is not None
            raise last

    def _decide(
        self, decide: ExecutionDecision
    ) -> tuple[ExecutionAggregate, tuple[RuntimeEvent, ...]]:
        if not self._stale:
            try:
                return self._cached, tuple(decide(self._cached))
            except RuntimeRuleError:
                pass  # refused on a kept state: decide on the path as it is
        state = self._reload()
        return state, tuple(decide(state))

    def _append(
        self, intent: str, state: ExecutionAggregate, events: Sequence[RuntimeEvent]
    ) -> AppendReceipt:
        batch = execution_batch(intent, self._execution_id, events)
        heads = {self._execution_id: state.head}
        return self._store.append(TRUSTED_APPEND_CONTEXT, batch, expected_heads=heads)

    def _reload(self) -> ExecutionAggregate:
        slice_ = self._store.read_owner_prefix(
            TRUSTED_READ_CONTEXT, self._execution_id, MAX_OWNER_ORDINAL
        )
        records = (
            require_record(slice_.facts_by_id[rid], "execution aggregate")
            for rid in slice_.owner_paths.get(self._execution_id, ())
        )
        state = fold_execution(self._execution_id, map(decode_fact, records))
        self._cached, self._stale = state, False
        return state

    def _advance(
        self,
        state: ExecutionAggregate,
        events: Sequence[RuntimeEvent],
        receipt: AppendReceipt,
    ) -> None:
        """Fold our own new records; a replayed receipt leaves a refold to do."""
        span = receipt.owner_ordinal_ranges.get(self._execution_id)
        if span != (state.head, state.head + len(events) - 1):
            self._stale = True
            return
        first = state.head
        for offset, (event, record_id) in enumerate(
            zip(events, receipt.fact_ids, strict=True)
        ):
            placed = PlacedEvent(event, record_id, self._execution_id, first + offset)
            state = state.with_fact(placed)
        self._cached, self._stale = state, False
