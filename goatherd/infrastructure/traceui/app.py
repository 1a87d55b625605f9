"""The read-only trace UI service: a Starlette app over a trace store.

Endpoints (the kernel seed's contract plus the viewer's needs):

- ``GET /api/health``: liveness, bus presence, the number of records.
- ``GET /api/records?path=&through=&mode=&after=&limit=``: see ``query.py``.
- ``GET /api/records/{record_id}``: every path entry of one record.
- ``GET /api/owners``: the owner paths with their entry counts.
- ``GET /api/scopes``: the scope tree with lifecycle states, the scopes
  recovery would list (see ``goatherd.projections.runtime_state``).
- ``GET /api/events``: server-sent events, one per new log entry, when a bus
  is attached (503 without one: the client polls ``/api/records``); each
  client gets what arrived at most once per 0.25 s tick, in one write.
- ``GET /api/projections``: the index's read models (built-ins and the ones
  passed to ``create_app``) with their positions; ``/api/projections/{name}``
  the rows of a keyed-row view.
- ``GET /``: the browser viewer (``static/``).

Every request must name an allowed ``Host`` (default: loopback names; the
server adds its bound address): a web page that rebinds its DNS name to
127.0.0.1 gets 421, never a payload (ADR 0045).

The service never writes the trace database: its index (the UI index and
runtime state projections) lives in a private in-memory SQLite database that
a :class:`ProjectionRunner` catches up from ``store.read_log`` before each
query. A slow SSE client never blocks the writer or the other clients: it
only falls behind in the bus's ring, loses its oldest events, and the page
repairs the gap from ``/api/records`` (ADR 0046).
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import json
import os
import sqlite3
import tempfile
import threading
import uuid
from collections import deque
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, Final

from sqlalchemy import Engine, create_engine
from sqlalchemy.pool import StaticPool
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from goatherd.domain.effects import EffectEvent
from goatherd.domain.store import TraceStore
from goatherd.infrastructure.bus.effect_bus import EffectBus, Subscription
from goatherd.infrastructure.projections.runner import ProjectionRunner
from goatherd.infrastructure.projections.views import (
    SqlRuntimeStateView,
    SqlUiIndexView,
    runtime_state_view_factory,
)
from goatherd.infrastructure.traceui.query import (
    QueryError,
    owners_json,
    parse_record_query,
    record_entries_json,
    records_page_json,
)
from goatherd.projections import (
    Projection,
    RuntimeStateProjection,
    UiIndexProjection,
    listed_scopes,
    scope_json,
)

__all__ = [
    "HEARTBEAT_SECONDS",
    "LOOPBACK_HOSTS",
    "SSE_BUFFER_EVENTS",
    "SSE_FLUSH_SECONDS",
    "close_event_streams",
    "create_app",
    "event_json",
    "file_index_engine",
    "memory_index_engine",
]

STATIC_DIR: Final = Path(__file__).parent / "static"
HEARTBEAT_SECONDS: Final = 15.0
SSE_FLUSH_SECONDS: Final = 0.25
"""The shortest time between two writes to one SSE client."""
SSE_BUFFER_EVENTS: Final = 1024
"""Events buffered per SSE client between writes (more: its oldest drop)."""
_FRAMES_KEPT: Final = 8192
_UI_INDEX: Final = UiIndexProjection.name
_SCOPES: Final = RuntimeStateProjection.name
LOOPBACK_HOSTS: Final = ("localhost", "127.0.0.1", "::1")


def _host_of(header: str) -> str:
    """Return the host of a ``Host`` header, without port or IPv6 brackets."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1:].partition("]")[0]
    return header.rpartition(":")[0] if header.count(":") == 1 else header


class _AllowedHosts:
    """Answer 421 to any request whose ``Host`` is not on the allowlist."""

    def __init__(self, app: ASGIApp, hosts: tuple[str, ...]) -> None:
        self._app = app
        self._any = "*" in hosts
        self._hosts = frozenset(h.strip("[]").lower() for h in hosts)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket") and not self._any:
            headers = dict(scope.get("headers") or [])
            host = _host_of(headers.get(b"host", b"").decode("latin-1"))
            if host not in self._hosts:
                response = _error(f"host {host!r} is not allowed here", 421)
                await response(scope, receive, send)
                return
        await self._app(scope, receive, send)


