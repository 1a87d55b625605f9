"""One count, one word: ``stats``, ``log`` and the trace UI agree on a trace.

A *record* is one content-addressed record (witnesses included), a *path
entry* one placement of a record on an owner path (a fork sits on two), a
*log entry* a path entry with a log position (all but the witnesses').
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from goatherd.cli import main
from goatherd.infrastructure.store import open_trace_store_read_only
from goatherd.infrastructure.traceui import TraceUiServer
from tests.cli.test_lifecycle import _session

pytestmark = pytest.mark.integration  # git worktrees


def test_stats_log_and_the_trace_ui_count_alike(tmp_path: Path, capsys) -> None:
    db = str(tmp_path / "trace.sqlite")
    _session(db, tmp_path)
    assert main(["stats", "--db", db, "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["records"] == sum(stats["schemas"].values())
    assert stats["witnesses"] > 0
    assert stats["path_entries"] > stats["records"] - stats["witnesses"]  # forks
    assert main(["log", "--db", db]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == stats["log_positions"]
    assert main(["stats", "--db", db]) == 0
    text = capsys.readouterr().out
    assert f"({stats['witnesses']} of them witnesses)" in text
    assert "fact" not in text
    with (
        open_trace_store_read_only(db) as store,
        TraceUiServer(store) as server,
        httpx.Client(base_url=server.url) as client,
    ):
        health = client.get("/api/health").json()
        page = client.get("/api/records", params={"path": ""}).json()
    assert health["records"] == stats["records"]
    assert page["count"] == len(page["records"]) == stats["path_entries"]
    logged = [r for r in page["records"] if r.get("position") is not None]
    assert len(logged) == stats["log_positions"]
