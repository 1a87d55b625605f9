"""Sandbox backends: the registry, the memory and git backends, containment.

Importing this package registers the built-in backends (``memory``, ``git``).
The backend modules' public names are re-exported here (one import line per
module); the helper modules (``paths``, ``textdiff``, ``merge``, ``gitrunner``,
``gitstate``, ``landlock_child``) are imported directly where needed.
"""

from goatherd.infrastructure.sandbox import (
    containment,
    git,
    landlock,
    memory,
    registry,
    winacl,
)
from goatherd.infrastructure.sandbox.containment import *
from goatherd.infrastructure.sandbox.git import *
from goatherd.infrastructure.sandbox.landlock import *
from goatherd.infrastructure.sandbox.memory import *
from goatherd.infrastructure.sandbox.registry import *
from goatherd.infrastructure.sandbox.winacl import *

__all__ = []
__all__ += containment.__all__
__all__ += git.__all__
__all__ += landlock.__all__
__all__ += memory.__all__
__all__ += registry.__all__
__all__ += winacl.__all__
