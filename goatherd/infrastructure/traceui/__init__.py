"""The read-only trace UI: HTTP API, server-sent events and the browser viewer."""

from goatherd.infrastructure.traceui.app import (
    HEARTBEAT_SECONDS,
    create_app,
    event_json,
    memory_index_engine,
)
from goatherd.infrastructure.traceui.query import (
    DEFAULT_PAGE,
    MAX_PAGE,
    QueryError,
    RecordQuery,
    owners_json,
    parse_record_query,
    record_entries_json,
    records_page_json,
)
from goatherd.infrastructure.traceui.server import (
    DEFAULT_ADDR,
    TraceUiServer,
    parse_addr,
    serve,
)

__all__ = [
    "DEFAULT_ADDR",
    "DEFAULT_PAGE",
    "HEARTBEAT_SECONDS",
    "MAX_PAGE",
    "QueryError",
    "RecordQuery",
    "TraceUiServer",
    "create_app",
    "event_json",
    "memory_index_engine",
    "owners_json",
    "parse_addr",
    "parse_record_query",
    "record_entries_json",
    "records_page_json",
    "serve",
]
