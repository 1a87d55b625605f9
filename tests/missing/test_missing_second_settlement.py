"""A second ``settled`` record for one output never overwrites the first.

The runtime refuses a second settlement, but a record can still reach the log
through the trusted context or an import. The runtime model, the kept
runtime-state read model and recovery must then keep the first settlement
(and recovery names the contradiction) instead of adopting the second.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from returns.result import Failure, Success

from goatherd.application import RecoverOptions, SandboxSpec, recover_scopes
from goatherd.application.decisions import Decision
from goatherd.domain import (
    TRUSTED_APPEND_CONTEXT,
    OutputSettled,
    OutputState,
    TraceStoreError,
)
from goatherd.domain.settlement import SettlementAction
from goatherd.infrastructure.bootstrap import runtime_context_for, scope_manager_for
from goatherd.infrastructure.projections.runner import ProjectionRunner
from goatherd.infrastructure.projections.views import runtime_state_view_factory
from goatherd.infrastructure.sandbox.memory import MemorySandbox, MemorySandboxConfig
from goatherd.infrastructure.store import SQLiteTraceStore
from goatherd.projections import RuntimeStateProjection


def _sandbox(repository: object | None = None) -> MemorySandbox:
    if repository is None:
        sb = MemorySandbox(MemorySandboxConfig(files={"a.txt": b"0\n"}))
    else:
        sb = MemorySandbox(MemorySandboxConfig(repository=repository))  # type: ignore[arg-type]
    sb.create(SandboxSpec())
    return sb


@pytest.mark.parametrize("first", ["released", "discarded", "selected"])
def test_a_second_settlement_keeps_the_first(tmp_path: Path, first: str) -> None:
    with SQLiteTraceStore(tmp_path / "trace.db") as store:
        runner = ProjectionRunner(
            store, [RuntimeStateProjection(runtime_state_view_factory("kept_"))]
        )
        main = _sandbox()
        mgr = scope_manager_for(store)
        root = mgr.create("agent:main", main).unwrap()
        kid_sb = _sandbox(main.repository)
        kid = mgr.fork_isolated(root.id, "try", None, kid_sb).unwrap()
        kid_sb.write_file("x.txt", b"x\n")
        out = mgr.seal(kid.id).unwrap()
        runner.catch_up()  # the kept model has seen the output unconsumed
        assert mgr.settle(out.id, first) == Success(None)
        runner.catch_up()
        before = mgr.output(out.id)
        assert before is not None
        state = before.state
        root_files = {p: main.read_file(p) for p in main.list_files()}
        root_digest = mgr.context.model.scope("agent:main").workspace_digest

        # The forged second settlement: an effect the runtime never landed.
        sealed = mgr.context.model.output(out.id)
        second = (
            SettlementAction.APPLY if first == "selected" else SettlementAction.SELECT
        )
        forged = OutputSettled(
            caused_by=(sealed.sealed_record,),
            output_id=out.id,
            action=second,
            state_digest=sealed.workspace.digest(),
            parent_owner="agent:main",
            base_digest=root_digest or None,
            result_digest="sha256:" + "0" * 64,
        )
        batch = Decision().place(forged, "try", out.id, "agent:main")
        try:
            store.append(TRUSTED_APPEND_CONTEXT, batch.batch("forged:settle:1"))
        except TraceStoreError:
            return  # refused at the door: nothing can overwrite the first

        fresh = scope_manager_for(store)
        for m in (mgr, fresh):
            found = m.output(out.id)
            assert found is not None
            assert found.state is state
            agg = m.context.model.output(out.id)
            assert agg.action is not None
            assert agg.action.value == first
            assert agg.settled_record == before_record(mgr, out.id, first)
            assert agg.inconsistent  # the contradiction is named, not adopted
            assert m.context.model.scope("agent:main").workspace_digest == root_digest
        runner.catch_up()
        with runner.read(RuntimeStateProjection.name) as view:
            kept = {o.output_id: o for o in view.output_rows()}
            kept_root = {s.owner: s for s in view.scope_rows()}["agent:main"]
        assert kept[out.id].action.value == first
        assert kept[out.id].state is state
        assert kept_root.workspace_digest == root_digest
        # Recovery refuses the contradictory trace and says which output.
        result = recover_scopes(
            runtime_context_for(store), RecoverOptions(resolver=lambda *_: main)
        )
        assert isinstance(result, Failure), result
        assert out.id in str(result.failure())
        assert "twice" in str(result.failure())
        assert {p: main.read_file(p) for p in main.list_files()} == root_files
        assert OutputState(state.value) is state


def before_record(mgr: object, output_id: str, action: str) -> str:
    """The record id of the first settlement, read from the log itself."""
    store = mgr.context.trace  # type: ignore[attr-defined]
    for entry in store.read_log(-1, 100_000):
        record = entry.record
        if (
            record.envelope.schema_ref == OutputSettled.SCHEMA
            and record.payload["output_id"] == output_id
        ):
            assert record.payload["action"] == action
            return str(record.record_id)
    raise AssertionError("no settlement")
