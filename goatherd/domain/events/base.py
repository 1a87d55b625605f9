"""The base of the runtime's event vocabulary: typed events, strict decoding, facts.

A runtime event is a frozen dataclass that IS one trace record's content: its
class names the schema ref, mode and kind label; its fields are the payload.
:meth:`RuntimeEvent.payload` and :func:`decode_record` are exact inverses: an
event decoded from a record re-encodes to the same payload, so it digests to
the same record id. Payload keys the class does not declare are kept in
``extensions`` (the open-map extension model: another writer may add keys)
and re-emitted; an optional field present as an explicit ``null`` is kept
the same way.

Decoding is strict. A record of a registered schema whose mode or payload
does not fit the class raises :class:`RecordDecodeError` naming the record;
it is never folded as something else. Older shapes are upcast explicitly: an
upcaster registered for a retired schema ref turns the stored payload (and
the path it sits on) into the current class's payload before decoding.
Records of schemas nobody registered decode as :class:`OpaqueRecord`.

A :class:`PlacedEvent` is one decoded occurrence: the event plus where it sits (path,
ordinal, log position, append intent, record id).

Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final, TypeAlias

from goatherd.domain.errors import DomainError
from goatherd.domain.events.codec import _build, _encode, _MismatchError, _specs
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
    Record,
    RecordDraft,
    RecordMode,
)
from goatherd.domain.workspace import WorkspaceState

__all__ = [
    "OpaqueRecord",
    "PlacedEvent",
    "RUNTIME_ACTOR",
    "RecordDecodeError",
    "RuntimeEvent",
    "Upcaster",
    "decode_fact",
    "decode_payload",
    "event_class_for",
    "is_runtime_schema",
    "register_event",
    "register_upcaster",
    "runtime_schemas",
    "runtime_witness_body",
    "runtime_witness_ref",
    "schemas_of",
]

RUNTIME_ACTOR: Final = "runtime:internal"

Upcaster: TypeAlias = Callable[[Mapping[str, Any], str], dict[str, Any]]
"""``(stored payload, owner path) -> payload of the current class``."""

_EVENTS: dict[str, type[RuntimeEvent]] = {}
_UPCASTERS: dict[str, tuple[type[RuntimeEvent], Upcaster]] = {}


class RecordDecodeError(DomainError, ValueError):
    """A record of a known runtime schema does not decode to its event.

    The trace holds a record the runtime cannot fold (a wrong mode, a missing
    or mistyped payload key): it was written by something else, or edited.
    Folding stops here rather than skip the record.

    Attributes:
        record_id: the record.
        schema_ref: its schema ref.
        owner: the path it sits on (``""`` when not known).
        ordinal: its ordinal there (``-1`` when not known).
        reason: what does not fit.
    """

    def __init__(
        self, record_id: str, schema_ref: str, owner: str, ordinal: int, reason: str
    ) -> None:
        """Name the record, where it sits and what does not fit."""
        where = f" at {owner}#{ordinal}" if owner else ""
        super().__init__(
            f"record {record_id}{where} ({schema_ref}) does not decode: {reason}"
        )
        self.record_id = record_id
        self.schema_ref = schema_ref
        self.owner = owner
        self.ordinal = ordinal
        self.reason = reason


def runtime_witness_body() -> dict[str, object]:
    """Return the witness body of the runtime's trusted appends.

    The runtime appends with actor ``runtime:internal`` and the store's
    default retained context, so every runtime record cites this one witness.
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


