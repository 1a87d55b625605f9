"""Two demos collide in one directory; the shell cleans up what they leave.

The second ``goatherd demo`` starts while the first is mid-session: it
resumes the session the trace records and runs a round of its own, and the
first settles its winner meanwhile; the second's winner no longer applies,
so it leaves active attempts and unconsumed outputs behind (issue 16).
Everything after that runs as a user would, through ``goatherd`` commands.
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


def test_the_leftovers_of_two_collided_demos_are_cleaned_from_the_shell(
    tmp_path: Path,
) -> None:
    children: list[str] = []
    outputs: list[str] = []
    said: list[str] = []
    # The runs must overlap in the right phase; about two in three do here.
    for attempt, delay in enumerate(DELAYS):
        directory = tmp_path / f"demo-{attempt}"
        env = {**os.environ, "GOATHERD_DB": str(directory / "trace.sqlite")}
        children, outputs, what = _collide(directory, env, delay)
        said.append(what)
        if children and outputs:
            break
    assert children, f"no collision left a stray scope: {said}"
    assert outputs, f"no collision left an unconsumed output: {said}"
    for output in outputs:
        done = _goatherd("settle", output, "discard", env=env)
        assert done.returncode == 0, done.stderr
    for scope in _strays(env)[0]:
        done = _goatherd("discard", scope, env=env)
        assert done.returncode == 0, done.stderr
    assert _strays(env) == ([], [])
    verified = _goatherd("verify", env=env)
    assert verified.returncode == 0, verified.stderr
