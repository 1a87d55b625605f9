"""The composition root: open a trace and wire the runtime around it.

:func:`open_runtime` is the one place that builds the store, the effect bus,
the blob store, the runtime model and the scope managers (the CLI and the
demo use it; handlers receive what they need as arguments and never build
it). :func:`scope_manager_for` wires a manager over a store someone else
opened. One :class:`~goatherd.application.RuntimeModel` is shared by every
manager of one store object in this process; a :class:`Runtime` owns what
it opened and closes it once.

It also installs how ``Scope.new(store, owner_id)`` (the seed's manager-less
``NewScope``, also :func:`new_scope`) runs commands: on one context per store
object, built here like a manager's (ADR 0057).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Final

from returns.result import Result

from goatherd.application import (
    FaultHook,
    IntentSequence,
    RecoverOptions,
    RecoveryFailure,
    RecoveryStats,
    RuntimeContext,
    RuntimeModel,
    RuntimeTrace,
    Sandbox,
    SandboxBindings,
    SandboxResolver,
    Scope,
    ScopeManager,
    install_scope_context_factory,
    recover_scopes,
)
from goatherd.domain.effects import EffectEvent
from goatherd.infrastructure.blobs.store import SqlBlobStore
from goatherd.infrastructure.store import (
    EffectPublisher,
    SqlAlchemyTraceStore,
    open_trace_store,
    open_trace_store_read_only,
)

if TYPE_CHECKING:
    from goatherd.infrastructure.bus.effect_bus import EffectBus

__all__ = [
    "EffectTap",
    "Runtime",
    "new_scope",
    "open_runtime",
    "runtime_context_for",
    "runtime_model_for",
    "scope_manager_for",
]

_GIT_BACKEND: Final = "git"
"""``gitstate.GIT_BACKEND``, spelled here: importing the sandbox package loads
every backend, which a command that only reads the trace never needs."""

EffectTap = Callable[[EffectEvent], None]
"""Called synchronously in the appending thread after each published event."""


def _shared(store: SqlAlchemyTraceStore) -> tuple[RuntimeModel, SqlBlobStore]:
    model = store.shared("goatherd.runtime_model", lambda: RuntimeModel(store))
    blobs = store.shared("goatherd.blob_store", lambda: SqlBlobStore(store))
    return model, blobs


def runtime_model_for(store: SqlAlchemyTraceStore) -> RuntimeModel:
    """Return this process's runtime model of ``store`` (one per store object)."""
    return _shared(store)[0]


def recorded_worktree(scope_id: str, backend: str, path: str) -> Sandbox | None:
    """Adopt an isolated scope's recorded git worktree, only to remove it.

    The teardown resolver of every context: a plain manager (no resolver)
    that ends an isolated scope another process forked still removes the
    worktree goatherd created there. Only an absolute path whose ``.git`` file
    points into ``<repo>/.git/worktrees/<name>``, and whose entry there points
    back at it, is adopted (nothing is run to find out); anything else is
    left alone.
    """
    del scope_id
    if backend != _GIT_BACKEND or not path or not os.path.isabs(path):
        return None
    pointer = Path(path, ".git")
    try:
        text = pointer.read_text(encoding="utf-8").strip()
    except OSError:
        return None
    if not text.startswith("gitdir: "):
        return None
    entry = Path(text.removeprefix("gitdir: "))
    if not entry.is_absolute() or entry.parent.name != "worktrees":
        return None
    if entry.parent.parent.name != ".git":
        return None
    try:
        back = Path(entry, "gitdir").read_text(encoding="utf-8").strip()
    except OSError:
        return None
    if os.path.realpath(back) != os.path.realpath(pointer):
        return None
    from goatherd.infrastructure.sandbox import new_worktree_sandbox

    return new_worktree_sandbox(entry.parent.parent.parent, path)


