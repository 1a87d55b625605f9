"""fold(a + b) == continue(fold(a), b) for the pure folds (Hypothesis)."""

from __future__ import annotations

from functools import reduce

from hypothesis import given
from hypothesis import strategies as st

from goatherd.domain import LogEntry, RecordDraft
from goatherd.projections import (
    Execution,
    ScopeTreeProjection,
    execution_completed,
    execution_created,
    execution_failed,
    execution_started,
    fold_execution_record,
)
from tests.projections.slices import make_record

EXEC = "exec:prop"

execution_drafts = st.one_of(
    st.builds(execution_created, st.just(EXEC), st.text(max_size=3), st.just({})),
    st.builds(execution_started, st.sampled_from([EXEC, "exec:other"])),
    st.builds(execution_completed, st.just(EXEC), st.just({"k": 1})),
    st.builds(execution_failed, st.just(EXEC), st.text(max_size=3)),
    st.just(RecordDraft("capture", "app.other.v1", {"x": 1})),
)


@given(st.lists(execution_drafts, max_size=12), st.integers(0, 12))
def test_the_execution_fold_continues_where_a_prefix_stopped(drafts, cut) -> None:
    records = [make_record(d, EXEC, i) for i, d in enumerate(drafts)]
    a, b = records[:cut], records[cut:]
    whole = reduce(fold_execution_record, records, Execution(EXEC))
    continued = reduce(
        fold_execution_record, b, reduce(fold_execution_record, a, Execution(EXEC))
    )
    assert whole == continued


class DictRowView:
    """A plain-dict RowView, the model the SQL view must agree with."""

    def __init__(self) -> None:
        self.data: dict[str, object] = {}

    def create(self) -> None:
        pass

    def drop(self) -> None:
        self.data.clear()

    def get(self, key):
        return self.data.get(key)

    def put(self, key, row) -> None:
        self.data[key] = row

    def rows(self):
        return tuple(self.data.values())


OWNERS = ["r", "r:a", "r:b", "r:a:x"]
scope_drafts = st.one_of(
    st.builds(
        lambda c: RecordDraft(
            "declaration", "goatherd.scope.forked.v1", {"child_owner": c}
        ),
        st.sampled_from(OWNERS),
    ),
    st.builds(
        lambda s, c: RecordDraft("capture", s, {"child_owner": c}),
        st.sampled_from(["goatherd.scope.merged.v1", "goatherd.scope.discarded.v1"]),
        st.sampled_from(OWNERS),
    ),
    st.just(RecordDraft("declaration", "goatherd.supervisor.halt.v1", {})),
)


@given(
    st.lists(st.tuples(scope_drafts, st.sampled_from(OWNERS)), max_size=15),
    st.integers(0, 15),
)
def test_the_scope_tree_fold_continues_where_a_prefix_stopped(items, cut) -> None:
    entries = [
        LogEntry(i, f"i{i}", make_record(draft, owner, i))
        for i, (draft, owner) in enumerate(items)
    ]
    projection = ScopeTreeProjection()
    whole, first = DictRowView(), DictRowView()
    projection.fold(whole, entries)
    projection.fold(projection.fold(first, entries[:cut]), entries[cut:])
    assert whole.data == first.data
