"""Adapters: the SQLAlchemy trace store, the effect bus, sandboxes, the trace UI.

``bootstrap.py`` is the only composition root.
"""

from goatherd.infrastructure import (
    blobs,
    bootstrap,
    bus,
    eventstore,
    projection_runner,
    projection_views,
    sandbox,
    store,
    substrates,
    traceui,
)
from goatherd.infrastructure.blobs import *
from goatherd.infrastructure.bootstrap import *
from goatherd.infrastructure.bus import *
from goatherd.infrastructure.eventstore import *
from goatherd.infrastructure.projection_runner import *
from goatherd.infrastructure.projection_views import *
from goatherd.infrastructure.sandbox import *
from goatherd.infrastructure.store import *
from goatherd.infrastructure.substrates import *
from goatherd.infrastructure.traceui import *

__all__: list[str] = []
__all__ += blobs.__all__
__all__ += bootstrap.__all__
__all__ += bus.__all__
__all__ += eventstore.__all__
__all__ += projection_runner.__all__
__all__ += projection_views.__all__
__all__ += sandbox.__all__
__all__ += store.__all__
__all__ += substrates.__all__
__all__ += traceui.__all__
