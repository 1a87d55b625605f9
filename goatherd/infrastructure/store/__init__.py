"""The trace store: SQLAlchemy Core tables and the one append path.

``SQLiteTraceStore`` (a path or ``:memory:``), ``SqlAlchemyTraceStore`` (any
engine, PostgreSQL included), ``open_trace_store`` (URL or path) and
``open_trace_store_read_only`` (every read-only command's opener); the commit
chain's ``TraceHead``/``ChainReport`` and the input ``AppendLimits``.

The package imports a module the first time one of its names is read (PEP 562
module ``__getattr__``, as the layer packages do, ADR 0081): importing one
submodule (``store.schema``, ``store.postgres``) runs this ``__init__`` first,
and an eager one would load the whole store, its append path included, into
every process that needed a constant (ADR 0089).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from goatherd.domain._lazy import named_homes

if TYPE_CHECKING:
    from goatherd.infrastructure.store.chain import (
        ChainProblem,
        ChainReport,
        TraceHead,
    )
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

_HOMES: Final = {
    "AppendLimits": "limits",
    "ChainProblem": "chain",
    "ChainReport": "chain",
    "DEFAULT_CHECKPOINT_BLOB_LIMIT": "store",
    "EffectPublisher": "store",
    "MAX_REDACTED": "redaction",
    "METADATA": "schema",
    "Redaction": "redaction",
    "SQLiteTraceStore": "store",
    "SqlAlchemyTraceStore": "store",
    "TraceHead": "chain",
    "open_trace_store": "opening",
    "open_trace_store_read_only": "opening",
}


__getattr__, __dir__ = named_homes(__name__, globals(), _HOMES)
