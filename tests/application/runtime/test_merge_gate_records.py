"""The merge gate: what propose returns, what the proposal and verdict record.

Propose is a query (the full diff by default, refused for a scope that is not
active or has no baseline); the proposal lands on the child's path under
``<child>:merge-proposed:<seq>``, the verdict on the parent's under
``<parent>:merge-decision:<seq>``; a retry with the same ``seq`` returns the
first record's id and records nothing more.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from returns.result import Failure

from goatherd.application import SandboxSpec, ScopeManager
from goatherd.application.errors import NoSandboxError
from goatherd.domain import (
    MergeProposed,
    NoBaselineError,
    ScopeStateError,
    SupervisorDecided,
    diff_digest,
)
from goatherd.infrastructure.bootstrap import scope_manager_for
from goatherd.infrastructure.sandbox.memory import MemorySandbox, MemorySandboxConfig
from goatherd.infrastructure.store import SQLiteTraceStore


@pytest.fixture
def store(tmp_path: Path):
    with SQLiteTraceStore(tmp_path / "trace.db") as opened:
        yield opened


def payloads(
    store: SQLiteTraceStore, owner: str, schema: str
) -> list[dict[str, object]]:
    return [
        dict(e.record.payload)
        for e in store.read_path(owner)
        if e.record.envelope.schema_ref == schema
    ]


def child_with_changes(mgr: ScopeManager) -> tuple[str, MemorySandbox]:
    main = MemorySandbox(MemorySandboxConfig(files={"a.txt": b"1\n2\n3\n"}))
    main.create(SandboxSpec())
    root = mgr.create("root", main).unwrap()
    wt = MemorySandbox(MemorySandboxConfig(repository=main.repository))
    wt.create(SandboxSpec())
    child = mgr.fork_isolated(root.id, "kid", None, wt).unwrap()
    wt.write_file("a.txt", b"one\ntwo\nthree\n")
    wt.write_file("new.txt", b"x\n")
    return child.id, wt


def test_propose_returns_the_whole_diff_and_every_changed_file(
    store: SQLiteTraceStore,
) -> None:
    mgr = scope_manager_for(store)
    child_id, wt = child_with_changes(mgr)
    proposal = mgr.propose_merge(child_id).unwrap()
    assert proposal.child_scope_id == child_id
    baseline = mgr.context.model.scope("kid").baseline
    assert baseline is not None
    assert proposal.baseline_digest == baseline.digest()
    assert proposal.diff == wt.diff(baseline)[0]
    assert len(proposal.diff.splitlines()) > 6  # not cut to one line
    assert [(c.path, c.kind) for c in proposal.changes] == [
        ("a.txt", "modify"),
        ("new.txt", "create"),
    ]
    assert store.read_path("kid")[-1].record.envelope.schema_ref != MergeProposed.SCHEMA


def test_propose_refuses_an_ended_scope_and_one_without_baseline(
    store: SQLiteTraceStore,
) -> None:
    mgr = scope_manager_for(store)
    child_id, _ = child_with_changes(mgr)
    assert mgr.discard(child_id).unwrap() is None
    ended = mgr.propose_merge(child_id)
    assert isinstance(ended, Failure)
    assert isinstance(ended.failure(), ScopeStateError)
    assert str(ended.failure()).startswith(f"cannot propose merge for scope {child_id}")

    causal = mgr.create("bare", None).unwrap()
    kid = mgr.fork(causal.id, "bare-kid").unwrap()
    missing = mgr.propose_merge(kid.id)
    assert isinstance(missing, Failure)
    error = missing.failure()
    assert isinstance(error, NoBaselineError)
    assert error.scope_id == kid.id
    assert str(error) == (
        f"scope {kid.id} has no fork baseline: it was forked from a parent"
        " without a sandbox, so there is no state to diff against"
    )


def test_the_proposal_is_recorded_once_on_the_childs_path(
    store: SQLiteTraceStore,
) -> None:
    mgr = scope_manager_for(store)
    child_id, _ = child_with_changes(mgr)
    proposal = mgr.propose_merge(child_id).unwrap()
    record_id = mgr.record_merge_proposal(proposal, seq=5).unwrap()
    assert mgr.record_merge_proposal(proposal, seq=5).unwrap() == record_id
    assert store.read_append_intent("kid:merge-proposed:5") is not None
    (entry,) = [
        e
        for e in store.read_path("kid")
        if e.record.envelope.schema_ref == MergeProposed.SCHEMA
    ]
    assert entry.record.record_id == record_id
    fork_point = mgr.context.model.scope("kid").fork_point
    assert fork_point
    assert list(entry.record.envelope.caused_by_record_ids) == [fork_point]
    payload = dict(entry.record.payload)
    assert payload["child_scope"] == child_id
    assert payload["baseline_digest"] == proposal.baseline_digest
    assert payload["change_count"] == 2
    assert payload["diff_digest"] == diff_digest(proposal.diff)
    assert [dict(c)["path"] for c in payload["changes"]] == ["a.txt", "new.txt"]  # type: ignore[attr-defined]
    # A fresh seq records the proposal again, under its own intent.
    assert mgr.record_merge_proposal(proposal).unwrap() == record_id
    assert len(payloads(store, "kid", MergeProposed.SCHEMA)) == 2


def test_the_proposal_of_an_ended_scope_is_refused(store: SQLiteTraceStore) -> None:
    mgr = scope_manager_for(store)
    child_id, _ = child_with_changes(mgr)
    proposal = mgr.propose_merge(child_id).unwrap()
    mgr.halt(child_id).unwrap()
    refused = mgr.record_merge_proposal(proposal)
    assert isinstance(refused, Failure)
    assert isinstance(refused.failure(), ScopeStateError)
    assert str(refused.failure()).startswith(
        f"cannot propose merge for scope {child_id}"
    )
    assert payloads(store, "kid", MergeProposed.SCHEMA) == []


def test_the_verdict_is_recorded_once_on_the_parents_path(
    store: SQLiteTraceStore,
) -> None:
    mgr = scope_manager_for(store)
    child_id, _ = child_with_changes(mgr)
    proposal = mgr.propose_merge(child_id).unwrap()
    proposed = mgr.record_merge_proposal(proposal).unwrap()
    rejected = mgr.record_merge_decision(
        proposal, False, "too big", "rework", proposed, seq=8
    ).unwrap()
    again = mgr.record_merge_decision(proposal, True, "", "", "", seq=8).unwrap()
    assert again == rejected
    assert store.read_append_intent("root:merge-decision:8") is not None
    approved = mgr.record_merge_decision(proposal, True, "ignored", "", "").unwrap()
    entries = [
        e
        for e in store.read_path("root")
        if e.record.envelope.schema_ref == SupervisorDecided.SCHEMA
    ]
    assert [e.record.record_id for e in entries] == [rejected, approved]
    first, second = (dict(e.record.payload) for e in entries)
    assert first == {
        "approved": False,
        "child_scope": child_id,
        "reason": "too big",
        "action": "rework",
    }
    assert list(entries[0].record.envelope.caused_by_record_ids) == [proposed]
    # An approval carries no reason and no action; without a proposal it
    # cites the parent path's head (the verdict before it, ADR 0087).
    assert second == {"approved": True, "child_scope": child_id}
    assert list(entries[1].record.envelope.caused_by_record_ids) == [rejected]
    assert payloads(store, "kid", SupervisorDecided.SCHEMA) == []


def test_a_verdict_for_a_root_is_refused(store: SQLiteTraceStore) -> None:
    mgr = scope_manager_for(store)
    child_with_changes(mgr)
    proposal = mgr.propose_merge("scope:kid").unwrap()
    from dataclasses import replace

    refused = mgr.record_merge_decision(
        replace(proposal, child_scope_id="scope:root"), True, "", "", ""
    )
    assert isinstance(refused, Failure)
    assert "scope:root" in str(refused.failure())


def test_propose_without_a_sandbox_here_names_the_scope(
    store: SQLiteTraceStore,
) -> None:
    mgr = scope_manager_for(store)
    child_id, _ = child_with_changes(mgr)
    elsewhere = scope_manager_for(store)  # no sandbox bound in this manager
    refused = elsewhere.propose_merge(child_id)
    assert isinstance(refused, Failure)
    assert isinstance(refused.failure(), NoSandboxError)
    assert str(refused.failure()) == (
        f"scope has no sandbox: scope {child_id} has no sandbox to diff in"
    )
