"""The runtime fold at its edges: odd ids, shared workspaces, forged cycles, ends."""

from __future__ import annotations

from dataclasses import replace

import pytest

from goatherd.domain import (
    CheckpointCreated,
    MemoryCatalog,
    ScopeAggregate,
    ScopeHalted,
    ScopeState,
    WorkspaceCaptured,
)
from goatherd.domain.runtime_state import workspace_owner_of

from .facts import Trace


def created(checkpoint_id: str) -> CheckpointCreated:
    return CheckpointCreated(
        checkpoint_id=checkpoint_id,
        backend="memory",
        revision="r",
        state_digest="sha256:w",
        has_snapshot=False,
    )


def test_a_checkpoint_id_without_an_owner_belongs_to_the_path_it_sits_on() -> None:
    trace = Trace()
    trace.create("r")
    trace.place(created("legacy-checkpoint"), "r")
    assert trace.checkpoint("legacy-checkpoint").scope_owner == "r"
    assert trace.scope("r").workspace_digest == "sha256:w"


def test_a_checkpoint_on_its_own_path_only_names_no_scope() -> None:
    trace = Trace()
    trace.place(created("odd"), "odd")
    assert trace.checkpoint("odd").scope_owner == ""
    assert trace.scope("odd").listed is False


def test_a_checkpoint_id_names_its_scope_wherever_it_is_placed() -> None:
    trace = Trace()
    trace.create("r")
    trace.place(created("cp:r:1"), "cp:r:1")
    assert trace.checkpoint("cp:r:1").scope_owner == "r"


def test_a_shared_childs_capture_records_the_owning_ancestors_workspace() -> None:
    trace = Trace()
    trace.create("r")
    trace.fork("r", "kid")
    captured = WorkspaceCaptured(
        backend="memory", revision="r2", state_digest="sha256:c"
    )
    trace.place(captured, "kid")
    assert trace.scope("r").workspace_digest == "sha256:c"
    assert trace.scope("kid").workspace_digest == ""


def test_an_end_names_its_record() -> None:
    trace = Trace()
    trace.create("r")
    record = trace.place(ScopeHalted(), "r")
    assert trace.scope("r").state is ScopeState.DISCARDED
    assert trace.scope("r").terminal_record == record


@pytest.mark.timeout(20)
def test_a_forged_parent_cycle_stops_where_it_closes() -> None:
    catalog = MemoryCatalog()
    for owner, parent in (("a", "b"), ("b", "c"), ("c", "b")):
        catalog.put_scope(
            replace(ScopeAggregate.bare(owner), listed=True, parent_owner=parent)
        )
    assert workspace_owner_of(catalog, "a") == "c"
