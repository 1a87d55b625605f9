"""The effect bus: ordering, drop-oldest, replacement, close, never blocking."""

from __future__ import annotations

import asyncio
import queue
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from goatherd.domain import (
    TRUSTED_APPEND_CONTEXT,
    TRUSTED_READ_CONTEXT,
    AppendBatch,
    AppendGroup,
    Record,
    RecordDraft,
    UnknownFactError,
)
from goatherd.domain.effects import EffectEvent
from goatherd.infrastructure.bus.effect_bus import (
    DEFAULT_BUS_BUFFER_SIZE,
    EffectBus,
    Subscription,
    SubscriptionClosedError,
)
from goatherd.infrastructure.store import SQLiteTraceStore


def event(n: int, owner: str = "agent:main") -> EffectEvent:
    return EffectEvent(
        record_id=f"sha256:{n:064x}",
        intent_id=f"intent:{n}",
        trace_owner_id=owner,
        owner_ordinal=n,
        position=n,
        mode="capture",
        schema_ref="app.tool.bash.v1",
        kind_label="bash",
        payload={"n": n},
    )


def positions(events: object) -> list[int]:
    assert isinstance(events, list | tuple)
    return [e.position for e in events]


def drain_all(sub: Subscription) -> list[EffectEvent]:
    out = []
    while True:
        try:
            out.append(sub.get_nowait())
        except (queue.Empty, SubscriptionClosedError):
            return out


class TestConstruction:
    def test_a_non_positive_buffer_size_means_the_default(self) -> None:
        assert EffectBus(0).buffer_size == DEFAULT_BUS_BUFFER_SIZE
        assert EffectBus(-3).buffer_size == DEFAULT_BUS_BUFFER_SIZE
        assert EffectBus().buffer_size == 64
        assert EffectBus(5).buffer_size == 5

    def test_subscriptions_are_counted_and_uncounted(self) -> None:
        bus = EffectBus()
        bus.subscribe("a")
        bus.subscribe("b")
        assert bus.subscriber_count() == 2
        bus.unsubscribe("a")
        assert bus.subscriber_count() == 1
        bus.unsubscribe("never-subscribed")
        assert bus.subscriber_count() == 1


class TestDelivery:
    def test_every_subscriber_receives_events_in_publish_order(self) -> None:
        bus = EffectBus(16)
        first, second = bus.subscribe("first"), bus.subscribe("second")
        for n in range(10):
            bus.publish(event(n))
        assert positions(drain_all(first)) == list(range(10))
        assert positions(drain_all(second)) == list(range(10))

    def test_a_full_buffer_drops_the_oldest_events_and_counts_them(self) -> None:
        bus = EffectBus(4)
        sub = bus.subscribe("slow")
        for n in range(10):
            bus.publish(event(n))
        assert sub.dropped == 6
        assert sub.delivered == 10
        assert positions(drain_all(sub)) == [6, 7, 8, 9]

    def test_drops_are_counted_per_subscriber(self) -> None:
        bus = EffectBus(3)
        reader, idle = bus.subscribe("reader"), bus.subscribe("idle")
        for n in range(5):
            bus.publish(event(n))
            reader.get_nowait()
        assert (reader.dropped, idle.dropped) == (0, 2)
        assert positions(idle.drain()) == [2, 3, 4]

    def test_get_waits_until_an_event_arrives_from_another_thread(self) -> None:
        bus = EffectBus()
        sub = bus.subscribe("waiter")
        timer = threading.Timer(0.05, bus.publish, args=(event(7),))
        timer.start()
        assert sub.get(timeout=10).position == 7
        timer.join()

    def test_get_with_a_timeout_raises_empty_when_nothing_arrives(self) -> None:
        sub = EffectBus().subscribe("waiter")
        with pytest.raises(queue.Empty):
            sub.get(timeout=0.01)
        with pytest.raises(queue.Empty):
            sub.get_nowait()

    def test_a_subscriber_only_sees_events_published_after_it_subscribed(self) -> None:
        bus = EffectBus()
        bus.publish(event(0))
        sub = bus.subscribe("late")
        bus.publish(event(1))
        assert positions(drain_all(sub)) == [1]


