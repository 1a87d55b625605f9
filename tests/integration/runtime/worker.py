"""A separate process settling one output (run as ``python -m ...worker``).

``worker.py DB REPO settle OUTPUT_ID SEQ [--hang-after-effect MARKER]
[--go FILE] [--threads N]`` recovers the trace (the root sandbox is the
repository in place, isolated children their recorded worktrees), settles
``OUTPUT_ID`` with ``selected`` and prints one ``RESULT <outcome>`` line per
thread. With ``--hang-after-effect`` the process writes MARKER right after the
workspace effect and sleeps (the test SIGKILLs it there).
"""

from __future__ import annotations

import argparse
import gc
import threading
import time
from pathlib import Path

from returns.result import Success

from goatherd.application import RecoverOptions, ScopeManager, recover_scopes
from goatherd.infrastructure.bootstrap import runtime_context_for
from goatherd.infrastructure.sandbox import new_local_git_sandbox, new_worktree_sandbox
from goatherd.infrastructure.store import SQLiteTraceStore


def resolver(repo: str):
    def resolve(scope_id: str, backend: str, path: str):
        if not path:
            return new_local_git_sandbox(repo)
        return new_worktree_sandbox(repo, path)

    return resolve


def recover(store: SQLiteTraceStore, repo: str, root: str) -> ScopeManager:
    mgr = recover_scopes(
        runtime_context_for(store), RecoverOptions(resolver=resolver(repo))
    ).unwrap()
    if mgr.get(f"scope:{root}") is None:
        mgr.create(root, new_local_git_sandbox(repo)).unwrap()
    return mgr


def outcome(result: object) -> str:
    if isinstance(result, Success):
        return "Success"
    return type(result.failure()).__name__  # type: ignore[attr-defined]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("db")
    parser.add_argument("repo")
    parser.add_argument("output_id")
    parser.add_argument("seq", type=int)
    parser.add_argument("--hang-after-effect")
    parser.add_argument("--go")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    if args.go:
        while not Path(args.go).exists():
            time.sleep(0.005)
    lines: list[str] = []

    def settle(index: int) -> None:
        with SQLiteTraceStore(args.db) as store:
            mgr = recover(store, args.repo, "agent:main")
            if args.hang_after_effect:

                def hang(boundary: str, intent: str) -> None:
                    if boundary == "after-effect":
                        # Written whole, then renamed: the test reads the
                        # intent as soon as the name exists.
                        marker = Path(args.hang_after_effect)
                        partial = marker.with_name(marker.name + ".partial")
                        partial.write_text(intent)
                        partial.replace(marker)
                        time.sleep(120)

                mgr.context.faults = hang
            result = mgr.settle(args.output_id, "selected", seq=args.seq + index)
            lines.append(f"RESULT {outcome(result)}")

    threads = [threading.Thread(target=settle, args=(i,)) for i in range(args.threads)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    print("\n".join(lines), flush=True)


if __name__ == "__main__":
    main()
    gc.freeze()  # the process ends next: no collector walk over the imports
