"""``cut publish``, ``cut resolve`` and ``history``: cuts and effective history.

A cut is an immutable read address (an owner path through one record); the
store's ``publish_cut`` and ``resolve_cut`` are the API these commands call.
``history`` projects an execution's effective history (root, active children,
published facts) from a published cut, or from the execution's path as it
stands when given an owner.
"""

from __future__ import annotations

import argparse
from typing import Any

from goatherd.cli.common import open_read_only, open_writable
from goatherd.cli.ids import resolve_cut, resolve_owner, resolve_record
from goatherd.cli.output import emit_json, short_id
from goatherd.cli.text import clean
from goatherd.domain import (
    MAX_OWNER_ORDINAL,
    TRUSTED_APPEND_CONTEXT,
    TRUSTED_READ_CONTEXT,
    CutSpec,
    Record,
    TraceSlice,
    UnknownFrontierError,
)
from goatherd.projections import (
    EffectiveHistory,
    Execution,
    active_relations,
    project_effective_history,
    project_effective_history_from_store,
    project_execution_relations,
)

__all__ = ["cmd_cut_publish", "cmd_cut_resolve", "cmd_history"]


def cmd_cut_publish(args: argparse.Namespace) -> int:
    """Publish a cut of OWNER through RECORD_ID under CUT_ID (idempotent)."""
    with open_writable(args.db) as store:
        record_id = resolve_record(store, args.record_id)
        _, owner = resolve_owner(store, args.owner)
        spec = CutSpec(args.cut_id, owner, record_id, args.publisher)
        cut = store.publish_cut(TRUSTED_APPEND_CONTEXT, spec)
    data = {
        "cut_id": cut.frontier_id,
        "owner": cut.target_trace_owner_id,
        "through_record_id": cut.through_fact_id,
        "through_ordinal": cut.through_owner_ordinal,
        "publisher": cut.publisher_trace_owner_id,
    }
    if args.json:
        emit_json(data)
    else:
        print(
            clean(
                f"published {cut.frontier_id}: {cut.target_trace_owner_id}"
                f" through #{cut.through_owner_ordinal}"
                f" ({short_id(cut.through_fact_id)})"
            )
        )
    return 0


def _slice_rows(slice_: TraceSlice) -> list[dict[str, Any]]:
    rows = []
    for owner, ids in sorted(slice_.owner_paths.items()):
        for ordinal, record_id in enumerate(ids):
            record = slice_.facts_by_id[record_id]
            schema = record.envelope.schema_ref if isinstance(record, Record) else ""
            rows.append(
                {"owner": owner, "index": ordinal, "record_id": record_id}
                | {"schema_ref": schema}
            )
    return rows


def cmd_cut_resolve(args: argparse.Namespace) -> int:
    """Print the records a published cut addresses (the same on every call)."""
    with open_read_only(args.db) as store:
        frontier_id = resolve_cut(store, args.frontier_id)
        cut = store.read_owner_cutoff(frontier_id)
        slice_ = store.resolve_cut(TRUSTED_READ_CONTEXT, frontier_id)
    rows = _slice_rows(slice_)
    if args.json:
        emit_json(
            {
                "cut_id": cut.frontier_id,
                "owner": cut.target_trace_owner_id,
                "through_ordinal": cut.through_owner_ordinal,
                "records": rows,
            }
        )
        return 0
    print(
        clean(
            f"{cut.frontier_id}: {cut.target_trace_owner_id} through"
            f" #{cut.through_owner_ordinal}, {len(slice_.facts_by_id)} records"
        )
    )
    for row in rows:
        print(
            clean(
                f"  {row['owner']}  {short_id(row['record_id'])}  {row['schema_ref']}"
            )
        )
    return 0


def _live_history(store: Any, owner: str) -> EffectiveHistory:
    root = store.read_owner_prefix(TRUSTED_READ_CONTEXT, owner, MAX_OWNER_ORDINAL)
    relations = project_execution_relations(root, owner)
    children = []
    for relation in active_relations(relations):
        frontier = relation.child_frontier_id
        if frontier is None:
            continue
        try:
            children.append(store.resolve_cut(TRUSTED_READ_CONTEXT, frontier))
        except UnknownFrontierError:
            continue  # a child still running has no terminal cut yet
    return project_effective_history(root, owner, child_slices=tuple(children))


def _execution_json(execution: Execution) -> dict[str, Any]:
    return {
        "execution_id": execution.execution_id,
        "task_ref": execution.task_ref,
        "status": str(execution.status.value),
        "inputs": dict(execution.inputs),
        "outputs": dict(execution.outputs),
        "error": execution.error,
    }


def _history_json(history: EffectiveHistory) -> dict[str, Any]:
    return {
        "root": _execution_json(history.root),
        "children": [
            {"relation": c.relation.relation_kind.value} | _execution_json(c.execution)
            for c in history.children
        ],
        "published_facts": [
            {"record_id": f.fact_id, "kind": f.kind, "data": dict(f.data)}
            for f in history.published_facts
        ],
    }


def cmd_history(args: argparse.Namespace) -> int:
    """Print an execution's effective history (from a cut id or an owner path)."""
    with open_read_only(args.db) as store:
        kind, target = resolve_owner(store, args.owner, cuts=True)
        if kind == "owner":
            history = _live_history(store, target)
        else:
            cut = store.read_owner_cutoff(target)
            history = project_effective_history_from_store(
                store, TRUSTED_READ_CONTEXT, cut
            )
    data = _history_json(history)
    if args.json:
        emit_json(data)
        return 0
    root = data["root"]
    print(clean(f"{root['execution_id']}  {root['task_ref']}  {root['status']}"))
    for child in data["children"]:
        print(
            clean(
                f"  {child['relation']}  {child['execution_id']}"
                f"  {child['task_ref']}  {child['status']}"
            )
        )
    for fact in data["published_facts"]:
        print(clean(f"  fact {short_id(fact['record_id'])}  {fact['kind']}"))
    return 0
