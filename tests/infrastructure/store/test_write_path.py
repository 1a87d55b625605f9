"""The append path's shortcuts are exact when another store retained the rows.

A store skips its "does this row exist?" queries for records it has not seen
and for new contexts (their ids hash the new intent): the inserts keep any row
already retained, and the writer then compares it exactly. These tests open a
second store object on the same database, so that nothing is in its cache.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import update

from goatherd import (
    TRUSTED_APPEND_CONTEXT,
    TRUSTED_READ_CONTEXT,
    TraceStoreError,
)
from goatherd.domain import (
    ReadContext,
    RecordShape,
)
from goatherd.infrastructure.store import SqlAlchemyTraceStore, open_trace_store
from goatherd.infrastructure.store.authority import append_context
from goatherd.infrastructure.store.plan import context_requests
from goatherd.infrastructure.store.schema import contexts, records
from tests.infrastructure.store.helpers import EVERYTHING, batch, draft, dump


@pytest.fixture
def two_stores(
    durable_store_url: str,
) -> Iterator[tuple[SqlAlchemyTraceStore, SqlAlchemyTraceStore]]:
    first = open_trace_store(durable_store_url)
    second = open_trace_store(durable_store_url)
    try:
        yield first, second
    finally:
        first.close()
        second.close()


def test_a_record_another_store_retained_gets_a_new_entry_but_no_new_row(
    two_stores: tuple[SqlAlchemyTraceStore, SqlAlchemyTraceStore],
) -> None:
    first, second = two_stores
    root = first.append(TRUSTED_APPEND_CONTEXT, batch("i-root", "agent:a", draft(0)))
    child = draft(1, parents=root.fact_ids)
    one = first.append(TRUSTED_APPEND_CONTEXT, batch("i-1", "agent:a", child))
    two = second.append(
        TRUSTED_APPEND_CONTEXT, batch("i-2", "agent:a", child, draft(2))
    )
    assert two.fact_ids[0] == one.fact_ids[0]
    state = dump(second)
    assert len(state["records"]) == 2 + 3  # two witnesses, three records
    assert len(state["record_edges"]) == 1
    owning = {row[0]: row[-1] for row in state["records"]}
    assert owning[one.fact_ids[0]] == "i-1"
    assert owning[two.fact_ids[1]] == "i-2"
    assert [row[1] for row in state["path_entries"] if row[0] == "agent:a"] == [
        0,
        1,
        2,
        3,
    ]


def test_a_tampered_retained_record_is_refused_and_nothing_changes(
    two_stores: tuple[SqlAlchemyTraceStore, SqlAlchemyTraceStore],
) -> None:
    first, second = two_stores
    receipt = first.append(TRUSTED_APPEND_CONTEXT, batch("i-1", "agent:a", draft(1)))
    with second.engine.begin() as conn:
        conn.execute(
            update(records)
            .where(records.c.record_id == receipt.fact_ids[0])
            .values(body_json='{"payload":{"value":2}}')
        )
    before = dump(second)
    with pytest.raises(TraceStoreError, match="already names different content"):
        second.append(TRUSTED_APPEND_CONTEXT, batch("i-2", "agent:b", draft(1)))
    assert dump(second) == before


def test_a_stored_context_with_the_new_id_is_compared_exactly(
    two_stores: tuple[SqlAlchemyTraceStore, SqlAlchemyTraceStore],
) -> None:
    first, second = two_stores
    first.append(TRUSTED_APPEND_CONTEXT, batch("i-1", "agent:a", draft(1)))
    clash = batch("i-2", "agent:a", draft(2))
    (request,) = context_requests(append_context(TRUSTED_APPEND_CONTEXT), clash)
    with second.engine.begin() as conn:
        conn.execute(
            update(contexts)
            .where(contexts.c.append_intent_id == "i-1")
            .values(context_id=request.context_id, substrate_ref="forged")
        )
    before = dump(second)
    with pytest.raises(TraceStoreError, match="already names a different context"):
        second.append(TRUSTED_APPEND_CONTEXT, clash)
    assert dump(second) == before


def test_warm_reads_equal_a_cold_store_s_reads_under_each_profile(
    two_stores: tuple[SqlAlchemyTraceStore, SqlAlchemyTraceStore],
) -> None:
    first, second = two_stores
    shapes = ReadContext(actor_ref="viewer", visibility_profile="shape_only")
    root = first.append(TRUSTED_APPEND_CONTEXT, batch("i-1", "agent:a", draft(1)))
    first.append(
        TRUSTED_APPEND_CONTEXT,
        batch("i-2", "agent:a", draft(2, parents=root.fact_ids)),
    )
    for context in (TRUSTED_READ_CONTEXT, shapes, TRUSTED_READ_CONTEXT):
        warm = first.read_owner_prefix(context, "agent:a", EVERYTHING)
        cold = second.read_owner_prefix(context, "agent:a", EVERYTHING)
        assert warm == cold
        assert warm.visibility_profile == context.visibility_profile
    assert isinstance(
        first.read_owner_prefix(shapes, "agent:a", EVERYTHING).facts_by_id[
            root.fact_ids[0]
        ],
        RecordShape,
    )
