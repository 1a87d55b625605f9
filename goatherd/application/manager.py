"""The scope manager: the seed's API over the command handlers, with Results.

:class:`ScopeManager` is a thin facade: each public command delegates to its
handler in :mod:`goatherd.application.commands` and returns a
``returns.Result`` whose failure type is that command's closed union
(:mod:`goatherd.application.failures`); bugs and outages raise. It holds no
registry: every answer is read from the runtime model, the fold of the
trace, so two managers on one trace (in one process or two) answer alike. Its
context holds what the trace cannot: sandbox objects and the opaque values
callers pass at fork.

The :class:`~goatherd.application.Scope` and
:class:`~goatherd.application.RetainedOutput` handles it returns are the ones
``Scope.new`` makes without a manager (:mod:`goatherd.application.handles`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from returns.result import Result

from goatherd.application.commands import checkpoints as cp_cmd
from goatherd.application.commands import merge_gate, outputs, scopes, workspace
from goatherd.application.commands.context import RuntimeContext
from goatherd.application.commands.settle_commit import commit_request
from goatherd.application.failures import (
    CHECKPOINT_FAILURES,
    CREATE_FAILURES,
    FACT_FAILURES,
    FORK_FAILURES,
    HALT_FAILURES,
    LIFECYCLE_FAILURES,
    PROPOSE_FAILURES,
    RECORD_FAILURES,
    RESTORE_FAILURES,
    SEAL_FAILURES,
    SETTLE_FAILURES,
    WORKSPACE_FAILURES,
    CheckpointFailure,
    CreateFailure,
    ForkFailure,
    LifecycleFailure,
    RestoreFailure,
    SealFailure,
    SettleFailure,
    command,
)
from goatherd.application.handles import RetainedOutput, Scope
from goatherd.application.ports import Sandbox
from goatherd.application.runtime import Checkpoint
from goatherd.domain import (
    MergeProposal,
    RestoreEffectLandedError,
    ScopeAggregate,
    ScopeState,
    SettleEffectLandedError,
    WorkspaceState,
    owner_of_scope,
)

__all__ = ["ScopeManager"]


class ScopeManager:
    """Scopes, checkpoints, the merge gate and settlement over one trace."""

    def __init__(self, context: RuntimeContext) -> None:
        """Run the commands with ``context`` (built by the composition root).

        Raises:
            TypeError: ``context`` is not a :class:`RuntimeContext` (a trace
                store, say); the message names the entry point to use.
        """
        if not isinstance(context, RuntimeContext):
            raise TypeError(
                "ScopeManager takes the runtime's RuntimeContext, not"
                f" {type(context).__name__}; over a trace store use"
                " goatherd.scope_manager_for(store), or goatherd.open_runtime(path)"
                " for the whole runtime"
            )
        self._ctx = context

    @property
    def context(self) -> RuntimeContext:
        """The handlers' dependencies (for the runtime's own services)."""
        return self._ctx

    # ------------------------------------------------------------ queries

    def _listed(self, scope: ScopeAggregate) -> bool:
        return scope.listed and not scope.pruned

    def get(self, scope_id: str) -> Scope | None:
        """Return the scope ``scope_id`` names, if the trace has it (unpruned)."""
        self._ctx.refresh()
        scope = self._ctx.scope(owner_of_scope(scope_id))
        return Scope(self._ctx, scope.owner) if self._listed(scope) else None

    def all_scopes(self) -> list[Scope]:
        """Return every unpruned scope, in the order the trace introduced them."""
        self._ctx.model.refresh()
        return [
            Scope(self._ctx, s.owner)
            for s in self._ctx.model.scopes()
            if self._listed(s)
        ]

    def active_scopes(self) -> list[Scope]:
        """Return the unpruned scopes that are active."""
        return [s for s in self.all_scopes() if s.state is ScopeState.ACTIVE]

    def attach_sandbox(self, scope_id: str, sandbox: Sandbox) -> None:
        """Use ``sandbox`` for a scope's workspace in this process.

        For a scope another process created: the trace knows the scope, not
        this process's sandbox object. An isolated child's sandbox is owned.
        """
        self._ctx.refresh()
        scope = self._ctx.scope(owner_of_scope(scope_id))
        self._ctx.sandboxes.bind(scope.owner, sandbox, owns=scope.isolated)

    # ------------------------------------------------------------ lifecycle

    def create(
        self, owner: str, sandbox: Sandbox | None = None
    ) -> Result[Scope, CreateFailure]:
        """Record a root scope for ``owner`` (``sandbox`` is used, not owned)."""
        return self._create(owner, sandbox).map(lambda o: Scope(self._ctx, o))

    @command(CREATE_FAILURES, "CreateFailure")
    def _create(self, owner: str, sandbox: Sandbox | None) -> str:
        return scopes.create_root(self._ctx, owner, sandbox)

    def fork(
        self,
        parent_id: str,
        child_owner: str,
        snapshot: object = None,
        *,
        seq: int | None = None,
    ) -> Result[Scope, ForkFailure]:
        """Fork a child sharing (not owning) the parent's workspace."""
        return self._fork(parent_id, child_owner, snapshot, None, seq)

    def fork_isolated(
        self,
        parent_id: str,
        child_owner: str,
        snapshot: object,
        sandbox: Sandbox,
        *,
        seq: int | None = None,
        clean: bool = False,
    ) -> Result[Scope, ForkFailure]:
        """Fork a child that owns ``sandbox`` (created by the caller).

        As the seed's ForkIsolated: the child's sandbox is then reset to the
        parent's workspace at the fork (uncommitted changes included; a
        recorded ``workspace.applied``). ``clean=True`` leaves it as the
        caller made it (a fresh worktree stands at ``HEAD``). A failure of
        that reset is returned; the child exists, and a retry with the same
        ``seq`` populates it.
        """
        return self._fork(parent_id, child_owner, snapshot, sandbox, seq, not clean)

    def _fork(
        self,
        parent_id: str,
        child_owner: str,
        snapshot: object,
        sandbox: Sandbox | None,
        seq: int | None,
        populate: bool = False,
    ) -> Result[Scope, ForkFailure]:
        forked = self._do_fork(parent_id, child_owner, sandbox, seq, populate)
        return forked.map(lambda owner: self._remember_fork(owner, snapshot))

    @command(FORK_FAILURES, "ForkFailure")
    def _do_fork(
        self,
        parent_id: str,
        child_owner: str,
        sandbox: Sandbox | None,
        seq: int | None,
        populate: bool,
    ) -> str:
        owner = scopes.fork(self._ctx, parent_id, child_owner, sandbox, seq)
        if populate:
            workspace.populate_fork(self._ctx, owner)
        return owner

    def _remember_fork(self, owner: str, snapshot: object) -> Scope:
        self._ctx.fork_values[owner] = snapshot
        return Scope(self._ctx, owner)

    def merge(
        self, child_id: str, *, seq: int | None = None
    ) -> Result[None, LifecycleFailure]:
        """Merge the child into its parent (causal only)."""
        return self._by_child(child_id, "merge", seq)

    def discard(
        self, child_id: str, *, seq: int | None = None
    ) -> Result[None, LifecycleFailure]:
        """Discard the child (destroys an owned sandbox)."""
        return self._by_child(child_id, "discard", seq)

    @command(LIFECYCLE_FAILURES, "LifecycleFailure")
    def _by_child(self, child_id: str, verb: str, seq: int | None) -> None:
        self._ctx.refresh()
        child = self._ctx.known(child_id)
        parent = scopes.parent_of(child)
        scopes.merge_or_discard(self._ctx, parent, child.owner, verb, seq)

    @command(LIFECYCLE_FAILURES, "LifecycleFailure")
    def merge_or_discard(
        self, parent_id: str, child_id: str, verb: str, *, seq: int | None = None
    ) -> None:
        """Merge (``verb="merge"``) or discard a named parent's child."""
        scopes.merge_or_discard(
            self._ctx, owner_of_scope(parent_id), owner_of_scope(child_id), verb, seq
        )

    @command(HALT_FAILURES, "HaltFailure")
    def halt(self, scope_id: str, *, seq: int | None = None) -> None:
        """Halt a scope: record ``supervisor.halt``; it ends ``discarded``."""
        scopes.halt(self._ctx, scope_id, seq)

    @command(FACT_FAILURES, "FactFailure")
    def inject(self, scope_id: str, guidance: str, *, seq: int | None = None) -> str:
        """Record guidance on an active scope; return the record id."""
        return scopes.inject(self._ctx, scope_id, guidance, seq)

    @command(FACT_FAILURES, "FactFailure")
    def append_fact(
        self,
        scope_id: str,
        schema_ref: str,
        kind_label: str,
        payload: Mapping[str, Any],
        *,
        seq: int | None = None,
        caused_by: Sequence[str] = (),
    ) -> str:
        """Append one capture of the caller's own schema; return its record id.

        The record cites ``caused_by`` when given, else the scope's path head
        (after a fork, the fork record: ADR 0087).
        """
        return scopes.append_fact(
            self._ctx, scope_id, schema_ref, kind_label, payload, seq, caused_by
        )

    @command(FACT_FAILURES, "FactFailure")
    def record_run_completed(
        self, scope_id: str, payload: Mapping[str, Any], *, seq: int | None = None
    ) -> str:
        """Record a reversible run's outcome on its child's path; return the id."""
        return scopes.record_run_completed(self._ctx, scope_id, payload, seq)

    def prune_terminal(self) -> int:
        """Record merged and discarded scopes as pruned; return how many."""
        return scopes.prune_terminal(self._ctx)

    @command(HALT_FAILURES, "HaltFailure")
    def destroy_scope_sandbox(self, scope_id: str) -> None:
        """Tear down an OWNED sandbox without changing the lifecycle state."""
        scopes.destroy_owned_sandbox(self._ctx, self._ctx.known(scope_id).owner)

    # ------------------------------------------------------------ workspace

    @command(WORKSPACE_FAILURES, "WorkspaceFailure")
    def capture_workspace(self, scope_id: str) -> WorkspaceState:
        """Capture the scope's workspace (recorded, advisory)."""
        return workspace.capture_workspace(self._ctx, scope_id)

    @command(WORKSPACE_FAILURES, "WorkspaceFailure")
    def apply_workspace(self, scope_id: str, state: WorkspaceState) -> None:
        """Reset the scope's workspace to ``state`` (recorded, advisory)."""
        workspace.apply_workspace(self._ctx, scope_id, state)

    @command(WORKSPACE_FAILURES, "WorkspaceFailure")
    def diff_workspace(
        self, scope_id: str, state: WorkspaceState, max_lines: int = 0
    ) -> tuple[str, list[str]]:
        """Diff the scope's workspace against ``state`` (records nothing)."""
        return workspace.diff_workspace(self._ctx, scope_id, state, max_lines)

    # ------------------------------------------------------------ checkpoints

    def create_checkpoint(
        self, scope_id: str, snapshot: bytes = b"", *, seq: int | None = None
    ) -> Result[Checkpoint, CheckpointFailure]:
        """Capture the workspace, store the snapshot, record the checkpoint."""
        created = self._create_checkpoint(scope_id, snapshot, seq)
        return created.map(self._checkpoint_value)

    @command(CHECKPOINT_FAILURES, "CheckpointFailure")
    def _create_checkpoint(
        self, scope_id: str, snapshot: bytes, seq: int | None
    ) -> str:
        return cp_cmd.create_checkpoint(self._ctx, scope_id, snapshot, seq)

    def _checkpoint_value(self, checkpoint_id: str) -> Checkpoint:
        view = self.checkpoint(checkpoint_id)
        assert view is not None, "a recorded checkpoint folds"
        return view

    def checkpoint(self, checkpoint_id: str) -> Checkpoint | None:
        """Return a checkpoint as it is now (``None``: unknown or pruned)."""
        self._ctx.model.refresh()
        cp = self._ctx.model.checkpoint(checkpoint_id)
        if not cp.exists or cp.pruned:
            return None
        return cp_cmd.checkpoint_view(self._ctx, cp)

    def checkpoints_for_scope(self, scope_id: str) -> list[Checkpoint]:
        """Return the scope's unpruned checkpoints, oldest sequence first."""
        return [
            cp_cmd.checkpoint_view(self._ctx, cp)
            for cp in cp_cmd.checkpoints_of(self._ctx, scope_id)
        ]

    def restore_checkpoint(
        self, checkpoint_id: str, *, seq: int | None = None
    ) -> Result[bytes, RestoreFailure]:
        """Apply a valid checkpoint to its scope exactly once; return the snapshot.

        ``seq`` names this attempt (its claim); a retry after a crash passes
        the same ``seq`` and finishes the restore or returns its outcome.
        """
        return self._restore(checkpoint_id, self._ctx.next_seq(seq), seq)

    @command(RESTORE_FAILURES, "RestoreFailure")
    def _restore(self, checkpoint_id: str, attempt: int, retry: int | None) -> bytes:
        return cp_cmd.restore_checkpoint(self._ctx, checkpoint_id, attempt, retry)

    def latest_checkpoint(self, scope_id: str) -> Checkpoint | None:
        """Return the scope's valid checkpoint with the highest seq, if any."""
        return cp_cmd.latest_checkpoint(self._ctx, scope_id)

    def prune_checkpoints(self, scope_id: str) -> int:
        """Record the scope's checkpoints pruned and release their blobs."""
        return cp_cmd.prune_checkpoints(self._ctx, scope_id)

    # ------------------------------------------------------------ merge gate

    @command(PROPOSE_FAILURES, "ProposeFailure")
    def propose_merge(self, child_id: str, max_diff_lines: int = 0) -> MergeProposal:
        """Diff the child against its fork baseline (a query; records nothing)."""
        return merge_gate.propose_merge(self._ctx, child_id, max_diff_lines)

    @command(RECORD_FAILURES, "RecordFailure")
    def record_merge_proposal(
        self, proposal: MergeProposal, *, seq: int | None = None
    ) -> str:
        """Record the proposal on the child's path; return its record id."""
        return merge_gate.record_merge_proposal(self._ctx, proposal, seq)

    @command(RECORD_FAILURES, "RecordFailure")
    def record_merge_decision(
        self,
        proposal: MergeProposal,
        approved: bool,
        reason: str,
        action: str,
        proposed_record_id: str,
        *,
        seq: int | None = None,
    ) -> str:
        """Record the verdict on the parent's path; return its record id."""
        return merge_gate.record_merge_decision(
            self._ctx, proposal, approved, reason, action, proposed_record_id, seq
        )

    # ------------------------------------------------------------ outputs

    def seal(
        self, scope_id: str, *, seq: int | None = None
    ) -> Result[RetainedOutput, SealFailure]:
        """Freeze the scope's workspace as an output (the scope stays active)."""
        return self._seal(scope_id, seq).map(lambda oid: RetainedOutput(self._ctx, oid))

    @command(SEAL_FAILURES, "SealFailure")
    def _seal(self, scope_id: str, seq: int | None) -> str:
        return outputs.seal(self._ctx, scope_id, seq)

    def output(self, output_id: str) -> RetainedOutput | None:
        """Return the output ``output_id`` names, if the trace has it."""
        self._ctx.model.refresh()
        found = self._ctx.model.output(output_id).exists
        return RetainedOutput(self._ctx, output_id) if found else None

    def outputs_for_scope(self, scope_id: str) -> list[RetainedOutput]:
        """Return the scope's outputs in seal order (sequence order)."""
        owner = owner_of_scope(scope_id)
        self._ctx.model.refresh()
        mine = sorted(
            (out.seq, out.output_id)
            for out in self._ctx.model.outputs()
            if out.exists and out.scope_owner == owner
        )
        return [RetainedOutput(self._ctx, oid) for _, oid in mine]

    @command(SETTLE_FAILURES, "SettleFailure")
    def settle(
        self,
        output_id: str,
        action: str,
        *,
        seq: int | None = None,
        commit: bool = False,
        message: str | None = None,
        author: str | None = None,
    ) -> None:
        """Consume the output exactly once with ``action``.

        ``commit=True`` (select or apply) also makes the landed winner one git
        commit on the parent's branch, with ``message`` (default: one naming
        the output) and ``author`` (``"Name <email>"``; default: the
        repository's identity) and the ``Goatherd-*`` trailers, recorded once
        (``RetainedOutput.commit()`` returns its sha; ADR 0084). A failure
        to commit is a :class:`~goatherd.application.SettleCommitError`: its
        ``settled`` says whether the settlement stands (then the same ``seq``
        with ``commit=True`` commits it).

        Raises:
            ValueError: ``message`` or ``author`` without ``commit=True``.
        """
        outputs.settle(
            self._ctx, output_id, action, seq, commit_request(commit, message, author)
        )

    def finish(
        self, landed: SettleEffectLandedError | RestoreEffectLandedError
    ) -> Result[None, SettleFailure | RestoreFailure]:
        """Finish the settle or restore whose effect landed unrecorded, in one call.

        ``landed`` is the failure the command returned: the same verb is run
        again under the attempt's ``seq`` (the only one that may finish it),
        which records the outcome once. A restore's snapshot is not returned;
        ask ``restore_checkpoint(..., seq=landed.seq)`` for it instead.

        Raises:
            TypeError: ``landed`` is not an effect-landed error.
        """
        if isinstance(landed, SettleEffectLandedError):
            settled: Result[None, SettleFailure | RestoreFailure] = self.settle(
                landed.output_id, landed.action, seq=landed.seq
            )
            return settled
        if isinstance(landed, RestoreEffectLandedError):
            restored = self.restore_checkpoint(landed.checkpoint_id, seq=landed.seq)
            return restored.map(lambda _: None)
        raise TypeError(
            "finish takes a SettleEffectLandedError or RestoreEffectLandedError,"
            f" got {type(landed).__name__}"
        )
