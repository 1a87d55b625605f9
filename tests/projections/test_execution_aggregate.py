"""The execution aggregate folds to the kernel projections' values, on any path.

Two independent folds of the same decoded records: the kernel's
``project_execution`` / ``project_execution_relations`` / effective-history
published facts, and :class:`~goatherd.domain.ExecutionAggregate`. Paths are
generated from every execution record kind (for this execution, for another,
without an ``execution_id``), relations of this parent and another, published
facts, agents' own records, and repeats of one record, in any order.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from goatherd.domain import (
    ExecutionAggregate,
    ExecutionCompleted,
    ExecutionCreated,
    ExecutionFailed,
    ExecutionRelationCreated,
    ExecutionRuleError,
    ExecutionStarted,
    FactPublished,
    InconsistentTraceError,
    RecordDraft,
    RelationKind,
    RuntimeEvent,
    decode_fact,
    fold_execution,
)
from goatherd.projections import (
    project_effective_history,
    project_execution,
    project_execution_relations,
)
from tests.projections.slices import make_record, slice_of

EXEC = "exec:e"
TEXT = st.sampled_from(["", "a", "b", "pkg.T"])
IDS = st.sampled_from([EXEC, "exec:other", None])
DATA = st.dictionaries(TEXT, st.integers(0, 3) | TEXT, max_size=2)


def lifecycle() -> st.SearchStrategy[RuntimeEvent]:
    return st.one_of(
        st.builds(
            ExecutionCreated,
            execution_id=IDS,
            task_ref=TEXT,
            inputs=DATA,
            parent_execution_id=st.none() | TEXT,
        ),
        st.builds(ExecutionStarted, execution_id=IDS),
        st.builds(ExecutionCompleted, execution_id=IDS, outputs=DATA),
        st.builds(ExecutionFailed, execution_id=IDS, error=TEXT),
    )


RELATIONS = st.builds(
    ExecutionRelationCreated,
    relation_id=st.sampled_from(["rel:1", "rel:2"]),
    relation_kind=st.sampled_from(list(RelationKind)),
    parent_execution_id=st.sampled_from([EXEC, "exec:other"]),
    child_execution_id=st.sampled_from(["exec:c", "exec:d"]),
    child_frontier_id=st.none() | st.sampled_from(["f:c", "f:d"]),
)
FACTS = st.builds(FactPublished, kind=TEXT, data=DATA)


def drafts() -> st.SearchStrategy[RecordDraft]:
    typed = st.one_of(lifecycle(), lifecycle(), RELATIONS, FACTS)
    opaque = st.builds(lambda m: RecordDraft("capture", "app.note.v1", {"m": m}), TEXT)
    return typed.map(lambda event: event.draft()) | opaque


PATHS = st.lists(
    st.tuples(drafts(), st.sampled_from([(), ("sha256:p",)])), max_size=14
).flatmap(
    # Repeat some drafts verbatim: the same record twice on one path.
    lambda items: (
        st.lists(st.sampled_from(items), max_size=4).map(lambda again: items + again)
        if items
        else st.just(items)
    )
)


def records_of(path):
    return [
        make_record(draft, EXEC, ordinal, parents)
        for ordinal, (draft, parents) in enumerate(path)
    ]


def aggregate_of(records) -> ExecutionAggregate:
    return fold_execution(EXEC, [decode_fact(record) for record in records])


@settings(max_examples=400)
@given(PATHS)
def test_the_aggregate_folds_to_the_kernel_projections_values(path):
    records = records_of(path)
    slice_ = slice_of(records)
    kernel = project_execution(slice_, EXEC)
    state = aggregate_of(records)
    assert (
        state.status,
        state.task_ref,
        dict(state.inputs),
        state.parent_execution_id,
        dict(state.outputs),
        state.error,
        state.started_record,
        state.terminal_record,
    ) == (
        kernel.status,
        kernel.task_ref,
        dict(kernel.inputs),
        kernel.parent_execution_id,
        dict(kernel.outputs),
        kernel.error,
        kernel.started_fact_id,
        kernel.terminal_fact_id,
    )
    assert state.relations == project_execution_relations(slice_, EXEC)
    history = project_effective_history(slice_, EXEC)
    assert state.published_count == len(history.published_facts)
    assert state.head == len(records)


@settings(max_examples=300)
@given(PATHS, DATA, TEXT)
def test_a_path_with_a_terminal_record_never_takes_another_or_a_fact(
    path, outputs, error
):
    state = aggregate_of(records_of(path))
    if state.terminal_record is None:
        return
    parents = ("sha256:new",)
    refused = (ExecutionRuleError, InconsistentTraceError)
    for decide in (
        lambda: state.complete(outputs, parents),
        lambda: state.fail(error, parents),
        lambda: state.publish("late", outputs, parents),
        lambda: state.spawn("rel:new", "exec:n", None, parents),
    ):
        try:
            decide()
        except refused:
            continue
        raise AssertionError(f"decided on an ended execution: {state}")
