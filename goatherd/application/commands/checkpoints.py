"""Checkpoint commands: create, restore (exactly once), query, prune.

Create stores the snapshot bytes in the blob store (held by the checkpoint)
and then records ``checkpoint.created`` with the captured state and the
snapshot's digest, on the scope's and the checkpoint's paths. A checkpoint
is handed out only once both are stored; a crash between them leaves held
bytes no record names, and a retry under the same ``seq`` records them.

Restore is exactly once across threads, processes and crashes:

1. the restore intent ``<owner>:restore:<cpSeq>`` is looked up; when it
   committed and the claim is this attempt's, the stored outcome comes back;
2. the state and the snapshot are read and checked against the digests the
   trace records (a mismatch refuses, changing nothing);
3. ``checkpoint.claimed`` names this attempt, appended under the heads of
   the checkpoint's path and of the workspace's owner: one attempt ever wins
   it, the others fail before touching the workspace;
4. the claimant applies the state (a full reset: repeating it is harmless)
   and records ``checkpoint.restored``, naming the snapshot digest it
   releases. A failed apply burns the checkpoint (``checkpoint.invalidated``).
   A crash between 3 and 4 is finished by a retry under the same ``seq``; a
   record that fails after the apply is ``RestoreEffectLandedError`` carrying
   that ``seq`` (the claim stays with the attempt, the checkpoint valid);
5. once that record committed, the checkpoint's hold on the snapshot bytes
   is released (the bytes go when nothing else holds them; the digest stays
   in the trace). A retry after the commit returns the snapshot while its
   bytes are still stored (and finishes the release), else
   ``SnapshotReleasedError``: the restore happened, the bytes are gone
   (ADR 0056).
"""

from __future__ import annotations

from typing import Final

from goatherd.application.commands.context import RuntimeContext
from goatherd.application.decisions import Decision
from goatherd.application.errors import GitError, SandboxError
from goatherd.application.runtime import (
    Checkpoint,
    blob_digest,
    checkpoint_intent,
    claim_intent,
    lifecycle_intent,
    restore_intent,
)
from goatherd.domain import (
    BlobIntegrityError,
    CheckpointAggregate,
    CheckpointNotFoundError,
    CheckpointScopeMismatchError,
    RestoreEffectLandedError,
    RuntimeRuleError,
    ScopeNotFoundError,
    SnapshotReleasedError,
    SnapshotTooLargeError,
    TraceStoreError,
    WorkspaceBusyError,
    WorkspaceState,
    checkpoint_id_for,
    owner_of_scope,
    scope_id_for,
)

__all__ = [
    "checkpoint_view",
    "checkpoints_of",
    "create_checkpoint",
    "latest_checkpoint",
    "prune_checkpoints",
    "read_blob",
    "restore_checkpoint",
    "snapshot_holder",
]

_SNAPSHOT: Final = "#snapshot"


def snapshot_holder(checkpoint_id: str) -> str:
    """Return the blob holder name of a checkpoint's snapshot."""
    return checkpoint_id + _SNAPSHOT


def read_blob(ctx: RuntimeContext, subject: str, digest: str) -> bytes:
    """Read the bytes the trace addresses by ``digest``, checked against it.

    Raises:
        BlobIntegrityError: the bytes are missing or do not match.
    """
    data = ctx.blobs.get(digest)
    if data is None:
        raise BlobIntegrityError(subject, digest, "is missing from the blob store")
    return _checked(subject, digest, data)


def _checked(subject: str, digest: str, data: bytes) -> bytes:
    if blob_digest(data) != digest:
        raise BlobIntegrityError(
            subject, digest, "holds bytes that do not match the trace's digest"
        )
    return data


