"""Reference substrates with a real world: the SQLite KV store and the workspace.

Each module declares its public names in ``__all__``; this package re-exports
them all.
"""

from goatherd.infrastructure.substrates import kv, workspace
from goatherd.infrastructure.substrates.kv import *
from goatherd.infrastructure.substrates.workspace import *

__all__: list[str] = []
__all__ += kv.__all__
__all__ += workspace.__all__
