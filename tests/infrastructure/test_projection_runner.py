"""The projection runner on every store backend (SQLite memory and file, PostgreSQL).

The ``store`` and ``durable_store_url`` fixtures come from
``tests/infrastructure/conftest.py``; PostgreSQL runs when
``GOATHERD_TEST_DB_URL`` names a server.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import pytest

from goatherd.domain import (
    TRUSTED_APPEND_CONTEXT,
    AppendBatch,
    AppendGroup,
    LogEntry,
    RecordDraft,
)
from goatherd.infrastructure import EffectBus
from goatherd.infrastructure.projections.runner import (
    ProjectionRunner,
    UnknownProjectionError,
    builtin_projections,
    list_projections,
    rebuild_projection,
)
from goatherd.infrastructure.projections.views import SqlRowView, row_view_factory
from goatherd.infrastructure.store import SQLiteTraceStore, open_trace_store
from goatherd.projections import ALL_SCHEMAS, Projection, RowView, on


@dataclass(frozen=True, slots=True)
class Count:
    schema: str
    records: int


class CountBySchema(Projection[RowView[Count]]):
    name = "test.count_by_schema"

    def __init__(self) -> None:
        super().__init__(row_view_factory("test_counts", Count))

    @on(ALL_SCHEMAS)
    def counted(self, view: RowView[Count], entry: LogEntry) -> None:
        schema = entry.record.envelope.schema_ref
        if schema == "test.poison.v1":
            raise RuntimeError("poisoned record")
        old = view.get(schema) or Count(schema, 0)
        view.put(schema, Count(schema, old.records + 1))


def _append(store, intent, owner, schema, payload=None, mode="capture"):
    draft = RecordDraft(mode, schema, payload or {"intent": intent})
    group = AppendGroup(owner, fact_drafts=(draft,))
    return store.append(TRUSTED_APPEND_CONTEXT, AppendBatch(intent, (group,)))


def _fork(store, intent, parent, child):
    return _append(
        store,
        intent,
        parent,
        "goatherd.scope.forked.v1",
        {"child_owner": child},
        mode="declaration",
    )


def _counts(runner):
    with runner.read(CountBySchema.name) as view:
        return {c.schema: c.records for c in view.rows()}


def test_catch_up_folds_the_log_and_tracks_the_position(store) -> None:
    _fork(store, "f1", "root", "root:a")
    merged = {"child_owner": "root:a", "child_scope": "scope:root:a"}
    _append(store, "m1", "root", "goatherd.scope.merged.v1", merged)
    runner = ProjectionRunner(store, [*builtin_projections(), CountBySchema()])
    assert runner.catch_up() > 0
    with runner.read("goatherd.runtime_state") as view:
        states = {n.owner: n.state for n in view.scope_rows()}
    assert states == {"root": "active", "root:a": "merged"}
    assert {s.name: (s.position, s.lag) for s in runner.status()}[
        "goatherd.runtime_state"
    ] == (1, 0)
    assert runner.catch_up() == 0


def test_a_second_runner_resumes_where_the_first_committed(store) -> None:
    for i in range(5):
        _append(store, f"a{i}", "o", "test.a.v1")
    ProjectionRunner(store, [CountBySchema()], batch_size=2).catch_up()
    for i in range(3):
        _append(store, f"b{i}", "o", "test.b.v1")
    resumed = ProjectionRunner(store, [CountBySchema()], batch_size=2)
    assert resumed.catch_up() == 3
    assert _counts(resumed) == {"test.a.v1": 5, "test.b.v1": 3}


def test_a_failing_handler_commits_neither_rows_nor_position(store) -> None:
    _append(store, "a", "o", "test.a.v1")
    runner = ProjectionRunner(store, [CountBySchema()])
    runner.catch_up()
    _append(store, "b", "o", "test.a.v1")
    _append(store, "p", "o", "test.poison.v1")
    with pytest.raises(RuntimeError, match="poisoned record"):
        runner.catch_up()
    assert _counts(runner) == {"test.a.v1": 1}
    assert runner.status()[0].position == 0


def test_rebuild_drops_and_replays_to_the_same_rows(store) -> None:
    for i in range(7):
        _append(store, f"a{i}", f"o{i % 3}", f"test.s{i % 2}.v1")
    runner = ProjectionRunner(store, [CountBySchema()], batch_size=3)
    runner.catch_up()
    before = _counts(runner)
    assert runner.rebuild(CountBySchema.name) == 7
    assert _counts(runner) == before


def test_a_version_change_rebuilds_on_the_next_catch_up(store) -> None:
    _append(store, "a", "o", "test.a.v1")
    ProjectionRunner(store, [CountBySchema()]).catch_up()

    class CountV2(CountBySchema):
        version = 2

    runner = ProjectionRunner(store, [CountV2()])
    assert runner.catch_up() == 1
    assert _counts(runner) == {"test.a.v1": 1}
    assert runner.status()[0].version == 2


def test_two_runners_racing_on_one_database_apply_each_entry_once(
    durable_store_url,
) -> None:
    with (
        open_trace_store(durable_store_url) as writer,
        open_trace_store(durable_store_url) as other,
    ):
        for i in range(40):
            _append(writer, f"a{i}", "o", "test.a.v1")
        first = ProjectionRunner(writer, [CountBySchema()], batch_size=3)
        second = ProjectionRunner(other, [CountBySchema()], batch_size=3)
        first.start()
        second.start()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and first.status()[0].lag:
            time.sleep(0.05)
        first.stop()
        second.stop()
        assert (first.failure, second.failure) == (None, None)
        assert _counts(first) == {"test.a.v1": 40}


def test_the_background_runner_wakes_on_the_bus(store) -> None:
    bus = EffectBus()
    store.with_bus(bus)
    runner = ProjectionRunner(store, [CountBySchema()], bus=bus, poll_interval=30)
    runner.start()
    runner.start()  # idempotent while running
    time.sleep(0.2)
    _append(store, "a", "o", "test.a.v1")
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and _counts(runner) != {"test.a.v1": 1}:
        time.sleep(0.02)
    runner.stop()
    assert not runner.running
    assert _counts(runner) == {"test.a.v1": 1}


def test_unknown_and_duplicate_projection_names_are_refused(store) -> None:
    runner = ProjectionRunner(store, [CountBySchema()])
    with pytest.raises(UnknownProjectionError, match="unknown projection 'nope'"):
        runner.rebuild("nope")
    with pytest.raises(ValueError, match="must be unique"):
        ProjectionRunner(store, [CountBySchema(), CountBySchema()])


def test_the_cli_helpers_list_and_rebuild_the_builtins(store) -> None:
    _fork(store, "f1", "root", "root:a")
    assert [s.name for s in list_projections(store)] == [
        "goatherd.runtime_state",
        "goatherd.traceui_index",
    ]
    assert rebuild_projection(store, "goatherd.runtime_state") == 1
    assert {s.name: s.position for s in list_projections(store)}[
        "goatherd.runtime_state"
    ] == 0


def test_a_memory_store_shares_its_connection_safely(tmp_path) -> None:
    with SQLiteTraceStore(":memory:") as store:
        _append(store, "a", "o", "test.a.v1")
        runner = ProjectionRunner(store, [CountBySchema()])
        runner.catch_up()
        assert _counts(runner) == {"test.a.v1": 1}


def test_row_views_keep_first_insertion_order(store) -> None:
    with store.transaction() as conn:
        view = SqlRowView(conn, "test_order", Count)
        view.create()
        view.put("b", Count("b", 1))
        view.put("a", Count("a", 1))
        view.put("b", Count("b", 2))
        assert view.rows() == (Count("b", 2), Count("a", 1))
        assert view.get("missing") is None
