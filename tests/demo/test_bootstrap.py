"""The composition root: open_runtime wires a store, a bus and the managers."""

from __future__ import annotations

import pytest

from goatherd.application import SandboxSpec
from goatherd.domain import NotATraceStoreError, ScopeState
from goatherd.domain.effects import EffectEvent
from goatherd.infrastructure.bootstrap import open_runtime
from goatherd.infrastructure.sandbox.memory import MemorySandbox, MemorySandboxConfig


def memory_sandbox() -> MemorySandbox:
    sandbox = MemorySandbox(MemorySandboxConfig(files={"a.txt": b"1\n"}))
    sandbox.create(SandboxSpec())
    return sandbox


class TestOpenRuntime:
    def test_a_manager_writes_to_the_trace_and_the_bus_sees_each_entry(self, tmp_path):
        with open_runtime(tmp_path / "t.sqlite") as runtime:
            assert runtime.bus is not None
            watch = runtime.bus.subscribe("test")
            manager = runtime.new_manager()
            root = manager.create("agent:main", memory_sandbox()).unwrap()
            child = manager.fork(root.id, "agent:main:child").unwrap()
            seen = watch.drain()
            assert {e.trace_owner_id for e in seen} == {
                "agent:main",
                "agent:main:child",
            }
            assert child.state is ScopeState.ACTIVE
            assert runtime.store.max_position() + 1 == len(seen)

    def test_the_tap_sees_every_event_synchronously_even_without_a_bus(self, tmp_path):
        tapped: list[EffectEvent] = []
        with open_runtime(tmp_path / "t.sqlite", bus=False, tap=tapped.append) as rt:
            assert rt.bus is None
            manager = rt.new_manager()
            root = manager.create("agent:main", memory_sandbox()).unwrap()
            manager.fork(root.id, "agent:main:child").unwrap()
            # Synchronous: every committed entry was handed over before fork returned.
            assert len(tapped) == rt.store.max_position() + 1
            schemas = [event.schema_ref for event in tapped]
            assert schemas == [
                "goatherd.scope.created.v1",  # the root is a record now
                "goatherd.scope.forked.v1",  # the fork, on the parent's path
                "goatherd.scope.forked.v1",  # ... and on the child's
            ]

    def test_recover_rebuilds_the_tree_from_the_trace_after_reopening(self, tmp_path):
        path = tmp_path / "t.sqlite"
        with open_runtime(path) as runtime:
            manager = runtime.new_manager()
            root = manager.create("agent:main", memory_sandbox()).unwrap()
            manager.fork(root.id, "agent:main:child").unwrap()
        adopted: list[str] = []

        def resolver(scope_id: str, backend: str, recorded: str):
            adopted.append(scope_id)
            return memory_sandbox()

        with open_runtime(path) as runtime:
            recovered = runtime.recover(resolver).unwrap()
            child = recovered.get("scope:agent:main:child")
            assert child is not None
            assert child.state is ScopeState.ACTIVE
            assert adopted == ["scope:agent:main"]

    def test_close_is_idempotent_and_closes_the_bus(self, tmp_path):
        runtime = open_runtime(tmp_path / "t.sqlite")
        runtime.close()
        runtime.close()
        assert runtime.bus is not None
        assert runtime.bus.closed

    def test_a_file_that_is_not_a_trace_is_refused_and_kept(self, tmp_path):
        path = tmp_path / "notes.sqlite"
        path.write_bytes(b"not a database at all, just some notes\n" * 200)
        before = path.read_bytes()
        with pytest.raises(NotATraceStoreError):
            open_runtime(path)
        assert path.read_bytes() == before

    def test_an_unsupported_url_is_refused(self):
        with pytest.raises(ValueError, match="unsupported trace store URL"):
            open_runtime("mysql://localhost/trace")
