from __future__ import annotations

from goatherd.domain import Cut, RecordDraft
from goatherd.projections import (
    ExecutionStatus,
    PublishedFact,
    complete_execution_batch,
    create_execution_batch,
    execution_relation_created,
    project_effective_history,
)
from tests.projections.slices import make_record, records_of_batches, slice_of

ROOT = "exec:root"


def _child_slice(child: str, frontier_id: str):
    records = records_of_batches(
        [
            create_execution_batch(
                append_intent_id=f"{child}:create",
                execution_id=child,
                task_ref="pkg.Child",
                inputs={},
                parent_execution_id=ROOT,
            ),
            complete_execution_batch(
                append_intent_id=f"{child}:complete",
                execution_id=child,
                outputs={"leaf": True},
            ),
        ]
    )
    last = records[-1]
    frontier = Cut(frontier_id, child, last.record_id, last.owner_ordinal, ROOT)
    return slice_of(records, frontier=frontier)


def _root_records(relations):
    base = records_of_batches(
        [
            create_execution_batch(
                append_intent_id="root:create",
                execution_id=ROOT,
                task_ref="pkg.Root",
                inputs={},
            )
        ]
    )
    published = make_record(
        RecordDraft(
            "capture",
            "shepherd2.runtime.published_fact.v1",
            {"kind": "phase", "data": {"at": "start"}},
            kind_label="fact_published",
        ),
        ROOT,
        2,
    )
    rel_records = [make_record(draft, ROOT, 3 + i) for i, draft in enumerate(relations)]
    return [*base, published, *rel_records]


def test_active_children_are_projected_from_their_frontier_slices() -> None:
    relations = [
        execution_relation_created("rel:a", "spawned", ROOT, "exec:a", "f:a"),
        execution_relation_created("rel:b", "adopted", ROOT, "exec:b", "f:b"),
    ]
    history = project_effective_history(
        slice_of(_root_records(relations)),
        ROOT,
        child_slices=[_child_slice("exec:a", "f:a"), _child_slice("exec:b", "f:b")],
    )
    assert history.root.status is ExecutionStatus.RUNNING
    assert [c.relation.relation_id for c in history.children] == ["rel:a", "rel:b"]
    assert [c.execution.status for c in history.children] == ["succeeded"] * 2
    assert history.children[0].execution.outputs == {"leaf": True}


def test_spawned_then_abandoned_yields_no_child_but_keeps_both_relations() -> None:
    relations = [
        execution_relation_created("rel:a", "spawned", ROOT, "exec:a", "f:a"),
        execution_relation_created("rel:a", "abandoned", ROOT, "exec:a", "f:a"),
    ]
    history = project_effective_history(
        slice_of(_root_records(relations)),
        ROOT,
        child_slices=[_child_slice("exec:a", "f:a")],
    )
    assert [r.relation_kind for r in history.relations] == ["spawned", "abandoned"]
    assert history.children == ()


def test_relations_without_a_frontier_or_a_matching_slice_are_skipped() -> None:
    relations = [
        execution_relation_created("rel:a", "spawned", ROOT, "exec:a", None),
        execution_relation_created("rel:b", "spawned", ROOT, "exec:b", "f:missing"),
    ]
    history = project_effective_history(slice_of(_root_records(relations)), ROOT)
    assert history.children == ()
    assert len(history.relations) == 2


def test_published_facts_are_listed_with_kind_and_data() -> None:
    records = _root_records([])
    history = project_effective_history(slice_of(records), ROOT)
    assert history.published_facts == (
        PublishedFact(records[2].record_id, "phase", {"at": "start"}),
    )


def test_a_published_fact_with_non_dict_data_gets_an_empty_mapping() -> None:
    odd = make_record(
        RecordDraft("capture", "shepherd2.runtime.published_fact.v1", {"data": [1]}),
        ROOT,
        0,
    )
    history = project_effective_history(slice_of([odd]), ROOT)
    assert history.published_facts == (PublishedFact(odd.record_id, "", {}),)
