"""Progress bars appear on a terminal and never when piped."""

from __future__ import annotations

import io

from goatherd.cli.output import ProgressBar
from goatherd.infrastructure.projections.runner import rebuild_projection
from goatherd.infrastructure.store import SQLiteTraceStore


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_bar_is_drawn_on_a_terminal_and_ends_its_line() -> None:
    stream = _Terminal()
    bar = ProgressBar(stream)
    bar("verify", 5, 10)
    bar("verify", 10, 10)
    bar.finish()
    text = stream.getvalue()
    assert "verify" in text
    assert "10/10" in text
    assert text.endswith("\n")


def test_nothing_is_drawn_when_piped() -> None:
    stream = io.StringIO()
    bar = ProgressBar(stream)
    bar("export", 1, 2)
    bar.finish()
    assert stream.getvalue() == ""


def test_a_rebuild_reports_its_progress_up_to_the_log_length(trace_file) -> None:
    path, _ = trace_file
    calls: list[tuple[str, int, int]] = []
    with SQLiteTraceStore(str(path)) as store:
        length = store.max_position() + 1
        rebuild_projection(
            store,
            "goatherd.traceui_index",
            progress=lambda name, done, total: calls.append((name, done, total)),
        )
    assert calls
    assert calls[-1] == ("goatherd.traceui_index", length, length)
