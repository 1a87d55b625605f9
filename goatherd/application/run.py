"""The reversible run: fork, handler, review, then merge or seal and settle.

:func:`run_reversible` is the reference composition of the runtime's
primitives (runtime-spec 13). It is a function, not a class, because a run
keeps no state between calls: everything it needs is an argument, and its
whole story is written to the trace. The steps:

1. Fork a child of the parent. Shared (``sandbox=None``): the child works in
   the parent's own workspace, and a checkpoint of the parent, taken before
   the handler runs, is the rollback. Isolated (``sandbox=`` a fresh sandbox
   that is NOT yet created): the run creates it, forks an isolated child that
   owns it, and applies the parent's fork-point state into it, so the child
   starts from the parent's exact (even uncommitted) tree.
2. ``handler(child)`` does the work.
3. Review: ``propose_merge`` + ``record_merge_proposal`` (the child's
   proposal), then the reviewer and/or the supervisor's ``review_merge``.
4. Approved: shared records the decision ``merged`` and merges (the work
   already stands in the tree; the checkpoint stays valid so the caller can
   still rewind). Isolated seals and settles ``selected``, falling back to
   ``applied`` when the parent moved since the fork, and records that action
   as the decision's.
   Denied: the decision ``discarded`` is recorded, the child discarded (an
   owned sandbox is destroyed) and, shared, the checkpoint restored; the
   result is a ``SupervisorDeniedError`` failure. The parent's workspace ends
   as it started.

Once the child exists, every exit ends it (merged, settled or discarded, with
the shared checkpoint restored on failure) and writes the run's own execution
record, a ``goatherd.run.completed.v1`` capture on the child's path carrying
the authority evidence and the outcome (ADR 0020). The one deliberate
exception: an approved, sealed output whose settlement failed (an apply
conflict) stays sealed and unconsumed for the caller to settle, release or
discard; the failure names it. ``best_of_n`` builds on the same steps.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Final, NoReturn, TypeVar

from returns.result import Failure, Result, Success

from goatherd.application.errors import NoSandboxError, SandboxError, UnsupportedError
from goatherd.application.failures import RuntimeFailure
from goatherd.application.handles import RetainedOutput, Scope
from goatherd.application.manager import ScopeManager
from goatherd.application.ports import Sandbox, SandboxSpec
from goatherd.application.run_outcome import (
    MergeSupervisor,
    RunCallbackError,
    RunError,
    RunFailure,
    RunHandler,
    RunOutcome,
    RunSettleError,
    RunStatus,
    Verdict,
    run_record_payload,
)
from goatherd.domain import (
    InterventionType,
    MergeProposal,
    MergeReviewer,
    ParentMovedError,
    ProposedChange,
    RuntimeRuleError,
    ScopeNotFoundError,
    ScopeState,
    ScopeStateError,
    SettlementAction,
    SupervisorDeniedError,
    TraceStoreError,
)

__all__ = ["run_reversible"]

_DENYING: Final = frozenset(
    {InterventionType.DENY, InterventionType.DISCARD, InterventionType.HALT}
)
_EXPECTED = (RuntimeRuleError, SandboxError, TraceStoreError, RunError)

T = TypeVar("T")


def run_reversible(
    manager: ScopeManager,
    parent_id: str,
    child_owner: str,
    handler: RunHandler,
    *,
    sandbox: Sandbox | None = None,
    reviewer: MergeReviewer | None = None,
    supervisor: MergeSupervisor | None = None,
    max_diff_lines: int = 0,
) -> Result[RunOutcome, RunFailure]:
    """Run ``handler`` in a child of ``parent_id`` and keep its work only if approved.

    Args:
        manager: the scope manager owning the parent.
        parent_id: an active scope with a sandbox.
        child_owner: the new child's owner id (must not exist yet).
        handler: does the work in the child scope.
        sandbox: ``None`` shares the parent's workspace; otherwise a fresh,
            NOT yet created sandbox the child will own (e.g. a worktree).
        reviewer: approves with ``None`` or denies with a reason.
        supervisor: its ``review_merge`` denies with ``deny``/``discard``/``halt``.
        max_diff_lines: bound on the reviewed diff (``<= 0``: unbounded).

    Returns:
        ``Success(RunOutcome)`` with status ``merged``, ``selected`` or
        ``applied``. ``Failure(SupervisorDeniedError)`` on denial (child
        discarded, parent's workspace as it started),
        ``Failure(RunCallbackError)`` when the handler or an authority raised,
        ``Failure(RunSettleError)`` when an approved output could not settle,
        or the runtime failure that stopped the run. Bad input (unknown or
        inactive parent, no sandbox, an existing child owner) fails before
        anything is written or created.
    """
    runner = _Runner(manager, parent_id, reviewer, supervisor, max_diff_lines)
    return _attempt(lambda: runner.run_one(child_owner, handler, sandbox))


# ------------------------------------------------------------ internals


def _attempt(fn: Callable[[], T]) -> Result[T, RunFailure]:
    try:
        return Success(fn())
    except _EXPECTED as error:
        return Failure(error)


def _ok(result: Result[T, RuntimeFailure]) -> T:
    """Return the value or raise the failure (the guard then ends the run)."""
    if isinstance(result, Failure):
        raise result.failure()
    return result.unwrap()


def _note(problems: list[str], result: Result[object, RuntimeFailure]) -> None:
    if isinstance(result, Failure):
        problems.append(str(result.failure()))


def _describe(error: BaseException) -> str:
    return str(error) or type(error).__name__


def _authority_name(reviewer: object) -> str:
    name = getattr(reviewer, "__qualname__", None) or type(reviewer).__qualname__
    return f"reviewer:{name}"


@dataclass(slots=True)
class _Attempt:
    """The mutable state of one run while it executes."""

    child: Scope
    isolated: bool
    checkpoint_id: str = ""
    value: object = None
    proposal: MergeProposal | None = None
    proposal_record_id: str = ""
    verdicts: list[Verdict] = field(default_factory=list)
    decision_record_id: str = ""
    output: RetainedOutput | None = None
    outcome: RunOutcome | None = None  # set once the run is recorded

    @property
    def changes(self) -> tuple[ProposedChange, ...]:
        return () if self.proposal is None else self.proposal.changes


class _Runner:
    """Executes runs against one parent with one set of authorities."""

    def __init__(
        self,
        manager: ScopeManager,
        parent_id: str,
        reviewer: MergeReviewer | None,
        supervisor: MergeSupervisor | None,
        max_diff_lines: int,
    ) -> None:
        self._manager = manager
        self._parent_id = parent_id
        self._reviewer = reviewer
        self._supervisor = supervisor
        self._max_diff_lines = max_diff_lines

    # ------------------------------------------------------------ one run

    def run_one(
        self, owner: str, handler: RunHandler, sandbox: Sandbox | None
    ) -> RunOutcome:
        att = self._start(owner, sandbox)
        with self._guard(att):
            self._work_and_review(att, handler)
            if not att.isolated:
                return self._merge(att)
            att.output = _ok(self._manager.seal(att.child.id))
            return self._settle_winner(att)

    def _work_and_review(self, att: _Attempt, handler: RunHandler) -> None:
        """Prepare, run the handler, review; a denial ends the run and raises."""
        self._prepare(att)
        try:
            att.value = handler(att.child)
        except Exception as error:
            raise RunCallbackError("handler", att.child.id, error) from error
        reason = self._review(att)
        if reason is not None:
            self._deny(att, reason)

    def _check_parent(self) -> Scope:
        parent = self._manager.get(self._parent_id)
        if parent is None:
            raise ScopeNotFoundError(self._parent_id)
        if parent.state is not ScopeState.ACTIVE:
            state = parent.state.value
            raise ScopeStateError(
                f"cannot run in scope {parent.id} in state {state}", parent.id, state
            )
        if parent.sandbox is None:
            raise NoSandboxError(
                f"scope {parent.id} has no sandbox: a reversible run needs a"
                " workspace to review and roll back"
            )
        _require_diff(parent.sandbox)
        return parent

    def _start(self, owner: str, sandbox: Sandbox | None) -> _Attempt:
        """Fork the child; on failure nothing is left behind."""
        self._check_parent()
        if sandbox is None:
            child = _ok(self._manager.fork(self._parent_id, owner))
            return _Attempt(child, isolated=False)
        _require_diff(sandbox)
        sandbox.create(SandboxSpec())
        # clean: _prepare populates it inside the run's guard, which discards
        # the child when that fails.
        forked = self._manager.fork_isolated(
            self._parent_id, owner, None, sandbox, clean=True
        )
        if isinstance(forked, Failure):
            with contextlib.suppress(SandboxError, OSError):
                sandbox.destroy()
            raise forked.failure()
        return _Attempt(forked.unwrap(), isolated=True)

    def _prepare(self, att: _Attempt) -> None:
        """Populate an isolated child; checkpoint the parent of a shared one."""
        if att.isolated:
            baseline = att.child.baseline()
            assert baseline is not None  # the parent has a sandbox (checked)
            _ok(att.child.apply_workspace(baseline))
        else:
            checkpoint = _ok(self._manager.create_checkpoint(self._parent_id))
            att.checkpoint_id = checkpoint.id

    @contextlib.contextmanager
    def _guard(self, att: _Attempt) -> Iterator[None]:
        """End and record a run that stopped before recording itself, then re-raise."""
        try:
            yield
        except BaseException as error:
            if att.outcome is None:
                problems = self._end_child(att)
                reason = "; ".join([_describe(error), *problems])
                self._record(att, RunStatus.FAILED, reason)
            raise

    # ------------------------------------------------------------ review

    def _review(self, att: _Attempt) -> str | None:
        """Record the proposal, consult the authorities; return a denial reason."""
        proposal = _ok(self._manager.propose_merge(att.child.id, self._max_diff_lines))
        att.proposal = proposal
        att.proposal_record_id = _ok(self._manager.record_merge_proposal(proposal))
        for authority, judge in self._authorities(att.child.id):
            try:
                reason = judge(proposal)
            except Exception as error:
                step = authority.partition(":")[0]
                raise RunCallbackError(step, att.child.id, error) from error
            if reason is not None:
                reason = reason or f"{authority} denied without a reason"
            att.verdicts.append(Verdict(authority, reason is None, reason or ""))
            if reason is not None:
                return reason
        return None

    def _authorities(self, scope_id: str) -> list[tuple[str, MergeReviewer]]:
        found: list[tuple[str, MergeReviewer]] = []
        if self._reviewer is not None:
            found.append((_authority_name(self._reviewer), self._reviewer))
        if self._supervisor is not None:
            found.append(("supervisor", _gate(self._supervisor, scope_id)))
        return found

    def _deny(self, att: _Attempt, reason: str) -> NoReturn:
        assert att.proposal is not None
        decision = self._manager.record_merge_decision(
            att.proposal, False, reason, "discarded", att.proposal_record_id
        )
        att.decision_record_id = decision.value_or("")
        problems = self._end_child(att)
        if isinstance(decision, Failure):
            problems.insert(0, f"decision not recorded: {decision.failure()}")
        self._record(att, RunStatus.DENIED, "; ".join([reason, *problems]))
        if isinstance(decision, Failure):
            raise decision.failure()
        raise SupervisorDeniedError(reason, att.proposal.changes)

    def _end_child(self, att: _Attempt) -> list[str]:
        """Discard a still-active child and restore a shared run's checkpoint."""
        problems: list[str] = []
        if att.child.state is ScopeState.ACTIVE:
            _note(problems, self._manager.discard(att.child.id))
        if att.checkpoint_id:
            _note(problems, self._manager.restore_checkpoint(att.checkpoint_id))
        return problems

    # ------------------------------------------------------------ approval

    def _decide(self, att: _Attempt, action: str) -> None:
        assert att.proposal is not None
        att.decision_record_id = _ok(
            self._manager.record_merge_decision(
                att.proposal, True, "", action, att.proposal_record_id
            )
        )

    def _merge(self, att: _Attempt) -> RunOutcome:
        self._decide(att, "merged")
        _ok(self._manager.merge(att.child.id))
        return self._record(att, RunStatus.MERGED)

    def _settle_winner(self, att: _Attempt) -> RunOutcome:
        """Settle select, else apply when the parent moved; then the decision."""
        assert att.output is not None
        action = SettlementAction.SELECT
        settled = self._manager.settle(att.output.id, action.value)
        if isinstance(settled, Failure) and isinstance(
            settled.failure(), ParentMovedError
        ):
            action = SettlementAction.APPLY
            settled = self._manager.settle(att.output.id, action.value)
        if isinstance(settled, Failure):
            error = settled.failure()
            self._record(att, RunStatus.SEALED, f"not settled: {error}")
            raise RunSettleError(att.child.id, att.output.id, error)
        self._decide(att, action.value)
        return self._record(att, RunStatus(action.value))

    # ------------------------------------------------------------ record

    def _record(self, att: _Attempt, status: RunStatus, reason: str = "") -> RunOutcome:
        """Write the run's execution record (advisory, ADR 0020); keep the outcome."""
        output = att.output
        outcome = RunOutcome(
            parent_scope_id=self._parent_id,
            scope_id=att.child.id,
            status=status,
            isolated=att.isolated,
            changes=att.changes,
            verdicts=tuple(att.verdicts),
            proposal_record_id=att.proposal_record_id,
            decision_record_id=att.decision_record_id,
            output_id="" if output is None else output.id,
            output_action=_action_of(output),
            checkpoint_id=att.checkpoint_id,
            reason=reason,
            value=att.value,
        )
        recorded = att.child.record_run_completed(run_record_payload(outcome))
        att.outcome = replace(outcome, record_id=recorded.value_or(""))
        return att.outcome


def _action_of(output: RetainedOutput | None) -> str:
    action = None if output is None else output.action
    return "" if action is None else action.value


def _require_diff(sandbox: Sandbox) -> None:
    if not sandbox.capabilities().diff:
        raise UnsupportedError(
            sandbox.backend(), "diff", "a reversible run reviews the child's diff"
        )


def _gate(supervisor: MergeSupervisor, scope_id: str) -> MergeReviewer:
    """Adapt ``review_merge`` to a reviewer: deny/discard/halt deny."""

    def review(proposal: MergeProposal) -> str | None:
        verdict = supervisor.review_merge(scope_id, proposal)
        if verdict is None or verdict.type not in _DENYING:
            return None
        if verdict.payload:
            return str(verdict.payload)
        return f"supervisor {verdict.type.value}"

    return review
