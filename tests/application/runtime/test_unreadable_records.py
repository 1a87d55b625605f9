"""A runtime record that got in before the door checked it bricks one path, not all.

An older goatherd (or another writer) could store a runtime record its typed
event refuses. The store's door now refuses them, so the tests write one the
way the old writer did: through the store with the door's runtime check taken
out. A manager in a second process then recovers naming the record, every
command on the scope whose path holds it (or its checkpoints) fails with an
``UnreadableRecordError`` naming the record, every other scope keeps working;
``verify`` names the record too. On SQLite and PostgreSQL.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from goatherd.application import SandboxSpec
from goatherd.cli import main
from goatherd.domain import (
    TRUSTED_APPEND_CONTEXT,
    AppendBatch,
    AppendGroup,
    CheckpointCreated,
    OutputSettled,
    RecordDraft,
    WorkspaceState,
)
from goatherd.infrastructure.audit.verify import verify_trace
from goatherd.infrastructure.bootstrap import scope_manager_for
from goatherd.infrastructure.sandbox.memory import MemorySandbox, MemorySandboxConfig
from goatherd.infrastructure.store import open_trace_store, plan
from tests.infrastructure.backends import DURABLE_BACKENDS, backend_url

ROOT = Path(__file__).resolve().parents[3]
STATE = WorkspaceState("git", "1" * 40, {"head": "1" * 40})
OTHER = WorkspaceState("git", "2" * 40, {"head": "2" * 40})

BAD = {
    "wrong-typed field": RecordDraft(
        "capture", OutputSettled.SCHEMA, {"output_id": "out:x:1", "action": 5}
    ),
    "mismatched state_digest": RecordDraft(
        "declaration",
        CheckpointCreated.SCHEMA,
        {
            "checkpoint_id": "cp:agent:bad:7",
            "backend": "git",
            "revision": STATE.revision,
            "state_digest": OTHER.digest(),
            "has_snapshot": False,
            "state": STATE.to_json(),
        },
    ),
}


@pytest.fixture(params=DURABLE_BACKENDS)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    yield from backend_url(request.param, tmp_path)


def _sandbox() -> MemorySandbox:
    sb = MemorySandbox(MemorySandboxConfig(files={"a.txt": b"1\n"}))
    sb.create(SandboxSpec())
    return sb


def _write_as_an_old_writer(
    url: str, draft: RecordDraft, monkeypatch: pytest.MonkeyPatch
) -> str:
    """Create two roots, then store ``draft`` on ``agent:bad`` without the door."""
    with open_trace_store(url) as store:
        mgr = scope_manager_for(store)
        mgr.create("agent:good", _sandbox()).unwrap()
        mgr.create("agent:bad", _sandbox()).unwrap()
        with monkeypatch.context() as patched:
            patched.setattr(
                plan,
                "_refuse_unreadable_runtime_records",
                lambda *_: None,
                raising=False,
            )
            receipt = store.append(
                TRUSTED_APPEND_CONTEXT,
                AppendBatch(
                    "old-writer", (AppendGroup("agent:bad", fact_drafts=(draft,)),)
                ),
            )
        return receipt.fact_ids[0]


def _in_another_process(url: str, body: str) -> dict[str, object]:
    script = textwrap.dedent(
        f"""
        import json
        from goatherd.application import RecoverOptions, RecoveryStats, SandboxSpec
        from goatherd.infrastructure.bootstrap import scope_manager_for
        from goatherd.infrastructure.bootstrap import runtime_context_for
        from goatherd.infrastructure.sandbox.memory import (
            MemorySandbox, MemorySandboxConfig,
        )
        from goatherd.infrastructure.store import open_trace_store
        out = {{}}
        with open_trace_store({url!r}) as store:
        """
    ) + textwrap.indent(textwrap.dedent(body), "    ")
    script += "\nprint(json.dumps(out))\n"
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


@pytest.mark.parametrize("case", list(BAD))
def test_a_bad_record_stops_its_scope_and_no_other_in_a_second_process(
    url: str, case: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    record_id = _write_as_an_old_writer(url, BAD[case], monkeypatch)
    out = _in_another_process(
        url,
        """
        from goatherd.application import recover_scopes
        stats = RecoveryStats()
        recovered = recover_scopes(
            runtime_context_for(store), RecoverOptions(stats=stats)
        )
        out["recovered"] = type(recovered).__name__
        out["unreadable"] = list(getattr(stats, "unreadable", ()))
        mgr = scope_manager_for(store)
        good = mgr.append_fact("scope:agent:good", "app.note.v1", "note", {"n": 1})
        out["good"] = type(good).__name__
        sb = MemorySandbox(MemorySandboxConfig(files={"b.txt": b"2\\n"}))
        sb.create(SandboxSpec())
        fresh = mgr.create("agent:fresh", sb).unwrap()
        child = mgr.fork(fresh.id, "try")
        out["fork"] = type(child).__name__
        out["checkpoint"] = type(mgr.create_checkpoint(fresh.id, b"s")).__name__
        bad = mgr.append_fact("scope:agent:bad", "app.note.v1", "note", {"n": 1})
        out["bad"] = str(bad.failure())
        out["bad_type"] = type(bad.failure()).__name__
        out["scopes"] = [s.id for s in mgr.all_scopes()]
        restore = mgr.restore_checkpoint("cp:agent:bad:7")
        out["restore_type"] = type(restore.failure()).__name__
        """,
    )
    assert out["recovered"] == "Success"
    unreadable = out["unreadable"]
    assert isinstance(unreadable, list)
    assert len(unreadable) == 1
    line = str(unreadable[0])
    assert record_id in line
    assert "agent:bad" in line
    assert out["scopes"] == ["scope:agent:good", "scope:agent:fresh", "scope:try"]
    assert out["good"] == "Success"
    assert out["fork"] == "Success"
    assert out["checkpoint"] == "Success"
    assert out["bad_type"] == "UnreadableRecordError"
    assert out["restore_type"] == "UnreadableRecordError"
    assert record_id in str(out["bad"])
    assert "\n" not in str(out["bad"])
    with open_trace_store(url) as store:
        problems = [str(p) for p in verify_trace(store).problems]
    assert any(record_id in p for p in problems), problems


def test_goatherd_recover_names_the_unreadable_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'trace.db'}"
    record_id = _write_as_an_old_writer(url, BAD["wrong-typed field"], monkeypatch)
    assert main(["recover", str(tmp_path / "trace.db")]) == 0
    printed = capsys.readouterr().out
    assert "scope:agent:good" in printed
    [line] = [text for text in printed.splitlines() if text.startswith("unreadable")]
    assert record_id in line
    assert "payload.action must be a string" in line
    assert main(["recover", str(tmp_path / "trace.db"), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert [record_id in text for text in shown["unreadable"]] == [True]
