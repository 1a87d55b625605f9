"""A PostgreSQL writer that dies between drawing its numbers and COMMIT.

``python -m tests.faults.pg_hole_writer URL kill POINT OWNER``: appends two
records on ``OWNER``, then SIGKILLs itself at ``POINT`` (one of
``postgres.FAULT_POINTS``) inside its third write (an append, or a ledger
row for ``side-allocated``).

``python -m tests.faults.pg_hole_writer URL loop OWNER``: appends until it is
killed, pausing up to 3 ms at every fault point so that a kill from outside
(SIGKILL, or ``pg_terminate_backend`` of its backend) often lands between
allocation and COMMIT; an append that loses its connection is given up and
the next one goes on. Prints one line per committed append.
"""

from __future__ import annotations

import os
import random
import signal
import sys
import time

from goatherd.domain import (
    TRUSTED_APPEND_CONTEXT,
    AppendBatch,
    AppendGroup,
    RecordDraft,
    StoreUnavailableError,
)
from goatherd.infrastructure.store import SqlAlchemyTraceStore, open_trace_store
from goatherd.infrastructure.store import postgres as pg


def append(store: SqlAlchemyTraceStore, owner: str, n: int, records: int = 2) -> None:
    drafts = tuple(
        RecordDraft("capture", "app.step.v1", {"n": n, "i": i}) for i in range(records)
    )
    batch = AppendBatch(f"{owner}:{n}", (AppendGroup(owner, fact_drafts=drafts),))
    store.append(TRUSTED_APPEND_CONTEXT, batch)


def kill_at(url: str, point: str, owner: str) -> None:
    with open_trace_store(url) as store:
        append(store, owner, 0)
        append(store, owner, 1)

        def die(reached: str) -> None:
            if reached == point:
                os.kill(os.getpid(), signal.SIGKILL)

        pg.fault_hook = die
        if point == "side-allocated":
            store.record_completed_materialization(f"{owner}:mat", "ab" * 32, "{}")
        else:
            append(store, owner, 2)
    raise SystemExit(f"never reached {point}")


def loop(url: str, owner: str) -> None:
    rng = random.Random(os.getpid())

    def pause(_: str) -> None:
        time.sleep(rng.random() * 0.003)

    with open_trace_store(url) as store:
        pg.fault_hook = pause
        n = 0
        while True:
            n += 1
            try:
                append(store, owner, n, records=rng.randint(1, 3))
            except StoreUnavailableError:
                continue
            print(n, flush=True)


def main(argv: list[str]) -> None:
    url, mode = argv[0], argv[1]
    if mode == "kill":
        kill_at(url, argv[2], argv[3])
    else:
        loop(url, argv[2])


if __name__ == "__main__":
    main(sys.argv[1:])
