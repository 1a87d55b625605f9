"""The retained-output aggregate: a sealed child result, settled exactly once.

An output (``out:<owner>:<seq>``) is folded from its records; its stream is
its own path, and its records also sit on the sealing scope's path.
Consume-once is optimistic concurrency: a select/apply first appends
``run_output.claimed`` under the output's head (and the head of the parent's
workspace path), so exactly one settle ever holds the claim and only it
changes the parent's workspace; the settlement itself is one more record
under the same heads.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Final

from goatherd.domain.checkpoint import seq_of_sequenced_id
from goatherd.domain.events import OutputClaimed, OutputSealed, OutputSettled
from goatherd.domain.runtime_errors import (
    InconsistentTraceError,
    NoBaselineError,
    OutputClaimedError,
    OutputConsumedError,
    OutputNotFoundError,
)
from goatherd.domain.scope import ScopeAggregate, owner_in_sequenced_id, scope_id_for
from goatherd.domain.settlement import (
    OutputState,
    SettlementAction,
    terminal_state_for,
)
from goatherd.domain.workspace import WorkspaceState

__all__ = [
    "OUTPUT_PREFIX",
    "RetainedOutputAggregate",
    "output_id_for",
    "owner_of_output",
    "same_attempt",
]

OUTPUT_PREFIX: Final = "out:"
_NO_STATE: Final = WorkspaceState(backend="")


def output_id_for(owner: str, seq: int) -> str:
    """Return the output id ``out:<owner>:<seq>``."""
    return f"{OUTPUT_PREFIX}{owner}:{seq}"


def same_attempt(settle_intent: str, other: str) -> bool:
    """Whether two settle intents are one attempt (same owner and ``seq``).

    ``<owner>:settle:<action>:<seq>`` names the attempt by owner and seq; the
    verb may differ (a claimant whose select landed may end with a release).
    """
    return _attempt_key(settle_intent) == _attempt_key(other) != ""


def _attempt_key(settle_intent: str) -> str:
    head, _, rest = settle_intent.rpartition(":settle:")
    _, _, seq = rest.rpartition(":")
    return f"{head}:{seq}" if head and seq else ""


def owner_of_output(output_id: str) -> str:
    """Return the sealing scope's owner named by an output id (``""`` if malformed)."""
    return owner_in_sequenced_id(output_id, OUTPUT_PREFIX)


