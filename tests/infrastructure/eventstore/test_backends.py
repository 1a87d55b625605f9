"""The runtime's event store on every durable backend (SQLite file, PostgreSQL).

The PostgreSQL parameter runs when ``GOATHERD_TEST_DB_URL`` names a server.
"""

from __future__ import annotations

from eventsourcing.persistence import Tracking
from returns.result import Success
from sqlalchemy import text

from goatherd.application import SandboxSpec
from goatherd.domain import OutputState
from goatherd.infrastructure.bootstrap import scope_manager_for
from goatherd.infrastructure.eventstore import KernelRecorder, KernelTrackingRecorder
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
        mgr = scope_manager_for(one)
        root = mgr.create("root", main).unwrap()
        wt = MemorySandbox(MemorySandboxConfig(repository=main.repository))
        wt.create(SandboxSpec())
        child = mgr.fork_isolated(root.id, "try", None, wt).unwrap()
        wt.write_file("b.txt", b"2\n")
        out = mgr.seal(child.id).unwrap()
        assert mgr.settle(out.id, "selected") == Success(None)
        assert out.state is OutputState.SELECTED
        seen = scope_manager_for(two).get("scope:try")
        assert seen is not None
        assert seen.state.value == "merged"
        again = scope_manager_for(two).output(out.id)
        assert again is not None
        assert again.diff() == out.diff() != ""


def test_blobs_and_tracking_rows_live_beside_the_trace(durable_store_url):  # noqa: F811
    with open_trace_store(durable_store_url) as store:
        mgr = scope_manager_for(store)
        main = MemorySandbox(MemorySandboxConfig(files={"a.txt": b"1\n"}))
        main.create(SandboxSpec())
        root = mgr.create("root", main).unwrap()
        mgr.create_checkpoint(root.id, b"snapshot bytes").unwrap()
        with store.engine.connect() as conn:
            rows = conn.execute(text("SELECT holder, digest FROM blob_holders"))
            holders = [r[0] for r in rows]
        assert len(holders) == 1
        assert holders[0].endswith("#snapshot")
        tracking = KernelTrackingRecorder(store)
        tracking.insert_tracking(Tracking("upstream", 3))
        assert tracking.max_tracking_id("upstream") == 3
        recorder = KernelRecorder(store)
        assert recorder.max_notification_id() == store.max_position() + 1
