"""Runtime benchmarks: cycles against the pre-redesign code, recovery, loads.

- fork + seal + settle(select) cycles, memory sandbox, SQLite file, run in
  fresh processes on this checkout and on the code before the registry
  redesign (commit ``BASELINE_COMMIT``, exported with ``git archive``, or the
  checkout ``$GOATHERD_BENCH_BASELINE`` names), in interleaved rounds; the
  medians are compared and a PASS/MISS line is printed per target;
- ``recover_scopes`` over 1,000 scopes and 100,000 records (the trace is built
  with one batch per scope, outside the timing);
- a scope's state in a new process (the runtime model folds every runtime
  record first), warm, and after one new record.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from bench.timing import once_seconds
from goatherd.application import (
    RecoverOptions,
    RecoveryStats,
    recover_scopes,
)
from goatherd.domain import (
    TRUSTED_APPEND_CONTEXT,
    AppendBatch,
    AppendGroup,
    RecordDraft,
    ScopeCreated,
    ScopeForked,
)
from goatherd.infrastructure.bootstrap import runtime_context_for, scope_manager_for
from goatherd.infrastructure.store import SQLiteTraceStore

SCOPES = 1_000
RECORDS = 100_000

BASELINE_COMMIT = "a1ccf92cef5b529fa55972eee6541f7131cff0fc"
"""The last commit before the registry redesign (the runtime core over the trace)."""
CYCLES = 300
ROUNDS = 5
TARGET_PER_CPU_SECOND = 350
TARGET_RATIO = 2.0
_ROOT = Path(__file__).resolve().parent.parent

# Run by a fresh interpreter with the checkout first on sys.path; it speaks
# both APIs (the manager over an event store before the redesign, the
# composition root after it) and prints {"wall": ..., "cpu": ...} rates.
_CYCLE_SCRIPT = r"""
import json, sys, tempfile, time
from pathlib import Path
sys.path.insert(0, sys.argv[1])
import goatherd
assert goatherd.__file__.startswith(sys.argv[1]), goatherd.__file__
from goatherd.application.ports import SandboxSpec
from goatherd.infrastructure.sandbox.memory import MemorySandbox, MemorySandboxConfig
from goatherd.infrastructure.store import SQLiteTraceStore
try:
    from goatherd.infrastructure.bootstrap import scope_manager_for
except ImportError:
    from goatherd.application import ScopeManager
    from goatherd.infrastructure.eventstore import TraceEventStore
    def scope_manager_for(store):
        return ScopeManager(TraceEventStore(store))
n = int(sys.argv[2])
with tempfile.TemporaryDirectory() as tmp:
    with SQLiteTraceStore(Path(tmp) / "cycles.db") as store:
        mgr = scope_manager_for(store)
        main = MemorySandbox(MemorySandboxConfig(files={"a.txt": b"1\n"}))
        main.create(SandboxSpec())
        parent = mgr.create("agent:main", main).unwrap()
        def cycle(name):
            child = mgr.fork(parent.id, name).unwrap()
            out = mgr.seal(child.id).unwrap()
            mgr.settle(out.id, "selected").unwrap()
        for i in range(20):
            cycle(f"warm-{i}")
        start, cpu = time.perf_counter(), time.process_time()
        for i in range(n):
            cycle(f"try-{i}")
        wall = time.perf_counter() - start
        print(json.dumps({"wall": n / wall, "cpu": n / (time.process_time() - cpu)}))
"""


def _cycles_in(checkout: Path, n: int) -> tuple[float, float]:
    """Run ``n`` cycles of ``checkout``'s code in a fresh process: (wall, CPU) rates."""
    out = subprocess.run(
        [sys.executable, "-c", _CYCLE_SCRIPT, str(checkout), str(n)],
        capture_output=True,
        text=True,
        check=True,
        cwd=checkout,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )
    rates = json.loads(out.stdout.strip().splitlines()[-1])
    return float(rates["wall"]), float(rates["cpu"])


@contextmanager
def _baseline() -> Iterator[Path | str]:
    """Yield the baseline checkout, or why there is none."""
    named = os.environ.get("GOATHERD_BENCH_BASELINE")
    if named:
        yield Path(named).resolve()
        return
    with tempfile.TemporaryDirectory() as tmp:
        archive = subprocess.run(
            ["git", "-C", str(_ROOT), "archive", BASELINE_COMMIT, "goatherd"],
            capture_output=True,
            check=False,
        )
        if archive.returncode != 0:
            yield (
                f"git archive {BASELINE_COMMIT[:7]} failed: "
                + (
                    archive.stderr.decode(errors="replace").strip().splitlines()
                    or ["?"]
                )[-1]
            )
            return
        subprocess.run(["tar", "-x", "-C", tmp], input=archive.stdout, check=True)
        yield Path(tmp)


def _verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def _compare_cycles() -> None:
    """Interleaved rounds of fresh processes, this checkout and the baseline."""
    with _baseline() as baseline:
        ours: list[tuple[float, float]] = []
        theirs: list[tuple[float, float]] = []
        for round_ in range(ROUNDS):
            order = [True, False] if round_ % 2 == 0 else [False, True]
            for mine in order:
                if mine:
                    ours.append(_cycles_in(_ROOT, CYCLES))
                elif isinstance(baseline, Path):
                    theirs.append(_cycles_in(baseline, CYCLES))
        load = os.getloadavg()[0]
    wall, cpu = (statistics.median(r[i] for r in ours) for i in (0, 1))
    print(
        "fork + seal + settle(select), memory sandbox, SQLite file; medians of"
        f" {ROUNDS} interleaved rounds of fresh processes, {CYCLES} cycles each"
        f" (load average {load:.1f} at the end):"
    )
    print(f"  this checkout: {wall:.0f} cycles/s (per CPU second: {cpu:.0f})")
    ratio = 0.0
    if isinstance(baseline, Path):
        old_wall, old_cpu = (statistics.median(r[i] for r in theirs) for i in (0, 1))
        ratio = cpu / old_cpu
        print(
            f"  baseline {BASELINE_COMMIT[:7]} (before the registry redesign):"
            f" {old_wall:.0f} cycles/s (per CPU second: {old_cpu:.0f})"
        )
    else:
        print(f"  baseline: none ({baseline})")
    print(
        f"{_verdict(cpu >= TARGET_PER_CPU_SECOND)} cycles per CPU second"
        f" >= {TARGET_PER_CPU_SECOND}: {cpu:.0f}"
    )
    print(
        f"{_verdict(ratio >= TARGET_RATIO)} cycles per CPU second"
        f" >= {TARGET_RATIO:.0f}x the baseline in the same run: {ratio:.2f}x"
    )


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
        _compare_cycles()
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
