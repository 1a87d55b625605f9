"""The append ABI (kernel-spec 5.1-5.9) on every backend."""

from __future__ import annotations

import pytest

from goatherd import (
    TRUSTED_APPEND_CONTEXT,
    TRUSTED_READ_CONTEXT,
    AppendBatch,
    AppendGroup,
    RecordDraft,
    RetainedContextDraft,
    TraceStoreError,
)
from goatherd.domain import (
    WITNESS_OWNER,
    AppendContext,
    AppendIntentConflictError,
    BatchShapeError,
    OperationContext,
    OrdinalConflictError,
    RecordInputError,
    UnknownFactError,
    root_witness_record_id,
)
from goatherd.infrastructure.audit.verify import verify_trace
from goatherd.infrastructure.store import SqlAlchemyTraceStore
from tests.infrastructure.store.helpers import EVERYTHING, batch, counts, draft, dump

CTX = TRUSTED_APPEND_CONTEXT


class TestOrdinalsAndReceipts:
    def test_each_owner_gets_contiguous_ordinals_and_global_commit_numbers(
        self, store: SqlAlchemyTraceStore
    ) -> None:
        first = store.append(CTX, batch("i:1", "exec:a", draft(1), draft(2)))
        second = store.append(CTX, batch("i:2", "exec:b", draft(3)))
        third = store.append(CTX, batch("i:3", "exec:a", draft(4)))
        assert first.owner_ordinal_ranges == {"exec:a": (0, 1)}
        assert first.commit_receipts == ("commit:0", "commit:1")
        assert second.owner_ordinal_ranges == {"exec:b": (0, 0)}
        assert second.commit_receipts == ("commit:2",)
        assert third.owner_ordinal_ranges == {"exec:a": (2, 2)}
        assert (store.head("exec:a"), store.head("exec:b"), store.head("x")) == (
            3,
            1,
            0,
        )
        assert store.max_position() == 3

    def test_a_two_owner_batch_allocates_both_owners_atomically(
        self, store: SqlAlchemyTraceStore
    ) -> None:
        receipt = store.append(
            CTX,
            AppendBatch(
                "i:two",
                (
                    AppendGroup("exec:parent", fact_drafts=(draft(1),)),
                    AppendGroup("exec:child", fact_drafts=(draft(2),)),
                    AppendGroup("exec:parent", fact_drafts=(draft(3),)),
                ),
            ),
        )
        assert receipt.owner_ordinal_ranges == {
            "exec:parent": (0, 1),
            "exec:child": (0, 0),
        }
        assert len(receipt.context_receipts) == 3

    def test_the_same_record_under_two_intents_gets_two_commit_receipts(
        self, store: SqlAlchemyTraceStore
    ) -> None:
        one = store.append(CTX, batch("i:1", "exec:a", draft(7)))
        two = store.append(CTX, batch("i:2", "exec:b", draft(7)))
        assert one.fact_ids == two.fact_ids
        assert one.commit_receipts != two.commit_receipts
        assert store.fact_count() == 3  # root witness, witness, one record

    def test_two_identical_drafts_give_one_record_on_two_entries(
        self, store: SqlAlchemyTraceStore
    ) -> None:
        receipt = store.append(CTX, batch("i:1", "exec:a", draft(1), draft(1)))
        assert receipt.fact_ids[0] == receipt.fact_ids[1]
        prefix = store.read_owner_prefix(TRUSTED_READ_CONTEXT, "exec:a", EVERYTHING)
        assert prefix.owner_paths["exec:a"] == receipt.fact_ids

    def test_an_empty_batch_records_its_intent_with_an_empty_receipt(
        self, store: SqlAlchemyTraceStore
    ) -> None:
        receipt = store.append(
            CTX, AppendBatch("i:empty", (AppendGroup("exec:a"), AppendGroup("exec:b")))
        )
        assert receipt.fact_ids == ()
        assert receipt.owner_ordinal_ranges == {}
        assert store.fact_count() == 0
        assert store.read_append_intent("i:empty") == receipt

    def test_tuple_payloads_can_be_appended_again_under_another_intent(
        self, store: SqlAlchemyTraceStore
    ) -> None:
        payload = {"items": (1, 2, (3, 4))}
        one = store.append(CTX, batch("i:1", "exec:a", draft(payload=payload)))
        two = store.append(CTX, batch("i:2", "exec:b", draft(payload=payload)))
        assert one.fact_ids == two.fact_ids
        record = store.read_fact(TRUSTED_READ_CONTEXT, one.fact_ids[0])
        assert record.payload == {"items": [1, 2, [3, 4]]}  # type: ignore[union-attr]


