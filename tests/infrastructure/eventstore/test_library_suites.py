"""The eventsourcing library's recorder suites against the kernel store.

Adjustments, each because of a property of the trace (ADR 0011):
- originator ids are owner paths (strings), so ids are made as text;
- versions are path ordinals, which start at 0 (``INITIAL_VERSION = 0``);
- there is no process recorder: its test asserts the refusal instead;
- the throughput tests are skipped (timing belongs in ``bench/``).
"""

from __future__ import annotations

import os
import tempfile
import uuid
from typing import ClassVar

import pytest
from eventsourcing.persistence import (
    InfrastructureFactory,
    InfrastructureFactoryError,
    ProcessRecorder,
)
from eventsourcing.tests.persistence import (
    AggregateRecorderTestCase,
    ApplicationRecorderTestCase,
    InfrastructureFactoryTestCase,
    TrackingRecorderTestCase,
)
from eventsourcing.utils import Environment

from goatherd.infrastructure.eventstore import (
    KernelAggregateRecorder,
    KernelInfrastructureFactory,
    KernelRecorder,
    KernelTrackingRecorder,
)
from goatherd.infrastructure.store import SQLiteTraceStore

MODULE = "goatherd.infrastructure.eventstore.factory"


class _TraceFile:
    INITIAL_VERSION = 0
    _stores: ClassVar[list[SQLiteTraceStore]] = []

    def new_originator_id(self) -> str:
        return f"es:{uuid.uuid4()}"

    def trace(self) -> SQLiteTraceStore:
        self._dir = tempfile.TemporaryDirectory()
        store = SQLiteTraceStore(os.path.join(self._dir.name, "trace.db"))
        self._stores.append(store)
        return store

    def tearDown(self) -> None:
        while self._stores:
            self._stores.pop().close()
        if hasattr(self, "_dir"):
            self._dir.cleanup()


class TestKernelAsAggregateRecorder(_TraceFile, AggregateRecorderTestCase):
    def create_recorder(self) -> KernelAggregateRecorder:
        return KernelAggregateRecorder(self.trace())

    @pytest.mark.skip(reason="timing belongs in bench/")
    def test_performance(self) -> None:
        """Skipped."""


class TestKernelAsApplicationRecorder(_TraceFile, ApplicationRecorderTestCase):
    def create_recorder(self) -> KernelRecorder:
        return KernelRecorder(self.trace(), poll_interval=0.01)

    @pytest.mark.skip(reason="timing belongs in bench/")
    def test_performance(self) -> None:
        """Skipped."""

    @pytest.mark.skip(reason="timing belongs in bench/")
    def test_concurrent_throughput(self) -> None:
        """Skipped."""


class TestKernelTrackingRecorder(_TraceFile, TrackingRecorderTestCase):
    def create_recorder(self) -> KernelTrackingRecorder:
        return KernelTrackingRecorder(self.trace())


class _TrackingSubclass(KernelTrackingRecorder):
    pass


class TestKernelInfrastructureFactory(
    InfrastructureFactoryTestCase[KernelInfrastructureFactory]
):
    def setUp(self) -> None:
        self._dir = tempfile.TemporaryDirectory()
        self.env = Environment(
            "TestApp",
            {
                "PERSISTENCE_MODULE": MODULE,
                "GOATHERD_TRACE_URL": os.path.join(self._dir.name, "trace.db"),
            },
        )
        super().setUp()

    def tearDown(self) -> None:
        super().tearDown()
        self._dir.cleanup()

    def expected_factory_class(self) -> type[KernelInfrastructureFactory]:
        return KernelInfrastructureFactory

    def expected_aggregate_recorder_class(self) -> type[KernelAggregateRecorder]:
        return KernelAggregateRecorder

    def expected_application_recorder_class(self) -> type[KernelRecorder]:
        return KernelRecorder

    def expected_tracking_recorder_class(self) -> type[KernelTrackingRecorder]:
        return KernelTrackingRecorder

    def tracking_recorder_subclass(self) -> type[KernelTrackingRecorder]:
        return _TrackingSubclass

    def expected_process_recorder_class(self) -> type[ProcessRecorder]:
        raise AssertionError("no process recorder (ADR 0011)")

    def test_create_process_recorder(self) -> None:
        with pytest.raises(InfrastructureFactoryError, match="no process recorder"):
            self.factory.process_recorder()


def test_the_module_is_found_through_persistence_module(tmp_path):
    env = {"PERSISTENCE_MODULE": MODULE, "GOATHERD_TRACE_URL": str(tmp_path / "t.db")}
    factory = InfrastructureFactory.construct(env)
    try:
        assert isinstance(factory, KernelInfrastructureFactory)
    finally:
        factory.close()


def test_a_missing_trace_url_is_a_clear_error():
    with pytest.raises(InfrastructureFactoryError, match="GOATHERD_TRACE_URL"):
        InfrastructureFactory.construct({"PERSISTENCE_MODULE": MODULE})


def test_a_library_application_saves_and_reads_through_the_trace(tmp_path):
    from eventsourcing.application import Application
    from eventsourcing.domain import Aggregate, event

    class Dog(Aggregate):
        INITIAL_VERSION = 0  # versions are path ordinals (ADR 0011)

        @event("Registered")
        def __init__(self, name: str) -> None:
            self.name = name
            self.tricks: list[str] = []

        @event("TrickAdded")
        def add_trick(self, trick: str) -> None:
            self.tricks.append(trick)

    env = {"PERSISTENCE_MODULE": MODULE, "GOATHERD_TRACE_URL": str(tmp_path / "t.db")}
    app = Application[uuid.UUID](env=env)
    try:
        dog = Dog("fido")
        dog.add_trick("roll over")
        app.save(dog)
        again: Dog = app.repository.get(dog.id)
        assert (again.name, again.tricks) == ("fido", ["roll over"])
        items = app.notification_log.select(start=1, limit=10)
        assert [n.originator_version for n in items] == [0, 1]
        assert [n.originator_id for n in items] == [str(dog.id)] * 2
    finally:
        app.close()
