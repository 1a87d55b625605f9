"""Seal and settle: retained outputs, consumed exactly once.

Seal captures the scope's workspace and its diff against the fork baseline,
stores the diff in the blob store and records ``run_output.sealed`` (state,
baseline, change list, the diff's blob address) on the scope's and the
output's paths.

Settle decides against the trace, not against one process's memory:

- ``released`` and ``discarded`` end the output (discard also discards the
  child unless it was discarded or halted already, and destroys its owned
  sandbox) in one append guarded by the
  output's, the child's and the parent's heads.
- ``selected`` and ``applied`` change the parent's workspace, so they first
  append ``run_output.claimed`` on the output's path AND on the path of the
  scope that owns the parent's workspace, under their heads. The claim is
  decided on the fold: the output unconsumed and unclaimed, child and parent
  active, the workspace not claimed by another unfinished effect, and, for
  ``selected``, the workspace's recorded digest still the output's baseline
  (fast-forward); the first attempt also checks the live workspace (select:
  digest equals the baseline; apply: the parent's own changes are disjoint
  from the output's). Of N settles of one output, or of N siblings into one
  parent, exactly one claim commits; the others decide again and fail with
  a typed error before touching any workspace.
- Only the claimant lands the effect (select: a full reset to the sealed
  state; apply: the three-way delta, skipped when it already stands), then
  records the settlement with the base it landed on and the result. A crash
  after the claim is finished by a retry under the same ``seq``. If the
  settlement cannot be recorded after the effect landed, the failure is
  :class:`~goatherd.domain.SettleEffectLandedError` and the output stays
  claimed: a retry finishes it; ``released`` or ``discarded`` end it.
"""

from __future__ import annotations

from typing import Final

from goatherd.application.commands.checkpoints import read_blob
from goatherd.application.commands.claims import check_no_claim_needs
from goatherd.application.commands.context import RuntimeContext
from goatherd.application.commands.scopes import destroy_owned_sandbox, parent_of
from goatherd.application.commands.settle_commit import (
    CommitRequest,
    check_before_settle,
    commit_settled,
)
from goatherd.application.decisions import Decision
from goatherd.application.errors import (
    ApplyConflictError,
    SandboxError,
    UnsupportedError,
)
from goatherd.application.ports import DeltaApplier, Sandbox
from goatherd.application.runtime import claim_intent, seal_intent, settle_intent
from goatherd.domain import (
    NoBaselineError,
    OutputNotFoundError,
    ParentMovedError,
    RetainedOutputAggregate,
    RuntimeRuleError,
    ScopeAggregate,
    ScopeNotFoundError,
    ScopeState,
    SettleEffectLandedError,
    SettlementAction,
    TraceStoreError,
    WorkspaceApplied,
    WorkspaceBusyError,
    apply_overlap,
    changes_payload,
    check_fast_forward,
    classify_changes,
    effect_landed_ending,
    output_id_for,
    parse_settlement_action,
)

__all__ = ["DIFF_HOLDER", "output_diff", "seal", "settle"]

DIFF_HOLDER: Final = "#diff"
_EFFECTS: Final = (SettlementAction.SELECT, SettlementAction.APPLY)
_TRUNCATED: Final = "\n...[diff truncated at the blob limit]\n"


def seal(ctx: RuntimeContext, scope_id: str, seq: int | None) -> str:
    """Freeze the scope's workspace as an output (the scope stays active).

    Raises:
        ScopeNotFoundError, ScopeStateError, NoSandboxError, NoBaselineError,
        SandboxError.
    """
    owner = ctx.known(scope_id).owner
    with ctx.lock:
        out_seq = ctx.next_seq(seq)
        out_id = output_id_for(owner, out_seq)
        intent = seal_intent(owner, out_seq)
        if ctx.committed(intent, seq):
            return out_id
        scope = ctx.scope(owner)
        scope.require_workspace(ctx.workspace_scope(owner), "cannot seal scope")
        sandbox = ctx.sandbox(owner)
        if scope.baseline is None:
            raise NoBaselineError(scope_id, "base to settle onto")
        state = sandbox.capture()
        diff, files = sandbox.diff(scope.baseline, 0)
        changes = changes_payload(classify_changes(diff, files))
        data, truncated = _bounded(diff, ctx.trace.checkpoint_blob_limit)
        blob = ctx.blobs.put(out_id + DIFF_HOLDER, data)
        ctx.fault("after-blob", intent)

        def decide() -> Decision:
            event = ctx.model.output(out_id).seal(
                ctx.model.scope(owner),
                state,
                changes,
                diff_blob=blob,
                diff_truncated=truncated,
                workspace=ctx.workspace_scope(owner),
            )
            guard = ctx.model.workspace_owner(owner)
            return Decision().place(event, owner, out_id).guard(guard)

        try:
            ctx.record(intent, decide)
        except Exception:
            ctx.release_unrecorded(intent, out_id + DIFF_HOLDER, blob)
            raise
        return out_id


def _bounded(diff: str, limit: int) -> tuple[bytes, bool]:
    data = diff.encode("utf-8")
    if len(data) <= limit:
        return data, False
    cut = data[: max(limit - len(_TRUNCATED), 0)].decode("utf-8", errors="ignore")
    return (cut + _TRUNCATED).encode("utf-8"), True


