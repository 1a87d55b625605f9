"""The scope tree projection shows what recovery shows (Hypothesis, real runtime).

Random runtime histories (roots with and without sandboxes, forks, merges,
discards, halts, checkpoints, restores, seals and settlements) are recorded by
the real :class:`ScopeManager` on a SQLite store; the projection, caught up
over the global log (also mid-history), must list exactly the scopes
``recover_scopes`` rebuilds, each with the same state, parent and fork point.
The checkpoint and output projections must agree with the recovered manager
too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from returns.result import Result

from goatherd.application import (
    RecoverOptions,
    SandboxSpec,
    ScopeManager,
    recover_scopes,
)
from goatherd.infrastructure.eventstore import TraceEventStore
from goatherd.infrastructure.projection_runner import (
    ProjectionRunner,
    builtin_projections,
)
from goatherd.infrastructure.sandbox.memory import MemorySandbox, MemorySandboxConfig
from goatherd.infrastructure.store import SQLiteTraceStore
from goatherd.projections import listed_scopes

VERBS = (  # repeated verbs are drawn more often
    "root",
    "root",
    "bare_root",
    "fork",
    "fork",
    "fork_isolated",
    "merge",
    "discard",
    "halt",
    "checkpoint",
    "restore",
    "seal",
    "seal",
    "settle",
    "settle",
    "catch_up",
)
ACTIONS = ("selected", "released", "discarded")
ops = st.lists(
    st.tuples(st.sampled_from(VERBS), st.integers(0, 50), st.sampled_from(ACTIONS)),
    min_size=1,
    max_size=40,
)


def _sandbox() -> MemorySandbox:
    sandbox = MemorySandbox(MemorySandboxConfig(files={"a.txt": b"1\n"}))
    sandbox.create(SandboxSpec())
    return sandbox


class History:
    """Drive a ScopeManager with picks by index; refused commands are skipped."""

    def __init__(self, manager: ScopeManager) -> None:
        self.manager = manager
        self.scopes: list[str] = []
        self.children: list[str] = []
        self.checkpoints: list[str] = []
        self.outputs: list[str] = []

    @staticmethod
    def _pick(items: list[str], n: int) -> str | None:
        return items[n % len(items)] if items else None

    def run(self, verb: str, n: int, action: str) -> None:
        manager = self.manager
        scope = self._pick(self.scopes, n)
        if verb in ("root", "bare_root"):
            sandbox = _sandbox() if verb == "root" else None
            created = manager.create(f"root{len(self.scopes)}", sandbox)
            self._keep(created, self.scopes, lambda s: s.id)
        elif scope is None:
            return
        elif verb in ("fork", "fork_isolated"):
            child = f"{scope.removeprefix('scope:')}:c{len(self.scopes)}"
            if verb == "fork":
                forked = manager.fork(scope, child)
            else:
                forked = manager.fork_isolated(scope, child, None, _sandbox())
            self._keep(forked, self.scopes, lambda s: s.id)
            self._keep(forked, self.children, lambda s: s.id)
        elif verb == "halt":
            manager.halt(scope)
        elif verb in ("merge", "discard", "seal"):
            target = self._pick(self.children, n)
            if target is None:
                return
            if verb == "seal":
                self._keep(manager.seal(target), self.outputs, lambda o: o.id)
            else:
                getattr(manager, verb)(target)
        elif verb == "checkpoint":
            checkpoint = manager.create_checkpoint(scope, b"snap")
            self._keep(checkpoint, self.checkpoints, lambda c: c.id)
        elif verb == "restore":
            picked = self._pick(self.checkpoints, n)
            if picked is not None:
                manager.restore_checkpoint(picked)
        elif verb == "settle":
            output = self._pick(self.outputs, n)
            if output is not None:
                manager.settle(output, action)

    @staticmethod
    def _keep(
        result: Result[Any, Any], into: list[str], key: Callable[[Any], str]
    ) -> None:
        value = result.value_or(None)
        if value is not None:
            into.append(key(value))


def _recovered(
    store: SQLiteTraceStore,
) -> dict[str, tuple[str, str | None, str | None]]:
    manager = recover_scopes(TraceEventStore(store), RecoverOptions()).unwrap()
    return {
        scope.owner_id: (
            scope.state.value,
            scope.parent.owner_id if scope.parent else None,
            scope.fork_point or None,
        )
        for scope in manager.all_scopes()
    }


def _projected(
    runner: ProjectionRunner,
) -> dict[str, tuple[str, str | None, str | None]]:
    with runner.read("goatherd.scope_tree") as view:
        nodes = listed_scopes(view.rows())
    assert all(not node.inconsistent for node in nodes)
    return {n.owner: (n.state, n.parent_owner, n.fork_point) for n in nodes}


@settings(deadline=None)
@given(ops)
def test_the_projected_scope_tree_is_the_recovered_one(plan) -> None:
    with SQLiteTraceStore(":memory:") as store:
        history = History(ScopeManager(TraceEventStore(store)))
        runner = ProjectionRunner(store, builtin_projections(), batch_size=5)
        for verb, n, action in [("root", 0, ""), ("fork", 0, ""), *plan]:
            if verb == "catch_up":
                runner.catch_up()
            else:
                history.run(verb, n, action)
        runner.catch_up()
        assert _projected(runner) == _recovered(store)


def test_a_halted_root_that_never_forked_is_not_a_recovered_scope() -> None:
    with SQLiteTraceStore(":memory:") as store:
        manager = ScopeManager(TraceEventStore(store))
        lone = manager.create("lone").unwrap()
        root = manager.create("root", _sandbox()).unwrap()
        child = manager.fork(root.id, "root:c").unwrap()
        manager.halt(lone.id).unwrap()
        manager.halt(child.id).unwrap()
        runner = ProjectionRunner(store, builtin_projections())
        runner.catch_up()
        assert _recovered(store) == {
            "root": ("active", None, None),
            "root:c": ("discarded", "root", child.fork_point),
        }
        assert _projected(runner) == _recovered(store)
        with runner.read("goatherd.scope_tree") as view:
            lone_node = view.get("lone")
        assert lone_node is not None
        assert (lone_node.state, lone_node.listed) == ("discarded", False)


def test_checkpoints_and_outputs_are_read_once_across_their_paths() -> None:
    with SQLiteTraceStore(":memory:") as store:
        manager = ScopeManager(TraceEventStore(store))
        root = manager.create("root", _sandbox()).unwrap()
        checkpoint = manager.create_checkpoint(root.id, b"snap").unwrap()
        child = manager.fork(root.id, "root:c").unwrap()
        output = manager.seal(child.id).unwrap()
        manager.settle(output.id, "selected").unwrap()
        manager.restore_checkpoint(checkpoint.id).unwrap()
        runner = ProjectionRunner(store, builtin_projections())
        runner.catch_up()
        with runner.read("goatherd.checkpoints") as view:
            (cp_row,) = view.rows()
        with runner.read("goatherd.retained_outputs") as view:
            (out_row,) = view.rows()
        assert (cp_row.checkpoint_id, cp_row.owner, cp_row.state) == (
            checkpoint.id,
            "root",
            "used",
        )
        assert (out_row.output_id, out_row.owner, out_row.scope_id) == (
            output.id,
            "root:c",
            child.id,
        )
        assert (out_row.state, out_row.inconsistent) == ("selected", "")
