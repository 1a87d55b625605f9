"""Seal, settle and the merge gate: the :class:`ScopeManager` the host uses.

Settlement is consume-once by optimistic concurrency on the output's own
path: the verb's records (workspace applied, merged or discarded, settled)
are ONE batch under the settle intent. The workspace effect lands first; if
the batch then fails, the failure is :class:`SettleEffectLandedError` and the
output stays unconsumed. A retry under the same intent notices an effect that
already landed (the parent already holds the sealed changes) and only records.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from returns.result import Result

from goatherd.application.errors import (
    ApplyConflictError,
    SandboxError,
    UnsupportedError,
)
from goatherd.application.ports import DeltaApplier, Sandbox
from goatherd.application.runtime import (
    RuntimeFailure,
    lifecycle_intent,
    seal_intent,
    settle_intent,
)
from goatherd.application.scope_manager import ScopeManagerCore, attempt
from goatherd.domain import (
    MergeProposal,
    NoBaselineError,
    OrdinalConflictError,
    OutputNotFoundError,
    OutputState,
    RetainedOutputAggregate,
    RootScopeError,
    ScopeAggregate,
    ScopeNotFoundError,
    SettleEffectLandedError,
    SettlementAction,
    TraceAggregate,
    TraceStoreError,
    WorkspaceState,
    apply_overlap,
    changes_payload,
    check_fast_forward,
    classify_changes,
    diff_digest,
    effect_landed_ending,
    output_id_for,
    owner_of_output,
    parse_settlement_action,
    scope_id_for,
)

__all__ = ["RetainedOutput", "ScopeManager"]


@dataclass(slots=True)
class _OutputEntry:
    seq: int
    diff: str = ""
    sealed_at: datetime | None = None
    settled_at: datetime | None = None


class RetainedOutput:
    """A sealed child result, settle-able exactly once (a live handle)."""

    def __init__(self, manager: ScopeManager, output_id: str) -> None:
        """Bind the handle (use ``ScopeManager.seal`` or ``output`` to get one)."""
        self._manager = manager
        self._id = output_id

    def __repr__(self) -> str:
        """Show the id and state."""
        return f"RetainedOutput({self._id!r}, state={self.state.value!r})"

    def _agg(self) -> RetainedOutputAggregate:
        return self._manager._output_agg(self._id)

    @property
    def id(self) -> str:
        """``out:<owner>:<seq>``."""
        return self._id

    @property
    def scope_id(self) -> str:
        """The scope that sealed it."""
        return self._agg().scope_id

    @property
    def workspace(self) -> WorkspaceState:
        """The sealed state."""
        return self._agg().workspace

    @property
    def baseline(self) -> WorkspaceState:
        """The parent's fork-time state the changes are against."""
        return self._agg().baseline

    @property
    def changes(self) -> list[dict[str, str]]:
        """The frozen ``{path, kind}`` changes (a copy)."""
        return [dict(c) for c in self._agg().changes]

    @property
    def diff(self) -> str:
        """The full diff against the baseline (``""`` after recovery)."""
        return self._manager._outputs[self._id].diff

    @property
    def state(self) -> OutputState:
        """The consume-once state."""
        return self._agg().state

    @property
    def action(self) -> SettlementAction | None:
        """The verb that consumed it (``None`` until settled)."""
        return self._agg().action

    @property
    def sealed_at(self) -> datetime | None:
        """When it was sealed (``None`` after recovery)."""
        return self._manager._outputs[self._id].sealed_at

    @property
    def settled_at(self) -> datetime | None:
        """When it was settled here (``None`` otherwise)."""
        return self._manager._outputs[self._id].settled_at

    def settle(
        self, action: str, *, seq: int | None = None
    ) -> Result[None, RuntimeFailure]:
        """Settle through the manager that registered it."""
        return self._manager.settle(self._id, action, seq=seq)


