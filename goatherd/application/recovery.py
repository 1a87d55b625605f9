"""Recovery: a scope manager over a trace, with its sandboxes re-adopted.

The trace is the registry. Recovery folds it (the same fold every manager
and read model uses), refuses a trace that contradicts itself, names each
path holding a runtime record it cannot decode (``RecoveryStats.unreadable``:
that path's scope refuses commands, the others work), re-adopts sandboxes
ONLY through the host's resolver (roots first, then isolated children
parents-first; shared children use their ancestor's; a resolver error fails
the whole recovery) and burns
checkpoints whose recorded revision the re-adopted workspace has left
(recorded as ``checkpoint.invalidated``, so every process agrees). The owned
sandbox of a scope that ended but whose teardown the trace does not record (a
kill between the two) is destroyed and recorded then.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections import deque
from dataclasses import dataclass
from typing import TypeAlias

from returns.result import Result, safe

from goatherd.application.commands.context import RuntimeContext
from goatherd.application.commands.scopes import destroy_owned_sandbox
from goatherd.application.decisions import Decision
from goatherd.application.errors import SandboxError
from goatherd.application.manager import ScopeManager
from goatherd.application.runtime import lifecycle_intent
from goatherd.application.sandboxes import SandboxBindings, SandboxResolver
from goatherd.domain import (
    RuntimeRuleError,
    ScopeAggregate,
    ScopeState,
)

__all__ = [
    "RecoverOptions",
    "RecoveryError",
    "RecoveryFailure",
    "RecoveryStats",
    "recover_scopes",
]


class RecoveryError(RuntimeRuleError):
    """Raised when the trace cannot be recovered (inconsistent or refused)."""


RecoveryFailure: TypeAlias = RecoveryError
"""``recover_scopes``: an inconsistent or undecodable trace, a resolver error."""


@dataclass(slots=True)
class RecoveryStats:
    """What the fold found and how long the recovery's fold took.

    Attributes:
        fork_records: distinct fork records.
        terminal_records: distinct merge, discard and halt records.
        checkpoint_blobs: checkpoints recorded (pruned ones included).
        sealed_outputs: distinct sealed outputs.
        scan_duration: seconds spent folding the trace.
        unreadable: one line per path holding a runtime record that does not
            decode (the record, its schema and the field): recovery carries on
            without that path, whose scope, checkpoint or output then refuses
            every command naming the record.
    """

    fork_records: int = 0
    terminal_records: int = 0
    checkpoint_blobs: int = 0
    sealed_outputs: int = 0
    scan_duration: float = 0.0
    unreadable: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class RecoverOptions:
    """How to recover: the sandbox resolver and where to report stats."""

    resolver: SandboxResolver | None = None
    stats: RecoveryStats | None = None


def recover_scopes(
    context: RuntimeContext, options: RecoverOptions | None = None
) -> Result[ScopeManager, RecoveryFailure]:
    """Fold the trace into a manager and re-adopt its sandboxes (see module docs)."""
    return _recover(context, options or RecoverOptions())


@safe(exceptions=(RecoveryError,))
def _recover(context: RuntimeContext, opts: RecoverOptions) -> ScopeManager:
    stats = opts.stats if opts.stats is not None else RecoveryStats()
    ctx = dataclasses.replace(context, sandboxes=SandboxBindings(opts.resolver))
    started = time.perf_counter()
    ctx.model.refresh()
    stats.unreadable = tuple(
        f"{path}: {error}" for path, error in ctx.model.unreadable().items()
    )
    _count(ctx, stats)
    _check_consistent(ctx)
    stats.scan_duration = time.perf_counter() - started
    if opts.resolver is not None:
        _readopt(ctx)
        _tear_down_ended(ctx)
        _burn_stale(ctx)
    return ScopeManager(ctx)


def _count(ctx: RuntimeContext, stats: RecoveryStats) -> None:
    counts = ctx.model.record_counts()
    stats.fork_records = counts.forks
    stats.terminal_records = counts.terminals
    stats.checkpoint_blobs = counts.checkpoints
    stats.sealed_outputs = counts.sealed


def _check_consistent(ctx: RuntimeContext) -> None:
    for scope in ctx.model.scopes():
        if scope.inconsistent:
            raise RecoveryError(f"{scope.inconsistent}: the trace is inconsistent")
    for cp in ctx.model.checkpoints():
        if cp.inconsistent:
            raise RecoveryError(f"{cp.inconsistent}: the trace is inconsistent")
    for out in ctx.model.outputs():
        if out.inconsistent:
            raise RecoveryError(f"{out.inconsistent}: the trace is inconsistent")


def _readopt(ctx: RuntimeContext) -> None:
    for scope in _tree_order(ctx):
        if not scope.owns_workspace or not scope.listed:
            continue
        if (
            scope.isolated
            and scope.sandbox_path
            and not os.path.isabs(scope.sandbox_path)
        ):
            raise RecoveryError(
                f"fork record {scope.fork_point} recorded a non-absolute sandbox"
                f" path {scope.sandbox_path!r}"
            )
        try:
            ctx.sandboxes.resolve(scope)
        except SandboxError as error:
            raise RecoveryError(str(error)) from error


def _tear_down_ended(ctx: RuntimeContext) -> None:
    """Destroy (and record) the owned sandboxes of scopes that ended.

    A process killed between the record that ended an isolated scope and the
    teardown of its sandbox (a worktree goatherd created) leaves it on disk;
    the trace says it was never destroyed, so recovery finishes it. A
    teardown that fails is left for the next recovery.
    """
    for scope in _tree_order(ctx):
        if scope.is_active or not scope.isolated or scope.sandbox_destroyed:
            continue
        try:
            destroy_owned_sandbox(ctx, scope.owner)
        except SandboxError:
            continue


def _tree_order(ctx: RuntimeContext) -> list[ScopeAggregate]:
    """Parents before children: roots first, then breadth-first in fork order."""
    scopes = {scope.owner: scope for scope in ctx.model.scopes() if scope.listed}
    queue = deque(s for s in scopes.values() if s.parent_owner not in scopes)
    order: list[ScopeAggregate] = []
    seen: set[str] = set()
    while queue:
        scope = queue.popleft()
        if scope.owner in seen:
            continue
        seen.add(scope.owner)
        order.append(scope)
        queue.extend(scopes[kid] for kid in scope.children if kid in scopes)
    return order


def _burn_stale(ctx: RuntimeContext) -> None:
    for cp in ctx.model.checkpoints():
        if not cp.is_valid:
            continue
        scope = ctx.model.scope(cp.scope_owner)
        if scope.state is not ScopeState.ACTIVE:
            continue
        binding = ctx.binding(cp.scope_owner)
        if binding is None:
            continue
        try:
            live = binding.sandbox.capture()
        except SandboxError:
            continue  # unknown staleness leaves it valid; restore re-validates
        if live.revision != cp.revision:
            reason = (
                f"stale: the re-adopted workspace is at revision {live.revision!r},"
                f" not {cp.revision!r}"
            )
            _invalidate(ctx, cp.checkpoint_id, cp.scope_owner, reason)


def _invalidate(ctx: RuntimeContext, cp_id: str, owner: str, reason: str) -> None:
    intent = lifecycle_intent("invalidate", cp_id, "", ctx.sequence.next())

    def decide() -> Decision | None:
        event = ctx.model.checkpoint(cp_id).invalidate(reason)
        return None if event is None else Decision().place(event, owner, cp_id)

    ctx.record(intent, decide)
