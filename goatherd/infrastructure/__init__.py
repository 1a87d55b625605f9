"""Adapters: the SQLAlchemy trace store, the effect bus, sandboxes, the trace UI.

``bootstrap.py`` is the only composition root.
"""

from goatherd.infrastructure import bus, sandbox
from goatherd.infrastructure.bus import *
from goatherd.infrastructure.sandbox import *

__all__: list[str] = []
__all__ += bus.__all__
__all__ += sandbox.__all__
