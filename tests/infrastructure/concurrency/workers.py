"""Process bodies for the concurrency tests (imported by spawned children).

Each function opens its OWN store from a URL (a real second connection, as a
second process on the same trace would), waits on a barrier so the processes
really overlap, and reports through a multiprocessing queue: ``("ok", name,
result)`` or ``("error", name, traceback text)``.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable
from typing import Any

from goatherd.domain import (
    TRUSTED_APPEND_CONTEXT,
    AppendBatch,
    AppendGroup,
    OrdinalConflictError,
    RecordDraft,
)
from goatherd.infrastructure.store import open_trace_store

SHARED_OWNER = "agent:shared"
SCHEMA = "test.concurrency.step.v1"
RACE_WINDOW_SECONDS = 0.002
WORK_BETWEEN_APPENDS_SECONDS = 0.001


def own_owner(writer: str) -> str:
    return f"agent:{writer}"


def step_batch(writer: str, n: int) -> AppendBatch:
    """One batch of two groups: a record on the shared path and one on the writer's."""

    def draft(path: str) -> RecordDraft:
        return RecordDraft(
            mode="capture",
            schema_ref=SCHEMA,
            payload={"writer": writer, "n": n, "path": path},
            kind_label="step",
        )

    groups = tuple(
        AppendGroup(trace_owner_id=path, fact_drafts=(draft(path),))
        for path in (SHARED_OWNER, own_owner(writer))
    )
    return AppendBatch(append_intent_id=f"conc:{writer}:{n}", groups=groups)


def _report(results: Any, name: str, body: Callable[[], object]) -> None:
    try:
        results.put(("ok", name, body()))
    except BaseException:
        results.put(("error", name, traceback.format_exc()))


def writer(url: str, name: str, count: int, barrier: Any, results: Any) -> None:
    """Append ``count`` two-group batches; report each receipt's essentials."""

    def body() -> list[tuple[tuple[str, ...], tuple[str, ...], dict[str, Any]]]:
        store = open_trace_store(url)
        try:
            barrier.wait(timeout=60)
            receipts = []
            for n in range(count):
                receipt = store.append(TRUSTED_APPEND_CONTEXT, step_batch(name, n))
                # An agent works between appends. Without any pause SQLite's busy
                # handler (sleep-and-retry) lets one writer starve the other,
                # and the two would not really run side by side.
                time.sleep(WORK_BETWEEN_APPENDS_SECONDS)
                receipts.append(
                    (
                        receipt.fact_ids,
                        receipt.commit_receipts,
                        {k: tuple(v) for k, v in receipt.owner_ordinal_ranges.items()},
                    )
                )
            return receipts
        finally:
            store.close()

    _report(results, name, body)


def counter(url: str, name: str, count: int, barrier: Any, results: Any) -> None:
    """Append ``count`` records to the shared path with ``expected_heads``.

    Each append reads the head, then appends expecting exactly that head; on
    ``OrdinalConflictError`` it re-reads and retries (what an aggregate does).
    Reports the ordinal each record got and how many conflicts it saw.
    """

    def body() -> tuple[list[int], int]:
        store = open_trace_store(url)
        try:
            barrier.wait(timeout=60)
            ordinals: list[int] = []
            conflicts = 0
            for n in range(count):
                while True:
                    head = store.head(SHARED_OWNER)
                    # widen the read-decide-append window the way real work does
                    time.sleep(RACE_WINDOW_SECONDS)
                    batch = AppendBatch(
                        append_intent_id=f"occ:{name}:{n}:{head}",
                        groups=(
                            AppendGroup(
                                trace_owner_id=SHARED_OWNER,
                                fact_drafts=(
                                    RecordDraft(
                                        mode="declaration",
                                        schema_ref=SCHEMA,
                                        payload={"writer": name, "n": n},
                                    ),
                                ),
                            ),
                        ),
                    )
                    try:
                        receipt = store.append(
                            TRUSTED_APPEND_CONTEXT,
                            batch,
                            expected_heads={SHARED_OWNER: head},
                        )
                    except OrdinalConflictError:
                        conflicts += 1
                        continue
                    ordinals.append(receipt.owner_ordinal_ranges[SHARED_OWNER][0])
                    break
            return ordinals, conflicts
        finally:
            store.close()

    _report(results, name, body)


def follower(url: str, name: str, barrier: Any, stop: Any, results: Any) -> None:
    """Poll ``read_log`` from the last seen position until ``stop`` is set.

    Reports every non-empty read as the tuple of positions it returned, then
    one final read after the writers finished.
    """

    def body() -> list[tuple[int, ...]]:
        store = open_trace_store(url)
        try:
            barrier.wait(timeout=60)
            reads: list[tuple[int, ...]] = []
            last = -1
            while True:
                finished = stop.is_set()
                entries = store.read_log(after=last, limit=1000)
                if entries:
                    reads.append(tuple(e.position for e in entries))
                    last = entries[-1].position
                elif finished:
                    return reads
                else:
                    time.sleep(0.0005)
        finally:
            store.close()

    _report(results, name, body)
