"""Use cases (commands and queries), ports, and the runtime services.

The only layer whose public commands return ``returns.Result``. It may import
the domain and projections, never SQLAlchemy, HTTP or driver libraries.

Each module declares its public names in ``__all__``; this package re-exports
them all, importing a module when one of its names is first read (ADR 0081).
A new module goes in ``_MODULES`` and in the ``TYPE_CHECKING`` imports; then
run ``tools/gen_lazy_exports.py``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from goatherd.domain._lazy import lazy_exports

if TYPE_CHECKING:
    from goatherd.application import best_of_n as best_of_n_module
    from goatherd.application import (
        decisions,
        errors,
        executions,
        failures,
        handles,
        intervention_key,
        manager,
        ports,
        recovery,
        run,
        run_outcome,
        runtime,
        runtime_model,
        sandboxes,
        substrates,
        supervisor,
        tasks,
    )
    from goatherd.application import materialize as materialize_module
    from goatherd.application.best_of_n import *
    from goatherd.application.commands import RuntimeContext
    from goatherd.application.decisions import *
    from goatherd.application.errors import *
    from goatherd.application.executions import *
    from goatherd.application.failures import *
    from goatherd.application.handles import *
    from goatherd.application.intervention_key import *
    from goatherd.application.manager import *
    from goatherd.application.materialize import *
    from goatherd.application.ports import *
    from goatherd.application.recovery import *
    from goatherd.application.run import *
    from goatherd.application.run_outcome import *
    from goatherd.application.runtime import *
    from goatherd.application.runtime_model import *
    from goatherd.application.sandboxes import *
    from goatherd.application.substrates import *
    from goatherd.application.supervisor import *
    from goatherd.application.tasks import *

    __all__: list[str] = ["RuntimeContext"]
    __all__ += best_of_n_module.__all__
    __all__ += decisions.__all__
    __all__ += errors.__all__
    __all__ += executions.__all__
    __all__ += failures.__all__
    __all__ += handles.__all__
    __all__ += intervention_key.__all__
    __all__ += materialize_module.__all__
    __all__ += manager.__all__
    __all__ += ports.__all__
    __all__ += recovery.__all__
    __all__ += run.__all__
    __all__ += run_outcome.__all__
    __all__ += runtime.__all__
    __all__ += runtime_model.__all__
    __all__ += sandboxes.__all__
    __all__ += substrates.__all__
    __all__ += supervisor.__all__
    __all__ += tasks.__all__

_MODULES = (
    "commands.context",
    "best_of_n",
    "decisions",
    "errors",
    "executions",
    "failures",
    "handles",
    "intervention_key",
    "manager",
    "materialize",
    "ports",
    "recovery",
    "run",
    "run_outcome",
    "runtime",
    "runtime_model",
    "sandboxes",
    "substrates",
    "supervisor",
    "tasks",
)

if not TYPE_CHECKING:
    from goatherd.application._exports import NAMES

    __getattr__, __dir__ = lazy_exports(__name__, globals(), _MODULES, NAMES)
