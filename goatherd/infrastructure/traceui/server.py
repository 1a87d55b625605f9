"""Serving the trace UI: ``serve`` (blocking, for the CLI) and a background server.

The default address is loopback (``127.0.0.1:8321``): the UI shows payloads,
so exposing it beyond the machine is an explicit choice of the caller. The
server answers only requests whose ``Host`` is a loopback name or the bound
address (plus ``allowed_hosts``), which defeats DNS rebinding.
"""

from __future__ import annotations

import socket
import threading
import time
from types import FrameType
from typing import Any, Final

import uvicorn

from goatherd.domain.store import TraceStore
from goatherd.infrastructure.bus.effect_bus import EffectBus
from goatherd.infrastructure.traceui.app import (
    LOOPBACK_HOSTS,
    close_event_streams,
    create_app,
)
from goatherd.projections import Projection

__all__ = [
    "DEFAULT_ADDR",
    "TraceUiServer",
    "allowed_hosts_for",
    "listen",
    "parse_addr",
    "serve",
    "url_of",
]

DEFAULT_ADDR: Final = "127.0.0.1:8321"
STREAM_GRACE_SECONDS: Final = 2.0  # what an open request gets when the server stops


def parse_addr(addr: str) -> tuple[str, int]:
    """Split ``host:port`` (``[v6]:port`` allowed).

    Raises:
        ValueError: naming the address when it has no valid port.
    """
    host, sep, port = addr.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"address must be HOST:PORT with a port 0-65535, got {addr!r}")
    return host.strip("[]") or "127.0.0.1", int(port)


def allowed_hosts_for(host: str, extra: tuple[str, ...] = ()) -> tuple[str, ...]:
    """Return the Host names a server bound to ``host`` answers (plus ``extra``)."""
    bound = () if host in ("0.0.0.0", "::") else (host,)  # noqa: S104 - compared only
    return (*LOOPBACK_HOSTS, *bound, *extra)


def _config(
    store: TraceStore,
    bus: EffectBus | None,
    addr: str,
    allowed_hosts: tuple[str, ...] = (),
    projections: tuple[Projection[Any], ...] = (),
) -> uvicorn.Config:
    host, port = parse_addr(addr)
    app = create_app(
        store,
        bus,
        allowed_hosts=allowed_hosts_for(host, allowed_hosts),
        projections=projections,
    )
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="warning",
        lifespan="off",
    )


class _Server(uvicorn.Server):
    """A uvicorn server that ends the UI's event streams when asked to stop.

    uvicorn waits for open responses before it exits, and an event stream
    never ends by itself (Ctrl-C would hang while a page is open).
    """

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        super().handle_exit(sig, frame)
        # Off the signal handler: closing takes the bus's lock, which the
        # interrupted code may hold.
        threading.Thread(
            target=close_event_streams, args=(self.config.app,), daemon=True
        ).start()

    def stop_streams(self) -> None:
        close_event_streams(self.config.app)


def serve(
    store: TraceStore,
    bus: EffectBus | None = None,
    addr: str = DEFAULT_ADDR,
    *,
    allowed_hosts: tuple[str, ...] = (),
    projections: tuple[Projection[Any], ...] = (),
    sock: socket.socket | None = None,
) -> None:
    """Serve the trace UI until interrupted (``goatherd traceui``).

    ``allowed_hosts`` extends the Host allowlist (loopback names and the
    bound address); ``projections`` adds your read models to the index;
    ``sock`` is a socket the caller already bound to ``addr`` and listens on
    (so a busy port is known before anything is announced).
    """
    server = _Server(_config(store, bus, addr, allowed_hosts, projections))
    server.run(sockets=None if sock is None else [sock])


def listen(addr: str) -> socket.socket:
    """Return a listening TCP socket bound to ``addr`` (``HOST:PORT``).

    Raises:
        ValueError: a malformed address.
        OSError: the bind failed (``errno.EADDRINUSE``: the port is taken).
    """
    host, port = parse_addr(addr)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(2048)
    except BaseException:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


def url_of(sock: socket.socket) -> str:
    """Return ``http://HOST:PORT`` of a bound socket (IPv6 in brackets)."""
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}"


class TraceUiServer:
    """The trace UI on a background thread (embedded mode and tests).

    Use as a context manager; ``url`` is known once started (port 0 picks a
    free port).
    """

    def __init__(
        self,
        store: TraceStore,
        bus: EffectBus | None = None,
        addr: str = "127.0.0.1:0",
        *,
        allowed_hosts: tuple[str, ...] = (),
    ) -> None:
        self._server = _Server(_config(store, bus, addr, allowed_hosts))
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
        """Stop serving within ``timeout`` seconds.

        Event streams end after sending what they buffered; requests in
        flight get a short grace, then whatever is still open is cut (a page
        reconnects and repairs from ``/api/records``).
        """
        self._server.should_exit = True
        self._server.stop_streams()
        self._thread.join(min(timeout, STREAM_GRACE_SECONDS))
        if self._thread.is_alive():
            self._server.force_exit = True
            self._thread.join(timeout)

    def __enter__(self) -> TraceUiServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
