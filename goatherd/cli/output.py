"""Terminal output for the CLI: progress bars on a terminal, JSON for scripts."""

from __future__ import annotations

import json
import sys
import time
from typing import IO, Any

from goatherd.cli.text import json_safe

__all__ = ["ProgressBar", "emit_json", "short_id"]


class ProgressBar:
    """A one-line progress bar on stderr, shown only when stderr is a terminal.

    Call it as ``progress(phase, done, total)``; ``total`` 0 means unknown.
    """

    def __init__(
        self, stream: IO[str] | None = None, *, enabled: bool | None = None
    ) -> None:
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self._last = 0.0
        self._shown = False

    def __call__(self, phase: str, done: int, total: int) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self._last < 0.1 and done != total:
            return
        self._last = now
        if total:
            filled = int(30 * done / total)
            bar = "#" * filled + "-" * (30 - filled)
            text = f"\r{phase:<8} [{bar}] {done}/{total}"
        else:
            text = f"\r{phase:<8} {done}"
        self.stream.write(text)
        self.stream.flush()
        self._shown = True

    def finish(self) -> None:
        """End the bar's line (if one was drawn)."""
        if self._shown:
            self.stream.write("\n")
            self.stream.flush()
            self._shown = False


def emit_json(value: Any, stream: IO[str] | None = None) -> None:
    """Write ``value`` as one JSON document (sorted keys) and a newline.

    Characters that would steer a terminal are written as JSON escapes.
    """
    out = stream or sys.stdout
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, indent=2)
    out.write(json_safe(text) + "\n")


def short_id(record_id: str, width: int = 12) -> str:
    """Return ``sha256:`` ids shortened to ``width`` hex digits for display."""
    if record_id.startswith("sha256:"):
        return record_id[7 : 7 + width]
    return record_id
