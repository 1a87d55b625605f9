"""The store's door refuses a runtime record the runtime's fold could not read.

A record of a schema the runtime folds is decoded by its typed event at append
time, on every backend and through every append API (one group, a batch of
groups, ``preview_record_ids``): a wrong-typed field, a wrong mode, an unknown
verb, or a digest the record's own fields contradict is refused with a
``RuntimeRecordRefusedError`` naming the schema and the field, and nothing of
the batch is written. Whatever the door accepts for a runtime schema, the fold
decodes (a property over generated payloads).
"""

from __future__ import annotations

import dataclasses
import itertools
import typing
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from goatherd.application.runtime_model import RuntimeModel
from goatherd.domain import (
    TRUSTED_APPEND_CONTEXT,
    AppendBatch,
    AppendGroup,
    CheckpointCreated,
    MergeProposed,
    OutputSealed,
    OutputSettled,
    RecordDraft,
    RuntimeRecordRefusedError,
    ScopeForked,
    TraceStoreError,
    WorkspaceState,
    decode_fact,
    event_class_for,
    runtime_schemas,
)
from goatherd.infrastructure.store import SqlAlchemyTraceStore, open_trace_store
from tests.infrastructure.backends import store, store_url  # noqa: F401 (fixtures)
from tests.infrastructure.store.helpers import dump

STATE = WorkspaceState("git", "1" * 40, {"head": "1" * 40})
OTHER = WorkspaceState("git", "2" * 40, {"head": "2" * 40})
_INTENTS = itertools.count()


def _checkpoint(**change: Any) -> RecordDraft:
    payload: dict[str, Any] = {
        "checkpoint_id": "cp:agent:main:1",
        "backend": "git",
        "revision": STATE.revision,
        "state_digest": STATE.digest(),
        "has_snapshot": False,
        "state": STATE.to_json(),
    }
    payload.update(change)
    return RecordDraft(
        "declaration", CheckpointCreated.SCHEMA, payload, kind_label="cp"
    )


def _sealed(**change: Any) -> RecordDraft:
    payload: dict[str, Any] = {
        "output_id": "out:agent:main:2",
        "scope": "scope:agent:main",
        "backend": "git",
        "revision": STATE.revision,
        "state_digest": STATE.digest(),
        "baseline_digest": OTHER.digest(),
        "change_count": 1,
        "state": STATE.to_json(),
        "baseline": OTHER.to_json(),
        "changes": [{"path": "a.txt", "kind": "modify"}],
    }
    payload.update(change)
    return RecordDraft("declaration", OutputSealed.SCHEMA, payload, kind_label="out")


def _settled(action: object) -> RecordDraft:
    payload = {"output_id": "out:x:1", "action": action, "state_digest": "sha256:0"}
    return RecordDraft("capture", OutputSettled.SCHEMA, payload, kind_label="s")


# (draft, the field or rule the error must name)
BAD = {
    "wrong-typed field": (_settled(5), "payload.action must be a string"),
    "unknown verb": (_settled("obliterate"), "payload.action is 'obliterate'"),
    "wrong mode": (
        RecordDraft("capture", ScopeForked.SCHEMA, {"child_owner": "agent:x"}),
        "mode is 'capture'",
    ),
    "missing field": (
        RecordDraft("declaration", ScopeForked.SCHEMA, {}),
        "payload.child_owner is missing",
    ),
    "checkpoint state_digest of another state": (
        _checkpoint(state_digest=OTHER.digest()),
        "payload.state_digest is not the digest of payload.state",
    ),
    "checkpoint revision of another state": (
        _checkpoint(revision=OTHER.revision),
        "payload.revision is not payload.state.revision",
    ),
    "sealed state_digest of another state": (
        _sealed(state_digest=OTHER.digest()),
        "payload.state_digest is not the digest of payload.state",
    ),
    "sealed baseline_digest of another state": (
        _sealed(baseline_digest=STATE.digest()),
        "payload.baseline_digest is not the digest of payload.baseline",
    ),
    "sealed change_count of another list": (
        _sealed(change_count=3),
        "payload.change_count is 3, payload.changes holds 1",
    ),
    "fork baseline_digest of another state": (
        RecordDraft(
            "declaration",
            ScopeForked.SCHEMA,
            {
                "child_owner": "agent:main:c",
                "baseline_digest": OTHER.digest(),
                "baseline": STATE.to_json(),
            },
        ),
        "payload.baseline_digest is not the digest of payload.baseline",
    ),
    "proposal change_count of another list": (
        RecordDraft(
            "capture",
            MergeProposed.SCHEMA,
            {
                "child_scope": "scope:c",
                "baseline_digest": OTHER.digest(),
                "change_count": 0,
                "changes": [{"path": "a", "kind": "create"}],
                "diff_digest": "sha256:0",
            },
        ),
        "payload.change_count is 0, payload.changes holds 1",
    ),
}

GOOD = RecordDraft("capture", "app.note.v1", {"n": 1}, kind_label="note")


def _batch(*groups: tuple[str, tuple[RecordDraft, ...]]) -> AppendBatch:
    return AppendBatch(
        f"door:{next(_INTENTS)}",
        tuple(AppendGroup(owner, fact_drafts=drafts) for owner, drafts in groups),
    )


