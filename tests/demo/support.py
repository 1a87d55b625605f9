"""Helpers for the demo tests: run the command, read its trace and project."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from goatherd.demo.project import (
    FIXED_MEDIAN,
    PROJECT_MODULE,
    changed_paths,
    run_tests,
)
from goatherd.domain import OutputSettled
from goatherd.infrastructure.audit.verify import verify_trace
from goatherd.infrastructure.store import open_trace_store_read_only

DEMO_TIMEOUT = 120


def run_demo_process(directory: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``python -m goatherd demo --dir DIRECTORY ARGS`` in a subprocess."""
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    return subprocess.run(
        [sys.executable, "-m", "goatherd", "demo", "--dir", str(directory), *args],
        capture_output=True,
        text=True,
        timeout=DEMO_TIMEOUT,
        check=False,
        env=env,
    )


def log_of(trace: Path) -> list[tuple[int, str, str, dict[str, object]]]:
    """Every ordinary path entry: (position, owner, schema, payload)."""
    store = open_trace_store_read_only(trace)
    try:
        found: list[tuple[int, str, str, dict[str, object]]] = []
        after = -1
        while batch := store.read_log(after, 1000):
            for entry in batch:
                record = entry.record
                found.append(
                    (
                        entry.position,
                        record.trace_owner_id,
                        record.envelope.schema_ref,
                        dict(record.payload),
                    )
                )
            after = batch[-1].position
        return found
    finally:
        store.close()


def settlements(trace: Path) -> list[str]:
    """The action of every settlement record (each record counted once)."""
    seen: dict[str, str] = {}
    for _, _, schema, payload in log_of(trace):
        if schema == OutputSettled.SCHEMA:
            seen[str(payload["output_id"])] = str(payload["action"])
    return sorted(seen.values())


def count_schema(trace: Path, schema: str) -> int:
    """How many distinct records with ``schema`` the trace holds."""
    store = open_trace_store_read_only(trace)
    try:
        return len({e.record.record_id for e in store.scan_records_by_schema(schema)})
    finally:
        store.close()


def verify_ok(trace: Path) -> bool:
    """Whether ``goatherd verify`` finds the trace sound."""
    store = open_trace_store_read_only(trace)
    try:
        return verify_trace(store).ok
    finally:
        store.close()


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, capture_output=True, text=True, check=True
    ).stdout


def assert_final_state(directory: Path) -> None:
    """The project holds exactly the winner's change, and nothing is left over."""
    project = directory / "project"
    assert changed_paths(project) == (PROJECT_MODULE,)
    assert (project / PROJECT_MODULE).read_text(encoding="utf-8") == FIXED_MEDIAN
    assert run_tests(project).passed
    assert git(project, "log", "--format=%H").count("\n") == 1
    assert list((directory / "worktrees").iterdir()) == []
    assert git(project, "worktree", "list", "--porcelain").count("worktree ") == 1
    trace = directory / "trace.sqlite"
    assert settlements(trace).count("selected") == 1
    assert verify_ok(trace)
