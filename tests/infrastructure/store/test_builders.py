"""The read path's slot builders give the very values the constructors give."""

from __future__ import annotations

import dataclasses
import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st

from goatherd.domain import LogEntry, Record, RecordBody, RecordEnvelope, RecordView
from goatherd.infrastructure.store.builders import (
    build_body,
    build_envelope,
    build_log_entry,
    build_record,
    build_view,
    slot_builder,
)

_TEXT = st.text(max_size=20)


@given(
    ids=st.tuples(_TEXT, _TEXT, _TEXT, _TEXT, _TEXT),
    parents=st.lists(_TEXT, max_size=3).map(tuple),
    payload=st.dictionaries(_TEXT, st.integers(), max_size=3),
    redacted=st.none() | _TEXT,
    owner=_TEXT,
    ordinal=st.integers(min_value=0),
    context=_TEXT,
    kind=_TEXT,
    position=st.integers(min_value=-1),
    intent=_TEXT,
)
def test_a_built_entry_equals_and_hashes_as_the_constructed_one(
    ids: tuple[str, str, str, str, str],
    parents: tuple[str, ...],
    payload: dict[str, int],
    redacted: str | None,
    owner: str,
    ordinal: int,
    context: str,
    kind: str,
    position: int,
    intent: str,
) -> None:
    envelope = RecordEnvelope(*ids, caused_by_record_ids=parents)
    body = RecordBody(payload=payload, redacted_by=redacted)
    view = RecordView(owner, ordinal, context, kind)
    record = Record(envelope=envelope, body=body, view=view)
    entry = LogEntry(position=position, append_intent_id=intent, record=record)

    built = build_log_entry(
        position,
        intent,
        build_record(
            build_envelope(*ids, parents),
            build_body(payload, redacted),
            build_view(owner, ordinal, context, kind),
        ),
    )

    assert built == entry
    assert type(built) is LogEntry
    assert type(built.record.view) is RecordView
    assert hash(built.record.envelope) == hash(envelope)
    assert hash(built.record.view) == hash(view)
    assert pickle.loads(pickle.dumps(built)) == entry


def test_a_built_value_stays_frozen() -> None:
    view = build_view("o", 1, "c", "k")
    with pytest.raises(dataclasses.FrozenInstanceError):
        view.kind_label = "other"  # type: ignore[misc]


def test_the_builder_refuses_what_it_cannot_build_faithfully() -> None:
    @dataclasses.dataclass(slots=True)
    class Mutable:
        value: int

    @dataclasses.dataclass(frozen=True)
    class Unslotted:
        value: int

    @dataclasses.dataclass(frozen=True, slots=True)
    class Checked:
        value: int

        def __post_init__(self) -> None:
            if self.value < 0:
                raise ValueError("negative")

    with pytest.raises(TypeError, match="Mutable is not a frozen, slotted"):
        slot_builder(Mutable)
    with pytest.raises(TypeError, match="Unslotted is not a frozen, slotted"):
        slot_builder(Unslotted)
    with pytest.raises(TypeError, match="Checked has a __post_init__"):
        slot_builder(Checked)
    with pytest.raises(TypeError, match="int is not a frozen, slotted"):
        slot_builder(int)


def test_a_builder_takes_every_field_and_no_other() -> None:
    with pytest.raises(TypeError):
        build_view("o", 1, "c")
    with pytest.raises(TypeError):
        build_view("o", 1, "c", "k", "extra")
