"""The manager's base: loading, saving, intent lookups, fault boundaries, registry.

Every command looks its append intent up first (a retry under the same
``seq`` returns the stored outcome without deciding again), then decides on
aggregates folded from the trace and appends its records as ONE batch under
that intent, with each aggregate's head as the expected head; a lost race is
decided again on fresh folds (:meth:`ManagerBase._decide_and_save`). The
fault hook is called at every write boundary (ADR 0012).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import TypeVar

from goatherd.application.errors import NoSandboxError
from goatherd.application.ports import Sandbox
from goatherd.application.runtime import (
    FaultHook,
    IntentSequence,
    RuntimeEventStore,
)
from goatherd.application.scope_handle import (
    CheckpointEntry,
    ScopeEntry,
)
from goatherd.application.scope_handle import Scope as Scope  # re-export
from goatherd.domain import (
    OrdinalConflictError,
    ScopeAggregate,
    ScopeNotFoundError,
    TraceAggregate,
    TraceStoreError,
    owner_of_scope,
    scope_id_for,
)

__all__ = ["ManagerBase"]

TAgg = TypeVar("TAgg", bound=TraceAggregate)
_RETRIES = 5


class ManagerBase:
    """Loading, saving, intents and the registry maps shared by every command."""

    def __init__(
        self,
        events: RuntimeEventStore,
        *,
        sequence: IntentSequence | None = None,
        clock: Callable[[], datetime] | None = None,
        faults: FaultHook | None = None,
    ) -> None:
        """Manage scopes over ``events`` (an empty registry; see recovery).

        Args:
            events: the aggregate streams over the trace.
            sequence: the intent sequence (default: process-wide, random base).
            clock: wall clock for informational timestamps.
            faults: a hook called at every write boundary (tests inject crashes).
        """
        self._events = events
        self._sequence = sequence or IntentSequence()
        self._clock = clock or (lambda: datetime.now(UTC))
        self._faults = faults
        self._lock = threading.RLock()
        self._scopes: dict[str, ScopeEntry] = {}
        self._checkpoints: dict[str, CheckpointEntry] = {}

    # ------------------------------------------------------------ internals

    def _fault(self, boundary: str, intent: str) -> None:
        if self._faults is not None:
            self._faults(boundary, intent)

    def _next_seq(self, seq: int | None) -> int:
        return self._sequence.next() if seq is None else seq

    def _entry(self, owner: str) -> ScopeEntry:
        entry = self._scopes.get(owner)
        if entry is None:
            raise ScopeNotFoundError(scope_id_for(owner))
        return entry

    def _aggregate(self, owner: str) -> ScopeAggregate:
        """The scope's aggregate as the trace holds it now."""
        return self._events.load(ScopeAggregate, owner)

    def _load(self, cls: type[TAgg], owner: str) -> TAgg:
        """A fold for a decision (cached; the save's expected head guards it)."""
        return self._events.load(cls, owner, fresh=False)

    def _owner_of(self, scope_id: str) -> str:
        owner = owner_of_scope(scope_id)
        if owner not in self._scopes:
            raise ScopeNotFoundError(scope_id)
        return owner

    def _committed(self, intent: str, seq: int | None) -> bool:
        """Whether a retry's intent already committed (look up before deciding).

        ``seq=None`` means the command drew a fresh value from the process
        sequence: its intent cannot have committed before, so nothing is read.
        """
        if seq is None:
            return False
        return self._events.trace.read_append_intent(intent) is not None

    def _save(self, aggs: Sequence[TraceAggregate], intent: str) -> None:
        self._fault("before-commit", intent)
        self._events.save(aggs, intent)
        self._fault("after-commit", intent)

    def _decide_and_save(
        self, decide: Callable[[], Sequence[TraceAggregate] | None], intent: str
    ) -> None:
        """Run ``decide`` on current folds and save, deciding again on lost races."""
        for tries in range(_RETRIES):
            aggs = decide()
            if not aggs:
                return
            try:
                self._save(aggs, intent)
                return
            except OrdinalConflictError:
                if tries == _RETRIES - 1:
                    raise

    def _sandbox_of(self, owner: str) -> Sandbox:
        sandbox = self._entry(owner).sandbox
        if sandbox is None:
            raise NoSandboxError(scope_id_for(owner))
        return sandbox

    def _advisory(self, agg: ScopeAggregate, intent: str) -> None:
        """Append an advisory record; a failure never fails the operation."""
        try:
            self._save([agg], intent)
        except (TraceStoreError, OSError):
            self._events.forget(agg.id)

    def _first_record(self, intent: str, seq: int | None) -> str | None:
        if seq is None:
            return None
        prior = self._events.trace.read_append_intent(intent)
        if prior is None:
            return None
        return prior.fact_ids[0] if prior.fact_ids else ""

    # ------------------------------------------------------------ recovery

    def _register_recovered_scope(self, owner: str, entry: ScopeEntry) -> None:
        self._scopes[owner] = entry

    def _register_recovered_checkpoint(
        self, cp_id: str, entry: CheckpointEntry
    ) -> None:
        self._checkpoints[cp_id] = entry
