"""The runtime's broken rules: scopes, checkpoints, the merge gate and settlement.

Hierarchy (all under :class:`~goatherd.domain.errors.DomainError`)::

    RuntimeRuleError                 base of every runtime rule failure
      ScopeNotFoundError             unknown scope id ("scope X not found")
      ScopeExistsError               create/fork onto a scope that exists
      ScopeStateError                a lifecycle state forbids the operation
      NotAChildError                 merge/discard of a scope that is not a child
      RootScopeError                 merge/discard/settle needs a parent
      NoBaselineError                propose/seal without a fork baseline
      CheckpointNotFoundError        unknown checkpoint id
      CheckpointNotRestorableError   the checkpoint is used or invalid
      CheckpointScopeMismatchError   restore on another scope's checkpoint
      SnapshotTooLargeError          a snapshot over the store's blob limit
      OutputNotFoundError            unknown retained output id
      OutputConsumedError            the seed's ErrOutputConsumed
      OutputClaimedError             another settle holds the output's claim
      CheckpointClaimedError         another restore holds the checkpoint's claim
      UnknownSettlementActionError   settle with a verb that does not exist
      ParentMovedError               select with the parent off its baseline
      EffectLandedError              an effect stands, its record did not commit
        SettleEffectLandedError      the seed's ErrSettleEffectLanded
        RestoreEffectLandedError     a restore reset stands, its record did not commit
      ScopeClaimedError              a scope a claimed workspace effect needs cannot end
      SupervisorDeniedError          a merge reviewer denied (in ``merge_gate``)
      InconsistentTraceError         the trace contradicts itself about an aggregate
      WorkspaceBusyError             another claimed workspace effect is unfinished
      ReservedSchemaError            append_fact with a runtime-reserved schema
      BlobIntegrityError             blob bytes do not match the trace's digest

The seed's ``ErrApplyConflict`` is the sandbox seam's ``ApplyConflictError``
(application layer); settlement raises it with the settle's detail. Messages
keep the seed's wording so they stay recognisable.
"""

from __future__ import annotations

from goatherd.domain.errors import DomainError

__all__ = [
    "BlobIntegrityError",
    "CheckpointClaimedError",
    "CheckpointNotFoundError",
    "CheckpointNotRestorableError",
    "CheckpointScopeMismatchError",
    "EffectLandedError",
    "InconsistentTraceError",
    "NoBaselineError",
    "NotAChildError",
    "OutputClaimedError",
    "OutputConsumedError",
    "OutputNotFoundError",
    "ParentMovedError",
    "ReservedSchemaError",
    "RestoreEffectLandedError",
    "RootScopeError",
    "RuntimeRuleError",
    "ScopeClaimedError",
    "ScopeExistsError",
    "ScopeNotFoundError",
    "ScopeStateError",
    "SettleEffectLandedError",
    "SnapshotReleasedError",
    "SnapshotTooLargeError",
    "UnknownSettlementActionError",
    "UnreadableRecordError",
    "WorkspaceBusyError",
]


class RuntimeRuleError(DomainError):
    """Base of the runtime's rule failures (expected failures, never bugs)."""


class ScopeNotFoundError(RuntimeRuleError, LookupError):
    """Raised when a scope id names no known scope."""

    def __init__(self, scope_id: str) -> None:
        """Name the unknown ``scope_id``."""
        super().__init__(f"scope {scope_id} not found")
        self.scope_id = scope_id


class ScopeExistsError(RuntimeRuleError):
    """Raised when create or fork targets an owner that already has a scope."""

    def __init__(self, scope_id: str) -> None:
        """Name the existing ``scope_id``."""
        super().__init__(f"scope {scope_id} already exists")
        self.scope_id = scope_id


class ScopeStateError(RuntimeRuleError):
    """Raised when a scope's lifecycle state forbids an operation.

    Attributes:
        scope_id: the scope in the wrong state.
        state: its state.
    """

    def __init__(self, message: str, scope_id: str, state: str) -> None:
        """Keep the seed's ``message`` and the ids involved."""
        super().__init__(message)
        self.scope_id = scope_id
        self.state = state


class NotAChildError(RuntimeRuleError):
    """Raised when merge or discard names a scope that is not the parent's child."""

    def __init__(self, child_id: str, parent_id: str) -> None:
        """Name both scopes."""
        super().__init__(f"scope {child_id} is not a child of {parent_id}")
        self.child_id = child_id
        self.parent_id = parent_id