def create_checkpoint(
    ctx: RuntimeContext, scope_id: str, snapshot: bytes, seq: int | None
) -> str:
    """Capture the workspace, store the snapshot, record the checkpoint.

    Raises:
        ScopeNotFoundError, ScopeStateError, NoSandboxError, SandboxError,
        SnapshotTooLargeError; TypeError: ``snapshot`` is not bytes.
    """
    if not isinstance(snapshot, bytes | bytearray | memoryview):
        raise TypeError(
            f"create_checkpoint: snapshot must be bytes, got {type(snapshot).__name__}"
        )
    owner = ctx.known(scope_id).owner
    with ctx.lock:
        cp_seq = ctx.next_seq(seq)
        cp_id = checkpoint_id_for(owner, cp_seq)
        intent = checkpoint_intent(owner, cp_seq)
        if ctx.committed(intent, seq):
            return cp_id
        ctx.scope(owner).require_workspace(
            ctx.workspace_scope(owner), "cannot checkpoint scope"
        )
        sandbox = ctx.sandbox(owner)
        limit = ctx.trace.checkpoint_blob_limit
        if len(snapshot) > limit:
            raise SnapshotTooLargeError(cp_id, len(snapshot), limit)
        state = sandbox.capture()
        digest = ctx.blobs.put(snapshot_holder(cp_id), bytes(snapshot))
        ctx.fault("after-blob", intent)

        def decide() -> Decision:
            scope = ctx.model.scope(owner)
            event = ctx.model.checkpoint(cp_id).create(
                scope,
                state,
                snapshot_digest=digest,
                has_snapshot=bool(snapshot),
                workspace=ctx.workspace_scope(owner),
            )
            # The workspace owner's head guards it: its end lands first or fails.
            guard = ctx.model.workspace_owner(owner)
            return Decision().place(event, owner, cp_id).guard(guard)

        try:
            ctx.record(intent, decide)
        except Exception:
            ctx.release_unrecorded(intent, snapshot_holder(cp_id), digest)
            raise
        return cp_id


def _found(ctx: RuntimeContext, cp_id: str) -> CheckpointAggregate:
    ctx.model.refresh()
    cp = ctx.model.checkpoint(cp_id)
    if not cp.exists or cp.pruned:
        raise CheckpointNotFoundError(cp_id)
    return cp


def workspace_of(ctx: RuntimeContext, cp: CheckpointAggregate) -> WorkspaceState:
    """Return the checkpoint's captured state, checked against its digest.

    Records written before the state was recorded keep it in the legacy
    checkpoint table; it must digest to what the record says.

    Raises:
        BlobIntegrityError: the legacy row is missing or does not match.
    """
    if cp.workspace is not None:
        return cp.workspace
    blobs, _ = ctx.trace.load_checkpoint_blobs()
    for blob in blobs:
        if blob.checkpoint_id == cp.checkpoint_id:
            if blob.state.digest() != cp.state_digest:
                raise BlobIntegrityError(
                    cp.checkpoint_id,
                    cp.state_digest,
                    "does not match the workspace state in the checkpoint table",
                )
            return blob.state
    raise BlobIntegrityError(
        cp.checkpoint_id, cp.state_digest, "is missing from the checkpoint table"
    )


def _snapshot_of(ctx: RuntimeContext, cp: CheckpointAggregate) -> bytes:
    if not cp.has_snapshot:
        return b""
    assert cp.snapshot_digest is not None  # check_restorable refused otherwise
    return read_blob(ctx, cp.checkpoint_id, cp.snapshot_digest)


