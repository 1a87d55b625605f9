"""The read-only trace UI: HTTP API, server-sent events and the browser viewer."""

from goatherd.infrastructure.traceui.app import (
    HEARTBEAT_SECONDS,
    LOOPBACK_HOSTS,
    create_app,
    event_json,
    file_index_engine,
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
    allowed_hosts_for,
    parse_addr,
    serve,
)
from goatherd.infrastructure.traceui.tail import LogTailer, entry_event

__all__ = [
    "DEFAULT_ADDR",
    "DEFAULT_PAGE",
    "HEARTBEAT_SECONDS",
    "LOOPBACK_HOSTS",
    "LogTailer",
    "MAX_PAGE",
    "QueryError",
    "RecordQuery",
    "TraceUiServer",
    "allowed_hosts_for",
    "create_app",
    "entry_event",
    "event_json",
    "file_index_engine",
    "memory_index_engine",
    "owners_json",
    "parse_addr",
    "parse_record_query",
    "record_entries_json",
    "records_page_json",
    "serve",
]
