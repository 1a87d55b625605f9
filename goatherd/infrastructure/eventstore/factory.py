"""The eventsourcing persistence module over the kernel store.

Select it with ``PERSISTENCE_MODULE=goatherd.infrastructure.eventstore.factory``
and name the trace with ``GOATHERD_TRACE_URL`` (a SQLAlchemy URL or a path).
The application recorder is :class:`KernelRecorder` (the trace's global log is
the notification log). The tracking recorder keeps its rows in the projection
runner's ``projection_tracking`` table (one row per upstream name holding the
last processed LOG POSITION, i.e. notification id - 1), so a library process
and a goatherd projection agree on what a position means.

Not offered, by design (ADR 0011): a process recorder (the kernel's one
append path cannot commit a tracking row in the same transaction as a trace
batch) and aggregate recorders for other purposes (library snapshots would be
trace records; goatherd's snapshots are a cache table outside the trace).
"""

from __future__ import annotations

from typing import Final

from eventsourcing.persistence import (
    AggregateRecorder,
    ApplicationRecorder,
    InfrastructureFactory,
    InfrastructureFactoryError,
    IntegrityError,
    ProcessRecorder,
    Tracking,
    TrackingRecorder,
)
from eventsourcing.utils import Environment, EnvType, resolve_topic
from sqlalchemy import MetaData, insert, select, update

from goatherd.infrastructure.eventstore.recorder import (
    KernelAggregateRecorder,
    KernelRecorder,
)
from goatherd.infrastructure.projections.runner import tracking_table
from goatherd.infrastructure.store import SqlAlchemyTraceStore, open_trace_store

__all__ = [
    "KernelInfrastructureFactory",
    "KernelTrackingRecorder",
    "TRACE_URL_VARIABLE",
]

TRACE_URL_VARIABLE: Final = "GOATHERD_TRACE_URL"
_METADATA: Final = MetaData()
_TRACKING: Final = tracking_table(_METADATA)


class KernelTrackingRecorder(TrackingRecorder):
    """Tracking rows in ``projection_tracking`` of the trace's database."""

    def __init__(self, store: SqlAlchemyTraceStore) -> None:
        self.store = store
        with store.transaction() as conn:
            _TRACKING.create(conn, checkfirst=True)

    def insert_tracking(self, tracking: Tracking) -> None:
        """Record that ``tracking.notification_id`` was processed (only forward)."""
        name = tracking.application_name
        position = tracking.notification_id - 1
        with self.store.transaction() as conn:
            current = conn.execute(
                select(_TRACKING.c.position).where(_TRACKING.c.name == name)
            ).scalar_one_or_none()
            if current is None:
                conn.execute(
                    insert(_TRACKING).values(name=name, version=0, position=position)
                )
                return
            if int(current) >= position:
                raise IntegrityError(
                    f"tracking {name!r} is already at notification {int(current) + 1},"
                    f" cannot record {tracking.notification_id}"
                )
            conn.execute(
                update(_TRACKING)
                .where(_TRACKING.c.name == name)
                .values(position=position)
            )

    def max_tracking_id(self, application_name: str) -> int | None:
        """Return the highest processed notification id of ``application_name``."""
        with self.store.engine.connect() as conn:
            value = conn.execute(
                select(_TRACKING.c.position).where(_TRACKING.c.name == application_name)
            ).scalar_one_or_none()
        return None if value is None else int(value) + 1


class KernelInfrastructureFactory(InfrastructureFactory[KernelTrackingRecorder]):
    """Recorders over the kernel store named by ``GOATHERD_TRACE_URL``."""

    def __init__(self, env: Environment | EnvType | None) -> None:
        super().__init__(env)
        url = self.env.get(TRACE_URL_VARIABLE)
        if not url:
            raise InfrastructureFactoryError(
                f"set {TRACE_URL_VARIABLE} to the trace store's URL or path"
            )
        self._store = open_trace_store(url)

    @property
    def store(self) -> SqlAlchemyTraceStore:
        """The trace store the recorders write to."""
        return self._store

    def aggregate_recorder(self, purpose: str = "events") -> AggregateRecorder:
        if purpose != "events":
            raise InfrastructureFactoryError(
                f"no {purpose!r} recorder: the trace holds events only; goatherd's"
                " snapshots are a cache table outside it (ADR 0011)"
            )
        return KernelAggregateRecorder(self._store)

    def application_recorder(self) -> ApplicationRecorder:
        return KernelRecorder(self._store)

    def tracking_recorder(
        self, tracking_recorder_class: type[KernelTrackingRecorder] | None = None
    ) -> KernelTrackingRecorder:
        if tracking_recorder_class is None:
            topic = self.env.get(self.TRACKING_RECORDER_TOPIC)
            tracking_recorder_class = (
                resolve_topic(topic) if topic else KernelTrackingRecorder
            )
        assert tracking_recorder_class is not None
        return tracking_recorder_class(self._store)

    def process_recorder(self) -> ProcessRecorder:
        raise InfrastructureFactoryError(
            "no process recorder: the kernel store commits a trace batch through"
            " its one append path, which cannot include a tracking row (ADR 0011)"
        )

    def close(self) -> None:
        self._store.close()
