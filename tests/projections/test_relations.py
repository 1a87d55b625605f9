from __future__ import annotations

import pytest

from goatherd.domain import Record, RecordDecodeError, RecordDraft
from goatherd.projections import (
    SCHEMA_EXECUTION_RELATION,
    ExecutionRelation,
    ProjectionModeError,
    RelationKind,
    create_execution_relation_batch,
    execution_relation_created,
    execution_relation_from_fact,
    project_execution_relations,
)
from tests.projections.slices import make_record, shape_of, slice_of

PARENT = "exec:parent"


def _relation(kind: str, rel: str = "rel:1", child: str = "exec:child", **kw):
    return execution_relation_created(rel, kind, kw.pop("parent", PARENT), child, **kw)


def test_the_relation_draft_is_a_capture_with_five_payload_keys() -> None:
    draft = _relation("spawned", child_frontier_id="frontier:c")
    assert (draft.mode, draft.kind_label, draft.schema_ref) == (
        "capture",
        "relation_created",
        "shepherd2.execution_relation.created.v1",
    )
    assert dict(draft.payload) == {
        "relation_id": "rel:1",
        "relation_kind": "spawned",
        "parent_execution_id": PARENT,
        "child_execution_id": "exec:child",
        "child_frontier_id": "frontier:c",
    }
    assert _relation("adopted").payload["child_frontier_id"] is None


def test_the_relation_batch_lives_on_the_parent_path() -> None:
    batch = create_execution_relation_batch(
        append_intent_id="i",
        relation_id="rel:1",
        relation_kind=RelationKind.SPAWNED,
        parent_execution_id=PARENT,
        child_execution_id="exec:child",
        caused_by=("sha256:tail",),
    )
    (group,) = batch.groups
    assert group.trace_owner_id == PARENT
    assert group.causal_parents == ("sha256:tail",)
    assert group.fact_drafts[0].payload["relation_kind"] == "spawned"


def test_relations_are_listed_in_path_order_including_abandoned() -> None:
    spawned = make_record(_relation("spawned", child_frontier_id="f:1"), PARENT, 0)
    abandoned = make_record(_relation("abandoned", child_frontier_id="f:1"), PARENT, 1)
    relations = project_execution_relations(slice_of([spawned, abandoned]), PARENT)
    assert [r.relation_kind for r in relations] == ["spawned", "abandoned"]
    assert relations[0] == ExecutionRelation(
        "rel:1", RelationKind.SPAWNED, PARENT, "exec:child", "f:1", spawned.record_id
    )


def test_relations_of_another_parent_and_other_schemas_are_skipped() -> None:
    foreign = make_record(_relation("spawned", parent="exec:else"), PARENT, 0)
    note = make_record(RecordDraft("capture", "app.note.v1"), PARENT, 1)
    assert project_execution_relations(slice_of([foreign, note]), PARENT) == ()


def test_the_builder_refuses_an_unknown_relation_kind() -> None:
    with pytest.raises(ValueError, match="'orphaned' is not a valid RelationKind"):
        _relation("orphaned")


def _hand_written(payload) -> Record:
    draft = RecordDraft("capture", SCHEMA_EXECUTION_RELATION, payload)
    return make_record(draft, PARENT, 0)


def test_an_unknown_relation_kind_is_refused_naming_the_record() -> None:
    payload = dict(_relation("spawned").payload, relation_kind="orphaned")
    bad = _hand_written(payload)
    with pytest.raises(RecordDecodeError) as caught:
        project_execution_relations(slice_of([bad]), PARENT)
    assert bad.record_id in str(caught.value)
    assert "payload.relation_kind is 'orphaned', not a known value" in str(caught.value)


@pytest.mark.parametrize(
    "key",
    [
        "relation_id",
        "relation_kind",
        "parent_execution_id",
        "child_execution_id",
        "child_frontier_id",
    ],
)
def test_a_relation_with_a_missing_key_is_refused_not_defaulted(key) -> None:
    payload = dict(_relation("adopted").payload)
    del payload[key]
    with pytest.raises(RecordDecodeError, match=f"payload.{key} is missing"):
        execution_relation_from_fact(_hand_written(payload))


def test_a_relation_with_extra_keys_keeps_them() -> None:
    payload = {**_relation("spawned").payload, "x-note": [1]}
    relation = execution_relation_from_fact(_hand_written(payload))
    assert relation.relation_kind is RelationKind.SPAWNED


def test_reading_another_schema_as_a_relation_names_it() -> None:
    record = make_record(RecordDraft("capture", "app.note.v1"), PARENT, 0)
    with pytest.raises(
        ValueError, match=r"expected relation_created fact, got .app\.note\.v1."
    ):
        execution_relation_from_fact(record)


def test_a_shape_or_a_wrong_mode_is_rejected() -> None:
    record = make_record(_relation("spawned"), PARENT, 0)
    with pytest.raises(TypeError, match="payload-visible"):
        project_execution_relations(slice_of([shape_of(record)]), PARENT)
    with pytest.raises(ProjectionModeError):
        project_execution_relations(
            slice_of([record], mode_filter="declarations_only"), PARENT
        )
