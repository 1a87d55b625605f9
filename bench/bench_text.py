"""Safe output on hostile input: ``one_line`` and ``redact_url`` stay linear.

A refused import line or an error may quote a value of a mebibyte or more,
shaped to make a backtracking pattern explode (long runs of URL scheme
characters, ``://`` repeated, ``=`` repeated, a URL whose password never
ends). Each shape is timed at 64 KiB and at 1 MiB: PASS when every 1 MiB
shape finishes within 2 s and takes at most 40x its 64 KiB time (16x the
input, so linear with room for noise; the old regular expressions took 46 s
on 64 KiB).
"""

from __future__ import annotations

import os
from functools import partial

from bench.timing import once_seconds
from goatherd.cli.text import one_line, redact_url

SHAPES = {
    "letters": lambda n: "a" * n,
    "schemes": lambda n: "a://" * (n // 4),
    "equals": lambda n: "=" * n,
    "colons": lambda n: "x:" * (n // 2),
    "endless password": lambda n: "postgresql://u:" + "p" * n,
    "password keys": lambda n: "password=" * (n // 9),
    "mixed": lambda n: ("u:p@" + "sslpassword=" + "b/" * 8 + "://") * (n // 32),
}
BUDGET_SECONDS = 2.0
GROWTH_LIMIT = 40.0


def _both(text: str) -> None:
    one_line(text)
    redact_url(text)


def run() -> None:
    print(f"load average at start: {os.getloadavg()[0]:.2f}")
    worst = 0.0
    growth = 0.0
    for name, make in SHAPES.items():
        small, large = make(64 << 10), make(1 << 20)
        small_s = once_seconds(partial(_both, small))
        large_s = once_seconds(partial(_both, large))
        ratio = large_s / max(small_s, 1e-4)
        worst, growth = max(worst, large_s), max(growth, ratio)
        print(
            f"{name}: 64 KiB {small_s * 1e3:.1f} ms, "
            f"1 MiB {large_s * 1e3:.1f} ms, x{ratio:.1f}"
        )
    verdict = "PASS" if worst <= BUDGET_SECONDS and growth <= GROWTH_LIMIT else "MISS"
    print(
        f"one_line/redact_url on 1 MiB: worst {worst:.2f} s, growth x{growth:.1f} "
        f"{verdict} (target <= {BUDGET_SECONDS} s and <= x{GROWTH_LIMIT:.0f})"
    )
    print(f"load average at end: {os.getloadavg()[0]:.2f}")
