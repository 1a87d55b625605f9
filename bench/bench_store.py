"""Trace store throughput and read latency (issue 3 targets).

Scenarios, each on a fresh file-backed SQLite store in a temp dir:

(a) 5,000 single-record appends to one owner       target >= 5,000 records/s
(b) 50 owners x 100 single-record appends, round-robin  target >= 5,000 records/s
(c) 100 batches of 100 records (one owner)          target >= 50,000 records/s
(d) ``read_owner_prefix`` of 5,000 records (median)  target <= 25 ms
(e) ``read_causal_closure`` over a 1,000-record chain (median)  target <= 10 ms

The same scenarios run with ``durability="full"`` (synchronous=FULL, the
documented power-loss setting) for the append rows, and against PostgreSQL when
``GOATHERD_BENCH_DB_URL`` or ``GOATHERD_TEST_DB_URL`` names a server (each
scenario on a freshly emptied database).

Environment knobs: ``GOATHERD_BENCH_SCALE`` (float, default 1) shrinks or grows
every record count, for quick profiling runs.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import NamedTuple

from goatherd.domain import (
    TRUSTED_APPEND_CONTEXT,
    TRUSTED_READ_CONTEXT,
    AppendBatch,
    AppendGroup,
    RecordDraft,
)
from goatherd.domain.store import TraceStore
from goatherd.infrastructure.store import SQLiteTraceStore, open_trace_store

THROUGH_ALL = 2**63 - 1
READ_REPEAT = 7

Opener = Callable[[], AbstractContextManager[TraceStore]]


class Timing(NamedTuple):
    """Wall-clock and process-CPU seconds of one measured run (or a median).

    ``spread`` holds the best and worst wall time of repeated reads.
    """

    wall: float
    cpu: float
    spread: tuple[float, float] | None = None


class Stopwatch:
    """Measure wall and CPU time together (CPU excludes waits for fsync, locks)."""

    def __init__(self) -> None:
        self._wall = time.perf_counter()
        self._cpu = time.process_time()

    def stop(self) -> Timing:
        return Timing(time.perf_counter() - self._wall, time.process_time() - self._cpu)


@dataclass(frozen=True)
class Row:
    scenario: str
    backend: str
    records: int
    timing: Timing
    target: str

    def line(self) -> str:
        wall, cpu, spread = self.timing
        rate = self.records / wall if wall else float("inf")
        extra = ""
        if spread is not None:
            extra = f" [best {spread[0] * 1e3:.1f}, worst {spread[1] * 1e3:.1f} ms]"
        return (
            f"{self.scenario:<42} {self.backend:<13} {self.records:>6} rec "
            f"{wall * 1e3:>8.1f} ms {rate:>9,.0f} rec/s (cpu {cpu * 1e3:>7.1f} ms)"
            f"   {self.target}{extra}"
        )


def _scale(n: int) -> int:
    factor = float(os.environ.get("GOATHERD_BENCH_SCALE", "1"))
    return max(1, int(n * factor))


def _payload(owner: str, n: int) -> dict[str, object]:
    return {
        "tool": "bash",
        "cmd": f"pytest -q tests/unit/test_{n % 97}.py",
        "owner": owner,
        "n": n,
        "ok": n % 7 != 0,
        "elapsed_ms": 100 + n % 1000,
    }


def _draft(owner: str, n: int, parents: tuple[str, ...] = ()) -> RecordDraft:
    return RecordDraft(
        mode="capture",
        schema_ref="bench.tool.bash.v1",
        payload=_payload(owner, n),
        kind_label="bash",
        caused_by_fact_ids=parents,
    )


def _single(
    intent: str, owner: str, n: int, parents: tuple[str, ...] = ()
) -> AppendBatch:
    group = AppendGroup(trace_owner_id=owner, fact_drafts=(_draft(owner, n, parents),))
    return AppendBatch(append_intent_id=intent, groups=(group,))


# ------------------------------------------------------------------ scenarios


def append_one_owner(store: TraceStore, count: int) -> Timing:
    watch = Stopwatch()
    for n in range(count):
        store.append(TRUSTED_APPEND_CONTEXT, _single(f"bench-a-{n}", "agent:a", n))
    return watch.stop()


def append_round_robin(store: TraceStore, owners: int, per_owner: int) -> Timing:
    names = [f"agent:b{k}" for k in range(owners)]
    watch = Stopwatch()
    for n in range(per_owner):
        for owner in names:
            store.append(
                TRUSTED_APPEND_CONTEXT, _single(f"bench-b-{owner}-{n}", owner, n)
            )
    return watch.stop()


def append_batches(store: TraceStore, batches: int, size: int) -> Timing:
    watch = Stopwatch()
    for b in range(batches):
        drafts = tuple(_draft("agent:c", b * size + i) for i in range(size))
        group = AppendGroup(trace_owner_id="agent:c", fact_drafts=drafts)
        store.append(
            TRUSTED_APPEND_CONTEXT,
            AppendBatch(append_intent_id=f"bench-c-{b}", groups=(group,)),
        )
    return watch.stop()


def fill_owner(store: TraceStore, owner: str, count: int) -> None:
    size = 500
    for b in range(0, count, size):
        drafts = tuple(_draft(owner, n) for n in range(b, min(count, b + size)))
        group = AppendGroup(trace_owner_id=owner, fact_drafts=drafts)
        store.append(
            TRUSTED_APPEND_CONTEXT,
            AppendBatch(append_intent_id=f"fill-{owner}-{b}", groups=(group,)),
        )


def fill_chain(store: TraceStore, owner: str, count: int) -> str:
    """Append a causal chain (each record cites the previous); return its tip."""
    size = 250
    tip: str | None = None
    for b in range(0, count, size):
        drafts = []
        for n in range(b, min(count, b + size)):
            local = f"r{n}"
            if n == b:
                parents: tuple[str, ...] = (tip,) if tip else ()
                drafts.append(
                    RecordDraft(
                        mode="capture",
                        schema_ref="bench.chain.v1",
                        payload=_payload(owner, n),
                        append_local_id=local,
                        caused_by_fact_ids=parents,
                    )
                )
            else:
                drafts.append(
                    RecordDraft(
                        mode="capture",
                        schema_ref="bench.chain.v1",
                        payload=_payload(owner, n),
                        append_local_id=local,
                        caused_by_local_refs=(f"r{n - 1}",),
                    )
                )
        group = AppendGroup(trace_owner_id=owner, fact_drafts=tuple(drafts))
        receipt = store.append(
            TRUSTED_APPEND_CONTEXT,
            AppendBatch(append_intent_id=f"chain-{owner}-{b}", groups=(group,)),
        )
        tip = receipt.fact_ids[-1]
    assert tip is not None
    return tip


def median_read(read: Callable[[], object]) -> Timing:
    """Return the median wall and median CPU time of ``READ_REPEAT`` warm reads."""
    read()  # warm caches the way a long-lived process has them
    samples = []
    for _ in range(READ_REPEAT):
        watch = Stopwatch()
        read()
        samples.append(watch.stop())
    walls = [t.wall for t in samples]
    return Timing(
        statistics.median(walls),
        statistics.median(t.cpu for t in samples),
        (min(walls), max(walls)),
    )


def read_prefix(store: TraceStore, count: int) -> Timing:
    fill_owner(store, "agent:d", count)

    def read() -> None:
        got = store.read_owner_prefix(TRUSTED_READ_CONTEXT, "agent:d", THROUGH_ALL)
        assert len(got.owner_paths["agent:d"]) == count

    return median_read(read)


def read_closure(store: TraceStore, count: int) -> Timing:
    tip = fill_chain(store, "agent:e", count)

    def read() -> None:
        got = store.read_causal_closure(TRUSTED_READ_CONTEXT, (tip,))
        assert len(got.facts_by_id) == count

    return median_read(read)


# ------------------------------------------------------------------ backends


@contextmanager
def sqlite_store(durability: str = "normal") -> Iterator[TraceStore]:
    with tempfile.TemporaryDirectory(prefix="goatherd-bench-") as tmp:
        store = SQLiteTraceStore(Path(tmp) / "trace.sqlite", durability=durability)
        try:
            yield store
        finally:
            store.close()


@contextmanager
def postgres_store(url: str) -> Iterator[TraceStore]:
    _reset_postgres(url)
    store = open_trace_store(url)
    try:
        yield store
    finally:
        store.close()


def _reset_postgres(url: str) -> None:
    """Empty the benchmark database: each scenario starts from nothing."""
    import sqlalchemy as sa

    engine = sa.create_engine(url)
    try:
        with engine.begin() as conn:
            conn.execute(sa.text("DROP SCHEMA public CASCADE"))
            conn.execute(sa.text("CREATE SCHEMA public"))
    finally:
        engine.dispose()


def sqlite_settings() -> str:
    """Report the pragmas a store's own connection runs with, per durability."""
    import sqlite3

    lines = []
    with tempfile.TemporaryDirectory(prefix="goatherd-bench-") as tmp:
        for durability in ("normal", "full"):
            store = SQLiteTraceStore(
                Path(tmp) / f"{durability}.sqlite", durability=durability
            )
            try:
                with store.engine.connect() as conn:
                    journal = conn.exec_driver_sql("PRAGMA journal_mode").scalar()
                    sync = conn.exec_driver_sql("PRAGMA synchronous").scalar()
                    conn.rollback()
            finally:
                store.close()
            level = _SYNCHRONOUS.get(int(str(sync)), str(sync))
            lines.append(
                f"durability={durability!r}: journal_mode={journal}, "
                f"synchronous={level}"
            )
    return f"SQLite {sqlite3.sqlite_version}: " + "; ".join(lines)


