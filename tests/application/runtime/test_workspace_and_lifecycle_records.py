"""Workspace capture/apply records, and the intents halt and inject append under.

The advisory workspace records land on the scope's own path under
``<owner>:workspace:<kind label>:<seq>`` with the captured or applied state;
an apply on a workspace a settle has claimed is refused before it touches
anything. A retried halt or inject finds its committed intent
(``<owner>:halt:<seq>``, ``<owner>:inject:<seq>``) and records nothing more.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from returns.result import Failure, Success

from goatherd.application import SandboxSpec
from goatherd.domain import (
    GuidanceInjected,
    ScopeHalted,
    ScopeStateError,
    WorkspaceApplied,
    WorkspaceBusyError,
    WorkspaceCaptured,
)
from goatherd.infrastructure.bootstrap import scope_manager_for
from goatherd.infrastructure.sandbox.memory import MemorySandbox, MemorySandboxConfig
from goatherd.infrastructure.store import SQLiteTraceStore


class Died(BaseException):
    pass


@pytest.fixture
def store(tmp_path: Path):
    with SQLiteTraceStore(tmp_path / "trace.db") as opened:
        yield opened


def main_sandbox() -> MemorySandbox:
    sb = MemorySandbox(MemorySandboxConfig(files={"a.txt": b"1\n"}))
    sb.create(SandboxSpec())
    return sb


def last(store: SQLiteTraceStore, owner: str, schema: str):
    found = [
        e for e in store.read_path(owner) if e.record.envelope.schema_ref == schema
    ]
    assert found, f"no {schema} on {owner}"
    return found[-1]


def count(store: SQLiteTraceStore, owner: str, schema: str) -> int:
    return sum(
        1 for e in store.read_path(owner) if e.record.envelope.schema_ref == schema
    )


def test_capture_and_apply_record_the_state_on_the_scopes_path(
    store: SQLiteTraceStore,
) -> None:
    main = main_sandbox()
    mgr = scope_manager_for(store)
    root = mgr.create("root", main).unwrap()
    before = mgr.capture_workspace(root.id).unwrap()
    captured = last(store, "root", WorkspaceCaptured.SCHEMA)
    assert dict(captured.record.payload) == {
        "backend": before.backend,
        "revision": before.revision,
        "state_digest": before.digest(),
    }
    assert captured.append_intent_id.startswith(
        f"root:workspace:{WorkspaceCaptured.KIND_LABEL}:"
    )
    main.write_file("a.txt", b"changed\n")
    assert mgr.apply_workspace(root.id, before) == Success(None)
    assert main.read_file("a.txt") == b"1\n"
    applied = last(store, "root", WorkspaceApplied.SCHEMA)
    assert dict(applied.record.payload) == {
        "backend": before.backend,
        "revision": before.revision,
        "state_digest": before.digest(),
    }
    assert applied.append_intent_id.startswith(
        f"root:workspace:{WorkspaceApplied.KIND_LABEL}:"
    )
    assert mgr.context.model.scope("root").workspace_digest == before.digest()


def test_workspace_commands_on_an_ended_scope_name_the_verb(
    store: SQLiteTraceStore,
) -> None:
    main = main_sandbox()
    mgr = scope_manager_for(store)
    root = mgr.create("root", main).unwrap()
    kid = mgr.fork(root.id, "kid").unwrap()
    state = mgr.capture_workspace(kid.id).unwrap()
    mgr.halt(kid.id).unwrap()
    for result, verb in (
        (mgr.capture_workspace(kid.id), "capture"),
        (mgr.apply_workspace(kid.id, state), "apply"),
        (mgr.diff_workspace(kid.id, state), "diff"),
    ):
        assert isinstance(result, Failure)
        assert isinstance(result.failure(), ScopeStateError)
        assert str(result.failure()).startswith(
            f"cannot {verb} workspace in scope {kid.id}"
        )


def test_an_apply_on_a_claimed_workspace_is_refused_before_it_changes_files(
    store: SQLiteTraceStore,
) -> None:
    main = main_sandbox()
    mgr = scope_manager_for(store)
    root = mgr.create("root", main).unwrap()
    before = mgr.capture_workspace(root.id).unwrap()
    wt = MemorySandbox(MemorySandboxConfig(repository=main.repository))
    wt.create(SandboxSpec())
    child = mgr.fork_isolated(root.id, "try", None, wt).unwrap()
    wt.write_file("b.txt", b"child\n")
    out = mgr.seal(child.id).unwrap()

    def dies(boundary: str, intent: str) -> None:
        if boundary == "after-effect":
            raise Died(intent)

    mgr.context.faults = dies
    with pytest.raises(Died):
        mgr.settle(out.id, "selected", seq=3)
    mgr.context.faults = None
    applied = count(store, "root", WorkspaceApplied.SCHEMA)
    # The shared child works in the root's workspace: refused there too.
    shared = mgr.fork(root.id, "shared").unwrap()
    for scope_id in (root.id, shared.id):
        refused = mgr.apply_workspace(scope_id, before)
        assert isinstance(refused, Failure)
        error = refused.failure()
        assert isinstance(error, WorkspaceBusyError)
        assert error.workspace_scope == root.id
        assert error.holder == out.id
        assert str(error).startswith(
            f"apply workspace in {scope_id}: the workspace of {root.id}"
            f" is claimed by {out.id}"
        )
    assert main.read_file("b.txt") == b"child\n"
    assert count(store, "root", WorkspaceApplied.SCHEMA) == applied


def test_a_retried_halt_finds_its_intent_and_records_nothing_more(
    store: SQLiteTraceStore,
) -> None:
    mgr = scope_manager_for(store)
    root = mgr.create("root", None).unwrap()
    kid = mgr.fork(root.id, "kid").unwrap()
    assert mgr.halt(kid.id, seq=6) == Success(None)
    assert store.read_append_intent("kid:halt:6") is not None
    assert mgr.halt(kid.id, seq=6) == Success(None)
    assert count(store, "kid", ScopeHalted.SCHEMA) == 1


def test_a_retried_inject_returns_its_first_record(store: SQLiteTraceStore) -> None:
    mgr = scope_manager_for(store)
    root = mgr.create("root", None).unwrap()
    first = mgr.inject(root.id, "look left", seq=4).unwrap()
    assert store.read_append_intent("root:inject:4") is not None
    entry = last(store, "root", GuidanceInjected.SCHEMA)
    assert entry.record.record_id == first
    assert dict(entry.record.payload) == {"guidance": "look left"}
    assert mgr.inject(root.id, "look right", seq=4).unwrap() == first
    assert count(store, "root", GuidanceInjected.SCHEMA) == 1
    kid = mgr.fork(root.id, "kid").unwrap()
    mgr.halt(kid.id).unwrap()
    refused = mgr.inject(kid.id, "too late")
    assert isinstance(refused, Failure)
    assert isinstance(refused.failure(), ScopeStateError)
    assert count(store, "kid", GuidanceInjected.SCHEMA) == 0


def test_a_retried_fact_returns_its_first_record(store: SQLiteTraceStore) -> None:
    mgr = scope_manager_for(store)
    root = mgr.create("root", None).unwrap()
    first = mgr.append_fact(root.id, "app.note.v1", "", {"n": 1}, seq=9).unwrap()
    assert store.read_append_intent("root:fact:9") is not None
    entry = last(store, "root", "app.note.v1")
    assert entry.record.record_id == first
    assert entry.record.view is not None
    assert entry.record.view.kind_label == "app.note.v1"  # the schema by default
    assert dict(entry.record.payload) == {"n": 1}
    again = mgr.append_fact(root.id, "app.note.v1", "", {"n": 2}, seq=9).unwrap()
    assert again == first
    assert count(store, "root", "app.note.v1") == 1
    labelled = mgr.append_fact(root.id, "app.note.v1", "note", {"n": 3}).unwrap()
    entry = last(store, "root", "app.note.v1")
    assert entry.record.record_id == labelled
    assert entry.record.view is not None
    assert entry.record.view.kind_label == "note"
    reserved = mgr.append_fact(root.id, "goatherd.scope.forked.v1", "", {})
    assert isinstance(reserved, Failure)
    assert "goatherd.scope.forked.v1" in str(reserved.failure())


def test_every_capture_is_recorded_under_its_own_intent(
    store: SQLiteTraceStore,
) -> None:
    main = main_sandbox()
    mgr = scope_manager_for(store)
    root = mgr.create("root", main).unwrap()
    mgr.capture_workspace(root.id).unwrap()
    main.write_file("a.txt", b"2\n")
    second = mgr.capture_workspace(root.id).unwrap()
    captured = [
        e
        for e in store.read_path("root")
        if e.record.envelope.schema_ref == WorkspaceCaptured.SCHEMA
    ]
    assert len(captured) == 2
    assert len({e.append_intent_id for e in captured}) == 2
    assert dict(captured[-1].record.payload)["state_digest"] == second.digest()


def test_diff_returns_the_whole_diff_and_the_changed_paths(
    store: SQLiteTraceStore,
) -> None:
    main = main_sandbox()
    mgr = scope_manager_for(store)
    root = mgr.create("root", main).unwrap()
    before = mgr.capture_workspace(root.id).unwrap()
    main.write_file("a.txt", b"x\ny\nz\n")
    main.write_file("b.txt", b"new\n")
    text, paths = mgr.diff_workspace(root.id, before).unwrap()
    assert (text, paths) == main.diff(before)
    assert sorted(paths) == ["a.txt", "b.txt"]
    assert len(text.splitlines()) > 4
    short, _ = mgr.diff_workspace(root.id, before, 2).unwrap()
    assert short == main.diff(before, 2)[0]
