"""The runtime's command handlers, one module per aggregate.

Each handler is a function taking a :class:`RuntimeContext` first; it raises
its rule's error, and :class:`goatherd.application.ScopeManager` turns the
expected ones into ``Failure`` values. Wiring lives in
``goatherd.infrastructure.bootstrap``.
"""

from goatherd.application.commands import (
    checkpoints,
    context,
    merge_gate,
    outputs,
    scopes,
    workspace,
)
from goatherd.application.commands.context import RuntimeContext

__all__ = [
    "RuntimeContext",
    "checkpoints",
    "context",
    "merge_gate",
    "outputs",
    "scopes",
    "workspace",
]
