"""The event-sourcing base of the runtime aggregates: one aggregate, one owner path.

An aggregate's id is its owner path and its version is the ordinal of the last
record on that path (0-based, so a path with ``n`` records folds to version
``n - 1`` and its head, the next ordinal, is ``version + 1``). Every event class
names the schema it is persisted as (``TOPIC``), its record mode, its kind label
and whether it is a SHARED fact (one record placed on several aggregates' paths
in the same batch). The payload is the event's own fields; ``None`` fields are
left out, so optional schema keys stay absent rather than ``null``.

Records no event class knows (an agent's tool calls appended with
``append_fact``) fold as :class:`RecordAppended`, which only advances the
version, so optimistic concurrency covers every writer of a path.

Timestamps are not part of the trace: every event carries the fixed
:data:`TRACE_EPOCH`, so a fold from the trace equals the live aggregate.

Pure: no I/O, no clock, no randomness.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from enum import Enum
from functools import cached_property
from typing import ClassVar, Final, Self, TypeVar

from eventsourcing.domain import (
    BaseAggregate,
    CanMutateAggregate,
    MetaDomainEvent,
)
from eventsourcing.utils import register_topic

from goatherd.domain.identity import (
    WITNESS_SCHEMA_REF,
    record_digest,
    root_witness_record_id,
)
from goatherd.domain.records import (
    CAPTURE,
    DEFAULT_CONTAINMENT,
    DEFAULT_SCHEMA_ENVIRONMENT,
    DEFAULT_SUBSTRATE_REF,
    RecordMode,
)
from goatherd.domain.workspace import WorkspaceState

__all__ = [
    "RUNTIME_ACTOR",
    "RecordAppended",
    "TRACE_EPOCH",
    "TraceAggregate",
    "TraceEvent",
    "event_class_for_schema",
    "register_trace_event",
    "runtime_witness_body",
    "runtime_witness_ref",
]

TRACE_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
RUNTIME_ACTOR: Final = "runtime:internal"
_BASE_FIELDS: Final = frozenset(
    {"originator_id", "originator_version", "timestamp", "caused_by"}
)
_EVENT_CLASSES: dict[str, type[TraceEvent]] = {}


def runtime_witness_body() -> dict[str, object]:
    """Return the witness body of the runtime's trusted appends (kernel-spec 3.4).

    The runtime appends with actor ``runtime:internal`` and the store's default
    retained context, so every runtime record cites this one witness.
    """
    return {
        "active_binding_refs": [],
        "actor_ref": RUNTIME_ACTOR,
        "authority_refs": [],
        "containment": DEFAULT_CONTAINMENT,
        "provenance_policy_refs": [],
        "semantic_environment_refs": [DEFAULT_SCHEMA_ENVIRONMENT],
        "substrate_ref": DEFAULT_SUBSTRATE_REF,
        "visibility_policy_refs": [],
    }


_RUNTIME_WITNESS_REF: Final = record_digest(
    WITNESS_SCHEMA_REF, CAPTURE, runtime_witness_body(), (), root_witness_record_id()
)


def runtime_witness_ref() -> str:
    """Return the record id of the runtime's witness (what its records cite)."""
    return _RUNTIME_WITNESS_REF


