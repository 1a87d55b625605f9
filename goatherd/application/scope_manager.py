"""The scope manager: the scope tree, checkpoints and retained outputs of one trace.

Every command decides on aggregates folded from the trace and appends its
records as ONE batch under its append-intent id; the intent is looked up
first, so a retry (same ``seq``) returns the stored outcome without deciding
again. Sandboxes are process state the manager holds beside the aggregates:
a scope's lifecycle state is always the aggregate's. Commands serialize on one
re-entrant lock per manager (settlement's validate -> act -> mark included).
Expected failures come back as ``Failure`` values; bugs and outages raise.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TypeVar

from returns.result import Failure, Result, Success

from goatherd.application.errors import NoSandboxError, SandboxError
from goatherd.application.ports import Addressed, Sandbox
from goatherd.application.runtime import (
    Checkpoint,
    IntentSequence,
    RuntimeEventStore,
    RuntimeFailure,
    checkpoint_intent,
    fork_intent,
    lifecycle_intent,
    restore_intent,
    workspace_intent,
)
from goatherd.domain import (
    CheckpointAggregate,
    CheckpointNotFoundError,
    CheckpointNotRestorableError,
    CheckpointState,
    OrdinalConflictError,
    RootScopeError,
    RuntimeRuleError,
    ScopeAggregate,
    ScopeExistsError,
    ScopeNotFoundError,
    ScopeState,
    SnapshotTooLargeError,
    TraceAggregate,
    TraceStoreError,
    WorkspaceState,
    checkpoint_id_for,
    owner_of_scope,
    scope_id_for,
)

__all__ = ["Scope", "ScopeManagerCore"]

T = TypeVar("T")
_RETRIES = 3
_EXPECTED = (RuntimeRuleError, SandboxError, TraceStoreError)


def attempt(fn: Callable[[], T]) -> Result[T, RuntimeFailure]:
    """Run ``fn``; expected failures become ``Failure`` values, bugs raise."""
    try:
        return Success(fn())
    except _EXPECTED as error:
        return Failure(error)


@dataclass(slots=True)
class _ScopeEntry:
    sandbox: Sandbox | None = None
    owns_sandbox: bool = False
    snapshot: object = None


@dataclass(slots=True)
class _CheckpointEntry:
    seq: int
    workspace: WorkspaceState
    snapshot: bytes
    created_at: datetime
    invalid: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)


class Scope:
    """A handle on one scope: its sandbox here, its state in the trace."""

    def __init__(self, manager: ScopeManagerCore, owner: str) -> None:
        """Bind the handle to ``manager`` (use the manager's commands to get one)."""
        self._manager = manager
        self._owner = owner

    def __repr__(self) -> str:
        """Show the id and state."""
        return f"Scope({self.id!r}, state={self.state.value!r})"

    def __eq__(self, other: object) -> bool:
        """Handles on the same owner are equal."""
        return isinstance(other, Scope) and other._owner == self._owner

    def __hash__(self) -> int:
        """Hash by owner."""
        return hash(self._owner)

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
        """The lifecycle state (from the aggregate)."""
        return self._manager._aggregate(self._owner).state

    @property
    def fork_point(self) -> str:
        """The fork record's id (``""`` for a root)."""
        return self._manager._aggregate(self._owner).fork_point

    @property
    def parent(self) -> Scope | None:
        """The parent scope (``None`` for a root)."""
        parent = self._manager._aggregate(self._owner).parent_owner
        return None if parent is None else Scope(self._manager, parent)

    @property
    def children(self) -> list[Scope]:
        """The forked children, in fork order."""
        agg = self._manager._aggregate(self._owner)
        return [Scope(self._manager, owner) for owner in agg.children]

    @property
    def sandbox(self) -> Sandbox | None:
        """The scope's sandbox (``None``: pure-causal)."""
        return self._manager._entry(self._owner).sandbox

    @property
    def owns_sandbox(self) -> bool:
        """Whether merge/discard/halt destroy the sandbox."""
        return self._manager._entry(self._owner).owns_sandbox

    @property
    def snapshot(self) -> object:
        """The opaque value given at fork (never persisted)."""
        return self._manager._entry(self._owner).snapshot

    def baseline(self) -> WorkspaceState | None:
        """The parent's state captured at fork (``None`` if none)."""
        return self._manager._aggregate(self._owner).baseline

    def merge(self, child: Scope) -> Result[None, RuntimeFailure]:
        """Merge ``child`` into this scope (causal only)."""
        return self._manager._merge_or_discard(self._owner, child.owner_id, "merge")

    def discard(self, child: Scope) -> Result[None, RuntimeFailure]:
        """Discard ``child``; its records remain, semantically abandoned."""
        return self._manager._merge_or_discard(self._owner, child.owner_id, "discard")

    def halt(self, *, seq: int | None = None) -> Result[None, RuntimeFailure]:
        """Halt the scope (supervisor): it becomes ``discarded``."""
        return self._manager.halt(self.id, seq=seq)

    def inject(
        self, guidance: str, *, seq: int | None = None
    ) -> Result[str, RuntimeFailure]:
        """Record guidance for the scope's next turn; returns the record id."""
        return self._manager.inject(self.id, guidance, seq=seq)

    def append_fact(
        self,
        schema_ref: str,
        kind_label: str,
        payload: Mapping[str, object],
        *,
        seq: int | None = None,
    ) -> Result[str, RuntimeFailure]:
        """Append one free-form capture on the scope's path; returns its record id."""
        return self._manager.append_fact(
            self.id, schema_ref, kind_label, payload, seq=seq
        )

    def capture_workspace(self) -> Result[WorkspaceState, RuntimeFailure]:
        """Capture the workspace (reusable state); the record is advisory."""
        return self._manager.capture_workspace(self.id)

    def apply_workspace(self, state: WorkspaceState) -> Result[None, RuntimeFailure]:
        """Reset the workspace to ``state`` (not consumed); the record is advisory."""
        return self._manager.apply_workspace(self.id, state)

    def diff_workspace(
        self, state: WorkspaceState, max_lines: int = 0
    ) -> Result[tuple[str, list[str]], RuntimeFailure]:
        """Diff the workspace against ``state`` (records nothing)."""
        return self._manager.diff_workspace(self.id, state, max_lines)


class ScopeManagerCore:
    """Registry, loading and saving shared by the manager's command groups."""

    def __init__(
        self,
        events: RuntimeEventStore,
        *,
        sequence: IntentSequence | None = None,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        """Manage scopes over ``events`` (an empty registry; see recovery)."""
        self._events = events
        self._sequence = sequence or IntentSequence()
        self._clock = clock or (lambda: datetime.now(UTC))
        self._lock = threading.RLock()
        self._scopes: dict[str, _ScopeEntry] = {}
        self._aggs: dict[str, ScopeAggregate] = {}
        self._checkpoints: dict[str, _CheckpointEntry] = {}

    # ------------------------------------------------------------ internals

    def _next_seq(self, seq: int | None) -> int:
        return self._sequence.next() if seq is None else seq

    def _entry(self, owner: str) -> _ScopeEntry:
        entry = self._scopes.get(owner)
        if entry is None:
            raise ScopeNotFoundError(scope_id_for(owner))
        return entry

    def _aggregate(self, owner: str) -> ScopeAggregate:
        agg = self._aggs.get(owner)
        if agg is None:
            agg = self._events.load(ScopeAggregate, owner)
            self._aggs[owner] = agg
        return agg

    def _owner_of(self, scope_id: str) -> str:
        owner = owner_of_scope(scope_id)
        if owner not in self._scopes:
            raise ScopeNotFoundError(scope_id)
        return owner

    def _committed(self, intent: str) -> bool:
        return self._events.trace.read_append_intent(intent) is not None

    def _refresh(self, *aggs: TraceAggregate) -> None:
        for agg in aggs:
            if isinstance(agg, ScopeAggregate):
                self._aggs[agg.id] = self._events.load(ScopeAggregate, agg.id)

    def _save(self, aggs: Sequence[TraceAggregate], intent: str) -> None:
        """Save; on any failure drop the half-decided aggregates from the cache."""
        try:
            self._events.save(aggs, intent)
        except BaseException:
            self._refresh(*aggs)
            raise

    def _decide_and_save(
        self, decide: Callable[[], Sequence[TraceAggregate] | None], intent: str
    ) -> None:
        """Run ``decide`` on fresh aggregates and save, retrying lost OCC races."""
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
            self._refresh(agg)

    # ------------------------------------------------------------ registry

    def create(
        self, owner: str, sandbox: Sandbox | None = None
    ) -> Result[Scope, RuntimeFailure]:
        """Register a root scope for ``owner`` (no record; ``sandbox`` not owned)."""

        def run() -> Scope:
            with self._lock:
                if owner in self._scopes:
                    raise ScopeExistsError(scope_id_for(owner))
                agg = self._events.load(ScopeAggregate, owner)
                if agg.parent_owner is not None:
                    raise ScopeExistsError(scope_id_for(owner))
                self._aggs[owner] = agg
                self._scopes[owner] = _ScopeEntry(sandbox, False)
                return Scope(self, owner)

        return attempt(run)

    def get(self, scope_id: str) -> Scope | None:
        """Return the scope registered under ``scope_id``, if any."""
        owner = owner_of_scope(scope_id)
        return Scope(self, owner) if owner in self._scopes else None

    def all_scopes(self) -> list[Scope]:
        """Return every registered scope, in registration order."""
        return [Scope(self, owner) for owner in list(self._scopes)]

    def active_scopes(self) -> list[Scope]:
        """Return the registered scopes that are active."""
        return [s for s in self.all_scopes() if s.state is ScopeState.ACTIVE]

    def prune_terminal(self) -> int:
        """Unregister merged and discarded scopes; return how many."""
        with self._lock:
            gone = [o for o in self._scopes if not self._aggregate(o).is_active]
            for owner in gone:
                del self._scopes[owner]
                self._aggs.pop(owner, None)
            return len(gone)

    def destroy_scope_sandbox(self, scope_id: str) -> Result[None, RuntimeFailure]:
        """Tear down an OWNED sandbox without changing the lifecycle state."""

        def run() -> None:
            entry = self._entry(self._owner_of(scope_id))
            if entry.sandbox is not None and entry.owns_sandbox:
                entry.sandbox.destroy()

        return attempt(run)

    # ------------------------------------------------------------ lifecycle

    def fork(
        self,
        parent_id: str,
        child_owner: str,
        snapshot: object = None,
        *,
        seq: int | None = None,
    ) -> Result[Scope, RuntimeFailure]:
        """Fork a child sharing (not owning) the parent's sandbox."""
        return attempt(lambda: self._fork(parent_id, child_owner, snapshot, None, seq))

    def fork_isolated(
        self,
        parent_id: str,
        child_owner: str,
        snapshot: object,
        sandbox: Sandbox,
        *,
        seq: int | None = None,
    ) -> Result[Scope, RuntimeFailure]:
        """Fork a child that owns ``sandbox`` (the caller created and populated it)."""
        return attempt(
            lambda: self._fork(parent_id, child_owner, snapshot, sandbox, seq)
        )

    def _fork(
        self,
        parent_id: str,
        child_owner: str,
        snapshot: object,
        isolated: Sandbox | None,
        seq: int | None,
    ) -> Scope:
        with self._lock:
            parent_owner = self._owner_of(parent_id)
            intent = fork_intent(parent_owner, child_owner, self._next_seq(seq))
            if not self._committed(intent):
                if child_owner in self._scopes:
                    raise ScopeExistsError(scope_id_for(child_owner))
                self._record_fork(parent_owner, child_owner, isolated, intent)
            self._refresh(self._aggregate(parent_owner))
            child = self._events.load(ScopeAggregate, child_owner)
            self._aggs[child_owner] = child
            parent_entry = self._entry(parent_owner)
            if isolated is not None:
                entry = _ScopeEntry(isolated, True, snapshot)
            else:
                entry = _ScopeEntry(parent_entry.sandbox, False, snapshot)
            self._scopes[child_owner] = entry
            return Scope(self, child_owner)

    def _record_fork(
        self, parent_owner: str, child_owner: str, isolated: Sandbox | None, intent: str
    ) -> None:
        parent_sandbox = self._entry(parent_owner).sandbox
        baseline = parent_sandbox.capture() if parent_sandbox is not None else None
        backend = isolated.backend() if isolated is not None else ""
        path = isolated.address() if isinstance(isolated, Addressed) else ""

        def decide() -> list[TraceAggregate]:
            parent = self._events.load(ScopeAggregate, parent_owner)
            child = self._events.load(ScopeAggregate, child_owner)
            parent.fork(
                child,
                baseline=baseline,
                isolated=isolated is not None,
                sandbox_backend=backend,
                sandbox_path=path,
            )
            return [parent, child]

        self._decide_and_save(decide, intent)

    def merge(
        self, child_id: str, *, seq: int | None = None
    ) -> Result[None, RuntimeFailure]:
        """Merge the child into its parent (causal only)."""
        return self._by_child(child_id, "merge", seq)

    def discard(
        self, child_id: str, *, seq: int | None = None
    ) -> Result[None, RuntimeFailure]:
        """Discard the child (destroys an owned sandbox)."""
        return self._by_child(child_id, "discard", seq)

    def _by_child(
        self, child_id: str, verb: str, seq: int | None
    ) -> Result[None, RuntimeFailure]:
        def parent_of() -> str:
            owner = self._owner_of(child_id)
            parent = self._aggregate(owner).parent_owner
            if parent is None:
                raise RootScopeError(child_id)
            return parent

        parent = attempt(parent_of)
        return parent.bind(
            lambda p: self._merge_or_discard(p, owner_of_scope(child_id), verb, seq)
        )

    def _merge_or_discard(
        self, parent_owner: str, child_owner: str, verb: str, seq: int | None = None
    ) -> Result[None, RuntimeFailure]:
        def run() -> None:
            with self._lock:
                self._entry(parent_owner)
                self._entry(child_owner)
                intent = lifecycle_intent(
                    verb, parent_owner, child_owner, self._next_seq(seq)
                )
                if not self._committed(intent):
                    self._decide_and_save(
                        lambda: self._lifecycle_decision(
                            parent_owner, child_owner, verb
                        ),
                        intent,
                    )
                self._refresh(
                    self._aggregate(parent_owner), self._aggregate(child_owner)
                )
            self._destroy_owned(child_owner)

        return attempt(run)

    def _lifecycle_decision(
        self, parent_owner: str, child_owner: str, verb: str
    ) -> list[TraceAggregate]:
        parent = self._events.load(ScopeAggregate, parent_owner)
        child = self._events.load(ScopeAggregate, child_owner)
        if verb == "merge":
            parent.merge(child)
        else:
            parent.discard(child)
        return [parent, child]

    def _destroy_owned(self, owner: str) -> None:
        entry = self._scopes.get(owner)
        if entry is not None and entry.sandbox is not None and entry.owns_sandbox:
            entry.sandbox.destroy()

    def halt(
        self, scope_id: str, *, seq: int | None = None
    ) -> Result[None, RuntimeFailure]:
        """Halt a scope: record ``supervisor.halt`` and mark it discarded."""

        def run() -> None:
            with self._lock:
                owner = self._owner_of(scope_id)
                intent = lifecycle_intent("halt", owner, "", self._next_seq(seq))
                if not self._committed(intent):

                    def decide() -> list[TraceAggregate] | None:
                        agg = self._events.load(ScopeAggregate, owner)
                        return [agg] if agg.halt() is not None else None

                    self._decide_and_save(decide, intent)
                self._refresh(self._aggregate(owner))
            self._destroy_owned(owner)

        return attempt(run)

    def inject(
        self, scope_id: str, guidance: str, *, seq: int | None = None
    ) -> Result[str, RuntimeFailure]:
        """Record guidance on an active scope; return the record id."""
        return attempt(
            lambda: self._own_record(
                scope_id, "inject", seq, lambda agg: agg.inject(guidance).record_id
            )
        )

    def append_fact(
        self,
        scope_id: str,
        schema_ref: str,
        kind_label: str,
        payload: Mapping[str, object],
        *,
        seq: int | None = None,
    ) -> Result[str, RuntimeFailure]:
        """Append one capture on the scope's path; return its record id."""
        return attempt(
            lambda: self._own_record(
                scope_id,
                "fact",
                seq,
                lambda agg: agg.append_fact(schema_ref, kind_label, payload).record_id,
            )
        )

    def _own_record(
        self,
        scope_id: str,
        verb: str,
        seq: int | None,
        decide: Callable[[ScopeAggregate], str],
    ) -> str:
        with self._lock:
            owner = self._owner_of(scope_id)
            intent = lifecycle_intent(verb, owner, "", self._next_seq(seq))
            prior = self._events.trace.read_append_intent(intent)
            if prior is not None:
                return prior.fact_ids[0] if prior.fact_ids else ""
            record_ids: list[str] = []

            def run_decision() -> list[TraceAggregate]:
                agg = self._events.load(ScopeAggregate, owner)
                record_ids.append(decide(agg))
                return [agg]

            self._decide_and_save(run_decision, intent)
            self._refresh(self._aggregate(owner))
            return record_ids[-1]

    # ------------------------------------------------------------ workspace

    def _active_sandbox(self, scope_id: str, verb: str) -> tuple[str, Sandbox]:
        owner = self._owner_of(scope_id)
        self._aggregate(owner).require_active(f"cannot {verb} workspace in scope")
        return owner, self._sandbox_of(owner)

    def capture_workspace(
        self, scope_id: str
    ) -> Result[WorkspaceState, RuntimeFailure]:
        """Capture the scope's workspace; records ``workspace.captured`` (advisory)."""

        def run() -> WorkspaceState:
            with self._lock:
                owner, sandbox = self._active_sandbox(scope_id, "capture")
                state = sandbox.capture()
                agg = self._events.load(ScopeAggregate, owner)
                agg.workspace_captured(state)
                seq = self._sequence.next()
                self._advisory(agg, workspace_intent(owner, "workspace:captured", seq))
                self._refresh(agg)
                return state

        return attempt(run)

    def apply_workspace(
        self, scope_id: str, state: WorkspaceState
    ) -> Result[None, RuntimeFailure]:
        """Reset the scope's workspace to ``state``; records ``workspace.applied``."""

        def run() -> None:
            with self._lock:
                owner, sandbox = self._active_sandbox(scope_id, "apply")
                sandbox.apply(state)
                agg = self._events.load(ScopeAggregate, owner)
                agg.workspace_applied(state)
                seq = self._sequence.next()
                self._advisory(agg, workspace_intent(owner, "workspace:applied", seq))
                self._refresh(agg)

        return attempt(run)

    def diff_workspace(
        self, scope_id: str, state: WorkspaceState, max_lines: int = 0
    ) -> Result[tuple[str, list[str]], RuntimeFailure]:
        """Return the sandbox's diff against ``state`` (records nothing)."""

        def run() -> tuple[str, list[str]]:
            _, sandbox = self._active_sandbox(scope_id, "diff")
            return sandbox.diff(state, max_lines)

        return attempt(run)

    # ------------------------------------------------------------ checkpoints

    def create_checkpoint(
        self, scope_id: str, snapshot: bytes = b"", *, seq: int | None = None
    ) -> Result[Checkpoint, RuntimeFailure]:
        """Capture the workspace, persist the blob (hard), record the checkpoint."""
        return attempt(lambda: self._create_checkpoint(scope_id, snapshot, seq))

    def _create_checkpoint(
        self, scope_id: str, snapshot: bytes, seq: int | None
    ) -> Checkpoint:
        with self._lock:
            owner = self._owner_of(scope_id)
            seq = self._next_seq(seq)
            cp_id = checkpoint_id_for(owner, seq)
            intent = checkpoint_intent(owner, seq)
            if not self._committed(intent):
                self._aggregate(owner).require_active("cannot checkpoint scope")
                sandbox = self._sandbox_of(owner)
                limit = self._events.trace.checkpoint_blob_limit
                if len(snapshot) > limit:
                    raise SnapshotTooLargeError(cp_id, len(snapshot), limit)
                state = sandbox.capture()
                created = self._clock()
                self._persist_checkpoint(owner, cp_id, seq, state, snapshot, created)
                self._checkpoints[cp_id] = _CheckpointEntry(
                    seq, state, snapshot, created
                )
            elif cp_id not in self._checkpoints:
                raise CheckpointNotFoundError(cp_id)
            return self._checkpoint_view(cp_id)

    def _persist_checkpoint(
        self,
        owner: str,
        cp_id: str,
        seq: int,
        state: WorkspaceState,
        snapshot: bytes,
        created: datetime,
    ) -> None:
        trace = self._events.trace
        created_ns = int(created.timestamp() * 1e9)
        trace.persist_checkpoint_blob(
            cp_id, scope_id_for(owner), seq, state, snapshot, created_ns
        )

        def decide() -> list[TraceAggregate]:
            scope = self._events.load(ScopeAggregate, owner)
            cp = CheckpointAggregate.bare(cp_id)
            cp.create(scope, state, has_snapshot=bool(snapshot))
            return [cp, scope]

        try:
            self._decide_and_save(decide, checkpoint_intent(owner, seq))
        except BaseException:
            trace.delete_checkpoint_blob(cp_id)
            raise
        self._refresh(self._aggregate(owner))

    def _checkpoint_agg(self, cp_id: str) -> CheckpointAggregate:
        return self._events.load(CheckpointAggregate, cp_id)

    def _checkpoint_view(self, cp_id: str) -> Checkpoint:
        entry = self._checkpoints[cp_id]
        agg = self._checkpoint_agg(cp_id)
        state = CheckpointState.INVALID if entry.invalid else agg.state
        return Checkpoint(
            id=cp_id,
            seq=entry.seq,
            scope_id=agg.scope_id,
            workspace=entry.workspace,
            snapshot=entry.snapshot,
            created_at=entry.created_at,
            state=state,
        )

    def checkpoint(self, checkpoint_id: str) -> Checkpoint | None:
        """Return a checkpoint as it is now, if registered."""
        with self._lock:
            if checkpoint_id not in self._checkpoints:
                return None
            return self._checkpoint_view(checkpoint_id)

    def restore_checkpoint(
        self, checkpoint_id: str, *, seq: int | None = None
    ) -> Result[bytes, RuntimeFailure]:
        """Apply a valid checkpoint to its scope once; return the snapshot."""
        del seq  # the restore intent is the checkpoint's own seq (single use)
        return attempt(lambda: self._restore(checkpoint_id))

    def _restore(self, cp_id: str) -> bytes:
        with self._lock:
            entry = self._checkpoints.get(cp_id)
            if entry is None:
                raise CheckpointNotFoundError(cp_id)
            agg = self._checkpoint_agg(cp_id)
            owner = agg.scope_owner
            if owner not in self._scopes:
                raise ScopeNotFoundError(agg.scope_id)
            intent = restore_intent(owner, entry.seq)
            if entry.invalid:
                raise_invalid(cp_id)
            agg.check_restorable(self._aggregate(owner))
            sandbox = self._sandbox_of(owner)
            try:
                sandbox.apply(entry.workspace)
            except SandboxError:
                entry.invalid = True  # a failed restore burns the checkpoint
                self._events.trace.delete_checkpoint_blob(cp_id)
                raise

            def decide() -> list[TraceAggregate]:
                scope = self._events.load(ScopeAggregate, owner)
                cp = self._checkpoint_agg(cp_id)
                cp.restore(scope)
                return [cp, scope]

            self._decide_and_save(decide, intent)
            self._refresh(self._aggregate(owner))
            snapshot, entry.snapshot = entry.snapshot, b""
            # advisory: the restored record already makes it used
            with contextlib.suppress(TraceStoreError, OSError):
                self._events.trace.delete_checkpoint_blob(cp_id)
            return snapshot

    def latest_checkpoint(self, scope_id: str) -> Checkpoint | None:
        """Return the scope's valid checkpoint with the highest seq, if any."""
        with self._lock:
            owner = owner_of_scope(scope_id)
            mine = sorted(
                (e.seq, cp_id)
                for cp_id, e in self._checkpoints.items()
                if self._checkpoint_agg(cp_id).scope_owner == owner
            )
            for _, cp_id in reversed(mine):
                view = self._checkpoint_view(cp_id)
                if view.state is CheckpointState.VALID:
                    return view
            return None

    def prune_checkpoints(self, scope_id: str) -> None:
        """Forget the scope's checkpoints and delete their blobs (advisory)."""
        with self._lock:
            owner = owner_of_scope(scope_id)
            gone = [
                c
                for c in self._checkpoints
                if self._checkpoint_agg(c).scope_owner == owner
            ]
            for cp_id in gone:
                del self._checkpoints[cp_id]
        for cp_id in gone:
            try:
                self._events.trace.delete_checkpoint_blob(cp_id)
            except (TraceStoreError, OSError):
                continue

    def _register_recovered_checkpoint(
        self, cp_id: str, entry: _CheckpointEntry
    ) -> None:
        self._checkpoints[cp_id] = entry

    def _register_recovered_scope(self, owner: str, entry: _ScopeEntry) -> None:
        self._scopes[owner] = entry


def raise_invalid(cp_id: str) -> None:
    """Raise the not-restorable error for an invalid (burnt or stale) checkpoint."""
    raise CheckpointNotRestorableError(cp_id, CheckpointState.INVALID)