def output_diff(ctx: RuntimeContext, out: RetainedOutputAggregate) -> str:
    """Return the output's stored unified diff (``""`` when none was stored).

    Raises:
        BlobIntegrityError: the stored bytes are missing or do not match.
    """
    if not out.diff_blob:
        return ""
    return read_blob(ctx, out.output_id, out.diff_blob).decode("utf-8")


def _found(ctx: RuntimeContext, output_id: str) -> RetainedOutputAggregate:
    ctx.model.refresh()
    out = ctx.model.output(output_id)
    if not out.exists:
        raise OutputNotFoundError(output_id)
    return out


def settle(
    ctx: RuntimeContext,
    output_id: str,
    action: str,
    seq: int | None,
    commit: CommitRequest | None = None,
) -> str | None:
    """Consume the output exactly once with ``action`` (see the module docs).

    With ``commit``, a select or apply ends with a git commit of the output's
    paths on the parent's branch, recorded once (``settle_commit``); its sha
    is returned (else ``None``).

    Raises:
        OutputNotFoundError, OutputConsumedError, OutputClaimedError,
        UnknownSettlementActionError, ScopeNotFoundError, ScopeStateError,
        RootScopeError, NotAChildError, ParentMovedError, WorkspaceBusyError,
        ApplyConflictError, UnsupportedError, NoSandboxError, SandboxError,
        InconsistentTraceError, SettleEffectLandedError, SettleCommitError.
    """
    with ctx.lock:
        out = _found(ctx, output_id)
        owner = out.scope_owner
        attempt = ctx.next_seq(seq)
        intent = settle_intent(owner, str(action), attempt)
        committed = ctx.committed(intent, seq)
        if not committed:
            out.check_settleable()
        verb = parse_settlement_action(action)
        if commit is not None and not committed:
            check_before_settle(ctx, out, verb, commit, attempt)
        if not committed:
            child = ctx.scope(owner)
            if not child.listed:
                raise ScopeNotFoundError(f"{child.scope_id} for output {output_id}")
            if verb in _EFFECTS:
                _settle_with_effect(ctx, out, child, verb, intent)
            else:
                _end(ctx, out, child, verb, intent)
    # Also on a retry of a committed settle: a kill between the settlement
    # record and the teardown left the child's sandbox standing.
    if verb is not SettlementAction.RELEASE:
        destroy_owned_sandbox(ctx, owner)
    if commit is None:
        return None
    with ctx.lock:
        return commit_settled(ctx, output_id, verb, intent, commit)


def _end(
    ctx: RuntimeContext,
    out: RetainedOutputAggregate,
    child: ScopeAggregate,
    verb: SettlementAction,
    intent: str,
) -> None:
    if verb is SettlementAction.DISCARD:
        parent_of(child)  # a root has no parent to discard from

    def decide() -> Decision:
        current = ctx.model.output(out.output_id)
        current.check_settleable()
        kid = ctx.model.scope(child.owner)
        decision = Decision()
        # A scope discarded (or halted) already has nothing left to end: the
        # discard only consumes its output.
        if verb is SettlementAction.DISCARD and kid.state is not ScopeState.DISCARDED:
            parent_owner = parent_of(kid)
            parent = ctx.model.scope(parent_owner)
            decision = decision.place(parent.discard(kid), parent_owner, kid.owner)
            spaces = check_no_claim_needs(
                ctx.model,
                kid,
                f"settle {out.output_id} (discarded): cannot discard scope",
                allow=current.output_id,
            )
            decision = decision.guard(*spaces)
        settled = current.settle(verb, intent)
        claimed = current.claim_parent
        ws_owner = ctx.model.workspace_owner(claimed) if claimed else ""
        decision = decision.place(settled, kid.owner, current.output_id, ws_owner)
        return decision.guard(kid.parent_owner or "")

    ctx.record(intent, decide)


def _settle_with_effect(
    ctx: RuntimeContext,
    out: RetainedOutputAggregate,
    child: ScopeAggregate,
    verb: SettlementAction,
    intent: str,
) -> None:
    out.check_claimable(intent)
    parent_owner = parent_of(child)
    sandbox = ctx.sandbox(parent_owner, f"parent of {child.scope_id} has no sandbox")
    if out.claimed_by != intent:
        try:
            base = _check_live(sandbox, out, verb)
        except (ParentMovedError, ApplyConflictError):
            # Another settle may have claimed this output and landed its effect
            # on the parent since the fold above: that is the answer, not the
            # parent's move (which is that settle's own work).
            ctx.refresh()
            ctx.model.output(out.output_id).check_claimable(intent)
            raise
        _claim(ctx, out.output_id, child.owner, parent_owner, verb, intent, base)
    _land(sandbox, out, verb)
    ctx.fault("after-effect", intent)
    try:
        result = out.workspace.digest()
        if verb is SettlementAction.APPLY:
            result = sandbox.capture().digest()
        ctx.record(
            intent,
            lambda: _settlement(
                ctx, out.output_id, child.owner, parent_owner, verb, intent, result
            ),
        )
    except (TraceStoreError, RuntimeRuleError, SandboxError) as error:
        # The effect stands on the parent: whatever kept its settlement from
        # being recorded, the caller must learn the seq that finishes it.
        ctx.model.refresh()
        ending = effect_landed_ending(ctx.model.scope(child.owner).is_active)
        seq = int(intent.rpartition(":")[2])
        raise SettleEffectLandedError(
            out.output_id, verb.value, ending, str(error), seq
        ) from error


