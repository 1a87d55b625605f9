"""The scope manager's core: the scope tree of one trace and its workspace ops.

Every command looks its append intent up first (a retry under the same
``seq`` returns the stored outcome without deciding again), then decides on
aggregates folded from the trace and appends its records as ONE batch under
that intent, with each aggregate's head as the expected head; a lost race is
decided again on fresh folds. Sandboxes are process state the manager holds
beside the aggregates; a scope's lifecycle state is always the aggregate's.
Commands serialize on one re-entrant lock per manager; across managers and
processes the expected heads (and the claims of :mod:`.settle` and
:mod:`.checkpoints`) keep every decision exclusive. Expected failures come
back as ``Failure`` values; bugs and outages raise.

Workspace operations, checkpoints, the merge gate and settlement extend this
core in :mod:`.workspace_ops`, :mod:`.checkpoints`, :mod:`.merge_review` and
:mod:`.settle`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TypeVar

from returns.result import Result

from goatherd.application.ports import Addressed, Sandbox
from goatherd.application.runtime import (
    RuntimeFailure,
    fork_intent,
    lifecycle_intent,
)
from goatherd.application.scope_handle import Scope as Scope  # re-export
from goatherd.application.scope_handle import (
    ScopeEntry,
    attempt,
)
from goatherd.application.workspace_ops import WorkspaceCommands
from goatherd.domain import (
    RootScopeError,
    ScopeAggregate,
    ScopeExistsError,
    ScopeState,
    TraceAggregate,
    owner_of_scope,
    scope_id_for,
)

__all__ = ["ScopeManagerCore"]

TAgg = TypeVar("TAgg", bound=TraceAggregate)
_RETRIES = 5


class ScopeManagerCore(WorkspaceCommands):
    """The scope registry and lifecycle over one trace."""

    # ------------------------------------------------------------ registry

    def create(
        self, owner: str, sandbox: Sandbox | None = None
    ) -> Result[Scope, RuntimeFailure]:
        """Register a root scope for ``owner`` (no record; ``sandbox`` not owned)."""

        def run() -> Scope:
            with self._lock:
                if owner in self._scopes:
                    raise ScopeExistsError(scope_id_for(owner))
                if self._aggregate(owner).parent_owner is not None:
                    raise ScopeExistsError(scope_id_for(owner))
                self._scopes[owner] = ScopeEntry(sandbox, False)
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
            if not self._committed(intent, seq):
                if child_owner in self._scopes:
                    raise ScopeExistsError(scope_id_for(child_owner))
                self._record_fork(parent_owner, child_owner, isolated, intent)
            parent_entry = self._entry(parent_owner)
            if isolated is not None:
                entry = ScopeEntry(isolated, True, snapshot)
            else:
                entry = ScopeEntry(parent_entry.sandbox, False, snapshot)
            self._scopes[child_owner] = entry
            return Scope(self, child_owner)

    def _record_fork(
        self, parent_owner: str, child_owner: str, isolated: Sandbox | None, intent: str
    ) -> None:
        parent_sandbox = self._entry(parent_owner).sandbox
        baseline = parent_sandbox.capture() if parent_sandbox is not None else None
        backend = isolated.backend() if isolated is not None else ""
        path = isolated.address() if isinstance(isolated, Addressed) else ""

        attempts: list[int] = []

        def decide() -> list[TraceAggregate]:
            parent = self._load(ScopeAggregate, parent_owner)
            # First try: the child's path is presumed empty, which the save's
            # expected head (0) proves; a lost race reads it before deciding.
            if attempts:
                child = self._events.load(ScopeAggregate, child_owner)
            else:
                child = ScopeAggregate.bare(child_owner)
            attempts.append(1)
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
                if not self._committed(intent, seq):
                    self._decide_and_save(
                        lambda: self._lifecycle_decision(
                            parent_owner, child_owner, verb
                        ),
                        intent,
                    )
            self._destroy_owned(child_owner)

        return attempt(run)

    def _lifecycle_decision(
        self, parent_owner: str, child_owner: str, verb: str
    ) -> list[TraceAggregate]:
        parent = self._load(ScopeAggregate, parent_owner)
        child = self._load(ScopeAggregate, child_owner)
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
                if not self._committed(intent, seq):

                    def decide() -> list[TraceAggregate] | None:
                        agg = self._load(ScopeAggregate, owner)
                        return [agg] if agg.halt() is not None else None

                    self._decide_and_save(decide, intent)
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
            prior = self._first_record(intent, seq)
            if prior is not None:
                return prior
            record_ids: list[str] = []

            def run_decision() -> list[TraceAggregate]:
                agg = self._load(ScopeAggregate, owner)
                record_ids.append(decide(agg))
                return [agg]

            self._decide_and_save(run_decision, intent)
            return record_ids[-1]
