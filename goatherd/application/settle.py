"""Seal and settle: retained outputs, consumed exactly once, and the ScopeManager.

Consume-once is optimistic concurrency on the output's own path. A settle's
records (workspace applied, merged or discarded, settled) are ONE batch under
the settle intent ``<owner>:settle:<action>:<seq>``, looked up first (a retry
returns the stored outcome).

Select and apply change the parent's workspace before their records, so they
first append a ``run_output.claimed`` record on the output's path under its
head: across threads, processes and crashes exactly one intent ever holds the
claim, and only the claimant performs the effect. A crash after the claim is
finished by a retry under the same intent: select re-applies the sealed full
state (idempotent), apply detects an effect that already landed (the parent
already holds the sealed paths) and only records. If the records cannot be
appended after the effect, the failure is :class:`SettleEffectLandedError` and
the output stays unconsumed (claimed): a retry finishes it, ``released`` or
``discarded`` end it (runtime-spec 8.4).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from returns.result import Result

from goatherd.application.checkpoints import CheckpointCommands
from goatherd.application.errors import (
    ApplyConflictError,
    SandboxError,
    UnsupportedError,
)
from goatherd.application.merge_review import MergeGateCommands
from goatherd.application.ports import DeltaApplier, Sandbox
from goatherd.application.runtime import (
    RuntimeFailure,
    claim_intent,
    seal_intent,
    settle_intent,
)
from goatherd.application.scope_handle import ScopeEntry, attempt
from goatherd.domain import (
    NoBaselineError,
    OutputNotFoundError,
    OutputState,
    RetainedOutputAggregate,
    RootScopeError,
    ScopeAggregate,
    ScopeNotFoundError,
    ScopeStateError,
    SettleEffectLandedError,
    SettlementAction,
    TraceAggregate,
    TraceStoreError,
    WorkspaceState,
    apply_overlap,
    changes_payload,
    check_fast_forward,
    classify_changes,
    effect_landed_ending,
    output_id_for,
    owner_of_output,
    parse_settlement_action,
    scope_id_for,
)

__all__ = ["RetainedOutput", "ScopeManager"]

_EFFECTS = (SettlementAction.SELECT, SettlementAction.APPLY)


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
    def claimed_by(self) -> str:
        """The settle intent holding the effect claim (``""``: none)."""
        return self._agg().claimed_by

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


class ScopeManager(MergeGateCommands, CheckpointCommands):
    """The scope tree, checkpoints, merge gate and settlement over one trace."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        """See :class:`~goatherd.application.scope_manager.ScopeManagerCore`."""
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self._outputs: dict[str, _OutputEntry] = {}

    def _output_agg(self, output_id: str) -> RetainedOutputAggregate:
        return self._events.load(RetainedOutputAggregate, output_id)

    # ------------------------------------------------------------ seal

    def seal(
        self, scope_id: str, *, seq: int | None = None
    ) -> Result[RetainedOutput, RuntimeFailure]:
        """Freeze the scope's workspace as an output (the scope stays active)."""
        return attempt(lambda: self._seal(scope_id, seq))

    def _seal(self, scope_id: str, seq: int | None) -> RetainedOutput:
        with self._lock:
            owner = self._owner_of(scope_id)
            retry = seq
            seq = self._next_seq(seq)
            out_id = output_id_for(owner, seq)
            intent = seal_intent(owner, seq)
            if not self._committed(intent, retry):
                agg = self._load(ScopeAggregate, owner)  # re-checked under OCC
                agg.require_active("cannot seal scope")
                sandbox = self._sandbox_of(owner)
                if agg.baseline is None:
                    raise NoBaselineError(scope_id, "base to settle onto")
                state = sandbox.capture()
                diff, files = sandbox.diff(agg.baseline, 0)
                changes = changes_payload(classify_changes(diff, files))

                def decide() -> list[TraceAggregate]:
                    scope = self._load(ScopeAggregate, owner)
                    out = RetainedOutputAggregate.bare(out_id)
                    out.seal(scope, state, changes)
                    return [scope, out]

                self._decide_and_save(decide, intent)
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
            # Cached: the claim and the settlement records re-check it under
            # the output path's expected head.
            out = self._load(RetainedOutputAggregate, output_id)
            owner = out.scope_owner
            intent = settle_intent(owner, str(action), self._next_seq(seq))
            if self._committed(intent, seq):
                return
            out.check_unconsumed()
            verb = parse_settlement_action(action)
            if owner not in self._scopes:
                raise ScopeNotFoundError(
                    f"{scope_id_for(owner)} for output {output_id}"
                )
            try:
                landed = self._claim_and_land(out, verb, intent)
            except ScopeStateError:
                # A racing settler (another process) may have consumed the
                # output since our cached fold: report that, not its effect
                # on the scopes (the child it merged is no longer active).
                self._events.load(RetainedOutputAggregate, output_id).check_claimable(
                    intent
                )
                raise
            try:
                self._decide_and_save(
                    lambda: self._settle_decision(output_id, verb, intent), intent
                )
            except TraceStoreError as error:
                if not landed:
                    raise
                child_active = self._aggregate(owner).is_active
                raise SettleEffectLandedError(
                    output_id,
                    verb.value,
                    effect_landed_ending(child_active),
                    str(error),
                ) from error
            self._outputs[output_id].settled_at = self._clock()
        if verb is not SettlementAction.RELEASE:
            self._destroy_owned(owner)

    def _claim_and_land(
        self, out: RetainedOutputAggregate, verb: SettlementAction, intent: str
    ) -> bool:
        """Check, claim and land the workspace effect; return whether one stands."""
        if verb not in _EFFECTS:
            if verb is SettlementAction.DISCARD:
                child = self._load(ScopeAggregate, out.scope_owner)
                self._parent_of(child, out.id)
                child.require_active(f"settle {out.id} (discard): cannot discard scope")
            return False
        out.check_claimable(intent)
        sandbox = self._settle_parent(out, verb)
        if out.claimed_by != intent:
            self._check_effect(sandbox, out, verb)
            self._claim_output(out.id, verb, intent)
        self._land(sandbox, out, verb)
        self._fault("after-effect", intent)
        return True

    def _claim_output(
        self, output_id: str, verb: SettlementAction, intent: str
    ) -> None:
        def decide() -> list[TraceAggregate] | None:
            out = self._load(RetainedOutputAggregate, output_id)
            child, parent = self._settle_scopes(out, verb)
            if out.claim(verb, intent) is None:
                return None
            # The scopes ride along unchanged: their heads guard the checks.
            return [out, child, parent]

        self._decide_and_save(decide, claim_intent(intent))

    def _check_effect(
        self, sandbox: Sandbox, out: RetainedOutputAggregate, verb: SettlementAction
    ) -> None:
        """The preconditions of a first attempt (a failure consumes nothing)."""
        if verb is SettlementAction.SELECT:
            check_fast_forward(
                out.id, sandbox.capture().digest(), out.baseline.digest()
            )
            return
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

    def _land(
        self, sandbox: Sandbox, out: RetainedOutputAggregate, verb: SettlementAction
    ) -> None:
        """Perform the effect; idempotent, so a retry after a crash may repeat it."""
        if verb is SettlementAction.SELECT:
            sandbox.apply(out.workspace)  # a full reset: repeating it is harmless
            return
        if self._already_applied(sandbox, out):
            return
        if not isinstance(sandbox, DeltaApplier):
            raise UnsupportedError(
                sandbox.backend(),
                "apply_delta",
                "parent sandbox does not implement DeltaApplier",
            )
        sandbox.apply_delta(out.workspace, out.baseline)

    @staticmethod
    def _already_applied(sandbox: Sandbox, out: RetainedOutputAggregate) -> bool:
        """Whether the sealed paths already stand on the parent (a landed apply)."""
        if not out.change_paths:
            return True
        try:
            _, differing = sandbox.diff(out.workspace, 0)
        except SandboxError:
            return False
        return not apply_overlap(out.change_paths, differing)

    def _settle_decision(
        self, output_id: str, verb: SettlementAction, intent: str
    ) -> list[TraceAggregate]:
        out = self._load(RetainedOutputAggregate, output_id)
        out.check_unconsumed()
        child = self._load(ScopeAggregate, out.scope_owner)
        aggs: list[TraceAggregate] = []
        if verb is not SettlementAction.RELEASE:
            parent = self._load(ScopeAggregate, self._parent_of(child, output_id))
            if verb is SettlementAction.SELECT:
                parent.workspace_applied(out.workspace)
            if verb is SettlementAction.DISCARD:
                parent.discard(child)
            else:
                parent.merge(child)
            aggs.append(parent)
        out.settle(child, verb, intent)
        return [*aggs, child, out]

    @staticmethod
    def _parent_of(child: ScopeAggregate, output_id: str) -> str:
        if child.parent_owner is None:
            raise RootScopeError(
                child.scope_id,
                f"scope {child.scope_id} for output {output_id} has no parent",
            )
        return child.parent_owner

    def _settle_parent(
        self, out: RetainedOutputAggregate, verb: SettlementAction
    ) -> Sandbox:
        _, parent = self._settle_scopes(out, verb)
        return self._sandbox_of(parent.id)

    def _settle_scopes(
        self, out: RetainedOutputAggregate, verb: SettlementAction
    ) -> tuple[ScopeAggregate, ScopeAggregate]:
        """Return the child and its parent, both active.

        Cached folds: the claim carries their heads as expected heads, so a
        stale fold loses the race and is decided again on fresh ones.
        """
        child = self._load(ScopeAggregate, out.scope_owner)
        child.require_active(f"settle {out.id} ({verb.value}): cannot merge scope")
        parent_owner = self._parent_of(child, out.id)
        if parent_owner not in self._scopes:
            raise ScopeNotFoundError(scope_id_for(parent_owner))
        parent = self._load(ScopeAggregate, parent_owner)
        parent.require_active(
            f"settle {out.id} ({verb.value}): cannot merge into scope"
        )
        return child, parent

    def _register_recovered_output(self, output_id: str, seq: int) -> None:
        self._outputs[output_id] = _OutputEntry(seq)

    def _ensure_scope(self, owner: str) -> None:
        if owner not in self._scopes:
            self._register_recovered_scope(owner, ScopeEntry())
