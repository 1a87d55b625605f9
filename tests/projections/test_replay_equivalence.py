"""A rebuilt read model equals the incrementally maintained one (Hypothesis).

Random traces: several owners, records shared by several paths, appends from
the test thread interleaved with a background runner woken by the bus and with
explicit catch-ups.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from goatherd.domain import (
    TRUSTED_APPEND_CONTEXT,
    AppendBatch,
    AppendGroup,
    RecordDraft,
)
from goatherd.infrastructure import EffectBus
from goatherd.infrastructure.projection_runner import (
    ProjectionRunner,
    builtin_projections,
)
from goatherd.infrastructure.store import SQLiteTraceStore
from goatherd.infrastructure.traceui.query import RecordQuery, records_page_json

OWNERS = ["root", "root:a", "root:b", "root:a:x", "exec:1"]

drafts = st.one_of(
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
    st.builds(
        lambda n: RecordDraft("capture", "app.note.v1", {"n": n}), st.integers(0, 5)
    ),
)
batches = st.lists(
    st.tuples(
        st.lists(st.sampled_from(OWNERS), min_size=1, max_size=3, unique=True),
        drafts,
        st.booleans(),
    ),
    min_size=1,
    max_size=25,
)


def _views(runner):
    out = {}
    for name in runner.names:
        with runner.read(name) as view:
            if hasattr(view, "rows"):
                out[name] = view.rows()
            else:
                query = RecordQuery(after=-1, limit=10_000, path="root")
                out[name] = records_page_json(view.connection, _NoWitness(), query)  # type: ignore[arg-type]
    return out


class _NoWitness:
    """The index comparison leaves witnesses out (they are not projected)."""

    def read_owner_prefix(self, *args, **kwargs):
        raise AssertionError("witnesses are not read for positions >= 0")


@settings(deadline=None)
@given(batches)
def test_a_rebuilt_read_model_equals_the_incremental_one(plan) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        bus = EffectBus()
        with SQLiteTraceStore(Path(tmp) / "t.sqlite") as store:
            store.with_bus(bus)
            runner = ProjectionRunner(
                store, builtin_projections(), bus=bus, batch_size=4
            )
            runner.start()
            for i, (owners, draft, catch_up) in enumerate(plan):
                # one record placed on every owner of the batch: a shared record
                groups = tuple(AppendGroup(o, fact_drafts=(draft,)) for o in owners)
                store.append(TRUSTED_APPEND_CONTEXT, AppendBatch(f"b{i}", groups))
                if catch_up:
                    runner.catch_up()
            runner.stop()
            assert runner.failure is None
            runner.catch_up()
            incremental = _views(runner)
            for name in runner.names:
                runner.rebuild(name)
            assert _views(runner) == incremental
            assert {s.lag for s in runner.status()} == {0}
