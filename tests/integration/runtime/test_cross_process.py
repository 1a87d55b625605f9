"""Consume-once and fast-forward across real processes on one trace.

Every racer is a separate Python process (a fork of one Python that imported
the racer, ``tests/zygote.py``) that opens the trace, folds it and waits on a
start file; then all of them run their command at once. The
trace must end with exactly one winner, every loser with a typed failure
and no workspace effect, and the workspace equal to what the trace records.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from goatherd.application import ScopeManager
from goatherd.domain import (
    CheckpointClaimed,
    CheckpointRestored,
    CheckpointState,
    OutputClaimed,
    OutputSettled,
    OutputState,
)
from goatherd.infrastructure.audit.verify import verify_trace
from goatherd.infrastructure.bootstrap import scope_manager_for
from goatherd.infrastructure.store import SQLiteTraceStore, open_trace_store
from tests.integration.runtime.racer import resolver
from tests.integration.runtime.support import (
    make_repo,
    root_sandbox,
    worktree,
)
from tests.zygote import Zygote, zygote

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[3]
RACER = "tests.integration.runtime.racer"


def open_store(trace: str):
    return open_trace_store(trace) if "://" in trace else SQLiteTraceStore(trace)


@pytest.fixture(scope="module")
def forks() -> Iterator[Zygote]:
    """The racers: forks of one Python that imported them (``tests/zygote.py``)."""
    with zygote([RACER]) as started:
        yield started


def race(
    trace: str,
    repo: Path,
    go: Path,
    commands: list[list[str]],
    forks: Zygote,
    *,
    hold: bool = True,
) -> list[str]:
    """Run the racers together; ``hold`` releases their claims at one instant."""
    held = go.parent / "held"
    held.mkdir()
    env = dict(os.environ, RACER_HOLD=str(held)) if hold else None
    procs = [
        subprocess.Popen(
            forks.command(RACER, trace, str(repo), str(go), *command),
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for command in commands
    ]
    time.sleep(1.0)  # every racer has opened the trace and folded it
    go.write_text("go")
    if hold:
        _release_when_all_hold(held, procs)
    outputs = []
    for proc in procs:
        out, err = proc.communicate(timeout=180)
        assert proc.returncode == 0, err
        outputs.append(out)
    return outputs


def _release_when_all_hold(held: Path, procs: list[subprocess.Popen[str]]) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        waiting = sum(1 for p in held.iterdir() if p.suffix != ".partial")
        running = sum(proc.poll() is None for proc in procs)
        if waiting >= running:  # every racer still running is at its claim
            break
        time.sleep(0.01)
    (held / "release").write_text("go")


def results(outputs: list[str]) -> Counter[str]:
    return Counter(
        line.split()[1]
        for out in outputs
        for line in out.splitlines()
        if line.startswith("RESULT")
    )


def occurrences(store, schema: str) -> int:
    """Distinct records of ``schema`` (a record sits on several paths)."""
    seen = {
        entry.record.record_id
        for entry in store.read_log(-1, 100_000)
        if entry.record.envelope.schema_ref == schema
    }
    return len(seen)


def siblings(
    trace: str, tmp_path: Path, count: int, *, same_file: bool
) -> tuple[Path, list[str]]:
    """Seal ``count`` isolated children of one root, each with its own change."""
    repo = make_repo(tmp_path / "repo", {"base.txt": b"base\n"})
    outs = []
    with open_store(trace) as store:
        mgr = scope_manager_for(store)
        root = mgr.create("agent:main", root_sandbox(repo)).unwrap()
        for index in range(count):
            wt = worktree(repo, tmp_path / f"wt-{index}")
            child = mgr.fork_isolated(root.id, f"agent:try-{index}", None, wt).unwrap()
            name = "answer.txt" if same_file else f"answer-{index}.txt"
            (tmp_path / f"wt-{index}" / name).write_bytes(f"{index}\n".encode())
            outs.append(mgr.seal(child.id).unwrap().id)
    return repo, outs


def state_of(mgr: ScopeManager, output_id: str) -> OutputState:
    output = mgr.output(output_id)
    assert output is not None
    return output.state


def files(repo: Path) -> dict[str, bytes]:
    return {
        p.relative_to(repo).as_posix(): p.read_bytes()
        for p in sorted(repo.rglob("*"))
        if p.is_file() and ".git" not in p.relative_to(repo).parts
    }


def test_sibling_outputs_selected_by_several_processes_have_one_winner(
    trace, tmp_path, forks
):
    repo, outs = siblings(trace, tmp_path, 4, same_file=False)
    go = tmp_path / "go"
    outputs = race(
        trace,
        repo,
        go,
        [["settle", out, "selected", str(9000 + i)] for i, out in enumerate(outs)],
        forks,
    )
    assert results(outputs) == Counter({"Success": 1, "ParentMovedError": 3})
    with open_store(trace) as store:
        mgr = scope_manager_for(store, resolver=resolver(str(repo)))
        states = {out: mgr.output(out).state for out in outs}  # type: ignore[union-attr]
        winners = [
            out for out, state in states.items() if state is OutputState.SELECTED
        ]
        assert len(winners) == 1
        assert sorted(s.value for s in states.values()).count("unconsumed") == 3
        index = outs.index(winners[0])
        # The parent holds the winner's change and no loser's.
        assert files(repo) == {
            "base.txt": b"base\n",
            f"answer-{index}.txt": f"{index}\n".encode(),
        }
        # ... and the trace records exactly that state for the parent.
        root = mgr.context.model.scope("agent:main")
        assert root.workspace_claim == ""
        assert (
            root.workspace_digest
            == mgr.capture_workspace("scope:agent:main").unwrap().digest()
        )
        assert occurrences(store, OutputClaimed.SCHEMA) == 1
        assert occurrences(store, OutputSettled.SCHEMA) == 1
        assert verify_trace(store).ok


def test_one_output_settled_by_eight_processes_settles_once(trace, tmp_path, forks):
    repo, (out,) = siblings(trace, tmp_path, 1, same_file=True)
    go = tmp_path / "go"
    outputs = race(
        trace,
        repo,
        go,
        [["settle", out, "selected", str(100 + i)] for i in range(8)],
        forks,
    )
    counts = results(outputs)
    assert counts["Success"] == 1
    # The others lost the claim (another intent holds it) or found it consumed.
    assert sum(counts.values()) == 8
    assert set(counts) <= {"Success", "OutputClaimedError", "OutputConsumedError"}
    with open_store(trace) as store:
        mgr = scope_manager_for(store)
        assert mgr.output(out).state is OutputState.SELECTED  # type: ignore[union-attr]
        assert occurrences(store, OutputClaimed.SCHEMA) == 1
        assert occurrences(store, OutputSettled.SCHEMA) == 1
        assert verify_trace(store).ok
    assert files(repo) == {"base.txt": b"base\n", "answer.txt": b"0\n"}


def test_one_checkpoint_restored_by_eight_processes_restores_once(
    trace, tmp_path, forks
):
    repo = make_repo(tmp_path / "repo", {"base.txt": b"base\n"})
    with open_store(trace) as store:
        mgr = scope_manager_for(store)
        root = mgr.create("agent:main", root_sandbox(repo)).unwrap()
        cp = mgr.create_checkpoint(root.id, b"the conversation").unwrap()
    (repo / "base.txt").write_bytes(b"broken\n")
    (repo / "junk.txt").write_bytes(b"junk\n")
    go = tmp_path / "go"
    outputs = race(
        trace, repo, go, [["restore", cp.id, str(500 + i)] for i in range(8)], forks
    )
    counts = results(outputs)
    assert counts["Success"] == 1
    assert set(counts) <= {
        "Success",
        "CheckpointClaimedError",
        "CheckpointNotRestorableError",
    }
    snapshots = [
        line
        for out in outputs
        for line in out.splitlines()
        if line.startswith("SNAPSHOT")
    ]
    assert snapshots == [f"SNAPSHOT {b'the conversation'.hex()}"]
    assert files(repo) == {"base.txt": b"base\n"}
    with open_store(trace) as store:
        mgr = scope_manager_for(store)
        assert mgr.checkpoint(cp.id).state is CheckpointState.USED  # type: ignore[union-attr]
        assert occurrences(store, CheckpointClaimed.SCHEMA) == 1
        assert occurrences(store, CheckpointRestored.SCHEMA) == 1
        assert verify_trace(store).ok


def test_sibling_outputs_applied_by_several_processes_land_one_at_a_time(
    trace, tmp_path, forks
):
    repo, outs = siblings(trace, tmp_path, 3, same_file=False)
    go = tmp_path / "go"
    outputs = race(
        trace,
        repo,
        go,
        [["settle", out, "applied", str(700 + i)] for i, out in enumerate(outs)],
        forks,
    )
    counts = results(outputs)
    assert counts["Success"] >= 1
    assert set(counts) <= {"Success", "WorkspaceBusyError"}
    with open_store(trace) as store:
        mgr = scope_manager_for(store, resolver=resolver(str(repo)))
        landed = [
            i for i, out in enumerate(outs) if state_of(mgr, out) is OutputState.APPLIED
        ]
        assert len(landed) == counts["Success"]
        expected = {"base.txt": b"base\n"} | {
            f"answer-{i}.txt": f"{i}\n".encode() for i in landed
        }
        assert files(repo) == expected
        # Each landed apply recorded the base it landed on and its result; the
        # results chain: each base is the previous result.
        settled = [
            entry.record.payload
            for entry in store.read_path("agent:main")
            if entry.record.envelope.schema_ref == OutputSettled.SCHEMA
        ]
        assert len(settled) == len(landed)
        for before, after in itertools.pairwise(settled):
            assert after["base_digest"] == before["result_digest"]
        root = mgr.context.model.scope("agent:main")
        assert (
            root.workspace_digest
            == mgr.capture_workspace("scope:agent:main").unwrap().digest()
        )
        # The losers can settle now, one after another.
        for out in outs:
            if mgr.output(out).state is OutputState.UNCONSUMED:  # type: ignore[union-attr]
                assert mgr.settle(out, "applied").unwrap() is None
        assert verify_trace(store).ok
    assert set(files(repo)) == {
        "base.txt",
        "answer-0.txt",
        "answer-1.txt",
        "answer-2.txt",
    }
