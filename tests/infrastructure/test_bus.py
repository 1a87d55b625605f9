"""The effect bus: ordering, drop-oldest, replacement, close, never blocking."""

from __future__ import annotations

import asyncio
import queue
import threading
import time

import pytest

from goatherd.domain.effects import EffectEvent
from goatherd.infrastructure.bus import (
    DEFAULT_BUS_BUFFER_SIZE,
    EffectBus,
    Subscription,
    SubscriptionClosedError,
)


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
