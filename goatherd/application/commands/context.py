"""What every command handler receives: the model, the trace, blobs, sandboxes.

A :class:`RuntimeContext` is built once per manager by the composition root
(``goatherd.infrastructure.bootstrap``); handlers take it as their first
argument and never build their dependencies. Its helpers are the handful of
steps every command shares: look a scope up on the caught-up model, find the
sandbox of its workspace, draw or reuse a sequence value, check whether a
retried intent already committed, and record a decision.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from goatherd.application.decisions import Decision, record_decision
from goatherd.application.errors import NoSandboxError
from goatherd.application.ports import Sandbox
from goatherd.application.runtime import (
    BlobStore,
    FaultHook,
    IntentSequence,
    RuntimeTrace,
)
from goatherd.application.runtime_model import RuntimeModel
from goatherd.application.sandboxes import SandboxBinding, SandboxBindings
from goatherd.domain import (
    AppendReceipt,
    ScopeAggregate,
    ScopeNotFoundError,
    owner_of_scope,
    scope_id_for,
)

__all__ = ["RuntimeContext"]


@dataclass(slots=True)
class RuntimeContext:
    """The dependencies of the runtime's command handlers.

    Attributes:
        model: the runtime fold of the trace (shared per store and process).
        blobs: the content-addressed blob store beside the trace.
        sandboxes: this process's sandbox objects (plus the host's resolver).
        sequence: the process-wide intent sequence.
        faults: a hook called at every write boundary (tests inject crashes).
        lock: serializes this manager's commands (other managers and processes
            are kept apart by the trace itself).
        fork_values: the opaque values callers passed at fork, by child owner
            (process state: never persisted).
    """

    model: RuntimeModel
    blobs: BlobStore
    sandboxes: SandboxBindings
    sequence: IntentSequence = field(default_factory=IntentSequence)
    faults: FaultHook | None = None
    lock: threading.RLock = field(default_factory=threading.RLock)
    fork_values: dict[str, object] = field(default_factory=dict)

    @property
    def trace(self) -> RuntimeTrace:
        """The kernel store."""
        return self.model.trace

    def fault(self, boundary: str, intent: str) -> None:
        """Call the fault hook at ``boundary`` (a test crash point)."""
        if self.faults is not None:
            self.faults(boundary, intent)

    def next_seq(self, seq: int | None) -> int:
        """Return ``seq`` (a retry) or a fresh value of the process sequence."""
        return self.sequence.next() if seq is None else seq

    def committed(self, intent: str, seq: int | None) -> bool:
        """Whether a retried command's intent committed already.

        ``seq=None`` means a fresh sequence value: its intent cannot have
        committed, so nothing is read.
        """
        return seq is not None and self.trace.read_append_intent(intent) is not None

    def first_record(self, intent: str, seq: int | None) -> str | None:
        """Return the first record id of a retried, committed intent."""
        if seq is None:
            return None
        prior = self.trace.read_append_intent(intent)
        if prior is None:
            return None
        return prior.fact_ids[0] if prior.fact_ids else ""

    def release_unrecorded(self, intent: str, holder: str, digest: str) -> None:
        """Release bytes stored for a record whose append failed.

        Only when the intent is certainly not committed: an append can fail
        after its commit (a lost connection), and bytes a committed record
        names must stay. A release that cannot be decided leaves them held.
        """
        try:
            committed = self.trace.read_append_intent(intent) is not None
        except Exception:
            return
        if not committed:
            self.blobs.release(holder, digest)

    def record(
        self, intent: str, decide: Callable[[], Decision | None]
    ) -> AppendReceipt | None:
        """Decide on the caught-up model and append the decision (guarded)."""
        return record_decision(self.model, intent, decide, faults=self.faults)

    # ------------------------------------------------------------ scopes

    def scope(self, owner: str) -> ScopeAggregate:
        """Return ``owner``'s scope as last folded (bare if no record names it).

        A command's early checks may read a fold a little behind the trace
        (they save work, they do not decide): every decision catches the model
        up and checks its rules again before it records anything.
        """
        return self.model.scope(owner)

    def refresh(self) -> None:
        """Catch the model up with the trace (what a command does first)."""
        self.model.refresh()

    def known(self, scope_id: str) -> ScopeAggregate:
        """Return the scope ``scope_id`` names, as last folded.

        Raises:
            ScopeNotFoundError: no record makes it a scope.
        """
        owner = owner_of_scope(scope_id)
        scope = self.scope(owner)
        if not scope.listed:  # perhaps created since the last catch-up
            self.refresh()
            scope = self.scope(owner)
        if not scope.listed:
            raise ScopeNotFoundError(scope_id)
        return scope

    def workspace_scope(self, owner: str) -> ScopeAggregate:
        """Return the scope owning the workspace ``owner`` works in."""
        return self.model.scope(self.model.workspace_owner(owner))

    def binding(self, owner: str) -> SandboxBinding | None:
        """Return the sandbox binding of ``owner``'s workspace (resolving it)."""
        workspace = self.model.scope(self.model.workspace_owner(owner))
        return self.sandboxes.resolve(workspace)

    def sandbox(self, owner: str, detail: str = "") -> Sandbox:
        """Return the sandbox ``owner`` works in.

        Raises:
            NoSandboxError: the scope is pure-causal here (no object bound and
                the resolver adopted none).
        """
        binding = self.binding(owner)
        if binding is None:
            raise NoSandboxError(detail or scope_id_for(owner))
        return binding.sandbox

    def owned_binding(self, owner: str) -> SandboxBinding | None:
        """Return ``owner``'s binding only when the scope owns its sandbox."""
        scope = self.scope(owner)
        if not scope.isolated:
            return None
        binding = self.sandboxes.for_teardown(scope)
        return binding if binding is not None and binding.owns else None
