"""The relation sequence of execution_vectors_v0.json, replayed through the store.

The history sequence needs the task runtime (engineer F's
``tests/conformance/test_execution_vectors_v0.py``); here the effective-history
fold is exercised over the same records appended with the batch builders.
"""

from __future__ import annotations

import pytest

from goatherd.domain import (
    TRUSTED_APPEND_CONTEXT,
    TRUSTED_READ_CONTEXT,
    execution_id_for,
    relation_id_for,
)
from goatherd.infrastructure.store import SQLiteTraceStore
from goatherd.projections import (
    ExecutionStatus,
    RelationKind,
    complete_execution_batch,
    create_execution_batch,
    create_execution_relation_batch,
    project_effective_history_from_store,
    project_execution_from_store,
    project_execution_relations,
    publish_execution_frontier,
)
from tests.conformance.vectors import load_vectors

SEQ = load_vectors("execution_vectors_v0.json")["relation_sequence"]
EVERYTHING = 2**63 - 1


@pytest.fixture
def store():
    with SQLiteTraceStore(":memory:") as store:
        yield store


def _replay(store):
    ctx = TRUSTED_APPEND_CONTEXT
    parent, child = SEQ["parent_execution_id"], SEQ["child_execution_id"]
    created = store.append(
        ctx,
        create_execution_batch(
            append_intent_id=SEQ["parent_create_intent"],
            execution_id=parent,
            task_ref=SEQ["parent_task_ref"],
            inputs={},
        ),
    )
    parent_started = created.fact_ids[1]
    child_created = store.append(
        ctx,
        create_execution_batch(
            append_intent_id=SEQ["child_create_intent"],
            execution_id=child,
            task_ref=SEQ["child_task_ref"],
            inputs=SEQ["child_inputs"],
            parent_execution_id=parent,
            caused_by=(parent_started,),
        ),
    )
    done = store.append(
        ctx,
        complete_execution_batch(
            append_intent_id=SEQ["child_complete_intent"],
            execution_id=child,
            outputs=SEQ["child_outputs"],
            caused_by=(child_created.fact_ids[1],),
        ),
    )
    frontier = publish_execution_frontier(
        store,
        ctx,
        frontier_id=SEQ["child_frontier_id"],
        target_execution_id=child,
        through_fact_id=done.fact_ids[0],
        publisher_execution_id=parent,
    )
    relation = store.append(
        ctx,
        create_execution_relation_batch(
            append_intent_id=SEQ["relation_intent"],
            relation_id=SEQ["relation_id"],
            relation_kind=RelationKind.SPAWNED,
            parent_execution_id=parent,
            child_execution_id=child,
            child_frontier_id=SEQ["child_frontier_id"],
            caused_by=(parent_started,),
        ),
    )
    return frontier, relation


def test_the_vector_ids_derive_from_their_intents() -> None:
    assert execution_id_for(SEQ["parent_create_intent"]) == SEQ["parent_execution_id"]
    assert execution_id_for(SEQ["child_create_intent"]) == SEQ["child_execution_id"]
    assert relation_id_for(SEQ["relation_intent"]) == SEQ["relation_id"]


def test_the_spawned_relation_record_id_matches_the_vector(store) -> None:
    _, relation = _replay(store)
    assert relation.fact_ids == (SEQ["relation_fact_id"],)


def test_the_relation_projects_from_the_parent_path(store) -> None:
    _replay(store)
    parent = SEQ["parent_execution_id"]
    slice_ = store.read_owner_prefix(TRUSTED_READ_CONTEXT, parent, EVERYTHING)
    (relation,) = project_execution_relations(slice_, parent)
    assert relation.relation_id == SEQ["relation_id"]
    assert relation.relation_kind is RelationKind.SPAWNED
    assert relation.child_execution_id == SEQ["child_execution_id"]
    assert relation.child_frontier_id == SEQ["child_frontier_id"]
    assert relation.created_fact_id == SEQ["relation_fact_id"]


def test_the_child_projects_succeeded_from_its_frontier(store) -> None:
    frontier, _ = _replay(store)
    execution = project_execution_from_store(store, TRUSTED_READ_CONTEXT, frontier)
    assert execution.status is ExecutionStatus.SUCCEEDED
    assert execution.outputs == SEQ["child_outputs"]
    assert execution.inputs == SEQ["child_inputs"]
    assert execution.parent_execution_id == SEQ["parent_execution_id"]
    assert execution.cutoff == frontier


def test_effective_history_shows_the_child_until_it_is_abandoned(store) -> None:
    ctx = TRUSTED_APPEND_CONTEXT
    frontier, relation = _replay(store)
    parent = SEQ["parent_execution_id"]
    done = store.append(
        ctx,
        complete_execution_batch(
            append_intent_id="vector:parent:complete",
            execution_id=parent,
            outputs={"ok": True},
            caused_by=relation.fact_ids,
        ),
    )
    root = publish_execution_frontier(
        store,
        ctx,
        frontier_id="frontier:vector:parent:terminal",
        target_execution_id=parent,
        through_fact_id=done.fact_ids[0],
    )
    history = project_effective_history_from_store(store, TRUSTED_READ_CONTEXT, root)
    assert history.root.status is ExecutionStatus.SUCCEEDED
    assert [c.execution.execution_id for c in history.children] == [
        SEQ["child_execution_id"]
    ]
    assert history.children[0].execution.cutoff == frontier
    # abandoning keeps the relation id: the child drops out of a later frontier
    abandoned = store.append(
        ctx,
        create_execution_relation_batch(
            append_intent_id="vector:parent:relation:abandoned:1",
            relation_id=SEQ["relation_id"],
            relation_kind=RelationKind.ABANDONED,
            parent_execution_id=parent,
            child_execution_id=SEQ["child_execution_id"],
            child_frontier_id=SEQ["child_frontier_id"],
            caused_by=done.fact_ids,
        ),
    )
    again = store.append(
        ctx,
        complete_execution_batch(
            append_intent_id="vector:parent:complete:2",
            execution_id=parent,
            outputs={"ok": True},
            caused_by=abandoned.fact_ids,
        ),
    )
    later = publish_execution_frontier(
        store,
        ctx,
        frontier_id="frontier:vector:parent:terminal:2",
        target_execution_id=parent,
        through_fact_id=again.fact_ids[0],
    )
    history = project_effective_history_from_store(store, TRUSTED_READ_CONTEXT, later)
    assert [r.relation_kind for r in history.relations] == ["spawned", "abandoned"]
    assert history.children == ()


def test_a_frontier_through_a_non_terminal_record_is_refused(store) -> None:
    created = store.append(
        TRUSTED_APPEND_CONTEXT,
        create_execution_batch(
            append_intent_id="x:create", execution_id="exec:x", task_ref="T", inputs={}
        ),
    )
    before = store.fact_count()
    with pytest.raises(
        ValueError, match="terminal execution frontier must target a terminal"
    ):
        publish_execution_frontier(
            store,
            TRUSTED_APPEND_CONTEXT,
            frontier_id="frontier:x",
            target_execution_id="exec:x",
            through_fact_id=created.fact_ids[1],
        )
    assert store.fact_count() == before