@dataclasses.dataclass(frozen=True)
class TraceEvent(CanMutateAggregate[str], metaclass=MetaDomainEvent):
    """A fact about one aggregate, persisted as one kernel record.

    Attributes:
        originator_id: the owner path the event is placed on.
        originator_version: its ordinal on that path.
        timestamp: always :data:`TRACE_EPOCH` (records carry no wall clock).
        caused_by: the record's ordered causal parents (record ids).
    """

    TOPIC: ClassVar[str] = ""
    MODE: ClassVar[RecordMode] = RecordMode.CAPTURE
    KIND_LABEL: ClassVar[str] = ""
    SHARED: ClassVar[bool] = False

    originator_id: str
    originator_version: int
    timestamp: datetime
    _: dataclasses.KW_ONLY
    caused_by: tuple[str, ...] = ()

    @staticmethod
    def create_timestamp() -> datetime:
        """Return :data:`TRACE_EPOCH`: trace records carry no wall-clock time."""
        return TRACE_EPOCH

    @property
    def schema_ref(self) -> str:
        """The schema the event is persisted as."""
        return self.TOPIC

    @property
    def mode(self) -> RecordMode:
        """The record mode (capture or declaration)."""
        return self.MODE

    @property
    def kind_label(self) -> str:
        """The record's kind label."""
        return self.KIND_LABEL

    def payload(self) -> dict[str, object]:
        """Return the record payload: the event's own fields, ``None`` left out."""
        return {
            f.name: getattr(self, f.name)
            for f in dataclasses.fields(self)
            if f.name not in _BASE_FIELDS and getattr(self, f.name) is not None
        }

    @cached_property
    def record_id(self) -> str:
        """Return the kernel record id the runtime's append gives this event."""
        return record_digest(
            self.schema_ref,
            self.mode,
            self.payload(),
            self.caused_by,
            runtime_witness_ref(),
        )

    def apply(self, aggregate: object) -> None:
        """Evolve ``aggregate`` (pure): delegate to its ``evolve`` method."""
        assert isinstance(aggregate, TraceAggregate)
        aggregate.evolve(self)

    def placed_on(self, owner: str, version: int) -> Self:
        """Return this fact re-addressed to another aggregate's path."""
        return dataclasses.replace(
            self, originator_id=owner, originator_version=version
        )


class RecordAppended(TraceEvent):
    """A record no aggregate knows; it only advances the path's version.

    Attributes:
        record_schema: the record's schema ref.
        record_mode: the record's mode.
        record_kind_label: the record's kind label.
        record_payload: the record's payload.
    """

    record_schema: str
    record_mode: str
    record_kind_label: str
    record_payload: Mapping[str, object]

    @property
    def schema_ref(self) -> str:
        """The stored schema ref."""
        return self.record_schema

    @property
    def mode(self) -> RecordMode:
        """The stored record mode."""
        return RecordMode(self.record_mode)

    @property
    def kind_label(self) -> str:
        """The stored kind label."""
        return self.record_kind_label

    def payload(self) -> dict[str, object]:
        """Return the stored payload unchanged."""
        return dict(self.record_payload)


TAgg = TypeVar("TAgg", bound="TraceAggregate")


