"""latest_checkpoint with several checkpoints: order, after a restore, a child's."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from returns.result import Success

from goatherd.application import SandboxSpec, ScopeManager
from goatherd.infrastructure.bootstrap import scope_manager_for
from goatherd.infrastructure.sandbox.memory import MemorySandbox, MemorySandboxConfig
from goatherd.infrastructure.store import SQLiteTraceStore


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteTraceStore]:
    with SQLiteTraceStore(tmp_path / "trace.db") as s:
        yield s


def _sandbox(repository: object | None = None) -> MemorySandbox:
    if repository is None:
        sb = MemorySandbox(MemorySandboxConfig(files={"a.txt": b"0\n"}))
    else:
        sb = MemorySandbox(MemorySandboxConfig(repository=repository))  # type: ignore[arg-type]
    sb.create(SandboxSpec())
    return sb


def _latest(mgr: ScopeManager, scope_id: str) -> str | None:
    cp = mgr.latest_checkpoint(scope_id)
    return None if cp is None else cp.id


def test_the_latest_of_several_is_the_last_created(store: SQLiteTraceStore) -> None:
    main = _sandbox()
    mgr = scope_manager_for(store)
    root = mgr.create("agent:main", main).unwrap()
    ids = []
    for n in range(4):
        main.write_file("a.txt", f"{n}\n".encode())
        ids.append(mgr.create_checkpoint(root.id, f"s{n}".encode()).unwrap().id)
        assert _latest(mgr, root.id) == ids[-1]
    # A second manager (a fresh fold of the same trace) agrees.
    assert _latest(scope_manager_for(store), root.id) == ids[-1]
    assert [c.id for c in mgr.checkpoints_for_scope(root.id)] == ids


def test_after_a_restore_the_latest_is_the_newest_still_valid(
    store: SQLiteTraceStore,
) -> None:
    main = _sandbox()
    mgr = scope_manager_for(store)
    root = mgr.create("agent:main", main).unwrap()
    ids = []
    for n in range(3):
        main.write_file("a.txt", f"{n}\n".encode())
        ids.append(mgr.create_checkpoint(root.id, f"s{n}".encode()).unwrap().id)
    # Restoring the newest uses it up: the one before becomes the latest.
    assert mgr.restore_checkpoint(ids[2]) == Success(b"s2")
    assert _latest(mgr, root.id) == ids[1]
    assert _latest(scope_manager_for(store), root.id) == ids[1]
    # Restoring an older one leaves the newest valid one the latest.
    assert mgr.restore_checkpoint(ids[0]) == Success(b"s0")
    assert _latest(mgr, root.id) == ids[1]
    assert mgr.restore_checkpoint(ids[1]) == Success(b"s1")
    assert _latest(mgr, root.id) is None
    # A new checkpoint after the restores is the latest again.
    fresh = mgr.create_checkpoint(root.id, b"s3").unwrap().id
    assert _latest(mgr, root.id) == fresh


def test_a_childs_checkpoint_is_not_its_parents_latest(
    store: SQLiteTraceStore,
) -> None:
    main = _sandbox()
    mgr = scope_manager_for(store)
    root = mgr.create("agent:main", main).unwrap()
    first = mgr.create_checkpoint(root.id, b"root").unwrap().id
    child = mgr.fork_isolated(
        root.id, "agent:main:kid", None, _sandbox(main.repository)
    ).unwrap()
    shared = mgr.fork(root.id, "agent:main:sh").unwrap()
    kid_cp = mgr.create_checkpoint(child.id, b"kid").unwrap().id
    sh_cp = mgr.create_checkpoint(shared.id, b"sh").unwrap().id
    for m in (mgr, scope_manager_for(store)):
        assert _latest(m, root.id) == first
        assert _latest(m, child.id) == kid_cp
        assert _latest(m, shared.id) == sh_cp
    # The parent's newer checkpoint does not become the child's latest either.
    second = mgr.create_checkpoint(root.id, b"root2").unwrap().id
    assert _latest(mgr, root.id) == second
    assert _latest(mgr, child.id) == kid_cp