def _check_live(
    sandbox: Sandbox, out: RetainedOutputAggregate, verb: SettlementAction
) -> str:
    """Check the live parent workspace on a first attempt; return its digest."""
    now = sandbox.capture().digest()
    if verb is SettlementAction.SELECT:
        check_fast_forward(out.output_id, now, out.baseline.digest())
        return now
    if not isinstance(sandbox, DeltaApplier):
        raise UnsupportedError(
            sandbox.backend(),
            "apply_delta",
            "parent sandbox does not implement DeltaApplier",
        )
    try:
        # A dry run of the three-way apply, before the claim (ADR 0083).
        sandbox.check_delta(out.workspace, out.baseline)
    except ApplyConflictError as conflict:
        raise ApplyConflictError(
            conflict.paths,
            f"settle {out.output_id} (apply): parent changed since the baseline"
            ", which the sealed output also changes",
            hunks=conflict.hunks,
            reasons=conflict.reasons,
        ) from conflict
    return now


def _claim(
    ctx: RuntimeContext,
    output_id: str,
    child_owner: str,
    parent_owner: str,
    verb: SettlementAction,
    intent: str,
    base: str,
) -> None:
    def decide() -> Decision | None:
        out = ctx.model.output(output_id)
        out.check_claimable(intent)
        child = ctx.model.scope(child_owner)
        parent = ctx.model.scope(parent_owner)
        child.require_active(f"settle {output_id} ({verb.value}): cannot merge scope")
        parent.require_active(
            f"settle {output_id} ({verb.value}): cannot merge into scope"
        )
        ws_owner = ctx.model.workspace_owner(parent_owner)
        _check_recorded_workspace(ctx.model.scope(ws_owner), out, verb)
        event = out.claim(verb, intent, parent_owner=parent_owner, base_digest=base)
        if event is None:
            return None
        decision = Decision().place(event, output_id, ws_owner)
        return decision.guard(child_owner, parent_owner)

    ctx.record(claim_intent(intent), decide)


def _check_recorded_workspace(
    workspace: ScopeAggregate, out: RetainedOutputAggregate, verb: SettlementAction
) -> None:
    """The trace's side of fast-forward: no unfinished effect, head at baseline."""
    busy = workspace.workspace_claim
    if busy and busy != out.output_id:
        if verb is SettlementAction.SELECT:
            raise ParentMovedError(out.output_id)
        raise WorkspaceBusyError(
            f"settle {out.output_id} (apply)", workspace.scope_id, busy
        )
    recorded = workspace.workspace_digest
    if verb is SettlementAction.SELECT and recorded:
        check_fast_forward(out.output_id, recorded, out.baseline.digest())


def _land(
    sandbox: Sandbox, out: RetainedOutputAggregate, verb: SettlementAction
) -> None:
    """Perform the effect; idempotent, so a retry after a crash may repeat it."""
    if verb is SettlementAction.SELECT:
        sandbox.apply(out.workspace)  # a full reset: repeating it is harmless
        return
    if _already_applied(sandbox, out):
        return
    if not isinstance(sandbox, DeltaApplier):
        raise UnsupportedError(
            sandbox.backend(),
            "apply_delta",
            "parent sandbox does not implement DeltaApplier",
        )
    sandbox.apply_delta(out.workspace, out.baseline)


def _already_applied(sandbox: Sandbox, out: RetainedOutputAggregate) -> bool:
    """Whether the sealed paths already stand on the parent (a landed apply)."""
    if not out.change_paths:
        return True
    try:
        _, differing = sandbox.diff(out.workspace, 0)
    except SandboxError:
        return False
    return not apply_overlap(out.change_paths, differing)


def _settlement(
    ctx: RuntimeContext,
    output_id: str,
    child_owner: str,
    parent_owner: str,
    verb: SettlementAction,
    intent: str,
    result: str,
) -> Decision:
    out = ctx.model.output(output_id)
    out.check_claimable(intent)
    child = ctx.model.scope(child_owner)
    parent = ctx.model.scope(parent_owner)
    ws_owner = ctx.model.workspace_owner(parent_owner)
    decision = Decision()
    if verb is SettlementAction.SELECT:
        state = out.workspace
        applied = WorkspaceApplied(
            backend=state.backend, revision=state.revision, state_digest=result
        )
        decision = decision.place(applied, parent_owner)
    decision = decision.place(parent.merge(child), parent_owner, child_owner)
    settled = out.settle(
        verb,
        intent,
        parent_owner=parent_owner,
        base_digest=out.claim_base,
        result_digest=result,
    )
    return decision.place(settled, child_owner, output_id, ws_owner)
