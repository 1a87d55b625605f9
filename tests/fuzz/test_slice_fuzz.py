"""Fuzz slice reads with random owners, cutoffs, modes, visibility and roots.

Each read either returns a slice that keeps its promises (ordinals within the
cutoff, the mode filter applied, payloads hidden by ``shape_only``) or raises
one of the project's own errors. Reads never write.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from goatherd import GoatherdError
from goatherd.domain import (
    TRUSTED_APPEND_CONTEXT,
    TRUSTED_READ_CONTEXT,
    AppendBatch,
    AppendGroup,
    CutSpec,
    ReadContext,
    ReadRequestError,
    Record,
    RecordDraft,
    RecordShape,
    TraceSlice,
)
from goatherd.domain.records import WITNESS_OWNER
from goatherd.infrastructure.store import SQLiteTraceStore
from tests.fuzz.strategies import any_text
from tests.fuzz.tables import table_rows

OWNERS = ("agent:a", "agent:a:b", "agent:c", WITNESS_OWNER, "", "nobody")
MODES = ("both", "captures_only", "declarations_only", "", "all", "BOTH")
PROFILES = ("shape_only", "payload", "full_internal", "", "secret")
THROUGH = st.integers(-3, 12) | st.sampled_from((2**63 - 1, -(2**63), 2**64))

_STORE: SQLiteTraceStore | None = None
_IDS: list[str] = []


def _build() -> tuple[SQLiteTraceStore, list[str]]:
    store = SQLiteTraceStore()
    ids: list[str] = []
    parents: tuple[str, ...] = ()
    for n in range(6):
        owner = ("agent:a", "agent:a:b", "agent:c")[n % 3]
        mode = "capture" if n % 2 else "declaration"
        draft = RecordDraft(mode, "app.step.v1", {"n": n, "secret": f"s{n}"})
        group = AppendGroup(owner, causal_parents=parents, fact_drafts=(draft,))
        receipt = store.append(TRUSTED_APPEND_CONTEXT, AppendBatch(f"i:{n}", (group,)))
        ids.extend(receipt.fact_ids)
        parents = receipt.fact_ids
    store.publish_cut(TRUSTED_APPEND_CONTEXT, CutSpec("cut:a", "agent:a", ids[3]))
    return store, ids


@pytest.fixture(scope="module", autouse=True)
def _trace() -> Iterator[None]:
    global _STORE
    store, ids = _build()
    _STORE, _IDS[:] = store, ids
    yield
    store.close()


def _store() -> SQLiteTraceStore:
    assert _STORE is not None
    return _STORE


contexts = st.sampled_from([TRUSTED_READ_CONTEXT]) | st.builds(
    ReadContext,
    actor_ref=st.sampled_from(("agent:x", "")) | any_text,
    presented_witness_refs=st.lists(
        st.sampled_from(("trusted:internal", "w:1")), max_size=2
    ).map(tuple),
    visibility_profile=st.sampled_from(PROFILES) | any_text,
)
record_ids = st.sampled_from(range(6)).map(lambda i: _IDS[i]) | any_text


def _check_slice(slice_: TraceSlice, mode: str) -> None:
    for record in slice_.facts_by_id.values():
        assert isinstance(record, Record | RecordShape)
        mode_of = record.envelope.mode
        if mode == "captures_only":
            assert mode_of == "capture"
        if mode == "declarations_only":
            assert mode_of == "declaration"
        if slice_.visibility_profile == "shape_only":
            assert isinstance(record, RecordShape)
    for ids in slice_.owner_paths.values():
        assert all(rid in slice_.facts_by_id for rid in ids)


def _read_or_refuse(read: object, mode: str) -> None:
    before = table_rows(_store().engine)
    try:
        result = read()  # type: ignore[operator]
    except GoatherdError:
        result = None
    if isinstance(result, TraceSlice):
        _check_slice(result, mode)
    assert table_rows(_store().engine) == before


@given(
    contexts,
    st.sampled_from(OWNERS) | any_text,
    THROUGH,
    st.sampled_from(MODES) | any_text,
)
def test_owner_prefix_reads_keep_their_promises_or_refuse(
    context: ReadContext, owner: str, through: int, mode: str
) -> None:
    def read() -> TraceSlice:
        slice_ = _store().read_owner_prefix(context, owner, through, mode)
        for rid in slice_.owner_paths.get(owner, ()):
            assert slice_.facts_by_id[rid].owner_ordinal <= through
        return slice_

    _read_or_refuse(read, mode)


@given(
    contexts,
    st.lists(record_ids, max_size=3),
    st.none() | st.sampled_from(PROFILES) | any_text,
    st.sampled_from(MODES),
    st.sampled_from(("include_external_anchors", "visible_only", "")) | any_text,
)
def test_causal_closure_reads_keep_their_promises_or_refuse(
    context: ReadContext,
    roots: list[str],
    visibility: str | None,
    mode: str,
    policy: str,
) -> None:
    def read() -> TraceSlice:
        return _store().read_causal_closure(
            context,
            roots,
            visibility=visibility,
            mode_filter=mode,
            closure_policy=policy,
        )

    _read_or_refuse(read, mode)


@given(
    contexts,
    record_ids,
    st.sampled_from(("cut:a", "", "cut:none")) | any_text,
    st.none() | st.sampled_from(PROFILES),
    st.sampled_from(MODES),
)
def test_single_reads_and_cut_resolution_keep_their_promises_or_refuse(
    context: ReadContext,
    record_id: str,
    cut_id: str,
    visibility: str | None,
    mode: str,
) -> None:
    store = _store()
    _read_or_refuse(lambda: store.read_fact(context, record_id, visibility), mode)
    _read_or_refuse(lambda: store.resolve_cut(context, cut_id, visibility, mode), mode)
    _read_or_refuse(lambda: store.read_owner_cutoff(cut_id), mode)
    _read_or_refuse(lambda: store.read_context(cut_id), mode)


@pytest.mark.parametrize("text", ["\ud800", "a\udfffb"])
def test_a_read_naming_a_lone_surrogate_is_a_clear_read_request_error(
    text: str,
) -> None:
    store = _store()
    for read in (
        lambda: store.read_owner_prefix(TRUSTED_READ_CONTEXT, text, 5),
        lambda: store.read_fact(TRUSTED_READ_CONTEXT, text),
        lambda: store.read_causal_closure(TRUSTED_READ_CONTEXT, [text]),
        lambda: store.head(text),
        lambda: store.read_owner_cutoff(text),
    ):
        with pytest.raises(ReadRequestError, match="not valid text"):
            read()
