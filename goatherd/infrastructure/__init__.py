"""Adapters: the SQLAlchemy trace store, the effect bus, sandboxes, the trace UI.

``bootstrap.py`` is the only composition root.
"""

from goatherd.infrastructure import bus
from goatherd.infrastructure.bus import *

__all__: list[str] = []
__all__ += bus.__all__
