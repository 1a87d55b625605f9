"""The effect bus: a transient, non-blocking fan-out of :class:`EffectEvent`.

The trace store publishes one event per newly committed ordinary path entry
(``store.with_bus(bus)``); the supervisor, SSE clients and projection runners
subscribe. The bus is not a persistence mechanism: a subscriber that falls
behind loses its OLDEST buffered events (counted in
:attr:`Subscription.dropped`) and repairs by re-reading the store.

The bus keeps ONE ring of the most recent events; every subscription is a
cursor into it. ``publish`` appends to the ring and returns: it never
blocks, never waits for a subscriber and does no work per subscriber, so a
writer with hundreds of live SSE clients pays one append per event. A
subscription's buffer is the part of the ring after its cursor, at most its
``buffer_size`` newest events: when it falls further behind, its oldest
events count as dropped. Waking consumers that are waiting (threads blocked
in :meth:`Subscription.get`, coroutines parked in
:meth:`Subscription.wait_async`) is fan-out too, and runs on the bus's
dispatcher thread (started on demand, ended when idle), never on the
publisher's. Events from one publisher arrive in publish order at every
subscriber; events from concurrent publishers may interleave. A subscriber
sees only events published after it subscribed, and sees them as soon as
``publish`` returns (a thread that appends and then drains sees its own
events).

Consumers read with :meth:`Subscription.get` (blocking, optional timeout),
:meth:`Subscription.get_nowait`, :meth:`Subscription.drain`, plain iteration
(ends when the subscription is closed and drained) or, on an asyncio loop,
``async for event in subscription.async_iter()`` (or ``wait_async`` plus
``take_all`` to read in batches). Like a closed Go channel, a closed
subscription still hands out what it had buffered before it reports the end.
"""

from __future__ import annotations

import asyncio
import itertools
import queue
import threading
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Final

from goatherd.domain.effects import EffectEvent
from goatherd.domain.errors import GoatherdError

__all__ = [
    "DEFAULT_BUS_BUFFER_SIZE",
    "EffectBus",
    "Subscription",
    "SubscriptionClosedError",
]

DEFAULT_BUS_BUFFER_SIZE: Final = 64
_IDLE_SECONDS: Final = 1.0

_Waker = Callable[[], None]


class SubscriptionClosedError(GoatherdError):
    """Raised by ``get``/``get_nowait`` on a closed subscription with nothing left.

    Attributes:
        subscriber_id: the id the subscription was registered under.
    """

    def __init__(self, subscriber_id: str) -> None:
        super().__init__(f"subscription {subscriber_id!r} is closed")
        self.subscriber_id = subscriber_id


