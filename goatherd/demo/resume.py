"""Finish what a crash interrupted, from the trace alone (ADR 0022).

After ``recover_scopes`` rebuilt the scope tree, :func:`finish_interrupted`
brings every attempt of the session to an end, each step checking the trace
first so a crash during the finishing is finished by the next rerun:

1. A winner's settlement that was claimed but not recorded is finished under
   the SAME settle intent (the claim names it): the claimant re-applies the
   sealed state and records, so the winner settles exactly once.
2. A settled winner gets its merge decision and run record if the crash came
   before them; the other attempts of its round that were sealed and not yet
   settled are discarded as best-of-n does ("not chosen").
3. Every attempt still active is cut off: its unconsumed outputs are
   discarded (or the scope itself), and a ``goatherd.run.completed.v1``
   record says it was cut off by a crash.

What is still missing (no winner) is then run by the session as a new round.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final, TypeVar

from returns.result import Failure, Result

from goatherd.application import (
    RunOutcome,
    RunStatus,
    ScopeManager,
    run_record_payload,
)
from goatherd.demo.state import (
    ROOT_OWNER,
    AttemptView,
    OutputView,
    SessionState,
)
from goatherd.domain import (
    GoatherdError,
    MergeProposal,
    ProposedChange,
    ScopeClaimedError,
    ScopeState,
    SettlementAction,
)

__all__ = ["CUT_OFF_REASON", "NOT_CHOSEN_REASON", "finish_interrupted"]

CUT_OFF_REASON: Final = "cut off by a crash, discarded on recovery"
NOT_CHOSEN_REASON: Final = "not chosen"
ROOT_SCOPE: Final = f"scope:{ROOT_OWNER}"
T = TypeVar("T")

Progress = Callable[[str], None]


def finish_interrupted(
    manager: ScopeManager,
    read: Callable[[], SessionState],
    progress: Progress,
) -> SessionState:
    """End every interrupted attempt; return the session as it now stands.

    Raises:
        GoatherdError: a settlement or record the trace refused.
    """
    finisher = _Finisher(manager, progress)
    state = read()
    for attempt in state.attempts:
        claimed = attempt.claimed_output
        if claimed is not None and attempt.state is ScopeState.ACTIVE:
            finisher.finish_claimed(attempt, claimed)
            state = read()
    winner = state.winner
    if winner is not None:
        finisher.complete_winner(winner)
        for attempt in state.attempts:
            if attempt.round == winner.round and attempt is not winner:
                finisher.discard_loser(attempt)
        state = read()
    for attempt in state.attempts:
        if attempt.state is ScopeState.ACTIVE or attempt.run is None:
            finisher.cut_off(attempt)
    return read()


@dataclass(slots=True)
class _Finisher:
    manager: ScopeManager
    progress: Progress

    def finish_claimed(self, attempt: AttemptView, output: OutputView) -> None:
        """Finish a claimed settlement under the intent that claimed it."""
        action, seq = _parse_settle_intent(output.claimed_by)
        self.progress(
            f"finishing the claimed settlement of {output.output_id} ({action})"
            f" under its intent {output.claimed_by}"
        )
        _ok(self.manager.settle(output.output_id, action, seq=seq))

    def complete_winner(self, attempt: AttemptView) -> None:
        """Record the winner's decision and run record if they are missing."""
        output = attempt.winning_output
        assert output is not None
        assert output.action is not None
        action = output.action.value
        decision = ""
        if not attempt.decision_action:
            decision = self._decide(attempt, approved=True, action=action)
        if attempt.status not in (RunStatus.SELECTED, RunStatus.APPLIED):
            status = RunStatus(action)
            self._record(attempt, status, "", output, action, decision)

    def discard_loser(self, attempt: AttemptView) -> None:
        """Discard a sealed, unsettled attempt of the winner's round."""
        if attempt.status or not attempt.outputs:
            return  # it recorded its own end, or it never sealed (cut off)
        for output in attempt.outputs:
            if output.action is None:
                self.progress(f"discarding {output.output_id}: {NOT_CHOSEN_REASON}")
                discard = SettlementAction.DISCARD.value
                _ok(self.manager.settle(output.output_id, discard))
        decision = ""
        if attempt.proposal is not None and not attempt.decision_action:
            decision = self._decide(attempt, approved=True, action="discarded")
        self._record(
            attempt,
            RunStatus.SEALED,
            NOT_CHOSEN_REASON,
            attempt.outputs[-1],
            SettlementAction.DISCARD.value,
            decision,
        )

    def cut_off(self, attempt: AttemptView) -> None:
        """Discard an attempt the crash interrupted and record why.

        An attempt already discarded (the crash came between its discard and
        its run record) only gets the record.
        """
        if attempt.state is ScopeState.ACTIVE:
            self.progress(f"discarding {attempt.scope_id}: {CUT_OFF_REASON}")
            pending = [o for o in attempt.outputs if o.action is None]
            discard = SettlementAction.DISCARD.value
            for output in pending:
                _ok(self.manager.settle(output.output_id, discard))
            if not pending:
                self._end(lambda: self.manager.discard(attempt.scope_id))
        if attempt.run is None:
            self._record(attempt, RunStatus.FAILED, CUT_OFF_REASON, None, "", "")

    def _end(self, end: Callable[[], Result[None, GoatherdError]]) -> None:
        """End a scope; first finish a restore the crash left claimed.

        A claim is the end of the race: a restore that claimed before the
        crash must land before its scope may end, so it is finished under the
        seq that claimed it, then the ending is tried again.
        """
        result = end()
        failure = result.failure() if isinstance(result, Failure) else None
        if (
            isinstance(failure, ScopeClaimedError)
            and failure.kind == "checkpoint"
            and failure.seq is not None
        ):
            self.progress(
                f"finishing the claimed restore of {failure.holder} under seq "
                f"{failure.seq}"
            )
            _ok(self.manager.restore_checkpoint(failure.holder, seq=failure.seq))
            result = end()
        _ok(result)

    def _decide(self, attempt: AttemptView, *, approved: bool, action: str) -> str:
        assert attempt.proposal is not None
        record_id, payload = attempt.proposal
        proposal = MergeProposal(
            attempt.scope_id,
            str(payload.get("baseline_digest") or ""),
            _changes(payload),
        )
        return _ok(
            self.manager.record_merge_decision(
                proposal, approved, "", action, record_id
            )
        )

    def _record(
        self,
        attempt: AttemptView,
        status: RunStatus,
        reason: str,
        output: OutputView | None,
        action: str,
        decision: str,
    ) -> None:
        proposal_id, payload = attempt.proposal or ("", {})
        outcome = RunOutcome(
            parent_scope_id=ROOT_SCOPE,
            scope_id=attempt.scope_id,
            status=status,
            isolated=True,
            changes=_changes(payload),
            proposal_record_id=proposal_id,
            decision_record_id=decision,
            output_id="" if output is None else output.output_id,
            output_action=action,
            reason=reason,
        )
        _ok(
            self.manager.record_run_completed(
                attempt.scope_id, run_record_payload(outcome)
            )
        )


def _changes(payload: Mapping[str, object]) -> tuple[ProposedChange, ...]:
    changes = payload.get("changes")
    if not isinstance(changes, list):
        return ()
    return tuple(
        ProposedChange(str(c.get("path")), str(c.get("kind")))
        for c in changes
        if isinstance(c, Mapping)
    )


def _parse_settle_intent(intent: str) -> tuple[str, int]:
    """Split ``<owner>:settle:<action>:<seq>`` into the action and the seq."""
    head, action, seq = intent.rsplit(":", 2)
    if not head.endswith(":settle") or not seq.isdigit():
        raise GoatherdError(f"claim names an unexpected settle intent {intent!r}")
    return action, int(seq)


def _ok(result: Result[T, GoatherdError]) -> T:
    if isinstance(result, Failure):
        raise result.failure()
    return result.unwrap()
