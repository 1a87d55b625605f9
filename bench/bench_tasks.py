"""Task runtime and materialize benchmarks (issue 7), SQLite file store.

- ``start_task_sync`` of a leaf task (create + complete), and of the seed's
  ``MyTask`` (publish, spawn a leaf child, await it, complete): runs per second
  and each run's terminal projection (``wait``);
- a same-run-id retry of a finished run (idempotent, nothing appended);
- ``materialize`` of one declaration per request through the echo substrate
  and through the KV substrate (its own SQLite world file), and a same-intent
  replay served from the completed-intent ledger;
- one ``materialize`` request of 500 declarations (echo).

Declarations are appended outside the timing. Every scenario uses a fresh
store file in a temporary directory.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from goatherd.application import (
    EchoSubstrate,
    Registry,
    Substrate,
    SubstrateRegistry,
    TaskControl,
    materialize,
    start_task_sync,
)
from goatherd.domain import (
    AppendBatch,
    AppendContext,
    AppendGroup,
    MaterializationRequest,
    RecordDraft,
    RetainedContextDraft,
)
from goatherd.infrastructure.store import SQLiteTraceStore
from goatherd.infrastructure.substrates import SQLiteKVSubstrate

RUNS = 300
MATERIALIZATIONS = 500
CONTEXT = AppendContext("bench:host", ("trusted:internal",), trust_mode="internal")
MATERIALIZE = CONTEXT.to_operation_context("materialize")
OWNER = "agent:bench"


def _registry() -> Registry:
    registry = Registry()

    def my_task(c: TaskControl) -> dict[str, object]:
        c.publish("note", {"msg": "working"})
        child = c.spawn("LeafTask", {"n": 1}, registry)
        return {"child": c.await_terminal(child).execution_id}

    registry.register("MyTask", my_task)
    registry.register("LeafTask", lambda: {"leaf": True})
    return registry


def _task_runs(path: Path, task_ref: str, n: int) -> tuple[float, float]:
    """Return (runs/s, retries/s) for ``n`` runs of ``task_ref``."""
    registry = _registry()
    with SQLiteTraceStore(path) as store:
        start = time.perf_counter()
        for i in range(n):
            run = start_task_sync(store, registry, task_ref, f"run:{i}", {"i": i})
            run.unwrap().wait()
        runs = n / (time.perf_counter() - start)
        before = store.max_position()
        start = time.perf_counter()
        for i in range(n):
            start_task_sync(store, registry, task_ref, f"run:{i}", {"i": i}).unwrap()
        retries = n / (time.perf_counter() - start)
        assert store.max_position() == before, "a retry appended"
    return runs, retries


def _declare(
    store: SQLiteTraceStore, ref: str, drafts: list[RecordDraft], owners: list[str]
) -> list[str]:
    """Append ``drafts[i]`` on ``owners[i]`` (one batch); return their ids."""
    context = RetainedContextDraft(substrate_ref=ref)
    groups = [
        AppendGroup(owner, context, (), (draft,))
        for owner, draft in zip(owners, drafts, strict=True)
    ]
    batch = AppendBatch(f"declare:{ref}", tuple(groups))
    return list(store.append(CONTEXT, batch).fact_ids)


def _materializations(
    path: Path,
    substrate: Substrate,
    draft: Callable[[int], RecordDraft],
    n: int,
    *,
    one_path: bool = True,
) -> tuple[float, float]:
    """Return (materializations/s, replays/s), one declaration per request.

    ``one_path``: every declaration on one owner path (else one owner each).
    """
    registry = SubstrateRegistry()
    registry.register(substrate)
    owners = [OWNER if one_path else f"{OWNER}:{i}" for i in range(n)]
    with SQLiteTraceStore(path) as store:
        drafts = [draft(i) for i in range(n)]
        ids = _declare(store, substrate.substrate_ref, drafts, owners)
        requests = [
            MaterializationRequest(f"apply:{i}", owner, (rid,))
            for i, (owner, rid) in enumerate(zip(owners, ids, strict=True))
        ]
        start = time.perf_counter()
        for request in requests:
            materialize(store, MATERIALIZE, request, registry).unwrap()
        applied = n / (time.perf_counter() - start)
        before = store.max_position()
        start = time.perf_counter()
        for request in requests:
            materialize(store, MATERIALIZE, request, registry).unwrap()
        replays = n / (time.perf_counter() - start)
        assert store.max_position() == before, "a replay appended"
    return applied, replays


def _note(i: int) -> RecordDraft:
    return RecordDraft("declaration", "note.write.v1", {"text": f"note {i}"}, "note")


def _put(i: int) -> RecordDraft:
    payload = {"key": f"k{i % 50}", "value": {"i": i}}
    return RecordDraft("declaration", "shepherd2.kv.put.v1", payload, "put")


def run() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        leaf, leaf_retry = _task_runs(root / "leaf.db", "LeafTask", RUNS)
        print(
            f"start_task_sync LeafTask (create + complete), SQLite file: "
            f"{leaf:.0f} runs/s; finished-run retry {leaf_retry:.0f}/s"
        )
        tree, tree_retry = _task_runs(root / "tree.db", "MyTask", RUNS)
        print(
            f"start_task_sync MyTask (publish, spawn + await a leaf child), "
            f"SQLite file: {tree:.0f} runs/s; finished-run retry {tree_retry:.0f}/s"
        )
        echo = EchoSubstrate("echo.v1", ["note.write.v1"])
        applied, replays = _materializations(
            root / "echo.db", echo, _note, MATERIALIZATIONS
        )
        print(
            f"materialize, echo substrate, 1 declaration/request, "
            f"{MATERIALIZATIONS} on one owner path, SQLite file: "
            f"{applied:.0f}/s; same-intent replay {replays:.0f}/s"
        )
        applied, replays = _materializations(
            root / "echo-owners.db", echo, _note, MATERIALIZATIONS, one_path=False
        )
        print(
            f"materialize, echo substrate, 1 declaration/request, "
            f"one owner path each, SQLite file: "
            f"{applied:.0f}/s; same-intent replay {replays:.0f}/s"
        )
        with SQLiteKVSubstrate(root / "world.db") as kv:
            applied, replays = _materializations(
                root / "kv.db", kv, _put, MATERIALIZATIONS
            )
        print(
            f"materialize, KV substrate (own SQLite world file), "
            f"1 put/request, one owner path, SQLite file: {applied:.0f}/s; "
            f"same-intent replay {replays:.0f}/s"
        )
        batch = statistics.median(_batch(root, i) for i in range(3))
        print(
            f"materialize, echo substrate, one request of {MATERIALIZATIONS} "
            f"declarations: {batch * 1000:.0f} ms "
            f"({MATERIALIZATIONS / batch:.0f} declarations/s)"
        )


def _batch(root: Path, i: int) -> float:
    """Return the seconds one request of many declarations takes."""
    registry = SubstrateRegistry()
    registry.register(EchoSubstrate("echo.v1", ["note.write.v1"]))
    with SQLiteTraceStore(root / f"batch-{i}.db") as store:
        drafts = [_note(n) for n in range(MATERIALIZATIONS)]
        ids = _declare(store, "echo.v1", drafts, [OWNER] * MATERIALIZATIONS)
        request = MaterializationRequest("apply:all", OWNER, tuple(ids))
        start = time.perf_counter()
        materialize(store, MATERIALIZE, request, registry).unwrap()
        return time.perf_counter() - start