class Subscription:
    """One subscriber's view of the bus: a cursor and a bounded buffer.

    Created by :meth:`EffectBus.subscribe`; thread-safe. ``get`` raises
    :class:`queue.Empty` on timeout and :class:`SubscriptionClosedError` once
    the subscription is closed and drained.
    """

    __slots__ = (
        "_backlog",
        "_bus",
        "_cursor",
        "_dropped",
        "_end",
        "_start",
        "_wakers",
        "buffer_size",
        "subscriber_id",
    )

    def __init__(self, subscriber_id: str, buffer_size: int, bus: EffectBus) -> None:
        self._bus = bus
        self.subscriber_id = subscriber_id
        self.buffer_size = buffer_size
        self._start = self._cursor = bus._head
        self._end: int | None = None  # the bus's head when it was closed
        # What it still had buffered when closed (it no longer reads the ring).
        self._backlog: deque[EffectEvent] = deque()
        self._dropped = 0
        self._wakers: list[_Waker] = []

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        return (
            f"Subscription({self.subscriber_id!r}, {state}, "
            f"buffered={self.qsize()}, dropped={self.dropped})"
        )

    # ----------------------------------------------------------- state

    @property
    def closed(self) -> bool:
        """Whether the subscription was closed (buffered events may remain)."""
        return self._end is not None

    @property
    def dropped(self) -> int:
        """How many events were discarded because the buffer was full."""
        with self._bus._lock:
            return self._dropped + self._overflow_locked()

    @property
    def delivered(self) -> int:
        """How many events were accepted into the buffer (dropped ones included)."""
        with self._bus._lock:
            end = self._bus._head if self._end is None else self._end
            return end - self._start

    @property
    def next_seq(self) -> int:
        """The bus's number of the next event this subscription would read.

        The bus numbers events consecutively in publish order, the same for
        every subscription: after a read of ``k`` events, they were numbered
        ``next_seq - k`` to ``next_seq - 1`` (readers that share the bus's
        events, as the trace UI's SSE streams do, key caches on it).
        """
        with self._bus._lock:
            return self._cursor

    def qsize(self) -> int:
        """Return the number of buffered events."""
        with self._bus._lock:
            return self._pending_locked()

    # ----------------------------------------------------------- under the lock

    def _overflow_locked(self) -> int:
        if self._end is not None:
            return 0
        return max(0, self._bus._head - self._cursor - self.buffer_size)

    def _pending_locked(self) -> int:
        if self._end is not None:
            return len(self._backlog)
        return min(self._bus._head - self._cursor, self.buffer_size)

    def _take_locked(self, limit: int | None = None) -> list[EffectEvent]:
        """Remove and return up to ``limit`` buffered events, oldest first."""
        if self._end is not None:
            count = len(self._backlog) if limit is None else limit
            return [
                self._backlog.popleft() for _ in range(min(count, len(self._backlog)))
            ]
        overflow = self._overflow_locked()
        self._dropped += overflow
        self._cursor += overflow
        head = self._bus._head
        count = (
            head - self._cursor if limit is None else min(limit, head - self._cursor)
        )
        if count <= 0:
            return []
        ring = self._bus._ring
        skip = self._cursor - (head - len(ring))
        events = list(itertools.islice(ring, skip, skip + count))
        self._cursor += count
        return events

    def _close_locked(self) -> None:
        if self._end is None:
            self._backlog.extend(self._take_locked())
            self._end = self._bus._head

    # ----------------------------------------------------------- consumer side

    def get(self, timeout: float | None = None) -> EffectEvent:
        """Return the next event, waiting up to ``timeout`` seconds (None: forever).

        Raises:
            queue.Empty: nothing arrived within ``timeout``.
            SubscriptionClosedError: the subscription is closed and drained.
        """
        bus = self._bus
        with bus._cond:
            bus._blocked += 1
            try:
                ready = bus._cond.wait_for(
                    lambda: self._pending_locked() > 0 or self.closed, timeout
                )
            finally:
                bus._blocked -= 1
            if not ready:
                raise queue.Empty
            return self._one_locked()

    def get_nowait(self) -> EffectEvent:
        """Return the next buffered event without waiting.

        Raises:
            queue.Empty: nothing is buffered (and the subscription is open).
            SubscriptionClosedError: the subscription is closed and drained.
        """
        with self._bus._lock:
            if not self._pending_locked() and not self.closed:
                raise queue.Empty
            return self._one_locked()

    def _one_locked(self) -> EffectEvent:
        events = self._take_locked(1)
        if events:
            return events[0]
        raise SubscriptionClosedError(self.subscriber_id)

    def drain(self, limit: int | None = None) -> tuple[EffectEvent, ...]:
        """Remove and return the buffered events, oldest first (never waits).

        ``limit`` caps how many are taken (``None``: all of them).
        """
        with self._bus._lock:
            return tuple(self._take_locked(limit))

    take_all = drain

    def __iter__(self) -> Iterator[EffectEvent]:
        """Yield events as they arrive until the subscription is closed and drained."""
        while True:
            try:
                yield self.get()
            except SubscriptionClosedError:
                return

    async def async_iter(self) -> AsyncIterator[EffectEvent]:
        """Yield events on the running asyncio loop without blocking it.

        Ends when the subscription is closed and drained.
        """
        while True:
            events = self.drain()
            if not events:
                if self.closed and not self.qsize():
                    return
                await self.wait_async()
                continue
            for event in events:
                yield event

    async def wait_async(self, timeout: float | None = None) -> bool:
        """Wait on the running loop until an event is buffered or it is closed.

        Returns ``False`` if ``timeout`` seconds passed first. Never blocks
        the loop: the bus's dispatcher wakes it with ``call_soon_threadsafe``.
        """
        loop = asyncio.get_running_loop()
        ready = asyncio.Event()
        waker = _loop_waker(loop, ready)
        bus = self._bus
        with bus._lock:
            if self._pending_locked() or self.closed:
                return True
            self._wakers.append(waker)
            bus._parked[self] = bus._parked.get(self, 0) + 1
        try:
            await asyncio.wait_for(ready.wait(), timeout)
        except TimeoutError:
            return False
        finally:
            with bus._lock:
                self._wakers.remove(waker)
                left = bus._parked.pop(self) - 1
                if left:
                    bus._parked[self] = left
        return True


def _loop_waker(loop: asyncio.AbstractEventLoop, ready: asyncio.Event) -> _Waker:
    def wake() -> None:
        # A loop that has already shut down cannot be woken; its consumer is gone.
        try:
            loop.call_soon_threadsafe(ready.set)
        except RuntimeError:
            return

    return wake


