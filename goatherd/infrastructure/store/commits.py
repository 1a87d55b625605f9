"""Group commit: appends that arrive while a commit runs share the next one.

The classic leader/follower queue. An appending thread enqueues its prepared
append; if no commit is running it becomes the leader, takes everything
queued (up to ``max_group``), commits it as one transaction (``run`` does),
and wakes every member; the members then return their own outcome or raise
their own error. A thread that finds a leader at work waits; when the leader
has committed the group holding this thread's append it returns, otherwise
(its append arrived too late for that group) it may lead the next one.

What a receipt promises does not change: every member's outcome is set only
after its group's ``COMMIT`` returned, and a member whose group failed gets
that failure. A single caller pays one uncontended lock round trip.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Final, Generic, Protocol, TypeVar

__all__ = [
    "CommitQueue",
    "DEFAULT_MAX_GROUP",
    "Entry",
]

DEFAULT_MAX_GROUP: Final = 64


class Entry(Protocol):
    """A queued unit of work: done once ``outcome`` or ``error`` is set."""

    @property
    def finished(self) -> bool:
        """Whether the entry's group committed or failed."""
        ...


_E = TypeVar("_E", bound=Entry)


class CommitQueue(Generic[_E]):
    """A FIFO of entries that one leader thread at a time commits in groups."""

    def __init__(
        self,
        run: Callable[[list[_E]], None],
        *,
        max_group: int = DEFAULT_MAX_GROUP,
    ) -> None:
        """Commit groups with ``run`` (which must finish every entry it gets)."""
        self._run = run
        self._max = max_group
        self._pending: list[_E] = []
        self._leading = False
        # Threads inside wait(): with none, a leader has no one to wake (a
        # lone caller's notify_all walked threading's Python code twice).
        self._waiting = 0
        self._cond = threading.Condition(threading.Lock())

    def submit(self, entry: _E) -> None:
        """Queue ``entry`` and return once its group committed or failed."""
        with self._cond:
            self._pending.append(entry)
            while self._leading:
                self._waiting += 1
                try:
                    self._cond.wait()
                finally:
                    self._waiting -= 1
                if entry.finished:
                    return
            self._leading = True
        try:
            while not entry.finished:
                with self._cond:
                    group = self._pending[: self._max]
                    del self._pending[: len(group)]
                if not group:  # pragma: no cover - run() left its entry unfinished
                    raise RuntimeError("commit queue: an entry was never finished")
                self._run(group)
                with self._cond:
                    if self._waiting:
                        self._cond.notify_all()
        finally:
            with self._cond:
                self._leading = False
                if self._waiting:
                    self._cond.notify_all()
