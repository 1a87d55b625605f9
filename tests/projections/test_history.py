from __future__ import annotations

import pytest

from goatherd.domain import (
    PUBLISHED_FACT_SCHEMA_REF,
    Cut,
    RecordDecodeError,
    RecordDraft,
)
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
            PUBLISHED_FACT_SCHEMA_REF,
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


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        ({"kind": "k", "data": [1]}, "payload.data must be an object, got an array"),
        ({"data": {}}, "payload.kind is missing"),
        ({"kind": 7, "data": {}}, "payload.kind must be a string, got an integer"),
    ],
)
def test_a_published_fact_that_does_not_decode_is_refused_naming_it(
    payload, reason
) -> None:
    # Strict decoding: the fold never turns a malformed fact into a plausible one.
    odd = make_record(
        RecordDraft("capture", PUBLISHED_FACT_SCHEMA_REF, payload), ROOT, 0
    )
    with pytest.raises(RecordDecodeError) as caught:
        project_effective_history(slice_of([odd]), ROOT)
    assert str(caught.value) == (
        f"record {odd.record_id} at {ROOT}#0 ({PUBLISHED_FACT_SCHEMA_REF}) "
        f"does not decode: {reason}"
    )
