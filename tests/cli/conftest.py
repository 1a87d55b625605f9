"""Fixtures for the CLI tests: a small real trace file."""

from __future__ import annotations

from pathlib import Path

import pytest

import goatherd
from goatherd.domain.records import AppendBatch, AppendGroup, CutSpec, RecordDraft
from goatherd.domain.workspace import WorkspaceState
from goatherd.infrastructure.store import SQLiteTraceStore

CTX = goatherd.TRUSTED_APPEND_CONTEXT


def build_trace(path: Path) -> dict[str, str]:
    """Append a small agent session with a frontier and a checkpoint blob."""
    with SQLiteTraceStore(str(path)) as store:
        call = store.append(
            CTX,
            AppendBatch(
                "demo:call:1",
                (
                    AppendGroup(
                        "agent:main",
                        fact_drafts=(
                            RecordDraft(
                                "declaration",
                                "yaah.tool.bash.v1",
                                {"cmd": "pytest -q && echo \u2603", "n": 1.5},
                                kind_label="bash",
                            ),
                        ),
                    ),
                ),
            ),
        )
        result = store.append(
            CTX,
            AppendBatch(
                "demo:result:1",
                (
                    AppendGroup(
                        "agent:main:sub",
                        causal_parents=call.fact_ids,
                        fact_drafts=(
                            RecordDraft(
                                "capture",
                                "yaah.tool.bash.applied.v1",
                                {"success": True},
                            ),
                        ),
                    ),
                    AppendGroup(
                        "other",
                        fact_drafts=(
                            RecordDraft("capture", "note.v1", {"text": "hi"}),
                        ),
                    ),
                ),
            ),
        )
        store.publish_cut(CTX, CutSpec("frontier:demo", "agent:main", call.fact_ids[0]))
        store.persist_checkpoint_blob(
            "cp:agent:main:7",
            "scope:agent:main",
            7,
            WorkspaceState("memory", "r1", {"files": {}}),
            b"snapshot",
            1_700_000_000_000_000_000,
        )
    return {"call": call.fact_ids[0], "result": result.fact_ids[0]}


@pytest.fixture
def trace_file(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    path = tmp_path / "trace.sqlite"
    return path, build_trace(path)
