"""A best-of-n session in its own process, killable at any write boundary.

Run as ``python -m tests.faults.session DB REPO WORKTREES JOURNAL KILL_AT``.
The scope manager's fault hook is called at every write boundary (before and
after each commit, after each landed workspace effect, after each checkpoint
blob). The hook appends ``n boundary intent`` to the JOURNAL (flushed and
fsynced, so the parent knows exactly where the process died) and, at boundary
number KILL_AT, sends the process SIGKILL - no cleanup, no ``finally``, no
flushed buffers, as a power cut of the process would. ``KILL_AT`` 0 never
kills (the parent uses that to count the boundaries of a whole session).

The session: a root scope on a git repository (in place), three attempts in
detached git worktrees writing ``answer.txt`` (the middle one is chosen),
and settlement of the winner (``selected``) and the losers (``discarded``).
"""

from __future__ import annotations

import gc
import os
import signal
import sys
from pathlib import Path
from typing import IO

from goatherd.application import SandboxSpec, best_of_n
from goatherd.infrastructure.bootstrap import scope_manager_for
from goatherd.infrastructure.sandbox import (
    GitSandbox,
    new_local_git_sandbox,
    new_worktree_sandbox,
)
from goatherd.infrastructure.store import SQLiteTraceStore

ROOT_OWNER = "agent:main"
PREFIX = "try"
ATTEMPTS = 3
CHOSEN = 1


def answer(index: int) -> bytes:
    return f"answer from attempt {index}\n".encode()


class Journal:
    """Write-ahead notes of each boundary; SIGKILL at the chosen one."""

    def __init__(self, out: IO[str], kill_at: int) -> None:
        self.out = out
        self.kill_at = kill_at
        self.count = 0

    def __call__(self, boundary: str, intent: str) -> None:
        self.count += 1
        self.out.write(f"{self.count} {boundary} {intent}\n")
        self.out.flush()
        os.fsync(self.out.fileno())
        if self.count == self.kill_at:
            os.kill(os.getpid(), signal.SIGKILL)


def attempt(index: int):
    def handler(scope: object) -> None:
        sandbox = scope.sandbox  # type: ignore[attr-defined]
        assert isinstance(sandbox, GitSandbox)
        (sandbox.workdir / "answer.txt").write_bytes(answer(index))

    return handler


def run(db: Path, repo: Path, worktrees: Path, journal: Journal) -> int:
    with SQLiteTraceStore(db) as store:
        manager = scope_manager_for(store, faults=journal)
        root_sandbox = new_local_git_sandbox(repo)
        root_sandbox.create(SandboxSpec())
        parent = manager.create(ROOT_OWNER, root_sandbox).unwrap()
        result = best_of_n(
            manager,
            parent.id,
            [attempt(i) for i in range(ATTEMPTS)],
            sandbox_for=lambda i: new_worktree_sandbox(
                repo, worktrees / f"{PREFIX}-{i}"
            ),
            chooser=lambda outputs: next(
                o for o in outputs if o.scope_id == f"scope:{PREFIX}-{CHOSEN}"
            ),
            owner_prefix=PREFIX,
        )
        result.unwrap()
    return 0


def main(argv: list[str]) -> int:
    db, repo, worktrees, journal_path, kill_at = argv
    with open(journal_path, "a", encoding="utf-8") as out:
        return run(Path(db), Path(repo), Path(worktrees), Journal(out, int(kill_at)))


if __name__ == "__main__":
    code = main(sys.argv[1:])
    gc.freeze()  # the process ends next: no collector walk over the imports
    sys.exit(code)
