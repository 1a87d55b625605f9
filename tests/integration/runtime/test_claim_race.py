"""A claim is the end of the race (ADR 0068), forced one interleaving at a time.

The first command runs in this process with a fault hook that stops it at
one boundary (after its claim and its effect, or between its check and its
append); while it is stopped, ANOTHER PROCESS (``tests/integration/runtime/
actor.py``, a fork of the zygote) halts, discards or merges a scope the
claim needs, or claims and is SIGKILLed. Then the first command goes on.
Every outcome must leave the files equal to what the trace records, the
output or checkpoint consumed or released, and no workspace claimed.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from returns.result import Failure, Success

from goatherd.application import ScopeManager
from goatherd.cli import main as cli_main
from goatherd.domain import (
    CheckpointState,
    OutputState,
    ScopeClaimedError,
    ScopeStateError,
)
from goatherd.infrastructure.audit.verify import verify_trace
from goatherd.infrastructure.bootstrap import scope_manager_for
from goatherd.infrastructure.store import SQLiteTraceStore, open_trace_store
from tests.integration.runtime.racer import resolver
from tests.integration.runtime.support import (
    make_repo,
    root_sandbox,
    worktree,
)
from tests.zygote import Zygote, zygote

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[3]
ACTOR = "tests.integration.runtime.actor"
MAIN = "scope:agent:main"
TRY = "scope:agent:try"


@pytest.fixture(scope="module")
def forks() -> Iterator[Zygote]:
    with zygote([ACTOR]) as started:
        yield started


def open_store(trace: str):
    return open_trace_store(trace) if "://" in trace else SQLiteTraceStore(trace)


class Actor:
    """Runs one command in another process, to its end."""

    def __init__(self, forks: Zygote, trace: str, repo: Path) -> None:
        self.forks, self.trace, self.repo = forks, trace, repo
        self.results: list[tuple[int, str]] = []

    def __call__(self, *command: str, env: dict[str, str] | None = None) -> str:
        done = subprocess.run(
            self.forks.command(ACTOR, self.trace, str(self.repo), *command),
            cwd=ROOT,
            capture_output=True,
            text=True,
            env=dict(os.environ, **(env or {})),
            timeout=180,
            check=False,
        )
        if done.returncode == 0:
            lines = [x for x in done.stdout.splitlines() if x.startswith("RESULT")]
            result = lines[0].split()[1]
        else:
            assert done.returncode == -9, done.stderr  # killed where it was told
            result = "Killed"
        self.results.append((done.returncode, result))
        return result


def pause_at(
    boundary: str, needle: str, act: Callable[[], object]
) -> Callable[[str, str], None]:
    """A fault hook that runs ``act`` once, at ``boundary`` of a matching intent."""
    done: list[bool] = []

    def hook(at: str, intent: str) -> None:
        if at == boundary and needle in intent and not done:
            done.append(True)
            act()

    return hook


def files(where: Path) -> dict[str, bytes]:
    return {
        p.relative_to(where).as_posix(): p.read_bytes()
        for p in sorted(where.rglob("*"))
        if p.is_file() and ".git" not in p.relative_to(where).parts
    }


def world(trace: str, tmp_path: Path) -> tuple[Path, str]:
    """A root on a repository, an isolated child ``agent:try`` that sealed a change."""
    repo = make_repo(tmp_path / "repo", {"base.txt": b"base\n"})
    with open_store(trace) as store:
        mgr = scope_manager_for(store)
        root = mgr.create("agent:main", root_sandbox(repo)).unwrap()
        wt = worktree(repo, tmp_path / "wt-try")
        child = mgr.fork_isolated(root.id, "agent:try", None, wt).unwrap()
        (tmp_path / "wt-try" / "answer.txt").write_bytes(b"42\n")
        out = mgr.seal(child.id).unwrap().id
    return repo, out


def manager(store, repo: Path, hook=None) -> ScopeManager:
    return scope_manager_for(store, resolver=resolver(str(repo)), faults=hook)


def assert_files_match_trace(mgr: ScopeManager, store, *owners: str) -> None:
    """No workspace claimed, every recorded digest the live one, verify passes."""
    mgr.context.model.refresh()
    for scope in mgr.context.model.scopes():
        assert scope.workspace_claim == "", scope.owner
    for owner in owners:
        scope = mgr.context.model.scope(owner)
        live = mgr.capture_workspace("scope:" + owner).unwrap().digest()
        assert scope.workspace_digest in ("", live), owner
    assert verify_trace(store).ok


ENDERS = [
    ("halt", TRY),
    ("discard", TRY),
    ("merge", TRY),
    ("halt", MAIN),
]


@pytest.mark.parametrize(("verb", "target"), ENDERS)
@pytest.mark.parametrize("action", ["selected", "applied"])
def test_an_end_after_the_settle_claimed_is_refused_and_the_settle_lands(
    trace, tmp_path, forks, verb, target, action
):
    repo, out = world(trace, tmp_path)
    actor = Actor(forks, trace, repo)
    with open_store(trace) as store:
        hook = pause_at("after-effect", ":settle:", lambda: actor(verb, target))
        mgr = manager(store, repo, hook)
        assert mgr.settle(out, action, seq=7) == Success(None)
        assert actor.results == [(0, "ScopeClaimedError")]
        assert mgr.output(out).state.value == action  # type: ignore[union-attr]
        assert files(repo) == {"base.txt": b"base\n", "answer.txt": b"42\n"}
        assert_files_match_trace(mgr, store, "agent:main")
        # Nothing stays busy: the root checkpoints and restores.
        cp = mgr.create_checkpoint(MAIN, b"after").unwrap()
        assert mgr.restore_checkpoint(cp.id).unwrap() == b"after"
    if target == MAIN:
        assert actor(verb, target) == "Success"  # the end goes through now


@pytest.mark.parametrize(("verb", "target"), ENDERS)
def test_an_end_before_the_settle_claims_wins_and_nothing_lands(
    trace, tmp_path, forks, verb, target
):
    repo, out = world(trace, tmp_path)
    actor = Actor(forks, trace, repo)
    with open_store(trace) as store:
        hook = pause_at("before-commit", ":claim", lambda: actor(verb, target))
        mgr = manager(store, repo, hook)
        result = mgr.settle(out, "selected", seq=7)
        assert actor.results == [(0, "Success")]
        assert isinstance(result, Failure)
        assert isinstance(result.failure(), ScopeStateError)
        output = mgr.output(out)
        assert output is not None
        assert output.state is OutputState.UNCONSUMED
        assert mgr.context.model.output(out).claimed_by == ""
        assert files(repo) == {"base.txt": b"base\n"}
        assert_files_match_trace(mgr, store)


def test_an_end_between_its_check_and_its_append_loses_to_a_claim(
    trace, tmp_path, forks
):
    """A halt decided, then another process claimed, landed and was killed.

    The halt's append conflicts on the claimed workspace's head; decided again
    it is refused, naming the command that finishes the claim; the CLI then
    finishes it with ``--resume``.
    """
    repo, out = world(trace, tmp_path)
    actor = Actor(forks, trace, repo)
    kill = {"ACTOR_KILL_AT": "after-effect", "ACTOR_KILL_INTENT": ":settle:"}
    with open_store(trace) as store:
        hook = pause_at(
            "before-commit",
            "agent:main:halt:",
            lambda: actor("settle", out, "selected", "31", env=kill),
        )
        mgr = manager(store, repo, hook)
        halted = mgr.halt(MAIN)
        assert actor.results == [(-9, "Killed")]
        assert isinstance(halted, Failure)
        refused = halted.failure()
        assert isinstance(refused, ScopeClaimedError)
        assert refused.holder == out
        assert refused.finish == f"goatherd settle {out} selected --resume 31"
        assert (refused.kind, refused.seq) == ("output", 31)  # typed, not parsed
        assert files(repo) == {"base.txt": b"base\n", "answer.txt": b"42\n"}
    code = cli_main(["settle", out, "selected", "--resume", "31", "--db", trace])
    assert code == 0
    with open_store(trace) as store:
        mgr = manager(store, repo)
        assert mgr.output(out).state is OutputState.SELECTED  # type: ignore[union-attr]
        assert mgr.halt(MAIN) == Success(None)
        assert files(repo) == {"base.txt": b"base\n", "answer.txt": b"42\n"}
        assert_files_match_trace(mgr, store)


def test_a_child_end_between_its_check_and_its_append_loses_to_a_claim(
    trace, tmp_path, forks
):
    repo, out = world(trace, tmp_path)
    actor = Actor(forks, trace, repo)
    kill = {"ACTOR_KILL_AT": "after-effect", "ACTOR_KILL_INTENT": ":settle:"}
    with open_store(trace) as store:
        hook = pause_at(
            "before-commit",
            "agent:try:halt:",
            lambda: actor("settle", out, "applied", "32", env=kill),
        )
        mgr = manager(store, repo, hook)
        halted = mgr.halt(TRY)
        assert actor.results == [(-9, "Killed")]
        assert isinstance(halted, Failure)
        assert isinstance(halted.failure(), ScopeClaimedError)
        assert mgr.settle(out, "applied", seq=32) == Success(None)
        assert files(repo) == {"base.txt": b"base\n", "answer.txt": b"42\n"}
        assert_files_match_trace(mgr, store, "agent:main")


def _checkpointed(trace: str, tmp_path: Path, owner: str) -> tuple[Path, Path, str]:
    repo, _ = world(trace, tmp_path)
    where = repo if owner == "agent:main" else tmp_path / "wt-try"
    with open_store(trace) as store:
        mgr = manager(store, repo)
        cp = mgr.create_checkpoint("scope:" + owner, b"history").unwrap().id
    (where / "base.txt").write_bytes(b"broken\n")
    (where / "junk.txt").write_bytes(b"junk\n")
    return repo, where, cp


RESTORE_ENDERS = [
    ("agent:main", "halt", MAIN),
    ("agent:try", "halt", TRY),
    ("agent:try", "discard", TRY),
    ("agent:try", "merge", TRY),
]


@pytest.mark.parametrize(("owner", "verb", "target"), RESTORE_ENDERS)
def test_an_end_after_the_restore_claimed_is_refused_and_the_restore_lands(
    trace, tmp_path, forks, owner, verb, target
):
    repo, where, cp = _checkpointed(trace, tmp_path, owner)
    before = files(where)
    actor = Actor(forks, trace, repo)
    with open_store(trace) as store:
        hook = pause_at("after-effect", ":restore:", lambda: actor(verb, target))
        mgr = manager(store, repo, hook)
        assert mgr.restore_checkpoint(cp, seq=5).unwrap() == b"history"
        assert actor.results == [(0, "ScopeClaimedError")]
        assert mgr.context.model.checkpoint(cp).state is CheckpointState.USED
        restored = files(where)
        assert restored != before
        assert restored["base.txt"] == b"base\n"
        assert "junk.txt" not in restored
        assert_files_match_trace(mgr, store, owner)


@pytest.mark.parametrize(("owner", "verb", "target"), RESTORE_ENDERS)
def test_an_end_before_the_restore_claims_wins_and_nothing_is_reset(
    trace, tmp_path, forks, owner, verb, target
):
    repo, where, cp = _checkpointed(trace, tmp_path, owner)
    before = files(where)
    actor = Actor(forks, trace, repo)
    with open_store(trace) as store:
        hook = pause_at("before-commit", ":claim", lambda: actor(verb, target))
        mgr = manager(store, repo, hook)
        result = mgr.restore_checkpoint(cp, seq=5)
        assert actor.results == [(0, "Success")]
        assert isinstance(result, Failure)
        assert isinstance(result.failure(), ScopeStateError)
        checkpoint = mgr.context.model.checkpoint(cp)
        assert checkpoint.claimed_by == ""
        assert checkpoint.state is CheckpointState.VALID
        if where.exists():
            assert files(where) == before  # nothing reset
        assert verify_trace(store).ok


@pytest.mark.parametrize("command", ["checkpoint", "seal"])
@pytest.mark.parametrize("boundary", ["after-blob", "before-commit"])
def test_a_shared_scope_records_nothing_once_its_root_halted(
    trace, tmp_path, forks, command, boundary
):
    """Checkpoint and seal of a shared child, the root halted mid-command."""
    repo, _ = world(trace, tmp_path)
    actor = Actor(forks, trace, repo)
    with open_store(trace) as store:
        mgr = manager(store, repo)
        mgr.fork(MAIN, "agent:shared").unwrap()
        (repo / "shared.txt").write_bytes(b"shared\n")
        needle = ":checkpoint:" if command == "checkpoint" else ":seal:"
        mgr.context.faults = pause_at(boundary, needle, lambda: actor("halt", MAIN))
        if command == "checkpoint":
            result: object = mgr.create_checkpoint("scope:agent:shared", b"x", seq=3)
        else:
            result = mgr.seal("scope:agent:shared", seq=3)
        assert actor.results == [(0, "Success")]
        assert isinstance(result, Failure)
        assert isinstance(result.failure(), ScopeStateError)
        mgr.context.model.refresh()
        mine = [
            x
            for x in (*mgr.context.model.checkpoints(), *mgr.context.model.outputs())
            if "agent:shared"
            in getattr(x, "checkpoint_id", getattr(x, "output_id", ""))
        ]
        assert mine == []
        assert verify_trace(store).ok