class RootScopeError(RuntimeRuleError):
    """Raised when an operation needs a parent and the scope is a root."""

    def __init__(self, scope_id: str, message: str = "") -> None:
        """Name the root scope."""
        super().__init__(message or f"scope {scope_id} has no parent (root scope)")
        self.scope_id = scope_id


class NoBaselineError(RuntimeRuleError):
    """Raised when proposing or sealing a scope that has no fork baseline."""

    def __init__(self, scope_id: str, purpose: str) -> None:
        """Name the scope and what the baseline was needed for."""
        super().__init__(
            f"scope {scope_id} has no fork baseline: it was forked from a parent"
            f" without a sandbox, so there is no {purpose}"
        )
        self.scope_id = scope_id


class CheckpointNotFoundError(RuntimeRuleError, LookupError):
    """Raised when a checkpoint id names no known checkpoint."""

    def __init__(self, checkpoint_id: str) -> None:
        """Name the unknown checkpoint."""
        super().__init__(f"checkpoint {checkpoint_id} not found")
        self.checkpoint_id = checkpoint_id


class CheckpointNotRestorableError(RuntimeRuleError):
    """Raised when restoring a checkpoint that is ``used`` or ``invalid``."""

    def __init__(self, checkpoint_id: str, state: str) -> None:
        """Name the checkpoint and its state."""
        super().__init__(f"checkpoint {checkpoint_id} is {state}, cannot restore")
        self.checkpoint_id = checkpoint_id
        self.state = state


class SnapshotReleasedError(CheckpointNotRestorableError):
    """A retried restore committed already and its snapshot bytes are gone.

    The restore happened (the workspace is at the checkpoint; the checkpoint
    is ``used``); a restore releases the snapshot's bytes once its record
    commits, so a retry after that can name only their digest.

    Attributes:
        digest: the released snapshot's digest (what the trace keeps).
    """

    def __init__(self, checkpoint_id: str, digest: str) -> None:
        """Name the checkpoint and the digest of its released snapshot."""
        RuntimeRuleError.__init__(
            self,
            f"checkpoint {checkpoint_id} was restored by this attempt already; its "
            f"snapshot {digest} was released at the restore, only its digest remains",
        )
        self.checkpoint_id = checkpoint_id
        self.state = "used"
        self.digest = digest


class CheckpointScopeMismatchError(RuntimeRuleError):
    """Raised when a checkpoint is restored on a scope it does not belong to."""

    def __init__(self, checkpoint_id: str, owner_scope: str, scope_id: str) -> None:
        """Name the checkpoint, its scope and the scope asked."""
        super().__init__(
            f"checkpoint {checkpoint_id} belongs to scope {owner_scope}, not {scope_id}"
        )
        self.checkpoint_id = checkpoint_id


class SnapshotTooLargeError(RuntimeRuleError, ValueError):
    """Raised when a checkpoint snapshot exceeds the store's blob limit."""

    def __init__(self, checkpoint_id: str, size: int, limit: int) -> None:
        """Name the checkpoint, the snapshot size and the limit."""
        super().__init__(
            f"checkpoint {checkpoint_id}: snapshot is {size} bytes, over the store's"
            f" {limit}-byte checkpoint blob limit; store large state externally and"
            " pass a reference instead"
        )
        self.checkpoint_id = checkpoint_id
        self.size = size
        self.limit = limit


class OutputNotFoundError(RuntimeRuleError, LookupError):
    """Raised when an output id names no retained output."""

    def __init__(self, output_id: str) -> None:
        """Name the unknown output."""
        super().__init__(f"retained output {output_id} not found")
        self.output_id = output_id


class OutputConsumedError(RuntimeRuleError):
    """The seed's ``ErrOutputConsumed``: the output was already settled.

    Settlement is consume-once; every action is terminal.
    """

    SENTINEL = "retained output already settled"

    def __init__(self, output_id: str, state: str) -> None:
        """Name the output and the state that consumed it."""
        super().__init__(f"output {output_id} is {state}: {self.SENTINEL}")
        self.output_id = output_id
        self.state = state


class UnknownSettlementActionError(RuntimeRuleError, ValueError):
    """Raised for a settlement verb that does not exist; nothing is consumed."""

    def __init__(self, action: str) -> None:
        """Name the unknown verb."""
        super().__init__(f'unknown settlement action "{action}"')
        self.action = action


