"""An in-memory trace for domain tests: place events on paths, read the fold.

Each ``place`` is one batch (one intent): the event is one record placed on
every named path, in order, with the log positions and ordinals a store would
give it. The fold is the runtime's own (:class:`RuntimeFold`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from goatherd.domain import (
    CheckpointAggregate,
    MemoryCatalog,
    PlacedEvent,
    RetainedOutputAggregate,
    RuntimeEvent,
    RuntimeFold,
    ScopeAggregate,
    ScopeCreated,
    WorkspaceState,
    decode_payload,
    record_digest,
    runtime_witness_ref,
)


class Trace:
    """A log of placed events and its runtime fold."""

    def __init__(self) -> None:
        self.catalog = MemoryCatalog()
        self.fold = RuntimeFold(self.catalog)
        self.log: list[PlacedEvent] = []
        self._heads: dict[str, int] = {}
        self._intents = 0

    def place(self, event: RuntimeEvent, *owners: str) -> str:
        """Place ``event`` on ``owners`` as one batch; return its record id."""
        return self._place(event, event.record_id(), owners)

    def _place(
        self, event: RuntimeEvent, record_id: str, owners: tuple[str, ...]
    ) -> str:
        self._intents += 1
        intent = f"test:{self._intents}"
        for owner in dict.fromkeys(owners):
            ordinal = self._heads.get(owner, 0)
            self._heads[owner] = ordinal + 1
            fact = PlacedEvent(event, record_id, owner, ordinal, len(self.log), intent)
            self.log.append(fact)
            self.fold.apply(fact)
        return record_id

    def append_raw(
        self, owner: str, schema: str, mode: str, payload: Mapping[str, Any]
    ) -> str:
        """Decode a record written by someone else and place it on ``owner``."""
        record_id = record_digest(
            schema, mode, dict(payload), (), runtime_witness_ref()
        )
        event = decode_payload(schema, mode, payload, owner=owner, record_id=record_id)
        return self._place(event, record_id, (owner,))

    def create(self, owner: str) -> None:
        """Place a root's ``scope.created``."""
        self.place(ScopeCreated(owner=owner), owner)

    def fork(
        self,
        parent: str,
        child: str,
        *,
        baseline: WorkspaceState | None = None,
        isolated: bool = False,
    ) -> str:
        """Decide and place a fork of ``child`` from ``parent``."""
        event = self.scope(parent).fork(
            self.scope(child), child_head=0, baseline=baseline, isolated=isolated
        )
        return self.place(event, parent, child)

    def scope(self, owner: str) -> ScopeAggregate:
        """Return the folded scope (bare if unknown)."""
        return self.catalog.scope(owner) or ScopeAggregate.bare(owner)

    def checkpoint(self, checkpoint_id: str) -> CheckpointAggregate:
        """Return the folded checkpoint (bare if unknown)."""
        found = self.catalog.checkpoint(checkpoint_id)
        return found or CheckpointAggregate.bare(checkpoint_id)

    def output(self, output_id: str) -> RetainedOutputAggregate:
        """Return the folded output (bare if unknown)."""
        found = self.catalog.output(output_id)
        return found or RetainedOutputAggregate.bare(output_id)
