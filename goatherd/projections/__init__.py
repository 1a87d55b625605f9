"""The read side: pure folds from records and slices to views.

No SQL and no ``returns`` here; views are reached through abstract interfaces
that infrastructure implements.

Each module declares its public names in ``__all__``; this package re-exports
them all, importing a module when one of its names is first read (ADR 0081).
A new module goes in ``_MODULES`` and in the ``TYPE_CHECKING`` imports; then
run ``tools/gen_lazy_exports.py``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from goatherd.domain._lazy import lazy_exports

if TYPE_CHECKING:
    from goatherd.projections import (
        errors,
        execution,
        framework,
        from_store,
        history,
        relations,
        runtime_state,
        schema_library,
        ui_index,
    )
    from goatherd.projections.errors import *
    from goatherd.projections.execution import *
    from goatherd.projections.framework import *
    from goatherd.projections.from_store import *
    from goatherd.projections.history import *
    from goatherd.projections.relations import *
    from goatherd.projections.runtime_state import *
    from goatherd.projections.schema_library import *
    from goatherd.projections.ui_index import *

    __all__ = []
    __all__ += errors.__all__
    __all__ += execution.__all__
    __all__ += framework.__all__
    __all__ += from_store.__all__
    __all__ += history.__all__
    __all__ += relations.__all__
    __all__ += schema_library.__all__
    __all__ += runtime_state.__all__
    __all__ += ui_index.__all__

_MODULES = (
    "errors",
    "execution",
    "framework",
    "from_store",
    "history",
    "relations",
    "runtime_state",
    "schema_library",
    "ui_index",
)

if not TYPE_CHECKING:
    from goatherd.projections._exports import NAMES

    __getattr__, __dir__ = lazy_exports(__name__, globals(), _MODULES, NAMES)
