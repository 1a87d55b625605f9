"""Scope aggregate: lifecycle rules and folds, with no store."""

from __future__ import annotations

import pytest

from goatherd.domain import (
    NotAChildError,
    RecordAppended,
    ScopeAggregate,
    ScopeExistsError,
    ScopeForked,
    ScopeState,
    ScopeStateError,
    WorkspaceState,
    record_digest,
    runtime_witness_ref,
)

BASE = WorkspaceState(backend="memory", revision="r1", data={"files": {}})


def fold(agg: ScopeAggregate) -> ScopeAggregate:
    """Rebuild an aggregate from the events it emitted so far (replay)."""
    events = list(agg.pending())
    rebuilt = ScopeAggregate.fold(None, events)
    assert rebuilt is not None
    return rebuilt


def forked_pair() -> tuple[ScopeAggregate, ScopeAggregate]:
    parent = ScopeAggregate.bare("agent:main")
    child = ScopeAggregate.bare("agent:exp")
    parent.fork(child, baseline=BASE)
    return parent, child


def test_a_bare_scope_is_an_active_root_with_no_records():
    scope = ScopeAggregate.bare("agent:main")
    assert scope.state is ScopeState.ACTIVE
    assert scope.parent_owner is None
    assert scope.head == 0
    assert not scope.exists
    assert scope.scope_id == "scope:agent:main"


def test_a_fork_is_one_record_placed_on_the_parent_and_the_child():
    parent, child = forked_pair()
    (on_parent,) = parent.pending()
    (on_child,) = child.pending()
    assert isinstance(on_parent, ScopeForked)
    assert on_parent.record_id == on_child.record_id
    assert (on_parent.originator_id, on_parent.originator_version) == ("agent:main", 0)
    assert (on_child.originator_id, on_child.originator_version) == ("agent:exp", 0)
    assert parent.children == ["agent:exp"]
    assert child.parent_owner == "agent:main"
    assert child.fork_point == on_parent.record_id
    assert child.baseline == BASE


def test_the_fork_payload_carries_the_seed_keys_and_omits_absent_ones():
    parent, _ = forked_pair()
    payload = parent.pending()[0].payload()
    assert payload == {
        "child_owner": "agent:exp",
        "parent_owner": "agent:main",
        "baseline_digest": BASE.digest(),
        "baseline": BASE.to_json(),
    }


def test_an_isolated_fork_records_backend_and_path():
    parent = ScopeAggregate.bare("p")
    child = ScopeAggregate.bare("c")
    event = parent.fork(
        child, baseline=None, isolated=True, sandbox_backend="git", sandbox_path="/w/c"
    )
    assert event.payload() == {
        "child_owner": "c",
        "parent_owner": "p",
        "isolated": True,
        "sandbox_backend": "git",
        "sandbox_path": "/w/c",
    }
    assert child.isolated
    assert child.sandbox_path == "/w/c"
    assert child.baseline is None


def test_the_record_id_is_the_kernel_digest_under_the_runtime_witness():
    parent, _ = forked_pair()
    event = parent.pending()[0]
    expected = record_digest(
        "goatherd.scope.forked.v1",
        "declaration",
        event.payload(),
        (),
        runtime_witness_ref(),
    )
    assert event.record_id == expected


def test_forking_onto_an_owner_with_records_is_rejected():
    _parent, child = forked_pair()
    other = ScopeAggregate.bare("agent:other")
    with pytest.raises(ScopeExistsError, match="scope scope:agent:exp already exists"):
        other.fork(child, baseline=None)


def test_forking_a_terminal_scope_is_rejected_and_records_nothing():
    parent, child = forked_pair()
    parent.merge(child)
    before = list(child.pending())
    with pytest.raises(
        ScopeStateError, match="cannot fork scope scope:agent:exp in state merged"
    ):
        child.fork(ScopeAggregate.bare("g"), baseline=None)
    assert child.pending() == before


def test_merge_cites_the_fork_point_and_marks_the_child_merged():
    parent, child = forked_pair()
    event = parent.merge(child)
    assert event.caused_by == (child.fork_point,)
    assert event.payload() == {
        "child_owner": "agent:exp",
        "child_scope": "scope:agent:exp",
    }
    assert child.state is ScopeState.MERGED
    assert parent.state is ScopeState.ACTIVE


def test_merging_a_non_child_is_rejected():
    _parent, child = forked_pair()
    stranger = ScopeAggregate.bare("agent:stranger")
    with pytest.raises(NotAChildError, match="is not a child of scope:agent:stranger"):
        stranger.merge(child)
    assert child.state is ScopeState.ACTIVE


def test_discard_after_merge_is_rejected():
    parent, child = forked_pair()
    parent.merge(child)
    with pytest.raises(ScopeStateError, match="cannot discard scope"):
        parent.discard(child)


def test_halt_discards_is_idempotent_and_refuses_a_merged_scope():
    parent, _child = forked_pair()
    assert parent.halt() is not None
    assert parent.state is ScopeState.DISCARDED
    assert parent.halt() is None
    other_parent, other_child = forked_pair()
    other_parent.merge(other_child)
    with pytest.raises(ScopeStateError, match="cannot halt scope"):
        other_child.halt()


def test_inject_needs_an_active_scope():
    parent, child = forked_pair()
    assert child.inject("try again").payload() == {"guidance": "try again"}
    parent.discard(child)
    with pytest.raises(ScopeStateError, match="cannot inject into scope"):
        child.inject("too late")


def test_an_unknown_record_only_advances_the_version():
    scope = ScopeAggregate.bare("agent:main")
    event = scope.append_fact("yaah.tool.bash.v1", "tool", {"cmd": "ls"})
    assert isinstance(event, RecordAppended)
    assert event.schema_ref == "yaah.tool.bash.v1"
    assert scope.version == 0
    assert scope.state is ScopeState.ACTIVE
    with pytest.raises(ValueError, match="schema_ref is required"):
        scope.append_fact("", "tool", {})


def test_a_fold_of_the_emitted_events_equals_the_live_aggregate():
    parent, child = forked_pair()
    child.append_fact("x.v1", "x", {"n": 1})
    child.inject("hint")
    parent.discard(child)
    assert fold(parent) == parent
    assert fold(child) == child
