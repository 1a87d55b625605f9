"""A writer's rate with 200 SSE clients on the trace UI, one of them stalled.

Target (issue 13, item 6): with 200 connected SSE clients, one of them
stalled, a writer in the same process keeps at least 80% of its rate.

The writer appends single-record batches to a SQLite file store that
publishes every commit on an effect bus; the trace UI (``TraceUiServer``,
uvicorn on loopback) runs in the same process over that store and bus, as an
embedded viewer does. The clients run in a second process: 199 read their
``/api/events`` stream as fast as it comes, one sends its request and never
reads (a small receive buffer, so the server's send path backs up at once).

The machine has 2 cores shared with other work, whose load changes from one
second to the next. So the baseline is measured in the same run, in short
slices that alternate with the loaded ones: the clients stay connected and a
switch between the store and the bus either forwards every event (loaded:
each of the 200 streams gets it) or drops it (baseline: no event reaches the
bus, the idle connections cost nothing, as with no client at all). Each
pair of adjacent slices gives a ratio; the verdict is on the median ratio.
Every loaded slice is followed by a pause (not timed) in which the readers
catch up, so its delivery work does not fall into the next baseline slice.

Environment knobs: ``GOATHERD_BENCH_SSE_APPENDS`` (appends per slice,
default 400), ``GOATHERD_BENCH_SSE_PAIRS`` (default 12).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from goatherd.domain import (
    TRUSTED_APPEND_CONTEXT,
    AppendBatch,
    AppendGroup,
    RecordDraft,
)
from goatherd.domain.effects import EffectEvent
from goatherd.infrastructure import open_runtime
from goatherd.infrastructure.bus.effect_bus import EffectBus
from goatherd.infrastructure.store import SqlAlchemyTraceStore
from goatherd.infrastructure.traceui import TraceUiServer

CLIENTS = 200
TARGET = 0.80
APPENDS = int(os.environ.get("GOATHERD_BENCH_SSE_APPENDS", "400"))
PAIRS = int(os.environ.get("GOATHERD_BENCH_SSE_PAIRS", "12"))
CATCH_UP_SECONDS = 1.0

# The client process: 199 readers and one stalled client on /api/events.
CLIENT = textwrap.dedent(
    """
    import asyncio, socket, sys

    HOST, PORT, READERS = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    REQUEST = (
        f"GET /api/events HTTP/1.1\\r\\nHost: {HOST}:{PORT}\\r\\n"
        "Accept: text/event-stream\\r\\n\\r\\n"
    ).encode()
    counts = [0] * READERS

    async def reader(i, connected):
        r, w = await asyncio.open_connection(HOST, PORT)
        w.write(REQUEST)
        await w.drain()
        seen = b""
        while b": connected" not in seen:
            seen += await r.read(65536)
        connected.release()
        tail = b""
        while True:
            chunk = await r.read(1 << 20)
            if not chunk:
                return
            data = tail + chunk
            counts[i] += data.count(b"\\nevent: record\\n")
            tail = data[-16:]

    async def stalled():
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect((HOST, PORT))
        sock.sendall(REQUEST)
        return sock  # never read

    async def main():
        connected = asyncio.Semaphore(0)
        tasks = [asyncio.create_task(reader(i, connected)) for i in range(READERS)]
        for _ in range(READERS):
            await connected.acquire()
        keep = await stalled()
        print("connected", flush=True)
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, sys.stdin.readline)
        ordered = sorted(counts)
        middle = ordered[len(ordered) // 2]
        print(f"events {ordered[0]} {middle} {ordered[-1]}", flush=True)
        keep.close()
        for task in tasks:
            task.cancel()

    asyncio.run(main())
    """
)


def _append(store: SqlAlchemyTraceStore, n: int) -> None:
    draft = RecordDraft("capture", "bench.sse.note.v1", {"n": n, "text": "x" * 64})
    group = AppendGroup("bench:writer", fact_drafts=(draft,))
    batch = AppendBatch(f"sse:{n}", (group,))
    store.append(TRUSTED_APPEND_CONTEXT, batch)


@dataclass(frozen=True)
class Phase:
    """One measured run of the writer."""

    rate: float  # appends per wall-clock second
    writer_cpu_us: float  # the writer thread's CPU per append
    process_cpu_us: float  # the whole process's CPU per append (UI included)


class Writer:
    """Appends single-record batches; numbers them across phases."""

    def __init__(self, store: SqlAlchemyTraceStore) -> None:
        self.store = store
        self.next = 0

    def run(self, count: int) -> Phase:
        """Append ``count`` records; return the rate and CPU per append."""
        started = time.perf_counter()
        thread0, process0 = time.thread_time(), time.process_time()
        for _ in range(count):
            _append(self.store, self.next)
            self.next += 1
        wall = time.perf_counter() - started
        thread = time.thread_time() - thread0
        process = time.process_time() - process0
        return Phase(count / wall, thread / count * 1e6, process / count * 1e6)


@contextmanager
def _clients(url: str, bus: EffectBus) -> Iterator[subprocess.Popen[str]]:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    proc = subprocess.Popen(
        [sys.executable, "-c", CLIENT, host, port, str(CLIENTS - 1)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if line.strip() != "connected":
            raise RuntimeError(f"SSE clients failed to connect: {line!r}")
        deadline = time.monotonic() + 60
        while bus.subscriber_count() < CLIENTS:
            if time.monotonic() > deadline:
                raise RuntimeError(f"only {bus.subscriber_count()} SSE subscribers")
            time.sleep(0.02)
        yield proc
    finally:
        proc.kill()
        proc.communicate(timeout=30)


def _received(proc: subprocess.Popen[str]) -> str:
    assert proc.stdin is not None
    assert proc.stdout is not None
    proc.stdin.write("report\n")
    proc.stdin.flush()
    return proc.stdout.readline().strip()


class Switch:
    """Sits between the store and the bus: forwards events only when on."""

    def __init__(self, bus: EffectBus) -> None:
        self.bus = bus
        self.on = False

    def publish(self, event: EffectEvent) -> None:
        """Forward ``event`` to the bus when on; drop it when off."""
        if self.on:
            self.bus.publish(event)


def _slice(writer: Writer, switch: Switch, *, loaded: bool) -> Phase:
    switch.on = loaded
    phase = writer.run(APPENDS)
    switch.on = False
    if loaded:
        time.sleep(CATCH_UP_SECONDS)
    return phase


def run() -> None:
    """Print the alternating slices' summary and the verdict."""
    load = os.getloadavg()[0]
    with (
        tempfile.TemporaryDirectory() as tmp,
        open_runtime(Path(tmp) / "trace.sqlite", bus=False) as runtime,
    ):
        bus = EffectBus()
        switch = Switch(bus)
        runtime.store.with_bus(switch)
        writer = Writer(runtime.store)
        writer.run(200)  # warm up the store and the statement cache
        pairs: list[tuple[Phase, Phase]] = []
        with (
            TraceUiServer(runtime.store, bus) as server,
            _clients(server.url, bus) as proc,
        ):
            for n in range(PAIRS):
                if n % 2:
                    loaded = _slice(writer, switch, loaded=True)
                    alone = _slice(writer, switch, loaded=False)
                else:
                    alone = _slice(writer, switch, loaded=False)
                    loaded = _slice(writer, switch, loaded=True)
                pairs.append((alone, loaded))
            received = _received(proc)
        bus.close()
    _report(pairs, received, load)


def _report(pairs: list[tuple[Phase, Phase]], received: str, load: float) -> None:
    ratios = sorted(loaded.rate / alone.rate for alone, loaded in pairs)
    median = statistics.median(ratios)

    def med(values: list[float]) -> float:
        return statistics.median(values)

    alone_rate = med([a.rate for a, _ in pairs])
    loaded_rate = med([b.rate for _, b in pairs])
    print(
        f"writer alone: median {alone_rate:,.0f} appends/s, writer thread"
        f" {med([a.writer_cpu_us for a, _ in pairs]):.0f} us CPU per append,"
        f" process {med([a.process_cpu_us for a, _ in pairs]):.0f} us"
    )
    print(
        f"with {CLIENTS} SSE clients (1 stalled): median {loaded_rate:,.0f}"
        f" appends/s, writer thread {med([b.writer_cpu_us for _, b in pairs]):.0f}"
        f" us CPU per append, process {med([b.process_cpu_us for _, b in pairs]):.0f}"
        f" us; each reader got {received} of {PAIRS * APPENDS} events"
        " (min median max)"
    )
    print(
        f"ratios of {PAIRS} pairs of {APPENDS} appends: "
        + " ".join(f"{r:.2f}" for r in ratios)
    )
    verdict = "PASS" if median >= TARGET else "MISS"
    print(
        f"SSE fan-out: writer keeps {median:.0%} of its rate (median ratio"
        f" {median:.2f}, target >= {TARGET:.2f}; load average {load:.2f} at start,"
        f" {os.getloadavg()[0]:.2f} at end) {verdict}"
    )