@dataclass(frozen=True, kw_only=True)
class RuntimeEvent:
    """One runtime fact: a record's schema, mode, kind label and payload, typed.

    Subclasses set ``SCHEMA``, ``MODE`` and ``KIND_LABEL`` and declare the
    payload keys as fields (``field(metadata={"key": ...})`` names a key the
    field cannot be called); a field with a ``None`` default is an optional
    key (absent when ``None``), a ``X | None`` field without a default is a
    key that is always present and may be ``null``. ``WorkspaceState`` fields travel as
    ``{backend, revision, data}`` objects, tuples as JSON arrays.

    Attributes:
        caused_by: the record's ordered causal parents (record ids).
        extensions: payload keys the class does not declare, kept verbatim.
    """

    SCHEMA: ClassVar[str] = ""
    MODE: ClassVar[RecordMode] = RecordMode.CAPTURE
    KIND_LABEL: ClassVar[str] = ""

    caused_by: tuple[str, ...] = ()
    extensions: Mapping[str, Any] = field(default_factory=dict)

    @property
    def schema_ref(self) -> str:
        """The schema the event is recorded as."""
        return self.SCHEMA

    @property
    def mode(self) -> RecordMode:
        """The record mode."""
        return self.MODE

    @property
    def kind_label(self) -> str:
        """The kind label the runtime records it with."""
        return self.KIND_LABEL

    def payload(self) -> dict[str, Any]:
        """Return the record payload (``None`` fields left out, extensions kept)."""
        out: dict[str, Any] = {}
        for spec in _specs(type(self)):
            value = getattr(self, spec.name)
            if value is not None or spec.nullable:
                out[spec.key] = _encode(value)
        for key, value in self.extensions.items():
            out.setdefault(key, value)
        return out

    def contradiction(self) -> str | None:
        """Return how the event contradicts itself, or ``None`` when it does not.

        A field the event can recompute from its other fields (a digest of a
        state it carries, a count of a list it carries) must agree with them;
        decoding refuses an event that names one value and carries another.
        """
        return None

    def record_id(self) -> str:
        """Return the record id the runtime's append gives this event."""
        return record_digest(
            self.schema_ref,
            self.mode.value,
            self.payload(),
            self.caused_by,
            runtime_witness_ref(),
        )

    def draft(self) -> RecordDraft:
        """Return the kernel draft this event is appended as."""
        return RecordDraft(
            mode=self.mode.value,
            schema_ref=self.schema_ref,
            payload=self.payload(),
            kind_label=self.kind_label,
            caused_by_fact_ids=tuple(self.caused_by),
        )


@dataclass(frozen=True, kw_only=True)
class OpaqueRecord(RuntimeEvent):
    """A record of a schema no runtime event class knows (an agent's own facts).

    Attributes:
        record_schema: the stored schema ref.
        record_mode: the stored mode.
        record_kind_label: the stored kind label.
        record_payload: the stored payload.
    """

    record_schema: str
    record_mode: RecordMode
    record_kind_label: str
    record_payload: Mapping[str, Any]

    @property
    def schema_ref(self) -> str:
        """The stored schema ref."""
        return self.record_schema

    @property
    def mode(self) -> RecordMode:
        """The stored mode."""
        return self.record_mode

    @property
    def kind_label(self) -> str:
        """The stored kind label."""
        return self.record_kind_label

    def payload(self) -> dict[str, Any]:
        """Return the stored payload unchanged."""
        return dict(self.record_payload)


@dataclass(frozen=True, slots=True)
class PlacedEvent:
    """One decoded occurrence of a record on a path.

    Attributes:
        event: the typed event (an :class:`OpaqueRecord` for unknown schemas).
        record_id: the stored record id (authoritative).
        owner: the path the occurrence sits on.
        ordinal: its ordinal on that path.
        position: its store-global log position (``-1``: not in the log).
        intent: the append intent that placed it.
    """

    event: RuntimeEvent
    record_id: str
    owner: str
    ordinal: int
    position: int = -1
    intent: str = ""


# ------------------------------------------------------------------ registry


def register_event(cls: type[RuntimeEvent]) -> type[RuntimeEvent]:
    """Register ``cls`` under its ``SCHEMA`` (class decorator).

    Raises:
        ValueError: the class has no schema, or the schema is taken.
    """
    if not cls.SCHEMA:
        raise ValueError(f"{cls.__qualname__} has no SCHEMA")
    if cls.SCHEMA in _UPCASTERS or _EVENTS.get(cls.SCHEMA, cls) is not cls:
        raise ValueError(f"schema {cls.SCHEMA} is already registered")
    _specs(cls)  # fail at import time on an unsupported field type
    _EVENTS[cls.SCHEMA] = cls
    return cls


def register_upcaster(
    schema_ref: str, target: type[RuntimeEvent], upcast: Upcaster
) -> None:
    """Register ``upcast`` turning a retired ``schema_ref`` into ``target``.

    Raises:
        ValueError: the schema ref is registered already.
    """
    if schema_ref in _EVENTS or schema_ref in _UPCASTERS:
        raise ValueError(f"schema {schema_ref} is already registered")
    _UPCASTERS[schema_ref] = (target, upcast)


def event_class_for(schema_ref: str) -> type[RuntimeEvent] | None:
    """Return the class a record of ``schema_ref`` decodes to (upcast included)."""
    cls = _EVENTS.get(schema_ref)
    if cls is not None:
        return cls
    upcast = _UPCASTERS.get(schema_ref)
    return None if upcast is None else upcast[0]


