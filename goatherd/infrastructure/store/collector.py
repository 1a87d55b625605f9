"""A pause of Python's cyclic garbage collector around a bulk decode.

Decoding a batch of log entries allocates five small objects per entry and
no reference cycle: reference counting frees every one of them. The cyclic
collector still runs on the allocation count, every few hundred objects,
and each run walks the young objects (and, every so often, every object
the process holds): it was over a quarter of a projection's catch-up.
:func:`collector_paused` switches it off for the length of one batch and
back on after, the way ``timeit`` runs its loop.

The pause nests and is shared by threads: the collector is switched off by
the first reader that enters and back on by the last that leaves, and only
if it was on when the first entered (a program that disabled it keeps it
disabled). A ``gc.disable()`` made by another thread while a pause is held
is undone when the pause ends.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["collector_paused"]

_LOCK = threading.Lock()
_state = {"depth": 0, "resume": False}


@contextmanager
def collector_paused() -> Iterator[None]:
    """Hold the cyclic collector off while the block runs (see the module docs)."""
    with _LOCK:
        if _state["depth"] == 0:
            _state["resume"] = gc.isenabled()
            gc.disable()
        _state["depth"] += 1
    try:
        yield
    finally:
        with _LOCK:
            _state["depth"] -= 1
            if _state["depth"] == 0 and _state["resume"]:
                gc.enable()