@pytest.mark.parametrize("case", list(BAD))
def test_a_bad_runtime_record_is_refused_by_every_append_api(
    store: SqlAlchemyTraceStore,  # noqa: F811
    case: str,
) -> None:
    bad, named = BAD[case]
    store.append(TRUSTED_APPEND_CONTEXT, _batch(("agent:main", (GOOD,))))
    before = dump(store)
    attempts = {
        "one group": _batch(("agent:main", (bad,))),
        "after a good draft": _batch(("agent:main", (GOOD, bad))),
        "in a later group": _batch(("agent:a", (GOOD,)), ("agent:main", (bad,))),
    }
    for how, batch in attempts.items():
        for api in (store.append, store.preview_record_ids):
            with pytest.raises(RuntimeRecordRefusedError) as refused:
                api(TRUSTED_APPEND_CONTEXT, batch)
            message = str(refused.value)
            assert isinstance(refused.value, TraceStoreError)
            assert "\n" not in message, how
            assert bad.schema_ref in message, how
            assert named in message, (how, message)
        assert dump(store) == before, how


def test_the_runtime_own_records_pass_the_door(
    store: SqlAlchemyTraceStore,  # noqa: F811
) -> None:
    drafts = (_checkpoint(), _sealed(), _settled("released"))
    store.append(TRUSTED_APPEND_CONTEXT, _batch(("agent:main", drafts)))
    model = RuntimeModel(store)
    model.refresh()
    assert model.unreadable() == {}


# ------------------------------------------------------------------ property


def _json() -> st.SearchStrategy[Any]:
    leaf = st.none() | st.booleans() | st.integers() | st.text(max_size=4)
    return st.recursive(
        leaf,
        lambda inner: (
            st.lists(inner, max_size=2)
            | st.dictionaries(st.text(max_size=3), inner, max_size=2)
        ),
        max_leaves=4,
    )


_STATES = st.sampled_from([STATE, OTHER]).map(WorkspaceState.to_json)
_DIGESTS = st.sampled_from([STATE.digest(), OTHER.digest(), ""])


def _value(hint: Any, key: str) -> st.SearchStrategy[Any]:
    """A plausible value of ``hint`` (often right, sometimes not)."""
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if len(args) == 1 and typing.get_origin(hint) is not tuple:
        hint = args[0]
    origin = typing.get_origin(hint)
    if key.endswith("digest"):
        good: st.SearchStrategy[Any] = _DIGESTS
    elif key in ("revision",):
        good = st.sampled_from([STATE.revision, OTHER.revision])
    elif hint is WorkspaceState:
        good = _STATES
    elif hint is bool:
        good = st.booleans()
    elif hint is int:
        good = st.integers(0, 3)
    elif hint is str:
        good = st.sampled_from(["git", "agent:main", "x"])
    elif origin is tuple:
        good = st.lists(
            st.fixed_dictionaries({"path": st.just("a"), "kind": st.just("create")}),
            max_size=2,
        ) | st.lists(st.text(max_size=3), max_size=2)
    elif origin is Mapping:
        good = st.dictionaries(st.text(max_size=3), st.text(max_size=3), max_size=2)
    elif isinstance(hint, type) and issubclass(hint, str):
        good = st.sampled_from([m.value for m in hint]) | st.text(max_size=4)  # type: ignore[attr-defined]
    else:
        good = _json()
    return st.one_of(good, good, good, _json())


@st.composite
def _runtime_drafts(draw: st.DrawFn) -> tuple[str, RecordDraft]:
    schema = draw(st.sampled_from(sorted(runtime_schemas())))
    cls = event_class_for(schema)
    assert cls is not None
    hints = typing.get_type_hints(cls)
    payload: dict[str, Any] = {}
    for spec in dataclasses.fields(cls):
        if spec.name in ("caused_by", "extensions"):
            continue
        key = spec.metadata.get("key", spec.name)
        if draw(st.integers(0, 9)) == 0:
            continue  # sometimes leave a key out
        payload[key] = draw(_value(hints[spec.name], key))
    for _ in range(draw(st.integers(0, 1))):
        payload[draw(st.sampled_from(["extra", "state_digest", "head_sha"]))] = draw(
            _json()
        )
    mode = draw(st.sampled_from([cls.MODE.value, "capture", "declaration"]))
    owner = draw(st.sampled_from(["agent:main", "cp:agent:main:1", "out:agent:x:2"]))
    return owner, RecordDraft(mode, schema, payload, kind_label="k")


@pytest.fixture(scope="module")
def shared_store() -> SqlAlchemyTraceStore:
    return open_trace_store("sqlite://")


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(case=_runtime_drafts())
def test_whatever_the_door_accepts_the_fold_decodes(
    shared_store: SqlAlchemyTraceStore, case: tuple[str, RecordDraft]
) -> None:
    owner, draft = case
    position = shared_store.max_position()
    try:
        shared_store.append(TRUSTED_APPEND_CONTEXT, _batch((owner, (draft,))))
    except RuntimeRecordRefusedError:
        assert shared_store.max_position() == position
        return
    for entry in shared_store.read_log(position, 10):
        decode_fact(entry.record, entry.position)  # raises if the fold could not
    model = RuntimeModel(shared_store)
    model.refresh()
    assert model.unreadable() == {}
