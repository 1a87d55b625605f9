"""One racing process (``python -m tests.integration.runtime.racer ...``).

``racer.py DB REPO GO settle OUTPUT_ID ACTION SEQ`` or
``racer.py DB REPO GO restore CHECKPOINT_ID SEQ``: open the trace with a
manager whose resolver re-adopts the repository (roots) and the recorded
worktrees (isolated children), wait until the file GO exists (every racer
starts together), run the command and print ``RESULT <outcome>`` (the
failure's class name, or ``Success``) and, for a restore, ``SNAPSHOT <hex>``.

With the environment variable ``RACER_HOLD=DIR`` set, the racer stops right
before it commits its first claim (every check before the claim has passed),
touches ``DIR/<pid>`` and waits for ``DIR/release``: the test releases all of
them at once, so only the trace can tell the claims apart.
"""

from __future__ import annotations

import gc
import os
import sys
import time
from pathlib import Path

from returns.result import Success

from goatherd.infrastructure.bootstrap import scope_manager_for
from goatherd.infrastructure.sandbox import new_local_git_sandbox, new_worktree_sandbox
from goatherd.infrastructure.store import SQLiteTraceStore, open_trace_store


def resolver(repo: str):
    def resolve(scope_id: str, backend: str, path: str):
        if not path:
            return new_local_git_sandbox(repo)
        return new_worktree_sandbox(repo, path)

    return resolve


def _hold():
    hold = os.environ.get("RACER_HOLD")
    if not hold:
        return None
    held: list[bool] = []

    def hook(boundary: str, intent: str) -> None:
        if boundary != "before-commit" or ":claim" not in intent or held:
            return
        held.append(True)
        partial = Path(hold, f"{os.getpid()}.partial")
        partial.write_text(intent)  # whole before its name appears
        partial.replace(Path(hold, str(os.getpid())))
        while not Path(hold, "release").exists():
            time.sleep(0.002)

    return hook


def outcome(result: object) -> str:
    if isinstance(result, Success):
        return "Success"
    return type(result.failure()).__name__  # type: ignore[attr-defined]


def main(argv: list[str]) -> None:
    db, repo, go, command, target, *rest = argv
    store = open_trace_store(db) if "://" in db else SQLiteTraceStore(Path(db))
    with store:
        mgr = scope_manager_for(store, resolver=resolver(repo), faults=_hold())
        mgr.get("scope:agent:main")  # fold the trace before the start line
        while not Path(go).exists():
            time.sleep(0.002)
        if command == "settle":
            action, seq = rest
            print(f"RESULT {outcome(mgr.settle(target, action, seq=int(seq)))}")
        else:
            (seq,) = rest
            result = mgr.restore_checkpoint(target, seq=int(seq))
            print(f"RESULT {outcome(result)}")
            if isinstance(result, Success):
                print(f"SNAPSHOT {result.unwrap().hex()}")
        sys.stdout.flush()


if __name__ == "__main__":
    main(sys.argv[1:])
    gc.freeze()  # the process ends next: no collector walk over the imports
