"""Runtime benchmarks (issue 5): cycles, recovery scan, long-path loads.

- fork + seal + settle(select) cycles, memory sandbox, SQLite file;
- ``recover_scopes`` over 1,000 scopes and 100,000 records (the trace is built
  with one batch per scope, outside the timing);
- a scope's state in a new process (the runtime model folds every runtime
  record first), warm, and after one new record.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from bench.timing import once_seconds
from goatherd.application import (
    RecoverOptions,
    RecoveryStats,
    recover_scopes,
)
from goatherd.application.ports import SandboxSpec
from goatherd.domain import (
    TRUSTED_APPEND_CONTEXT,
    AppendBatch,
    AppendGroup,
    RecordDraft,
    ScopeCreated,
    ScopeForked,
)
from goatherd.infrastructure.bootstrap import runtime_context_for, scope_manager_for
from goatherd.infrastructure.sandbox.memory import MemorySandbox, MemorySandboxConfig
from goatherd.infrastructure.store import SQLiteTraceStore

SCOPES = 1_000
RECORDS = 100_000


def _cycles(path: Path, n: int) -> tuple[float, float]:
    with SQLiteTraceStore(path) as store:
        mgr = scope_manager_for(store)
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
        created = ScopeCreated(owner="root")
        store.append(
            TRUSTED_APPEND_CONTEXT,
            AppendBatch(
                "root:create:1", (AppendGroup("root", fact_drafts=(created.draft(),)),)
            ),
        )
        for i in range(SCOPES):
            fork = ScopeForked(child_owner=f"s{i}", parent_owner="root").draft()
            steps = tuple(
                RecordDraft("capture", "bench.step.v1", {"i": i, "j": j}, "step")
                for j in range(per_scope - 2)
            )
            groups = (
                AppendGroup("root", fact_drafts=(fork,)),
                AppendGroup(f"s{i}", fact_drafts=(fork, *steps)),
            )
            store.append(
                TRUSTED_APPEND_CONTEXT, AppendBatch(f"root:fork:s{i}:{i + 1}", groups)
            )


def _recover(path: Path) -> tuple[float, RecoveryStats, int, int]:
    with SQLiteTraceStore(path) as store:
        stats = RecoveryStats()
        start = time.perf_counter()
        mgr = recover_scopes(
            runtime_context_for(store),
            RecoverOptions(resolver=lambda *_: None, stats=stats),
        ).unwrap()
        seconds = time.perf_counter() - start
        return seconds, stats, store.max_position() + 1, len(mgr.all_scopes())


def _queries(path: Path) -> tuple[float, float, float]:
    """A new process's first answer, a warm answer, an answer after one record."""
    with SQLiteTraceStore(path) as store:
        cold = once_seconds(lambda: scope_manager_for(store).get("scope:s999"))
        mgr = scope_manager_for(store)
        warm = once_seconds(lambda: mgr.get("scope:s999"))
        mgr.append_fact("scope:s999", "bench.step.v1", "step", {"j": -1}).unwrap()
        one = once_seconds(lambda: mgr.get("scope:s999"))
        return cold, warm, one


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
        cold, warm, one = _queries(tree)
        print(
            f"a scope's state over {entries} path entries: first answer in a new"
            f" process {cold * 1000:.1f} ms (folds every runtime record), warm"
            f" {warm * 1000:.2f} ms, after one new record {one * 1000:.2f} ms"
            " (target <= 50 ms warm)"
        )
