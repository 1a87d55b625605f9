"""Hand-built records and slices for the pure projection tests."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from goatherd.domain import (
    AppendBatch,
    Record,
    RecordBody,
    RecordDraft,
    RecordEnvelope,
    RecordShape,
    RecordView,
    TraceSlice,
    VisibleRecord,
    record_digest,
)

WITNESS = "sha256:" + "ab" * 32


def make_record(
    draft: RecordDraft,
    owner: str,
    ordinal: int,
    parents: tuple[str, ...] = (),
) -> Record:
    """Retain ``draft`` on ``owner`` at ``ordinal`` (id computed as the store would)."""
    rid = record_digest(draft.schema_ref, draft.mode, draft.payload, parents, WITNESS)
    envelope = RecordEnvelope(rid, rid, draft.schema_ref, draft.mode, WITNESS, parents)
    view = RecordView(owner, ordinal, "context:x", draft.fact_kind)
    return Record(envelope, RecordBody(dict(draft.payload)), view)


def shape_of(record: Record) -> RecordShape:
    return RecordShape(record.envelope, record.view)


def records_of_batches(batches: Iterable[AppendBatch]) -> list[Record]:
    """Retain every draft of the batches in order, ordinals counted per owner."""
    heads: dict[str, int] = {}
    out = []
    for batch in batches:
        for group in batch.groups:
            for draft in group.fact_drafts:
                ordinal = heads.get(group.trace_owner_id, 0)
                heads[group.trace_owner_id] = ordinal + 1
                out.append(
                    make_record(
                        draft, group.trace_owner_id, ordinal, group.causal_parents
                    )
                )
    return out


def slice_of(
    records: Iterable[VisibleRecord],
    *,
    mode_filter: str = "both",
    visibility: str = "payload",
    frontier=None,
) -> TraceSlice:
    facts: dict[str, VisibleRecord] = {}
    paths: dict[str, list[str]] = {}
    for record in records:
        facts[record.record_id] = record
        paths.setdefault(record.trace_owner_id, []).append(record.record_id)
    owner_paths: Mapping[str, tuple[str, ...]] = {k: tuple(v) for k, v in paths.items()}
    return TraceSlice(
        frontier=frontier,
        visibility_profile=visibility,
        mode_filter=mode_filter,
        facts_by_id=facts,
        owner_paths=owner_paths,
    )