class EffectBus:
    """Fan out :class:`EffectEvent` to subscribers; publishing is one append.

    ``buffer_size`` is the default per-subscriber buffer (``<= 0`` means
    :data:`DEFAULT_BUS_BUFFER_SIZE`). Thread-safe. After :meth:`close`, every
    subscription is closed (after it received what was published before),
    ``publish`` is a no-op and ``subscribe`` returns an already-closed
    subscription.
    """

    def __init__(self, buffer_size: int = DEFAULT_BUS_BUFFER_SIZE) -> None:
        self.buffer_size = buffer_size if buffer_size > 0 else DEFAULT_BUS_BUFFER_SIZE
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)  # threads blocked in get
        self._ring: deque[EffectEvent] = deque(maxlen=self.buffer_size)
        self._head = 0  # how many events entered the ring
        self._subscriptions: dict[str, Subscription] = {}
        self._closed = False
        self._blocked = 0
        self._parked: dict[Subscription, int] = {}
        self._kicked = False
        self._dispatcher: threading.Thread | None = None
        self._kick = threading.Condition(threading.Lock())

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    @property
    def head(self) -> int:
        """The number the next published event gets (the first one is 0)."""
        with self._lock:
            return self._head

    def subscribe(
        self, subscriber_id: str, buffer_size: int | None = None
    ) -> Subscription:
        """Register ``subscriber_id`` and return its subscription.

        ``buffer_size`` overrides the bus's per-subscriber buffer (``None`` or
        ``<= 0``: the bus's). An existing subscription with the same id is
        closed and replaced (its consumer sees the end of its stream once
        drained). Idempotent only in that sense: each call returns a fresh
        subscription.
        """
        size = buffer_size if buffer_size and buffer_size > 0 else self.buffer_size
        with self._lock:
            subscription = Subscription(subscriber_id, size, self)
            if self._closed:
                subscription._close_locked()
                return subscription
            if size > (self._ring.maxlen or 0):
                self._ring = deque(self._ring, maxlen=size)
            previous = self._subscriptions.pop(subscriber_id, None)
            self._subscriptions[subscriber_id] = subscription
            if previous is not None:
                previous._close_locked()  # it keeps what was published before
        if previous is not None:
            self._wake_all(previous)
        return subscription

    def unsubscribe(self, subscriber_id: str) -> None:
        """Remove and close ``subscriber_id``'s subscription (unknown ids: no-op)."""
        with self._lock:
            subscription = self._subscriptions.pop(subscriber_id, None)
            if subscription is not None:
                subscription._close_locked()  # it keeps what was published before
        if subscription is not None:
            self._wake_all(subscription)

    def publish(self, event: EffectEvent) -> None:
        """Append ``event`` for every current subscriber; never blocks.

        A no-op without subscribers or after :meth:`close`. A subscriber that
        is more than its buffer behind drops its oldest events.
        """
        with self._lock:
            if self._closed or not self._subscriptions:
                return
            self._ring.append(event)
            self._head += 1
            waiting = bool(self._blocked or self._parked)
        if waiting:
            self._signal()

    def _signal(self) -> None:
        """Ask the dispatcher thread to wake the waiting consumers."""
        with self._kick:
            self._kicked = True
            if self._dispatcher is None:
                self._dispatcher = threading.Thread(
                    target=self._dispatch, name="goatherd-bus", daemon=True
                )
                self._dispatcher.start()
            self._kick.notify()

    def _dispatch(self) -> None:
        """Wake waiting consumers whenever kicked, until idle (the dispatcher)."""
        while True:
            with self._kick:
                if not self._kicked:
                    self._kick.wait(_IDLE_SECONDS)
                if not self._kicked:
                    self._dispatcher = None
                    return
                self._kicked = False
            with self._lock:
                self._cond.notify_all()
                wakers = [
                    waker
                    for subscription in self._parked
                    if subscription._pending_locked() or subscription.closed
                    for waker in subscription._wakers
                ]
            for waker in wakers:
                waker()

    def _wake_all(self, subscription: Subscription) -> None:
        """Wake everything waiting on ``subscription`` (it was just closed)."""
        with self._lock:
            self._cond.notify_all()
            wakers = list(subscription._wakers)
        for waker in wakers:
            waker()

    def subscriber_count(self) -> int:
        """Return the number of registered (open) subscriptions."""
        with self._lock:
            return len(self._subscriptions)

    def close(self) -> None:
        """Close every subscription (each keeps what it had), refuse further events.

        Idempotent.
        """
        with self._lock:
            self._closed = True
            subscriptions = tuple(self._subscriptions.values())
            self._subscriptions.clear()
            for subscription in subscriptions:
                subscription._close_locked()
            self._ring.clear()
        for subscription in subscriptions:
            self._wake_all(subscription)

    def __enter__(self) -> EffectBus:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