def is_runtime_schema(schema_ref: str) -> bool:
    """Whether records of ``schema_ref`` decode to a runtime event (or upcast)."""
    return schema_ref in _EVENTS or schema_ref in _UPCASTERS


def schemas_of(classes: Collection[type[RuntimeEvent]]) -> frozenset[str]:
    """Return every schema ref, current or retired, that decodes to ``classes``."""
    wanted = set(classes)
    current = {schema for schema, cls in _EVENTS.items() if cls in wanted}
    retired = {schema for schema, (cls, _) in _UPCASTERS.items() if cls in wanted}
    return frozenset(current | retired)


def runtime_schemas() -> frozenset[str]:
    """Return every schema ref the runtime decodes, current and retired."""
    return frozenset(_EVENTS) | frozenset(_UPCASTERS)


# ------------------------------------------------------------------ decoding


def decode_fact(record: Record, position: int = -1, intent: str = "") -> PlacedEvent:
    """Decode one stored record occurrence (its ``view`` names the path).

    Raises:
        RecordDecodeError: a known schema whose mode or payload does not fit.
    """
    envelope = record.envelope
    view = record.view
    owner = view.trace_owner_id if view is not None else ""
    ordinal = view.owner_ordinal if view is not None else -1
    event = decode_payload(
        envelope.schema_ref,
        envelope.mode,
        record.payload,
        caused_by=envelope.caused_by_record_ids,
        kind_label=view.kind_label if view is not None else envelope.schema_ref,
        owner=owner,
        record_id=envelope.record_id,
        ordinal=ordinal,
    )
    return PlacedEvent(event, envelope.record_id, owner, ordinal, position, intent)


def decode_payload(
    schema_ref: str,
    mode: str,
    payload: Mapping[str, Any],
    *,
    caused_by: tuple[str, ...] = (),
    kind_label: str = "",
    owner: str = "",
    record_id: str = "",
    ordinal: int = -1,
) -> RuntimeEvent:
    """Decode a record's content into its event (strict; see the module docs).

    Raises:
        RecordDecodeError: a known schema whose mode or payload does not fit.
    """
    cls = _EVENTS.get(schema_ref)
    upcast = _UPCASTERS.get(schema_ref)
    if cls is None and upcast is None:
        return OpaqueRecord(
            caused_by=tuple(caused_by),
            record_schema=schema_ref,
            record_mode=RecordMode(mode),
            record_kind_label=kind_label or schema_ref,
            record_payload=dict(payload),
        )

    def fail(reason: str) -> RecordDecodeError:
        return RecordDecodeError(record_id, schema_ref, owner, ordinal, reason)

    if upcast is not None:
        cls, upcaster = upcast
        try:
            payload = upcaster(payload, owner)
        except (KeyError, TypeError, ValueError) as error:
            raise fail(f"cannot upcast the retired shape: {error}") from None
    assert cls is not None
    if mode != cls.MODE.value and upcast is None:
        raise fail(f"mode is {mode!r}, the schema is recorded as {cls.MODE.value!r}")
    try:
        event = _build(cls, payload, tuple(caused_by))
    except _MismatchError as error:
        raise fail(str(error)) from None
    contradiction = event.contradiction()
    if contradiction is not None:
        raise fail(contradiction)
    return event


def state_contradiction(
    name: str,
    state: WorkspaceState | None,
    digest: str,
    backend: str | None = None,
    revision: str | None = None,
) -> str | None:
    """Return how a recorded ``digest`` (and backend, revision) disagree with ``state``.

    ``name`` is the payload key of the state. Nothing is judged without a
    state, or with an empty digest (retired shapes recorded none).
    """
    if state is None:
        return None
    if digest and digest != state.digest():
        key = "state_digest" if name == "state" else f"{name}_digest"
        return f"payload.{key} is not the digest of payload.{name}"
    for key, value, recorded in (
        ("backend", backend, state.backend),
        ("revision", revision, state.revision),
    ):
        if value is not None and value != recorded:
            return f"payload.{key} is not payload.{name}.{key}"
    return None


def count_contradiction(count: int, items: Collection[object]) -> str | None:
    """Return how a recorded ``change_count`` disagrees with ``changes``."""
    if count != len(items):
        return f"payload.change_count is {count}, payload.changes holds {len(items)}"
    return None
