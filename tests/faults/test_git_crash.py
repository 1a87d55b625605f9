"""SIGKILL inside goatherd's own git calls: the retry finishes, nothing burns.

A killer thread SIGKILLs whichever ``git`` child of this process runs at a
random moment of a capture, a restore, a sandbox apply, a worktree add or a
worktree remove on a 400-file workspace. A killed git leaves its locks
(``index.lock``, ``HEAD.lock``, a worktree's ``locked``) behind; the retry
(the same ``seq`` for the runtime commands) must clear them, finish the
effect exactly (the workspace equals the recorded state) and leave every
checkpoint restorable. Each operation is killed at least ``KILLS`` times.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from returns.result import Failure, Success

from goatherd.application import GitError, SandboxSpec
from goatherd.infrastructure.audit.verify import verify_trace
from goatherd.infrastructure.bootstrap import scope_manager_for
from goatherd.infrastructure.sandbox import new_local_git_sandbox, new_worktree_sandbox
from goatherd.infrastructure.store import SQLiteTraceStore
from tests.infrastructure.sandbox import gitfixtures as fx

pytestmark = [pytest.mark.integration, pytest.mark.slow]

KILLS = int(os.environ.get("GOATHERD_CRASH_KILLS", "50"))
FILES = {f"d{i % 20}/f{i}.txt": f"file {i}\n".encode() * 20 for i in range(400)}


def _git_children() -> list[int]:
    me = os.getpid()
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", encoding="utf-8") as handle:
                stat = handle.read()
        except OSError:
            continue
        end = stat.rfind(")")
        fields = stat[end + 2 :].split(" ")
        if stat[stat.find("(") + 1 : end] == "git" and int(fields[1]) == me:
            found.append(int(entry.name))
    return found


def _exited(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as handle:
            stat = handle.read()
    except OSError:
        return True
    return stat[stat.rfind(")") + 2] in "ZX"


class Killer:
    """SIGKILLs a git child of this process at a random moment of a call."""

    def __init__(
        self,
        rng: random.Random,
        calls: int = 3,
        delay: float = 0.004,
        heals: bool = False,
    ) -> None:
        self.heals = heals
        self.rng = rng
        self.calls = calls  # the operation's first git calls to choose from
        self.delay = delay  # the longest wait once the chosen call runs
        self.kills = 0

    def during(self, call: Callable[[], object]) -> tuple[bool, object]:
        """Run ``call`` while killing one git child; return (killed, result)."""
        skip = self.rng.randrange(self.calls)  # which git call of the operation to hit
        delay = self.rng.uniform(0, self.delay)
        killed, _, result = kill_one_git(call, skip, delay, poll=0.001)
        # A git that had just exited (a zombie) takes the signal harmlessly:
        # only a call that failed was cut short by the kill.
        # (destroy finishes a killed removal itself, so it returns normally).
        failed = isinstance(result, (GitError, Failure))
        hit = killed and (failed or self.heals)
        if hit:
            self.kills += 1
        return hit, result


def kill_one_git(
    call: Callable[[], object], skip: int, delay: float, *, poll: float
) -> tuple[bool, int, object]:
    """Run ``call``; SIGKILL the git child it starts after ``skip`` others.

    The chosen child is killed ``delay`` seconds after it is seen (unless it
    has exited by then: the next one is the target). ``poll`` is how often
    the children are listed. Returns whether a child was killed, how many
    git children were seen, and what ``call`` returned (or the ``GitError``
    it raised).
    """
    done = threading.Event()
    killed: list[int] = []
    seen: list[int] = []

    def hunt() -> None:
        while not done.is_set() and not killed:
            for pid in _git_children():
                if pid in seen:
                    continue
                seen.append(pid)
                if len(seen) <= skip:
                    continue
                done.wait(delay)
                if _exited(pid):
                    continue  # it ended first: the next call is the target
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    continue
                killed.append(pid)
                return
            done.wait(poll)

    thread = threading.Thread(target=hunt)
    thread.start()
    try:
        try:
            result: object = call()
        except GitError as error:
            result = error
    finally:
        done.set()
        thread.join()
    return bool(killed), len(seen), result


def _kill_loop(killer: Killer, round_: Callable[[int], None]) -> None:
    attempt = 0
    while killer.kills < KILLS:
        assert attempt < KILLS * 4, f"only {killer.kills} kills landed"
        round_(attempt)
        attempt += 1


@pytest.fixture
def rng() -> random.Random:
    seed = random.randrange(2**32)
    print(f"seed {seed}")
    return random.Random(seed)


def test_a_kill_inside_capture_or_restore_burns_no_checkpoint(
    tmp_path: Path, rng: random.Random
) -> None:
    repo = fx.make_repo(tmp_path / "repo", FILES)
    captures, restores = Killer(rng), Killer(rng)
    with SQLiteTraceStore(tmp_path / "trace.sqlite") as store:
        manager = scope_manager_for(store)
        sandbox = new_local_git_sandbox(repo)
        sandbox.create(SandboxSpec())
        root = manager.create("agent:main", sandbox).unwrap()
        seq = iter(range(1, 10**6))

        def round_(attempt: int) -> None:
            fx.write(repo, f"d{attempt % 20}/f{attempt}.txt", b"edited %d\n" % attempt)
            recorded = fx.snapshot(repo)
            cp_seq = next(seq)
            _, made = captures.during(
                lambda: manager.create_checkpoint(root.id, b"s", seq=cp_seq)
            )
            if not isinstance(made, Success):
                made = manager.create_checkpoint(root.id, b"s", seq=cp_seq)
            checkpoint = made.unwrap()
            for name in list(FILES)[attempt % 3 :: 3]:
                (repo / name).write_bytes(b"damaged\n")
            (repo / "untracked.txt").write_bytes(b"junk\n")
            restore_seq = next(seq)
            _, restored = restores.during(
                lambda: manager.restore_checkpoint(checkpoint.id, seq=restore_seq)
            )
            if isinstance(restored, (Failure, GitError)):
                retried = manager.restore_checkpoint(checkpoint.id, seq=restore_seq)
                assert retried.unwrap() == b"s", retried
            else:
                assert restored.unwrap() == b"s"  # type: ignore[attr-defined]
            assert fx.snapshot(repo) == recorded

        attempt = 0
        while captures.kills < KILLS or restores.kills < KILLS:
            assert attempt < KILLS * 4, (captures.kills, restores.kills)
            round_(attempt)
            attempt += 1
        assert verify_trace(store).ok


def test_a_kill_inside_apply_or_apply_delta_is_finished_by_the_retry(
    tmp_path: Path, rng: random.Random
) -> None:
    repo = fx.make_repo(tmp_path / "repo", FILES)
    sandbox = new_local_git_sandbox(repo)
    killer = Killer(rng)
    for name in list(FILES)[::2]:
        (repo / name).write_bytes(b"recorded\n")
    state = sandbox.capture()
    recorded = fx.snapshot(repo)
    fx.git(repo, "checkout", "-q", "--", ".")
    delta_base = sandbox.capture()

    def round_(attempt: int) -> None:
        if attempt % 2:
            for name in list(FILES)[attempt % 5 :: 5]:
                (repo / name).write_bytes(b"damaged\n")
            (repo / "untracked.txt").write_bytes(b"junk\n")
            killed, _ = killer.during(lambda: sandbox.apply(state))
            if killed:
                sandbox.apply(state)
        else:
            sandbox.apply(delta_base)
            killed, _ = killer.during(lambda: sandbox.apply_delta(state, delta_base))
            if killed:
                sandbox.apply_delta(state, delta_base)
        assert fx.snapshot(repo) == recorded

    _kill_loop(killer, round_)


def test_a_kill_inside_worktree_add_or_remove_is_finished_by_the_retry(
    tmp_path: Path, rng: random.Random
) -> None:
    repo = fx.make_repo(tmp_path / "repo", FILES)
    adds, removes = Killer(rng), Killer(rng, calls=1, delay=0.0, heals=True)

    def round_(attempt: int) -> None:
        target = tmp_path / f"wt-{attempt}"
        sandbox = new_worktree_sandbox(repo, target)
        killed, _ = adds.during(lambda: sandbox.create(SandboxSpec()))
        if killed:
            sandbox = new_worktree_sandbox(repo, target)
            sandbox.create(SandboxSpec())
        assert fx.snapshot(target) == fx.snapshot(repo)
        killed, _ = removes.during(sandbox.destroy)
        if killed:
            new_worktree_sandbox(repo, target).destroy()
        assert not target.exists()
        assert str(target) not in fx.git(repo, "worktree", "list", "--porcelain")

    attempt = 0
    while adds.kills < KILLS or removes.kills < KILLS:
        assert attempt < KILLS * 4, f"kills: {adds.kills} adds, {removes.kills} removes"
        round_(attempt)
        attempt += 1


def test_a_lock_a_live_git_of_a_person_holds_is_never_removed(tmp_path: Path) -> None:
    repo = fx.make_repo(tmp_path / "repo", {"a.txt": b"a\n"})
    sandbox = new_local_git_sandbox(repo)
    state = sandbox.capture()
    # A goatherd call was cut short here (its journal stands) ...
    (repo / ".git" / "goatherd-git.journal").write_text('{"args": ["reset"]}')
    (repo / "a.txt").write_bytes(b"staged\n")
    fx.git(repo, "add", "a.txt")
    # ... and a person's `git commit` now holds index.lock, waiting on an editor.
    person = subprocess.Popen(
        ["git", "-c", "user.name=P", "-c", "user.email=p@x", "commit", "-a"],
        cwd=repo,
        env={**os.environ, "GIT_EDITOR": "sleep 8 #"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    lock = repo / ".git" / "index.lock"
    try:
        for _ in range(1000):
            if lock.exists():
                break
            time.sleep(0.01)
        assert lock.exists()
        with pytest.raises(GitError, match=r"index\.lock"):
            sandbox.apply(state)
        assert lock.exists()  # still the person's
    finally:
        person.wait(timeout=30)
    assert not lock.exists()
    sandbox.apply(state)
    assert (repo / "a.txt").read_bytes() == b"a\n"
    assert not (repo / ".git" / "goatherd-git.journal").exists()
