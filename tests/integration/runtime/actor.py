"""Another process acting on the trace (``python -m tests.integration.runtime.actor``).

``actor.py DB REPO COMMAND TARGET [ARGS...]`` opens the trace with a manager
whose resolver re-adopts the repository (roots) and the recorded worktrees
(isolated children), runs one command and prints ``RESULT <outcome>`` (the
failure's class name, or ``Success``) and ``DETAIL <message>``:

- ``halt SCOPE``, ``discard CHILD``, ``merge CHILD``;
- ``settle OUTPUT ACTION SEQ [commit]`` (``commit``: as a git commit, by
  ``Actor <actor@example.com>``); ``restore CHECKPOINT SEQ``;
- ``checkpoint SCOPE SEQ``, ``seal SCOPE SEQ``.

With ``ACTOR_KILL_AT=BOUNDARY`` it SIGKILLs itself at that fault boundary of
the first intent ``ACTOR_KILL_INTENT`` (a regular expression; default: any
intent) matches, as a crash would. With ``ACTOR_PLAIN=1`` the manager has no
resolver (a plain ``scope_manager_for(store)``).
"""

from __future__ import annotations

import os
import re
import signal
import sys
from pathlib import Path

from returns.result import Failure, Success

from goatherd.infrastructure.bootstrap import scope_manager_for
from goatherd.infrastructure.store import SQLiteTraceStore, open_trace_store
from tests.integration.runtime.racer import resolver


def _killer():
    boundary = os.environ.get("ACTOR_KILL_AT")
    if not boundary:
        return None
    needle = os.environ.get("ACTOR_KILL_INTENT", "")

    def hook(at: str, intent: str) -> None:
        if at == boundary and re.search(needle, intent):
            sys.stdout.flush()
            os.kill(os.getpid(), signal.SIGKILL)

    return hook


def _run(mgr, command: str, target: str, rest: list[str]) -> object:
    if command == "halt":
        return mgr.halt(target)
    if command in ("discard", "merge"):
        return getattr(mgr, command)(target)
    if command == "settle":
        action, seq, *commit = rest
        if commit == ["commit"]:
            author = "Actor <actor@example.com>"
            return mgr.settle(target, action, seq=int(seq), commit=True, author=author)
        return mgr.settle(target, action, seq=int(seq))
    if command == "restore":
        return mgr.restore_checkpoint(target, seq=int(rest[0]))
    if command == "checkpoint":
        return mgr.create_checkpoint(target, b"actor", seq=int(rest[0]))
    if command == "seal":
        return mgr.seal(target, seq=int(rest[0]))
    raise SystemExit(f"unknown command {command!r}")


def main(argv: list[str]) -> None:
    db, repo, command, target, *rest = argv
    store = open_trace_store(db) if "://" in db else SQLiteTraceStore(Path(db))
    with store:
        adopt = None if os.environ.get("ACTOR_PLAIN") else resolver(repo)
        mgr = scope_manager_for(store, resolver=adopt, faults=_killer())
        result = _run(mgr, command, target, rest)
        if isinstance(result, Success):
            print("RESULT Success")
        else:
            assert isinstance(result, Failure)
            failure = result.failure()
            print(f"RESULT {type(failure).__name__}")
            print(f"DETAIL {failure}")
        sys.stdout.flush()


if __name__ == "__main__":
    main(sys.argv[1:])
