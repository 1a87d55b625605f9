"""A LangGraph checkpointer on the goatherd trace (``pip install goatherd[langgraph]``).

``GoatherdSaver`` stores LangGraph checkpoints, pending writes and channel
values as records of a goatherd trace (a SQLite file or PostgreSQL), so a
LangGraph thread's history is content-addressed, tamper-evident and visible in
the trace UI, and channel values are stored once per distinct value.
See docs/langgraph.md.
"""

from __future__ import annotations

from goatherd.integrations.langgraph.index import (
    SCHEMA_CHECKPOINT,
    SCHEMA_CHECKPOINTS_HIDDEN,
    SCHEMA_THREAD_DELETED,
    SCHEMA_VALUE,
    SCHEMA_VALUES_ERASED,
    SCHEMA_WRITE,
    SCHEMA_WRITES,
    SCHEMAS,
    RejectedRecord,
)
from goatherd.integrations.langgraph.paths import (
    fork_path,
    namespace_path,
    thread_path,
)
from goatherd.integrations.langgraph.saver import (
    PRUNE_STRATEGIES,
    CheckpointConfigError,
    GoatherdSaver,
    MissingValueError,
)
from goatherd.integrations.langgraph.values import (
    DEFAULT_LIMITS,
    MalformedValueError,
    ValueLimits,
)

__all__ = [
    "CheckpointConfigError",
    "DEFAULT_LIMITS",
    "GoatherdSaver",
    "MalformedValueError",
    "MissingValueError",
    "PRUNE_STRATEGIES",
    "RejectedRecord",
    "SCHEMAS",
    "SCHEMA_CHECKPOINT",
    "SCHEMA_CHECKPOINTS_HIDDEN",
    "SCHEMA_THREAD_DELETED",
    "SCHEMA_VALUE",
    "SCHEMA_VALUES_ERASED",
    "SCHEMA_WRITE",
    "SCHEMA_WRITES",
    "ValueLimits",
    "fork_path",
    "namespace_path",
    "thread_path",
]