class ScopeManager(ScopeManagerCore):
    """The scope tree, checkpoints, merge gate and settlement over one trace."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        """See :class:`ScopeManagerCore`."""
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self._outputs: dict[str, _OutputEntry] = {}

    def _output_agg(self, output_id: str) -> RetainedOutputAggregate:
        return self._events.load(RetainedOutputAggregate, output_id)

    # ------------------------------------------------------------ merge gate

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
            from goatherd.application.errors import NoSandboxError

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
                ids: list[str] = []

                def decide() -> list[TraceAggregate]:
                    agg = self._events.load(ScopeAggregate, owner)
                    event = agg.propose_merge(
                        baseline_digest=proposal.baseline_digest,
                        changes=changes_payload(proposal.changes),
                        diff_digest=diff_digest(proposal.diff),
                    )
                    ids.append(event.record_id)
                    return [agg]

                prior = self._events.trace.read_append_intent(intent)
                if prior is not None:
                    return prior.fact_ids[0]
                self._decide_and_save(decide, intent)
                self._refresh(self._aggregate(owner))
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
                prior = self._events.trace.read_append_intent(intent)
                if prior is not None:
                    return prior.fact_ids[0]
                ids: list[str] = []

                def decide() -> list[TraceAggregate]:
                    agg = self._events.load(ScopeAggregate, parent)
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
                self._refresh(self._aggregate(parent))
                return ids[-1]

        return attempt(run)

    # ------------------------------------------------------------ seal

    def seal(
        self, scope_id: str, *, seq: int | None = None
    ) -> Result[RetainedOutput, RuntimeFailure]:
        """Freeze the scope's workspace as an output (the scope stays active)."""
        return attempt(lambda: self._seal(scope_id, seq))

    def _seal(self, scope_id: str, seq: int | None) -> RetainedOutput:
        with self._lock:
            owner = self._owner_of(scope_id)
            seq = self._next_seq(seq)
            out_id = output_id_for(owner, seq)
            if not self._committed(seal_intent(owner, seq)):
                agg = self._aggregate(owner)
                agg.require_active("cannot seal scope")
                sandbox = self._sandbox_of(owner)
                if agg.baseline is None:
                    raise NoBaselineError(scope_id, "base to settle onto")
                state = sandbox.capture()
                diff, files = sandbox.diff(agg.baseline, 0)
                changes = changes_payload(classify_changes(diff, files))

                def decide() -> list[TraceAggregate]:
                    scope = self._events.load(ScopeAggregate, owner)
                    out = RetainedOutputAggregate.bare(out_id)
                    out.seal(scope, state, changes)
                    return [scope, out]

                self._decide_and_save(decide, seal_intent(owner, seq))
                self._refresh(self._aggregate(owner))
                self._outputs[out_id] = _OutputEntry(seq, diff, self._clock())
            self._outputs.setdefault(out_id, _OutputEntry(seq))
            return RetainedOutput(self, out_id)

    def output(self, output_id: str) -> RetainedOutput | None:
        """Return a registered output, if any."""
        return RetainedOutput(self, output_id) if output_id in self._outputs else None

    def outputs_for_scope(self, scope_id: str) -> list[RetainedOutput]:
        """Return the scope's outputs in seal order."""
        owner = scope_id.removeprefix("scope:")
        mine = sorted(
            (e.seq, oid)
            for oid, e in self._outputs.items()
            if owner_of_output(oid) == owner
        )
        return [RetainedOutput(self, oid) for _, oid in mine]

    # ------------------------------------------------------------ settle

    def settle(
        self, output_id: str, action: str, *, seq: int | None = None
    ) -> Result[None, RuntimeFailure]:
        """Consume the output exactly once with ``action`` (see module docs)."""
        return attempt(lambda: self._settle(output_id, action, seq))

    def _settle(self, output_id: str, action: str, seq: int | None) -> None:
        with self._lock:
            if output_id not in self._outputs:
                raise OutputNotFoundError(output_id)
            out = self._output_agg(output_id)
            owner = out.scope_owner
            intent = settle_intent(owner, str(action), self._next_seq(seq))
            if self._committed(intent):
                return
            out.check_unconsumed()
            verb = parse_settlement_action(action)
            if owner not in self._scopes:
                raise ScopeNotFoundError(
                    f"{scope_id_for(owner)} for output {output_id}"
                )
            landed = self._settle_effect(out, verb)
            try:
                self._decide_and_save(
                    lambda: self._settle_decision(output_id, verb), intent
                )
            except (TraceStoreError, OrdinalConflictError) as error:
                if not landed:
                    raise
                child_active = self._events.load(ScopeAggregate, owner).is_active
                raise SettleEffectLandedError(
                    output_id,
                    verb.value,
                    effect_landed_ending(child_active),
                    str(error),
                ) from error
            finally:
                self._refresh(self._aggregate(owner))
            self._outputs[output_id].settled_at = self._clock()
            parent = self._aggregate(owner).parent_owner
            if parent is not None:
                self._refresh(self._aggregate(parent))
        if verb is not SettlementAction.RELEASE:
            self._destroy_owned(owner)

    def _settle_decision(
        self, output_id: str, verb: SettlementAction
    ) -> list[TraceAggregate]:
        out = self._output_agg(output_id)
        child = self._events.load(ScopeAggregate, out.scope_owner)
        aggs: list[TraceAggregate] = []
        if verb is not SettlementAction.RELEASE:
            parent = self._events.load(
                ScopeAggregate, self._parent_of(child, output_id)
            )
            if verb is SettlementAction.SELECT:
                parent.workspace_applied(out.workspace)
            if verb is SettlementAction.DISCARD:
                parent.discard(child)
            else:
                parent.merge(child)
            aggs.append(parent)
        out.settle(child, verb)
        return [*aggs, child, out]

    @staticmethod
    def _parent_of(child: ScopeAggregate, output_id: str) -> str:
        if child.parent_owner is None:
            raise RootScopeError(
                child.scope_id,
                f"scope {child.scope_id} for output {output_id} has no parent",
            )
        return child.parent_owner

    def _settle_effect(
        self, out: RetainedOutputAggregate, verb: SettlementAction
    ) -> bool:
        """Land the workspace effect of select/apply; return whether one stands."""
        if verb in (SettlementAction.RELEASE, SettlementAction.DISCARD):
            if verb is SettlementAction.DISCARD:
                child = self._aggregate(out.scope_owner)
                self._parent_of(child, out.id)
                child.require_active(f"settle {out.id} (discard): cannot discard scope")
            return False
        _, sandbox = self._settle_parent(out, verb)
        if self._already_landed(sandbox, out, verb):
            return True
        if verb is SettlementAction.SELECT:
            check_fast_forward(
                out.id, sandbox.capture().digest(), out.baseline.digest()
            )
            sandbox.apply(out.workspace)
            return True
        _, parent_files = sandbox.diff(out.baseline, 0)
        overlap = apply_overlap(out.change_paths, parent_files)
        if overlap:
            raise ApplyConflictError(
                overlap,
                f"settle {out.id} (apply): parent changed since the baseline,"
                " which the sealed output also changes",
            )
        if not isinstance(sandbox, DeltaApplier):
            raise UnsupportedError(
                sandbox.backend(),
                "apply_delta",
                "parent sandbox does not implement DeltaApplier",
            )
        sandbox.apply_delta(out.workspace, out.baseline)
        return True

    def _settle_parent(
        self, out: RetainedOutputAggregate, verb: SettlementAction
    ) -> tuple[str, Sandbox]:
        child = self._aggregate(out.scope_owner)
        child.require_active(f"settle {out.id} ({verb.value}): cannot merge scope")
        parent_owner = self._parent_of(child, out.id)
        if parent_owner not in self._scopes:
            raise ScopeNotFoundError(scope_id_for(parent_owner))
        self._aggregate(parent_owner).require_active(
            f"settle {out.id} ({verb.value}): cannot merge into scope"
        )
        return parent_owner, self._sandbox_of(parent_owner)

    @staticmethod
    def _already_landed(
        sandbox: Sandbox, out: RetainedOutputAggregate, verb: SettlementAction
    ) -> bool:
        """Whether a previous attempt's effect already stands on the parent."""
        if not out.change_paths:
            return False
        try:
            _, differing = sandbox.diff(out.workspace, 0)
        except SandboxError:
            return False
        if verb is SettlementAction.SELECT:
            return not differing
        return not apply_overlap(out.change_paths, differing)

    def _register_recovered_output(self, output_id: str, seq: int) -> None:
        self._outputs[output_id] = _OutputEntry(seq)