_SYNCHRONOUS = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}


# ------------------------------------------------------------------ runner


def scenarios(open_store: Opener, backend: str) -> Iterator[Row]:
    n_a, owners, per_owner = _scale(5000), 50, _scale(100)
    batches, size = _scale(100), 100
    n_d, n_e = _scale(5000), _scale(1000)
    with open_store() as store:
        yield Row(
            "(a) append 1/batch, one owner",
            backend,
            n_a,
            append_one_owner(store, n_a),
            ">= 5,000 rec/s",
        )
    with open_store() as store:
        yield Row(
            f"(b) append 1/batch, {owners} owners round-robin",
            backend,
            owners * per_owner,
            append_round_robin(store, owners, per_owner),
            ">= 5,000 rec/s",
        )
    with open_store() as store:
        yield Row(
            f"(c) append {size}/batch x {batches}",
            backend,
            batches * size,
            append_batches(store, batches, size),
            ">= 50,000 rec/s",
        )
    with open_store() as store:
        yield Row(
            "(d) read_owner_prefix (median)",
            backend,
            n_d,
            read_prefix(store, n_d),
            "<= 25 ms",
        )
    with open_store() as store:
        yield Row(
            "(e) read_causal_closure chain (median)",
            backend,
            n_e,
            read_closure(store, n_e),
            "<= 10 ms",
        )


def run() -> None:
    print(f"load average at start: {os.getloadavg()}", flush=True)
    print(sqlite_settings(), flush=True)
    for durability in ("normal", "full"):
        backend = f"sqlite/{durability}"
        for row in scenarios(partial(sqlite_store, durability), backend):
            print(row.line(), flush=True)
    url = os.environ.get("GOATHERD_BENCH_DB_URL") or os.environ.get(
        "GOATHERD_TEST_DB_URL"
    )
    if not url:
        print("PostgreSQL: skipped (set GOATHERD_BENCH_DB_URL or GOATHERD_TEST_DB_URL)")
        return
    for row in scenarios(partial(postgres_store, url), "postgresql"):
        print(row.line(), flush=True)
    print(f"load average at end: {os.getloadavg()}", flush=True)