def restore_checkpoint(
    ctx: RuntimeContext,
    cp_id: str,
    attempt_seq: int,
    retry: int | None,
    *,
    scope_owner: str | None = None,
) -> bytes:
    """Apply a valid checkpoint to its scope exactly once; return the snapshot.

    ``scope_owner`` names the scope the caller restores in (``None``: the
    checkpoint's own); another scope's checkpoint is refused before anything.

    Raises:
        CheckpointNotFoundError, ScopeNotFoundError, ScopeStateError,
        CheckpointScopeMismatchError, CheckpointNotRestorableError,
        CheckpointClaimedError, WorkspaceBusyError, BlobIntegrityError,
        NoSandboxError, SandboxError (the checkpoint is burnt);
        RestoreEffectLandedError: the workspace was reset but the restore's
            record did not commit; the same ``seq`` finishes it;
        SnapshotReleasedError: a retry after this attempt's restore
            committed, when the snapshot's bytes are gone.
    """
    with ctx.lock:
        cp = _found(ctx, cp_id)
        owner = cp.scope_owner
        if scope_owner is not None and scope_owner != owner:
            raise CheckpointScopeMismatchError(
                cp_id, cp.scope_id, scope_id_for(scope_owner)
            )
        scope = ctx.scope(owner)
        if not scope.listed:
            raise ScopeNotFoundError(f"{cp.scope_id} for checkpoint {cp_id}")
        claimant = str(attempt_seq)
        intent = restore_intent(owner, cp.seq)
        if cp.claimed_by == claimant and ctx.committed(intent, retry):
            return _stored_outcome(ctx, cp_id, intent)
        cp.check_claimable(scope, claimant, ctx.workspace_scope(owner))
        sandbox = ctx.sandbox(owner)
        state = workspace_of(ctx, cp)
        snapshot = _snapshot_of(ctx, cp)
        if cp.claimed_by != claimant:
            _claim(ctx, cp_id, owner, claim_intent(intent, claimant), claimant)
        try:
            sandbox.apply(state)
        except SandboxError as error:
            if not _crashed(error):  # a killed git: the same seq re-applies it all
                _burn(ctx, cp_id, owner, f"restore failed: {error}")
            raise
        ctx.fault("after-effect", intent)

        def decide() -> Decision:
            event = ctx.model.checkpoint(cp_id).restore(
                ctx.model.scope(owner), claimant, ctx.workspace_scope(owner)
            )
            guard = ctx.model.workspace_owner(owner)
            return Decision().place(event, owner, cp_id).guard(guard)

        try:
            ctx.record(intent, decide)
        except (TraceStoreError, RuntimeRuleError, SandboxError) as error:
            # The reset stands: whatever kept its record from committing, the
            # caller must learn the seq that finishes it (the claim is its).
            raise RestoreEffectLandedError(
                cp_id, cp.scope_id, str(error), attempt_seq
            ) from error
        _release_restored(ctx, cp_id, intent)
        return snapshot


def _crashed(error: SandboxError) -> bool:
    """Whether git was killed or timed out (not a state it cannot apply)."""
    return isinstance(error, GitError) and (
        error.returncode is None or error.returncode < 0
    )


def _release_restored(ctx: RuntimeContext, cp_id: str, intent: str) -> None:
    """Drop the holds the checkpoint's records say were released.

    Idempotent: a retry or a later prune finishes a release a crash cut short.
    """
    ctx.model.refresh()
    for digest in ctx.model.checkpoint(cp_id).released:
        ctx.blobs.release(snapshot_holder(cp_id), digest)
    ctx.fault("after-release", intent)


def _stored_outcome(ctx: RuntimeContext, cp_id: str, intent: str) -> bytes:
    """Return what a retry of this attempt's committed restore gets.

    The snapshot while its bytes are still stored (a crash before the release,
    or the same bytes held for something else), checked against the trace's
    digest; the release is finished then. Once they are gone:
    :class:`SnapshotReleasedError`.
    """
    ctx.model.refresh()
    cp = ctx.model.checkpoint(cp_id)
    if not cp.has_snapshot or not cp.snapshot_digest:
        _release_restored(ctx, cp_id, intent)
        return b""
    data = ctx.blobs.get(cp.snapshot_digest)
    if data is None:
        _release_restored(ctx, cp_id, intent)
        raise SnapshotReleasedError(cp_id, cp.snapshot_digest)
    snapshot = _checked(cp_id, cp.snapshot_digest, data)
    _release_restored(ctx, cp_id, intent)
    return snapshot


