"""The read-only trace UI service: a Starlette app over a trace store.

Endpoints (the kernel seed's contract plus the viewer's needs):

- ``GET /api/health``: liveness, bus presence, fact count.
- ``GET /api/records?path=&through=&mode=&after=&limit=``: see ``query.py``.
- ``GET /api/records/{record_id}``: every path entry of one record.
- ``GET /api/owners``: the owner paths with their entry counts.
- ``GET /api/scopes``: the scope tree with lifecycle states, the scopes
  recovery would list (see ``goatherd.projections.scope_tree``).
- ``GET /api/events``: server-sent events, one per appended record, when a bus
  is attached (503 without one: the client polls ``/api/records``).
- ``GET /``: the browser viewer (``static/``).

The service never writes the trace database: its index (the UI index and
scope tree projections) lives in a private in-memory SQLite database that a
:class:`ProjectionRunner` catches up from ``store.read_log`` before each
query. A slow SSE client never blocks the writer: the bus drops its oldest
events, and the client repairs by re-reading ``/api/records``.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Final

from sqlalchemy import Engine, create_engine
from sqlalchemy.pool import StaticPool
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from goatherd.domain.effects import EffectEvent
from goatherd.domain.store import TraceStore
from goatherd.infrastructure.bus import EffectBus, Subscription
from goatherd.infrastructure.projection_runner import ProjectionRunner
from goatherd.infrastructure.projection_views import (
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
    RuntimeStateProjection,
    UiIndexProjection,
    listed_scopes,
    scope_json,
)

__all__ = ["HEARTBEAT_SECONDS", "create_app", "event_json", "memory_index_engine"]

STATIC_DIR: Final = Path(__file__).parent / "static"
HEARTBEAT_SECONDS: Final = 15.0
_UI_INDEX: Final = UiIndexProjection.name
_SCOPES: Final = RuntimeStateProjection.name


def memory_index_engine() -> Engine:
    """Return a private in-memory SQLite engine for the UI's index."""
    return create_engine(
        "sqlite://", poolclass=StaticPool, connect_args={"check_same_thread": False}
    )


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


def _json(text: str, status: int = 200) -> Response:
    return Response(text, status_code=status, media_type="application/json")


def _error(message: str, status: int) -> Response:
    return JSONResponse({"error": message}, status_code=status)


class _Service:
    def __init__(
        self, store: TraceStore, bus: EffectBus | None, engine: Engine
    ) -> None:
        self.store = store
        self.bus = bus
        self.runner = ProjectionRunner(
            store,
            (
                UiIndexProjection(SqlUiIndexView.bind),
                RuntimeStateProjection(runtime_state_view_factory("traceui_")),
            ),
            engine=engine,
        )

    def _indexed(self, name: str, read: Callable[..., str]) -> str:
        self.runner.catch_up()
        with self.runner.read(name) as view:
            return read(view)

    async def health(self, request: Request) -> Response:
        count = await run_in_threadpool(self.store.fact_count)
        return JSONResponse(
            {"status": "ok", "bus": self.bus is not None, "fact_count": count}
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

    async def events(self, request: Request) -> Response:
        if self.bus is None:
            return _error("no effect bus attached: poll /api/records instead", 503)
        subscription = self.bus.subscribe(f"traceui-sse:{uuid.uuid4().hex}")
        return StreamingResponse(
            self._stream(subscription),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    async def _stream(self, subscription: Subscription) -> AsyncIterator[str]:
        assert self.bus is not None
        events = subscription.async_iter()
        try:
            yield "retry: 2000\n: connected\n\n"
            while True:
                try:
                    event = await asyncio.wait_for(anext(events), HEARTBEAT_SECONDS)
                except TimeoutError:
                    yield ": heartbeat\n\n"
                    continue
                except StopAsyncIteration:
                    return
                data = event_json(event)
                yield f"id: {event.position}\nevent: record\ndata: {data}\n\n"
        finally:
            self.bus.unsubscribe(subscription.subscriber_id)

    async def index(self, request: Request) -> Response:
        return FileResponse(STATIC_DIR / "index.html")


def create_app(
    store: TraceStore,
    bus: EffectBus | None = None,
    *,
    index_engine: Engine | None = None,
) -> Starlette:
    """Build the read-only trace UI app over ``store`` (live events with ``bus``).

    ``index_engine`` holds the UI's private index (default: in-memory SQLite);
    nothing is ever written to the trace database.
    """
    service = _Service(store, bus, index_engine or memory_index_engine())
    app = Starlette(
        routes=[
            Route("/", service.index),
            Route("/api/health", service.health),
            Route("/api/records", service.records),
            Route("/api/records/{record_id:path}", service.record),
            Route("/api/owners", service.owners),
            Route("/api/scopes", service.scopes),
            Route("/api/events", service.events),
            Mount("/static", StaticFiles(directory=STATIC_DIR), name="static"),
        ]
    )
    app.state.service = service
    return app
