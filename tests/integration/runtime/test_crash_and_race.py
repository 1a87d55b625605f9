"""Real processes: SIGKILL in the middle of a settle, settle races across them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from returns.result import Failure, Success

from goatherd.domain import (
    OutputClaimed,
    OutputConsumedError,
    OutputSettled,
    OutputState,
)
from goatherd.infrastructure.store import SQLiteTraceStore
from tests.integration.runtime.support import sealed_output
from tests.integration.runtime.worker import recover

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[3]


def worker(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.integration.runtime.worker", *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def schema_entries(store: SQLiteTraceStore, owner: str, schema: str) -> int:
    return sum(
        1 for e in store.read_path(owner) if e.record.envelope.schema_ref == schema
    )


def wait_for(path: Path, proc: subprocess.Popen[str], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if proc.poll() is not None:
            raise AssertionError(f"worker exited early: {proc.communicate()}")
        if time.monotonic() > deadline:
            proc.kill()
            proc.communicate()
            raise AssertionError("worker never reached the boundary")
        time.sleep(0.01)


def test_a_settle_killed_after_its_effect_is_finished_exactly_once_by_a_retry(
    tmp_path,
):
    db, repo, out_id = sealed_output(tmp_path)
    marker = tmp_path / "effect-landed"
    proc = worker(
        str(db), str(repo), out_id, "7001", "--hang-after-effect", str(marker)
    )
    wait_for(marker, proc)
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate()
    assert proc.returncode == -signal.SIGKILL
    assert (repo / "answer.txt").read_bytes() == b"42\n"  # the effect stands
    with SQLiteTraceStore(db) as store:
        mgr = recover(store, str(repo), "agent:main")
        assert mgr.output(out_id).state is OutputState.UNCONSUMED  # type: ignore[union-attr]
        assert mgr.output(out_id).claimed_by == marker.read_text()  # type: ignore[union-attr]
        other = mgr.settle(out_id, "selected", seq=9999)
        assert isinstance(other, Failure)
        assert isinstance(other.failure(), OutputConsumedError)
        assert mgr.settle(out_id, "selected", seq=7001) == Success(None)
        assert mgr.settle(out_id, "selected", seq=7001) == Success(None)
        assert mgr.output(out_id).state is OutputState.SELECTED  # type: ignore[union-attr]
        assert schema_entries(store, out_id, OutputClaimed.SCHEMA) == 1
        assert schema_entries(store, out_id, OutputSettled.SCHEMA) == 1
    assert (repo / "answer.txt").read_bytes() == b"42\n"


def test_two_processes_of_four_threads_and_eight_local_threads_settle_once(tmp_path):
    db, repo, out_id = sealed_output(tmp_path)
    go = tmp_path / "go"
    procs = [
        worker(str(db), str(repo), out_id, str(seq), "--go", str(go), "--threads", "4")
        for seq in (1000, 2000)
    ]
    results: list[str] = []
    barrier = threading.Barrier(8)

    def local(index: int) -> None:
        with SQLiteTraceStore(db) as store:
            mgr = recover(store, str(repo), "agent:main")
            barrier.wait()
            result = mgr.settle(out_id, "selected", seq=3000 + index)
            results.append(
                "Success"
                if isinstance(result, Success)
                else type(result.failure()).__name__
            )

    threads = [threading.Thread(target=local, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    go.write_text("go")
    for thread in threads:
        thread.join()
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        results += [
            line.split()[1] for line in out.splitlines() if line.startswith("RESULT")
        ]
    assert len(results) == 16
    assert results.count("Success") == 1, results
    assert set(results) - {"Success"} <= {"OutputConsumedError", "OutputClaimedError"}
    with SQLiteTraceStore(db) as store:
        assert schema_entries(store, out_id, OutputClaimed.SCHEMA) == 1
        assert schema_entries(store, out_id, OutputSettled.SCHEMA) == 1
    assert (repo / "answer.txt").read_bytes() == b"42\n"


def test_a_settler_with_a_stale_fold_learns_the_output_was_consumed(tmp_path):
    # Two processes' views: each recovered the sealed output before either
    # settled. The loser's cached fold still says "unconsumed"; it must be told
    # the output was consumed, not that the (now merged) child is inactive.
    db, repo, out_id = sealed_output(tmp_path)
    with SQLiteTraceStore(db) as one, SQLiteTraceStore(db) as two:
        winner = recover(one, str(repo), "agent:main")
        loser = recover(two, str(repo), "agent:main")
        assert loser.output(out_id).state is OutputState.UNCONSUMED  # type: ignore[union-attr]
        assert winner.settle(out_id, "selected", seq=1) == Success(None)
        late = loser.settle(out_id, "selected", seq=2)
        assert isinstance(late, Failure)
        assert isinstance(late.failure(), OutputConsumedError), late.failure()
    assert (repo / "answer.txt").read_bytes() == b"42\n"
