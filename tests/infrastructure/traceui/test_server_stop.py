"""Stopping the background server while pages follow its event stream.

uvicorn waits for open responses before it exits and an event stream never
ends by itself: ``stop()`` ends each stream after what it buffered, so the
server thread is gone when ``stop()`` returns and a client sees a clean end.
"""

from __future__ import annotations

import threading

import httpx
import pytest

from goatherd.infrastructure import EffectBus
from goatherd.infrastructure.store import SQLiteTraceStore
from goatherd.infrastructure.traceui import TraceUiServer
from tests.infrastructure.traceui.trace import append, build_trace

pytestmark = pytest.mark.timeout(60)


def _follow(url: str, lines: list[str], connected: threading.Event) -> None:
    try:
        with httpx.stream("GET", url + "/api/events", timeout=30) as response:
            for line in response.iter_lines():
                lines.append(line)
                if line == ": connected":
                    connected.set()
        lines.append("<end>")
    except httpx.HTTPError as error:  # a cut stream, not a clean end
        lines.append(f"<{error!r}>")


def test_stop_ends_open_event_streams_cleanly_after_what_they_buffered(
    tmp_path,
) -> None:
    bus = EffectBus()
    with SQLiteTraceStore(tmp_path / "trace.sqlite") as store:
        store.with_bus(bus)
        build_trace(store)
        server = TraceUiServer(store, bus).start()
        followers: list[tuple[threading.Thread, list[str]]] = []
        for _ in range(3):
            lines: list[str] = []
            connected = threading.Event()
            thread = threading.Thread(
                target=_follow, args=(server.url, lines, connected), daemon=True
            )
            thread.start()
            assert connected.wait(10)
            followers.append((thread, lines))
        last = append(store, "last", "root:b", "app.last.v1", {"n": 1})
        server.stop()
        assert not server._thread.is_alive()
        for thread, lines in followers:
            thread.join(10)
            assert not thread.is_alive()
            assert lines[-1] == "<end>"  # a clean end of the stream, not a cut
            assert any(last.fact_ids[0] in line for line in lines)