class TestIdempotency:
    def test_an_exact_replay_returns_the_stored_receipt_and_writes_nothing(
        self, store: SqlAlchemyTraceStore
    ) -> None:
        first = store.append(CTX, batch("i:1", "exec:a", draft(1)))
        before = dump(store)
        again = store.append(CTX, batch("i:1", "exec:a", draft(1)))
        assert again == first
        assert dump(store) == before

    def test_a_replay_with_other_presented_refs_still_returns_the_receipt(
        self, store: SqlAlchemyTraceStore
    ) -> None:
        first = store.append(CTX, batch("i:1", "exec:a", draft(1)))
        other = AppendContext(
            actor_ref=CTX.actor_ref,
            presented_witness_refs=("trusted:internal", "cap:extra"),
        )
        assert store.append(other, batch("i:1", "exec:a", draft(1))) == first

    @pytest.mark.parametrize(
        "changed",
        [
            batch("i:1", "exec:a", draft(2)),
            batch("i:1", "exec:a", draft(1, mode="declaration")),
            batch("i:1", "exec:a", draft(1, label="other")),
            batch("i:1", "exec:b", draft(1)),
        ],
        ids=["payload", "mode", "kind-label", "owner"],
    )
    def test_an_intent_replayed_with_different_content_conflicts_and_changes_nothing(
        self, store: SqlAlchemyTraceStore, changed: AppendBatch
    ) -> None:
        store.append(CTX, batch("i:1", "exec:a", draft(1)))
        before = dump(store)
        with pytest.raises(AppendIntentConflictError, match="append intent 'i:1'"):
            store.append(CTX, changed)
        assert dump(store) == before

    def test_a_different_actor_conflicts(self, store: SqlAlchemyTraceStore) -> None:
        store.append(CTX, batch("i:1", "exec:a", draft(1)))
        other = AppendContext(actor_ref="agent:other", trust_mode="internal")
        with pytest.raises(AppendIntentConflictError):
            store.append(other, batch("i:1", "exec:a", draft(1)))


class TestExpectedHeads:
    def test_a_matching_head_appends(self, store: SqlAlchemyTraceStore) -> None:
        store.append(CTX, batch("i:1", "exec:a", draft(1)))
        receipt = store.append(
            CTX, batch("i:2", "exec:a", draft(2)), expected_heads={"exec:a": 1}
        )
        assert receipt.owner_ordinal_ranges == {"exec:a": (1, 1)}

    def test_a_moved_head_raises_a_retryable_conflict_and_writes_nothing(
        self, store: SqlAlchemyTraceStore
    ) -> None:
        store.append(CTX, batch("i:1", "exec:a", draft(1)))
        before = dump(store)
        with pytest.raises(OrdinalConflictError) as caught:
            store.append(
                CTX, batch("i:2", "exec:a", draft(2)), expected_heads={"exec:a": 0}
            )
        error = caught.value
        assert (error.owner, error.expected, error.actual) == ("exec:a", 0, 1)
        assert dump(store) == before

    def test_an_exact_replay_wins_over_a_stale_expected_head(
        self, store: SqlAlchemyTraceStore
    ) -> None:
        first = store.append(
            CTX, batch("i:1", "exec:a", draft(1)), expected_heads={"exec:a": 0}
        )
        again = store.append(
            CTX, batch("i:1", "exec:a", draft(1)), expected_heads={"exec:a": 0}
        )
        assert again == first