def _claim(
    ctx: RuntimeContext, cp_id: str, owner: str, intent: str, claimant: str
) -> None:
    def decide() -> Decision | None:
        cp = ctx.model.checkpoint(cp_id)
        scope = ctx.model.scope(owner)
        ws_owner = ctx.model.workspace_owner(owner)
        workspace = ctx.model.scope(ws_owner)
        cp.check_claimable(scope, claimant, workspace)
        busy = workspace.workspace_claim
        if busy and busy != cp_id:
            raise WorkspaceBusyError(f"restore {cp_id}", "scope:" + ws_owner, busy)
        event = cp.claim(scope, claimant, ws_owner, workspace)
        if event is None:
            return None
        return Decision().place(event, cp_id, ws_owner).guard(owner)

    ctx.record(intent, decide)


def _burn(ctx: RuntimeContext, cp_id: str, owner: str, reason: str) -> None:
    intent = lifecycle_intent("invalidate", cp_id, "", ctx.sequence.next())

    def decide() -> Decision | None:
        event = ctx.model.checkpoint(cp_id).invalidate(reason)
        return None if event is None else Decision().place(event, owner, cp_id)

    try:
        ctx.record(intent, decide)
    except TraceStoreError:
        return  # the restore's own failure is what the caller must see


def checkpoints_of(ctx: RuntimeContext, scope_id: str) -> list[CheckpointAggregate]:
    """Return the scope's unpruned checkpoints, oldest sequence first."""
    owner = owner_of_scope(scope_id)
    ctx.model.refresh()
    mine = [
        cp
        for cp in ctx.model.checkpoints()
        if cp.exists and not cp.pruned and cp.scope_owner == owner
    ]
    return sorted(mine, key=lambda cp: cp.seq)


def checkpoint_view(ctx: RuntimeContext, cp: CheckpointAggregate) -> Checkpoint:
    """Return the public value of a folded checkpoint.

    The snapshot is included (checked against its digest) while the
    checkpoint is valid; a workspace state that cannot be read is reported as
    an empty state.
    """
    try:
        workspace = workspace_of(ctx, cp)
    except BlobIntegrityError:
        workspace = WorkspaceState(backend=cp.backend, revision=cp.revision)
    snapshot = b""
    if cp.is_valid and cp.has_snapshot and cp.snapshot_digest:
        try:
            snapshot = read_blob(ctx, cp.checkpoint_id, cp.snapshot_digest)
        except BlobIntegrityError:
            snapshot = b""
    return Checkpoint(
        id=cp.checkpoint_id,
        seq=cp.seq,
        scope_id=cp.scope_id,
        workspace=workspace,
        snapshot=snapshot,
        created_at=ctx.trace.intent_committed_at(cp.created_intent),
        state=cp.state,
        snapshot_digest=cp.snapshot_digest or "",
    )


def latest_checkpoint(ctx: RuntimeContext, scope_id: str) -> Checkpoint | None:
    """Return the scope's valid checkpoint with the highest seq, if any."""
    valid = [cp for cp in checkpoints_of(ctx, scope_id) if cp.is_valid]
    return checkpoint_view(ctx, valid[-1]) if valid else None


def prune_checkpoints(ctx: RuntimeContext, scope_id: str) -> int:
    """Record the scope's checkpoints pruned, then release their blobs.

    Releasing is idempotent: a prune interrupted after its record is finished
    by the next prune of the scope. Returns how many were pruned now.
    """
    owner = owner_of_scope(scope_id)
    with ctx.lock:
        intent = lifecycle_intent("prune-checkpoints", owner, "", ctx.next_seq(None))
        count: list[int] = []

        def decide() -> Decision:
            decision = Decision()
            for cp in ctx.model.checkpoints():
                event = cp.prune() if cp.scope_owner == owner else None
                if event is not None:
                    decision = decision.place(event, owner, cp.checkpoint_id)
            count.append(len(decision.placements))
            return decision

        ctx.record(intent, decide)
        ctx.model.refresh()
        for cp in ctx.model.checkpoints():
            if cp.scope_owner == owner and cp.pruned and cp.snapshot_digest:
                ctx.blobs.release(snapshot_holder(cp.checkpoint_id), cp.snapshot_digest)
        return count[-1] if count else 0
