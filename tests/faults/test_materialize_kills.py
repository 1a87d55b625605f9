"""Materialize under SIGKILL: each delivery does what docs/materialize.md says.

A worker (``tests/faults/materialize_worker.py``) materializes a row of
intents, one effect each; it is SIGKILLed at least 30 times at random points
(most a random few milliseconds after an effect became visible, the window
between the effect and its ledger row; the rest a random delay after the
start) and restarted, then run to the end. On SQLite and PostgreSQL, whose
ledgers differ:

* at most once (the workspace exec with ``exec_delivery="at_most_once"``): no
  command ever runs twice; an interrupted one is in doubt, never re-run;
* exactly once (the KV substrate): every put is written exactly once;
* at least once (the workspace exec by default): a completed intent never runs
  again, and an interrupted one may run twice.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from goatherd.infrastructure.audit.verify import verify_trace
from goatherd.infrastructure.sandbox.landlock import landlock_abi
from goatherd.infrastructure.store import open_trace_store

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
KILLS = 30
# More intents than kills can use up, so that every kill lands in the row: a
# quiet machine ran all of 160 before the 30th kill (a kill may wait 1.8 s).
COUNT = 400
# A KV put is quicker than a command: its worker
# gets far more intents (and shorter random waits), or an idle machine
# finishes all of them before the thirtieth kill.
KV_COUNT = 400
KV_WAIT_S = 0.3


def count_of(mode: str) -> int:
    """How many intents the worker of ``mode`` declares."""
    return KV_COUNT if mode == "exactly_once" else COUNT


DEADLINE_S = 400

needs_landlock = pytest.mark.skipif(
    landlock_abi() < 1, reason="the exec modes run confined by Landlock"
)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "postgres":
        return str(request.getfixturevalue("postgres_url"))  # a fresh database
    return f"sqlite:///{tmp_path / 'trace.sqlite'}"


@pytest.fixture
def world(tmp_path: Path) -> Path:
    """A git repository (the exec's workspace) that also holds the KV world."""
    repo = tmp_path / "world"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "init"], check=True)
    return repo


def exec_runs(world: Path) -> Counter[int]:
    """How many times each intent's command ran (its lines in ``runs.log``)."""
    log = world / "runs.log"
    if not log.exists():
        return Counter()
    return Counter(int(line) for line in log.read_text().split())


def kv_writes(world: Path) -> Counter[int]:
    """How many times each put's key was written (counted by triggers)."""
    path = world / "kv.sqlite"
    if not path.exists():
        return Counter()
    with sqlite3.connect(path, timeout=30) as conn:
        if not conn.execute(
            "SELECT 1 FROM sqlite_master WHERE name = 'writes'"
        ).fetchone():
            return Counter()
        rows = conn.execute("SELECT key, count(*) FROM writes GROUP BY key").fetchall()
    return Counter({int(key[1:]): int(n) for key, n in rows})


def count_kv_writes(world: Path) -> None:
    """Create the world table and triggers that log every write to it."""
    with sqlite3.connect(world / "kv.sqlite") as conn:
        conn.executescript(
            "CREATE TABLE IF NOT EXISTS kv "
            "(key TEXT PRIMARY KEY, value_json TEXT NOT NULL);"
            "CREATE TABLE writes (key TEXT NOT NULL);"
            "CREATE TRIGGER kv_insert AFTER INSERT ON kv "
            "BEGIN INSERT INTO writes VALUES (new.key); END;"
            "CREATE TRIGGER kv_update AFTER UPDATE ON kv "
            "BEGIN INSERT INTO writes VALUES (new.key); END;"
        )


def start(url: str, mode: str, world: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            *(sys.executable, "-m", "tests.faults.materialize_worker"),
            *(url, mode, str(world), str(count_of(mode))),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )


