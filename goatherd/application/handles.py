"""The seed's scope-level API: the :class:`Scope` and :class:`RetainedOutput` handles.

A handle is a name (an owner path, an output id) plus the
:class:`~goatherd.application.RuntimeContext` it runs commands with; it holds
nothing else. Every property reads the caught-up runtime model (the fold of
the trace), every command runs its handler in
:mod:`goatherd.application.commands` and returns a ``returns.Result`` whose
failure is that command's closed union. The same classes serve both ways of
working:

- through a :class:`~goatherd.application.ScopeManager` (``mgr.create``,
  ``mgr.fork``, ``mgr.get``): the handles share the manager's context;
- without one, as the seed's ``NewScope(store, ownerID).WithSandbox(sb, owns)``:
  ``Scope.new(store, owner_id).with_sandbox(sb, owns=False)``. The context
  comes from the composition root (``goatherd.infrastructure.bootstrap``
  installs its factory here when it is imported, which it is before any store
  can exist), one per store object, so every manager-less handle of a store
  in this process shares its sandbox bindings.

Either way the records and the aggregates are the same, so a scope made one
way is visible to the other, to recovery and to any other process on the
trace (ADR 0057). :class:`RetainedOutput` lives in ``output_handle`` and is
re-exported here.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeAlias

from returns.result import Result, safe

from goatherd.application.commands import checkpoints as cp_cmd
from goatherd.application.commands import outputs, scopes, workspace
from goatherd.application.commands.context import RuntimeContext
from goatherd.application.errors import SandboxOwnershipError
from goatherd.application.failures import (
    CHECKPOINT_FAILURES,
    FACT_FAILURES,
    FORK_FAILURES,
    HALT_FAILURES,
    LIFECYCLE_FAILURES,
    RESTORE_FAILURES,
    SEAL_FAILURES,
    WORKSPACE_FAILURES,
    CheckpointFailure,
    FactFailure,
    ForkFailure,
    HaltFailure,
    LifecycleFailure,
    RestoreFailure,
    SealFailure,
    WorkspaceFailure,
)
from goatherd.application.output_handle import RetainedOutput
from goatherd.application.ports import Sandbox
from goatherd.application.runtime import Checkpoint, RuntimeTrace
from goatherd.domain import (
    ScopeAggregate,
    ScopeExistsError,
    ScopeState,
    WorkspaceState,
    scope_id_for,
)

__all__ = [
    "RetainedOutput",
    "Scope",
    "ScopeContextFactory",
    "install_scope_context_factory",
]

ScopeContextFactory: TypeAlias = Callable[[RuntimeTrace], RuntimeContext]
"""``store -> context``: how ``Scope.new`` runs commands on a store."""

_FACTORY: list[ScopeContextFactory] = []
_OWN_STORES = "goatherd.infrastructure."
_COMPOSITION_ROOT = "goatherd.infrastructure.bootstrap"


def install_scope_context_factory(factory: ScopeContextFactory) -> None:
    """Install how ``Scope.new`` turns a store into a context.

    The composition root calls this once, when it is imported; the
    application layer cannot build a blob store or a store itself.
    """
    _FACTORY[:] = [factory]


def _context_for(store: RuntimeTrace) -> RuntimeContext:
    if not _FACTORY and type(store).__module__.startswith(_OWN_STORES):
        # goatherd's own store, its package imported lazily: its composition
        # root installs the factory when loaded (by name: layers point inward).
        importlib.import_module(_COMPOSITION_ROOT)
    if not _FACTORY:
        raise RuntimeError(
            "Scope.new needs goatherd's composition root: import "
            "goatherd.infrastructure (the package of every trace store) first"
        )
    return _FACTORY[0](store)


def _check_owner(owner_id: object) -> str:
    if not isinstance(owner_id, str):
        raise TypeError(
            f"Scope.new: owner_id must be a str, got {type(owner_id).__name__}"
        )
    if not owner_id:
        raise ValueError("Scope.new: owner_id is empty")
    return owner_id


class Scope:
    """A scope: its state read from the trace, its sandbox bound in this process."""

    def __init__(self, context: RuntimeContext, owner: str) -> None:
        """Bind a handle on ``owner``'s scope (``Scope.new`` or a manager make one)."""
        self._ctx = context
        self._owner = owner
        self._root_on_use = False

    @classmethod
    def new(cls, store: RuntimeTrace, owner_id: str) -> Scope:
        """Return ``owner_id``'s scope on ``store``, without a manager.

        Nothing is recorded yet. An owner the trace does not know becomes a
        root scope (``scope.created``) on the first :meth:`with_sandbox` or
        command, so the root's record names the sandbox it works in; an owner
        the trace knows (made here, by a manager or by another process) is
        simply that scope.

        Raises:
            TypeError: ``store`` is no goatherd trace store, or ``owner_id``
                is no string.
            ValueError: ``owner_id`` is empty.
        """
        scope = cls(_context_for(store), _check_owner(owner_id))
        scope._root_on_use = True
        return scope

    def __repr__(self) -> str:
        """Show the id and state."""
        return f"Scope({self.id!r}, state={self.state.value!r})"

    def __eq__(self, other: object) -> bool:
        """Handles on the same owner are equal."""
        return isinstance(other, Scope) and other._owner == self._owner

    def __hash__(self) -> int:
        """Hash by owner."""
        return hash(self._owner)

    def _value(self) -> ScopeAggregate:
        self._ctx.refresh()
        return self._ctx.scope(self._owner)

    def _ensure(self, sandbox: Sandbox | None = None) -> None:
        """Record a ``Scope.new`` owner the trace does not know as a root."""
        if not self._root_on_use:
            return
        self._ctx.refresh()
        if not self._ctx.scope(self._owner).listed:
            try:
                scopes.create_root(self._ctx, self._owner, sandbox)
            except ScopeExistsError:
                self._ctx.refresh()  # another handle or process was first
        self._root_on_use = False

    def _handle(self, owner: str) -> Scope:
        return Scope(self._ctx, owner)

    # ------------------------------------------------------------ reads

    @property
    def context(self) -> RuntimeContext:
        """The context its commands run with."""
        return self._ctx

    @property
    def id(self) -> str:
        """The scope id (``scope:<owner>``)."""
        return scope_id_for(self._owner)

    @property
    def owner_id(self) -> str:
        """The trace owner path the scope writes to."""
        return self._owner

    @property
    def state(self) -> ScopeState:
        """The lifecycle state (``active`` for an owner not recorded yet)."""
        return self._value().state

    @property
    def fork_point(self) -> str:
        """The fork record's id (``""`` for a root)."""
        return self._value().fork_point

    @property
    def parent(self) -> Scope | None:
        """The parent scope (``None`` for a root)."""
        parent = self._value().parent_owner
        return None if parent is None else self._handle(parent)

    @property
    def children(self) -> list[Scope]:
        """The forked children, in fork order."""
        return [self._handle(kid) for kid in self._value().children]

    @property
    def sandbox(self) -> Sandbox | None:
        """The sandbox the scope works in here (``None``: pure-causal here)."""
        self._ctx.refresh()
        binding = self._ctx.binding(self._owner)
        return None if binding is None else binding.sandbox

    @property
    def owns_sandbox(self) -> bool:
        """Whether merge/discard/halt destroy the sandbox (isolated children)."""
        value = self._value()
        return value.isolated and not value.sandbox_destroyed

    @property
    def snapshot(self) -> object:
        """The opaque value given at fork in this process (never persisted)."""
        return self._ctx.fork_values.get(self._owner)

    def baseline(self) -> WorkspaceState | None:
        """The parent's state captured at fork (``None`` if none)."""
        return self._value().baseline

    def checkpoints(self) -> list[Checkpoint]:
        """The scope's unpruned checkpoints, oldest sequence first."""
        return [
            cp_cmd.checkpoint_view(self._ctx, cp)
            for cp in cp_cmd.checkpoints_of(self._ctx, self.id)
        ]

    def latest_checkpoint(self) -> Checkpoint | None:
        """The scope's valid checkpoint with the highest sequence, if any."""
        return cp_cmd.latest_checkpoint(self._ctx, self.id)

    # ------------------------------------------------------------ sandbox

    def with_sandbox(self, sandbox: Sandbox | None, owns: bool = False) -> Scope:
        """Use ``sandbox`` for the scope's workspace in this process; return self.

        ``owns`` says whether merge, discard and halt destroy it, and must be
        what the trace records: ``True`` for a child forked isolated,
        ``False`` for a root (no record says a root owns one, so a restart
        could not know to destroy it) and for a shared child (whose workspace
        is its ancestor's). A ``Scope.new`` owner the trace does not know is
        recorded as a root now, with the sandbox's backend and address.

        Raises:
            SandboxOwnershipError: ``owns`` contradicts the trace.
        """
        self._ctx.refresh()
        scope = self._ctx.scope(self._owner)
        if owns != (scope.listed and scope.isolated):
            raise SandboxOwnershipError(_ownership_message(scope, owns))
        self._ensure(sandbox)
        workspace_owner = self._ctx.model.workspace_owner(self._owner)
        owned = self._ctx.scope(workspace_owner).isolated
        self._ctx.sandboxes.bind(workspace_owner, sandbox, owns=owned)
        return self

    # ------------------------------------------------------------ lifecycle

    def fork(
        self, child_owner: str, snapshot: object = None, *, seq: int | None = None
    ) -> Result[Scope, ForkFailure]:
        """Fork a child that works in this scope's workspace (not owning it)."""
        self._ensure()
        forked = self._fork(child_owner, None, seq)
        return forked.map(lambda owner: self._remember_fork(owner, snapshot))

    def fork_isolated(
        self,
        child_owner: str,
        snapshot: object,
        sandbox: Sandbox,
        *,
        seq: int | None = None,
        clean: bool = False,
    ) -> Result[Scope, ForkFailure]:
        """Fork a child that owns ``sandbox`` (created by the caller).

        As the seed's ForkIsolated: the child's sandbox is then reset to this
        scope's workspace at the fork; ``clean=True`` leaves it as the caller
        made it (see :meth:`ScopeManager.fork_isolated`).
        """
        self._ensure()
        forked = self._fork(child_owner, sandbox, seq, populate=not clean)
        return forked.map(lambda owner: self._remember_fork(owner, snapshot))

    @safe(exceptions=FORK_FAILURES)
    def _fork(
        self,
        child: str,
        sandbox: Sandbox | None,
        seq: int | None,
        *,
        populate: bool = False,
    ) -> str:
        owner = scopes.fork(self._ctx, self.id, child, sandbox, seq)
        if populate:
            workspace.populate_fork(self._ctx, owner)
        return owner

    def _remember_fork(self, owner: str, snapshot: object) -> Scope:
        self._ctx.fork_values[owner] = snapshot
        return self._handle(owner)

    def merge(
        self, child: Scope, *, seq: int | None = None
    ) -> Result[None, LifecycleFailure]:
        """Merge ``child`` into this scope (causal only; destroys an owned sandbox)."""
        return self._end_child(child, "merge", seq)

    def discard(
        self, child: Scope, *, seq: int | None = None
    ) -> Result[None, LifecycleFailure]:
        """Discard ``child``; its records remain, semantically abandoned."""
        return self._end_child(child, "discard", seq)

    def _end_child(
        self, child: Scope, verb: str, seq: int | None
    ) -> Result[None, LifecycleFailure]:
        if not isinstance(child, Scope):
            raise TypeError(
                f"{verb}: child must be a Scope, got {type(child).__name__}"
            )
        self._ensure()
        return self._merge_or_discard(child.owner_id, verb, seq)

    @safe(exceptions=LIFECYCLE_FAILURES)
    def _merge_or_discard(self, child: str, verb: str, seq: int | None) -> None:
        scopes.merge_or_discard(self._ctx, self._owner, child, verb, seq)

    def halt(self, *, seq: int | None = None) -> Result[None, HaltFailure]:
        """Halt the scope (supervisor): it becomes ``discarded``."""
        self._ensure()
        return self._halt(seq)

    @safe(exceptions=HALT_FAILURES)
    def _halt(self, seq: int | None) -> None:
        scopes.halt(self._ctx, self.id, seq)

    def inject(
        self, guidance: str, *, seq: int | None = None
    ) -> Result[str, FactFailure]:
        """Record guidance for the scope's next turn; returns the record id."""
        self._ensure()
        return self._inject(guidance, seq)

    @safe(exceptions=FACT_FAILURES)
    def _inject(self, guidance: str, seq: int | None) -> str:
        return scopes.inject(self._ctx, self.id, guidance, seq)

    def append_fact(
        self,
        schema_ref: str,
        kind_label: str,
        payload: Mapping[str, Any],
        *,
        seq: int | None = None,
        caused_by: Sequence[str] = (),
    ) -> Result[str, FactFailure]:
        """Append one capture of the caller's own schema; returns its record id.

        The record cites ``caused_by`` when given, else this scope's path
        head (after a fork, the fork record: ADR 0087).
        """
        self._ensure()
        return self._append_fact(schema_ref, kind_label, payload, seq, caused_by)

    @safe(exceptions=FACT_FAILURES)
    def _append_fact(
        self,
        schema_ref: str,
        kind_label: str,
        payload: Mapping[str, Any],
        seq: int | None,
        caused_by: Sequence[str],
    ) -> str:
        return scopes.append_fact(
            self._ctx, self.id, schema_ref, kind_label, payload, seq, caused_by
        )

    def record_run_completed(
        self, payload: Mapping[str, Any], *, seq: int | None = None
    ) -> Result[str, FactFailure]:
        """Record a reversible run's outcome on this scope's path."""
        self._ensure()
        return self._record_run_completed(payload, seq)

    @safe(exceptions=FACT_FAILURES)
    def _record_run_completed(self, payload: Mapping[str, Any], seq: int | None) -> str:
        return scopes.record_run_completed(self._ctx, self.id, payload, seq)

    # ------------------------------------------------------------ workspace

    def capture_workspace(self) -> Result[WorkspaceState, WorkspaceFailure]:
        """Capture the workspace (reusable state); the record is advisory."""
        self._ensure()
        return self._capture()

    @safe(exceptions=WORKSPACE_FAILURES)
    def _capture(self) -> WorkspaceState:
        return workspace.capture_workspace(self._ctx, self.id)

    def apply_workspace(self, state: WorkspaceState) -> Result[None, WorkspaceFailure]:
        """Reset the workspace to ``state`` (not consumed); the record is advisory."""
        self._ensure()
        return self._apply(state)

    @safe(exceptions=WORKSPACE_FAILURES)
    def _apply(self, state: WorkspaceState) -> None:
        workspace.apply_workspace(self._ctx, self.id, state)

    def diff_workspace(
        self, state: WorkspaceState, max_lines: int = 0
    ) -> Result[tuple[str, list[str]], WorkspaceFailure]:
        """Diff the workspace against ``state`` (records nothing)."""
        self._ensure()
        return self._diff(state, max_lines)

    @safe(exceptions=WORKSPACE_FAILURES)
    def _diff(self, state: WorkspaceState, max_lines: int) -> tuple[str, list[str]]:
        return workspace.diff_workspace(self._ctx, self.id, state, max_lines)

    # ------------------------------------------------------------ checkpoints

    def create_checkpoint(
        self, snapshot: bytes = b"", *, seq: int | None = None
    ) -> Result[Checkpoint, CheckpointFailure]:
        """Capture the workspace, store ``snapshot``, record the checkpoint."""
        self._ensure()
        return self._create_checkpoint(snapshot, seq).map(self._checkpoint_value)

    @safe(exceptions=CHECKPOINT_FAILURES)
    def _create_checkpoint(self, snapshot: bytes, seq: int | None) -> str:
        return cp_cmd.create_checkpoint(self._ctx, self.id, snapshot, seq)

    def _checkpoint_value(self, checkpoint_id: str) -> Checkpoint:
        self._ctx.model.refresh()
        found = self._ctx.model.checkpoint(checkpoint_id)
        return cp_cmd.checkpoint_view(self._ctx, found)

    def restore_checkpoint(
        self, checkpoint: Checkpoint | str, *, seq: int | None = None
    ) -> Result[bytes, RestoreFailure]:
        """Restore one of this scope's checkpoints exactly once; return its snapshot.

        ``checkpoint`` is the value :meth:`create_checkpoint` returned, or its
        id. Another scope's checkpoint is refused
        (``CheckpointScopeMismatchError``) before anything changes. ``seq``
        names the attempt: a retry after a crash passes the same one (ADR
        0056 says what it returns once the snapshot was released).
        """
        self._ensure()
        cp_id = checkpoint.id if isinstance(checkpoint, Checkpoint) else checkpoint
        if not isinstance(cp_id, str):
            raise TypeError(
                "restore_checkpoint: checkpoint must be a Checkpoint or its id, "
                f"got {type(checkpoint).__name__}"
            )
        return self._restore(cp_id, self._ctx.next_seq(seq), seq)

    @safe(exceptions=RESTORE_FAILURES)
    def _restore(self, cp_id: str, attempt: int, retry: int | None) -> bytes:
        return cp_cmd.restore_checkpoint(
            self._ctx, cp_id, attempt, retry, scope_owner=self._owner
        )

    # ------------------------------------------------------------ outputs

    def seal(self, *, seq: int | None = None) -> Result[RetainedOutput, SealFailure]:
        """Freeze the workspace's changes as an output (the scope stays active)."""
        self._ensure()
        return self._seal(seq).map(lambda oid: RetainedOutput(self._ctx, oid))

    @safe(exceptions=SEAL_FAILURES)
    def _seal(self, seq: int | None) -> str:
        return outputs.seal(self._ctx, self.id, seq)


def _ownership_message(scope: ScopeAggregate, owns: bool) -> str:
    head = f"with_sandbox(owns={owns}): {scope.scope_id}"
    if scope.listed and scope.isolated:
        return (
            f"{head} was forked isolated and owns its sandbox (merge, discard "
            "and halt destroy it); pass owns=True"
        )
    if scope.listed and scope.parent_owner is not None:
        return (
            f"{head} works in its ancestor's workspace and owns no sandbox; "
            "pass owns=False"
        )
    return (
        f"{head} is a root, and a root never owns its sandbox (no record says "
        "so, so a restart could not know to destroy it); pass owns=False, or "
        "give a child a sandbox it owns with fork_isolated"
    )
