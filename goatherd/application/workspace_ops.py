"""Workspace operations of a scope: capture, apply (both advisory records), diff."""

from __future__ import annotations

from returns.result import Result

from goatherd.application.manager_base import ManagerBase
from goatherd.application.ports import Sandbox
from goatherd.application.runtime import RuntimeFailure, workspace_intent
from goatherd.application.scope_handle import attempt
from goatherd.domain import ScopeAggregate, WorkspaceState

__all__ = ["WorkspaceCommands"]


class WorkspaceCommands(ManagerBase):
    """Capture, apply and diff a scope's workspace (mixed into the manager)."""

    def _active_sandbox(self, scope_id: str, verb: str) -> tuple[str, Sandbox]:
        owner = self._owner_of(scope_id)
        self._aggregate(owner).require_active(f"cannot {verb} workspace in scope")
        return owner, self._sandbox_of(owner)

    def capture_workspace(
        self, scope_id: str
    ) -> Result[WorkspaceState, RuntimeFailure]:
        """Capture the scope's workspace; records ``workspace.captured`` (advisory)."""

        def run() -> WorkspaceState:
            with self._lock:
                owner, sandbox = self._active_sandbox(scope_id, "capture")
                state = sandbox.capture()
                agg = self._load(ScopeAggregate, owner)
                agg.workspace_captured(state)
                seq = self._sequence.next()
                self._advisory(agg, workspace_intent(owner, "workspace:captured", seq))
                return state

        return attempt(run)

    def apply_workspace(
        self, scope_id: str, state: WorkspaceState
    ) -> Result[None, RuntimeFailure]:
        """Reset the scope's workspace to ``state``; records ``workspace.applied``."""

        def run() -> None:
            with self._lock:
                owner, sandbox = self._active_sandbox(scope_id, "apply")
                sandbox.apply(state)
                agg = self._load(ScopeAggregate, owner)
                agg.workspace_applied(state)
                seq = self._sequence.next()
                self._advisory(agg, workspace_intent(owner, "workspace:applied", seq))

        return attempt(run)

    def diff_workspace(
        self, scope_id: str, state: WorkspaceState, max_lines: int = 0
    ) -> Result[tuple[str, list[str]], RuntimeFailure]:
        """Return the sandbox's diff against ``state`` (records nothing)."""

        def run() -> tuple[str, list[str]]:
            _, sandbox = self._active_sandbox(scope_id, "diff")
            return sandbox.diff(state, max_lines)

        return attempt(run)