def kill_loop(
    url: str, mode: str, world: Path, progress: Callable[[], int], seed: int
) -> int:
    """SIGKILL the worker ``KILLS`` times at random points; return the kills.

    Two kills in three wait for the next effect to be visible, then a random
    0-40 ms: inside the window between an effect and its ledger row. The
    third is a random 0-1.8 s after the start (the start, the declaration, a
    stored receipt, an exec on its way).
    """
    rng = random.Random(seed)
    deadline = time.monotonic() + DEADLINE_S
    kills = 0
    while kills < KILLS:
        assert time.monotonic() < deadline, f"only {kills} kills in {DEADLINE_S} s"
        seen = progress()
        worker = start(url, mode, world)
        if kills % 3 == 2:
            wait = KV_WAIT_S if mode == "exactly_once" else 1.8
            ends = time.monotonic() + rng.uniform(0, wait)
            while time.monotonic() < ends and worker.poll() is None:
                time.sleep(0.002)
        else:
            while progress() == seen and worker.poll() is None:
                assert time.monotonic() < deadline, "the worker made no progress"
                time.sleep(0.001)
            time.sleep(rng.uniform(0, 0.04))
        if worker.poll() is not None:
            out, err = worker.communicate()
            assert worker.returncode == 0, err.decode()
            assert out.strip() == b"done"
            pytest.fail(f"the worker finished after {kills} kills: raise count_of")
        os.killpg(worker.pid, signal.SIGKILL)
        worker.communicate()
        kills += 1
    return kills


def finish(url: str, mode: str, world: Path) -> None:
    worker = start(url, mode, world)
    out, err = worker.communicate(timeout=300)
    assert worker.returncode == 0, err.decode()
    assert out.strip() == b"done"


def settled(read: Callable[[], Counter[int]]) -> Counter[int]:
    """Read ``read`` once it has not changed for a second (orphans done)."""
    last, since = read(), time.monotonic()
    while time.monotonic() - since < 1.0:
        time.sleep(0.1)
        now = read()
        if now != last:
            last, since = now, time.monotonic()
    return last


def receipts(url: str, count: int = COUNT) -> list[dict[str, object]]:
    """Every intent's ledger receipt; on SQLite, the trace verifies too.

    (On PostgreSQL a killed transaction may leave a hole in the commit
    numbers, which verify names, ADR 0036.)
    """
    with open_trace_store(url) as store:
        rows = [
            store.read_completed_materialization(f"apply:{i}") for i in range(count)
        ]
        if url.startswith("sqlite"):
            report = verify_trace(store)
            assert report.ok, report.problems
    assert all(row is not None for row in rows), "an intent has no ledger row"
    return [json.loads(row[1]) for row in rows if row is not None]


@needs_landlock
def test_at_most_once_never_runs_a_command_twice(url: str, world: Path) -> None:
    kills = kill_loop(url, "at_most_once", world, lambda: len(exec_runs(world)), 1)
    finish(url, "at_most_once", world)
    runs = settled(lambda: exec_runs(world))
    assert kills >= KILLS
    twice = sorted(i for i, n in runs.items() if n > 1)
    assert twice == [], f"commands run more than once: {twice}"
    stored = receipts(url)
    doubted = [
        i for i, r in enumerate(stored) if "in doubt" in str(r["failure_reason"])
    ]
    for i, receipt in enumerate(stored):
        if receipt["outcome"] == "success":
            assert runs[i] == 1, f"intent {i} completed but ran {runs[i]} times"
        else:  # abandoned in doubt: it ran once, or never
            assert i in doubted
            assert receipt["outcome"] == "split_state"
    # The kills did land in the window: some intents were left in doubt.
    assert doubted, "no kill interrupted a command before its ledger row"


def test_exactly_once_writes_every_put_once(url: str, world: Path) -> None:
    count_kv_writes(world)
    kills = kill_loop(url, "exactly_once", world, lambda: len(kv_writes(world)), 2)
    finish(url, "exactly_once", world)
    writes = kv_writes(world)
    assert kills >= KILLS
    assert writes == Counter(dict.fromkeys(range(KV_COUNT), 1))
    assert all(r["outcome"] == "success" for r in receipts(url, KV_COUNT))


@needs_landlock
def test_at_least_once_reruns_only_what_did_not_complete(url: str, world: Path) -> None:
    kills = kill_loop(url, "at_least_once", world, lambda: len(exec_runs(world)), 3)
    finish(url, "at_least_once", world)
    runs = settled(lambda: exec_runs(world))
    assert kills >= KILLS
    assert set(runs) == set(range(COUNT))  # every command ran at least once
    assert all(r["outcome"] == "success" for r in receipts(url))
    # What the docs say: an effect interrupted before its ledger row may run
    # again, and did here ...
    assert any(n > 1 for n in runs.values()), "no interrupted command re-ran"
    # ... while a completed intent never runs again.
    finish(url, "at_least_once", world)
    assert settled(lambda: exec_runs(world)) == runs
