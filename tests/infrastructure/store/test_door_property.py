"""The door is one function: what the store accepts, ``verify`` accepts.

Hostile batches (special schemas on ordinary paths and ordinary schemas on
special paths, runtime-schema records whose payload does not decode, bodies
in redaction form, oversized identifiers, values of the wrong type, bad
parents) go to ``append`` on SQLite and PostgreSQL. Each one either commits,
and the whole trace still verifies, or is refused with a ``TraceStoreError``
subclass, or a ``BatchShapeError``/``RecordInputError``/``CanonicalEncodingError``
for a malformed batch (what ``append`` documents), leaving every table as it
was. A draft ``verify`` would name is
therefore never stored: it is refused at the door.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from goatherd.domain import (
    TRUSTED_APPEND_CONTEXT,
    AppendBatch,
    AppendGroup,
    RecordDraft,
)
from goatherd.domain.errors import (
    BatchShapeError,
    CanonicalEncodingError,
    RecordInputError,
    TraceStoreError,
)
from goatherd.domain.identity import ROOT_WITNESS_SCHEMA_REF, WITNESS_SCHEMA_REF
from goatherd.domain.records import (
    FRONTIER_SCHEMA_REF,
    REDACTION_OWNER,
    REDACTION_SCHEMA_REF,
    WITNESS_OWNER,
)
from goatherd.infrastructure.integrity import verify_trace
from goatherd.infrastructure.store import (
    SqlAlchemyTraceStore,
    SQLiteTraceStore,
    open_trace_store,
)
from tests.faults.conftest import postgres_url  # noqa: F401 (a fixture)
from tests.fuzz.strategies import any_text, hostile_values, json_objects
from tests.fuzz.tables import table_rows

REFUSALS = (TraceStoreError, BatchShapeError, RecordInputError, CanonicalEncodingError)
"""What ``append`` documents for a refusal: the store laws and a malformed batch."""
_HUGE = "x" * 1100  # over the 1 KiB identifier limit
OWNERS = (
    "agent:a",
    "agent:a:b",
    WITNESS_OWNER,
    REDACTION_OWNER,
    "goatherd:other",
    "kernel:other",
    "",
    _HUGE,
)
RUNTIME_SCHEMAS = (
    "goatherd.scope.created.v1",
    "goatherd.checkpoint.created.v2",
    "goatherd.run_output.sealed.v1",
    "shepherd2.execution.created.v1",
    "goatherd.supervisor.halt.v1",
)
SCHEMAS = (
    "app.step.v1",
    WITNESS_SCHEMA_REF,
    ROOT_WITNESS_SCHEMA_REF,
    REDACTION_SCHEMA_REF,
    FRONTIER_SCHEMA_REF,
    *RUNTIME_SCHEMAS,
    "",
    _HUGE,
)
MODES = ("capture", "declaration", "observation", "")
_WRONG: st.SearchStrategy[Any] = st.sampled_from((7, 1.5, b"x", None, ("a",)))


def _maybe_wrong(values: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.integers(0, 9).flatmap(lambda k: _WRONG if k == 9 else values)


def _mostly(usual: Any, hostile: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """``usual`` four times in five, so that hostile batches still commit often."""
    return st.integers(0, 4).flatmap(lambda k: hostile if k == 4 else st.just(usual))


def _payloads(known: list[str]) -> st.SearchStrategy[Any]:
    ids = st.sampled_from(known) if known else st.just("sha256:" + "0" * 64)
    return st.one_of(
        st.just({}),
        json_objects,
        st.dictionaries(any_text, hostile_values, max_size=2),
        st.builds(lambda i: {"erased": [i], "reason": "r"}, ids),
        st.builds(lambda i: {"redacted_by": i}, ids),
        st.just({"scope_id": "scope:x", "seq": 1}),
        st.just({"owner": "agent:a", "through_fact_id": "sha256:" + "1" * 64}),
        _WRONG,
    )


@st.composite
def _drafts(draw: st.DrawFn, known: list[str]) -> RecordDraft:
    parents = (st.sampled_from(known) if known else st.nothing()) | st.sampled_from(
        ("sha256:" + "2" * 64, "", "not-an-id", _HUGE)
    )
    return RecordDraft(
        mode=draw(_mostly("capture", _maybe_wrong(st.sampled_from(MODES)))),
        schema_ref=draw(
            st.integers(0, 2).flatmap(
                lambda k: (
                    st.just("app.step.v1")
                    if k == 0
                    else _maybe_wrong(st.sampled_from(SCHEMAS))
                )
            )
        ),
        payload=draw(_payloads(known)),
        kind_label=draw(_mostly("", _maybe_wrong(st.sampled_from(("step", _HUGE))))),
        append_local_id=draw(_mostly(None, st.sampled_from(("l1", "l2", _HUGE)))),
        caused_by_fact_ids=tuple(
            draw(_mostly((), st.lists(parents, min_size=1, max_size=2)))
        ),
        caused_by_local_refs=tuple(
            draw(_mostly((), st.lists(st.sampled_from(("l1", "nope")), max_size=1)))
        ),
    )


@st.composite
def hostile_batches(draw: st.DrawFn, known: list[str], n: int) -> AppendBatch:
    groups = draw(
        st.lists(
            st.builds(
                AppendGroup,
                trace_owner_id=_mostly(
                    "agent:a", _maybe_wrong(st.sampled_from(OWNERS))
                ),
                fact_drafts=st.lists(_drafts(known), min_size=1, max_size=2).map(tuple),
            ),
            min_size=1,
            max_size=2,
        )
    )
    intent = draw(_mostly(f"door:{n}", _maybe_wrong(st.sampled_from(("", _HUGE)))))
    return AppendBatch(intent, tuple(groups))


def _one_batch(
    store: SqlAlchemyTraceStore, batch: AppendBatch, known: list[str]
) -> None:
    before = table_rows(store.engine)
    try:
        receipt = store.append(TRUSTED_APPEND_CONTEXT, batch)
    except REFUSALS:
        assert table_rows(store.engine) == before, "a refused append wrote rows"
        return
    # Anything else (a bare TypeError, a driver error) propagates and fails.
    known.extend(receipt.fact_ids)
    report = verify_trace(store)
    assert report.ok, (batch, report.problems)


def _property(
    store: SqlAlchemyTraceStore, data: st.DataObject, known: list[str]
) -> None:
    for _ in range(data.draw(st.integers(1, 3), label="batches")):
        _one_batch(store, data.draw(hostile_batches(known, len(known))), known)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_what_the_sqlite_store_accepts_verify_accepts(data: st.DataObject) -> None:
    known: list[str] = []
    with SQLiteTraceStore() as store:
        _property(store, data, known)


@pytest.fixture
def pg_store(
    postgres_url: str,  # noqa: F811 (a fixture)
) -> Iterator[SqlAlchemyTraceStore]:
    with open_trace_store(postgres_url) as store:
        yield store


@pytest.mark.postgres
def test_what_the_postgres_store_accepts_verify_accepts(
    pg_store: SqlAlchemyTraceStore,
) -> None:
    known: list[str] = []

    # One database for every example (a database per example is too slow):
    # each accepted batch must leave the whole trace verifying.
    @settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.data())
    def run(data: st.DataObject) -> None:
        _property(pg_store, data, known)

    run()
