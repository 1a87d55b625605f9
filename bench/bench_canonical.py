"""canonical_digest of ~1 KB payloads (issue target: at most 12 us per call).

The same run also times the reference algorithm (``json.dumps`` with the
reference's arguments, UTF-8, SHA-256 behind the prefix) on the same payloads,
so the figure can be read as a ratio on whatever machine runs it.
"""

from __future__ import annotations

import hashlib
import json
import os
import timeit
from collections.abc import Callable
from functools import partial

from goatherd import (
    canonical_digest,
    canonical_json_bytes,
)
from goatherd.domain import (
    CANONICAL_PREFIX,
)

AGENT_CALL: dict[str, object] = {
    "tool": "bash",
    "cmd": "pytest -q tests/ && ruff check . > /tmp/out.txt",
    "cwd": "/work/project",
    "env": {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": "/root"},
    "args": ["-q", "--maxfail=1", "--durations=10", "tests/unit", "tests/integration"],
    "timeout_ms": 120000,
    "retries": 2,
    "score": 0.8125,
    "ok": True,
    "note": "r\u00e9sum\u00e9 of the run \u2603: 3 passed, 0 failed",
    "changes": [
        {"path": "src/app/main.py", "kind": "modify", "lines": 12},
        {"path": "src/app/util.py", "kind": "create", "lines": 40},
        {"path": "docs/old.md", "kind": "delete", "lines": 0},
        {"path": "tests/test_main.py", "kind": "modify", "lines": 7},
    ],
    "metrics": {"cpu_s": 1.25, "rss_mb": 231.5, "io_ops": 1843, "p99_ms": 12.75},
    "labels": ["agent:main", "attempt:2", "model:scripted", "suite:unit"],
    "parent": None,
    "stdout_digest": "sha256:" + "ab" * 32,
    "stderr_digest": "sha256:" + "cd" * 32,
}

TEXT_RESULT: dict[str, object] = {
    "role": "tool",
    "tool_call_id": "call_0f3a9c2e",
    "content": (
        "Ran 42 tests in 3.2s. All passed. The patch touches the parser and the "
        "command-line entry point; nothing else changed. "
    )
    * 5,
    "stdout_digest": "sha256:" + "ab" * 32,
    "exit_code": 0,
    "paths": ["src/parser.py", "src/cli.py", "tests/test_parser.py"],
    "meta": {"model": "scripted", "turn": 7, "elapsed_ms": 3211},
}


def _reference(value: object) -> str:
    data = json.dumps(
        value,
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        allow_nan=False,
    ).encode("utf-8")
    return "sha256:" + hashlib.sha256(CANONICAL_PREFIX + data).hexdigest()


def _spread(
    fn: Callable[[], object], number: int = 20000, repeat: int = 9
) -> list[float]:
    """Return the sorted per-call seconds of ``repeat`` runs of ``number`` calls."""
    return sorted(timeit.timeit(fn, number=number) / number for _ in range(repeat))


def _line(samples: list[float]) -> str:
    best, median, worst = samples[0], samples[len(samples) // 2], samples[-1]
    return (
        f"best {best * 1e6:.2f} / median {median * 1e6:.2f} / "
        f"worst {worst * 1e6:.2f} us"
    )


def run() -> None:
    print(f"load average at start: {os.getloadavg()[0]:.2f}")
    for name, payload in (("agent call", AGENT_CALL), ("text result", TEXT_RESULT)):
        size = len(canonical_json_bytes(payload))
        assert _reference(payload) == canonical_digest(payload)
        ours = _spread(partial(canonical_digest, payload))
        ref = _spread(partial(_reference, payload))
        print(
            f"canonical_digest, {name} ({size} bytes): {_line(ours)}; "
            f"reference algorithm in the same run: {_line(ref)}; "
            f"best ratio {ours[0] / ref[0]:.2f} (target <= 12 us)"
        )
    print(f"load average at end: {os.getloadavg()[0]:.2f}")
