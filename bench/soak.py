"""The concurrent-load soak: 8 writer processes, a projection runner, an SSE client.

One command::

    .venv/bin/python -m bench.soak --minutes 3 [--db URL] [--writers 8] [--json OUT]

``--db`` is a SQLite path/URL or a ``postgresql+psycopg://`` server URL (a
fresh database is created on that server and dropped afterwards); without it
a temporary SQLite file is used. Everything runs on loopback.

While the writers run their scope cycles (``soak_writer.py``: fork, populate,
checkpoint, seal, settle), this process follows the trace three ways: a
:class:`ProjectionRunner` with the built-in read models (in the trace's own
database), a relay that tails ``read_log`` onto an :class:`EffectBus` (the bus
is in-process, so records written by other processes reach it only through
the log), and an SSE client reading ``/api/events`` of a real trace UI server.

At the end it proves, and reports as ``proofs`` (each must be true):

- ``trace_verifies``: ``verify_trace`` recomputes every id, chain, ordinal and
  gap-free log position;
- ``no_lost_or_duplicated_record``: every fork, checkpoint, seal and settle a
  writer reported is in the trace exactly once, and nothing else is;
- ``projections_equal_rebuild``: every built-in view equals a from-scratch
  rebuild of it;
- ``every_scope_recovered``: ``recover_scopes`` rebuilds each writer's children
  in their final state and each output in its settled state;
- ``sse_in_order_without_duplicates`` and ``sse_complete_after_repair``: the
  SSE client saw strictly increasing positions, and what the bus dropped is
  exactly what ``/api/records`` fills in.

Figures: cycles and commands per second, per-command p50/p99 latency,
log entries per second (a record on two paths is two entries), SSE events
received and dropped, projection lag. The throughput window runs from the
barrier that releases the writers together to the last writer's end.
"""

from __future__ import annotations

import argparse
import itertools
import json
import multiprocessing
import os
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import MetaData, select
from sqlalchemy.engine import make_url

from bench.soak_writer import WriterReport, run_writer
from goatherd.application import recover_scopes
from goatherd.domain import (
    CheckpointCreated,
    OutputSealed,
    OutputSettled,
    OutputState,
    ScopeForked,
)
from goatherd.domain.effects import EffectEvent
from goatherd.infrastructure.audit.verify import verify_trace
from goatherd.infrastructure.bootstrap import runtime_context_for
from goatherd.infrastructure.bus.effect_bus import EffectBus
from goatherd.infrastructure.projections.runner import (
    ProjectionRunner,
    builtin_projections,
)
from goatherd.infrastructure.store import (
    METADATA,
    SqlAlchemyTraceStore,
    open_trace_store,
)
from goatherd.infrastructure.traceui import TraceUiServer

__all__ = ["main", "run_soak"]


# ------------------------------------------------------------------ database


@contextmanager
def soak_database(db: str | None) -> Iterator[str]:
    """Yield a trace URL: a temp SQLite file, the given path, or a fresh PG db."""
    if db is None:
        with tempfile.TemporaryDirectory(prefix="goatherd-soak-") as directory:
            yield f"sqlite:///{Path(directory) / 'trace.sqlite'}"
        return
    if not db.startswith("postgresql"):
        yield db if "://" in db else f"sqlite:///{db}"
        return
    import psycopg

    url = make_url(db)
    name = f"goatherd_soak_{uuid.uuid4().hex[:10]}"
    admin = url.set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield url.set(database=name).render_as_string(hide_password=False)
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


# ------------------------------------------------------------------ followers


class Relay(threading.Thread):
    """Tail the global log onto the bus (other processes' appends included)."""

    def __init__(self, store: SqlAlchemyTraceStore, bus: EffectBus) -> None:
        super().__init__(name="soak-relay", daemon=True)
        self.store = store
        self.bus = bus
        self.last = -1
        self.stop = threading.Event()

    def run(self) -> None:
        while True:
            finished = self.stop.is_set()
            entries = self.store.read_log(after=self.last, limit=2000)
            for entry in entries:
                record = entry.record
                self.bus.publish(
                    EffectEvent(
                        record_id=record.record_id,
                        intent_id=entry.append_intent_id,
                        trace_owner_id=record.trace_owner_id,
                        owner_ordinal=record.owner_ordinal,
                        position=entry.position,
                        mode=record.envelope.mode,
                        schema_ref=record.envelope.schema_ref,
                        kind_label=record.view.kind_label if record.view else "",
                        payload=record.payload,
                        causal_parents=record.envelope.caused_by_record_ids,
                        timestamp=datetime.now(UTC),
                    )
                )
                self.last = entry.position
            if not entries:
                if finished:
                    return
                time.sleep(0.01)


