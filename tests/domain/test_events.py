"""The runtime's event vocabulary: one strict, exact decoder per schema.

Properties over every registered event class: an event re-encodes to the
payload it was decoded from (so to the same record id), extra keys survive,
and a payload that does not fit (a missing key, a wrong type, a wrong mode)
is an error naming the record, never a silent fallback.
"""

from __future__ import annotations

import dataclasses
import pathlib
import re
import typing
from collections.abc import Mapping
from enum import Enum
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from goatherd.domain import (
    CheckpointCreated,
    ExecutionCompleted,
    ExecutionCreated,
    ExecutionFailed,
    ExecutionRelationCreated,
    ExecutionStarted,
    FactPublished,
    OpaqueRecord,
    RecordDecodeError,
    RecordMode,
    RuntimeEvent,
    ScopeForked,
    WorkspaceApplied,
    WorkspaceCaptured,
    WorkspaceState,
    decode_payload,
    event_class_for,
    is_runtime_schema,
    runtime_schemas,
)
from goatherd.domain.events.base import _EVENTS, _UPCASTERS

CLASSES = sorted(_EVENTS.values(), key=lambda cls: cls.SCHEMA)
TEXT = st.text(st.characters(exclude_categories=["Cs"]), max_size=12)
SCALARS = st.none() | st.booleans() | st.integers(-(2**53), 2**53) | TEXT
JSON = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3)
    ),
    max_leaves=6,
)
STATES = st.builds(
    WorkspaceState,
    backend=TEXT.filter(bool),
    revision=TEXT,
    data=st.none() | st.dictionaries(TEXT, TEXT, max_size=3),
)


def strategy_for(hint: Any) -> st.SearchStrategy[Any]:
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if len(args) == 1 and typing.get_origin(hint) in (typing.Union, type(int | None)):
        return st.none() | strategy_for(args[0])
    if hint is str:
        return TEXT
    if hint is bool:
        return st.booleans()
    if hint is int:
        return st.integers(-(2**53), 2**53)
    if hint is WorkspaceState:
        return STATES
    if hint is Any:
        return JSON
    if isinstance(hint, type) and issubclass(hint, Enum):
        return st.sampled_from(list(hint))
    origin = typing.get_origin(hint)
    if origin is tuple:
        return st.lists(strategy_for(hint.__args__[0]), max_size=3).map(tuple)
    if origin is Mapping:
        value = TEXT if hint.__args__[1] is str else JSON
        return st.dictionaries(TEXT, value, max_size=3)
    raise AssertionError(f"no strategy for {hint!r}")


def fields_of(cls: type[RuntimeEvent]) -> dict[str, Any]:
    hints = typing.get_type_hints(cls)
    return {
        f.name: hints[f.name]
        for f in dataclasses.fields(cls)
        if f.name not in ("caused_by", "extensions")
    }


def consistent(event: RuntimeEvent) -> RuntimeEvent:
    """Set the fields an event recomputes from its others to agree with them."""
    names = {f.name for f in dataclasses.fields(event)}
    fixed: dict[str, Any] = {}
    state = getattr(event, "state", None)
    if state is not None and "state_digest" in names:
        fixed.update(
            state_digest=state.digest(), backend=state.backend, revision=state.revision
        )
    baseline = getattr(event, "baseline", None)
    if baseline is not None and "baseline_digest" in names:
        fixed["baseline_digest"] = baseline.digest()
    if "change_count" in names and "changes" in names:
        fixed["change_count"] = len(getattr(event, "changes"))  # noqa: B009
    return dataclasses.replace(event, **fixed)


def events_of(cls: type[RuntimeEvent]) -> st.SearchStrategy[RuntimeEvent]:
    specs = {name: strategy_for(hint) for name, hint in fields_of(cls).items()}
    parents = st.lists(TEXT, max_size=2).map(tuple)
    return st.builds(cls, caused_by=parents, **specs).map(consistent)


ANY_EVENT = st.sampled_from(CLASSES).flatmap(events_of)


def decode(event_or_payload: Any, cls: type[RuntimeEvent] | None = None) -> Any:
    if isinstance(event_or_payload, RuntimeEvent):
        event = event_or_payload
        return decode_payload(
            event.SCHEMA, event.MODE.value, event.payload(), caused_by=event.caused_by
        )
    assert cls is not None
    return decode_payload(cls.SCHEMA, cls.MODE.value, event_or_payload)


@settings(max_examples=300)
@given(ANY_EVENT)
def test_an_event_decodes_back_to_itself_and_keeps_its_record_id(event):
    again = decode(event)
    assert again == event
    assert again.payload() == event.payload()
    assert again.record_id() == event.record_id()


@given(ANY_EVENT, st.dictionaries(TEXT.map(lambda k: "x-" + k), JSON, min_size=1))
def test_keys_the_class_does_not_declare_are_kept_and_re_emitted(event, extra):
    payload = {**event.payload(), **extra}
    again = decode_payload(event.SCHEMA, event.MODE.value, payload)
    assert dict(again.extensions) == extra
    assert again.payload() == payload


@given(ANY_EVENT, st.data())
def test_a_missing_required_key_is_an_error_naming_the_key(event, data):
    payload = event.payload()
    required = [
        f.metadata.get("key", f.name)
        for f in dataclasses.fields(event)
        if f.name not in ("caused_by", "extensions")
        and f.default is not None
        and f.default_factory is dataclasses.MISSING
    ]
    if not required:
        return
    key = data.draw(st.sampled_from(required))
    del payload[key]
    with pytest.raises(RecordDecodeError, match=re.escape(f"payload.{key} is missing")):
        decode(payload, type(event))


WRONG = {
    str: 7,
    int: "7",
    bool: 1,
    WorkspaceState: {"backend": "b"},
}