class TestAuthority:
    def test_an_untrusted_append_is_refused_before_any_state_change(
        self, store: SqlAlchemyTraceStore
    ) -> None:
        untrusted = AppendContext(actor_ref="agent:x")
        with pytest.raises(TraceStoreError, match="requires trusted internal witness"):
            store.append(untrusted, batch("i:1", "exec:a", draft(1)))
        assert (store.fact_count(), store.context_count()) == (0, 0)

    def test_a_read_operation_context_cannot_append(
        self, store: SqlAlchemyTraceStore
    ) -> None:
        reader = OperationContext(
            actor_ref="x", operation="read", trust_mode="internal"
        )
        with pytest.raises(TraceStoreError, match="append operation requires"):
            store.append(reader, batch("i:1", "exec:a", draft(1)))

    def test_a_read_context_object_cannot_authorize_a_write(
        self, store: SqlAlchemyTraceStore
    ) -> None:
        with pytest.raises(TypeError):
            store.append(TRUSTED_READ_CONTEXT, batch("i:1", "exec:a", draft(1)))  # type: ignore[arg-type]
        assert store.fact_count() == 0

    @pytest.mark.parametrize(
        "context", [TRUSTED_READ_CONTEXT, None, "trusted", 42], ids=repr
    )
    def test_a_non_context_is_a_trace_store_error_naming_it(
        self, store: SqlAlchemyTraceStore, context: object
    ) -> None:
        # Both what the docstring promises (TraceStoreError) and what the
        # reference raises (a type error), never a bare TypeError.
        with pytest.raises(TraceStoreError, match="Context") as refused:
            store.append(context, batch("i:1", "exec:a", draft(1)))  # type: ignore[arg-type]
        assert isinstance(refused.value, TypeError)
        assert store.fact_count() == 0

    @pytest.mark.parametrize("schema", ["kernel.witness.v1", "kernel.witness.v2"])
    def test_a_witness_schema_on_an_ordinary_path_is_refused(
        self, store: SqlAlchemyTraceStore, schema: str
    ) -> None:
        # verify reads every record of a witness schema as a witness: one on
        # an ordinary path used to append, then fail verify and redact.
        forged = RecordDraft("declaration", schema, {"actor_ref": "me"})
        with pytest.raises(BatchShapeError, match="witness schema"):
            store.append(
                TRUSTED_APPEND_CONTEXT,
                AppendBatch("i:w", (AppendGroup("agent:a", fact_drafts=(forged,)),)),
            )
        assert store.fact_count() == 0
        assert verify_trace(store).ok


