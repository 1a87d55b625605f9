"""Runtime benchmarks (issue 5): cycles, recovery scan, long-path loads.

- fork + seal + settle(select) cycles, memory sandbox, SQLite file;
- ``recover_scopes`` over 1,000 scopes and 100,000 records (the trace is built
  with one batch per scope, outside the timing);
- loading a scope whose path holds 10,000 records: cold without snapshots,
  cold from a snapshot, and a warm fast-forward of one new record.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from bench.timing import once_seconds
from goatherd.application import (
    RecoverOptions,
    RecoveryStats,
    ScopeManager,
    recover_scopes,
)
from goatherd.application.ports import SandboxSpec
from goatherd.domain import ScopeAggregate
from goatherd.infrastructure.eventstore import TraceEventStore
from goatherd.infrastructure.sandbox.memory import MemorySandbox, MemorySandboxConfig
from goatherd.infrastructure.store import SQLiteTraceStore

SCOPES = 1_000
RECORDS = 100_000
LONG_PATH = 10_000


def _cycles(path: Path, n: int) -> tuple[float, float]:
    with SQLiteTraceStore(path) as store:
        mgr = ScopeManager(TraceEventStore(store))
        main = MemorySandbox(MemorySandboxConfig(files={"a.txt": b"1\n"}))
        main.create(SandboxSpec())
        parent = mgr.create("agent:main", main).unwrap()
        start, cpu = time.perf_counter(), time.process_time()
        for i in range(n):
            child = mgr.fork(parent.id, f"try-{i}").unwrap()
            out = mgr.seal(child.id).unwrap()
            mgr.settle(out.id, "selected").unwrap()
        wall = time.perf_counter() - start
        return n / wall, n / (time.process_time() - cpu)


def _build_tree(path: Path) -> None:
    """1,000 forked scopes with 100,000 path entries in all, one batch per scope."""
    per_scope = RECORDS // SCOPES
    with SQLiteTraceStore(path) as store:
        events = TraceEventStore(store)
        for i in range(SCOPES):
            parent = events.load(ScopeAggregate, "root")
            child = events.load(ScopeAggregate, f"s{i}")
            parent.fork(child, baseline=None)
            for j in range(per_scope - 2):
                child.append_fact("bench.step.v1", "step", {"i": i, "j": j})
            events.save([parent, child], f"root:fork:s{i}:{i + 1}")


def _recover(path: Path) -> tuple[float, RecoveryStats, int, int]:
    with SQLiteTraceStore(path) as store:
        stats = RecoveryStats()
        start = time.perf_counter()
        events = TraceEventStore(store)
        mgr = recover_scopes(
            events, RecoverOptions(resolver=lambda *_: None, stats=stats)
        ).unwrap()
        seconds = time.perf_counter() - start
        return seconds, stats, store.max_position() + 1, len(mgr.all_scopes())


def _long_path(path: Path) -> tuple[float, float, float]:
    with SQLiteTraceStore(path) as store:
        events = TraceEventStore(store, snapshot_every=0)
        agg = events.load(ScopeAggregate, "long")
        for j in range(LONG_PATH):
            agg.append_fact("bench.step.v1", "step", {"j": j})
        events.save([agg], "long:fact:1")
        cold = once_seconds(
            lambda: TraceEventStore(store, snapshot_every=0).load(
                ScopeAggregate, "long"
            )
        )
        TraceEventStore(store).load(ScopeAggregate, "long")  # writes the snapshot
        snap = once_seconds(lambda: TraceEventStore(store).load(ScopeAggregate, "long"))
        warm_store = TraceEventStore(store)
        warm_store.load(ScopeAggregate, "long")
        tail = warm_store.load(ScopeAggregate, "long")
        tail.append_fact("bench.step.v1", "step", {"j": -1})
        warm_store.save([tail], "long:fact:2")
        warm = once_seconds(lambda: warm_store.load(ScopeAggregate, "long"))
        return cold, snap, warm


def run() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        rate, cpu_rate = _cycles(Path(tmp) / "cycles.db", 300)
        print(
            "fork + seal + settle(select), memory sandbox, SQLite file:"
            f" {rate:.0f} cycles/s (per CPU second: {cpu_rate:.0f}; target >= 300)"
        )
        tree = Path(tmp) / "tree.db"
        _build_tree(tree)
        seconds, stats, entries, active = _recover(tree)
        print(
            f"recover_scopes over {stats.fork_records} forks / {entries} path entries"
            f" ({active} scopes re-adopted): {seconds * 1000:.0f} ms"
            f" (scan {stats.scan_duration * 1000:.0f} ms; target <= 3000 ms)"
        )
        cold, snap, warm = _long_path(Path(tmp) / "long.db")
        print(
            f"load a scope with {LONG_PATH} records: cold fold {cold * 1000:.1f} ms,"
            f" cold from snapshot {snap * 1000:.1f} ms, warm fast-forward"
            f" {warm * 1000:.2f} ms (target <= 50 ms)"
        )
