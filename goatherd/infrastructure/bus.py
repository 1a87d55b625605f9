"""The effect bus: a transient, non-blocking fan-out of :class:`EffectEvent`.

The trace store publishes one event per newly committed ordinary path entry
(``store.with_bus(bus)``); the supervisor, SSE clients and projection runners
subscribe. The bus is not a persistence mechanism: a subscriber that falls
behind loses its OLDEST buffered events (counted in
:attr:`Subscription.dropped`) and repairs by re-reading the store.

``publish`` never blocks, never waits for a subscriber and never fans out on
the publisher's thread: it appends the event to the bus's pending queue and
returns. One dispatcher thread per bus (started on demand, ended when idle)
hands the pending events to every subscription in batches: one lock, one
notification and one wake-up per subscription per batch, so a writer with
hundreds of live SSE clients pays only for the queue append. Each
subscription has its own bounded buffer. Events from one publisher arrive in
publish order at every subscriber; events from concurrent publishers may
interleave. A subscriber sees only events published after it subscribed.

``get_nowait``, ``drain``, ``qsize``, ``dropped`` and ``delivered`` first wait
for the dispatcher to deliver what was published before the call
(read-your-publishes), so a thread that appends and then drains sees its own
events; so do ``unsubscribe`` and a replacing ``subscribe`` before they close
the old subscription.

Consumers read with :meth:`Subscription.get` (blocking, optional timeout),
:meth:`Subscription.get_nowait`, plain iteration (ends when the subscription is
closed and drained) or, on an asyncio loop, ``async for event in
subscription.async_iter()``. Like a closed Go channel, a closed subscription
still hands out what it had buffered before it reports the end.
"""

from __future__ import annotations

