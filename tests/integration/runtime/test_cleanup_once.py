"""Cleanup is exactly once too: a kill between an end and its teardown.

A process is SIGKILLed right after the record that ends an isolated scope
(a settle's settlement, a halt, a discard) commits and before its worktree is
removed. The same-seq retry and ``recover`` must remove the worktree goatherd
created and record its destruction once; a halt from a plain manager in
another process removes the halted scope's worktree too.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from returns.result import Failure, Success

from goatherd.application.recovery import RecoverOptions, recover_scopes
from goatherd.cli import main as cli_main
from goatherd.domain import (
    SandboxDestroyed,
    ScopeDiscarded,
    ScopeState,
    ScopeStateError,
)
from goatherd.infrastructure.audit.verify import verify_trace
from goatherd.infrastructure.bootstrap import runtime_context_for
from tests.integration.runtime.racer import resolver
from tests.integration.runtime.test_claim_race import (
    ACTOR,
    TRY,
    Actor,
    manager,
    open_store,
    world,
)
from tests.zygote import Zygote, zygote

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def forks() -> Iterator[Zygote]:
    with zygote([ACTOR]) as started:
        yield started


def destroyed(store) -> int:
    return len(
        {
            e.record.record_id
            for e in store.read_log(-1, 100_000)
            if e.record.envelope.schema_ref == SandboxDestroyed.SCHEMA
        }
    )


def registered(repo: Path, where: Path) -> bool:
    listed = subprocess.run(
        ["git", "worktree", "list", "--porcelain"],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return f"worktree {where.resolve()}" in listed


KILLS = [
    (("settle", "OUT", "selected", "7"), r"agent:try:settle:selected:7$"),
    (("settle", "OUT", "discarded", "7"), r"agent:try:settle:discarded:7$"),
    (("halt", TRY), r"agent:try:halt:"),
    (("discard", TRY), r"agent:main:discard:agent:try:"),
]


def _killed(
    trace: str, tmp_path: Path, forks: Zygote, command, pattern
) -> tuple[Path, str, Path, list[str]]:
    repo, out = world(trace, tmp_path)
    wt = tmp_path / "wt-try"
    actor = Actor(forks, trace, repo)
    argv = [out if part == "OUT" else part for part in command]
    env = {"ACTOR_KILL_AT": "after-commit", "ACTOR_KILL_INTENT": pattern}
    assert actor(*argv, env=env) == "Killed"
    assert wt.exists()  # the end committed, the teardown never ran
    return repo, out, wt, argv


@pytest.mark.parametrize(("command", "pattern"), KILLS)
def test_the_same_seq_retry_removes_the_worktree_a_kill_left(
    trace, tmp_path, forks, command, pattern
):
    repo, _, wt, argv = _killed(trace, tmp_path, forks, command, pattern)
    with open_store(trace) as store:
        mgr = manager(store, repo)
        if argv[0] == "settle":
            assert mgr.settle(argv[1], argv[2], seq=int(argv[3])) == Success(None)
        elif argv[0] == "halt":  # a halt is idempotent: any retry finishes it
            assert mgr.halt(TRY) == Success(None)
        else:  # a discard is the same operation under any seq: it finishes
            assert mgr.discard(TRY) == Success(None)
        assert not wt.exists()
        assert not registered(repo, wt)
        assert mgr.context.model.scope("agent:try").sandbox_destroyed
        assert destroyed(store) == 1
        assert verify_trace(store).ok


@pytest.mark.parametrize(("command", "pattern"), KILLS)
def test_recover_removes_the_worktree_a_kill_left_once(
    trace, tmp_path, forks, command, pattern
):
    repo, _, wt, _ = _killed(trace, tmp_path, forks, command, pattern)
    with open_store(trace) as store:
        for _ in range(2):
            recovered = recover_scopes(
                runtime_context_for(store), RecoverOptions(resolver(str(repo)))
            ).unwrap()
            assert not wt.exists()
            assert not registered(repo, wt)
        state = recovered.context.model.scope("agent:try")
        assert state.state is not ScopeState.ACTIVE
        assert state.sandbox_destroyed
        assert destroyed(store) == 1
        assert verify_trace(store).ok


def test_a_halt_from_a_plain_manager_in_another_process_removes_the_worktree(
    trace, tmp_path, forks
):
    repo, _ = world(trace, tmp_path)
    wt = tmp_path / "wt-try"
    actor = Actor(forks, trace, repo)
    assert actor("halt", TRY, env={"ACTOR_PLAIN": "1"}) == "Success"
    assert not wt.exists()
    assert not registered(repo, wt)
    with open_store(trace) as store:
        mgr = manager(store, repo)
        mgr.context.model.refresh()
        assert mgr.context.model.scope("agent:try").sandbox_destroyed
        assert destroyed(store) == 1


def _discard_records(store) -> int:
    return len(
        {
            e.record.record_id
            for e in store.read_log(-1, 100_000)
            if e.record.envelope.schema_ref == ScopeDiscarded.SCHEMA
        }
    )


@pytest.mark.parametrize("via", ["manager", "another process", "cli"])
def test_a_discard_killed_before_its_teardown_is_finished_by_discarding_again(
    trace, tmp_path, forks, via
):
    """SIGKILL after ``scope.discarded`` committed, before the worktree went.

    Discarding the same scope again (a fresh seq, any process, the CLI) is
    the same operation: it returns the recorded outcome, records nothing new
    and removes the worktree, once.
    """
    repo, _, wt, _ = _killed(
        trace, tmp_path, forks, ("discard", TRY), r"agent:main:discard:agent:try:"
    )
    if via == "manager":
        with open_store(trace) as store:
            assert manager(store, repo).discard(TRY) == Success(None)
    elif via == "another process":
        assert Actor(forks, trace, repo)("discard", TRY) == "Success"
    else:
        assert cli_main(["discard", TRY, "--db", trace]) == 0
    assert not wt.exists()
    assert not registered(repo, wt)
    with open_store(trace) as store:
        mgr = manager(store, repo)
        assert mgr.discard(TRY) == Success(None)  # again: nothing more to do
        mgr.context.model.refresh()
        scope = mgr.context.model.scope("agent:try")
        assert scope.state is ScopeState.DISCARDED
        assert scope.sandbox_destroyed
        assert destroyed(store) == 1
        assert _discard_records(store) == 1
        assert verify_trace(store).ok


def test_a_discard_of_a_halted_child_is_still_refused(trace, tmp_path, forks):
    """Only the discard's own record makes a second discard the same operation."""
    repo, _ = world(trace, tmp_path)
    with open_store(trace) as store:
        mgr = manager(store, repo)
        assert mgr.halt(TRY) == Success(None)
        refused = mgr.discard(TRY)
        assert isinstance(refused, Failure)
        assert isinstance(refused.failure(), ScopeStateError)
        assert _discard_records(store) == 0
