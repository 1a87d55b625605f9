"""Projection catch-up speed, /api/records latency, and the viewer at 100k records.

Targets (issue 6): a projection catches up at >= 20,000 records/s on SQLite;
``/api/records`` for an owner with 10,000 records answers in <= 200 ms; the
page stays usable with 100,000 records (first page, owners, and a subtree
query stay fast because every query is an indexed range with a page limit).
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from goatherd import (
    ALL_SCHEMAS,
    TRUSTED_APPEND_CONTEXT,
    AppendBatch,
    AppendGroup,
    LogEntry,
    Projection,
    ProjectionRunner,
    RecordDraft,
    SQLiteTraceStore,
    TraceUiServer,
    UiIndexProjection,
    on,
)
from goatherd.infrastructure.projection_views import SqlUiIndexView


def _fill(
    store: SQLiteTraceStore, owner: str, count: int, *, per_batch: int = 500
) -> None:
    for start in range(0, count, per_batch):
        drafts = tuple(
            RecordDraft(
                "capture",
                "bench.tool.called.v1",
                {"n": n, "tool": "bash", "cmd": "ls -la"},
            )
            for n in range(start, min(start + per_batch, count))
        )
        batch = AppendBatch(
            f"{owner}:{start}", (AppendGroup(owner, fact_drafts=drafts),)
        )
        store.append(TRUSTED_APPEND_CONTEXT, batch)


def _catch_up(store: SQLiteTraceStore, projection, records: int) -> None:
    runner = ProjectionRunner(store, [projection])
    start = time.perf_counter()
    runner.catch_up()
    seconds = time.perf_counter() - start
    print(
        f"catch-up {projection.name}: {records} records in {seconds:.2f} s = "
        f"{records / seconds:,.0f} records/s (target >= 20,000)"
    )


def _timed_get(client: httpx.Client, url: str, repeat: int = 5) -> tuple[float, int]:
    client.get(url)  # warm: the UI index catches up on the first request
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        response = client.get(url)
        samples.append(time.perf_counter() - start)
    return sorted(samples)[len(samples) // 2], len(response.content)


def run() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteTraceStore(Path(tmp) / "bench.sqlite")
        _fill(store, "agent:main", 10_000)
        _fill(store, "agent:other", 90_000)
        total = store.max_position() + 1
        print(f"trace: {total} records on 2 owners")
        _catch_up(store, CountAll(_NullView), total)
        _catch_up(store, UiIndexProjection(SqlUiIndexView.bind), total)
        with (
            TraceUiServer(store) as server,
            httpx.Client(base_url=server.url, timeout=120) as client,
        ):
            start = time.perf_counter()
            client.get("/api/health")
            client.get("/api/owners")
            seconds = time.perf_counter() - start
            print(f"viewer start (index catch-up of {total} records): {seconds:.2f} s")
            for label, url in [
                (
                    "/api/records owner 10k, limit 10000",
                    "/api/records?path=agent:main&limit=10000",
                ),
                (
                    "/api/records owner 10k, default page",
                    "/api/records?path=agent:main",
                ),
                ("/api/records all 100k, first page", "/api/records?limit=500"),
                ("/api/owners over 100k", "/api/owners"),
            ]:
                seconds, size = _timed_get(client, url)
                print(f"{label}: {seconds * 1000:.1f} ms median ({size / 1e6:.2f} MB)")
        store.close()


class CountAll(Projection[Any]):
    """A projection that reads every record and writes nothing: the runner's cost."""

    name = "bench.count_all"

    @on(ALL_SCHEMAS)
    def counted(self, view: Any, entry: LogEntry) -> None:
        view.count += 1


class _NullView:
    """A view that only counts."""

    count = 0

    def __init__(self, transaction: object) -> None:
        pass

    def create(self) -> None:
        pass

    def drop(self) -> None:
        pass
