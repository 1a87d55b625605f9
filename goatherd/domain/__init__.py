"""The pure model: canonical encoding, record identity and values, workspace state.

Nothing in this package performs I/O or reads a clock. It may import only the
standard library and the eventsourcing library's domain modules.

Each module declares its public names in ``__all__``; this package re-exports
them all (add one import line per new module).
"""

from goatherd.domain import (
    canonical,
    contexts,
    effects,
    errors,
    identity,
    materialization,
    records,
    supervision,
    workspace,
)
from goatherd.domain.canonical import *
from goatherd.domain.contexts import *
from goatherd.domain.effects import *
from goatherd.domain.errors import *
from goatherd.domain.identity import *
from goatherd.domain.materialization import *
from goatherd.domain.records import *
from goatherd.domain.supervision import *
from goatherd.domain.workspace import *

__all__ = []
__all__ += canonical.__all__
__all__ += contexts.__all__
__all__ += effects.__all__
__all__ += errors.__all__
__all__ += identity.__all__
__all__ += materialization.__all__
__all__ += records.__all__
__all__ += supervision.__all__
__all__ += workspace.__all__
