"""Import memory: peak RSS of ``goatherd import`` does not grow with the file.

Two exports are built, one 4x the other (same record sizes), and each is
imported by a fresh ``goatherd import`` process; a third process only opens a
new store (the baseline measured in the same run). PASS when the larger
import's peak above the baseline is at most 1.5x the smaller one's: memory is
bounded by the longest line, not by the file. A fourth process imports a file
whose first line is 200 MB with the default 64 MiB line limit: it must be
refused, its peak growing with the limit, not the line (PASS at most 2.5x
the limit: the buffered reader holds up to two copies of a limit-long line).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import goatherd
from goatherd.domain.records import AppendBatch, AppendGroup, RecordDraft
from goatherd.infrastructure.portability.jsonl import export_trace
from goatherd.infrastructure.store import SQLiteTraceStore

CTX = goatherd.TRUSTED_APPEND_CONTEXT
_PAYLOAD = "x" * 2000


def _export(directory: Path, intents: int) -> Path:
    db = directory / f"source-{intents}.sqlite"
    with SQLiteTraceStore(db) as store:
        for n in range(intents):
            drafts = tuple(
                RecordDraft("capture", "bench.note.v1", {"n": n, "k": k, "t": _PAYLOAD})
                for k in range(4)
            )
            store.append(
                CTX,
                AppendBatch(
                    f"bench:{n}", (AppendGroup(f"agent:{n % 50}", fact_drafts=drafts),)
                ),
            )
        out = directory / f"export-{intents}.jsonl"
        with out.open("w", encoding="utf-8") as handle:
            export_trace(store, handle)
    return out


def _goatherd(*args: str) -> list[str]:
    return [sys.executable, "-m", "goatherd", *args]


def _child_peak(argv: list[str]) -> tuple[int, float, int]:
    script = (
        "import resource, subprocess, sys, time\n"
        "start = time.perf_counter()\n"
        "code = subprocess.run(sys.argv[1:], capture_output=True).returncode\n"
        "took = time.perf_counter() - start\n"
        "peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss\n"
        "print(peak, took, code)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script, *argv],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return int(out[0]), float(out[1]), int(out[2])


def run() -> None:
    with tempfile.TemporaryDirectory(prefix="bench-import-") as tmp:
        directory = Path(tmp)
        small, large = _export(directory, 500), _export(directory, 2000)
        base, _, _ = _child_peak(
            _goatherd("stats", str(directory / "source-500.sqlite"))
        )
        peak_small, t_small, c1 = _child_peak(
            _goatherd("import", str(small), str(directory / "a.sqlite"))
        )
        peak_large, t_large, c2 = _child_peak(
            _goatherd("import", str(large), str(directory / "b.sqlite"))
        )
        assert (c1, c2) == (0, 0)
        grow_small, grow_large = peak_small - base, peak_large - base
        ratio = grow_large / max(grow_small, 1)
        print(
            f"import {small.stat().st_size / 1e6:.1f} MB: peak "
            f"{peak_small / 1024:.1f} MiB "
            f"({t_small:.1f} s); {large.stat().st_size / 1e6:.1f} MB: peak "
            f"{peak_large / 1024:.1f} MiB ({t_large:.1f} s); baseline process "
            f"{base / 1024:.1f} MiB; growth ratio 4x file: {ratio:.2f} "
            f"{'PASS' if ratio <= 1.5 else 'MISS'} (target <= 1.5)"
        )
        huge = directory / "huge.jsonl"
        with huge.open("wb") as handle:
            handle.write(b'{"type":"header","pad":"')
            chunk = b"y" * (1 << 20)
            for _ in range(200):
                handle.write(chunk)
            handle.write(b'"}\n')
        peak_huge, t_huge, code = _child_peak(
            _goatherd("import", str(huge), str(directory / "c.sqlite"))
        )
        growth = (peak_huge - base) / 1024
        verdict = "PASS" if code == 1 and growth <= 2.5 * 64 else "MISS"
        print(
            f"a 200 MB line (limit 64 MiB): exit {code}, peak {peak_huge / 1024:.1f} "
            f"MiB ({t_huge:.1f} s), growth {growth:.0f} MiB = "
            f"{growth / 64:.2f}x the limit {verdict} (target: refused, <= 2.5x)"
        )