class TestReplacementAndClose:
    def test_subscribing_again_with_an_id_closes_and_replaces_the_old_one(
        self,
    ) -> None:
        bus = EffectBus()
        old = bus.subscribe("watcher")
        bus.publish(event(0))
        new = bus.subscribe("watcher")
        bus.publish(event(1))
        assert old.closed
        assert not new.closed
        assert bus.subscriber_count() == 1
        # the old one keeps what it had buffered, then reports its end
        assert old.get_nowait().position == 0
        with pytest.raises(SubscriptionClosedError, match="'watcher' is closed"):
            old.get_nowait()
        assert positions(drain_all(new)) == [1]

    def test_unsubscribe_closes_the_subscription(self) -> None:
        bus = EffectBus()
        sub = bus.subscribe("gone")
        bus.unsubscribe("gone")
        bus.publish(event(0))
        assert sub.closed
        with pytest.raises(SubscriptionClosedError):
            sub.get(timeout=1)

    def test_close_ends_every_iteration_and_later_publishes_are_ignored(
        self,
    ) -> None:
        bus = EffectBus()
        subs = [bus.subscribe(f"s{i}") for i in range(3)]
        bus.publish(event(0))
        bus.close()
        bus.close()  # idempotent
        bus.publish(event(1))
        assert bus.closed
        assert bus.subscriber_count() == 0
        for sub in subs:
            assert sub.closed
            assert positions(list(sub)) == [0]

    def test_subscribing_to_a_closed_bus_gives_a_closed_subscription(self) -> None:
        bus = EffectBus()
        bus.close()
        sub = bus.subscribe("late")
        assert sub.closed
        assert bus.subscriber_count() == 0
        assert list(sub) == []

    def test_close_wakes_a_blocked_reader(self) -> None:
        bus = EffectBus()
        sub = bus.subscribe("blocked")
        seen: list[BaseException] = []

        def read() -> None:
            try:
                sub.get()
            except SubscriptionClosedError as exc:
                seen.append(exc)

        reader = threading.Thread(target=read)
        reader.start()
        time.sleep(0.02)
        bus.close()
        reader.join(timeout=10)
        assert not reader.is_alive()
        assert len(seen) == 1

    def test_iteration_follows_a_publisher_thread_until_unsubscribe(self) -> None:
        bus = EffectBus(1000)
        sub = bus.subscribe("follower")

        def produce() -> None:
            for n in range(200):
                bus.publish(event(n))
            bus.unsubscribe("follower")

        producer = threading.Thread(target=produce)
        producer.start()
        received = positions(list(sub))
        producer.join()
        assert received == list(range(200))


