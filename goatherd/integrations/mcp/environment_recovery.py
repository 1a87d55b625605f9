"""Reading an environment's path for a call, and recovering what a dead server left.

``EnvironmentRecovery`` observes a call's path (the guidance recorded since
the last call, the record the next declaration follows), keeps each
environment's sandbox in this process, closes the calls a dead server left
open (finishing a restore it claimed), finishes or closes the opens it left,
and sweeps the temporary directories of environments that are gone. Imports
``environment_core``.
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Final

from returns.result import Failure

from goatherd.application import Sandbox
from goatherd.application.errors import GitError, SandboxError
from goatherd.domain import CheckpointState, GuidanceInjected, LogEntry, decode_fact
from goatherd.infrastructure.sandbox.gitrunner import GitRunner
from goatherd.integrations.mcp.environment_core import (
    _ENV_ID,
    Environment,
    EnvironmentsCore,
    Observation,
    _View,
)
from goatherd.integrations.mcp.errors import EnvironmentUnavailableError
from goatherd.integrations.mcp.recording import (
    SERVER_STARTED_SCHEMA,
    TOOL_SCHEMA_PREFIX,
    SessionInfo,
    is_call,
    is_result,
)

__all__ = [
    "EnvironmentRecovery",
]

_INTERRUPTED: Final = "the server stopped before this call finished"


class EnvironmentRecovery(EnvironmentsCore):
    """The per-call view of each path and the recovery of interrupted calls."""

    # ------------------------------------------------------------ recovery

    def observe(self, owner: str) -> Observation:
        """Read what happened on ``owner``'s path since the last call.

        One read of the path's new entries per call: guidance recorded there
        is returned, the last record is what the next declaration follows,
        and the environment's state is folded again only when a record that
        is not a tool call's landed there (every change of a scope's state
        is a record on its own path). On first use in this process, calls a
        dead server left open are closed first.

        Raises:
            EnvironmentUnavailableError: the environment is unknown, or can
                no longer be worked in.
        """
        view = self._views.get(owner)
        if view is None:
            env = self._lookup_owner(owner)
            view = self._first_view(env)
        entries = self._runtime.store.read_path(owner, view.cursor)
        foreign = any(
            not e.record.envelope.schema_ref.startswith(TOOL_SCHEMA_PREFIX)
            for e in entries
        )
        if foreign or view.env is None:
            try:
                view.env = self._lookup_owner(owner)
            except EnvironmentUnavailableError:
                self._views.pop(owner, None)
                self._sandboxes.pop(owner, None)
                raise
        # Another server serving the same environment may have delivered some
        # of this guidance already: its results say through which ordinal.
        delivered = _delivered_through(entries)
        guidance = [
            event.guidance
            for entry in entries
            if entry.record.envelope.schema_ref == GuidanceInjected.SCHEMA
            and entry.record.owner_ordinal > delivered
            and isinstance(event := decode_fact(entry.record).event, GuidanceInjected)
        ]
        if entries:
            view.cursor = entries[-1].record.owner_ordinal
            view.last = entries[-1].record.record_id
        assert view.env is not None
        return Observation(view.env, tuple(guidance), view.cursor, view.last)

    def followed(self, owner: str, record_id: str) -> None:
        """Remember ``record_id`` as the last record this server put on the path."""
        view = self._views.get(owner)
        if view is not None:
            view.last = record_id

    def _first_view(self, env: Environment) -> _View:
        entries = self._runtime.store.read_path(env.owner)
        self.close_interrupted(env.owner, entries)
        view = _View(env, _delivered_through(entries), "")
        self._views[env.owner] = view
        return view

    def sandbox_of(self, env: Environment) -> Sandbox:
        """Return the environment's sandbox in this process (re-adopted once)."""
        cached = self._sandboxes.get(env.owner)
        if cached is None:
            scope = self.manager.get(env.scope_id)
            cached = scope.sandbox if scope is not None else None
            if cached is None:
                raise EnvironmentUnavailableError(
                    f"environment {env.env_id} has no worktree here"
                )
            self._sandboxes[env.owner] = cached
        return cached

    def close_interrupted(self, owner: str, entries: tuple[LogEntry, ...]) -> int:
        """Record an ``interrupted`` capture for each call a dead server left open."""
        answered = {
            parent
            for entry in entries
            if is_result(entry)
            for parent in entry.record.envelope.caused_by_record_ids
        }
        closed = 0
        for entry in entries:
            record = entry.record
            if not is_call(entry) or record.record_id in answered:
                continue
            if self._may_be_running(record.payload.get("session")):
                continue
            tool = _tool_of(record.envelope.schema_ref)
            outcome = (
                self._finished_restore(record.payload) if tool == "restore" else None
            )
            if outcome is None:
                outcome = {"success": False, "interrupted": True, "error": _INTERRUPTED}
            if self._recorder.capture(owner, record.record_id, tool, outcome):
                closed += 1
        return closed

    def _finished_restore(
        self, payload: Mapping[str, object]
    ) -> dict[str, object] | None:
        """Finish a restore a dead server claimed but did not record (ADR 0026).

        The claim holds the environment's workspace until its attempt is
        retried; the retry applies the checkpoint and records it, as the
        agent asked. ``None`` when there is nothing of it to finish.
        """
        checkpoint_id = payload.get("checkpoint_id")
        if not isinstance(checkpoint_id, str):
            return None
        model = self._runtime.model
        model.refresh()
        checkpoint = model.checkpoint(checkpoint_id)
        if not checkpoint.exists or not checkpoint.claimed_by.isdigit():
            return None
        if checkpoint.state is not CheckpointState.VALID:
            return None
        done = self.manager.restore_checkpoint(
            checkpoint_id, seq=int(checkpoint.claimed_by)
        )
        if isinstance(done, Failure):
            return None
        return {
            "success": True,
            "recovered": True,
            "checkpoint_id": checkpoint_id,
            "note": "the server stopped during this restore; a restart finished it",
        }

    def _may_be_running(self, session: object) -> bool:
        if not isinstance(session, str):
            return False
        if session == self._recorder.session.session:
            return True
        info = self._session(session)
        return info is not None and info.may_be_running()

    def _session(self, session: str) -> SessionInfo | None:
        known = self._sessions
        if session not in known.infos:
            entries = self._runtime.store.read_path(self.root_owner, known.read_through)
            for entry in entries:
                known.read_through = max(known.read_through, entry.record.owner_ordinal)
                if entry.record.envelope.schema_ref == SERVER_STARTED_SCHEMA:
                    info = SessionInfo.from_payload(entry.record.payload)
                    if info is not None:
                        known.infos[info.session] = info
        return known.infos.get(session)

    def recover_opens(self, finish: Callable[[Environment, str], None]) -> None:
        """Finish or close the new-environment opens a dead server left open.

        An open whose fork was recorded is finished (the worktree is reset
        to the fork's baseline; ``finish`` records the capture); one whose
        fork was not has its stray worktree removed and is closed as
        interrupted.
        """
        store = self._runtime.store
        root_entries = store.read_path(self.root_owner)
        answered = {
            parent
            for entry in root_entries
            if is_result(entry)
            for parent in entry.record.envelope.caused_by_record_ids
        }
        for entry in root_entries:
            record = entry.record
            planned = record.payload.get("environment_id")
            if not is_call(entry) or not isinstance(planned, str):
                continue
            if record.record_id in answered or not _ENV_ID.match(planned):
                continue
            if self._may_be_running(record.payload.get("session")):
                continue
            owner = f"{self.root_owner}:{planned}"
            env_entries = store.read_path(owner)
            # Answered on the environment's path: its result cites the call
            # (the fork record there cites it too, as the root's head then).
            if any(
                is_result(e)
                and record.record_id in e.record.envelope.caused_by_record_ids
                for e in env_entries
            ):
                continue
            self._recover_open(record.record_id, owner, planned, finish)

    def _recover_open(
        self,
        call_id: str,
        owner: str,
        env_id: str,
        finish: Callable[[Environment, str], None],
    ) -> None:
        model = self._runtime.model
        model.refresh()
        scope = model.scope(owner)
        if scope.listed and scope.is_active and Path(scope.sandbox_path).is_dir():
            env = Environment(env_id, owner, Path(scope.sandbox_path))
            self.apply_baseline(env)
            finish(env, call_id)
            return
        stray = self._settings.worktrees / env_id
        if not scope.listed and stray.is_dir():
            _remove_worktree(self._settings.repo, stray)
        outcome = {"success": False, "interrupted": True, "error": _INTERRUPTED}
        self._recorder.capture(self.root_owner, call_id, "open_environment", outcome)

    def sweep_tmp(self) -> None:
        """Remove the temporary directories of environments that are gone."""
        model = self._runtime.model
        model.refresh()
        for scope in model.scopes():
            if scope.parent_owner == self.root_owner and self._problem(scope):
                self._drop_tmp(scope)


def _tool_of(schema_ref: str) -> str:
    return schema_ref.removeprefix(TOOL_SCHEMA_PREFIX).removesuffix(".v1")


def _remove_worktree(repo: Path, worktree: Path) -> None:
    """Remove a worktree made for a fork that was never recorded."""
    if not (worktree / ".git").is_file():
        return
    git = GitRunner(repo)  # goatherd's safe git configuration (ADR 0067)
    with contextlib.suppress(GitError, SandboxError):
        git.run("worktree", "remove", "--force", str(worktree))
    shutil.rmtree(worktree, ignore_errors=True)
    shutil.rmtree(Path(f"{worktree}.tmp"), ignore_errors=True)
    with contextlib.suppress(GitError, SandboxError):
        git.run("worktree", "prune")


def _delivered_through(entries: Sequence[LogEntry]) -> int:
    """Return the last path ordinal whose guidance a recorded result delivered."""
    through = -1
    for entry in entries:
        if is_result(entry):
            value = entry.record.payload.get("guidance_through")
            if isinstance(value, int) and not isinstance(value, bool):
                through = max(through, value)
    return through
