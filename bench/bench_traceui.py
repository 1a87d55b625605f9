"""The trace UI's memory against the size of the trace it serves.

Traces of about 8 and 64 MiB of payloads (records of 32 KiB each) are built
once; for each, a fresh process opens it read-only, starts the trace UI
(``goatherd traceui`` as a library: ``TraceUiServer``), waits until its
index caught up, fetches one page of ``/api/records`` and reports its peak
resident memory (``VmHWM``). The index used to live in memory with a copy of
every record's JSON (a 98 MiB trace: 368 MiB after one page); it is now an
anonymous file with an 8 MiB page cache. PASS when the peak grows by at most
a quarter of the trace's growth.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

from goatherd.domain import (
    TRUSTED_APPEND_CONTEXT,
    AppendBatch,
    AppendGroup,
    RecordDraft,
)
from goatherd.infrastructure.store import SQLiteTraceStore

RECORD_BYTES = 32 << 10
SIZES_MIB = (8, 64)
GROWTH_LIMIT = 0.25

_CHILD = textwrap.dedent(
    """
    import json, sys, time, urllib.request
    from goatherd.infrastructure.store import open_trace_store_read_only
    from goatherd.infrastructure.traceui import TraceUiServer

    with open_trace_store_read_only(sys.argv[1]) as store:
        with TraceUiServer(store) as server:
            with urllib.request.urlopen(server.url + "/api/records") as r:
                page = json.load(r)
            with urllib.request.urlopen(server.url + "/api/scopes") as r:
                r.read()
    status = open("/proc/self/status").read().split("\\n")
    peak = next(line for line in status if line.startswith("VmHWM:"))
    shown = len(page["records"])
    print(json.dumps({"peak_kib": int(peak.split()[1]), "records": shown}))
    """
)


def _build(path: Path, mib: int) -> int:
    count = (mib << 20) // RECORD_BYTES
    filler = "x" * (RECORD_BYTES - 64)
    with SQLiteTraceStore(path) as store:
        for start in range(0, count, 50):
            drafts = tuple(
                RecordDraft("capture", "bench.big.v1", {"n": n, "text": filler})
                for n in range(start, min(start + 50, count))
            )
            store.append(
                TRUSTED_APPEND_CONTEXT,
                AppendBatch(
                    f"big:{start}", (AppendGroup("agent:big", fact_drafts=drafts),)
                ),
            )
    return count


def _peak(path: Path) -> dict[str, int]:
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(path)],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    result: dict[str, int] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def run() -> None:
    print(f"load average at start: {os.getloadavg()[0]:.2f}")
    peaks: list[tuple[float, float]] = []
    with tempfile.TemporaryDirectory() as directory:
        for mib in SIZES_MIB:
            path = Path(directory) / f"trace-{mib}.sqlite"
            count = _build(path, mib)
            size = path.stat().st_size / (1 << 20)
            measured = _peak(path)
            peak = measured["peak_kib"] / 1024
            peaks.append((size, peak))
            print(
                f"trace {size:.0f} MiB ({count} records): UI peak RSS {peak:.0f} MiB "
                f"after a page of {measured['records']}"
            )
    (small_size, small_peak), (large_size, large_peak) = peaks
    growth = (large_peak - small_peak) / (large_size - small_size)
    verdict = "PASS" if growth <= GROWTH_LIMIT else "MISS"
    print(
        f"trace UI memory growth per MiB of trace: {growth:.2f} {verdict} "
        f"(target <= {GROWTH_LIMIT})"
    )
    print(f"load average at end: {os.getloadavg()[0]:.2f}")
