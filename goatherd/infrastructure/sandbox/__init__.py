"""Sandbox backends: the registry, the memory and git backends, containment.

Importing this package registers the built-in backends (``memory``, ``git``).
The backend modules' public names are re-exported here (one import line per
module); the helper modules (``paths``, ``textdiff``, ``merge``, ``gitrunner``,
``gitstate``) are imported directly where needed.
"""

from goatherd.infrastructure.sandbox import git, memory, registry
from goatherd.infrastructure.sandbox.git import *
from goatherd.infrastructure.sandbox.memory import *
from goatherd.infrastructure.sandbox.registry import *

__all__ = []
__all__ += git.__all__
__all__ += memory.__all__
__all__ += registry.__all__
