"""Builders and a full-state dump for the store tests."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from goatherd import (
    AppendBatch,
    AppendGroup,
    RecordDraft,
)
from goatherd.infrastructure.store import METADATA, SqlAlchemyTraceStore

EVERYTHING = 2**63 - 1


def draft(
    value: object = 1,
    *,
    mode: str = "capture",
    schema: str = "test.step.v1",
    label: str = "step",
    local_id: str | None = None,
    parents: tuple[str, ...] = (),
    local_parents: tuple[str, ...] = (),
    payload: dict[str, Any] | None = None,
) -> RecordDraft:
    return RecordDraft(
        mode=mode,
        schema_ref=schema,
        payload={"value": value} if payload is None else payload,
        kind_label=label,
        append_local_id=local_id,
        caused_by_fact_ids=parents,
        caused_by_local_refs=local_parents,
    )


def batch(
    intent: str,
    owner: str,
    *drafts: RecordDraft,
    parents: tuple[str, ...] = (),
    context: object = None,
) -> AppendBatch:
    group = AppendGroup(
        trace_owner_id=owner,
        retained_context=context,  # type: ignore[arg-type]
        causal_parents=parents,
        fact_drafts=drafts,
    )
    return AppendBatch(append_intent_id=intent, groups=(group,))


def dump(store: SqlAlchemyTraceStore) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every store table, in primary-key order (timestamps dropped)."""
    state: dict[str, list[tuple[Any, ...]]] = {}
    with store.engine.connect() as conn:
        for table in METADATA.sorted_tables:
            columns = [
                c
                for c in table.columns
                if c.name not in ("committed_at", "completed_at")
            ]
            keys = list(table.primary_key.columns)
            rows = conn.execute(select(*columns).order_by(*keys))
            state[table.name] = [tuple(row) for row in rows]
    return state


def counts(store: SqlAlchemyTraceStore) -> tuple[int, int, int]:
    return store.fact_count(), store.context_count(), store.max_position()
