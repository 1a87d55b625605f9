"""Serving the trace UI: ``serve`` (blocking, for the CLI) and a background server.

The default address is loopback (``127.0.0.1:8321``): the UI shows payloads,
so exposing it beyond the machine is an explicit choice of the caller.
"""

from __future__ import annotations

import threading
import time
from typing import Final

import uvicorn

from goatherd.domain.store import TraceStore
from goatherd.infrastructure.bus import EffectBus
from goatherd.infrastructure.traceui.app import create_app

__all__ = ["DEFAULT_ADDR", "TraceUiServer", "parse_addr", "serve"]

DEFAULT_ADDR: Final = "127.0.0.1:8321"


def parse_addr(addr: str) -> tuple[str, int]:
    """Split ``host:port`` (``[v6]:port`` allowed).

    Raises:
        ValueError: naming the address when it has no valid port.
    """
    host, sep, port = addr.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"address must be HOST:PORT with a port 0-65535, got {addr!r}")
    return host.strip("[]") or "127.0.0.1", int(port)


def _config(store: TraceStore, bus: EffectBus | None, addr: str) -> uvicorn.Config:
    host, port = parse_addr(addr)
    return uvicorn.Config(
        create_app(store, bus),
        host=host,
        port=port,
        log_level="warning",
        lifespan="off",
    )


def serve(
    store: TraceStore, bus: EffectBus | None = None, addr: str = DEFAULT_ADDR
) -> None:
    """Serve the trace UI until interrupted (``goatherd traceui``)."""
    uvicorn.Server(_config(store, bus, addr)).run()


class TraceUiServer:
    """The trace UI on a background thread (embedded mode and tests).

    Use as a context manager; ``url`` is known once started (port 0 picks a
    free port).
    """

    def __init__(
        self, store: TraceStore, bus: EffectBus | None = None, addr: str = "127.0.0.1:0"
    ) -> None:
        self._server = uvicorn.Server(_config(store, bus, addr))
        self._thread = threading.Thread(target=self._server.run, daemon=True)

    @property
    def url(self) -> str:
        sockets = [s for server in self._server.servers for s in server.sockets]
        host, port = sockets[0].getsockname()[:2]
        return f"http://{host}:{port}"

    def start(self, timeout: float = 10.0) -> TraceUiServer:
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("trace UI server failed to start")
            time.sleep(0.02)
        return self

    def stop(self, timeout: float = 10.0) -> None:
        self._server.should_exit = True
        self._thread.join(timeout)

    def __enter__(self) -> TraceUiServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
