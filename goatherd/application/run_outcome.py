"""The values and errors of reversible runs: outcomes, verdicts and failures.

A :class:`RunOutcome` is what one run (or one best-of-n attempt) did; it is
also what the run writes as its ``goatherd.run.completed.v1`` record (ADR
0020). Nothing here performs I/O; the runs live in ``run`` and ``best_of_n``.

Errors defined here (all under ``GoatherdError``)::

    RunError             base of the run's own failures
      RunCallbackError   the handler, a reviewer, the supervisor, the chooser
                         or the sandbox factory raised
      RunSettleError     an approved output could not settle (stays unconsumed)
      BestOfNError       best-of-n settled no winner (carries every attempt)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Final, Protocol, TypeAlias, runtime_checkable

from goatherd.application.failures import RuntimeFailure
from goatherd.application.handles import RetainedOutput, Scope
from goatherd.domain import (
    GoatherdError,
    Intervention,
    MergeProposal,
    ProposedChange,
    RunCompleted,
    changes_payload,
)

__all__ = [
    "BestOfN",
    "BestOfNError",
    "Chooser",
    "MergeSupervisor",
    "RUN_COMPLETED_KIND_LABEL",
    "RUN_COMPLETED_SCHEMA_REF",
    "RunCallbackError",
    "RunError",
    "RunFailure",
    "RunHandler",
    "RunOutcome",
    "RunSettleError",
    "RunStatus",
    "Verdict",
    "run_record_payload",
]

RUN_COMPLETED_SCHEMA_REF: Final = RunCompleted.SCHEMA
RUN_COMPLETED_KIND_LABEL: Final = RunCompleted.KIND_LABEL

RunHandler: TypeAlias = Callable[[Scope], object]
"""Does a run's work in the child scope; its return value lands on the outcome."""

Chooser: TypeAlias = Callable[[Sequence[RetainedOutput]], RetainedOutput | None]
"""Picks the winner among sealed outputs (attempt order); ``None`` picks none."""


@runtime_checkable
class MergeSupervisor(Protocol):
    """The supervisor's merge gate (``Supervisor.review_merge``)."""

    def review_merge(
        self, scope_id: str, proposal: MergeProposal
    ) -> Intervention | None:
        """Return an intervention (``deny``/``discard``/``halt`` deny) or ``None``."""
        ...


class RunStatus(StrEnum):
    """How a run ended.

    ``selected``/``applied`` are an isolated run's settlement (best-of-n: the
    winner); ``sealed`` is an approved output that did not settle (a best-of-n
    loser, whose output was then discarded, or a winner whose settlement
    failed, whose output stays unconsumed).
    """

    MERGED = "merged"
    SELECTED = "selected"
    APPLIED = "applied"
    SEALED = "sealed"
    DENIED = "denied"
    FAILED = "failed"


@dataclass(frozen=True, slots=True)
class Verdict:
    """One authority's verdict on a proposal (the run's authority evidence).

    Attributes:
        authority: ``reviewer:<name>`` or ``supervisor``.
        approved: whether it let the proposal through.
        reason: the denial reason (``""`` when approved).
    """

    authority: str
    approved: bool
    reason: str = ""


@dataclass(frozen=True, slots=True)
class RunOutcome:
    """What one run (or one best-of-n attempt) did.

    Attributes:
        parent_scope_id: the scope the run forked from.
        scope_id: the child scope (``scope:<owner>``).
        status: how it ended.
        isolated: whether the child had its own sandbox.
        changes: the proposed changes (empty when review was not reached).
        verdicts: the authorities consulted, in order (the first denial stops).
        proposal_record_id: the ``merge.proposed`` record (``""``: none).
        decision_record_id: the ``supervisor.decision`` record (``""``: none).
        output_id: the sealed output (isolated approvals).
        output_action: how that output was settled (``""``: unconsumed).
        checkpoint_id: the parent checkpoint of a shared run.
        reason: the denial reason or what failed.
        record_id: the run's ``goatherd.run.completed.v1`` record (``""``: not
            written, e.g. the fork itself failed or the trace refused it).
        value: the handler's return value (never recorded).
    """

    parent_scope_id: str
    scope_id: str
    status: RunStatus
    isolated: bool
    changes: tuple[ProposedChange, ...] = ()
    verdicts: tuple[Verdict, ...] = ()
    proposal_record_id: str = ""
    decision_record_id: str = ""
    output_id: str = ""
    output_action: str = ""
    checkpoint_id: str = ""
    reason: str = ""
    record_id: str = ""
    value: object = None


