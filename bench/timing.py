"""Small timing helpers shared by the benchmark scenarios."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def per_call_seconds(
    fn: Callable[[], object], *, number: int, repeat: int = 5
) -> float:
    """Return the median over ``repeat`` runs of the mean time of one call."""
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        samples.append((time.perf_counter() - start) / number)
    return statistics.median(samples)


def once_seconds(fn: Callable[[], object], *, repeat: int = 3) -> float:
    """Return the median wall time of ``repeat`` calls of ``fn``."""
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)
