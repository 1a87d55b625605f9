"""SIGKILL inside the git calls of a settle, through the manager: finished once.

A settle ``selected`` or ``applied`` of an isolated child (its own git
worktree) into a root that works in a git worktree runs a few dozen git
calls: the live check (capture, diff), the effect (``reset``, ``clean``,
``read-tree``/``checkout-index`` into a staging directory, the three-way
delta), the result's capture and the child's ``worktree remove``. A killer
thread SIGKILLs whichever git child of this process runs at a random moment
of the settle; the same-seq retry (the API, killed again at another random
moment, or ``goatherd settle OUT VERB --resume SEQ``) must finish the effect.
After each output: it is settled exactly once with its verb, the root's files
are the ones expected and digest to what the trace records, the child's
worktree is gone, and no git lock or journal is left. Each verb is killed at
least ``KILLS`` times (``GOATHERD_CRASH_KILLS``).
"""

from __future__ import annotations

import os
import random
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from returns.result import Failure, Success

from goatherd.application import GitError, SandboxSpec
from goatherd.cli import main as cli_main
from goatherd.domain import OutputSettled, OutputState, SettleEffectLandedError
from goatherd.infrastructure.audit.verify import verify_trace
from goatherd.infrastructure.bootstrap import scope_manager_for
from goatherd.infrastructure.sandbox import new_worktree_sandbox
from goatherd.infrastructure.sandbox.gitrunner import GitRunner
from goatherd.infrastructure.sandbox.gitstate import locate
from goatherd.infrastructure.store import SQLiteTraceStore
from tests.faults.test_git_crash import kill_one_git
from tests.infrastructure.sandbox import gitfixtures as fx

pytestmark = pytest.mark.integration

KILLS = int(os.environ.get("GOATHERD_CRASH_KILLS", "50"))
FILES = {f"d{i % 10}/f{i}.txt": f"file {i}\n".encode() * 20 for i in range(200)}
# One file both sides edit, on disjoint lines: an apply merges it with
# ``git merge-file``, one more git call the killer may hit.
SHARED = "shared.txt"
FILES[SHARED] = b"".join(b"line %d\n" % i for i in range(20))
PER_OUTPUT = 5  # kills of one settle and its retries before a clean retry


class CallKiller:
    """SIGKILLs one git call of an operation, chosen at random, at a random moment.

    Which call: uniform over the git children the last clean run of the same
    kind of attempt (the first, or a retry) started, so the late calls (the
    delta, the result's capture, the worktree removal) are hit as often as the
    early ones; when: up to ``delay`` seconds after it started.
    """

    def __init__(self, rng: random.Random, delay: float = 0.004) -> None:
        self.rng = rng
        self.delay = delay
        self.kills = 0
        self.calls: dict[str, int] = {}  # attempt kind -> git calls of a clean run
        self.hit_calls: list[str] = []

    def during(self, kind: str, call: Callable[[], object]) -> tuple[bool, object]:
        skip = self.rng.randrange(self.calls.get(kind, 40))
        delay = self.rng.uniform(0, self.delay)
        killed, seen, result = kill_one_git(call, skip, delay, poll=0.0003)
        # A git that had just exited takes the signal harmlessly: only a call
        # that failed was cut short by the kill.
        hit = killed and isinstance(result, (GitError, Failure))
        if hit:
            self.kills += 1
        elif not killed:
            self.calls[kind] = max(seen, 1)
        return hit, result


def _leftovers(repo: Path) -> list[str]:
    """Git locks and goatherd journals anywhere in the common git directory."""
    git_dir = repo / ".git"
    found = []
    for here, dirs, names in os.walk(git_dir):
        if Path(here) == git_dir:
            dirs[:] = [d for d in dirs if d != "objects"]  # git locks no object
        for name in names:
            # goatherd's own flock files stay: the kernel, not the file, holds them
            lock = name.endswith(".lock") and not name.startswith("goatherd-")
            if lock or name in ("goatherd-git.journal", "locked"):
                found.append(str(Path(here, name).relative_to(git_dir)))
    return sorted(found)


def _settlements(store: SQLiteTraceStore, output_id: str) -> list[str]:
    found = {
        e.record.record_id: str(e.record.payload.get("action"))
        for e in store.read_log(-1, 1_000_000)
        if e.record.envelope.schema_ref == OutputSettled.SCHEMA
        and e.record.payload.get("output_id") == output_id
    }
    return list(found.values())


@pytest.fixture
def rng() -> random.Random:
    seed = int(os.environ.get("GOATHERD_FAULT_SEED", random.randrange(2**32)))
    print(f"seed {seed}")
    return random.Random(seed)


def test_a_git_killed_while_it_locates_the_work_tree_is_reported_as_killed(
    tmp_path: Path,
) -> None:
    """A killed or timed-out ``rev-parse`` is a crash, not "not a git working tree".

    Every capture and diff starts by locating the work tree; a restore or
    settle treats a killed git as a crash its same-seq retry finishes, and a
    refusal as a fact about the workspace.
    """
    repo = fx.make_repo(tmp_path / "repo", {"a.txt": b"a\n"})
    with pytest.raises(GitError) as caught:
        locate(GitRunner(repo, timeout=1e-9))
    assert caught.value.returncode is None
    assert "timed out" in str(caught.value)
    assert locate(GitRunner(repo))[1].name == "index"  # the tree was never at fault


