"""The merge gate: propose (a query), record the proposal, record the verdict."""

from __future__ import annotations

from returns.result import Result

from goatherd.application.errors import NoSandboxError, UnsupportedError
from goatherd.application.ports import Sandbox
from goatherd.application.runtime import RuntimeFailure, lifecycle_intent
from goatherd.application.scope_handle import attempt
from goatherd.application.scope_manager import ScopeManagerCore
from goatherd.domain import (
    MergeProposal,
    NoBaselineError,
    RootScopeError,
    ScopeAggregate,
    TraceAggregate,
    changes_payload,
    classify_changes,
    diff_digest,
    scope_id_for,
)

__all__ = ["MergeGateCommands"]


class MergeGateCommands(ScopeManagerCore):
    """Merge review commands (mixed into the manager)."""

    def propose_merge(
        self, child_id: str, max_diff_lines: int = 0
    ) -> Result[MergeProposal, RuntimeFailure]:
        """Diff the child against its fork baseline (a query; records nothing)."""

        def run() -> MergeProposal:
            owner = self._owner_of(child_id)
            agg = self._aggregate(owner)
            agg.require_active("cannot propose merge for scope")
            if agg.baseline is None:
                raise NoBaselineError(child_id, "state to diff against")
            sandbox = self._diff_sandbox(owner)
            diff, files = sandbox.diff(agg.baseline, max_diff_lines)
            changes = classify_changes(diff, files)
            return MergeProposal(child_id, agg.baseline.digest(), changes, diff)

        return attempt(run)

    def _diff_sandbox(self, owner: str) -> Sandbox:
        sandbox = self._entry(owner).sandbox
        if sandbox is None:
            raise NoSandboxError(
                f"scope {scope_id_for(owner)} has no sandbox to diff in"
            )
        if not sandbox.capabilities().diff:
            raise UnsupportedError(
                sandbox.backend(), "diff", "merge review requires the Diff capability"
            )
        return sandbox

    def record_merge_proposal(
        self, proposal: MergeProposal, *, seq: int | None = None
    ) -> Result[str, RuntimeFailure]:
        """Record the proposal on the child's path (hard); return its record id."""

        def run() -> str:
            with self._lock:
                owner = self._owner_of(proposal.child_scope_id)
                intent = lifecycle_intent(
                    "merge-proposed", owner, "", self._next_seq(seq)
                )
                prior = self._first_record(intent, seq)
                if prior is not None:
                    return prior
                ids: list[str] = []

                def decide() -> list[TraceAggregate]:
                    agg = self._load(ScopeAggregate, owner)
                    event = agg.propose_merge(
                        baseline_digest=proposal.baseline_digest,
                        changes=changes_payload(proposal.changes),
                        diff_digest=diff_digest(proposal.diff),
                    )
                    ids.append(event.record_id)
                    return [agg]

                self._decide_and_save(decide, intent)
                return ids[-1]

        return attempt(run)

    def record_merge_decision(
        self,
        proposal: MergeProposal,
        approved: bool,
        reason: str,
        action: str,
        proposed_record_id: str,
        *,
        seq: int | None = None,
    ) -> Result[str, RuntimeFailure]:
        """Record the verdict on the parent's path (hard); return its record id."""

        def run() -> str:
            with self._lock:
                child = self._owner_of(proposal.child_scope_id)
                parent = self._aggregate(child).parent_owner
                if parent is None:
                    raise RootScopeError(proposal.child_scope_id)
                intent = lifecycle_intent(
                    "merge-decision", parent, "", self._next_seq(seq)
                )
                prior = self._first_record(intent, seq)
                if prior is not None:
                    return prior
                ids: list[str] = []

                def decide() -> list[TraceAggregate]:
                    agg = self._load(ScopeAggregate, parent)
                    event = agg.decide(
                        child_scope=proposal.child_scope_id,
                        approved=approved,
                        reason=reason,
                        action=action,
                        proposed_record_id=proposed_record_id,
                    )
                    ids.append(event.record_id)
                    return [agg]

                self._decide_and_save(decide, intent)
                return ids[-1]

        return attempt(run)