class SseClient(threading.Thread):
    """Read ``/api/events`` and keep every position it was sent, in order."""

    def __init__(self, url: str) -> None:
        super().__init__(name="soak-sse", daemon=True)
        self.url = url
        self.positions: list[int] = []
        self.until: int | None = None
        self.connected = threading.Event()
        self.error = ""

    def seen_through(self, position: int, timeout: float) -> None:
        """Wait until the stream delivered ``position`` (or ended, or ``timeout``).

        Checked here rather than in :meth:`run`, which looks only when a line
        arrives: once the writers stop, the next line is a heartbeat, seconds
        away.
        """
        deadline = time.monotonic() + timeout
        while self.is_alive() and time.monotonic() < deadline:
            if self.positions and self.positions[-1] >= position:
                return
            time.sleep(0.02)

    def run(self) -> None:
        try:
            timeout = httpx.Timeout(5.0, read=30.0)
            with (
                httpx.Client(timeout=timeout) as client,
                client.stream("GET", self.url + "/api/events") as response,
            ):
                self.connected.set()
                for line in response.iter_lines():
                    if line.startswith("id: "):
                        self.positions.append(int(line[4:]))
                    if self.until is not None and (
                        self.positions and self.positions[-1] >= self.until
                    ):
                        return
        except httpx.ReadTimeout:
            return  # the stream went quiet: the end of the run
        except Exception as error:
            if not (self.until is not None and self.positions[-1:] >= [self.until]):
                self.error = repr(error)  # not the server closing after the end
        finally:
            self.connected.set()


def repair_from_api(url: str, seen: list[int]) -> set[int]:
    """Fetch every logged position via ``/api/records`` pages (the client's repair)."""
    positions: set[int] = set()
    after = -1
    with httpx.Client(base_url=url, timeout=60) as client:
        while True:
            page = client.get(
                "/api/records", params={"after": after, "limit": 10_000}
            ).json()
            positions.update(
                r["position"] for r in page["records"] if r["position"] is not None
            )
            if page["next_after"] is None:
                return positions
            after = page["next_after"]


# ------------------------------------------------------------------ proofs


def _distinct(store: SqlAlchemyTraceStore, schema: str, key: str) -> Counter[str]:
    seen: dict[str, str] = {}
    for entry in store.scan_records_by_schema(schema):
        seen[entry.record.record_id] = str(entry.record.payload.get(key, ""))
    return Counter(seen.values())


def _exactly_once(found: Counter[str], expected: set[str]) -> bool:
    return set(found) == expected and all(n == 1 for n in found.values())


def prove_no_loss(store: SqlAlchemyTraceStore, reports: list[WriterReport]) -> bool:
    owners = {sid.removeprefix("scope:") for r in reports for sid in r.scopes}
    outputs = {oid for r in reports for oid in r.outputs}
    checkpoints = {cid for r in reports for cid in r.checkpoints}
    forks = _distinct(store, ScopeForked.SCHEMA, "child_owner")
    return (
        _exactly_once(forks, owners)
        and _exactly_once(_distinct(store, OutputSealed.SCHEMA, "output_id"), outputs)
        and _exactly_once(_distinct(store, OutputSettled.SCHEMA, "output_id"), outputs)
        and _exactly_once(
            _distinct(store, CheckpointCreated.SCHEMA, "checkpoint_id"), checkpoints
        )
    )


def view_rows(store: SqlAlchemyTraceStore) -> dict[str, list[tuple[Any, ...]]]:
    trace_tables = {t.name for t in METADATA.sorted_tables} | {"projection_tracking"}
    metadata = MetaData()
    with store.engine.connect() as conn:
        metadata.reflect(conn)
        rows = {
            table.name: sorted(
                (tuple(r) for r in conn.execute(select(table))), key=repr
            )
            for table in metadata.sorted_tables
            if table.name not in trace_tables
        }
        conn.rollback()
    return rows


def prove_projections(store: SqlAlchemyTraceStore, runner: ProjectionRunner) -> bool:
    runner.catch_up()
    followed = view_rows(store)
    for name in runner.names:
        runner.rebuild(name)
    return bool(followed) and view_rows(store) == followed


def prove_recovery(store: SqlAlchemyTraceStore, reports: list[WriterReport]) -> bool:
    manager = recover_scopes(runtime_context_for(store)).unwrap()
    for report in reports:
        for scope_id, state in report.scopes.items():
            scope = manager.get(scope_id)
            if scope is None or scope.state.value != state:
                return False
        for output_id, action in report.outputs.items():
            output = manager.output(output_id)
            if output is None or output.state is not OutputState(action):
                return False
    return True


# ------------------------------------------------------------------ figures


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    index = min(len(ordered) - 1, round(q * (len(ordered) - 1)))
    return ordered[index]


