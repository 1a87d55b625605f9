"""Open a trace store by URL or path, writable or strictly read-only.

``open_trace_store`` accepts any SQLAlchemy URL the store supports
(``sqlite:///path``, ``sqlite://`` for memory, ``postgresql+psycopg://...``) or
a bare filesystem path. ``open_trace_store_read_only`` is the viewer's opener:
it never writes, never creates schema, verifies the schema and fails loudly on
a missing, empty, corrupt or foreign database.
"""

from __future__ import annotations

import os
from typing import Any

from sqlalchemy.engine import make_url

from goatherd.infrastructure.store.engine import (
    ensure_schema,
    postgres_engine,
    sqlite_read_only_engine,
    verify_schema,
)
from goatherd.infrastructure.store.limits import DEFAULT_LIMITS
from goatherd.infrastructure.store.outages import outages
from goatherd.infrastructure.store.reader import DEFAULT_CACHE_BYTES
from goatherd.infrastructure.store.store import SqlAlchemyTraceStore, SQLiteTraceStore

__all__ = ["open_trace_store", "open_trace_store_read_only"]


def open_trace_store(
    url: str | os.PathLike[str], **options: Any
) -> SqlAlchemyTraceStore:
    """Open (and create if absent) the trace store at ``url``.

    Args:
        url: a SQLAlchemy URL or a bare filesystem path.
        **options: ``durability``, ``busy_timeout_ms`` for SQLite; engine
            options for PostgreSQL; ``cache_bytes`` and ``limits``
            (``AppendLimits``) for both.

    Raises:
        ValueError: an unsupported URL scheme.
        NotATraceStoreError: the database exists but is not a trace store.
    """
    kind, location = _locate(url)
    if kind == "sqlite":
        return SQLiteTraceStore(location, **options)
    cache_bytes = options.pop("cache_bytes", DEFAULT_CACHE_BYTES)
    limits = options.pop("limits", DEFAULT_LIMITS)
    engine = postgres_engine(location, **options)
    try:
        with outages:
            ensure_schema(engine)
    except BaseException:
        engine.dispose()
        raise
    store = SqlAlchemyTraceStore(engine, cache_bytes=cache_bytes, limits=limits)
    try:
        store._link_if_needed()
    except BaseException:
        store.close()
        raise
    return store


def open_trace_store_read_only(
    path_or_url: str | os.PathLike[str], *, live: bool = False
) -> SqlAlchemyTraceStore:
    """Open an existing trace store without ever writing to it.

    The one call for every command that only reads (``stats``, ``log``,
    ``show``, ``verify``, ``recover``, ``export``, the trace UI). On SQLite it
    works in a read-only directory or on a read-only file and creates no
    ``-wal``/``-shm`` files; ``live=True`` (a viewer that stays open while
    writers work) always reads through the WAL (``engine.sqlite_read_only_engine``
    says what each mode does). On PostgreSQL every session is read-only. A
    schema v1 trace is read as it is, never upgraded. Every write method of
    the returned store raises ``ReadOnlyStoreError``.

    Raises:
        NotATraceStoreError: a missing, empty, corrupt or foreign database.
        StoreUnavailableError: the database cannot be reached or read.
    """
    kind, location = _locate(path_or_url)
    if kind == "sqlite":
        if location == ":memory:":
            raise ValueError("a read-only store needs a database file, not :memory:")
        engine = sqlite_read_only_engine(location, live=live)
    else:
        engine = postgres_engine(location, read_only=True)
    try:
        with outages:
            marker = verify_schema(engine)
    except BaseException:
        engine.dispose()
        raise
    return SqlAlchemyTraceStore(engine, read_only=True, schema=marker)


def _locate(url: str | os.PathLike[str]) -> tuple[str, str]:
    text = os.fspath(url)
    if "://" not in text:
        return "sqlite", text
    parsed = make_url(text)
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        return "sqlite", parsed.database or ":memory:"
    if backend == "postgresql":
        return "postgresql", text
    raise ValueError(f"unsupported trace store URL scheme: {parsed.drivername}")