class ParentMovedError(RuntimeRuleError):
    """Raised when select finds the parent off the fork baseline; nothing consumed."""

    def __init__(self, output_id: str) -> None:
        """Name the output."""
        super().__init__(
            f"settle {output_id} (select): parent workspace has moved since the"
            " fork baseline; use SettleApply"
        )
        self.output_id = output_id


class EffectLandedError(RuntimeRuleError):
    """A claimed workspace effect landed but the record ending it did not commit.

    The claim stays with the attempt that landed the effect; only the same
    ``seq`` may finish it (the command again with ``seq``, or ``--resume SEQ``
    on the command line).

    Attributes:
        seq: the attempt's ``seq``: the only one that may finish it.
        cause: why the record was not committed.
    """

    def __init__(self, message: str, cause: str, seq: int) -> None:
        """Keep the message, the cause and the seq that finishes the effect."""
        super().__init__(message)
        self.cause = cause
        self.seq = seq


class RestoreEffectLandedError(EffectLandedError):
    """A restore reset the workspace but ``checkpoint.restored`` did not commit.

    The checkpoint stays valid and claimed by this attempt: restoring it again
    under the same ``seq`` (``goatherd restore CKPT --resume SEQ``) re-applies
    the recorded state and records the restore once.

    Attributes:
        checkpoint_id: the checkpoint.
        scope_id: the scope whose workspace was reset.
    """

    SENTINEL = "restore effect landed"

    def __init__(self, checkpoint_id: str, scope_id: str, cause: str, seq: int) -> None:
        """Name the checkpoint, the scope, the cause and the seq."""
        super().__init__(
            f"restore {checkpoint_id} onto {scope_id}: {self.SENTINEL}: the workspace"
            f" is reset to the checkpoint but the restore was not recorded ({cause});"
            f" finish it with seq={seq} (restore again under that seq)",
            cause,
            seq,
        )
        self.checkpoint_id = checkpoint_id
        self.scope_id = scope_id


class SettleEffectLandedError(EffectLandedError):
    """The seed's ``ErrSettleEffectLanded``: the work stands, the merge did not.

    The workspace effect landed on the parent but its settlement was not
    recorded. The output stays claimed by this attempt: finish it by settling
    again with the same verb and ``seq`` (``goatherd settle OUT VERB --resume
    SEQ``), or end it with ``ending`` under that ``seq`` (release always works,
    discard only while the child is still active).

    Attributes:
        output_id: the output.
        action: the verb whose effect landed.
        ending: the endings still allowed.
        cause: why the settlement was not recorded.
        seq: the attempt's ``seq``: the only one that may finish or end it.
    """

    SENTINEL = "settle effect landed"

    def __init__(
        self, output_id: str, action: str, ending: str, cause: str, seq: int
    ) -> None:
        """Name the output, the verb, the ending still allowed, the cause, the seq."""
        super().__init__(
            f"settle {output_id} ({action}): {self.SENTINEL}: the work stands on the"
            f" parent but the settlement was not recorded ({cause}); finish it with"
            f" seq={seq} (the same verb again, or {ending})",
            cause,
            seq,
        )
        self.output_id = output_id
        self.action = action
        self.ending = ending


class ScopeClaimedError(ScopeStateError):
    """A scope cannot end while a claimed workspace effect needs it.

    A settle (select/apply) or a restore that has claimed always finishes
    (ADR 0068): halting, discarding or merging a scope that claim names (the
    settled child, the parent it lands on, the restored scope, or the owner of
    the claimed workspace) is refused until the claimant records its result.

    Attributes:
        holder: the claimed output or checkpoint.
        claimed_by: the claiming attempt (a settle intent or a restore seq).
        finish: the command that finishes the claim.
        kind: ``"output"`` (a settle's claim) or ``"checkpoint"`` (a
            restore's), or ``""`` when the fold cannot read the holder.
        seq: the claimant's ``seq``, to pass to the same command again to
            finish it (``None`` when it cannot be read).
    """

    def __init__(
        self,
        subject: str,
        scope_id: str,
        state: str,
        holder: str,
        claimed_by: str,
        finish: str,
        *,
        kind: str = "",
        seq: int | None = None,
    ) -> None:
        """Name the refused command, the scope, the claim and how to finish it."""
        super().__init__(
            f"{subject} {scope_id}: {holder} is claimed by {claimed_by}, whose"
            f" workspace effect is unfinished; it ends once that claim is"
            f" finished ({finish})",
            scope_id,
            state,
        )
        self.holder = holder
        self.claimed_by = claimed_by
        self.finish = finish
        self.kind = kind
        self.seq = seq