@dataclass(frozen=True, slots=True)
class BestOfN:
    """The attempts of a best-of-n run; exactly one of them settled as winner.

    Attributes:
        attempts: one outcome per attempt, in attempt order.
        winner_index: the winner's position in ``attempts``.
    """

    attempts: tuple[RunOutcome, ...]
    winner_index: int

    @property
    def winner(self) -> RunOutcome:
        """The attempt that settled (``selected`` or ``applied``)."""
        return self.attempts[self.winner_index]


class RunError(GoatherdError):
    """Base of the reversible run's own failures."""


class RunCallbackError(RunError):
    """A caller-supplied callable raised; the child was ended and the run recorded.

    Attributes:
        step: ``handler``, ``reviewer``, ``supervisor``, ``chooser`` or
            ``sandbox_for``.
        scope_id: the scope concerned.
        cause: the exception raised.
    """

    def __init__(self, step: str, scope_id: str, cause: BaseException) -> None:
        """Name the step, the scope and what was raised."""
        super().__init__(
            f"run {scope_id}: the {step} raised {type(cause).__name__}: {cause}"
        )
        self.step = step
        self.scope_id = scope_id
        self.cause = cause


class RunSettleError(RunError):
    """An approved, sealed output could not settle; it stays unconsumed.

    Settle, release or discard it (``output_id``) once the cause is resolved.

    Attributes:
        scope_id: the sealing child scope (still active).
        output_id: the unconsumed output.
        cause: why settlement failed (e.g. ``ApplyConflictError``).
    """

    def __init__(self, scope_id: str, output_id: str, cause: GoatherdError) -> None:
        """Name the output and the cause."""
        super().__init__(
            f"run {scope_id}: output {output_id} was approved but not settled"
            f" (it stays unconsumed): {cause}"
        )
        self.scope_id = scope_id
        self.output_id = output_id
        self.cause = cause


class BestOfNError(RunError):
    """Best-of-n settled no winner; every attempt's outcome is attached.

    Attributes:
        attempts: one outcome per attempt, in attempt order.
        output_id: the chosen winner's output when its settlement failed
            (it stays unconsumed), else ``""``.
        cause: the underlying failure, if any.
    """

    def __init__(
        self,
        message: str,
        attempts: Sequence[RunOutcome] = (),
        *,
        output_id: str = "",
        cause: GoatherdError | None = None,
    ) -> None:
        """Describe why no winner settled."""
        super().__init__(f"best-of-n: {message}")
        self.attempts = tuple(attempts)
        self.output_id = output_id
        self.cause = cause


RunFailure: TypeAlias = RuntimeFailure | RunError
"""A run's expected failures: a runtime rule (including the reviewer's
``SupervisorDeniedError``), a sandbox or trace failure, or a run error."""


def run_record_payload(outcome: RunOutcome) -> dict[str, object]:
    """Return the ``goatherd.run.completed.v1`` payload (absent values are ``null``)."""
    return {
        "parent_scope": outcome.parent_scope_id,
        "child_scope": outcome.scope_id,
        "isolated": outcome.isolated,
        "status": outcome.status.value,
        "authority": [
            {
                "authority": v.authority,
                "approved": v.approved,
                "reason": v.reason or None,
            }
            for v in outcome.verdicts
        ],
        "proposal_record_id": outcome.proposal_record_id or None,
        "decision_record_id": outcome.decision_record_id or None,
        "change_count": len(outcome.changes),
        "changes": changes_payload(outcome.changes),
        "output_id": outcome.output_id or None,
        "output_action": outcome.output_action or None,
        "checkpoint_id": outcome.checkpoint_id or None,
        "reason": outcome.reason or None,
    }
