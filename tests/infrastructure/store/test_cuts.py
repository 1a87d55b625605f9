"""Cuts (frontiers): publication, verified truth, resolution (kernel-spec 7.3-7.6)."""

from __future__ import annotations

import pytest
from sqlalchemy import update

from goatherd import (
    TRUSTED_APPEND_CONTEXT,
    TRUSTED_READ_CONTEXT,
    CutSpec,
    TraceStoreError,
)
from goatherd.domain import (
    FRONTIER_KIND_LABEL,
    AppendIntentConflictError,
    BatchShapeError,
    OperationContext,
    UnknownFactError,
    UnknownFrontierError,
)
from goatherd.infrastructure.store import SqlAlchemyTraceStore
from goatherd.infrastructure.store.schema import frontiers
from tests.infrastructure.store.helpers import EVERYTHING, batch, draft, dump

CTX = TRUSTED_APPEND_CONTEXT
READ = TRUSTED_READ_CONTEXT


def _published(store: SqlAlchemyTraceStore) -> tuple[str, str, CutSpec]:
    receipt = store.append(CTX, batch("i:1", "exec:a", draft(1), draft(2)))
    spec = CutSpec("frontier:one", "exec:a", receipt.fact_ids[0])
    return receipt.fact_ids[0], receipt.fact_ids[1], spec


class TestPublish:
    def test_a_cut_is_retained_as_a_frontier_record_on_the_publisher_path(
        self, store: SqlAlchemyTraceStore
    ) -> None:
        first, _, spec = _published(store)
        cut = store.publish_cut(CTX, spec)
        assert (cut.through_fact_id, cut.through_owner_ordinal) == (first, 0)
        assert cut.publisher_trace_owner_id == "exec:a"
        record = store.read_fact(READ, cut.created_by_fact_id or "")
        assert record.fact_kind == FRONTIER_KIND_LABEL
        assert record.trace_owner_id == "exec:a"
        assert record.view is not None
        assert record.view.retained_context_ref != ""
        assert store.read_owner_cutoff("frontier:one") == cut

    def test_publishing_twice_gives_equal_cuts_and_writes_nothing_new(
        self, store: SqlAlchemyTraceStore
    ) -> None:
        _, _, spec = _published(store)
        cut = store.publish_cut(CTX, spec)
        before = dump(store)
        assert store.publish_frontier(CTX, spec) == cut
        assert dump(store) == before

    def test_the_publisher_path_receives_the_frontier_record(
        self, store: SqlAlchemyTraceStore
    ) -> None:
        first, _, _ = _published(store)
        cut = store.publish_cut(
            CTX,
            CutSpec("frontier:p", "exec:a", first, publisher_trace_owner_id="exec:p"),
        )
        prefix = store.read_owner_prefix(READ, "exec:p", EVERYTHING)
        assert prefix.owner_paths == {"exec:p": (cut.created_by_fact_id,)}

    def test_a_through_record_not_on_the_target_path_is_refused_unchanged(
        self, store: SqlAlchemyTraceStore
    ) -> None:
        first, _, _ = _published(store)
        before = dump(store)
        with pytest.raises(UnknownFactError, match="unknown fact path entry"):
            store.publish_cut(CTX, CutSpec("frontier:x", "exec:other", first))
        assert dump(store) == before

    def test_an_empty_frontier_id_is_refused_unchanged(
        self, store: SqlAlchemyTraceStore
    ) -> None:
        first, _, _ = _published(store)
        before = dump(store)
        with pytest.raises(BatchShapeError, match="frontier_id is required"):
            store.publish_cut(CTX, CutSpec("", "exec:a", first))
        assert dump(store) == before

    def test_a_frontier_id_naming_another_cutoff_is_refused_unchanged(
        self, store: SqlAlchemyTraceStore
    ) -> None:
        _first, second, spec = _published(store)
        store.publish_cut(CTX, spec)
        before = dump(store)
        with pytest.raises(TraceStoreError, match="already names a different cutoff"):
            store.publish_cut(
                CTX,
                CutSpec("frontier:one", "exec:a", second, append_intent_id="i:other"),
            )
        assert dump(store) == before

    def test_a_default_intent_republished_with_other_parents_conflicts(
        self, store: SqlAlchemyTraceStore
    ) -> None:
        first, second, spec = _published(store)
        store.publish_cut(CTX, spec)
        with pytest.raises(AppendIntentConflictError):
            store.publish_cut(
                CTX, CutSpec("frontier:one", "exec:a", first, caused_by=(second,))
            )

    def test_append_authority_does_not_authorize_publication(
        self, store: SqlAlchemyTraceStore
    ) -> None:
        _, _, spec = _published(store)
        append_only = OperationContext(
            actor_ref="x", operation="append", trust_mode="internal"
        )
        with pytest.raises(TraceStoreError, match="publish_cut operation requires"):
            store.publish_cut(append_only, spec)


class TestVerifiedTruth:
    def test_an_unknown_frontier_raises_its_own_error(
        self, store: SqlAlchemyTraceStore
    ) -> None:
        with pytest.raises(UnknownFrontierError, match="unknown frontier id: nope"):
            store.read_owner_cutoff("nope")

    def test_a_tampered_index_does_not_create_truth(
        self, store: SqlAlchemyTraceStore
    ) -> None:
        _, second, spec = _published(store)
        store.publish_cut(CTX, spec)
        with store.engine.begin() as conn:
            conn.execute(
                update(frontiers)
                .where(frontiers.c.frontier_id == "frontier:one")
                .values(through_fact_id=second, through_owner_ordinal=1)
            )
        with pytest.raises(TraceStoreError, match="resolver index disagrees"):
            store.read_owner_cutoff("frontier:one")
        with pytest.raises(TraceStoreError, match="resolver index disagrees"):
            store.resolve_cut(READ, "frontier:one")


class TestResolve:
    def test_later_appends_never_change_a_cut_resolution(
        self, store: SqlAlchemyTraceStore
    ) -> None:
        first, _, spec = _published(store)
        cut = store.publish_cut(CTX, spec)
        before = store.resolve_cut(READ, cut.frontier_id)
        store.append(CTX, batch("i:later", "exec:a", draft(99)))
        after = store.resolve_frontier(READ, cut.frontier_id)
        assert after == before
        assert after.owner_paths == {"exec:a": (first,)}
        assert after.frontier == cut

    def test_resolution_honours_visibility_and_mode(
        self, store: SqlAlchemyTraceStore
    ) -> None:
        _, _, spec = _published(store)
        cut = store.publish_cut(CTX, spec)
        shapes = store.resolve_cut(
            READ, cut.frontier_id, "shape_only", "declarations_only"
        )
        assert shapes.facts_by_id == {}
        assert shapes.visibility_profile == "shape_only"
        with pytest.raises(ValueError, match="unknown mode filter"):
            store.resolve_cut(READ, cut.frontier_id, mode_filter="odd")
