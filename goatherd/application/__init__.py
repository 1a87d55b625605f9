"""Use cases (commands and queries), ports, and the runtime services.

The only layer whose public commands return ``returns.Result``. It may import
the domain and projections, never SQLAlchemy, HTTP or driver libraries.
"""

from goatherd.application import best_of_n as best_of_n_module
from goatherd.application import (
    checkpoints,
    errors,
    intervention_key,
    manager_base,
    merge_review,
    ports,
    recovery,
    run,
    run_outcome,
    runtime,
    scope_handle,
    scope_manager,
    settle,
    substrates,
    supervisor,
    tasks,
    workspace_ops,
)
from goatherd.application import materialize as materialize_module
from goatherd.application.best_of_n import *
from goatherd.application.checkpoints import *
from goatherd.application.errors import *
from goatherd.application.intervention_key import *
from goatherd.application.manager_base import *
from goatherd.application.materialize import *
from goatherd.application.merge_review import *
from goatherd.application.ports import *
from goatherd.application.recovery import *
from goatherd.application.run import *
from goatherd.application.run_outcome import *
from goatherd.application.runtime import *
from goatherd.application.scope_handle import *
from goatherd.application.scope_manager import *
from goatherd.application.settle import *
from goatherd.application.substrates import *
from goatherd.application.supervisor import *
from goatherd.application.tasks import *
from goatherd.application.workspace_ops import *

__all__: list[str] = []
__all__ += best_of_n_module.__all__
__all__ += checkpoints.__all__
__all__ += errors.__all__
__all__ += intervention_key.__all__
__all__ += materialize_module.__all__
__all__ += manager_base.__all__
__all__ += merge_review.__all__
__all__ += ports.__all__
__all__ += recovery.__all__
__all__ += run.__all__
__all__ += run_outcome.__all__
__all__ += runtime.__all__
__all__ += scope_handle.__all__
__all__ += scope_manager.__all__
__all__ += settle.__all__
__all__ += substrates.__all__
__all__ += supervisor.__all__
__all__ += tasks.__all__
__all__ += workspace_ops.__all__