class TraceAggregate(BaseAggregate[str]):
    """An aggregate whose stream is one owner path of the trace.

    Aggregates start *bare* (:meth:`bare`, version ``-1``) and every record on
    their path, including the first, is a mutation; a bare aggregate is what an
    empty path folds to.
    """

    INITIAL_VERSION = 0
    SNAPSHOT_VERSION: ClassVar[int] = 1
    """Bump when the fold changes: older snapshots then stop matching."""

    class Event(TraceEvent):
        """Base of the aggregate's events."""

    @classmethod
    def bare(cls, owner: str) -> Self:
        """Return the aggregate an empty owner path folds to."""
        agg = cls.__new__(cls)
        agg.__base_init__(
            originator_id=owner, originator_version=-1, timestamp=TRACE_EPOCH
        )
        agg.init_state()
        return agg

    @classmethod
    def fold(cls, initial: Self | None, events: Iterable[object]) -> Self | None:
        """Fold ``events`` onto ``initial`` (or a bare aggregate); a projector."""
        agg = initial
        for event in events:
            assert isinstance(event, TraceEvent)
            if agg is None:
                agg = cls.bare(event.originator_id)
            event.mutate(agg)
        return agg

    def __eq__(self, other: object) -> bool:
        """Compare state and version; pending (unsaved) events do not count."""
        if type(self) is not type(other):
            return False
        assert isinstance(other, TraceAggregate)
        return self.state_dict() == other.state_dict()

    __hash__ = None  # type: ignore[assignment]

    def state_dict(self) -> dict[str, object]:
        """Return the folded state (id, version and fields; no pending events)."""
        return {k: v for k, v in vars(self).items() if k != "_pending_events"}

    def clone(self) -> Self:
        """Return an independent copy of the folded state (no pending events).

        Containers (lists, dicts) are copied one level deep; their items are
        immutable values or plain records the fold never mutates in place.
        """
        twin = copy.copy(self)
        for key, value in vars(self).items():
            if isinstance(value, list):
                setattr(twin, key, list(value))
            elif isinstance(value, dict):
                setattr(twin, key, dict(value))
        twin._pending_events = []
        return twin

    def snapshot_state(self) -> dict[str, object]:
        """Return the folded fields as JSON-able values (a rebuildable cache).

        Enums become their values and workspace states their JSON; the
        version and id travel beside it. :meth:`from_snapshot` reverses it.
        """
        out: dict[str, object] = {}
        for key, value in vars(self).items():
            if key.startswith("_"):
                continue
            out[key] = _snapshot_value(value)
        return out

    @classmethod
    def from_snapshot(
        cls, owner: str, version: int, state: Mapping[str, object]
    ) -> Self:
        """Return the aggregate a :meth:`snapshot_state` at ``version`` describes.

        Raises:
            ValueError: the snapshot does not describe this class's fields.
        """
        agg = cls.bare(owner)
        fields = {k for k in vars(agg) if not k.startswith("_")}
        if set(state) != fields:
            raise ValueError(f"snapshot fields {sorted(state)} != {sorted(fields)}")
        for key, value in state.items():
            setattr(agg, key, cls.decode_snapshot_field(key, value))
        agg.version = version
        return agg

    @classmethod
    def decode_snapshot_field(cls, name: str, value: object) -> object:
        """Decode one snapshot field (subclasses decode their enums and states)."""
        del name
        return value

    def pending(self) -> list[TraceEvent]:
        """Return the unsaved events, typed (the library types them loosely)."""
        return [e for e in self.pending_events if isinstance(e, TraceEvent)]

    @property
    def head(self) -> int:
        """The owner path's next ordinal (what an append must find there)."""
        return self.version + 1

    def init_state(self) -> None:
        """Set the fields of a bare aggregate (subclasses extend)."""

    def evolve(self, event: TraceEvent) -> None:
        """Apply ``event`` to the state (pure and total; unknown events do nothing)."""

    def record(self, event_class: type[TraceEvent], **fields: object) -> TraceEvent:
        """Trigger an event on this aggregate and return it."""
        self.trigger_event(event_class, **fields)
        event = self.pending_events[-1]
        assert isinstance(event, TraceEvent)
        return event

    def place(self, event: TraceEvent) -> None:
        """Place a shared fact (recorded on another aggregate) on this path too."""
        placed = event.placed_on(self.id, self.version + 1)
        placed.mutate(self)
        self.pending_events.append(placed)


def _snapshot_value(value: object) -> object:
    if isinstance(value, WorkspaceState):
        return value.to_json()
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, list):
        return [_snapshot_value(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _snapshot_value(v) for k, v in value.items()}
    return value


def register_trace_event(cls: type[TraceEvent]) -> type[TraceEvent]:
    """Register ``cls`` under its schema ref (class decorator).

    Raises:
        ValueError: when the class has no ``TOPIC`` or the topic is taken.
    """
    if not cls.TOPIC:
        raise ValueError(f"{cls.__qualname__} has no TOPIC")
    existing = _EVENT_CLASSES.get(cls.TOPIC)
    if existing is not None and existing is not cls:
        raise ValueError(f"schema {cls.TOPIC} is already registered")
    _EVENT_CLASSES[cls.TOPIC] = cls
    register_topic(cls.TOPIC, cls)
    return cls


def event_class_for_schema(schema_ref: str) -> type[TraceEvent] | None:
    """Return the event class registered for ``schema_ref``, if any."""
    return _EVENT_CLASSES.get(schema_ref)