import asyncio
import queue
import threading
import time
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
_SYNC_SECONDS: Final = 5.0

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
    """One subscriber's bounded buffer of events (drop-oldest on overflow).

    Created by :meth:`EffectBus.subscribe`; thread-safe. ``get`` raises
    :class:`queue.Empty` on timeout and :class:`SubscriptionClosedError` once
    the subscription is closed and drained.
    """

    __slots__ = (
        "_buffer",
        "_bus",
        "_closed",
        "_cond",
        "_delivered",
        "_dropped",
        "_wakers",
        "buffer_size",
        "subscriber_id",
    )

    def __init__(
        self, subscriber_id: str, buffer_size: int, bus: EffectBus | None = None
    ) -> None:
        self._bus = bus
        self.subscriber_id = subscriber_id
        self.buffer_size = buffer_size
        self._buffer: deque[EffectEvent] = deque()
        self._cond = threading.Condition(threading.Lock())
        self._closed = False
        self._dropped = 0
        self._delivered = 0
        self._wakers: list[_Waker] = []

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return (
            f"Subscription({self.subscriber_id!r}, {state}, "
            f"buffered={len(self._buffer)}, dropped={self._dropped})"
        )

    # ----------------------------------------------------------- state

    @property
    def closed(self) -> bool:
        """Whether the subscription was closed (buffered events may remain)."""
        return self._closed

    @property
    def dropped(self) -> int:
        """How many events were discarded because the buffer was full."""
        self._sync()
        return self._dropped

    @property
    def delivered(self) -> int:
        """How many events were accepted into the buffer (dropped ones included)."""
        self._sync()
        return self._delivered

    def qsize(self) -> int:
        """Return the number of buffered events."""
        self._sync()
        return len(self._buffer)

    # ----------------------------------------------------------- producer side

    def _offer(self, events: list[EffectEvent]) -> None:
        with self._cond:
            if self._closed:
                return
            for event in events:
                if len(self._buffer) >= self.buffer_size:
                    self._buffer.popleft()
                    self._dropped += 1
                self._buffer.append(event)
            self._delivered += len(events)
            self._cond.notify()
            wakers = tuple(self._wakers)
        _wake(wakers)

    def _sync(self) -> None:
        if self._bus is not None:
            self._bus._wait_dispatched()

    def _close(self) -> None:
        with self._cond:
            if self._closed:
                return
            self._closed = True
            self._cond.notify_all()
            wakers = tuple(self._wakers)
        _wake(wakers)

    # ----------------------------------------------------------- consumer side

    def get(self, timeout: float | None = None) -> EffectEvent:
        """Return the next event, waiting up to ``timeout`` seconds (None: forever).

        Raises:
            queue.Empty: nothing arrived within ``timeout``.
            SubscriptionClosedError: the subscription is closed and drained.
        """
        with self._cond:
            ready = self._cond.wait_for(
                lambda: bool(self._buffer) or self._closed, timeout
            )
            if not ready:
                raise queue.Empty
            return self._take_locked()

    def get_nowait(self) -> EffectEvent:
        """Return the next buffered event without waiting.

        Raises:
            queue.Empty: nothing is buffered (and the subscription is open).
            SubscriptionClosedError: the subscription is closed and drained.
        """
        self._sync()
        return self._poll()

    def _poll(self) -> EffectEvent:
        with self._cond:
            if not self._buffer and not self._closed:
                raise queue.Empty
            return self._take_locked()

    def drain(self) -> tuple[EffectEvent, ...]:
        """Remove and return every buffered event, oldest first.

        Waits only for the dispatcher to deliver what was already published.
        """
        self._sync()
        with self._cond:
            events = tuple(self._buffer)
            self._buffer.clear()
            return events

    def _take_locked(self) -> EffectEvent:
        if self._buffer:
            return self._buffer.popleft()
        raise SubscriptionClosedError(self.subscriber_id)

    def __iter__(self) -> Iterator[EffectEvent]:
        """Yield events as they arrive until the subscription is closed and drained."""
        while True:
            try:
                yield self.get()
            except SubscriptionClosedError:
                return

    async def async_iter(self) -> AsyncIterator[EffectEvent]:
        """Yield events on the running asyncio loop without blocking it.

        Ends when the subscription is closed and drained. Publishers in other
        threads wake the loop with ``call_soon_threadsafe``; nothing here ever
        blocks the loop or a publisher.
        """
        loop = asyncio.get_running_loop()
        ready = asyncio.Event()
        waker = _loop_waker(loop, ready)
        self._add_waker(waker)
        try:
            while True:
                ready.clear()
                try:
                    event = self._poll()
                except queue.Empty:
                    await ready.wait()
                    continue
                except SubscriptionClosedError:
                    return
                yield event
        finally:
            self._remove_waker(waker)

    def _add_waker(self, waker: _Waker) -> None:
        with self._cond:
            self._wakers.append(waker)

    def _remove_waker(self, waker: _Waker) -> None:
        with self._cond:
            if waker in self._wakers:
                self._wakers.remove(waker)


def _wake(wakers: tuple[_Waker, ...]) -> None:
    for waker in wakers:
        waker()


def _loop_waker(loop: asyncio.AbstractEventLoop, ready: asyncio.Event) -> _Waker:
    def wake() -> None:
        # A loop that has already shut down cannot be woken; its consumer is gone.
        try:
            loop.call_soon_threadsafe(ready.set)
        except RuntimeError:
            return

    return wake


