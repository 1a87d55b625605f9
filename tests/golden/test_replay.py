"""Recorded traces replay to their expected read models (like Temporal's replayer).

Each fixture in this directory is appended to a fresh store the way its
writer appended it; recovery, a manager and the runtime-state projection
must then answer what the fixture expects (or refuse it, for the
deliberately contradictory one).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from returns.result import Failure

from goatherd.application import RecoverOptions, ScopeManager, recover_scopes
from goatherd.domain import CheckpointNotRestorableError
from goatherd.infrastructure.bootstrap import runtime_context_for, scope_manager_for
from goatherd.infrastructure.projections.runner import ProjectionRunner
from goatherd.infrastructure.projections.views import runtime_state_view_factory
from goatherd.infrastructure.store import SQLiteTraceStore
from goatherd.projections import RuntimeStateProjection, listed_scopes
from tests.golden.traces import fixtures, load, replay

FIXTURES = list(fixtures())


def test_every_fixture_is_here():
    assert {path.stem for path in FIXTURES} == {
        "current_runtime",
        "goatherd_0_1",
        "inconsistent",
        "seed_layout",
        "v1_payloads",
    }


@pytest.fixture(params=FIXTURES, ids=lambda p: p.stem)
def recorded(request, tmp_path) -> tuple[dict[str, Any], Path]:
    fixture = load(request.param)
    path = tmp_path / "trace.db"
    with SQLiteTraceStore(path) as store:
        replay(store, fixture)
    return fixture, path


def scopes_of(mgr: ScopeManager) -> list[dict[str, Any]]:
    return [
        {
            "owner": s.owner_id,
            "parent": None if s.parent is None else s.parent.owner_id,
            "state": s.state.value,
            "children": [c.owner_id for c in s.children],
        }
        for s in mgr.all_scopes()
    ]


def test_recovery_answers_what_the_fixture_expects(recorded):
    fixture, path = recorded
    expected = fixture["expected"]
    with SQLiteTraceStore(path) as store:
        result = recover_scopes(runtime_context_for(store), RecoverOptions())
        if expected["recover"] != "ok":
            assert isinstance(result, Failure)
            assert expected["recover"].removeprefix("error: ") in str(result.failure())
            return
        mgr = result.unwrap()
        assert scopes_of(mgr) == [
            {k: v for k, v in s.items() if k != "inconsistent"}
            for s in expected["scopes"]
        ]
        for cp in expected["checkpoints"]:
            view = mgr.checkpoint(cp["id"])
            assert view is not None, cp["id"]
            assert view.state.value == cp["state"]
            model = mgr.context.model
            aggregate = model.checkpoint(cp["id"])
            scope = model.scope(aggregate.scope_owner)
            if cp["restorable"]:
                aggregate.check_restorable(scope)
            else:
                with pytest.raises(CheckpointNotRestorableError):
                    aggregate.check_restorable(scope)
        for out in expected["outputs"]:
            found = mgr.output(out["id"])
            assert found is not None, out["id"]
            assert found.state.value == out["state"]


def test_the_read_model_rebuilt_from_the_log_says_the_same(recorded):
    fixture, path = recorded
    expected = fixture["expected"]
    with SQLiteTraceStore(path) as store:
        runner = ProjectionRunner(
            store, [RuntimeStateProjection(runtime_state_view_factory("golden_"))]
        )
        runner.catch_up()
        with runner.read(RuntimeStateProjection.name) as view:
            rows = listed_scopes(view.scope_rows())
            states = {row.owner: row.state.value for row in rows}
            flagged = {row.owner for row in rows if row.inconsistent}
            outputs = {o.output_id: o.state.value for o in view.output_rows()}
    assert states == {s["owner"]: s["state"] for s in expected["scopes"]}
    assert flagged == {s["owner"] for s in expected["scopes"] if s.get("inconsistent")}
    assert outputs == {o["id"]: o["state"] for o in expected["outputs"]}


def test_a_recovered_legacy_trace_keeps_working(recorded):
    """New commands run on an older trace: fork, seal and settle still hold."""
    fixture, path = recorded
    if fixture["expected"]["recover"] != "ok":
        return
    from goatherd.application import SandboxSpec
    from goatherd.infrastructure.sandbox.memory import (
        MemorySandbox,
        MemorySandboxConfig,
    )

    root = fixture["expected"]["scopes"][0]["owner"]
    with SQLiteTraceStore(path) as store:
        mgr = scope_manager_for(store)
        main = MemorySandbox(MemorySandboxConfig(files={"f.txt": b"1\n"}))
        main.create(SandboxSpec())
        mgr.attach_sandbox(f"scope:{root}", main)
        wt = MemorySandbox(MemorySandboxConfig(repository=main.repository))
        wt.create(SandboxSpec())
        child = mgr.fork_isolated(f"scope:{root}", f"{root}:new", None, wt).unwrap()
        wt.write_file("g.txt", b"2\n")
        out = mgr.seal(child.id).unwrap()
        assert mgr.settle(out.id, "selected").unwrap() is None
        assert main.read_file("g.txt") == b"2\n"
        again = scope_manager_for(store)
        assert again.get(child.id).state.value == "merged"  # type: ignore[union-attr]


def test_a_fixture_s_bytes_are_what_its_session_puts_and_it_verifies(tmp_path):
    """The door refuses a record naming bytes not held (ADR 0088): replay puts them.

    ``blobs/current_runtime.json`` is what ``python -m tests.golden.record_blobs``
    writes from the scripted session; replayed with them, the trace verifies.
    """
    import base64

    from goatherd.infrastructure.audit.verify import verify_trace
    from goatherd.infrastructure.blobs.store import SqlBlobStore
    from tests.golden.record_blobs import blobs_of
    from tests.golden.traces import HERE, named_digests

    fixture = load(HERE / "current_runtime.json")
    side = {d: base64.b64decode(text) for d, text in fixture["blobs"].items()}
    assert set(side) == named_digests(fixture) != set()
    assert blobs_of(fixture) == side
    with SQLiteTraceStore(tmp_path / "trace.db") as store:
        replay(store, fixture)
        report = verify_trace(store)
        assert report.ok, report.problems
        blobs = SqlBlobStore(store)
        assert {d: blobs.get(d) for d in side} == side
