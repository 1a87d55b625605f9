"""Forks and a scope's records cite the path's head, so closures connect (ADR 0087).

Through the public API: a child's fact's causal closure reaches its fork record
and everything its parent recorded before the fork (and nothing after); runtime
records on a path cite the head too, so a chain survives a checkpoint; explicit
parents given to ``append_fact`` are cited exactly; old traces, whose fork
records cite nothing, keep working. Each runs on SQLite and on PostgreSQL (where
the heads are always read from the store, not vouched for by the model).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest
from returns.result import Failure

from goatherd.application import Decision, SandboxSpec, ScopeManager
from goatherd.domain import (
    TRUSTED_APPEND_CONTEXT,
    TRUSTED_READ_CONTEXT,
    AppendBatch,
    AppendGroup,
    GuidanceInjected,
    RecordDraft,
    RecordInputError,
    ScopeForked,
)
from goatherd.infrastructure.bootstrap import scope_manager_for
from goatherd.infrastructure.sandbox.memory import MemorySandbox, MemorySandboxConfig
from goatherd.infrastructure.store import SqlAlchemyTraceStore, open_trace_store
from tests.golden.traces import load, replay
from tests.integration.runtime.support import fresh_postgres_database

GOLDEN = Path(__file__).resolve().parents[2] / "golden"


@pytest.fixture(params=["sqlite", "postgresql"])
def store(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[SqlAlchemyTraceStore]:
    if request.param == "sqlite":
        with open_trace_store(str(tmp_path / "trace.db")) as opened:
            yield opened
        return
    with fresh_postgres_database() as url, open_trace_store(url) as opened:
        yield opened


def sandbox(repository: MemorySandbox | None = None) -> MemorySandbox:
    if repository is None:
        sb = MemorySandbox(MemorySandboxConfig(files={"a.txt": b"1\n"}))
    else:
        sb = MemorySandbox(MemorySandboxConfig(repository=repository.repository))
    sb.create(SandboxSpec())
    return sb


def closure(store: SqlAlchemyTraceStore, record_id: str) -> set[str]:
    found = store.read_causal_closure(TRUSTED_READ_CONTEXT, [record_id])
    return set(found.facts_by_id)


def parents(store: SqlAlchemyTraceStore, record_id: str) -> list[str]:
    record = store.read_fact(TRUSTED_READ_CONTEXT, record_id)
    return list(record.envelope.caused_by_record_ids)


def path(store: SqlAlchemyTraceStore, owner: str) -> list[str]:
    return [e.record.record_id for e in store.read_path(owner)]


def test_a_childs_fact_reaches_what_the_parent_recorded_before_the_fork(
    store: SqlAlchemyTraceStore,
) -> None:
    mgr = scope_manager_for(store)
    parent = mgr.create("agent:main", sandbox()).unwrap()
    read = parent.append_fact("tool.call.v1", "", {"tool": "read"}).unwrap()
    plan = parent.append_fact("agent.plan.v1", "", {"step": 1}).unwrap()
    created = path(store, "agent:main")[0]
    assert parents(store, read) == [created]
    assert parents(store, plan) == [read]

    child = mgr.fork(parent.id, "agent:main:sub").unwrap()
    later = parent.append_fact("tool.call.v1", "", {"tool": "after"}).unwrap()
    work = child.append_fact("tool.call.v1", "", {"tool": "write"}).unwrap()

    # The fork cites the parent's head at the fork; the child's first record
    # cites the fork record, its fork point (the head of its path).
    assert parents(store, child.fork_point) == [plan]
    assert parents(store, work) == [child.fork_point]
    assert path(store, "agent:main:sub") == [child.fork_point, work]
    reached = closure(store, work)
    assert {created, read, plan, child.fork_point, work} <= reached
    assert later not in reached  # what the parent did after the fork is not a cause


def test_runtime_records_on_a_path_cite_its_head_so_the_chain_holds(
    store: SqlAlchemyTraceStore,
) -> None:
    mgr = scope_manager_for(store)
    main = sandbox()
    parent = mgr.create("agent:main", main).unwrap()
    before = parent.append_fact("tool.call.v1", "", {"tool": "read"}).unwrap()
    child = mgr.fork_isolated(parent.id, "agent:main:try", None, sandbox(main)).unwrap()
    cp = mgr.create_checkpoint(child.id, b"snapshot").unwrap()
    guidance = child.inject("try the other file").unwrap()
    work = child.append_fact("tool.call.v1", "", {"tool": "write"}).unwrap()

    on_child = path(store, "agent:main:try")
    assert on_child[0] == child.fork_point
    assert guidance in on_child
    assert work == on_child[-1]
    # Every record on the child's path cites the one before it.
    for earlier, record in itertools.pairwise(on_child):
        assert parents(store, record) == [earlier], record
    assert {before, child.fork_point, guidance} <= closure(store, work)
    assert mgr.checkpoint(cp.id) is not None


def test_explicit_parents_are_cited_exactly(store: SqlAlchemyTraceStore) -> None:
    mgr = scope_manager_for(store)
    parent = mgr.create("agent:main").unwrap()
    source = parent.append_fact("doc.read.v1", "", {"doc": "spec"}).unwrap()
    child = mgr.fork(parent.id, "agent:main:sub").unwrap()
    first = child.append_fact("tool.call.v1", "", {"n": 1}).unwrap()

    cited = mgr.append_fact(
        child.id, "agent.answer.v1", "", {"n": 2}, caused_by=(source, first)
    ).unwrap()
    assert parents(store, cited) == [source, first]  # exactly, in order
    alone = child.append_fact("agent.note.v1", "", {}, caused_by=[source]).unwrap()
    assert parents(store, alone) == [source]
    assert child.fork_point not in closure(store, alone)
    # Without explicit parents the next fact cites the head again.
    after = child.append_fact("agent.note.v1", "", {"n": 3}).unwrap()
    assert parents(store, after) == [alone]


def test_bad_explicit_parents_are_refused_and_nothing_is_recorded(
    store: SqlAlchemyTraceStore,
) -> None:
    mgr = scope_manager_for(store)
    scope = mgr.create("agent:main").unwrap()
    fact = scope.append_fact("tool.call.v1", "", {}).unwrap()
    unknown = "sha256:" + "0" * 64
    before = path(store, "agent:main")

    missing = scope.append_fact("agent.note.v1", "", {}, caused_by=(unknown,))
    assert isinstance(missing, Failure)
    assert isinstance(missing.failure(), RecordInputError)
    assert unknown in str(missing.failure())
    repeated = mgr.append_fact(
        scope.id, "agent.note.v1", "", {}, caused_by=(fact, fact)
    )
    assert isinstance(repeated, Failure)
    assert f"caused_by repeats {fact}" in str(repeated.failure())
    empty = scope.append_fact("agent.note.v1", "", {}, caused_by=("",))
    assert isinstance(empty, Failure)
    assert "not a record id" in str(empty.failure())
    with pytest.raises(TypeError, match=r"caused_by=\('sha256:"):
        scope.append_fact("agent.note.v1", "", {}, caused_by=fact)
    assert path(store, "agent:main") == before


def test_the_head_records_read_names_each_paths_last_record(
    store: SqlAlchemyTraceStore,
) -> None:
    assert store.head_records(["a", "b"]) == {"a": (0, ""), "b": (0, "")}
    receipt = store.append(
        TRUSTED_APPEND_CONTEXT,
        AppendBatch(
            "heads-1",
            (
                AppendGroup(
                    "a",
                    fact_drafts=(
                        RecordDraft("capture", "x.v1", {"n": 1}),
                        RecordDraft("capture", "x.v1", {"n": 2}),
                    ),
                ),
            ),
        ),
    )
    assert store.head_records(["a", "b"]) == {
        "a": (2, receipt.fact_ids[1]),
        "b": (0, ""),
    }
    assert store.head_records([]) == {}


def test_one_decision_chains_its_own_events_on_a_path() -> None:
    first = GuidanceInjected(guidance="one")
    second = GuidanceInjected(guidance="two")
    fork = ScopeForked(child_owner="c", parent_owner="p")
    decision = Decision().place(first, "p").place(fork, "p", "c").place(second, "c")
    cited = decision.citing_heads({"p": "sha256:head", "c": ""})
    events = cited.events
    assert events[0].caused_by == ("sha256:head",)
    # On two paths: the head of each, without the empty one.
    assert events[1].caused_by == (events[0].record_id(),)
    assert events[2].caused_by == (events[1].record_id(),)
    # An event naming its causes keeps them.
    named = Decision().place(
        GuidanceInjected(caused_by=("sha256:x",), guidance="g"), "p"
    )
    assert named.citing_heads({"p": "sha256:head"}).events[0].caused_by == ("sha256:x",)


def test_a_trace_whose_forks_cite_nothing_keeps_working(tmp_path: Path) -> None:
    with open_trace_store(str(tmp_path / "old.db")) as store:
        replay(store, load(GOLDEN / "current_runtime.json"))
        mgr: ScopeManager = scope_manager_for(store)
        old = mgr.get("scope:agent:main:try-1")
        assert old is not None
        assert parents(store, old.fork_point) == []  # recorded before ADR 0087
        head = path(store, "agent:main:try-1")[-1]
        fact = old.append_fact("agent.note.v1", "", {"late": True}).unwrap()
        assert parents(store, fact) == [head]  # the old head, whatever it cites

        root_head = path(store, "agent:main")[-1]
        child = mgr.fork("scope:agent:main", "agent:main:new").unwrap()
        assert parents(store, child.fork_point) == [root_head]
