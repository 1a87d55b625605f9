"""Recording a decision: one append, guarded by the heads of what it read.

A command decides on the runtime model and returns a :class:`Decision`: the
events to record, each placed on one or more owner paths, plus the paths it
read without writing. :func:`record_decision` makes that decision hold
against the trace, across threads and processes:

1. catch the model up to position ``P`` and decide;
2. take the head of every path the decision writes or guards: the heads the
   model saw itself when ``P`` is provably still the log's tail (one cheap
   read, ADR 0078), else read them from the store;
3. for read heads, unless the model has read every entry up to them, catch
   up again: if a runtime record landed on one of those paths after ``P``,
   decide again (the decision missed it);
4. append the batch with those heads as expected heads: if anything landed
   on them meanwhile, the store refuses (nothing written), the model stops
   vouching for those heads and the command decides again, up to
   :data:`DECISION_RETRIES` times.

Every event that names no cause of its own cites the head of each path it
is placed on (ADR 0087): the record ids at the heads of step 2, which the
guard of step 4 holds, or the event placed just before it on that path in
the same decision. So a path's records form one causal chain, and a fork
(placed on the parent's path and the child's empty one) cites the parent's
head: the causal closure of a child's work reaches what the parent had
recorded when it forked. Events that name their causes (a merge or discard
citing the fork, a settlement citing the sealed output) keep exactly those.

So of several processes deciding on the same output, checkpoint or workspace
at once, exactly one append commits; the others decide again on the new
state and fail with the rule that state breaks.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Final

from goatherd.application.runtime import FaultHook
from goatherd.application.runtime_model import RuntimeModel
from goatherd.domain import (
    TRUSTED_APPEND_CONTEXT,
    AppendBatch,
    AppendGroup,
    AppendReceipt,
    OrdinalConflictError,
    RecordDraft,
    RuntimeEvent,
)

__all__ = ["DECISION_RETRIES", "Decision", "record_decision"]

DECISION_RETRIES: Final = 8


@dataclass(frozen=True, slots=True)
class Decision:
    """The records one command appends and the paths whose heads guard them.

    Attributes:
        placements: ``(owner paths, event)`` in record order; an event placed
            on several paths is one record on each.
        guards: paths the decision read without writing.
    """

    placements: tuple[tuple[tuple[str, ...], RuntimeEvent], ...] = ()
    guards: frozenset[str] = field(default_factory=frozenset)

    def place(self, event: RuntimeEvent, *owners: str) -> Decision:
        """Return this decision with ``event`` placed on ``owners`` (deduplicated)."""
        unique = tuple(dict.fromkeys(o for o in owners if o))
        return Decision((*self.placements, (unique, event)), self.guards)

    def guard(self, *owners: str) -> Decision:
        """Return this decision also guarding ``owners``' heads."""
        return Decision(self.placements, self.guards | {o for o in owners if o})

    @property
    def owners(self) -> set[str]:
        """Every path written or guarded."""
        written = {o for owners, _ in self.placements for o in owners}
        return written | set(self.guards)

    @property
    def drafts_in_order(self) -> list[tuple[str, RuntimeEvent]]:
        """``(owner, event)`` for every draft of :meth:`batch`, in batch order."""
        groups: dict[str, list[RuntimeEvent]] = {}
        for owners, event in self.placements:
            for owner in owners:
                groups.setdefault(owner, []).append(event)
        return [(owner, event) for owner, events in groups.items() for event in events]

    @property
    def events(self) -> list[RuntimeEvent]:
        """The events, in record order."""
        return [event for _, event in self.placements]

    def citing_heads(self, head_ids: Mapping[str, str]) -> Decision:
        """Return this decision with every uncaused event citing its paths' heads.

        ``head_ids`` maps each written path to the record id at its head
        (``""``: an empty path). An event that names no causes gets, as its
        causes, the head of each path it is placed on, in placement order and
        without repeats (an event on a path left empty cites nothing there);
        the head of a path then moves to that event. Events with causes of
        their own keep them (and still move the heads).
        """
        # A head is a record id, or an event of this decision whose id is
        # computed only if a later event cites it (a digest costs CPU).
        heads: dict[str, str | RuntimeEvent] = dict(head_ids)
        ids: dict[int, str] = {}

        def head_id(owner: str) -> str:
            head = heads.get(owner, "")
            if isinstance(head, str):
                return head
            if id(head) not in ids:
                ids[id(head)] = head.record_id()
            return ids[id(head)]

        placements: list[tuple[tuple[str, ...], RuntimeEvent]] = []
        for owners, event in self.placements:
            if not event.caused_by:
                cited = dict.fromkeys(head_id(o) for o in owners)
                cited.pop("", None)
                if cited:
                    event = replace(event, caused_by=tuple(cited))
            for owner in owners:
                heads[owner] = event
            placements.append((owners, event))
        return Decision(tuple(placements), self.guards)

    def batch(self, intent: str) -> AppendBatch:
        """Return the append batch: one group per path, drafts in record order."""
        groups: dict[str, list[RecordDraft]] = {}
        for owners, event in self.placements:
            draft = event.draft()
            for owner in owners:
                groups.setdefault(owner, []).append(draft)
        return AppendBatch(
            intent,
            tuple(AppendGroup(o, fact_drafts=tuple(d)) for o, d in groups.items()),
        )


def record_decision(
    model: RuntimeModel,
    intent: str,
    decide: Callable[[], Decision | None],
    *,
    faults: FaultHook | None = None,
) -> AppendReceipt | None:
    """Decide on the current model and append the decision under ``intent``.

    ``decide`` runs on a freshly caught-up model, possibly several times; it
    raises a rule's error to refuse, or returns ``None`` when there is
    nothing to record.

    Returns:
        The receipt, or ``None`` when the decision recorded nothing.

    Raises:
        OrdinalConflictError: other writers kept moving the guarded paths
            through every retry (retryable).
        The errors ``decide`` raises; the store's errors.
    """
    trace = model.trace
    last: OrdinalConflictError | None = None
    for _ in range(DECISION_RETRIES):
        position = model.refresh()
        decision = decide()
        if decision is None or not decision.placements:
            return None
        owners = decision.owners
        # Nothing committed since the decision's view (the tail is still
        # where the catch-up left it): the heads the model saw are the heads.
        heads: dict[str, int] | None = None
        head_ids: dict[str, str] | None = None
        vouched = model.vouched_heads(owners)
        if vouched is not None and vouched[0] == position and model.is_tail(position):
            heads = vouched[1]
            head_ids = model.vouched_head_ids(heads)
        if heads is None or head_ids is None:
            read = trace.head_records(owners)
            heads = {owner: found[0] for owner, found in read.items()}
            head_ids = {owner: found[1] for owner, found in read.items()}
            if not model.knows_heads(heads):
                model.refresh()
            if model.touched_since(owners, position):
                moved = sorted(owners)[0]
                last = OrdinalConflictError(moved, heads[moved], trace.head(moved))
                continue
        decision = decision.citing_heads(head_ids)
        _fault(faults, "before-commit", intent)
        try:
            receipt = trace.append(
                TRUSTED_APPEND_CONTEXT, decision.batch(intent), expected_heads=heads
            )
        except OrdinalConflictError as conflict:
            # Vouched or read, these heads are stale: read them next time.
            model.distrust(owners)
            last = conflict
            continue
        model.adopt(decision.drafts_in_order, receipt)
        _fault(faults, "after-commit", intent)
        return receipt
    assert last is not None
    raise last


def _fault(faults: FaultHook | None, boundary: str, intent: str) -> None:
    if faults is not None:
        faults(boundary, intent)
