"""SIGKILL at random points of a best-of-n session, then recover and finish it.

Each case runs ``tests/faults/session.py`` in its own process on a fresh SQLite
trace and git repository and kills it with SIGKILL at one write boundary
(before or after a commit, after a landed workspace effect) or after a random
delay (anywhere: inside a git command, inside a SQLite transaction). Then, in
this process:

1. the trace verifies (``verify_trace``: ids, chains, ordinals, positions);
2. recovery rebuilds every scope whose fork committed, re-adopting the root
   repository and the attempts' worktrees through the resolver;
3. a claimed settlement is retried under its SAME intent and lands exactly
   once (the effect is not applied twice, one settled record);
4. the session is completed: with a winner already settled the rest is
   discarded, otherwise every open attempt is discarded and best-of-n runs
   again; in the end exactly one output is settled as the winner, the root
   repository holds the chosen answer once, no attempt is left open, and no
   output has two settled records.

Every boundary is killed once (``pytest -m slow tests/faults``), and three
sessions are killed after a seeded random delay.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from returns.result import Success

from goatherd.application import (
    RecoverOptions,
    Scope,
    ScopeManager,
    best_of_n,
    recover_scopes,
)
from goatherd.domain import OutputState, ScopeState
from goatherd.infrastructure.audit.verify import verify_trace
from goatherd.infrastructure.bootstrap import runtime_context_for
from goatherd.infrastructure.sandbox import new_local_git_sandbox, new_worktree_sandbox
from goatherd.infrastructure.store import SQLiteTraceStore
from tests.faults import session
from tests.infrastructure.sandbox import gitfixtures as fx
from tests.zygote import Zygote, zygote

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

ROOT = f"scope:{session.ROOT_OWNER}"
SETTLED = "goatherd.run_output.settled.v1"
WINNING = {OutputState.SELECTED, OutputState.APPLIED}
SEED = int(os.environ.get("GOATHERD_FAULT_SEED", "20261129"))
SESSION_BOUNDARIES = 56  # counted by test_an_unkilled_session_...


class Case:
    """A fresh trace, repository and journal for one killed session."""

    def __init__(self, base: Path) -> None:
        self.db = base / "trace.db"
        self.repo = fx.make_repo(base / "repo", {"base.txt": b"base\n"})
        self.worktrees = base / "worktrees"
        self.journal = base / "journal.txt"

    def start(
        self, kill_at: int, forks: Zygote | None = None
    ) -> subprocess.Popen[bytes]:
        """Start the session; with ``forks``, as a fork of that zygote.

        A session killed from outside must be this process's own child (the
        zygote kills a fork only after its launcher is gone); one that kills
        itself at a boundary may be a fork.
        """
        args = [
            str(self.db),
            str(self.repo),
            str(self.worktrees),
            str(self.journal),
            str(kill_at),
        ]
        argv = [sys.executable, "-m", "tests.faults.session", *args]
        if forks is not None:
            argv = forks.command("tests.faults.session", *args)
        return subprocess.Popen(
            argv,
            cwd=Path(__file__).resolve().parents[2],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )

    def boundaries(self) -> list[tuple[str, str]]:
        if not self.journal.exists():
            return []
        lines = self.journal.read_text().splitlines()
        return [tuple(line.split(" ", 2)[1:]) for line in lines]  # type: ignore[misc]

    def resolver(self, scope_id: str, backend: str, path: str) -> object:
        if scope_id == ROOT:
            return new_local_git_sandbox(self.repo)
        if path and (Path(path) / ".git").exists():
            return new_worktree_sandbox(self.repo, path)
        return None


def recover(case: Case, store: SQLiteTraceStore) -> ScopeManager:
    options = RecoverOptions(resolver=case.resolver)  # type: ignore[arg-type]
    return recover_scopes(runtime_context_for(store), options).unwrap()


def attempts_of(manager: ScopeManager) -> list[Scope]:
    return [s for s in manager.all_scopes() if s.id != ROOT]


def retry_claimed_settlements(manager: ScopeManager) -> list[str]:
    """Finish every settlement a killed process claimed, under ITS intent."""
    retried = []
    for scope in attempts_of(manager):
        for output in manager.outputs_for_scope(scope.id):
            intent = output.claimed_by
            if intent and output.state is OutputState.UNCONSUMED:
                _, _, action, seq = intent.rsplit(":", 3)
                assert manager.settle(output.id, action, seq=int(seq)) == Success(None)
                retried.append(intent)
    return retried


def close_open_attempts(manager: ScopeManager) -> None:
    for scope in attempts_of(manager):
        for output in manager.outputs_for_scope(scope.id):
            if (
                output.state is OutputState.UNCONSUMED
                and scope.state is ScopeState.ACTIVE
            ):
                manager.settle(output.id, "discarded").unwrap()
        if scope.state is ScopeState.ACTIVE:
            manager.discard(scope.id).unwrap()


def winners(manager: ScopeManager) -> list[str]:
    return [
        output.id
        for scope in attempts_of(manager)
        for output in manager.outputs_for_scope(scope.id)
        if output.state in WINNING
    ]


def finish_session(case: Case, manager: ScopeManager) -> None:
    if winners(manager):
        close_open_attempts(manager)
        return
    close_open_attempts(manager)
    parent = manager.get(ROOT)
    if parent is None:
        # Killed before the first fork: a root scope has no record of its
        # own, so the host registers it again (as it did at the start).
        root = new_local_git_sandbox(case.repo)
        parent = manager.create(session.ROOT_OWNER, root).unwrap()
    best_of_n(
        manager,
        parent.id,
        [session.attempt(i) for i in range(session.ATTEMPTS)],
        sandbox_for=lambda i: new_worktree_sandbox(
            case.repo, case.worktrees / f"retry-{i}"
        ),
        chooser=lambda outputs: next(
            o for o in outputs if o.scope_id == f"scope:retry-{session.CHOSEN}"
        ),
        owner_prefix="retry",
    ).unwrap()


def check_recovered_then_finish(case: Case) -> None:
    with SQLiteTraceStore(case.db) as store:
        report = verify_trace(store)
        assert report.ok, report.problems
        manager = recover(case, store)
        # Every attempt whose fork committed came back.
        forked = {
            intent.split(":fork:")[1].rsplit(":", 1)[0]
            for _, intent in case.boundaries()
            if ":fork:" in intent and store.read_append_intent(intent) is not None
        }
        assert forked <= {s.owner_id for s in attempts_of(manager)}
        for intent in retry_claimed_settlements(manager):
            assert store.read_append_intent(intent) is not None
        finish_session(case, manager)
        check_finished(case, store, manager)


def check_finished(case: Case, store: SQLiteTraceStore, manager: ScopeManager) -> None:
    assert len(winners(manager)) == 1
    assert (case.repo / "answer.txt").read_bytes() == session.answer(session.CHOSEN)
    assert [s.id for s in manager.active_scopes()] == [ROOT]
    settled = {
        e.record.record_id: str(e.record.payload.get("output_id"))
        for e in store.scan_records_by_schema(SETTLED)
    }
    duplicates = [o for o, n in Counter(settled.values()).items() if n > 1]
    assert duplicates == []
    report = verify_trace(store)
    assert report.ok, report.problems


def test_an_unkilled_session_settles_one_winner_through_every_boundary(
    tmp_path: Path,
) -> None:
    case = Case(tmp_path)
    process = case.start(0)
    _, err = process.communicate(timeout=120)
    assert process.returncode == 0, err.decode()
    assert len(case.boundaries()) == SESSION_BOUNDARIES
    assert case.boundaries()[31] == (
        "after-effect",
        case.boundaries()[32][1],
    )
    with SQLiteTraceStore(case.db) as store:
        check_finished(case, store, recover(case, store))


@pytest.fixture(scope="module")
def forks() -> Iterator[Zygote]:
    """The sessions killed at a boundary: forks of one pre-imported Python."""
    with zygote(["tests.faults.session"]) as started:
        yield started


def run_killed(case: Case, kill_at: int, forks: Zygote) -> None:
    process = case.start(kill_at, forks)
    _, err = process.communicate(timeout=120)
    assert process.returncode == -signal.SIGKILL, err.decode()
    assert len(case.boundaries()) == kill_at
    check_recovered_then_finish(case)


@pytest.mark.parametrize(
    "delay", sorted(random.Random(SEED).uniform(0.2, 1.6) for _ in range(3))
)
def test_a_session_killed_after_a_random_delay_recovers_and_finishes_once(
    tmp_path: Path, delay: float
) -> None:
    case = Case(tmp_path)
    process = case.start(0)
    time.sleep(delay)
    process.send_signal(signal.SIGKILL)
    process.communicate(timeout=120)
    check_recovered_then_finish(case)


@pytest.mark.slow
@pytest.mark.parametrize("kill_at", range(1, SESSION_BOUNDARIES + 1))
def test_every_write_boundary_survives_a_kill(
    tmp_path: Path, kill_at: int, forks: Zygote
) -> None:
    run_killed(Case(tmp_path), kill_at, forks)
