"""The trace store: SQLAlchemy Core tables and the one append path.

``SQLiteTraceStore`` (a path or ``:memory:``), ``SqlAlchemyTraceStore`` (any
engine, PostgreSQL included), ``open_trace_store`` (URL or path) and
``open_trace_store_read_only`` (the viewer's opener).
"""

from goatherd.infrastructure.store.opening import (
    open_trace_store,
    open_trace_store_read_only,
)
from goatherd.infrastructure.store.schema import METADATA
from goatherd.infrastructure.store.store import (
    DEFAULT_CHECKPOINT_BLOB_LIMIT,
    EffectPublisher,
    SqlAlchemyTraceStore,
    SQLiteTraceStore,
)

__all__ = [
    "DEFAULT_CHECKPOINT_BLOB_LIMIT",
    "EffectPublisher",
    "METADATA",
    "SQLiteTraceStore",
    "SqlAlchemyTraceStore",
    "open_trace_store",
    "open_trace_store_read_only",
]
