"""Run (or resume) the demo's best-of-n session in a stable directory.

:func:`run_demo` opens the trace, rebuilds the scope tree from it
(``recover_scopes``, re-adopting the worktrees by their recorded paths),
finishes whatever a crash interrupted (:mod:`.resume`), runs the attempts
still missing as one ``best_of_n`` round, records
``demo.session.completed.v1`` and returns the session as the trace tells it.
A completed session is not run again. The directory is :mod:`.layout`'s;
see ADR 0022 for the resumption design.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, TypeVar

from returns.result import Failure, Result

from goatherd import best_of_n
from goatherd.application import (
    RetainedOutput,
    Sandbox,
    SandboxSpec,
    Scope,
    ScopeManager,
    Supervisor,
)
from goatherd.demo.agent_runner import run_agent
from goatherd.demo.agents import AGENTS, agent_named
from goatherd.demo.layout import (
    DemoError,
    DemoLayout,
    prepare_directory,
)
from goatherd.demo.project import changed_paths
from goatherd.demo.resume import finish_interrupted
from goatherd.demo.rules import demo_supervisor
from goatherd.demo.state import (
    COMPLETED_SCHEMA,
    ROOT_OWNER,
    ROUND_SCHEMA,
    RoundPlan,
    SessionState,
    read_session,
    tests_verdict,
)
from goatherd.domain import EffectEvent, GoatherdError, ScopeState
from goatherd.infrastructure import (
    Runtime,
    TraceStats,
    new_local_git_sandbox,
    new_worktree_sandbox,
    open_runtime,
    trace_stats,
)

__all__ = ["DemoOptions", "DemoRun", "run_demo"]

ROOT_SCOPE: Final = f"scope:{ROOT_OWNER}"
T = TypeVar("T")
Progress = Callable[[str], None]


@dataclass(frozen=True, slots=True)
class DemoOptions:
    """How to run the demo.

    Attributes:
        directory: the demo directory (stable, so a rerun resumes).
        fresh: wipe what an earlier run left and start over.
        crash_after: SIGKILL this process after that many appended records
            (path entries); ``0`` never.
    """

    directory: Path
    fresh: bool = False
    crash_after: int = 0


@dataclass(frozen=True, slots=True)
class DemoRun:
    """The session as the trace tells it once the command is done.

    Attributes:
        layout: where everything is.
        state: the recorded session.
        resumed: the trace held an unfinished session this run finished.
        already_complete: the session had completed before this run.
        stats: what the trace holds at the end.
        project_changes: the project's paths that differ from its commit
            (the winner's change, once settled).
    """

    layout: DemoLayout
    state: SessionState
    resumed: bool
    already_complete: bool
    stats: TraceStats
    project_changes: tuple[str, ...]


def run_demo(options: DemoOptions, progress: Progress | None = None) -> DemoRun:
    """Run the demo session, or finish and summarize the one recorded.

    Raises:
        DemoError: the directory is not the demo's, or the project is missing
            while the trace refers to it.
        GoatherdError: a runtime step the trace or a sandbox refused.
    """
    say = progress or (lambda _text: None)
    layout = DemoLayout(options.directory.resolve())
    prepare_directory(layout, options.fresh, say)
    tap = _crash_tap(options.crash_after) if options.crash_after > 0 else None
    with open_runtime(layout.trace, tap=tap) as runtime:
        return _Session(runtime, layout, say).run()


def _crash_tap(after: int) -> Callable[[EffectEvent], None]:
    """Kill this process (no cleanup at all) once ``after`` records are in."""
    seen = 0

    def tap(event: EffectEvent) -> None:
        nonlocal seen
        seen += 1
        if seen >= after:
            print(
                f"goatherd demo: --crash-after {after}: killing this process now",
                file=sys.stderr,
                flush=True,
            )
            os.kill(os.getpid(), getattr(signal, "SIGKILL", signal.SIGTERM))

    return tap


# ------------------------------------------------------------ the session


class _Session:
    def __init__(self, runtime: Runtime, layout: DemoLayout, say: Progress) -> None:
        self._runtime = runtime
        self._layout = layout
        self._say = say

    def _read(self) -> SessionState:
        return read_session(self._runtime.store, self._runtime.model)

    def run(self) -> DemoRun:
        state = self._read()
        if state.completed is not None:
            self._say("the session already completed; nothing to do")
            return self._result(state, resumed=False, already_complete=True)
        resumed = bool(state.rounds)
        manager = self._recover(state)
        supervisor = demo_supervisor(manager, self._runtime.store)
        if resumed:
            self._say("resuming the session recorded in the trace")
            state = finish_interrupted(manager, self._read, self._say)
        self._remove_orphan_worktrees()
        if state.winner is None:
            self._run_round(manager, supervisor, state)
            state = self._read()
        self._complete(manager, state)
        return self._result(self._read(), resumed=resumed, already_complete=False)

    def _result(
        self, state: SessionState, *, resumed: bool, already_complete: bool
    ) -> DemoRun:
        return DemoRun(
            self._layout,
            state,
            resumed,
            already_complete,
            trace_stats(self._runtime.store),
            changed_paths(self._layout.project),
        )

    def _recover(self, state: SessionState) -> ScopeManager:
        active = {a.owner for a in state.attempts if a.state is ScopeState.ACTIVE}
        manager = _ok(self._runtime.recover(self._resolver(active)))
        if manager.get(ROOT_SCOPE) is None:
            _ok(manager.create(ROOT_OWNER, self._root_sandbox()))
        return manager

    def _root_sandbox(self) -> Sandbox:
        sandbox = new_local_git_sandbox(self._layout.project)
        sandbox.create(SandboxSpec())
        return sandbox

    def _resolver(self, active: set[str]) -> Callable[[str, str, str], Sandbox | None]:
        """Re-adopt the root in place and each active attempt's worktree."""

        def resolve(scope_id: str, backend: str, path: str) -> Sandbox | None:
            owner = scope_id.removeprefix("scope:")
            if owner == ROOT_OWNER:
                return self._root_sandbox()
            if owner not in active or backend != "git" or not path:
                return None  # ended attempts: their worktrees are cleaned below
            if not Path(path).is_dir():
                return None
            return new_worktree_sandbox(self._layout.project, path)

        return resolve

    def _remove_orphan_worktrees(self) -> None:
        """Remove worktrees no active attempt owns (a crash left them)."""
        worktrees = self._layout.worktrees
        if not worktrees.is_dir():
            return
        active = {
            str(self._layout.worktree_for(a.owner))
            for a in self._read().attempts
            if a.state is ScopeState.ACTIVE
        }
        for path in sorted(worktrees.iterdir()):
            if str(path) not in active:
                self._say(f"removing the orphaned worktree {path}")
                new_worktree_sandbox(self._layout.project, path).destroy()

    # ------------------------------------------------------------ a round

    def _next_round(self, state: SessionState) -> RoundPlan:
        done = {a.agent for a in state.attempts if a.status == "denied"}
        agents = tuple(a.name for a in AGENTS if a.name not in done)
        if not agents:
            raise DemoError("every agent was denied: no attempt can win")
        number = max((r.number for r in state.rounds), default=0) + 1
        prefix = f"{ROOT_OWNER}:attempt"
        if number > 1:
            prefix = f"{ROOT_OWNER}:round-{number}-attempt"
        return RoundPlan(number, prefix, agents)

    def _run_round(
        self, manager: ScopeManager, supervisor: Supervisor, state: SessionState
    ) -> None:
        plan = self._next_round(state)
        self._say(
            f"round {plan.number}: best-of-{len(plan.agents)} with "
            + ", ".join(plan.agents)
        )
        payload = {
            "round": plan.number,
            "owner_prefix": plan.owner_prefix,
            "agents": list(plan.agents),
        }
        _ok(manager.append_fact(ROOT_SCOPE, ROUND_SCHEMA, "demo:round", payload))

        def handler_for(name: str) -> Callable[[Scope], object]:
            agent = agent_named(name)
            return lambda scope: run_agent(agent, scope, supervisor, manager)

        def sandbox_for(index: int) -> Sandbox:
            path = self._layout.worktree_for(plan.owner(index))
            return new_worktree_sandbox(self._layout.project, path)

        store = self._runtime.store

        def chooser(outputs: Sequence[RetainedOutput]) -> RetainedOutput | None:
            passing = (
                o for o in outputs if tests_verdict(store, o.scope_id[6:]) is True
            )
            return next(passing, None)

        result = best_of_n(
            manager,
            ROOT_SCOPE,
            [handler_for(name) for name in plan.agents],
            sandbox_for=sandbox_for,
            chooser=chooser,
            supervisor=supervisor,
            owner_prefix=plan.owner_prefix,
        )
        if isinstance(result, Failure):
            raise DemoError(f"the session found no winner: {result.failure()}")

    def _complete(self, manager: ScopeManager, state: SessionState) -> None:
        winner = state.winner
        if winner is None:
            raise DemoError("the session ended without a winner")
        output = winner.winning_output
        assert output is not None
        assert output.action is not None
        payload = {
            "winner_scope": winner.scope_id,
            "agent": winner.agent,
            "round": winner.round,
            "output_id": output.output_id,
            "action": output.action.value,
            "rounds": len(state.rounds),
            "attempts": len(state.attempts),
        }
        _ok(
            manager.append_fact(ROOT_SCOPE, COMPLETED_SCHEMA, "demo:completed", payload)
        )
        self._say(f"the winner is {winner.agent} ({winner.scope_id})")


def _ok(result: Result[T, GoatherdError]) -> T:
    if isinstance(result, Failure):
        raise result.failure()
    return result.unwrap()
