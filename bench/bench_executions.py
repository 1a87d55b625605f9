"""Execution benchmarks (issue 12): what guarded appends cost a task run.

Every record of a run is decided on its execution aggregate and appended under
the path's head (ADR 0052): one head read per record, and a refold of the
parent's path after each child's frontier lands on it. Scenarios, each on a
fresh SQLite file:

- a leaf run (create + complete + frontier);
- the seed's ``MyTask`` (publish, spawn a leaf child, await it, complete);
- a run publishing 200 facts (the cached aggregate: no refold);
- a run spawning 20 children (a refold of the parent path per child).

Each line gives runs per second (wall) and CPU milliseconds per run (process
time, less sensitive to other load on a shared machine). Only public APIs are
used, so the same file measures an older checkout for a before/after ratio:
``PYTHONPATH=<checkout> python -m bench executions`` from a directory holding
only ``bench/``.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

from goatherd.application import Registry, TaskControl, start_task_sync
from goatherd.infrastructure.store import SQLiteTraceStore

REPEAT = 3


def _registry() -> Registry:
    registry = Registry()

    def my_task(c: TaskControl) -> dict[str, object]:
        c.publish("note", {"msg": "working"})
        child = c.spawn("LeafTask", {"n": 1}, registry)
        return {"child": c.await_terminal(child).execution_id}

    def publisher(c: TaskControl) -> dict[str, object]:
        for n in range(200):
            c.publish("step", {"n": n})
        return {"steps": 200}

    def spawner(c: TaskControl) -> dict[str, object]:
        for n in range(20):
            c.await_terminal(c.spawn("LeafTask", {"n": n}, registry))
        return {"children": 20}

    registry.register("MyTask", my_task)
    registry.register("LeafTask", lambda: {"leaf": True})
    registry.register("Publisher", publisher)
    registry.register("Spawner", spawner)
    return registry


def _measure(path: Path, task_ref: str, n: int) -> tuple[float, float]:
    """Return (runs/s, CPU ms per run) for ``n`` runs of ``task_ref``."""
    registry = _registry()
    with SQLiteTraceStore(path) as store:
        wall, cpu = time.perf_counter(), time.process_time()
        for i in range(n):
            start_task_sync(store, registry, task_ref, f"run:{i}", {"i": i}).unwrap()
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return n / wall, cpu * 1000 / n


def run() -> None:
    scenarios = [
        ("LeafTask", "leaf run (create + complete)", 200),
        ("MyTask", "MyTask (publish, spawn + await a leaf)", 100),
        ("Publisher", "run publishing 200 facts", 5),
        ("Spawner", "run spawning 20 children", 5),
    ]
    with tempfile.TemporaryDirectory() as tmp:
        for ref, label, n in scenarios:
            samples = [
                _measure(Path(tmp) / f"{ref}-{k}.db", ref, n) for k in range(REPEAT)
            ]
            rate = statistics.median(s[0] for s in samples)
            cpu = statistics.median(s[1] for s in samples)
            print(
                f"start_task_sync {label}, SQLite file: {rate:.1f} runs/s, "
                f"{cpu:.2f} CPU ms/run (median of {REPEAT} x {n} runs)",
                flush=True,
            )