BAD_BATCHES = [
    pytest.param(
        batch("i:bad", "exec:a", draft(schema="")),
        BatchShapeError,
        "schema_ref is required",
        id="empty-schema-ref",
    ),
    pytest.param(
        batch("i:bad", "exec:a", draft(mode="observed")),
        BatchShapeError,
        "fact mode must be",
        id="unknown-mode",
    ),
    pytest.param(
        batch("i:bad", "exec:a", draft(parents=("sha256:" + "0" * 64,))),
        UnknownFactError,
        "causal parent does not exist",
        id="unknown-causal-parent",
    ),
    pytest.param(
        batch(
            "i:bad",
            "exec:a",
            draft(1, local_parents=("later",)),
            draft(2, local_id="later"),
        ),
        TraceStoreError,
        "append-local causal parent does not exist: later",
        id="forward-local-ref",
    ),
    pytest.param(
        batch("i:bad", "exec:a", draft(1, local_id="x"), draft(2, local_id="x")),
        BatchShapeError,
        "duplicate append-local id: x",
        id="duplicate-local-id",
    ),
    pytest.param(
        batch("i:bad", WITNESS_OWNER, draft(1)),
        BatchShapeError,
        "witness owner path",
        id="witness-owner-path",
    ),
    pytest.param(
        batch("", "exec:a", draft(1)),
        BatchShapeError,
        "append_intent_id is required",
        id="empty-intent",
    ),
    pytest.param(
        AppendBatch(
            "i:bad", (AppendGroup("exec:a", fact_drafts=(draft(1),)),), "best_effort"
        ),
        BatchShapeError,
        "only supports atomic",
        id="non-atomic",
    ),
    pytest.param(
        batch("i:bad", "", draft(1)),
        BatchShapeError,
        "trace_owner_id is required",
        id="empty-owner",
    ),
    pytest.param(
        batch("i:bad", "exec:a", draft(payload={"x": float("nan")})),
        ValueError,
        "NaN",
        id="nan-payload",
    ),
    pytest.param(
        batch("i:bad", "exec:a", draft(payload={"x": {1, 2}})),
        TypeError,
        "not JSON serializable",
        id="set-payload",
    ),
    pytest.param(
        batch("i:bad", "exec:a", draft(schema="kernel.witness.root.v1")),
        RecordInputError,
        "root witness record must use the empty witness sentinel",
        id="root-witness-schema",
    ),
    pytest.param(
        batch(
            "i:bad",
            "exec:a",
            draft(1, local_id="p"),
            draft(2, local_parents=("p",), parents=()),
            draft(3, local_parents=("p", "p")),
        ),
        BatchShapeError,
        "duplicate causal parent",
        id="duplicate-causal-parent",
    ),
    pytest.param(
        batch("i:bad", "exec:a", draft(1), context="context:missing"),
        TraceStoreError,
        "unknown context id: context:missing",
        id="unknown-context",
    ),
    pytest.param(
        batch(
            "i:bad", "exec:a", draft(1), context=RetainedContextDraft(substrate_ref="")
        ),
        ValueError,
        "witness substrate_ref is required",
        id="empty-substrate",
    ),
    pytest.param(
        batch(
            "i:bad",
            "exec:a",
            draft(1),
            context=RetainedContextDraft(containment="open"),
        ),
        ValueError,
        "witness containment is invalid",
        id="bad-containment",
    ),
]


@pytest.mark.parametrize(("bad", "error", "message"), BAD_BATCHES)
def test_bad_input_is_refused_with_a_clear_error_and_changes_nothing(
    store: SqlAlchemyTraceStore, bad: AppendBatch, error: type[Exception], message: str
) -> None:
    store.append(CTX, batch("i:seed", "exec:a", draft(0)))
    before = dump(store)
    with pytest.raises(error, match=message):
        store.append(CTX, bad)
    assert dump(store) == before
    assert store.read_append_intent("i:bad") is None


def test_a_failing_second_group_leaves_neither_owner_anything(
    store: SqlAlchemyTraceStore,
) -> None:
    bad = AppendBatch(
        "i:atomic",
        (
            AppendGroup("exec:one", fact_drafts=(draft(1),)),
            AppendGroup("exec:two", fact_drafts=(draft(2, schema=""),)),
        ),
    )
    with pytest.raises(BatchShapeError):
        store.append(CTX, bad)
    assert counts(store) == (0, 0, -1)
    assert (store.head("exec:one"), store.head("exec:two")) == (0, 0)


class TestWitnesses:
    def test_the_first_append_retains_the_root_then_the_ordinary_witness(
        self, store: SqlAlchemyTraceStore
    ) -> None:
        receipt = store.append(CTX, batch("i:1", "exec:a", draft(1)))
        witnesses = store.read_owner_prefix(
            TRUSTED_READ_CONTEXT, WITNESS_OWNER, EVERYTHING
        )
        root, ordinary = witnesses.owner_paths[WITNESS_OWNER]
        assert root == root_witness_record_id()
        record = store.read_fact(TRUSTED_READ_CONTEXT, receipt.fact_ids[0])
        assert record.envelope.witness_ref == ordinary
        assert witnesses.facts_by_id[root].fact_kind == "witness_root"
        assert witnesses.facts_by_id[ordinary].fact_kind == "witness"

    def test_another_actor_gets_another_witness_and_another_record_id(
        self, store: SqlAlchemyTraceStore
    ) -> None:
        one = store.append(CTX, batch("i:1", "exec:a", draft(1)))
        other = AppendContext(actor_ref="agent:other", trust_mode="internal")
        two = store.append(other, batch("i:2", "exec:a", draft(1)))
        assert one.fact_ids != two.fact_ids
        assert store.head(WITNESS_OWNER) == 3

    def test_presented_refs_are_not_retained_in_contexts_or_witnesses(
        self, store: SqlAlchemyTraceStore
    ) -> None:
        context = AppendContext(
            actor_ref="agent:a",
            presented_witness_refs=("trusted:internal", "cap:not-retained-implicitly"),
        )
        receipt = store.append(context, batch("i:1", "exec:a", draft(1)))
        retained = store.read_context(receipt.context_receipts[0])
        assert retained.capability_witness_refs == ()
        record = store.read_fact(TRUSTED_READ_CONTEXT, receipt.fact_ids[0])
        witness = store.read_fact(TRUSTED_READ_CONTEXT, record.envelope.witness_ref)
        assert witness.payload["authority_refs"] == []  # type: ignore[union-attr]


