"""The manager-less Scope: ``Scope.new(store, owner_id).with_sandbox(sb, owns)``.

It is the manager's scope, not a second implementation: the same session
through either API writes the same records, each sees what the other made,
and bad arguments are refused with one clear line before anything is
recorded (ADR 0057).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from returns.result import Failure, Success

import goatherd
from goatherd.application import (
    NoSandboxError,
    SandboxOwnershipError,
    SandboxSpec,
    Scope,
    ScopeManager,
)
from goatherd.domain import (
    CheckpointScopeMismatchError,
    CheckpointState,
    OutputState,
    RecordInputError,
    ScopeCreated,
    ScopeExistsError,
    ScopeState,
)
from goatherd.infrastructure.bootstrap import new_scope, scope_manager_for
from goatherd.infrastructure.sandbox.memory import MemorySandbox, MemorySandboxConfig
from goatherd.infrastructure.store import SQLiteTraceStore


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "trace.db"


def memory(files: dict[str, bytes] | None = None, repository=None) -> MemorySandbox:
    config = (
        MemorySandboxConfig(repository=repository)
        if repository is not None
        else MemorySandboxConfig(files=files or {"a.txt": b"1\n"})
    )
    sb = MemorySandbox(config)
    sb.create(SandboxSpec())
    return sb


def failure_of(result: Any) -> Any:
    assert isinstance(result, Failure), result
    return result.failure()


def records(store: SQLiteTraceStore) -> list[tuple[str, int, str, str]]:
    """Every path entry: (owner, ordinal, schema, record id), in log order."""
    return [
        (
            e.record.view.trace_owner_id,  # type: ignore[union-attr]
            e.record.view.owner_ordinal,  # type: ignore[union-attr]
            e.record.envelope.schema_ref,
            e.record.envelope.record_id,
        )
        for e in store.read_log(-1, 10_000)
    ]


def session(
    root: Scope,
    fork: Callable[[str], Scope],
    iso: Callable[[str, MemorySandbox], Scope],
) -> None:
    """One session: shared fork, checkpoint, restore, isolated fork, seal, settle."""
    sandbox = root.sandbox
    assert isinstance(sandbox, MemorySandbox)
    shared = fork("agent:shared")
    shared.append_fact("app.note.v1", "note", {"n": 1}, seq=11).unwrap()
    cp = root.create_checkpoint(b"talk", seq=12).unwrap()
    sandbox.write_file("a.txt", b"broken\n")
    assert root.restore_checkpoint(cp, seq=13) == Success(b"talk")
    assert root.merge(shared, seq=14) == Success(None)
    wt = memory(repository=sandbox.repository)
    child = iso("agent:iso", wt)
    wt.write_file("b.txt", b"work\n")
    out = child.seal(seq=15).unwrap()
    assert out.settle("selected", seq=16) == Success(None)
    assert sandbox.read_file("b.txt") == b"work\n"


def test_the_same_session_through_either_api_writes_the_same_records(tmp_path):
    with SQLiteTraceStore(tmp_path / "mgr.db") as one:
        mgr = scope_manager_for(one)
        root = mgr.create("agent:main", memory()).unwrap()
        session(
            root,
            lambda owner: mgr.fork(root.id, owner, seq=1).unwrap(),
            lambda owner, sb: mgr.fork_isolated(
                root.id, owner, None, sb, seq=2
            ).unwrap(),
        )
        by_manager = records(one)
    with SQLiteTraceStore(tmp_path / "new.db") as two:
        root = Scope.new(two, "agent:main").with_sandbox(memory())
        session(
            root,
            lambda owner: root.fork(owner, seq=1).unwrap(),
            lambda owner, sb: root.fork_isolated(owner, None, sb, seq=2).unwrap(),
        )
        without = records(two)
    assert len(by_manager) > 20
    assert without == by_manager


def test_a_scope_made_without_a_manager_is_the_manager_s_scope(path):
    with SQLiteTraceStore(path) as store:
        main = memory()
        root = Scope.new(store, "agent:main").with_sandbox(main, owns=False)
        kid = root.fork("agent:kid", b"conversation").unwrap()
        cp = root.create_checkpoint(b"snap").unwrap()
        wt = memory(repository=main.repository)
        iso = root.fork_isolated("agent:iso", None, wt).unwrap()
        wt.write_file("c.txt", b"c\n")
        out = iso.seal().unwrap()
        mgr = scope_manager_for(store)
        assert [s.id for s in mgr.all_scopes()] == [
            "scope:agent:main",
            "scope:agent:kid",
            "scope:agent:iso",
        ]
        assert mgr.get(kid.id) == kid
        assert mgr.latest_checkpoint(root.id) == cp
        seen = mgr.output(out.id)
        assert seen is not None
        assert seen.changes() == out.changes() == [{"path": "c.txt", "kind": "create"}]
        mgr.attach_sandbox(root.id, main)
        assert mgr.settle(out.id, "selected") == Success(None)
        assert out.state is OutputState.SELECTED
        assert iso.state is ScopeState.MERGED
        assert kid.snapshot == b"conversation"  # process state, kept in the context


def test_scope_new_on_an_owner_the_trace_knows_is_that_scope(path):
    with SQLiteTraceStore(path) as store:
        mgr = scope_manager_for(store)
        main = memory()
        made = mgr.create("agent:main", main).unwrap()
        mgr.fork(made.id, "agent:kid").unwrap()
        cp = mgr.create_checkpoint(made.id, b"s").unwrap()
        size = store.fact_count()
        again = Scope.new(store, "agent:main")
        assert again == made
        assert [c.id for c in again.children] == ["scope:agent:kid"]
        assert again.latest_checkpoint() == cp
        assert again.sandbox is None  # a sandbox object is this process's, per handle
        assert isinstance(failure_of(again.capture_workspace()), NoSandboxError)
        again.with_sandbox(main)
        assert store.fact_count() == size  # no second scope.created
        assert again.restore_checkpoint(cp.id) == Success(b"s")
        assert mgr.checkpoint(cp.id).state is CheckpointState.USED  # type: ignore[union-attr]
        child = Scope.new(store, "agent:kid")
        assert child.parent == made
        assert child.sandbox is main  # the child works in its root's workspace


def test_nothing_is_recorded_until_the_sandbox_or_a_command(path):
    with SQLiteTraceStore(path) as store:
        scope = Scope.new(store, "agent:main")
        assert (scope.state, scope.children, scope.parent) == (
            ScopeState.ACTIVE,
            [],
            None,
        )
        assert scope.baseline() is None
        assert store.fact_count() == 0
        sb = memory()
        scope.with_sandbox(sb)
        created = [
            e.record.payload
            for e in store.read_path("agent:main")
            if e.record.envelope.schema_ref == ScopeCreated.SCHEMA
        ]
        assert created == [{"owner": "agent:main", "sandbox_backend": "memory"}]
        # Every Scope.new handle of this store shares this process's bindings.
        assert Scope.new(store, "agent:main").sandbox is sb
        causal = Scope.new(store, "agent:causal")
        assert causal.append_fact("app.note.v1", "note", {}).unwrap()
        assert scope_manager_for(store).get("scope:agent:causal") is not None


def test_with_sandbox_ownership_must_be_what_the_trace_records(path):
    with SQLiteTraceStore(path) as store:
        main = memory()
        with pytest.raises(SandboxOwnershipError, match="is a root") as refused:
            Scope.new(store, "agent:main").with_sandbox(main, owns=True)
        assert "\n" not in str(refused.value)
        assert store.fact_count() == 0
        root = Scope.new(store, "agent:main").with_sandbox(main)
        shared = root.fork("agent:shared").unwrap()
        wt = memory(repository=main.repository)
        iso = root.fork_isolated("agent:iso", None, wt).unwrap()
        size = store.fact_count()
        with pytest.raises(SandboxOwnershipError, match="ancestor's workspace"):
            Scope.new(store, "agent:shared").with_sandbox(main, owns=True)
        with pytest.raises(SandboxOwnershipError, match="pass owns=True"):
            Scope.new(store, "agent:iso").with_sandbox(wt, owns=False)
        assert store.fact_count() == size
        assert Scope.new(store, "agent:iso").with_sandbox(wt, owns=True) == iso
        assert iso.owns_sandbox
        assert not shared.owns_sandbox


def test_an_isolated_child_owns_and_destroys_its_sandbox(path):
    with SQLiteTraceStore(path) as store:
        main = memory()
        root = Scope.new(store, "agent:main").with_sandbox(main)
        wt = memory(repository=main.repository)
        child = root.fork_isolated("agent:iso", None, wt).unwrap()
        assert child.sandbox is wt
        assert root.discard(child) == Success(None)
        assert wt._files is None  # destroyed
        halted = root.fork_isolated("agent:halted", None, other := memory()).unwrap()
        assert halted.halt() == Success(None)
        assert (halted.state, other._files) == (ScopeState.DISCARDED, None)
        assert root.halt() == Success(None)
        assert main._files is not None  # a root's sandbox is never destroyed


def test_a_checkpoint_of_another_scope_is_refused_before_anything(path):
    with SQLiteTraceStore(path) as store:
        main = memory()
        root = Scope.new(store, "agent:main").with_sandbox(main)
        other = Scope.new(store, "agent:other").with_sandbox(memory())
        cp = root.create_checkpoint(b"mine").unwrap()
        main.write_file("a.txt", b"changed\n")
        size = store.fact_count()
        refused = failure_of(other.restore_checkpoint(cp))
        assert isinstance(refused, CheckpointScopeMismatchError)
        assert str(refused) == (
            f"checkpoint {cp.id} belongs to scope scope:agent:main, not "
            "scope:agent:other"
        )
        assert store.fact_count() == size
        assert main.read_file("a.txt") == b"changed\n"
        assert root.restore_checkpoint(cp.id) == Success(b"mine")


def test_two_stores_on_one_trace_make_one_root(path):
    with SQLiteTraceStore(path) as one, SQLiteTraceStore(path) as two:
        first = Scope.new(one, "agent:main")
        second = Scope.new(two, "agent:main")
        first.with_sandbox(memory())
        second.with_sandbox(memory())  # the trace knows it now: no second record
        created = [
            e
            for e in one.read_path("agent:main")
            if e.record.envelope.schema_ref == ScopeCreated.SCHEMA
        ]
        assert len(created) == 1
        manager = scope_manager_for(one)
        assert isinstance(failure_of(manager.create("agent:main")), ScopeExistsError)


def test_the_facade_and_the_entry_point_are_the_same_class(path):
    with SQLiteTraceStore(path) as store:
        assert goatherd.Scope is Scope
        made = new_scope(store, "agent:main").with_sandbox(memory())
        assert isinstance(made, goatherd.Scope)
        mgr: ScopeManager = scope_manager_for(store)
        assert isinstance(mgr.get(made.id), Scope)


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (
            lambda s: Scope.new(s, 7),  # type: ignore[arg-type]
            TypeError,
            "owner_id must be a str, got int",
        ),
        (lambda s: Scope.new(s, ""), ValueError, "owner_id is empty"),
        (
            lambda s: Scope.new("trace.db", "a"),  # type: ignore[arg-type]
            TypeError,
            "store must be a goatherd trace store",
        ),
        (
            lambda s: Scope.new(s, "a").merge("scope:b"),  # type: ignore[arg-type]
            TypeError,
            "merge: child must be a Scope, got str",
        ),
        (
            lambda s: Scope.new(s, "a").restore_checkpoint(3),  # type: ignore[arg-type]
            TypeError,
            "checkpoint must be a Checkpoint or its id, got int",
        ),
        (
            lambda s: Scope.new(s, "a").with_sandbox(memory()).create_checkpoint("x"),  # type: ignore[arg-type]
            TypeError,
            "create_checkpoint: snapshot must be bytes, got str",
        ),
    ],
)
def test_bad_arguments_get_one_clear_line(path, call, error, message):
    with SQLiteTraceStore(path) as store:
        with pytest.raises(error, match=message) as raised:
            call(store)
        assert "\n" not in str(raised.value)


@pytest.mark.parametrize(
    ("schema_ref", "message"),
    [
        ("", "append_fact: schema_ref is required"),
        (7, "append_fact: schema_ref must be a string, got int"),
        (None, "append_fact: schema_ref must be a string, got NoneType"),
    ],
)
def test_append_fact_checks_the_schema_with_the_kernel_validator(
    path, schema_ref, message
):
    with SQLiteTraceStore(path) as store:
        scope = Scope.new(store, "agent:main").with_sandbox(memory())
        size = store.fact_count()
        refused = failure_of(scope.append_fact(schema_ref, "note", {}))
        assert isinstance(refused, RecordInputError)
        assert str(refused) == message
        assert store.fact_count() == size
