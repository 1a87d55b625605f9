"""The runtime's event store on every durable backend (SQLite file, PostgreSQL).

The PostgreSQL parameter runs when ``GOATHERD_TEST_DB_URL`` names a server.
"""

from __future__ import annotations

from eventsourcing.persistence import Tracking
from returns.result import Success
from sqlalchemy import text

from goatherd.application import SandboxSpec, ScopeManager
from goatherd.domain import OutputState, ScopeAggregate
from goatherd.infrastructure.eventstore import (
    KernelRecorder,
    KernelTrackingRecorder,
    TraceEventStore,
)
from goatherd.infrastructure.sandbox.memory import MemorySandbox, MemorySandboxConfig
from goatherd.infrastructure.store import open_trace_store
from tests.infrastructure.backends import durable_store_url  # noqa: F401 - fixture


def test_a_settle_with_its_claim_runs_and_a_second_store_sees_it(durable_store_url):  # noqa: F811
    with (
        open_trace_store(durable_store_url) as one,
        open_trace_store(durable_store_url) as two,
    ):
        main = MemorySandbox(MemorySandboxConfig(files={"a.txt": b"1\n"}))
        main.create(SandboxSpec())
        mgr = ScopeManager(TraceEventStore(one))
        root = mgr.create("root", main).unwrap()
        wt = MemorySandbox(MemorySandboxConfig(repository=main.repository))
        wt.create(SandboxSpec())
        child = mgr.fork_isolated(root.id, "try", None, wt).unwrap()
        wt.write_file("b.txt", b"2\n")
        out = mgr.seal(child.id).unwrap()
        assert mgr.settle(out.id, "selected") == Success(None)
        assert out.state is OutputState.SELECTED
        seen = TraceEventStore(two).load(ScopeAggregate, "try")
        assert seen.state.value == "merged"


def test_snapshots_and_tracking_rows_live_beside_the_trace(durable_store_url):  # noqa: F811
    with open_trace_store(durable_store_url) as store:
        events = TraceEventStore(store, snapshot_every=5)
        for i in range(12):
            agg = events.load(ScopeAggregate, "p")
            agg.append_fact("test.fact.v1", "fact", {"i": i})
            events.save([agg], f"p:fact:{i}")
        with store.engine.connect() as conn:
            rows = conn.execute(text("SELECT owner, version FROM aggregate_snapshots"))
            assert [(r[0], int(r[1])) for r in rows] == [("p", 9)]
        cold = TraceEventStore(store, snapshot_every=5).load(ScopeAggregate, "p")
        assert cold == TraceEventStore(store, snapshot_every=0).load(
            ScopeAggregate, "p"
        )
        tracking = KernelTrackingRecorder(store)
        tracking.insert_tracking(Tracking("upstream", 3))
        assert tracking.max_tracking_id("upstream") == 3
        recorder = KernelRecorder(store)
        assert recorder.max_notification_id() == store.max_position() + 1
