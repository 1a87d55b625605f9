"""The trace store: SQLAlchemy Core tables and the one append path.

``SQLiteTraceStore`` (a path or ``:memory:``), ``SqlAlchemyTraceStore`` (any
engine, PostgreSQL included), ``open_trace_store`` (URL or path) and
``open_trace_store_read_only`` (every read-only command's opener); the commit
chain's ``TraceHead``/``ChainReport`` and the input ``AppendLimits``.
"""

from goatherd.infrastructure.store.chain import ChainProblem, ChainReport, TraceHead
from goatherd.infrastructure.store.limits import AppendLimits
from goatherd.infrastructure.store.opening import (
    open_trace_store,
    open_trace_store_read_only,
)
from goatherd.infrastructure.store.redaction import MAX_REDACTED, Redaction
from goatherd.infrastructure.store.schema import METADATA
from goatherd.infrastructure.store.store import (
    DEFAULT_CHECKPOINT_BLOB_LIMIT,
    EffectPublisher,
    SqlAlchemyTraceStore,
    SQLiteTraceStore,
)

__all__ = [
    "AppendLimits",
    "ChainProblem",
    "ChainReport",
    "DEFAULT_CHECKPOINT_BLOB_LIMIT",
    "EffectPublisher",
    "MAX_REDACTED",
    "METADATA",
    "Redaction",
    "SQLiteTraceStore",
    "SqlAlchemyTraceStore",
    "TraceHead",
    "open_trace_store",
    "open_trace_store_read_only",
]
