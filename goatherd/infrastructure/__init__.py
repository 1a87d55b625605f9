"""Adapters: the SQLAlchemy trace store, the effect bus, sandboxes, the trace UI.

``bootstrap.py`` is the only composition root.
"""

from goatherd.infrastructure import bus, sandbox, substrates
from goatherd.infrastructure.bus import *
from goatherd.infrastructure.sandbox import *
from goatherd.infrastructure.substrates import *

__all__: list[str] = []
__all__ += bus.__all__
__all__ += sandbox.__all__
__all__ += substrates.__all__
