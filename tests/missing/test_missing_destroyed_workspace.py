"""A shared child of an isolated scope whose sandbox was destroyed.

The shared child stays active in the trace, but the workspace it worked in is
gone: every command that uses that workspace (fork, checkpoint, seal,
restore) is refused alike by every manager, nothing reaches the destroyed
sandbox, and what does not use it (facts, releasing an earlier output) still
works. Both ways the sandbox can be gone: its isolated owner was discarded
(the teardown follows the record), or a ``sandbox_destroyed`` record names it
while the owner is still active (a trace imported or written that way).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from returns.result import Failure, Result, Success

from goatherd.application import SandboxSpec, ScopeManager
from goatherd.application.decisions import Decision
from goatherd.domain import TRUSTED_APPEND_CONTEXT, ScopeState, ScopeStateError
from goatherd.domain.events.scope import SandboxDestroyed
from goatherd.infrastructure.bootstrap import scope_manager_for
from goatherd.infrastructure.sandbox.memory import MemorySandbox, MemorySandboxConfig
from goatherd.infrastructure.store import SQLiteTraceStore


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "trace.db"


def _sandbox(repository: object | None = None) -> MemorySandbox:
    if repository is None:
        sb = MemorySandbox(MemorySandboxConfig(files={"a.txt": b"0\n"}))
    else:
        sb = MemorySandbox(MemorySandboxConfig(repository=repository))  # type: ignore[arg-type]
    sb.create(SandboxSpec())
    return sb


def _refused(result: Result[object, Exception], verb: str, ended: str) -> None:
    assert isinstance(result, Failure), result
    error = result.failure()
    assert isinstance(error, ScopeStateError), error
    assert str(error) == (
        f"cannot {verb} scope scope:root:iso:sh: it works in the "
        f"workspace of scope:root:iso, {ended}"
    )


def _check_stranded(
    managers: tuple[ScopeManager, ...],
    iso_sb: MemorySandbox,
    kept_cp: str,
    out_id: str,
    store: SQLiteTraceStore,
    ended: str,
) -> None:
    files = None if iso_sb._files is None else dict(iso_sb._files)
    head = store.head("root:iso:sh")
    for n, mgr in enumerate(managers):
        shared = mgr.get("scope:root:iso:sh")
        assert shared is not None
        assert shared.state is ScopeState.ACTIVE  # it outlives its workspace
        _refused(mgr.fork("scope:root:iso:sh", f"root:iso:sh:k{n}"), "fork", ended)
        _refused(mgr.create_checkpoint("scope:root:iso:sh", b"x"), "checkpoint", ended)
        _refused(mgr.seal("scope:root:iso:sh"), "seal", ended)
        _refused(mgr.restore_checkpoint(kept_cp), "restore in", ended)
    assert store.head("root:iso:sh") == head  # nothing was recorded
    assert store.head("root:iso:sh:k0") == store.head("root:iso:sh:k1") == 0
    assert (None if iso_sb._files is None else dict(iso_sb._files)) == files
    # What does not use the workspace still works.
    mgr = managers[-1]
    fact = mgr.append_fact("scope:root:iso:sh", "app.note.v1", "note", {"n": 1})
    assert isinstance(fact, Success), fact
    assert mgr.settle(out_id, "released") == Success(None)


def _stranding(mgr: ScopeManager) -> tuple[MemorySandbox, str, str]:
    main = _sandbox()
    root = mgr.create("root", main).unwrap()
    iso_sb = _sandbox(main.repository)
    iso = mgr.fork_isolated(root.id, "root:iso", None, iso_sb).unwrap()
    shared = mgr.fork(iso.id, "root:iso:sh").unwrap()
    iso_sb.write_file("b.txt", b"b\n")
    kept = mgr.create_checkpoint(shared.id, b"kept").unwrap()
    # A grandchild of the shared scope seals an output into it, settled later.
    kid_sb = _sandbox(main.repository)
    kid = mgr.fork_isolated(shared.id, "root:iso:sh:kid", None, kid_sb).unwrap()
    kid_sb.write_file("c.txt", b"c\n")
    out = mgr.seal(kid.id).unwrap()
    return iso_sb, kept.id, out.id


def test_after_its_isolated_owner_was_discarded(path: Path) -> None:
    with SQLiteTraceStore(path) as one, SQLiteTraceStore(path) as two:
        first = scope_manager_for(one)
        iso_sb, kept, out = _stranding(first)
        assert isinstance(first.discard("scope:root:iso"), Success)
        assert iso_sb._files is None  # the discard tore the sandbox down
        _check_stranded(
            (first, scope_manager_for(two), scope_manager_for(one)),
            iso_sb,
            kept,
            out,
            one,
            "which is discarded",
        )


def test_after_a_record_says_its_owners_sandbox_was_destroyed(path: Path) -> None:
    with SQLiteTraceStore(path) as one, SQLiteTraceStore(path) as two:
        first = scope_manager_for(one)
        iso_sb, kept, out = _stranding(first)
        event = SandboxDestroyed(owner="root:iso", backend="memory", sandbox_path=None)
        one.append(
            TRUSTED_APPEND_CONTEXT,
            Decision().place(event, "root:iso").batch("root:iso:sandbox-destroyed:1"),
        )
        iso = scope_manager_for(two).get("scope:root:iso")
        assert iso is not None
        assert iso.state is ScopeState.ACTIVE  # its owner is still active
        _check_stranded(
            (first, scope_manager_for(two), scope_manager_for(one)),
            iso_sb,
            kept,
            out,
            one,
            "whose sandbox was destroyed",
        )
