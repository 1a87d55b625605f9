"""An output whose own path or whose scope's path is unreadable is not listed.

A runtime record that does not decode (stored the way an older writer did,
with the door's runtime check taken out) hides the output from
``RuntimeModel.outputs()`` when it sits on the output's path or on its scope's
path, and only that output: another scope's output stays listed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from goatherd.application import SandboxSpec, ScopeManager
from goatherd.domain import (
    TRUSTED_APPEND_CONTEXT,
    AppendBatch,
    AppendGroup,
    OutputSettled,
    RecordDraft,
)
from goatherd.infrastructure.bootstrap import scope_manager_for
from goatherd.infrastructure.sandbox.memory import MemorySandbox, MemorySandboxConfig
from goatherd.infrastructure.store import SQLiteTraceStore, plan


def _sealed(mgr: ScopeManager, main: MemorySandbox, owner: str) -> str:
    wt = MemorySandbox(MemorySandboxConfig(repository=main.repository))
    wt.create(SandboxSpec())
    child = mgr.fork_isolated("scope:root", owner, None, wt).unwrap()
    wt.write_file(f"{owner}.txt", b"x\n")
    return mgr.seal(child.id).unwrap().id


@pytest.mark.parametrize("where", ["output", "scope"])
def test_an_unreadable_path_hides_only_its_output(
    tmp_path: Path, where: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with SQLiteTraceStore(tmp_path / "trace.db") as store:
        main = MemorySandbox(MemorySandboxConfig(files={"a.txt": b"1\n"}))
        main.create(SandboxSpec())
        mgr = scope_manager_for(store)
        mgr.create("root", main).unwrap()
        bad = _sealed(mgr, main, "bad")
        good = _sealed(mgr, main, "good")
        listed = {o.output_id for o in mgr.context.model.outputs()}
        assert {bad, good} <= listed
        draft = RecordDraft(
            "capture", OutputSettled.SCHEMA, {"output_id": bad, "action": 5}
        )
        path = bad if where == "output" else "bad"
        with monkeypatch.context() as patched:
            patched.setattr(plan, "_refuse_unreadable_runtime_records", lambda *_: None)
            store.append(
                TRUSTED_APPEND_CONTEXT,
                AppendBatch("old-writer", (AppendGroup(path, fact_drafts=(draft,)),)),
            )
        fresh = scope_manager_for(store)
        fresh.context.model.refresh()
        assert set(fresh.context.model.unreadable()) == {path}
        listed = {o.output_id for o in fresh.context.model.outputs()}
        assert bad not in listed
        assert good in listed
