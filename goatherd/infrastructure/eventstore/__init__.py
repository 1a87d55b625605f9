"""The runtime's event store over the kernel store (eventsourcing adapter).

``mapping`` maps events to record drafts and path entries back; ``streams``
loads aggregates (in-process cache + fast-forward + snapshots) and saves one
batch per intent; ``snapshots`` is the rebuildable snapshot cache table;
``recorder`` exposes the store as the library's application recorder and
``factory`` is the persistence module (``PERSISTENCE_MODULE``).
"""

from goatherd.infrastructure.eventstore import (
    factory,
    mapping,
    recorder,
    snapshots,
    streams,
)
from goatherd.infrastructure.eventstore.factory import *
from goatherd.infrastructure.eventstore.mapping import *
from goatherd.infrastructure.eventstore.recorder import *
from goatherd.infrastructure.eventstore.snapshots import *
from goatherd.infrastructure.eventstore.streams import *

__all__: list[str] = []
__all__ += factory.__all__
__all__ += mapping.__all__
__all__ += recorder.__all__
__all__ += snapshots.__all__
__all__ += streams.__all__