def latency_figures(reports: list[WriterReport]) -> dict[str, dict[str, float]]:
    merged: dict[str, list[float]] = {}
    for report in reports:
        for command, values in report.latencies.items():
            merged.setdefault(command, []).extend(values)
    merged["all"] = [v for values in list(merged.values()) for v in values]
    return {
        command: {
            "count": len(values),
            "p50_ms": round(1000 * statistics.median(values), 2) if values else 0.0,
            "p99_ms": round(1000 * _percentile(values, 0.99), 2),
        }
        for command, values in merged.items()
    }


# ------------------------------------------------------------------ the run


def _start_writers(
    url: str, writers: int, seconds: float
) -> tuple[list[Any], Any, Any]:
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    barrier = context.Barrier(writers)
    processes = [
        context.Process(
            target=run_writer, args=(url, str(k), seconds, barrier, results)
        )
        for k in range(writers)
    ]
    for process in processes:
        process.start()
    # The barrier is returned to keep its semaphores alive while children start.
    return processes, results, barrier


def run_soak(url: str, *, seconds: float, writers: int = 8) -> dict[str, Any]:
    """Run the soak against ``url`` for ``seconds``; return figures and proofs."""
    open_trace_store(url).close()  # the schema exists before the writers start
    bus = EffectBus(buffer_size=256)
    with open_trace_store(url) as store:
        runner = ProjectionRunner(store, builtin_projections(), poll_interval=0.05)
        relay = Relay(store, bus)
        with TraceUiServer(store, bus) as server:
            sse = SseClient(server.url)
            sse.start()
            sse.connected.wait(10)
            runner.start()
            relay.start()
            processes, results, _barrier = _start_writers(url, writers, seconds)
            reports = [results.get(timeout=seconds + 300) for _ in processes]
            for process in processes:
                process.join(60)
            relay.stop.set()
            relay.join(120)
            sse.until = store.max_position()
            sse.seen_through(sse.until, timeout=60)
            runner.stop()
            lag = runner.status()
            api_positions = repair_from_api(server.url, sse.positions)
        window = [r for r in reports if r.started and r.ended]
        wall = (
            max(r.ended for r in window) - min(r.started for r in window)
            if window
            else seconds
        )
        return _summary(url, store, runner, reports, sse, api_positions, lag, wall)


def _summary(
    url: str,
    store: SqlAlchemyTraceStore,
    runner: ProjectionRunner,
    reports: list[WriterReport],
    sse: SseClient,
    api_positions: set[int],
    status: Any,
    wall: float,
) -> dict[str, Any]:
    errors = [r.error for r in reports if r.error]
    report = verify_trace(store)
    head = store.max_position()
    seen = sse.positions
    cycles = sum(r.cycles for r in reports)
    latencies = latency_figures(reports)
    proofs = {
        "writers_without_error": not errors,
        "trace_verifies": report.ok,
        "no_lost_or_duplicated_record": prove_no_loss(store, reports),
        "projections_equal_rebuild": prove_projections(store, runner),
        "every_scope_recovered": prove_recovery(store, reports),
        "sse_in_order_without_duplicates": all(
            a < b for a, b in itertools.pairwise(seen)
        ),
        "sse_complete_after_repair": api_positions | set(seen) == set(range(head + 1)),
    }
    return {
        "backend": make_url(url).get_backend_name(),
        "verify_problems": [str(p) for p in report.problems[:5]],
        "writers": len(reports),
        "wall_seconds": round(wall, 1),
        "cycles": cycles,
        "commands": latencies["all"]["count"],
        "commands_per_second": round(latencies["all"]["count"] / wall, 1),
        "cycles_per_second": round(cycles / wall, 2),
        "records": report.records,
        "log_entries": head + 1,
        "log_entries_per_second": round((head + 1) / wall, 1),
        "latency": latencies,
        "sse_events": len(seen),
        "sse_dropped_then_repaired": head + 1 - len(seen),
        "projection_max_lag_at_stop": max(s.lag for s in status),
        "proofs": proofs,
        "errors": errors,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.soak")
    parser.add_argument("--minutes", type=float, default=3.0)
    parser.add_argument("--db", help="SQLite path/URL or postgresql+psycopg:// URL")
    parser.add_argument("--writers", type=int, default=8)
    parser.add_argument("--json", help="also write the summary to this file")
    args = parser.parse_args(argv)
    with soak_database(args.db) as url:
        summary = run_soak(url, seconds=args.minutes * 60, writers=args.writers)
    text = json.dumps(summary, indent=2, sort_keys=True)
    print(text)
    if args.json:
        Path(args.json).write_text(text + "\n")
    return 0 if all(summary["proofs"].values()) else 1


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main())
