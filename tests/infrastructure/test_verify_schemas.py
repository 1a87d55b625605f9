"""``verify`` decodes every record of a schema the default libraries know.

A record an older writer stored (the door now refuses them) whose typed event
does not fit is one the runtime cannot fold: verify names it under
``schemas`` with its id, and recovery names the same record and carries on
without its path. Records of
every recorded trace format, a live runtime session and a task tree decode,
so verify stays green on them; schemas no library knows are not judged.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from returns.result import Failure

from goatherd.application import (
    RecoverOptions,
    RecoveryStats,
    Registry,
    SandboxSpec,
    TaskControl,
    recover_scopes,
    start_task_sync,
)
from goatherd.domain import (
    TRUSTED_APPEND_CONTEXT,
    AppendBatch,
    AppendGroup,
    RecordDraft,
    ScopeCreated,
)
from goatherd.infrastructure.audit.verify import verify_trace
from goatherd.infrastructure.bootstrap import runtime_context_for, scope_manager_for
from goatherd.infrastructure.sandbox.memory import MemorySandbox, MemorySandboxConfig
from goatherd.infrastructure.store import (
    SqlAlchemyTraceStore,
    open_trace_store,
    plan,
)
from goatherd.projections import known_schema_refs, shepherd_schemas
from tests.golden.traces import fixtures, load, replay


def _append(store: SqlAlchemyTraceStore, intent: str, *drafts: RecordDraft) -> str:
    receipt = store.append(
        TRUSTED_APPEND_CONTEXT,
        AppendBatch(intent, (AppendGroup("agent:x", fact_drafts=drafts),)),
    )
    return receipt.fact_ids[0]


def _schemas_problems(store: SqlAlchemyTraceStore) -> list[str]:
    return [str(p) for p in verify_trace(store).problems if p.check == "schemas"]


def _sandbox() -> MemorySandbox:
    sb = MemorySandbox(MemorySandboxConfig(files={"a.txt": b"1\n"}))
    sb.create(SandboxSpec())
    return sb


@pytest.mark.parametrize("path", list(fixtures()), ids=lambda p: p.stem)
def test_every_recorded_trace_format_decodes(path: Path) -> None:
    with open_trace_store("sqlite://") as store:
        replay(store, load(path))
        assert _schemas_problems(store) == []


def test_a_runtime_session_and_a_task_tree_verify_green() -> None:
    with open_trace_store("sqlite://") as store:
        mgr = scope_manager_for(store)
        root = mgr.create("agent:main", _sandbox()).unwrap()
        child = mgr.fork(root.id, "try").unwrap()
        cp = mgr.create_checkpoint(root.id, b"snapshot").unwrap()
        mgr.restore_checkpoint(cp.id).unwrap()
        mgr.append_fact(child.id, "app.note.v1", "note", {"n": 1}).unwrap()
        registry = Registry()

        def tree(control: TaskControl) -> dict[str, object]:
            control.publish("start", {"n": 1})
            control.await_terminal(control.spawn("Leaf", {"n": 2}))
            return {"done": True}

        registry.register("Tree", tree)

        def fails(control: TaskControl) -> None:
            raise ValueError("a failing body")

        registry.register("Leaf", lambda control: {"leaf": True})
        registry.register("Fails", fails)
        start_task_sync(store, registry, "Tree", "run:tree").unwrap()
        start_task_sync(store, registry, "Fails", "run:fails").unwrap()

        schemas = {e.record.envelope.schema_ref for e in store.read_log(0, 2**63 - 1)}
        assert set(shepherd_schemas().schema_refs) <= schemas
        assert len(schemas & known_schema_refs()) > len(shepherd_schemas().schema_refs)
        report = verify_trace(store)
        assert report.ok, report.problems


@pytest.mark.parametrize(
    ("mode", "payload", "reason"),
    [
        ("declaration", {}, "payload.owner is missing"),
        ("capture", None, "mode is 'capture'"),
        ("declaration", {"owner": 7}, "payload.owner"),
    ],
)
def test_a_known_schema_the_runtime_cannot_read_is_named(
    tmp_path: Path,
    mode: str,
    payload: dict[str, object] | None,
    reason: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    url = f"sqlite:///{tmp_path / 'trace.db'}"
    with open_trace_store(url) as store:
        mgr = scope_manager_for(store)
        mgr.create("agent:good", _sandbox()).unwrap()
        if payload is None:  # a well-formed payload under the wrong mode
            payload = next(
                dict(e.record.payload)
                for e in store.read_path("agent:good")
                if e.record.envelope.schema_ref == ScopeCreated.SCHEMA
            )
        with monkeypatch.context() as old_writer:  # stored before the door checked
            old_writer.setattr(
                plan, "_refuse_unreadable_runtime_records", lambda *_: None
            )
            bad = _append(
                store,
                "i:foreign",
                RecordDraft(mode, ScopeCreated.SCHEMA, payload, "scope_created"),
            )
        problems = _schemas_problems(store)
        assert len(problems) == 1
        assert problems[0].startswith(
            f"schemas: record {bad}: a {ScopeCreated.SCHEMA} record the runtime "
            "cannot read: "
        )
        assert reason in problems[0]
        assert "\n" not in problems[0]
        stats = RecoveryStats()
        recovered = recover_scopes(
            runtime_context_for(store), RecoverOptions(stats=stats)
        )
        assert not isinstance(recovered, Failure)
        assert len(stats.unreadable) == 1
        assert bad in stats.unreadable[0]


def test_schemas_no_library_knows_are_not_judged() -> None:
    with open_trace_store("sqlite://") as store:
        _append(
            store, "i:app", RecordDraft("declaration", "app.anything.v1", {"x": [1]})
        )
        assert verify_trace(store).ok