class TestNeverBlocks:
    def test_a_slow_subscriber_never_blocks_a_fast_publisher(self) -> None:
        bus = EffectBus(8)
        slow = bus.subscribe("slow")
        fast = bus.subscribe("fast")
        total = 20_000
        slow_seen: list[int] = []
        fast_seen: list[int] = []
        stop = threading.Event()

        def slow_reader() -> None:
            # holds up after each event; a blocking bus would stall the publisher
            while not stop.is_set():
                try:
                    slow_seen.append(slow.get(timeout=0.05).position)
                except (queue.Empty, SubscriptionClosedError):
                    continue
                time.sleep(0.01)

        def fast_reader() -> None:
            fast_seen.extend(e.position for e in fast)

        threads = [
            threading.Thread(target=slow_reader),
            threading.Thread(target=fast_reader),
        ]
        for thread in threads:
            thread.start()
        publish_started = time.perf_counter()
        for n in range(total):
            bus.publish(event(n))
            if n % 64 == 0:
                time.sleep(0)  # let the fast reader run
        publish_seconds = time.perf_counter() - publish_started
        bus.unsubscribe("fast")
        stop.set()
        for thread in threads:
            thread.join(timeout=30)
        # The slow reader sleeps 10 ms per event, so a publisher that waited for
        # it would need at least (total - 8) * 10 ms = 200 s; generous bound: 20 s.
        assert publish_seconds < 20
        assert slow.dropped > total // 2
        assert len(slow_seen) < total // 10
        assert slow_seen == sorted(slow_seen)
        # the fast reader may lose some to the 8-slot buffer but keeps the order
        assert fast_seen == sorted(fast_seen)
        assert len(fast_seen) + fast.dropped == total

    def test_concurrent_publishers_lose_nothing_with_a_large_buffer(self) -> None:
        bus = EffectBus(100_000)
        sub = bus.subscribe("all")
        per_thread = 2_000

        def produce(base: int) -> None:
            for n in range(per_thread):
                bus.publish(event(base + n))

        threads = [
            threading.Thread(target=produce, args=(k * per_thread,)) for k in range(4)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        got = positions(sub.drain())
        assert sorted(got) == list(range(4 * per_thread))
        # per publisher, order is kept
        for k in range(4):
            mine = [p for p in got if k * per_thread <= p < (k + 1) * per_thread]
            assert mine == sorted(mine)
        assert sub.dropped == 0


class TestAsyncIteration:
    def test_async_iteration_receives_events_published_from_another_thread(
        self,
    ) -> None:
        bus = EffectBus(1000)
        sub = bus.subscribe("sse")

        def produce() -> None:
            for n in range(300):
                bus.publish(event(n))
                if n % 50 == 0:
                    time.sleep(0.001)
            bus.close()

        async def consume() -> list[int]:
            producer = threading.Thread(target=produce)
            producer.start()
            seen = [e.position async for e in sub.async_iter()]
            producer.join()
            return seen

        assert asyncio.run(asyncio.wait_for(consume(), timeout=30)) == list(range(300))

    def test_async_iteration_waits_without_blocking_the_loop(self) -> None:
        bus = EffectBus()
        sub = bus.subscribe("sse")

        async def scenario() -> tuple[list[int], int]:
            ticks = 0
            seen: list[int] = []

            async def consume() -> None:
                async for e in sub.async_iter():
                    seen.append(e.position)

            task = asyncio.create_task(consume())
            for n in range(5):
                await asyncio.sleep(0.005)
                ticks += 1
                await asyncio.to_thread(bus.publish, event(n))
            await asyncio.to_thread(bus.unsubscribe, "sse")
            await asyncio.wait_for(task, timeout=10)
            return seen, ticks

        seen, ticks = asyncio.run(scenario())
        assert seen == [0, 1, 2, 3, 4]
        assert ticks == 5

    def test_a_cancelled_async_reader_leaves_no_waker_behind(self) -> None:
        bus = EffectBus()
        sub = bus.subscribe("sse")

        async def scenario() -> None:
            async def consume() -> None:
                async for _ in sub.async_iter():
                    pass

            task = asyncio.create_task(consume())
            await asyncio.sleep(0.01)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

        asyncio.run(scenario())
        assert sub._wakers == []
        bus.publish(event(0))  # no loop to wake: must not raise
        assert sub.get_nowait().position == 0


class TestRingAndBatches:
    def test_a_subscription_can_ask_for_a_larger_buffer_than_the_bus(self) -> None:
        bus = EffectBus(4)
        big = bus.subscribe("big", 1000)
        small = bus.subscribe("small")
        for n in range(500):
            bus.publish(event(n))
        assert (big.buffer_size, small.buffer_size) == (1000, 4)
        assert positions(big.drain()) == list(range(500))
        assert positions(small.drain()) == [496, 497, 498, 499]
        assert (big.dropped, small.dropped) == (0, 496)

    def test_every_subscription_numbers_the_bus_events_alike(self) -> None:
        bus = EffectBus(8)
        bus.publish(event(99))  # no subscriber: not numbered
        first = bus.subscribe("first")
        bus.publish(event(0))
        second = bus.subscribe("second")
        for n in range(1, 20):
            bus.publish(event(n))
        taken = first.take_all()  # 20 published, 8 kept: numbers 12..19
        assert positions(taken) == list(range(12, 20))
        assert first.next_seq - len(taken) == 12
        assert first.dropped == 12
        again = second.take_all()  # subscribed after event 0 (number 0)
        assert positions(again) == list(range(12, 20))
        assert second.next_seq == first.next_seq == 20

    def test_the_head_numbers_the_next_event_and_drain_takes_at_most_a_limit(
        self,
    ) -> None:
        bus = EffectBus(8)
        assert bus.head == 0
        bus.publish(event(99))  # no subscriber: not numbered
        sub = bus.subscribe("sse")
        assert bus.head == sub.next_seq == 0
        for n in range(5):
            bus.publish(event(n))
        assert bus.head == 5
        assert positions(sub.drain(2)) == [0, 1]
        assert sub.next_seq == 2
        assert positions(sub.drain(10)) == [2, 3, 4]
        assert sub.drain(1) == ()
        bus.publish(event(5))
        bus.close()
        assert positions(sub.drain(1)) == [5]  # what it had when closed
        assert sub.drain() == ()

    def test_wait_async_wakes_on_an_event_times_out_and_sees_close(self) -> None:
        bus = EffectBus()
        sub = bus.subscribe("sse")
        wakers: list[str] = []

        async def scenario() -> tuple[bool, bool, bool]:
            loop = asyncio.get_running_loop()
            original = loop.call_soon_threadsafe

            def recording(*args: object) -> object:
                wakers.append(threading.current_thread().name)
                return original(*args)  # type: ignore[arg-type]

            loop.call_soon_threadsafe = recording  # type: ignore[method-assign,assignment]
            timed_out = await sub.wait_async(0.01)
            woken = await parked_then(lambda: bus.publish(event(1)))
            assert positions(sub.take_all()) == [1]
            closed = await parked_then(bus.close)
            return timed_out, woken, closed

        async def parked_then(act: Callable[[], None]) -> bool:
            # Start waiting, let the waiter park (one loop step), then act from
            # another thread: the wake-up must come through the dispatcher.
            waiting = asyncio.ensure_future(sub.wait_async(10))
            await asyncio.sleep(0)
            threading.Thread(target=act).start()
            return await waiting

        assert asyncio.run(scenario()) == (False, True, True)
        # The publisher's thread only appends; the bus's dispatcher wakes the loop.
        assert wakers
        assert wakers[0] == "goatherd-bus"
        assert sub.closed
        assert sub._wakers == []

    def test_a_publish_does_no_work_per_subscription(self) -> None:
        bus = EffectBus()
        subs = [bus.subscribe(f"s{n}") for n in range(200)]
        for n in range(64):
            bus.publish(event(n))
        # Nothing was copied into 200 buffers: the events live once, in the ring.
        assert len(bus._ring) == 64
        assert all(s.qsize() == 64 for s in subs)
        assert all(positions(s.drain()) == list(range(64)) for s in subs)


# ------------------------------------------------------------ with the store


def store_batch(intent: str, parent: str | None = None) -> AppendBatch:
    """Two groups on two owners (three drafts), with group and explicit parents."""
    group_parents = (parent,) if parent else ()
    first = AppendGroup(
        trace_owner_id="agent:main",
        causal_parents=group_parents,
        fact_drafts=(
            RecordDraft(
                mode="declaration",
                schema_ref="app.tool.bash.v1",
                payload={"cmd": "ls", "intent": intent},
                kind_label="bash",
            ),
            RecordDraft(
                mode="capture",
                schema_ref="app.tool.bash.v1.applied",
                payload={"ok": True, "intent": intent},
            ),
        ),
    )
    second = AppendGroup(
        trace_owner_id="agent:child",
        fact_drafts=(
            RecordDraft(
                mode="capture",
                schema_ref="app.note.v1",
                payload={"intent": intent},
                caused_by_fact_ids=group_parents,
            ),
        ),
    )
    return AppendBatch(append_intent_id=intent, groups=(first, second))


@pytest.fixture
def store_with_bus(tmp_path: Path) -> Iterator[tuple[SQLiteTraceStore, EffectBus]]:
    bus = EffectBus(1000)
    store = SQLiteTraceStore(tmp_path / "trace.sqlite")
    assert store.with_bus(bus) is store
    try:
        yield store, bus
    finally:
        store.close()
        bus.close()


class TestStorePublishing:
    def test_one_event_per_record_in_append_order_with_the_record_fields(
        self, store_with_bus: tuple[SQLiteTraceStore, EffectBus]
    ) -> None:
        store, bus = store_with_bus
        sub = bus.subscribe("watcher")
        first = store.append(TRUSTED_APPEND_CONTEXT, store_batch("i1"))
        second = store.append(
            TRUSTED_APPEND_CONTEXT, store_batch("i2", first.fact_ids[0])
        )
        events = sub.drain()

        # one event per ordinary record (witnesses are not published), in order
        assert [e.record_id for e in events] == [*first.fact_ids, *second.fact_ids]
        commits = [*first.commit_receipts, *second.commit_receipts]
        assert [f"commit:{e.position}" for e in events] == commits
        assert [e.intent_id for e in events] == ["i1"] * 3 + ["i2"] * 3
        assert [(e.trace_owner_id, e.owner_ordinal) for e in events] == [
            ("agent:main", 0),
            ("agent:main", 1),
            ("agent:child", 0),
            ("agent:main", 2),
            ("agent:main", 3),
            ("agent:child", 1),
        ]
        # each event carries what the store retained for that path entry
        for event in events:
            record = store.read_fact(TRUSTED_READ_CONTEXT, event.record_id)
            assert isinstance(record, Record)
            assert event.mode == record.envelope.mode
            assert event.schema_ref == record.envelope.schema_ref
            assert event.causal_parents == record.envelope.caused_by_record_ids
            assert dict(event.payload) == dict(record.payload)
            assert event.timestamp is not None
        assert [e.kind_label for e in events[:3]] == [
            "bash",
            "app.tool.bash.v1.applied",
            "app.note.v1",
        ]
        assert events[3].causal_parents == (first.fact_ids[0],)
        assert events[5].causal_parents == (first.fact_ids[0],)

    def test_an_idempotent_replay_publishes_nothing(
        self, store_with_bus: tuple[SQLiteTraceStore, EffectBus]
    ) -> None:
        store, bus = store_with_bus
        store.append(TRUSTED_APPEND_CONTEXT, store_batch("i1"))
        sub = bus.subscribe("late")
        again = store.append(TRUSTED_APPEND_CONTEXT, store_batch("i1"))
        assert len(again.fact_ids) == 3
        assert sub.drain() == ()

    def test_a_failed_append_publishes_nothing_and_stores_nothing(
        self, store_with_bus: tuple[SQLiteTraceStore, EffectBus]
    ) -> None:
        store, bus = store_with_bus
        sub = bus.subscribe("watcher")
        before = (store.fact_count(), store.max_position())
        with pytest.raises(UnknownFactError):
            store.append(
                TRUSTED_APPEND_CONTEXT, store_batch("bad", "sha256:" + "0" * 64)
            )
        assert sub.drain() == ()
        assert (store.fact_count(), store.max_position()) == before

    def test_events_are_published_only_after_the_commit_is_visible(
        self, tmp_path: Path, store_with_bus: tuple[SQLiteTraceStore, EffectBus]
    ) -> None:
        store, bus = store_with_bus
        sub = bus.subscribe("checker")
        reader = SQLiteTraceStore(tmp_path / "trace.sqlite")
        unseen: list[str] = []

        def check() -> None:
            # a second connection must already see every record it is told about
            for event in sub:
                try:
                    reader.read_fact(TRUSTED_READ_CONTEXT, event.record_id)
                except UnknownFactError:
                    unseen.append(event.record_id)

        thread = threading.Thread(target=check)
        thread.start()
        try:
            for n in range(30):
                store.append(TRUSTED_APPEND_CONTEXT, store_batch(f"v{n}"))
        finally:
            bus.unsubscribe("checker")
            thread.join(timeout=30)
            reader.close()
        assert unseen == []
        assert sub.dropped == 0

    def test_a_store_without_subscribers_or_bus_appends_normally(
        self, tmp_path: Path
    ) -> None:
        bus = EffectBus()
        with SQLiteTraceStore(tmp_path / "a.sqlite") as store:
            store.with_bus(bus)
            receipt = store.append(TRUSTED_APPEND_CONTEXT, store_batch("i1"))
            assert len(receipt.fact_ids) == 3
        bus.close()
        with SQLiteTraceStore(tmp_path / "b.sqlite").with_bus(bus) as store:
            # a closed bus is a no-op
            assert (
                len(store.append(TRUSTED_APPEND_CONTEXT, store_batch("i1")).fact_ids)
                == 3
            )

    def test_an_append_cannot_overtake_a_slow_publish_of_an_earlier_commit(
        self, tmp_path: Path
    ) -> None:
        # A publisher thread preempted between its commit and its events (here:
        # deliberately slow on the first event) must not let a later commit's
        # events reach subscribers first.
        bus = EffectBus(100)
        sub = bus.subscribe("ordered")
        publishing = threading.Event()

        class SlowFirstEvent:
            def publish(self, event: EffectEvent) -> None:
                if event.position == 0:
                    publishing.set()
                    time.sleep(0.2)
                bus.publish(event)

        with SQLiteTraceStore(tmp_path / "trace.sqlite") as store:
            store.with_bus(SlowFirstEvent())
            first = threading.Thread(
                target=store.append, args=(TRUSTED_APPEND_CONTEXT, store_batch("i1"))
            )
            first.start()
            assert publishing.wait(timeout=10)
            store.append(TRUSTED_APPEND_CONTEXT, store_batch("i2"))
            first.join(timeout=10)
        assert positions(sub.drain()) == [0, 1, 2, 3, 4, 5]

    def test_threads_appending_through_one_store_publish_in_position_order(
        self, store_with_bus: tuple[SQLiteTraceStore, EffectBus]
    ) -> None:
        store, bus = store_with_bus
        sub = bus.subscribe("ordered")
        per_thread = 40

        def produce(k: int) -> None:
            for n in range(per_thread):
                store.append(TRUSTED_APPEND_CONTEXT, store_batch(f"t{k}-{n}"))

        threads = [threading.Thread(target=produce, args=(k,)) for k in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        # "events from a single store are ordered by append order" (the seed)
        assert positions(sub.drain()) == list(range(4 * per_thread * 3))