class OutputClaimedError(OutputConsumedError):
    """Another settle attempt claimed the output for its workspace effect.

    A claim is a record appended before a select/apply effect; only the
    claiming attempt (its owner and ``seq``) may finish the settle, or end the
    output with ``released``/``discarded``: a retry under its ``seq`` does.
    """

    def __init__(self, output_id: str, claimed_by: str) -> None:
        """Name the output and the claiming intent."""
        self.claimed_by = claimed_by
        seq = claimed_by.rpartition(":")[2]
        super().__init__(
            output_id,
            f"claimed by settle intent {claimed_by} (only a settle with seq={seq}"
            " may finish or end it)",
        )


class CheckpointClaimedError(CheckpointNotRestorableError):
    """Another restore (another claimant) claimed the checkpoint."""

    def __init__(self, checkpoint_id: str, claimed_by: str) -> None:
        """Name the checkpoint and the claimant."""
        self.claimed_by = claimed_by
        super().__init__(checkpoint_id, f"claimed by restore {claimed_by}")


class InconsistentTraceError(RuntimeRuleError):
    """The trace contradicts itself about a scope, checkpoint or output.

    Two different endings of one scope, two settlements of one output, a scope
    forked twice: something other than the runtime wrote or edited records.
    Nothing is decided on such an aggregate; ``goatherd verify`` and
    ``goatherd recover`` name the records.
    """

    def __init__(self, subject: str, reason: str) -> None:
        """Name what is contradicted and how."""
        super().__init__(f"{subject}: the trace is inconsistent: {reason}")
        self.subject = subject
        self.reason = reason


class UnreadableRecordError(InconsistentTraceError):
    """A scope, checkpoint or output sits on a path holding an unreadable record.

    A runtime record on its path (or its scope's, or an ancestor scope's) does
    not decode: it was stored before the store's door checked runtime records,
    or written around it. The runtime folds every other path and refuses this
    one, naming the record, until the trace no longer holds it.

    Attributes:
        record_id: the record that does not decode.
        path: the path holding it.
    """

    def __init__(self, subject: str, record_id: str, path: str, reason: str) -> None:
        """Name what is refused, the record, the path holding it and why."""
        super().__init__(
            subject,
            f"record {record_id} on {path!r} cannot be read ({reason}); "
            f"{subject!r} is refused until the trace no longer holds it",
        )
        self.record_id = record_id
        self.path = path


class WorkspaceBusyError(RuntimeRuleError):
    """Another claimed workspace effect on the same workspace is unfinished.

    A settle (select/apply) or a restore claimed the workspace and has not
    recorded its result yet (it is running, or crashed and awaits its retry).
    Retry later; ``release``/``discard`` of a claimed output ends its claim.
    """

    def __init__(self, subject: str, workspace_scope: str, holder: str) -> None:
        """Name the operation, the workspace's scope and the claim holder."""
        super().__init__(
            f"{subject}: the workspace of {workspace_scope} is claimed by {holder},"
            " whose effect is unfinished; retry once it settles"
        )
        self.workspace_scope = workspace_scope
        self.holder = holder


class ReservedSchemaError(RuntimeRuleError, ValueError):
    """``append_fact`` named a schema the runtime reserves for its own records.

    Lifecycle records go through their commands, which check their rules.
    """

    def __init__(self, schema_ref: str) -> None:
        """Name the reserved schema."""
        super().__init__(
            f"schema {schema_ref!r} is reserved for the runtime's own records"
            " (goatherd.* and the retired shepherd.* runtime refs); use the"
            " command that records it, or a schema of your own"
        )
        self.schema_ref = schema_ref


class BlobIntegrityError(RuntimeRuleError):
    """Bytes read from the blob store do not match the digest the trace records.

    Nothing is applied: the blob was edited, truncated or is missing.
    """

    def __init__(self, subject: str, digest: str, problem: str) -> None:
        """Name what needed the blob, the recorded digest and the problem."""
        super().__init__(f"{subject}: blob {digest} {problem}; nothing was changed")
        self.subject = subject
        self.digest = digest
        self.problem = problem
