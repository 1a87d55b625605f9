"""Runtime benchmarks: fork + seal + settle(select) cycles and recovery scans."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from goatherd.application import (
    RecoverOptions,
    RecoveryStats,
    ScopeManager,
    recover_scopes,
)
from goatherd.application.ports import SandboxSpec
from goatherd.infrastructure.eventstore import TraceEventStore
from goatherd.infrastructure.sandbox.memory import MemorySandbox, MemorySandboxConfig
from goatherd.infrastructure.store import SQLiteTraceStore


def _cycles(path: Path, n: int) -> float:
    with SQLiteTraceStore(path) as store:
        mgr = ScopeManager(TraceEventStore(store))
        main = MemorySandbox(MemorySandboxConfig(files={"a.txt": b"1\n"}))
        main.create(SandboxSpec())
        parent = mgr.create("agent:main", main).unwrap()
        start = time.perf_counter()
        for i in range(n):
            child = mgr.fork(parent.id, f"try-{i}").unwrap()
            out = mgr.seal(child.id).unwrap()
            mgr.settle(out.id, "selected").unwrap()
        return n / (time.perf_counter() - start)


def _recover(path: Path) -> tuple[float, RecoveryStats, int]:
    with SQLiteTraceStore(path) as store:
        stats = RecoveryStats()
        start = time.perf_counter()
        recover_scopes(TraceEventStore(store), RecoverOptions(stats=stats)).unwrap()
        return time.perf_counter() - start, stats, store.max_position() + 1


def run() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.db"
        rate = _cycles(path, 300)
        print(
            "fork + seal + settle(select), memory sandbox, SQLite file:"
            f" {rate:.0f} cycles/s (target >= 300)"
        )
        seconds, stats, entries = _recover(path)
        print(
            f"recover_scopes over {stats.fork_records} forks / {entries} path entries:"
            f" {seconds * 1000:.0f} ms (scan {stats.scan_duration * 1000:.0f} ms)"
        )