# Sent with every response: the page loads only its own script, style and
# API (no inline code, no other origin), may not be framed, and no response
# is sniffed into another type (a payload served as JSON stays JSON).
CONTENT_SECURITY_POLICY: Final = (
    "default-src 'none'; script-src 'self'; style-src 'self'; "
    "connect-src 'self'; img-src 'self'; base-uri 'none'; "
    "form-action 'none'; frame-ancestors 'none'"
)
SECURITY_HEADERS: Final = (
    (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
    (b"cross-origin-resource-policy", b"same-origin"),
)


class _SecurityHeaders:
    """Add :data:`SECURITY_HEADERS` to every HTTP response."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                names = {name.lower() for name, _ in message.get("headers", [])}
                extra = [(n, v) for n, v in SECURITY_HEADERS if n not in names]
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        await self._app(scope, receive, send_with_headers)


def memory_index_engine() -> Engine:
    """Return a private in-memory SQLite engine for the UI's index.

    The index holds a copy of every record's JSON, so it takes as much memory
    as the trace's payloads; :func:`file_index_engine` (the default) does not.
    """
    return create_engine(
        "sqlite://", poolclass=StaticPool, connect_args={"check_same_thread": False}
    )


UI_CATCH_UP_BATCH: Final = 200
"""Log entries the UI's index folds per transaction while it catches up."""
INDEX_CACHE_KIB: Final = 8192
"""The page cache of the UI's private index, in KiB (what it keeps in memory)."""


def file_index_engine(directory: str | None = None) -> Engine:
    """Return a private SQLite engine for the UI's index in an anonymous file.

    The file is made in ``directory`` (default: the system's temporary
    directory) and unlinked at once: the one connection keeps it alive, and
    nothing is left on disk when the process ends, however it ends. Memory
    stays bounded by the page cache (:data:`INDEX_CACHE_KIB`) whatever the
    size of the trace; the index has no journal (it is rebuilt from the trace
    at every start).
    """
    handle, name = tempfile.mkstemp(
        prefix="goatherd-ui-", suffix=".index", dir=directory
    )
    os.close(handle)

    def connect() -> sqlite3.Connection:
        conn = sqlite3.connect(name, check_same_thread=False)
        os.unlink(name)
        conn.execute("PRAGMA journal_mode=OFF")
        conn.execute(f"PRAGMA cache_size=-{INDEX_CACHE_KIB}")
        conn.execute("PRAGMA temp_store=FILE")
        return conn

    return create_engine("sqlite://", poolclass=StaticPool, creator=connect)


def event_json(event: EffectEvent) -> str:
    """Encode one bus event as the SSE ``data`` line (arrays never null)."""
    return json.dumps(
        {
            "position": event.position,
            "id": event.record_id,
            "owner": event.trace_owner_id,
            "ordinal": event.owner_ordinal,
            "schema": event.schema_ref,
            "mode": event.mode,
            "kind": event.kind_label,
            "parents": list(event.causal_parents),
            "intent": event.intent_id,
            "payload": event.payload,
            "timestamp": event.timestamp.isoformat() if event.timestamp else None,
        },
        sort_keys=True,
        separators=(",", ":"),
    )


def _frame(event: EffectEvent) -> str:
    return f"id: {event.position}\nevent: record\ndata: {event_json(event)}\n\n"


def _json(text: str, status: int = 200) -> Response:
    return Response(text, status_code=status, media_type="application/json")


def _error(message: str, status: int) -> Response:
    return JSONResponse({"error": message}, status_code=status)


def _row_json(row: object) -> object:
    if dataclasses.is_dataclass(row) and not isinstance(row, type):
        return dataclasses.asdict(row)
    return row


class _Service:
    def __init__(
        self,
        store: TraceStore,
        bus: EffectBus | None,
        engine: Engine,
        extra: tuple[Projection[Any], ...],
    ) -> None:
        self.store = store
        self.bus = bus
        self.runner = ProjectionRunner(
            store,
            (
                UiIndexProjection(SqlUiIndexView.bind),
                RuntimeStateProjection(runtime_state_view_factory("traceui_")),
                *extra,
            ),
            engine=engine,
            # Smaller batches than the runner's default: a batch's records
            # are in memory at once, and a trace of large payloads must not
            # make the UI's memory follow the trace.
            batch_size=UI_CATCH_UP_BATCH,
        )
        self.extra = tuple(p.name for p in extra)
        # Only the event loop's thread touches it (every SSE stream runs there).
        self._frames: deque[str] = deque(maxlen=_FRAMES_KEPT)
        self._frames_end = 0  # the bus number after the last frame kept
        self._tick = -1  # the flush tick the streams are in
        self._tick_end = 0  # the bus's head when that tick began: all take up to it
        self._chunks: dict[tuple[int, int], bytes] = {}  # this tick's writes
        # The open event streams' subscriptions (the loop adds and removes
        # them; a stopping server closes them from its own thread).
        self._streams: set[str] = set()
        self._streams_lock = threading.Lock()

    def close_streams(self) -> None:
        """End every open event stream once it has sent what it buffered."""
        with self._streams_lock:
            streams = tuple(self._streams)
        if self.bus is not None:
            for subscriber_id in streams:
                self.bus.unsubscribe(subscriber_id)

    def _indexed(self, name: str, read: Callable[..., str]) -> str:
        self.runner.catch_up()
        with self.runner.read(name) as view:
            return read(view)

    async def health(self, request: Request) -> Response:
        count = await run_in_threadpool(self.store.fact_count)
        return JSONResponse(
            {
                "status": "ok",
                "bus": self.bus is not None,
                "records": count,
                "fact_count": count,
            }
        )

    async def records(self, request: Request) -> Response:
        try:
            query = parse_record_query(request.query_params)
        except QueryError as exc:
            return _error(str(exc), 400)
        text = await run_in_threadpool(
            self._indexed,
            _UI_INDEX,
            lambda view: records_page_json(view.connection, self.store, query),
        )
        return _json(text)

    async def record(self, request: Request) -> Response:
        record_id = request.path_params["record_id"]
        text = await run_in_threadpool(
            self._indexed,
            _UI_INDEX,
            lambda v: record_entries_json(v.connection, record_id),
        )
        if text.startswith('{"count":0,'):
            return _error(f"unknown record id: {record_id}", 404)
        return _json(text)

    async def owners(self, request: Request) -> Response:
        text = await run_in_threadpool(
            self._indexed, _UI_INDEX, lambda view: owners_json(view.connection)
        )
        return _json(text)

    async def scopes(self, request: Request) -> Response:
        def read(view: object) -> str:
            assert isinstance(view, SqlRuntimeStateView)
            scopes = [scope_json(s) for s in listed_scopes(view.scope_rows())]
            return json.dumps({"scopes": scopes}, separators=(",", ":"))

        return _json(await run_in_threadpool(self._indexed, _SCOPES, read))

    async def projections(self, request: Request) -> Response:
        def read() -> str:
            self.runner.catch_up()
            rows = [
                {"name": s.name, "version": s.version, "position": s.position}
                for s in self.runner.status()
            ]
            return json.dumps({"projections": rows}, separators=(",", ":"))

        return _json(await run_in_threadpool(read))

    async def projection_rows(self, request: Request) -> Response:
        name = request.path_params["name"]
        if name not in self.extra:
            return _error(f"unknown projection: {name}", 404)

        def read(view: object) -> str:
            rows = getattr(view, "rows", None)
            if rows is None:
                raise QueryError(f"projection {name} has no keyed rows to list")
            items = [_row_json(row) for row in rows()]
            return json.dumps({"rows": items}, separators=(",", ":"), default=str)

        try:
            text = await run_in_threadpool(self._indexed, name, read)
        except QueryError as exc:
            return _error(str(exc), 400)
        return _json(text)

    async def events(self, request: Request) -> Response:
        if self.bus is None:
            return _error("no effect bus attached: poll /api/records instead", 503)
        subscription = self.bus.subscribe(
            f"traceui-sse:{uuid.uuid4().hex}", SSE_BUFFER_EVENTS
        )
        with self._streams_lock:
            self._streams.add(subscription.subscriber_id)
        return StreamingResponse(
            self._stream(subscription),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    async def _stream(self, subscription: Subscription) -> AsyncIterator[str | bytes]:
        """Send what the bus buffered, at most once per flush interval.

        Every client flushes on the same clock ticks, so clients that keep up
        take the same run of events, and that run is encoded once for all of
        them: a burst costs each client one wake-up and one write per tick,
        whatever the writer's rate. A client that does not read only fills its
        own buffer, which drops its oldest events (positions then jump: the
        page repairs from ``/api/records``).
        """
        assert self.bus is not None
        loop = asyncio.get_running_loop()
        try:
            yield "retry: 2000\n: connected\n\n"
            while True:
                if not await subscription.wait_async(HEARTBEAT_SECONDS):
                    yield ": heartbeat\n\n"
                    continue
                start = subscription.next_seq
                end = self._tick_head(loop.time(), start)
                events = subscription.take_all(end - start if end > start else None)
                if not events:
                    return  # closed and drained
                yield self._chunk(events, subscription.next_seq)
                now = loop.time()
                await asyncio.sleep(SSE_FLUSH_SECONDS - now % SSE_FLUSH_SECONDS)
        finally:
            self.bus.unsubscribe(subscription.subscriber_id)
            with self._streams_lock:
                self._streams.discard(subscription.subscriber_id)

    def _tick_head(self, now: float, start: int) -> int:
        """Return where the streams' reads end in the tick of ``now``.

        The bus's head when the tick's first stream woke: streams that keep
        up then read the same run and share one encoded write. A stream that
        is past it (events came after) starts the tick's run anew.
        """
        tick = int(now / SSE_FLUSH_SECONDS)
        if tick != self._tick or self._tick_end <= start:
            assert self.bus is not None
            self._tick, self._tick_end = tick, self.bus.head
            self._chunks.clear()
        return self._tick_end

    def _chunk(self, events: tuple[EffectEvent, ...], end: int) -> bytes:
        """Return the SSE frames of the bus's events ``end - len(events)`` to ``end``.

        Each event is encoded once for all clients: the frames are kept in
        bus order (the bus numbers events the same for every subscription),
        and a client's run is a slice of them; the bytes of a run are built
        once per tick for every stream that takes the same run.
        """
        key = (end - len(events), end)
        chunk = self._chunks.get(key)
        if chunk is None:
            chunk = self._chunks[key] = self._frames_text(events, end).encode()
        return chunk

    def _frames_text(self, events: tuple[EffectEvent, ...], end: int) -> str:
        frames = self._frames
        start = end - len(events)
        base = self._frames_end - len(frames)
        if start < base or start > self._frames_end:
            frames.clear()  # too old, or past a run no client took
            self._frames_end = base = start
        fresh = end - self._frames_end
        if fresh > 0:
            frames.extend(_frame(event) for event in events[len(events) - fresh :])
            self._frames_end = end
            base = end - len(frames)
        return "".join(itertools.islice(frames, start - base, end - base))

    async def index(self, request: Request) -> Response:
        return FileResponse(STATIC_DIR / "index.html")


def close_event_streams(app: object) -> None:
    """End the open ``/api/events`` streams of an app :func:`create_app` built.

    A server that stops waits for its responses, and an event stream never
    ends by itself; each ends cleanly after sending what it buffered (a page
    reconnects and repairs from ``/api/records``). Any thread may call it.
    """
    inner = app
    while isinstance(inner, _SecurityHeaders | _AllowedHosts):
        inner = inner._app
    service = getattr(getattr(inner, "state", None), "service", None)
    if isinstance(service, _Service):
        service.close_streams()


def create_app(
    store: TraceStore,
    bus: EffectBus | None = None,
    *,
    index_engine: Engine | None = None,
    allowed_hosts: tuple[str, ...] = LOOPBACK_HOSTS,
    projections: tuple[Projection[Any], ...] = (),
) -> ASGIApp:
    """Build the read-only trace UI app over ``store`` (live events with ``bus``).

    ``index_engine`` holds the UI's private index (default: an anonymous
    SQLite file, :func:`file_index_engine`, so memory does not grow with the
    trace);
    nothing is ever written to the trace database. ``allowed_hosts`` are the
    ``Host`` names a request may carry (``"*"``: any). ``projections`` are
    your own read models, folded into the private index too.
    """
    service = _Service(store, bus, index_engine or file_index_engine(), projections)
    app = Starlette(
        routes=[
            Route("/", service.index),
            Route("/api/health", service.health),
            Route("/api/records", service.records),
            Route("/api/records/{record_id:path}", service.record),
            Route("/api/owners", service.owners),
            Route("/api/scopes", service.scopes),
            Route("/api/events", service.events),
            Route("/api/projections", service.projections),
            Route("/api/projections/{name:path}", service.projection_rows),
            Mount("/static", StaticFiles(directory=STATIC_DIR), name="static"),
        ]
    )
    app.state.service = service
    return _SecurityHeaders(_AllowedHosts(app, allowed_hosts))