@dataclass(frozen=True, slots=True)
class RetainedOutputAggregate:
    """A retained output as the trace shows it.

    Attributes:
        output_id: ``out:<owner>:<seq>``.
        scope_owner: the sealing scope's owner.
        exists: whether ``run_output.sealed`` was recorded.
        workspace: the sealed state.
        baseline: the fork baseline the changes are against.
        changes: ``{path, kind}`` per change, frozen at seal time.
        diff_blob: the blob address of the stored unified diff (``""``: none).
        diff_truncated: whether the stored diff was cut at the blob limit.
        sealed_record: the sealed record's id (what the settlement cites).
        sealed_intent: the intent that sealed it (for its commit time).
        state: the consume-once state.
        action: the verb that consumed it (``None`` until settled).
        settled_record: the settlement record's id.
        settled_intent: the intent that settled it (for its commit time).
        claimed_by: the settle intent holding the effect claim (``""``: none).
        claim_parent: the parent that claim's effect changes.
        claim_base: the parent's digest that claim was decided on.
        parent_owner: the parent the effect landed on (select/apply).
        base_digest: the parent's digest the effect was applied onto.
        result_digest: the parent's digest after the effect.
        inconsistent: why the trace contradicts itself about it.
    """

    output_id: str
    scope_owner: str = ""
    exists: bool = False
    workspace: WorkspaceState = _NO_STATE
    baseline: WorkspaceState = _NO_STATE
    changes: tuple[Mapping[str, str], ...] = ()
    diff_blob: str = ""
    diff_truncated: bool = False
    sealed_record: str = ""
    sealed_intent: str = ""
    state: OutputState = OutputState.UNCONSUMED
    action: SettlementAction | None = None
    settled_record: str = ""
    settled_intent: str = ""
    claimed_by: str = ""
    claim_parent: str = ""
    claim_base: str = ""
    parent_owner: str = ""
    base_digest: str = ""
    result_digest: str = ""
    inconsistent: str = ""

    @classmethod
    def bare(cls, output_id: str) -> RetainedOutputAggregate:
        """Return what an unknown output id folds to."""
        return cls(output_id, scope_owner=owner_of_output(output_id))

    @property
    def scope_id(self) -> str:
        """The id of the scope that sealed it."""
        return scope_id_for(self.scope_owner)

    @property
    def seq(self) -> int:
        """The sequence value in its id (the ordering key)."""
        return seq_of_sequenced_id(self.output_id)

    @property
    def change_paths(self) -> list[str]:
        """The changed paths, in change order."""
        return [change["path"] for change in self.changes]

    # ------------------------------------------------------------- rules

    def seal(
        self,
        scope: ScopeAggregate,
        state: WorkspaceState,
        changes: Sequence[Mapping[str, str]],
        *,
        diff_blob: str,
        diff_truncated: bool,
        workspace: ScopeAggregate | None = None,
    ) -> OutputSealed:
        """Decide to record this (new) output sealed from ``scope`` at ``state``.

        ``workspace`` is the scope owning the workspace ``scope`` works in.

        Raises:
            ScopeStateError: the scope is not active, or its workspace ended.
            NoBaselineError: the scope has no fork baseline to settle onto.
        """
        scope.require_workspace(workspace, "cannot seal scope")
        baseline = scope.baseline
        if baseline is None:
            raise NoBaselineError(scope.scope_id, "base to settle onto")
        frozen = tuple({"path": c["path"], "kind": c["kind"]} for c in changes)
        return OutputSealed(
            output_id=self.output_id,
            scope=scope.scope_id,
            backend=state.backend,
            revision=state.revision,
            state_digest=state.digest(),
            baseline_digest=baseline.digest(),
            change_count=len(frozen),
            state=state,
            baseline=baseline,
            changes=frozen,
            diff_blob=diff_blob,
            diff_truncated=True if diff_truncated else None,
        )

    def check_settleable(self) -> None:
        """Raise unless the output exists, is consistent and is unconsumed.

        Raises:
            OutputNotFoundError: never sealed.
            InconsistentTraceError: the trace contradicts itself about it.
            OutputConsumedError: it was settled already.
        """
        if not self.exists:
            raise OutputNotFoundError(self.output_id)
        if self.inconsistent:
            raise InconsistentTraceError(self.output_id, self.inconsistent)
        if self.state is not OutputState.UNCONSUMED:
            raise OutputConsumedError(self.output_id, self.state)

    def check_claimable(self, settle_intent: str) -> None:
        """Check ``settle_intent`` may perform a select/apply effect.

        Raises:
            the errors of :meth:`check_settleable`;
            OutputClaimedError: another intent holds the claim.
        """
        self.check_settleable()
        if self.claimed_by and self.claimed_by != settle_intent:
            raise OutputClaimedError(self.output_id, self.claimed_by)

    def claim(
        self,
        action: SettlementAction,
        settle_intent: str,
        *,
        parent_owner: str,
        base_digest: str,
    ) -> OutputClaimed | None:
        """Decide to claim it for ``settle_intent`` (``None``: the claim is ours).

        Raises:
            the errors of :meth:`check_claimable`.
        """
        self.check_claimable(settle_intent)
        if self.claimed_by == settle_intent:
            return None
        return OutputClaimed(
            output_id=self.output_id,
            action=action,
            settle_intent=settle_intent,
            parent_owner=parent_owner,
            base_digest=base_digest or None,
        )

    def settle(
        self,
        action: SettlementAction,
        settle_intent: str = "",
        *,
        parent_owner: str = "",
        base_digest: str = "",
        result_digest: str = "",
    ) -> OutputSettled:
        """Decide to record the settlement (consume-once).

        A select/apply must hold the claim (``settle_intent``). A claimed
        output is ended (released or discarded) only by the attempt that
        claimed it (the same owner and ``seq``, any verb): a claimant may be
        landing its effect right now, and the output must not end under it.

        Raises:
            the errors of :meth:`check_settleable`;
            OutputClaimedError: the output is claimed by another attempt.
        """
        if action in (SettlementAction.SELECT, SettlementAction.APPLY):
            self.check_claimable(settle_intent)
        elif self.claimed_by and not same_attempt(self.claimed_by, settle_intent):
            raise OutputClaimedError(self.output_id, self.claimed_by)
        self.check_settleable()
        return OutputSettled(
            caused_by=(self.sealed_record,),
            output_id=self.output_id,
            action=action,
            state_digest=self.workspace.digest(),
            parent_owner=parent_owner or None,
            base_digest=base_digest or None,
            result_digest=result_digest or None,
        )

    # ------------------------------------------------------------- evolve

    def with_sealed(
        self, event: OutputSealed, record_id: str, intent: str
    ) -> RetainedOutputAggregate:
        """Fold ``run_output.sealed`` (a second, different one contradicts)."""
        if self.exists:
            if self.sealed_record == record_id:
                return self
            return self._contradicted(f"output {self.output_id} is sealed twice")
        return replace(
            self,
            exists=True,
            scope_owner=event.scope.removeprefix("scope:") or self.scope_owner,
            workspace=event.state,
            baseline=event.baseline,
            changes=tuple(dict(c) for c in event.changes),
            diff_blob=event.diff_blob or "",
            diff_truncated=bool(event.diff_truncated),
            sealed_record=record_id,
            sealed_intent=intent,
        )

    def with_claim(self, event: OutputClaimed) -> RetainedOutputAggregate:
        """Fold ``run_output.claimed`` (the first claim holds)."""
        if self.claimed_by:
            return self
        return replace(
            self,
            claimed_by=event.settle_intent,
            claim_parent=event.parent_owner or "",
            claim_base=event.base_digest or "",
        )

    def with_settled(
        self, event: OutputSettled, record_id: str, intent: str
    ) -> RetainedOutputAggregate:
        """Fold ``run_output.settled`` (a second settlement contradicts)."""
        if self.settled_record:
            if self.settled_record == record_id:
                return self
            return self._contradicted(f"output {self.output_id} is settled twice")
        return replace(
            self,
            state=terminal_state_for(event.action),
            action=event.action,
            settled_record=record_id,
            settled_intent=intent,
            parent_owner=event.parent_owner or "",
            base_digest=event.base_digest or "",
            result_digest=event.result_digest or "",
        )

    def _contradicted(self, reason: str) -> RetainedOutputAggregate:
        return self if self.inconsistent else replace(self, inconsistent=reason)
