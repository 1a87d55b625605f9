"""The composition root: open a trace and wire the runtime around it.

:func:`open_runtime` is the one place that builds the store, the effect bus,
the event store and the scope managers (the CLI and the demo use it; handlers
receive what they need as arguments and never build it). A :class:`Runtime`
owns what it opened and closes it once.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field

from returns.result import Result

from goatherd.application import (
    RecoverOptions,
    RecoveryStats,
    RuntimeFailure,
    Sandbox,
    ScopeManager,
    recover_scopes,
)
from goatherd.domain.effects import EffectEvent
from goatherd.infrastructure.bus import EffectBus
from goatherd.infrastructure.eventstore import TraceEventStore
from goatherd.infrastructure.store import (
    EffectPublisher,
    SqlAlchemyTraceStore,
    open_trace_store,
)

__all__ = ["EffectTap", "Runtime", "SandboxResolver", "open_runtime"]

SandboxResolver = Callable[[str, str, str], Sandbox | None]
"""``(scope_id, backend, recorded_path) -> sandbox | None`` for recovery."""

EffectTap = Callable[[EffectEvent], None]
"""Called synchronously in the appending thread after each published event."""


@dataclass(slots=True)
class Runtime:
    """An open trace with the runtime wired around it.

    Attributes:
        store: the kernel trace store.
        bus: the effect bus the store publishes to (``None``: no bus).
        events: the aggregate streams the scope managers run on.
    """

    store: SqlAlchemyTraceStore
    bus: EffectBus | None
    events: TraceEventStore
    _closed: bool = field(default=False, repr=False)

    def new_manager(self) -> ScopeManager:
        """Return an empty scope manager over this trace (register roots next)."""
        return ScopeManager(self.events)

    def recover(
        self,
        resolver: SandboxResolver | None = None,
        stats: RecoveryStats | None = None,
    ) -> Result[ScopeManager, RuntimeFailure]:
        """Rebuild a scope manager from the trace (``recover_scopes``)."""
        return recover_scopes(self.events, RecoverOptions(resolver, stats))

    def close(self) -> None:
        """Close the bus and release the store's connections (idempotent)."""
        if self._closed:
            return
        self._closed = True
        if self.bus is not None:
            self.bus.close()
        self.store.close()

    def __enter__(self) -> Runtime:
        """Return the runtime itself."""
        return self

    def __exit__(self, *exc_info: object) -> None:
        """Close the runtime."""
        self.close()


class _TappedBus:
    """Publishes to the bus, then hands the event to a synchronous tap."""

    def __init__(self, bus: EffectPublisher, tap: EffectTap) -> None:
        self._bus = bus
        self._tap = tap

    def publish(self, event: EffectEvent) -> None:
        self._bus.publish(event)
        self._tap(event)


def open_runtime(
    db_url_or_path: str | os.PathLike[str],
    *,
    bus: bool = True,
    tap: EffectTap | None = None,
) -> Runtime:
    """Open (creating if absent) the trace and wire the runtime around it.

    Args:
        db_url_or_path: a path (SQLite) or an SQLAlchemy URL.
        bus: publish every committed path entry on a fresh :class:`EffectBus`.
        tap: also called with every published event, synchronously, right
            after its commit (a test or crash hook; needs no bus).

    Raises:
        ValueError: an unsupported URL scheme.
        NotATraceStoreError: the database exists but is not a trace store.
    """
    store = open_trace_store(db_url_or_path)
    effect_bus = EffectBus() if bus else None
    publisher: EffectPublisher | None = effect_bus
    if tap is not None:
        publisher = _TappedBus(effect_bus or _NullBus(), tap)
    if publisher is not None:
        store.with_bus(publisher)
    return Runtime(store, effect_bus, TraceEventStore(store))


class _NullBus:
    def publish(self, event: EffectEvent) -> None:
        return None
