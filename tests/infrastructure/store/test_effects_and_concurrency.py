"""Bus publication after commit, and concurrent appends from several store objects."""

from __future__ import annotations

import threading

import pytest

from goatherd import (
    TRUSTED_APPEND_CONTEXT,
    AppendBatch,
    AppendGroup,
)
from goatherd.domain import (
    AppendIntentConflictError,
    BatchShapeError,
)
from goatherd.infrastructure.bus.effect_bus import EffectBus
from goatherd.infrastructure.store import SqlAlchemyTraceStore, open_trace_store
from tests.infrastructure.store.helpers import batch, draft

CTX = TRUSTED_APPEND_CONTEXT


class TestBus:
    def test_each_new_path_entry_is_published_in_batch_order_after_commit(
        self, store: SqlAlchemyTraceStore
    ) -> None:
        bus = EffectBus()
        subscription = bus.subscribe("test")
        store.with_bus(bus)
        receipt = store.append(
            CTX,
            AppendBatch(
                "i:1",
                (
                    AppendGroup("exec:b", fact_drafts=(draft(1), draft(2))),
                    AppendGroup("exec:a", fact_drafts=(draft(3),)),
                ),
            ),
        )
        events = subscription.drain()
        assert [e.record_id for e in events] == list(receipt.fact_ids)
        assert [(e.trace_owner_id, e.owner_ordinal, e.position) for e in events] == [
            ("exec:b", 0, 0),
            ("exec:b", 1, 1),
            ("exec:a", 0, 2),
        ]
        assert {e.intent_id for e in events} == {"i:1"}
        assert events[0].payload == {"value": 1}
        assert events[0].kind_label == "step"
        assert all(e.timestamp is not None for e in events)

    def test_replays_and_failed_appends_publish_nothing(
        self, store: SqlAlchemyTraceStore
    ) -> None:
        bus = EffectBus()
        subscription = bus.subscribe("test")
        store.with_bus(bus)
        store.append(CTX, batch("i:1", "exec:a", draft(1)))
        subscription.drain()
        store.append(CTX, batch("i:1", "exec:a", draft(1)))
        with pytest.raises(AppendIntentConflictError):
            store.append(CTX, batch("i:1", "exec:a", draft(2)))
        with pytest.raises(BatchShapeError):
            store.append(CTX, batch("i:2", "exec:a", draft(2, schema="")))
        assert subscription.drain() == ()


@pytest.fixture
def stores(durable_store_url: str):
    opened = [open_trace_store(durable_store_url) for _ in range(3)]
    yield opened
    for store in opened:
        store.close()


def test_concurrent_writers_get_gap_free_positions_in_commit_order(
    stores: list[SqlAlchemyTraceStore],
) -> None:
    errors: list[BaseException] = []

    def write(index: int, store: SqlAlchemyTraceStore) -> None:
        try:
            for n in range(15):
                store.append(
                    CTX, batch(f"w{index}:{n}", f"owner:{n % 2}", draft(f"{index}:{n}"))
                )
        except BaseException as exc:
            errors.append(exc)

    threads = [
        threading.Thread(target=write, args=(i, store))
        for i, store in enumerate(stores * 2)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    log = stores[0].read_log()
    assert [e.position for e in log] == list(range(90))
    for owner, total in (("owner:0", 48), ("owner:1", 42)):
        ordinals = [
            e.record.owner_ordinal for e in log if e.record.trace_owner_id == owner
        ]
        assert ordinals == list(range(total))


def test_racing_writers_on_one_head_let_exactly_one_win(
    stores: list[SqlAlchemyTraceStore],
) -> None:
    stores[0].append(CTX, batch("i:seed", "agg", draft(0)))
    outcomes: list[str] = []
    barrier = threading.Barrier(len(stores))

    def race(index: int, store: SqlAlchemyTraceStore) -> None:
        barrier.wait()
        try:
            store.append(
                CTX, batch(f"i:{index}", "agg", draft(index)), expected_heads={"agg": 1}
            )
            outcomes.append("won")
        except Exception as exc:
            outcomes.append(type(exc).__name__)

    threads = [threading.Thread(target=race, args=(i, s)) for i, s in enumerate(stores)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes) == ["OrdinalConflictError"] * 2 + ["won"]
    assert stores[1].head("agg") == 2
