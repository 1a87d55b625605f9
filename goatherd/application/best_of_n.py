"""Best-of-n: several isolated attempts, one chooser, exactly one settled winner.

:func:`best_of_n` runs the attempts one after another, each like
:func:`~goatherd.application.run.run_reversible` in its own isolated sandbox
up to a sealed output, lets a chooser pick the winner among the sealed
outputs, settles the winner (``selected``, ``applied`` when the parent moved)
and settles every loser with ``discarded``. Each attempt writes its own
``goatherd.run.completed.v1`` record (ADR 0020).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Sequence

from returns.result import Result

from goatherd.application.manager import ScopeManager
from goatherd.application.ports import Sandbox
from goatherd.application.run import _EXPECTED, _Attempt, _attempt, _note, _ok, _Runner
from goatherd.application.run_outcome import (
    BestOfN,
    BestOfNError,
    Chooser,
    MergeSupervisor,
    RunCallbackError,
    RunFailure,
    RunHandler,
    RunOutcome,
    RunSettleError,
    RunStatus,
)
from goatherd.domain import GoatherdError, MergeReviewer, scope_id_for

__all__ = ["best_of_n"]


def best_of_n(
    manager: ScopeManager,
    parent_id: str,
    attempts: Sequence[RunHandler],
    *,
    sandbox_for: Callable[[int], Sandbox],
    chooser: Chooser,
    reviewer: MergeReviewer | None = None,
    supervisor: MergeSupervisor | None = None,
    owner_prefix: str = "",
    max_diff_lines: int = 0,
) -> Result[BestOfN, RunFailure]:
    """Run each handler in its own isolated child; settle the chosen one only.

    Attempt ``i`` runs in ``sandbox_for(i)`` (a fresh, NOT yet created
    sandbox) as child ``<owner_prefix>-<i>`` (default prefix
    ``<parent owner>:best-of-n:<random>``), is reviewed like
    :func:`run_reversible` and, if approved, sealed. A denied or failed
    attempt is discarded at once. ``chooser`` sees the sealed outputs (their
    frozen ``changes``, ``diff`` and states) and returns the winner, which
    settles ``selected`` (``applied`` when the parent moved). Every other
    sealed output settles ``discarded``.

    Returns:
        ``Success(BestOfN)`` exactly when one winner settled.
        ``Failure(BestOfNError)`` with every attempt's outcome otherwise: no
        attempt sealed, the chooser chose none (or an output it was not
        offered, or raised; then every sealed output is discarded), or the
        winner's settlement failed (``output_id`` names it; it stays
        unconsumed). A bad parent fails before any attempt starts.
    """
    runner = _BestOfNRunner(manager, parent_id, reviewer, supervisor, max_diff_lines)
    return _attempt(
        lambda: runner.best_of(attempts, sandbox_for, chooser, owner_prefix)
    )


class _BestOfNRunner(_Runner):
    """Runs attempts up to their seals, then chooses and settles."""

    def best_of(
        self,
        attempts: Sequence[RunHandler],
        sandbox_for: Callable[[int], Sandbox],
        chooser: Chooser,
        owner_prefix: str,
    ) -> BestOfN:
        parent = self._check_parent()
        if not attempts:
            raise BestOfNError("no attempts were given")
        prefix = owner_prefix or f"{parent.owner_id}:best-of-n:{secrets.token_hex(4)}"
        runs: list[_Attempt | RunOutcome] = []
        try:
            for index, handler in enumerate(attempts):
                runs.append(
                    self._seal_attempt(f"{prefix}-{index}", index, handler, sandbox_for)
                )
            return self._choose_and_settle(runs, chooser)
        except BaseException:
            # Never leave a sealed attempt open behind an unexpected error.
            for run in runs:
                if isinstance(run, _Attempt) and run.outcome is None:
                    self._discard_sealed(run, "best-of-n stopped")
            raise

    def _seal_attempt(
        self,
        owner: str,
        index: int,
        handler: RunHandler,
        sandbox_for: Callable[[int], Sandbox],
    ) -> _Attempt | RunOutcome:
        """Run one attempt up to its sealed output, or return how it ended."""
        try:
            sandbox = _make_sandbox(sandbox_for, index, owner)
            att = self._start(owner, sandbox)
        except _EXPECTED as error:
            return RunOutcome(
                self._parent_id,
                scope_id_for(owner),
                RunStatus.FAILED,
                True,
                reason=str(error),
            )
        try:
            with self._guard(att):
                self._work_and_review(att, handler)
                att.output = _ok(self._manager.seal(att.child.id))
        except _EXPECTED:
            assert att.outcome is not None  # the guard or the denial recorded it
            return att.outcome
        return att

    def _choose_and_settle(
        self, runs: list[_Attempt | RunOutcome], chooser: Chooser
    ) -> BestOfN:
        sealed = [run for run in runs if isinstance(run, _Attempt)]
        if not sealed:
            raise BestOfNError("no attempt was approved and sealed", _outcomes(runs))
        winner = self._choose(runs, sealed, chooser)
        failure: RunSettleError | None = None
        try:
            self._settle_winner(winner)
        except RunSettleError as error:
            failure = error
        for loser in sealed:
            if loser is not winner:
                self._discard_sealed(loser, "not chosen")
        if failure is not None:
            raise BestOfNError(
                f"the winner {failure.output_id} did not settle: {failure.cause}",
                _outcomes(runs),
                output_id=failure.output_id,
                cause=failure.cause,
            )
        return BestOfN(_outcomes(runs), runs.index(winner))

    def _choose(
        self,
        runs: list[_Attempt | RunOutcome],
        sealed: list[_Attempt],
        chooser: Chooser,
    ) -> _Attempt:
        """Ask the chooser; any non-choice discards every sealed attempt."""
        outputs = [att.output for att in sealed if att.output is not None]
        cause: GoatherdError | None = None
        try:
            chosen = chooser(outputs)
        except Exception as error:
            cause = RunCallbackError("chooser", self._parent_id, error)
            chosen = None
        by_id = {att.output.id: att for att in sealed if att.output is not None}
        if chosen is not None and chosen.id in by_id:
            return by_id[chosen.id]
        if cause is not None:
            why = str(cause)
        elif chosen is None:
            why = "the chooser chose no winner"
        else:
            why = f"the chooser chose {chosen.id}, which it was not offered"
        for att in sealed:
            self._discard_sealed(att, why)
        raise BestOfNError(why, _outcomes(runs), cause=cause)

    def _discard_sealed(self, att: _Attempt, why: str) -> RunOutcome:
        """Settle an approved but unchosen output with ``discarded``."""
        assert att.output is not None
        problems = [why]
        _note(problems, self._manager.settle(att.output.id, "discarded"))
        assert att.proposal is not None
        decision = self._manager.record_merge_decision(
            att.proposal, True, "", "discarded", att.proposal_record_id
        )
        _note(problems, decision)
        att.decision_record_id = decision.value_or("")
        return self._record(att, RunStatus.SEALED, "; ".join(problems))


def _outcomes(runs: Sequence[_Attempt | RunOutcome]) -> tuple[RunOutcome, ...]:
    found: list[RunOutcome] = []
    for run in runs:
        outcome = run if isinstance(run, RunOutcome) else run.outcome
        assert outcome is not None  # every attempt is recorded before reporting
        found.append(outcome)
    return tuple(found)


def _make_sandbox(
    sandbox_for: Callable[[int], Sandbox], index: int, owner: str
) -> Sandbox:
    try:
        return sandbox_for(index)
    except Exception as error:
        raise RunCallbackError("sandbox_for", scope_id_for(owner), error) from error
