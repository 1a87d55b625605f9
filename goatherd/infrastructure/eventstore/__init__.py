"""The runtime's event store over the kernel store (eventsourcing adapter).

``mapping`` maps events to record drafts and path entries back; ``streams``
loads aggregates (in-process cache + fast-forward + snapshots) and saves one
batch per intent; ``snapshots`` is the rebuildable snapshot cache table;
``recorder`` exposes the store as the library's application recorder and
``factory`` is the persistence module (``PERSISTENCE_MODULE``).
"""

from goatherd.infrastructure.eventstore.factory import *
from goatherd.infrastructure.eventstore.mapping import *
from goatherd.infrastructure.eventstore.recorder import *
from goatherd.infrastructure.eventstore.snapshots import *
from goatherd.infrastructure.eventstore.streams import *

# A literal list (not ``+=`` of the modules' lists) so mypy can follow the
# two-level re-export; tests/infrastructure/eventstore/test_package.py keeps it
# equal to the modules' lists.
__all__ = [
    "AggregateSnapshot",
    "DEFAULT_AGGREGATE_CACHE",
    "DEFAULT_SNAPSHOT_EVERY",
    "KernelAggregateRecorder",
    "KernelInfrastructureFactory",
    "KernelRecorder",
    "KernelTrackingRecorder",
    "OPAQUE_KIND_LABEL",
    "SNAPSHOT_FORMAT",
    "SnapshotTable",
    "TRACE_URL_VARIABLE",
    "TraceEventStore",
    "event_from_entry",
    "event_to_draft",
    "record_to_event",
    "snapshot_table",
    "stored_state",
]
