"""Checkpoints: a single-use capture of a scope's workspace, restorable once.

Create persists the blob (hard, the restorable halves) and then records
``checkpoint.created`` on the scope's and the checkpoint's paths; a retry
under the same ``seq`` finds the intent and returns the checkpoint.

Restore is exactly once across threads, processes and crashes:

1. The restore intent ``<owner>:restore:<cpSeq>`` is looked up first; when it
   committed and the claim is this attempt's, the stored outcome (the
   snapshot) comes back without deciding again.
2. A ``checkpoint.claimed`` record on the checkpoint's path, under the
   checkpoint's head (optimistic concurrency), names this attempt (its
   ``seq``). One attempt ever wins it; the others fail with
   :class:`CheckpointClaimedError` before touching the workspace.
3. The claimant applies the state (a full reset: repeating it is harmless)
   and records ``checkpoint.restored``. A crash between 2 and 3 is finished
   by a retry under the same ``seq``.

The blob stays until the checkpoint is pruned: it is the stored outcome a
retry returns, and the restored record already makes the checkpoint ``used``
(never restorable again, also after a restart).
"""

from __future__ import annotations

import contextlib
from datetime import datetime

from returns.result import Result

from goatherd.application.errors import SandboxError
from goatherd.application.runtime import (
    Checkpoint,
    RuntimeFailure,
    checkpoint_intent,
    claim_intent,
    restore_intent,
)
from goatherd.application.scope_handle import CheckpointEntry, attempt
from goatherd.application.scope_manager import ScopeManagerCore
from goatherd.domain import (
    CheckpointAggregate,
    CheckpointNotFoundError,
    CheckpointNotRestorableError,
    CheckpointState,
    ScopeAggregate,
    ScopeNotFoundError,
    SnapshotTooLargeError,
    TraceAggregate,
    TraceStoreError,
    WorkspaceState,
    checkpoint_id_for,
    owner_of_scope,
    scope_id_for,
)

__all__ = ["CheckpointCommands"]


class CheckpointCommands(ScopeManagerCore):
    """Create, restore, list and prune checkpoints (mixed into the manager)."""

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
            retry = seq
            seq = self._next_seq(seq)
            cp_id = checkpoint_id_for(owner, seq)
            intent = checkpoint_intent(owner, seq)
            if not self._committed(intent, retry):
                self._aggregate(owner).require_active("cannot checkpoint scope")
                sandbox = self._sandbox_of(owner)
                limit = self._events.trace.checkpoint_blob_limit
                if len(snapshot) > limit:
                    raise SnapshotTooLargeError(cp_id, len(snapshot), limit)
                state = sandbox.capture()
                created = self._clock()
                self._persist_checkpoint(owner, cp_id, seq, state, snapshot, created)
                self._checkpoints[cp_id] = CheckpointEntry(
                    seq, state, snapshot, created
                )
            elif cp_id not in self._checkpoints:
                self._adopt_committed_checkpoint(cp_id)
            return self._checkpoint_view(cp_id)

    def _adopt_committed_checkpoint(self, cp_id: str) -> None:
        blobs, _ = self._events.trace.load_checkpoint_blobs()
        for blob in blobs:
            if blob.checkpoint_id == cp_id:
                created = datetime.fromtimestamp(blob.created_at_ns / 1e9)
                self._checkpoints[cp_id] = CheckpointEntry(
                    blob.seq, blob.state, blob.snapshot, created
                )
                return
        raise CheckpointNotFoundError(cp_id)

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
        intent = checkpoint_intent(owner, seq)
        trace.persist_checkpoint_blob(
            cp_id, scope_id_for(owner), seq, state, snapshot, created_ns
        )
        self._fault("after-blob", intent)

        def decide() -> list[TraceAggregate]:
            scope = self._load(ScopeAggregate, owner)
            cp = CheckpointAggregate.bare(cp_id)
            cp.create(scope, state, has_snapshot=bool(snapshot))
            return [cp, scope]

        try:
            self._decide_and_save(decide, intent)
        except (TraceStoreError, OSError, ValueError):
            trace.delete_checkpoint_blob(cp_id)
            raise

    def _checkpoint_agg(self, cp_id: str) -> CheckpointAggregate:
        return self._events.load(CheckpointAggregate, cp_id)

    def _checkpoint_view(self, cp_id: str) -> Checkpoint:
        entry = self._checkpoints[cp_id]
        agg = self._checkpoint_agg(cp_id)
        state = agg.state
        if entry.invalid and state is CheckpointState.VALID:
            state = CheckpointState.INVALID
        return Checkpoint(
            id=cp_id,
            seq=entry.seq,
            scope_id=agg.scope_id,
            workspace=entry.workspace,
            snapshot=entry.snapshot if state is CheckpointState.VALID else b"",
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
        """Apply a valid checkpoint to its scope exactly once; return the snapshot.

        ``seq`` names this attempt (its claim); a retry after a crash passes
        the same ``seq`` and finishes the restore or returns its outcome.
        """
        return attempt(lambda: self._restore(checkpoint_id, self._next_seq(seq), seq))

    def _restore(self, cp_id: str, attempt_seq: int, retry: int | None) -> bytes:
        with self._lock:
            entry = self._checkpoints.get(cp_id)
            if entry is None:
                raise CheckpointNotFoundError(cp_id)
            with entry.lock:
                return self._restore_locked(cp_id, entry, str(attempt_seq), retry)

    def _restore_locked(
        self, cp_id: str, entry: CheckpointEntry, claimant: str, retry: int | None
    ) -> bytes:
        agg = self._checkpoint_agg(cp_id)
        owner = agg.scope_owner
        if owner not in self._scopes:
            raise ScopeNotFoundError(f"{agg.scope_id} for checkpoint {cp_id}")
        intent = restore_intent(owner, entry.seq)
        if agg.claimed_by == claimant and self._committed(intent, retry):
            return entry.snapshot  # the stored outcome of this attempt
        if entry.invalid and agg.state is CheckpointState.VALID:
            raise CheckpointNotRestorableError(cp_id, CheckpointState.INVALID)
        agg.check_claimable(self._aggregate(owner), claimant)
        sandbox = self._sandbox_of(owner)
        if agg.claimed_by != claimant:
            self._claim_checkpoint(cp_id, owner, intent, claimant)
        try:
            sandbox.apply(entry.workspace)
        except SandboxError:
            entry.invalid = True  # a failed restore burns the checkpoint
            with contextlib.suppress(TraceStoreError, OSError):
                self._events.trace.delete_checkpoint_blob(cp_id)
            raise
        self._fault("after-effect", intent)

        def decide() -> list[TraceAggregate]:
            scope = self._load(ScopeAggregate, owner)
            cp = self._load(CheckpointAggregate, cp_id)
            cp.restore(scope, claimant)
            return [cp, scope]

        self._decide_and_save(decide, intent)
        return entry.snapshot

    def _claim_checkpoint(
        self, cp_id: str, owner: str, intent: str, claimant: str
    ) -> None:
        def decide() -> list[TraceAggregate] | None:
            cp = self._load(CheckpointAggregate, cp_id)
            scope = self._load(ScopeAggregate, owner)
            return [cp] if cp.claim(scope, claimant) is not None else None

        self._decide_and_save(decide, claim_intent(intent, claimant))

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