class EffectBus:
    """Fan out :class:`EffectEvent` to subscribers off the publisher's thread.

    ``buffer_size`` is the per-subscriber buffer (``<= 0`` means
    :data:`DEFAULT_BUS_BUFFER_SIZE`). Thread-safe. After :meth:`close`, every
    subscription is closed (after it received what was published before),
    ``publish`` is a no-op and ``subscribe`` returns an already-closed
    subscription.
    """

    def __init__(self, buffer_size: int = DEFAULT_BUS_BUFFER_SIZE) -> None:
        self.buffer_size = buffer_size if buffer_size > 0 else DEFAULT_BUS_BUFFER_SIZE
        self._lock = threading.Lock()
        self._subscriptions: dict[str, Subscription] = {}
        # Copy-on-write snapshot: each event goes to the subscriptions that
        # existed when it was published.
        self._snapshot: tuple[Subscription, ...] = ()
        self._closed = False
        self._pending: deque[tuple[EffectEvent, tuple[Subscription, ...]]] = deque()
        self._cond = threading.Condition(threading.Lock())
        self._published = 0
        self._dispatched = 0
        self._dispatcher: threading.Thread | None = None

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    def subscribe(self, subscriber_id: str) -> Subscription:
        """Register ``subscriber_id`` and return its subscription.

        An existing subscription with the same id is closed and replaced (its
        consumer sees the end of its stream once drained). Idempotent only in
        that sense: each call returns a fresh subscription.
        """
        subscription = Subscription(subscriber_id, self.buffer_size, self)
        with self._lock:
            if self._closed:
                subscription._close()
                return subscription
            previous = self._subscriptions.pop(subscriber_id, None)
            self._subscriptions[subscriber_id] = subscription
            self._snapshot = tuple(self._subscriptions.values())
        if previous is not None:
            self._wait_dispatched()  # it gets what was published before
            previous._close()
        return subscription

    def unsubscribe(self, subscriber_id: str) -> None:
        """Remove and close ``subscriber_id``'s subscription (unknown ids: no-op)."""
        with self._lock:
            subscription = self._subscriptions.pop(subscriber_id, None)
            self._snapshot = tuple(self._subscriptions.values())
        if subscription is not None:
            self._wait_dispatched()  # it gets what was published before
            subscription._close()

    def publish(self, event: EffectEvent) -> None:
        """Queue ``event`` for every current subscriber; never blocks.

        A no-op without subscribers or after :meth:`close`. A full
        subscriber buffer later drops its oldest event to make room.
        """
        targets = self._snapshot
        if not targets:
            return
        with self._cond:
            if self._closed:
                return
            self._pending.append((event, targets))
            self._published += 1
            if self._dispatcher is None:
                self._dispatcher = threading.Thread(
                    target=self._dispatch, name="goatherd-bus", daemon=True
                )
                self._dispatcher.start()
            self._cond.notify_all()

    def _dispatch(self) -> None:
        """Deliver pending events in batches until idle (the dispatcher thread)."""
        while True:
            with self._cond:
                idle_until = time.monotonic() + _IDLE_SECONDS
                while not self._pending:
                    left = idle_until - time.monotonic()
                    if left <= 0 or self._closed:
                        self._dispatcher = None
                        return
                    self._cond.wait(left)
                batch = list(self._pending)
                self._pending.clear()
            _deliver(batch)
            with self._cond:
                self._dispatched += len(batch)
                self._cond.notify_all()

    def _wait_dispatched(self) -> None:
        """Wait until every event published before the call is delivered."""
        with self._cond:
            target = self._published
            self._cond.wait_for(
                lambda: self._dispatched >= target or self._closed, _SYNC_SECONDS
            )

    def subscriber_count(self) -> int:
        """Return the number of registered (open) subscriptions."""
        with self._lock:
            return len(self._subscriptions)

    def close(self) -> None:
        """Deliver what is pending, close every subscription, refuse further events.

        Idempotent.
        """
        self._wait_dispatched()
        with self._lock, self._cond:
            self._closed = True
            subscriptions = tuple(self._subscriptions.values())
            self._subscriptions.clear()
            self._snapshot = ()
            leftover = list(self._pending)
            self._pending.clear()
            self._cond.notify_all()
        _deliver(leftover)
        for subscription in subscriptions:
            subscription._close()

    def __enter__(self) -> EffectBus:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _deliver(batch: list[tuple[EffectEvent, tuple[Subscription, ...]]]) -> None:
    """Offer each subscription its events of ``batch``, in order, in one call."""
    per: dict[Subscription, list[EffectEvent]] = {}
    for event, targets in batch:
        for subscription in targets:
            per.setdefault(subscription, []).append(event)
    for subscription, events in per.items():
        subscription._offer(events)
