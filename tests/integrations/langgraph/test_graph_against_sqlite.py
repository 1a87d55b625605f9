"""A real StateGraph on GoatherdSaver behaves as on LangGraph's own SQLite saver.

Each phase (first input to an interrupt, resume, time-travel fork) runs in a
new process that reopens the trace, and its output, state and whole state
history must equal what the same graph shows on ``SqliteSaver``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from goatherd.infrastructure.store import open_trace_store
from goatherd.integrations.langgraph import SCHEMA_CHECKPOINT, namespace_path

pytestmark = pytest.mark.integration  # every phase runs in a new process

ROOT = Path(__file__).resolve().parents[3]
PHASES = ("start", "resume", "fork")


def run_phase(kind: str, location: str, phase: str) -> dict[str, Any]:
    module = "tests.integrations.langgraph.graph_run"
    done = subprocess.run(
        [sys.executable, "-m", module, kind, location, phase],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, Any] = json.loads(done.stdout)
    return result


@pytest.fixture(scope="module")
def sqlite_saver_phases(tmp_path_factory: pytest.TempPathFactory) -> list[Any]:
    location = str(tmp_path_factory.mktemp("lg") / "langgraph.sqlite")
    return [run_phase("sqlite", location, phase) for phase in PHASES]


def test_interrupt_resume_in_a_new_process_and_fork_match_the_sqlite_saver(
    trace_url: str, sqlite_saver_phases: list[Any]
) -> None:
    ours = [run_phase("goatherd", trace_url, phase) for phase in PHASES]
    start, resume, fork = ours
    assert start["next"] == ["review"]
    assert start["history"][0]["interrupts"] == [{"count": 3, "question": "approve?"}]
    assert resume["output"]["decision"] == "approved"
    assert fork["output"]["decision"] == "rejected"
    assert fork["output"]["count"] == 6
    for phase, mine, theirs in zip(PHASES, ours, sqlite_saver_phases, strict=True):
        assert mine == theirs, f"phase {phase} differs from SqliteSaver"
    assert_the_fork_is_a_child_path_citing_its_parent(trace_url)


def assert_the_fork_is_a_child_path_citing_its_parent(trace_url: str) -> None:
    store = open_trace_store(trace_url)
    try:
        entries = store.scan_records_by_schema(SCHEMA_CHECKPOINT)
    finally:
        store.close()
    main = namespace_path("t", "")
    by_id = {e.record.record_id: e.record for e in entries}
    forks = [
        e.record for e in entries if e.record.trace_owner_id.startswith(main + ":fork=")
    ]
    assert forks, "update_state from an old checkpoint made no fork path"
    first = min(forks, key=lambda r: r.owner_ordinal)
    parents = [by_id[p] for p in first.envelope.caused_by_record_ids if p in by_id]
    assert [p.trace_owner_id for p in parents] == [main]
    assert first.payload["parent_checkpoint_id"] == parents[0].payload["checkpoint_id"]
