"""TraceEventStore: incremental loads (cache + fast-forward) and snapshots."""

from __future__ import annotations

import pytest
from sqlalchemy import inspect, text

from goatherd.domain import OrdinalConflictError, ScopeAggregate
from goatherd.infrastructure.eventstore import TraceEventStore
from goatherd.infrastructure.store import SQLiteTraceStore


@pytest.fixture
def path(tmp_path):
    return tmp_path / "trace.db"


def grow(events: TraceEventStore, owner: str, n: int, start: int = 0) -> None:
    for i in range(start, start + n):
        agg = events.load(ScopeAggregate, owner)
        agg.append_fact("test.fact.v1", "fact", {"i": i})
        events.save([agg], f"{owner}:fact:{i}")


def snapshot_rows(store) -> list[tuple[str, int]]:
    if not inspect(store.engine).has_table("aggregate_snapshots"):
        return []
    with store.engine.connect() as conn:
        rows = conn.execute(text("SELECT owner, version FROM aggregate_snapshots"))
        return sorted((r[0], int(r[1])) for r in rows)


def test_a_second_store_sees_appends_of_the_first_on_its_next_load(path):
    with SQLiteTraceStore(path) as one, SQLiteTraceStore(path) as two:
        first, second = TraceEventStore(one), TraceEventStore(two)
        grow(first, "p", 3)
        assert second.load(ScopeAggregate, "p").version == 2
        grow(first, "p", 2, start=3)
        assert second.load(ScopeAggregate, "p").version == 4


def test_a_stale_cached_decision_loses_the_race_and_the_retry_reads_fresh(path):
    with SQLiteTraceStore(path) as one, SQLiteTraceStore(path) as two:
        first, second = TraceEventStore(one), TraceEventStore(two)
        grow(first, "p", 1)
        stale = second.load(ScopeAggregate, "p")
        grow(first, "p", 1, start=1)
        cached = second.load(ScopeAggregate, "p", fresh=False)
        assert cached.version == stale.version == 0
        cached.append_fact("test.fact.v1", "fact", {"late": True})
        with pytest.raises(OrdinalConflictError):
            second.save([cached], "p:late")
        again = second.load(ScopeAggregate, "p", fresh=False)
        assert again.version == 1


def test_loads_return_independent_copies(path):
    with SQLiteTraceStore(path) as store:
        events = TraceEventStore(store)
        grow(events, "p", 1)
        mine = events.load(ScopeAggregate, "p")
        mine.children.append("not-recorded")
        mine.append_fact("test.fact.v1", "fact", {})
        fresh = events.load(ScopeAggregate, "p")
        assert fresh.children == []
        assert fresh.version == 0
        assert not fresh.pending()


def test_a_long_cold_fold_writes_a_snapshot_that_the_next_cold_load_resumes_from(
    path,
):
    with SQLiteTraceStore(path) as store:
        grow(TraceEventStore(store, snapshot_every=0), "p", 25)
        assert snapshot_rows(store) == []
        live = TraceEventStore(store, snapshot_every=10).load(ScopeAggregate, "p")
        assert snapshot_rows(store) == [("p", 24)]
        grow(TraceEventStore(store, snapshot_every=0), "p", 3, start=25)
        resumed = TraceEventStore(store, snapshot_every=10).load(ScopeAggregate, "p")
        rebuilt = TraceEventStore(store, snapshot_every=0).load(ScopeAggregate, "p")
        assert resumed == rebuilt
        assert (resumed.version, live.version) == (27, 24)


def test_saves_write_a_snapshot_every_n_versions(path):
    with SQLiteTraceStore(path) as store:
        writer = TraceEventStore(store, snapshot_every=10)
        grow(writer, "p", 25)
        assert snapshot_rows(store) == [("p", 19)]
        cold = TraceEventStore(store, snapshot_every=10).load(ScopeAggregate, "p")
        assert cold == TraceEventStore(store, snapshot_every=0).load(
            ScopeAggregate, "p"
        )


def test_a_snapshot_that_does_not_match_the_path_is_ignored(path):
    with SQLiteTraceStore(path) as store:
        events = TraceEventStore(store, snapshot_every=5)
        grow(events, "p", 6)
        TraceEventStore(store, snapshot_every=5).load(ScopeAggregate, "p")
        tamper = "UPDATE aggregate_snapshots SET record_id = 'x', state_json = '1'"
        with store.transaction() as conn:
            conn.execute(text(tamper))
        loaded = TraceEventStore(store, snapshot_every=5).load(ScopeAggregate, "p")
        assert loaded == TraceEventStore(store, snapshot_every=0).load(
            ScopeAggregate, "p"
        )


def test_dropping_the_snapshot_table_loses_nothing(path):
    with SQLiteTraceStore(path) as store:
        events = TraceEventStore(store, snapshot_every=5)
        grow(events, "p", 12)
        before = TraceEventStore(store, snapshot_every=5).load(ScopeAggregate, "p")
        with store.transaction() as conn:
            conn.execute(text("DROP TABLE aggregate_snapshots"))
        after = TraceEventStore(store, snapshot_every=5).load(ScopeAggregate, "p")
        assert after == before


def test_a_snapshot_that_cannot_be_written_never_fails_a_save(path):
    with SQLiteTraceStore(path) as store:
        events = TraceEventStore(store, snapshot_every=5)
        with store.transaction() as conn:
            conn.execute(text("DROP TABLE aggregate_snapshots"))
        grow(events, "p", 12)
        assert events.load(ScopeAggregate, "p").version == 11
