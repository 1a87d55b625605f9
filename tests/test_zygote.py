"""The zygote the kill-at-every-boundary tests fork their processes from.

A fork must look like ``python -m module`` to the caller: its argv,
environment, working directory and streams are the caller's, and the caller
sees it end as it ended (exit code or signal). Killing the launcher kills it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.zygote import Zygote, zygote

pytestmark = pytest.mark.integration

PROBE = "tests.zygote_probe"


@pytest.fixture(scope="module")
def forks() -> Iterator[Zygote]:
    with zygote(["json"]) as started:
        yield started


def test_a_fork_gets_the_callers_argv_environment_directory_and_streams(
    forks: Zygote, tmp_path: Path
) -> None:
    done = subprocess.run(
        forks.command(PROBE, "echo", "a b", "c"),
        input="from stdin",
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={
            **os.environ,
            "PYTHONPATH": str(Path(__file__).parents[1]),
            "PROBE_VALUE": "v",
        },
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"{tmp_path} v ['a b', 'c'] from stdin\n"
    assert done.stderr == "to stderr\n"


@pytest.mark.parametrize("code", [0, 3, 77])
def test_the_caller_sees_the_forks_exit_code(forks: Zygote, code: int) -> None:
    done = subprocess.run(forks.command(PROBE, "exit", str(code)), timeout=60)
    assert done.returncode == code


def test_an_uncaught_exception_exits_1_with_its_traceback(forks: Zygote) -> None:
    done = subprocess.run(
        forks.command(PROBE, "raise"), capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 1
    assert "RuntimeError: boom" in done.stderr


def test_a_fork_killed_by_a_signal_ends_its_caller_by_that_signal(
    forks: Zygote,
) -> None:
    done = subprocess.run(forks.command(PROBE, "kill"), timeout=60)
    assert done.returncode == -signal.SIGKILL


@contextlib.contextmanager
def _waiting(forks: Zygote) -> Iterator[tuple[subprocess.Popen[str], int]]:
    """A fork that waits for a signal: its launcher and the fork's pid."""
    with subprocess.Popen(
        forks.command(PROBE, "pid"), stdout=subprocess.PIPE, text=True
    ) as launcher:
        assert launcher.stdout is not None
        yield launcher, int(launcher.stdout.readline())


def test_killing_the_launcher_kills_the_fork(forks: Zygote) -> None:
    with _waiting(forks) as (launcher, pid):
        launcher.kill()
        assert launcher.wait(timeout=60) == -signal.SIGKILL
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.01)
    pytest.fail(f"the fork {pid} outlived its launcher")


def test_a_fork_runs_in_a_process_of_its_own(forks: Zygote) -> None:
    with _waiting(forks) as (launcher, pid):
        assert pid not in (os.getpid(), launcher.pid)
        os.kill(pid, signal.SIGTERM)
        assert launcher.wait(timeout=60) == -signal.SIGTERM