@given(ANY_EVENT, st.data())
def test_a_value_of_the_wrong_type_is_an_error_naming_the_key(event, data):
    typed = {
        name: hint
        for name, hint in fields_of(type(event)).items()
        if strip(hint) in WRONG
    }
    if not typed:
        return
    name = data.draw(st.sampled_from(sorted(typed)))
    payload = event.payload()
    payload[name] = WRONG[strip(typed[name])]
    with pytest.raises(RecordDecodeError, match=re.escape(f"payload.{name}")):
        decode(payload, type(event))


def strip(hint: Any) -> Any:
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    return args[0] if len(args) == 1 else hint


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.SCHEMA)
def test_a_known_schema_in_the_wrong_mode_is_an_error(cls):
    other = (
        RecordMode.CAPTURE
        if cls.MODE is RecordMode.DECLARATION
        else RecordMode.DECLARATION
    )
    with pytest.raises(RecordDecodeError, match="the schema is recorded as"):
        decode_payload(cls.SCHEMA, other.value, {}, record_id="sha256:r", owner="o")


def test_the_error_names_the_record_its_path_and_ordinal():
    with pytest.raises(RecordDecodeError) as caught:
        decode_payload(
            ScopeForked.SCHEMA,
            "declaration",
            {"child_owner": 5},
            record_id="sha256:abc",
            owner="agent:main",
            ordinal=3,
        )
    message = str(caught.value)
    assert "sha256:abc" in message
    assert "agent:main#3" in message
    assert "payload.child_owner must be a string, got an integer" in message


def test_an_explicit_null_for_an_optional_key_round_trips():
    payload = {"child_owner": "c", "parent_owner": None}
    event = decode_payload(ScopeForked.SCHEMA, "declaration", payload)
    assert isinstance(event, ScopeForked)
    assert event.parent_owner is None
    assert event.payload() == payload


def test_an_unknown_schema_is_an_opaque_record():
    event = decode_payload("app.tool.bash.v1", "declaration", {"cmd": "ls"})
    assert isinstance(event, OpaqueRecord)
    assert event.payload() == {"cmd": "ls"}
    assert not is_runtime_schema("app.tool.bash.v1")


class TestRetiredShapes:
    def test_every_retired_schema_reads_as_a_current_event(self):
        assert _UPCASTERS
        for schema, (target, _) in _UPCASTERS.items():
            assert event_class_for(schema) is target
            assert schema in runtime_schemas()

    def test_the_shepherd_prefix_reads_as_the_goatherd_event(self):
        payload = {"child_owner": "c"}
        event = decode_payload("shepherd.scope.forked.v1", "declaration", payload)
        assert event == ScopeForked(child_owner="c")

    @pytest.mark.parametrize("prefix", ["goatherd.", "shepherd."])
    def test_a_v1_checkpoint_reads_as_a_git_checkpoint_without_digests(self, prefix):
        payload = {
            "checkpoint_id": "cp:a:1",
            "stash_sha": "s" * 40,
            "head_sha": "h" * 40,
            "has_snapshot": False,
        }
        event = decode_payload(f"{prefix}checkpoint.created.v1", "declaration", payload)
        assert isinstance(event, CheckpointCreated)
        assert (event.backend, event.revision, event.state_digest) == (
            "git",
            "h" * 40,
            "",
        )
        assert event.snapshot_digest is None
        assert event.state is None
        assert event.extensions["stash_sha"] == "s" * 40

    @pytest.mark.parametrize(
        ("schema", "cls"),
        [
            ("goatherd.tree.captured.v1", WorkspaceCaptured),
            ("goatherd.tree.applied.v1", WorkspaceApplied),
        ],
    )
    def test_a_git_tree_record_reads_as_a_workspace_record(self, schema, cls):
        event = decode_payload(schema, "capture", {"head_sha": "h", "stash_sha": "s"})
        assert isinstance(event, cls)
        assert (event.backend, event.revision, event.state_digest) == ("git", "h", "")

    def test_a_retired_shape_that_does_not_fit_is_an_error(self):
        with pytest.raises(RecordDecodeError, match="cannot upcast"):
            decode_payload(
                "goatherd.tree.captured.v1", "capture", {"head_sha": 1}, record_id="r"
            )


ROOT = pathlib.Path(__file__).resolve().parents[2] / "goatherd"
EVENTS = ROOT / "domain" / "events"


def test_no_runtime_schema_string_appears_outside_the_event_module():
    schemas = runtime_schemas()
    literal = re.compile(r"""["']([a-z0-9_]+(?:\.[a-z0-9_]+)+\.v\d+)["']""")
    found = []
    for path in ROOT.rglob("*.py"):
        if EVENTS in path.parents:
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            for match in literal.finditer(line):
                if match.group(1) in schemas:
                    found.append(f"{path.relative_to(ROOT.parent)}:{number}")
    assert found == []


def test_the_scan_covers_the_task_runtimes_schemas():
    # Execution records are runtime events too (ADR 0051): their refs are
    # scanned for like the scope runtime's.
    executions: set[type[RuntimeEvent]] = {
        ExecutionCreated,
        ExecutionStarted,
        ExecutionCompleted,
        ExecutionFailed,
        ExecutionRelationCreated,
        FactPublished,
    }
    assert {cls.SCHEMA for cls in executions} <= runtime_schemas()


def test_the_scan_would_find_a_schema_string():
    # The check above must be able to fail: the pattern sees a runtime ref.
    literal = re.compile(r"""["']([a-z0-9_]+(?:\.[a-z0-9_]+)+\.v\d+)["']""")
    match = literal.search('x = "goatherd.scope.forked.v1"')
    assert match is not None
    assert match.group(1) in runtime_schemas()