@pytest.mark.slow
@pytest.mark.parametrize("verb", ["selected", "applied"])
def test_a_kill_inside_a_settles_git_is_finished_by_its_same_seq_retry(
    tmp_path: Path, rng: random.Random, verb: str
) -> None:
    # One item per verb: each stays well inside the per-test timeout on a
    # loaded machine (both verbs in one item took 710 s at load 30).
    repo = fx.make_repo(tmp_path / "repo", FILES)
    db = tmp_path / "trace.sqlite"
    home = tmp_path / "main"
    killers = {verb: CallKiller(rng)}
    with SQLiteTraceStore(db) as store:
        mgr = scope_manager_for(store)
        root_sandbox = new_worktree_sandbox(repo, home)
        root_sandbox.create(SandboxSpec())
        root = mgr.create("agent:main", root_sandbox).unwrap()
        n = 0
        killer = killers[verb]
        while killer.kills < KILLS:
            assert n < KILLS * 3, {v: k.kills for v, k in killers.items()}
            where = tmp_path / f"wt-{n}"
            child_sandbox = new_worktree_sandbox(repo, where)
            child_sandbox.create(SandboxSpec())
            # fork_isolated populates the child with the root's files now.
            child = mgr.fork_isolated(
                root.id, f"agent:try{n}", None, child_sandbox
            ).unwrap()
            names = [p for p in FILES if p != SHARED]
            for name in names[n % 7 :: 7]:
                fx.write(where, name, b"child %d\n" % n)
            fx.write(where, f"new/{n}.txt", b"new %d\n" % n)
            *lines, _ = (where / SHARED).read_bytes().splitlines(keepends=True)
            fx.write(where, SHARED, b"".join(lines) + b"child %d\n" % n)
            out = mgr.seal(child.id).unwrap()
            theirs = fx.snapshot(where)
            expected = theirs
            if verb == "applied":  # the root's own edit, disjoint from the child's
                fx.write(home, names[(n % 7) + 1], b"root %d\n" % n)
                changed = [*names[n % 7 :: 7], f"new/{n}.txt"]
                expected = {**fx.snapshot(home), **{p: theirs[p] for p in changed}}
                # ... and in the one shared file, on another line than the child's.
                _, *rest = (home / SHARED).read_bytes().splitlines(keepends=True)
                fx.write(home, SHARED, b"root %d\n" % n + b"".join(rest))
                first, *_ = (home / SHARED).read_bytes().splitlines(keepends=True)
                *_, last = theirs[SHARED][0].splitlines(keepends=True)
                middle = (home / SHARED).read_bytes().splitlines(keepends=True)[1:-1]
                expected[SHARED] = (first + b"".join(middle) + last, False)
            seq = 1000 + n
            finished = False
            for attempt in range(PER_OUTPUT):
                hit, result = killer.during(
                    "first" if attempt == 0 else "retry",
                    lambda: mgr.settle(out.id, verb, seq=seq),  # noqa: B023
                )
                if not hit:
                    assert result == Success(None), result
                    finished = True
                    break
                # A killed git surfaces as what it is, never as a broken tree.
                failure = result.failure() if isinstance(result, Failure) else result
                assert isinstance(failure, GitError | SettleEffectLandedError), failure
                killer.hit_calls.append(_verb_of(failure))
            if not finished:
                if n % 3 == 2:  # another process's view: the CLI resumes it
                    code = cli_main(
                        ["settle", out.id, verb, "--resume", str(seq), "--db", str(db)]
                    )
                    assert code == 0
                else:
                    assert mgr.settle(out.id, verb, seq=seq) == Success(None)
            mgr.context.model.refresh()
            assert mgr.output(out.id).state is OutputState(verb)  # type: ignore[union-attr]
            assert _settlements(store, out.id) == [verb]
            assert fx.snapshot(home) == expected
            recorded = mgr.context.model.scope("agent:main").workspace_digest
            assert root_sandbox.capture().digest() == recorded
            assert mgr.context.model.scope("agent:main").workspace_claim == ""
            assert not where.exists()
            assert _leftovers(repo) == []
            n += 1
        assert verify_trace(store).ok
    for verb, killer in killers.items():
        print(verb, killer.kills, "kills:", Counter(killer.hit_calls).most_common())
    print("outputs", n)


def _verb_of(failure: object) -> str:
    """The git subcommand a killed call ran (from the error's message)."""
    text = str(failure)
    if isinstance(failure, SettleEffectLandedError):
        text = failure.cause
    words = text.removeprefix("git ").split()
    return (
        "landed:" + words[0]
        if isinstance(failure, SettleEffectLandedError)
        else words[0]
    )
