"""Two demos collide in one directory; the shell cleans up what they leave.

The second ``goatherd demo`` starts while the first is mid-session: it
resumes the session the trace records and runs a round of its own, and the
first settles its winner meanwhile. Whatever the collision leaves open
(active attempts, unconsumed outputs) is ended as a user would, through
``goatherd`` commands, and the trace verifies.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.integration

DELAYS = (0.3, 0.6, 0.0, 0.3, 0.6, 0.0)


def _goatherd(*argv: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "goatherd", *argv],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )


def _demo(directory: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "goatherd", "demo", "--dir", str(directory)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def _strays(env: dict[str, str]) -> tuple[list[str], list[str]]:
    done = _goatherd("scopes", "--json", env=env)
    assert done.returncode == 0, done.stderr
    tree: dict[str, Any] = json.loads(done.stdout)
    children = [
        s["id"] for s in tree["scopes"] if s["parent"] and s["state"] == "active"
    ]
    outputs = [
        o["id"]
        for s in tree["scopes"]
        for o in s["outputs"]
        if o["state"] == "unconsumed"
    ]
    return children, outputs


def _collide(
    directory: Path, env: dict[str, str], delay: float
) -> tuple[list[str], list[str], str]:
    """Run two demos ``delay`` s apart; return the strays and what they said."""
    first = _demo(directory)
    try:
        time.sleep(delay)
        second = _demo(directory)
        _, said = second.communicate(timeout=300)
    finally:
        _, said_first = first.communicate(timeout=300)
    said = f"{said_first.strip()} | {said.strip()}"
    if not (directory / "trace.sqlite").exists():
        return [], [], said  # both stopped before a trace (the project raced)
    return (*_strays(env), said)


def _clean(env: dict[str, str]) -> None:
    outputs = _strays(env)[1]
    for output in outputs:
        done = _goatherd("settle", output, "discard", env=env)
        assert done.returncode == 0, done.stderr
    for scope in _strays(env)[0]:
        done = _goatherd("discard", scope, env=env)
        assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("delay", DELAYS[:3])
def test_two_collided_demos_leave_a_trace_the_shell_can_finish(
    tmp_path: Path, delay: float
) -> None:
    # Whether the second session's winner still applies depends on the phase
    # the collision hits: both winners write the same fix, which a three-way
    # apply accepts (ADR 0083), so often nothing is left; when the phase
    # leaves attempts or outputs open, the shell ends each exactly once.
    directory = tmp_path / "demo"
    env = {**os.environ, "GOATHERD_DB": str(directory / "trace.sqlite")}
    said = _collide(directory, env, delay)[2]
    if not (directory / "trace.sqlite").exists():
        pytest.skip(f"both demos stopped before a trace: {said}")
    _clean(env)
    assert _strays(env) == ([], []), said
    verified = _goatherd("verify", env=env)
    assert verified.returncode == 0, verified.stderr