class TestContexts:
    def test_a_context_is_reused_by_id_without_a_new_row(
        self, store: SqlAlchemyTraceStore
    ) -> None:
        draft_context = RetainedContextDraft(active_binding_refs=("binding:x",))
        first = store.append(
            CTX, batch("i:1", "exec:a", draft(1), context=draft_context)
        )
        context_id = first.context_receipts[0]
        second = store.append(CTX, batch("i:2", "exec:a", draft(2), context=context_id))
        assert second.context_receipts == (context_id,)
        assert store.context_count() == 1
        assert store.read_context(context_id).active_binding_refs == ("binding:x",)

    def test_the_schema_environment_is_stamped_into_new_contexts_once(
        self, store: SqlAlchemyTraceStore
    ) -> None:
        draft_context = RetainedContextDraft(
            semantic_environment_refs=(
                "schema-set:shepherd2-slice-a",
                "shepherd2-slice-a",
            )
        )
        receipt = store.append(
            CTX, batch("i:1", "exec:a", draft(1), context=draft_context)
        )
        retained = store.read_context(receipt.context_receipts[0])
        assert retained.semantic_environment_refs == (
            "schema-set:shepherd2-slice-a",
            "shepherd2-slice-a",
        )

    def test_reading_an_unknown_context_raises(
        self, store: SqlAlchemyTraceStore
    ) -> None:
        with pytest.raises(TraceStoreError, match="unknown context id: context:nope"):
            store.read_context("context:nope")


class TestPreview:
    def test_preview_returns_the_ids_append_allocates_and_persists_nothing(
        self, store: SqlAlchemyTraceStore
    ) -> None:
        seed = store.append(CTX, batch("i:0", "exec:a", draft(0)))
        the_batch = batch(
            "i:1",
            "exec:a",
            draft(1, local_id="p", parents=seed.fact_ids),
            draft(2, local_parents=("p",)),
            context=RetainedContextDraft(substrate_ref="kv.sqlite.local.v1"),
        )
        before = dump(store)
        preview = store.preview_record_ids(CTX, the_batch)
        assert dump(store) == before
        assert store.append(CTX, the_batch).fact_ids == preview
        assert store.preview_fact_ids(CTX, the_batch) == preview

    def test_preview_does_not_check_parents(self, store: SqlAlchemyTraceStore) -> None:
        ids = store.preview_record_ids(
            CTX, batch("i:1", "exec:a", draft(1, parents=("sha256:" + "1" * 64,)))
        )
        assert len(ids) == 1

    def test_preview_rejects_duplicate_parents_and_unknown_local_refs(
        self, store: SqlAlchemyTraceStore
    ) -> None:
        parent = "sha256:" + "1" * 64
        with pytest.raises(BatchShapeError, match="duplicate causal parent"):
            store.preview_record_ids(
                CTX,
                batch("i:1", "exec:a", draft(1, parents=(parent,)), parents=(parent,)),
            )
        with pytest.raises(TraceStoreError, match="append-local causal parent"):
            store.preview_record_ids(
                CTX, batch("i:1", "exec:a", draft(1, local_parents=("nope",)))
            )
