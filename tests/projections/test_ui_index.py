"""The UI index row: its hand-assembled JSON equals ``json.dumps`` of the object."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from goatherd.domain import LogEntry, Record, RecordBody, RecordDraft, RecordView
from goatherd.projections import ui_entry, ui_record_json, ui_record_object
from tests.projections.slices import make_record

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=12,
)
payloads = st.dictionaries(st.text(max_size=8), json_values, max_size=5)
names = st.text(min_size=1, max_size=12)


def _reference(record: Record, position: int | None, intent: str) -> str:
    obj = ui_record_object(record, position=position, intent=intent)
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


@given(
    payloads,
    names,
    st.integers(0, 2**40),
    st.text(max_size=12),
    st.one_of(st.none(), st.integers(0, 2**40)),
    st.lists(st.text(max_size=8), max_size=3),
)
def test_the_assembled_json_is_byte_identical_to_json_dumps(
    payload, owner, ordinal, intent, position, parents
) -> None:
    record = make_record(
        RecordDraft("capture", "app.\u00e9v\u00e9nement.v1", payload),
        owner,
        ordinal,
        tuple(parents),
    )
    assert ui_record_json(record, position=position, intent=intent) == _reference(
        record, position, intent
    )


def test_a_record_without_a_view_and_with_a_kind_label_encode_alike() -> None:
    record = make_record(RecordDraft("declaration", "app.x.v1", {"k": [1]}), "o", 3)
    bare = Record(record.envelope, record.body)
    assert ui_record_json(bare, position=None) == _reference(bare, None, "")
    labelled = Record(
        record.envelope, record.body, RecordView("o:\u2603", 3, "", "label")
    )
    text = ui_record_json(labelled, position=7, intent="i")
    assert text == _reference(labelled, 7, "i")
    assert json.loads(text)["kind"] == "label"


def test_an_erased_record_shows_redacted_by_and_encodes_alike() -> None:
    record = make_record(RecordDraft("capture", "app.z.v1", {"k": "v"}), "o", 1)
    erased = Record(
        record.envelope, RecordBody({}, redacted_by="sha256:" + "ab" * 32), record.view
    )
    text = ui_record_json(erased, position=2, intent="i")
    assert text == _reference(erased, 2, "i")
    shown = json.loads(text)
    assert shown["payload"] == {}
    assert shown["redacted_by"] == "sha256:" + "ab" * 32


def test_the_index_row_carries_the_entry_columns_and_its_json() -> None:
    record = make_record(RecordDraft("capture", "app.y.v1", {"n": 1}), "root:a", 4)
    row = ui_entry(LogEntry(12, "intent-1", record))
    assert (row.position, row.owner, row.ordinal, row.mode) == (
        12,
        "root:a",
        4,
        "capture",
    )
    assert (row.record_id, row.schema_ref) == (record.record_id, "app.y.v1")
    assert json.loads(row.record_json) == ui_record_object(
        record, position=12, intent="intent-1"
    )
