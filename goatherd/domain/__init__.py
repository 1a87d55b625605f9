"""The pure model: canonical encoding, record identity and values, workspace state.

Nothing in this package performs I/O or reads a clock. It may import only the
standard library and the eventsourcing library's domain modules.

Each module declares its public names in ``__all__``; this package re-exports
them all, importing a module when one of its names is first read (ADR 0081).
A new module goes in ``_MODULES`` and in the ``TYPE_CHECKING`` imports; then
run ``tools/gen_lazy_exports.py``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from goatherd.domain._lazy import lazy_exports

if TYPE_CHECKING:
    from goatherd.domain import (
        arguments,
        canonical,
        checkpoint,
        contexts,
        effects,
        errors,
        events,
        execution,
        identity,
        log,
        materialization,
        merge_gate,
        records,
        retained_output,
        runtime_errors,
        runtime_state,
        scope,
        settlement,
        store,
        supervision,
        workspace,
    )
    from goatherd.domain.arguments import *
    from goatherd.domain.canonical import *
    from goatherd.domain.checkpoint import *
    from goatherd.domain.contexts import *
    from goatherd.domain.effects import *
    from goatherd.domain.errors import *
    from goatherd.domain.events import *
    from goatherd.domain.execution import *
    from goatherd.domain.identity import *
    from goatherd.domain.log import *
    from goatherd.domain.materialization import *
    from goatherd.domain.merge_gate import *
    from goatherd.domain.records import *
    from goatherd.domain.retained_output import *
    from goatherd.domain.runtime_errors import *
    from goatherd.domain.runtime_state import *
    from goatherd.domain.scope import *
    from goatherd.domain.settlement import *
    from goatherd.domain.store import *
    from goatherd.domain.supervision import *
    from goatherd.domain.workspace import *

    __all__ = []
    __all__ += arguments.__all__
    __all__ += canonical.__all__
    __all__ += checkpoint.__all__
    __all__ += contexts.__all__
    __all__ += effects.__all__
    __all__ += errors.__all__
    __all__ += events.__all__
    __all__ += execution.__all__
    __all__ += identity.__all__
    __all__ += log.__all__
    __all__ += materialization.__all__
    __all__ += merge_gate.__all__
    __all__ += records.__all__
    __all__ += retained_output.__all__
    __all__ += runtime_errors.__all__
    __all__ += runtime_state.__all__
    __all__ += scope.__all__
    __all__ += settlement.__all__
    __all__ += store.__all__
    __all__ += supervision.__all__
    __all__ += workspace.__all__

_MODULES = (
    "arguments",
    "canonical",
    "checkpoint",
    "contexts",
    "effects",
    "errors",
    "events",
    "execution",
    "identity",
    "log",
    "materialization",
    "merge_gate",
    "records",
    "retained_output",
    "runtime_errors",
    "runtime_state",
    "scope",
    "settlement",
    "store",
    "supervision",
    "workspace",
)

if not TYPE_CHECKING:
    from goatherd.domain._exports import NAMES

    __getattr__, __dir__ = lazy_exports(__name__, globals(), _MODULES, NAMES)