def runtime_context_for(
    store: SqlAlchemyTraceStore,
    *,
    resolver: SandboxResolver | None = None,
    faults: FaultHook | None = None,
    sequence: IntentSequence | None = None,
) -> RuntimeContext:
    """Return the command handlers' dependencies over ``store``.

    Args:
        store: the trace store.
        resolver: re-adopts sandboxes of scopes this process holds no object
            for (``None``: only sandboxes passed to create/fork are used).
        faults: a hook called at every write boundary (tests inject crashes).
        sequence: the intent sequence (default: a fresh, randomly seeded one).
    """
    model, blobs = _shared(store)
    return RuntimeContext(
        model=model,
        blobs=blobs,
        sandboxes=SandboxBindings(resolver, teardown=recorded_worktree),
        sequence=sequence or IntentSequence(),
        faults=faults,
    )


def scope_manager_for(
    store: SqlAlchemyTraceStore,
    *,
    resolver: SandboxResolver | None = None,
    faults: FaultHook | None = None,
    sequence: IntentSequence | None = None,
) -> ScopeManager:
    """Return a scope manager over ``store`` (every answer read from its trace)."""
    return ScopeManager(
        runtime_context_for(store, resolver=resolver, faults=faults, sequence=sequence)
    )


def new_scope(store: SqlAlchemyTraceStore, owner_id: str) -> Scope:
    """Return ``owner_id``'s scope on ``store`` without a manager (``Scope.new``).

    The seed's ``NewScope(store, ownerID)``; chain ``.with_sandbox(sb, owns)``.
    A manager, recovery or another process on the trace sees the same scope.
    """
    return Scope.new(store, owner_id)


def _scope_context(store: RuntimeTrace) -> RuntimeContext:
    if not isinstance(store, SqlAlchemyTraceStore):
        raise TypeError(
            "Scope.new: store must be a goatherd trace store (SQLiteTraceStore, "
            f"open_trace_store(...)), got {type(store).__name__}"
        )
    return store.shared("goatherd.scope_context", lambda: runtime_context_for(store))


install_scope_context_factory(_scope_context)


@dataclass(slots=True)
class Runtime:
    """An open trace with the runtime wired around it.

    Attributes:
        store: the kernel trace store.
        bus: the effect bus the store publishes to (``None``: no bus).
    """

    store: SqlAlchemyTraceStore
    bus: EffectBus | None
    _closed: bool = field(default=False, repr=False)

    @property
    def model(self) -> RuntimeModel:
        """This process's runtime model of the trace."""
        return runtime_model_for(self.store)

    def new_manager(
        self,
        resolver: SandboxResolver | None = None,
        *,
        faults: FaultHook | None = None,
    ) -> ScopeManager:
        """Return a scope manager over this trace."""
        return scope_manager_for(self.store, resolver=resolver, faults=faults)

    def recover(
        self,
        resolver: SandboxResolver | None = None,
        stats: RecoveryStats | None = None,
    ) -> Result[ScopeManager, RecoveryFailure]:
        """Fold the trace into a manager and re-adopt sandboxes (``recover_scopes``)."""
        return recover_scopes(
            runtime_context_for(self.store), RecoverOptions(resolver, stats)
        )

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
    read_only: bool = False,
) -> Runtime:
    """Open (creating if absent) the trace and wire the runtime around it.

    Args:
        db_url_or_path: a path (SQLite) or an SQLAlchemy URL.
        bus: publish every committed path entry on a fresh :class:`EffectBus`.
        tap: also called with every published event, synchronously, right
            after its commit (a test or crash hook; needs no bus).
        read_only: open an EXISTING trace with the read-only opener (no bus,
            no snapshot writes): recovery and queries work, every command
            that would append fails with ``ReadOnlyStoreError``.

    Raises:
        ValueError: an unsupported URL scheme.
        NotATraceStoreError: the database exists but is not a trace store
            (read-only: also a missing or empty one).
    """
    if read_only:
        store = open_trace_store_read_only(db_url_or_path)
        return Runtime(store, None)
    store = open_trace_store(db_url_or_path)
    from goatherd.infrastructure.bus.effect_bus import EffectBus

    effect_bus = EffectBus() if bus else None
    publisher: EffectPublisher | None = effect_bus
    if tap is not None:
        publisher = _TappedBus(effect_bus or _NullBus(), tap)
    if publisher is not None:
        store.with_bus(publisher)
    return Runtime(store, effect_bus)


class _NullBus:
    def publish(self, event: EffectEvent) -> None:
        return None
