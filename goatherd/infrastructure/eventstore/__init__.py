"""The kernel store as the eventsourcing library's persistence module.

``recorder`` exposes the store as the library's application recorder and
``factory`` is the persistence module (``PERSISTENCE_MODULE``), so a library
``Application`` can save to and read from a goatherd trace. The runtime's own
aggregates are folded by ``goatherd.application.RuntimeModel`` (ADR 0024).
"""

from goatherd.infrastructure.eventstore.factory import *
from goatherd.infrastructure.eventstore.recorder import *

# A literal list (not ``+=`` of the modules' lists) so mypy can follow the
# two-level re-export; tests/infrastructure/eventstore/test_package.py keeps it
# equal to the modules' lists.
__all__ = [
    "KernelAggregateRecorder",
    "KernelInfrastructureFactory",
    "KernelRecorder",
    "KernelTrackingRecorder",
    "OPAQUE_KIND_LABEL",
    "TRACE_URL_VARIABLE",
    "stored_state",
]
