"""record_decision against a second writer on the same trace: decide again or give up.

A second manager on the same SQLite file writes to the guarded path at the
two moments a decision can go stale: while ``decide`` runs (the fold moved
under it) and just before the commit (the store refuses the expected head).
"""

from __future__ import annotations

from typing import Any

import pytest

from goatherd.application.decisions import (
    DECISION_RETRIES,
    Decision,
    record_decision,
)
from goatherd.domain import GuidanceInjected, OrdinalConflictError
from goatherd.infrastructure.bootstrap import scope_manager_for
from goatherd.infrastructure.store import SQLiteTraceStore


@pytest.fixture
def two_writers(tmp_path: Any) -> Any:
    path = tmp_path / "trace.db"
    with SQLiteTraceStore(path) as first, SQLiteTraceStore(path) as second:
        mine, other = scope_manager_for(first), scope_manager_for(second)
        mine.create("root").unwrap()
        yield mine, other, first


def guidance_on_root(text: str) -> Decision:
    return Decision().place(GuidanceInjected(guidance=text), "root").guard("root")


def test_a_write_while_deciding_makes_it_decide_again(two_writers: Any) -> None:
    mine, other, store = two_writers
    calls: list[int] = []

    def decide() -> Decision:
        calls.append(len(calls))
        if len(calls) == 1:
            other.fork("scope:root", "kid").unwrap()
        return guidance_on_root(f"attempt {len(calls)}")

    receipt = record_decision(mine.context.model, "test:decide:1", decide)
    assert receipt is not None
    assert calls == [0, 1]
    schemas = [e.record.envelope.schema_ref for e in store.read_path("root")]
    assert schemas[-2:] == ["goatherd.scope.forked.v1", GuidanceInjected.SCHEMA]
    texts = [e.record.payload.get("guidance") for e in store.read_path("root")]
    assert texts[-1] == "attempt 2"


def test_a_write_before_the_commit_makes_it_decide_again(two_writers: Any) -> None:
    mine, other, store = two_writers
    moved: list[str] = []

    def before_commit(boundary: str, intent: str) -> None:
        if boundary == "before-commit" and not moved:
            moved.append(other.inject("scope:root", "just in time"))

    receipt = record_decision(
        mine.context.model,
        "test:decide:2",
        lambda: guidance_on_root("mine"),
        faults=before_commit,
    )
    assert receipt is not None
    texts = [e.record.payload.get("guidance") for e in store.read_path("root")]
    assert texts[-2:] == ["just in time", "mine"]


def test_a_writer_that_never_stops_wins_with_a_named_conflict(
    two_writers: Any,
) -> None:
    mine, other, store = two_writers
    calls: list[int] = []

    def decide() -> Decision:
        calls.append(1)
        other.fork("scope:root", f"kid{len(calls)}").unwrap()
        return guidance_on_root("never")

    with pytest.raises(OrdinalConflictError) as caught:
        record_decision(mine.context.model, "test:decide:3", decide)
    assert len(calls) == DECISION_RETRIES
    conflict = caught.value
    head = store.heads(["root"])["root"]
    assert (conflict.owner, conflict.expected, conflict.actual) == ("root", head, head)
    texts = [e.record.payload.get("guidance") for e in store.read_path("root")]
    assert "never" not in texts


def test_a_commit_refused_every_time_raises_the_stores_conflict(
    two_writers: Any,
) -> None:
    mine, other, _ = two_writers

    def always(boundary: str, intent: str) -> None:
        if boundary == "before-commit":
            other.inject("scope:root", "first")

    with pytest.raises(OrdinalConflictError) as caught:
        record_decision(
            mine.context.model,
            "test:decide:4",
            lambda: guidance_on_root("never"),
            faults=always,
        )
    assert caught.value.owner == "root"
    assert caught.value.actual == caught.value.expected + 1


def test_nothing_to_record_records_nothing(two_writers: Any) -> None:
    mine, _, store = two_writers
    before = len(list(store.read_path("root")))
    assert record_decision(mine.context.model, "t:5", lambda: None) is None
    assert record_decision(mine.context.model, "t:6", Decision) is None
    assert len(list(store.read_path("root"))) == before


def test_a_guard_adds_to_the_guarded_paths_and_skips_empty_owners() -> None:
    decision = Decision().guard("a").guard("b", "")
    assert decision.guards == frozenset({"a", "b"})
    placed = decision.place(GuidanceInjected(guidance="g"), "c", "", "c")
    assert placed.guards == frozenset({"a", "b"})
    assert placed.owners == {"a", "b", "c"}
    assert placed.placements[0][0] == ("c",)
