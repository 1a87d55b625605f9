"""Merge-gate commands: propose (a query), record the proposal and the verdict."""

from __future__ import annotations

from goatherd.application.commands.context import RuntimeContext
from goatherd.application.commands.scopes import first_record_id, parent_of
from goatherd.application.decisions import Decision
from goatherd.application.errors import NoSandboxError, UnsupportedError
from goatherd.application.runtime import lifecycle_intent
from goatherd.domain import (
    MergeProposal,
    MergeProposed,
    NoBaselineError,
    SupervisorDecided,
    changes_payload,
    classify_changes,
    diff_digest,
)

__all__ = ["propose_merge", "record_merge_decision", "record_merge_proposal"]


def propose_merge(
    ctx: RuntimeContext, child_id: str, max_diff_lines: int = 0
) -> MergeProposal:
    """Diff the child against its fork baseline (records nothing).

    Raises:
        ScopeNotFoundError, ScopeStateError, NoBaselineError, NoSandboxError,
        UnsupportedError, SandboxError.
    """
    ctx.refresh()
    scope = ctx.known(child_id)
    scope.require_active("cannot propose merge for scope")
    if scope.baseline is None:
        raise NoBaselineError(child_id, "state to diff against")
    binding = ctx.binding(scope.owner)
    if binding is None:
        raise NoSandboxError(f"scope {child_id} has no sandbox to diff in")
    sandbox = binding.sandbox
    if not sandbox.capabilities().diff:
        raise UnsupportedError(
            sandbox.backend(), "diff", "merge review requires the Diff capability"
        )
    diff, files = sandbox.diff(scope.baseline, max_diff_lines)
    changes = classify_changes(diff, files)
    return MergeProposal(child_id, scope.baseline.digest(), changes, diff)


def record_merge_proposal(
    ctx: RuntimeContext, proposal: MergeProposal, seq: int | None
) -> str:
    """Record the proposal on the child's path; return its record id.

    Raises:
        ScopeNotFoundError, ScopeStateError.
    """
    owner = ctx.known(proposal.child_scope_id).owner
    with ctx.lock:
        intent = lifecycle_intent("merge-proposed", owner, "", ctx.next_seq(seq))
        prior = ctx.first_record(intent, seq)
        if prior is not None:
            return prior

        def decide() -> Decision:
            scope = ctx.model.scope(owner)
            scope.require_active("cannot propose merge for scope")
            event = MergeProposed(
                caused_by=(scope.fork_point,) if scope.fork_point else (),
                child_scope=scope.scope_id,
                baseline_digest=proposal.baseline_digest,
                change_count=len(proposal.changes),
                changes=tuple(changes_payload(proposal.changes)),
                diff_digest=diff_digest(proposal.diff),
            )
            return Decision().place(event, owner)

        return first_record_id(ctx.record(intent, decide))


def record_merge_decision(
    ctx: RuntimeContext,
    proposal: MergeProposal,
    approved: bool,
    reason: str,
    action: str,
    proposed_record_id: str,
    seq: int | None,
) -> str:
    """Record the verdict on the parent's path; return its record id.

    Raises:
        ScopeNotFoundError, RootScopeError.
    """
    child = ctx.known(proposal.child_scope_id)
    parent = parent_of(child)
    with ctx.lock:
        intent = lifecycle_intent("merge-decision", parent, "", ctx.next_seq(seq))
        prior = ctx.first_record(intent, seq)
        if prior is not None:
            return prior
        event = SupervisorDecided(
            caused_by=(proposed_record_id,) if proposed_record_id else (),
            approved=approved,
            child_scope=proposal.child_scope_id,
            reason=reason if not approved and reason else None,
            action=action or None,
        )
        receipt = ctx.record(intent, lambda: Decision().place(event, parent))
        return first_record_id(receipt)
