"""A small real trace for the trace UI tests."""

from __future__ import annotations

from goatherd.domain import (
    TRUSTED_APPEND_CONTEXT,
    AppendBatch,
    AppendGroup,
    RecordDraft,
)


def append(store, intent, owner, schema, payload=None, *, mode="capture", parents=()):
    draft = RecordDraft(mode, schema, payload or {"intent": intent}, kind_label=schema)
    group = AppendGroup(owner, causal_parents=tuple(parents), fact_drafts=(draft,))
    return store.append(TRUSTED_APPEND_CONTEXT, AppendBatch(intent, (group,)))


def build_trace(store):
    """Fork root -> root:a, work on root:a, a shared record on two paths."""
    fork = append(
        store,
        "fork",
        "root",
        "goatherd.scope.forked.v1",
        {"child_owner": "root:a"},
        mode="declaration",
    )
    step = append(
        store, "step", "root:a", "app.step.v1", {"n": 1}, parents=fork.fact_ids
    )
    append(store, "other", "rootless", "app.step.v1", {"n": 2})
    shared = RecordDraft("capture", "app.shared.v1", {"both": True})
    batch = AppendBatch(
        "shared",
        (
            AppendGroup("root", causal_parents=step.fact_ids, fact_drafts=(shared,)),
            AppendGroup("root:a", causal_parents=step.fact_ids, fact_drafts=(shared,)),
        ),
    )
    store.append(TRUSTED_APPEND_CONTEXT, batch)
    return fork, step
