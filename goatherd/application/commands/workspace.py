"""Workspace commands of a scope: capture, apply (both recorded), diff.

The records are advisory, as the seed has them: the operation's result does
not depend on them, and an append failure (other than an outage) does not
fail it. They do update the workspace digest every process folds, which the
settle and restore rules read.
"""

from __future__ import annotations

from goatherd.application.commands.context import RuntimeContext
from goatherd.application.decisions import Decision
from goatherd.application.ports import Sandbox
from goatherd.application.runtime import workspace_intent
from goatherd.domain import (
    TraceStoreError,
    WorkspaceApplied,
    WorkspaceBusyError,
    WorkspaceCaptured,
    WorkspaceState,
)

__all__ = ["apply_workspace", "capture_workspace", "diff_workspace", "populate_fork"]


def _active_sandbox(
    ctx: RuntimeContext, scope_id: str, verb: str
) -> tuple[str, Sandbox]:
    scope = ctx.known(scope_id)
    scope.require_active(f"cannot {verb} workspace in scope")
    return scope.owner, ctx.sandbox(scope.owner)


def _advisory(
    ctx: RuntimeContext, owner: str, event: WorkspaceCaptured | WorkspaceApplied
) -> None:
    intent = workspace_intent(owner, event.KIND_LABEL, ctx.sequence.next())
    try:
        ctx.record(intent, lambda: Decision().place(event, owner))
    except TraceStoreError:
        return  # advisory: the workspace operation itself succeeded


def capture_workspace(ctx: RuntimeContext, scope_id: str) -> WorkspaceState:
    """Capture the scope's workspace and record its digest (advisory).

    Raises:
        ScopeNotFoundError, ScopeStateError, NoSandboxError, SandboxError.
    """
    ctx.refresh()
    owner, sandbox = _active_sandbox(ctx, scope_id, "capture")
    with ctx.lock:
        state = sandbox.capture()
        event = WorkspaceCaptured(
            backend=state.backend, revision=state.revision, state_digest=state.digest()
        )
        _advisory(ctx, owner, event)
        return state


def apply_workspace(ctx: RuntimeContext, scope_id: str, state: WorkspaceState) -> None:
    """Reset the scope's workspace to ``state`` and record it (advisory).

    Raises:
        ScopeNotFoundError, ScopeStateError, NoSandboxError, SandboxError;
        WorkspaceBusyError: a claimed settle or restore on this workspace is
            unfinished.
    """
    ctx.refresh()
    owner, sandbox = _active_sandbox(ctx, scope_id, "apply")
    with ctx.lock:
        workspace = ctx.model.scope(ctx.model.workspace_owner(owner))
        if workspace.workspace_claim:
            raise WorkspaceBusyError(
                f"apply workspace in {scope_id}",
                workspace.scope_id,
                workspace.workspace_claim,
            )
        sandbox.apply(state)
        event = WorkspaceApplied(
            backend=state.backend, revision=state.revision, state_digest=state.digest()
        )
        _advisory(ctx, owner, event)


def populate_fork(ctx: RuntimeContext, owner: str) -> None:
    """Reset an isolated child's own sandbox to its fork baseline (recorded).

    The seed's ForkIsolated: create the child's workspace, then apply the
    parent's state captured at the fork, uncommitted changes included. A
    child whose parent had no sandbox has no baseline and is left as it is.
    Repeating it is harmless (a reset to the same state).

    Raises:
        The errors of :func:`apply_workspace`.
    """
    ctx.refresh()
    scope = ctx.model.scope(owner)
    if scope.baseline is not None:
        apply_workspace(ctx, scope.scope_id, scope.baseline)


def diff_workspace(
    ctx: RuntimeContext, scope_id: str, state: WorkspaceState, max_lines: int = 0
) -> tuple[str, list[str]]:
    """Return the workspace's diff against ``state`` (records nothing).

    Raises:
        ScopeNotFoundError, ScopeStateError, NoSandboxError, SandboxError.
    """
    ctx.refresh()
    _, sandbox = _active_sandbox(ctx, scope_id, "diff")
    return sandbox.diff(state, max_lines)
