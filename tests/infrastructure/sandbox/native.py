"""Helpers for the containment tests: compile C with gcc, watch real processes."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

needs_gcc = pytest.mark.skipif(
    shutil.which("gcc") is None, reason="gcc is needed to build the test's C code"
)


def compile_c(directory: Path, name: str, source: str, *flags: str) -> Path:
    """Compile ``source`` with gcc into ``directory / name`` and return the path."""
    src = directory / f"{name}.c"
    src.write_text(source)
    out = directory / name
    subprocess.run(
        ["gcc", "-O1", "-Wall", "-o", str(out), str(src), *flags],
        check=True,
        capture_output=True,
    )
    return out


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie or a vanished process does not).

    Read straight from ``/proc`` so the check does not depend on the code
    under test.
    """
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat[stat.rindex(")") + 2] not in "ZX"


def pids_in(path: Path) -> list[int]:
    """Return the pids written one per line into ``path`` (none if missing)."""
    if not path.exists():
        return []
    return [int(line) for line in path.read_text().split()]


def wait_for(predicate: object, timeout: float = 10.0) -> bool:
    """Poll ``predicate()`` until it is true or ``timeout`` passes."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return True
        time.sleep(0.02)
    return bool(predicate())  # type: ignore[operator]


def kill_listed(path: Path) -> Iterator[None]:
    """Fixture body: after the test, kill every pid listed in ``path``.

    A failing test (or the old code) may leave the processes it checks for;
    they must not outlive the test run.
    """
    yield
    for pid in pids_in(path):
        if alive(pid):
            os.kill(pid, signal.SIGKILL)
