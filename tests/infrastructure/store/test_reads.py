"""Reads, slices, visibility and the global log (kernel-spec 7, runtime support)."""

from __future__ import annotations

import pytest

from goatherd import (
    TRUSTED_APPEND_CONTEXT,
    TRUSTED_READ_CONTEXT,
    AppendBatch,
    AppendGroup,
    Record,
    TraceStoreError,
)
from goatherd.domain import (
    WITNESS_OWNER,
    OperationContext,
    ReadContext,
    RecordShape,
    UnknownFactError,
    root_witness_record_id,
)
from goatherd.infrastructure.store import SqlAlchemyTraceStore
from tests.infrastructure.store.helpers import EVERYTHING, batch, draft, dump

CTX = TRUSTED_APPEND_CONTEXT
READ = TRUSTED_READ_CONTEXT
SHAPES = ReadContext(actor_ref="viewer", visibility_profile="shape_only")


def _chain(store: SqlAlchemyTraceStore) -> tuple[str, str, str]:
    """Append capture -> declaration -> capture on one owner; return the ids."""
    receipt = store.append(
        CTX,
        batch(
            "i:chain",
            "exec:a",
            draft(1, local_id="one"),
            draft(2, mode="declaration", local_id="two", local_parents=("one",)),
            draft(3, local_parents=("two",)),
        ),
    )
    one, two, three = receipt.fact_ids
    return one, two, three


class TestReadFact:
    def test_an_unknown_id_raises_and_allocates_nothing(
        self, store: SqlAlchemyTraceStore
    ) -> None:
        with pytest.raises(UnknownFactError, match="unknown fact id: sha256:nope"):
            store.read_fact(READ, "sha256:nope")
        assert store.fact_count() == 0

    def test_a_record_is_read_through_its_first_path_entry(
        self, store: SqlAlchemyTraceStore
    ) -> None:
        store.append(CTX, batch("i:1", "owner:b", draft(1)))
        receipt = store.append(CTX, batch("i:2", "owner:a", draft(1, label="again")))
        record = store.read_fact(READ, receipt.fact_ids[0])
        assert isinstance(record, Record)
        assert (record.trace_owner_id, record.owner_ordinal) == ("owner:a", 0)
        assert record.fact_kind == "again"

    def test_shape_only_hides_the_payload_but_keeps_the_kind(
        self, store: SqlAlchemyTraceStore
    ) -> None:
        receipt = store.append(CTX, batch("i:1", "exec:a", draft(1)))
        shape = store.read_fact(SHAPES, receipt.fact_ids[0])
        assert isinstance(shape, RecordShape)
        assert not isinstance(shape, Record)  # type: ignore[unreachable]
        assert shape.fact_kind == "step"

    def test_full_internal_needs_the_trusted_ref_not_the_trust_mode(
        self, store: SqlAlchemyTraceStore
    ) -> None:
        receipt = store.append(CTX, batch("i:1", "exec:a", draft(1)))
        internal = OperationContext(
            actor_ref="x", operation="read", trust_mode="internal"
        )
        with pytest.raises(TraceStoreError, match="full_internal reads require"):
            store.read_fact(internal, receipt.fact_ids[0], "full_internal")
        record = store.read_fact(READ, receipt.fact_ids[0], "full_internal")
        assert isinstance(record, Record)

    def test_an_unknown_visibility_profile_is_a_value_error(
        self, store: SqlAlchemyTraceStore
    ) -> None:
        with pytest.raises(ValueError, match="unknown visibility profile: secret"):
            store.read_fact(READ, "sha256:x", "secret")

    def test_an_append_context_cannot_read(self, store: SqlAlchemyTraceStore) -> None:
        with pytest.raises(TraceStoreError, match="read operation requires"):
            store.read_fact(CTX, "sha256:x")  # type: ignore[arg-type]


class TestOwnerPrefix:
    def test_the_prefix_stops_at_through_and_keeps_path_order(
        self, store: SqlAlchemyTraceStore
    ) -> None:
        one, two, _three = _chain(store)
        prefix = store.read_owner_prefix(READ, "exec:a", 1)
        assert prefix.owner_paths == {"exec:a": (one, two)}
        assert prefix.causal_edges == ((one, two),)
        assert store.read_owner_prefix(READ, "exec:a", -1).facts_by_id == {}
        assert store.read_path_prefix(READ, "nobody", EVERYTHING).owner_paths == {}

    def test_a_mode_filter_keeps_only_that_mode_and_anchors_the_rest(
        self, store: SqlAlchemyTraceStore
    ) -> None:
        one, two, three = _chain(store)
        captures = store.read_owner_prefix(READ, "exec:a", EVERYTHING, "captures_only")
        assert captures.owner_paths == {"exec:a": (one, three)}
        assert captures.causal_edges == ()
        (anchor,) = captures.external_anchors
        assert anchor.ref == two
        assert anchor.hidden_reason == "outside_frontier"
        assert anchor.visible_shape["owner_ordinal"] == 1
        declarations = store.read_owner_prefix(
            READ, "exec:a", EVERYTHING, "declarations_only"
        )
        assert declarations.owner_paths == {"exec:a": (two,)}

    def test_an_unknown_mode_filter_is_a_value_error(
        self, store: SqlAlchemyTraceStore
    ) -> None:
        with pytest.raises(ValueError, match="unknown mode filter: some"):
            store.read_owner_prefix(READ, "exec:a", 1, "some")

    def test_a_parent_on_another_owner_becomes_an_external_anchor(
        self, store: SqlAlchemyTraceStore
    ) -> None:
        parent = store.append(CTX, batch("i:1", "exec:parent", draft(1))).fact_ids[0]
        store.append(CTX, batch("i:2", "exec:child", draft(2), parents=(parent,)))
        child = store.read_owner_prefix(READ, "exec:child", EVERYTHING)
        (anchor,) = child.external_anchors
        assert anchor.ref == parent
        assert anchor.visible_shape == {
            "kind_label": "step",
            "schema_ref": "test.step.v1",
            "trace_owner_id": "exec:parent",
            "owner_ordinal": 0,
            "witness_ref": store.read_fact(READ, parent).envelope.witness_ref,
        }

    def test_payload_reads_carry_contexts_and_the_witness_support(
        self, store: SqlAlchemyTraceStore
    ) -> None:
        receipt = store.append(CTX, batch("i:1", "exec:a", draft(1)))
        prefix = store.read_owner_prefix(READ, "exec:a", EVERYTHING)
        assert list(prefix.contexts_by_id) == list(receipt.context_receipts)
        witness = store.read_fact(READ, receipt.fact_ids[0]).envelope.witness_ref
        assert list(prefix.visible_witnesses_by_id) == [
            witness,
            root_witness_record_id(),
        ]
        assert prefix.witness_anchors == ()
        assert prefix.context_anchors == ()

    def test_shape_only_slices_anchor_contexts_and_witnesses(
        self, store: SqlAlchemyTraceStore
    ) -> None:
        receipt = store.append(CTX, batch("i:1", "exec:a", draft(1)))
        prefix = store.read_owner_prefix(SHAPES, "exec:a", EVERYTHING)
        assert prefix.contexts_by_id == {}
        assert [a.context_id for a in prefix.context_anchors] == list(
            receipt.context_receipts
        )
        ordinary, root = prefix.witness_anchors
        assert ordinary.visible_shape["witness_ref"] == root.witness_ref
        assert root.visible_shape["witness_ref"] == ""
        assert prefix.visible_witnesses_by_id == {}
        assert all(isinstance(r, RecordShape) for r in prefix.facts_by_id.values())

    def test_the_witness_path_can_be_read_like_any_owner(
        self, store: SqlAlchemyTraceStore
    ) -> None:
        store.append(CTX, batch("i:1", "exec:a", draft(1)))
        witnesses = store.read_owner_prefix(READ, WITNESS_OWNER, EVERYTHING)
        assert len(witnesses.owner_paths[WITNESS_OWNER]) == 2
        # Support comes from the selected records' witness refs: only the root.
        assert list(witnesses.visible_witnesses_by_id) == [root_witness_record_id()]


class TestCausalClosure:
    def test_records_come_out_once_by_owner_then_ordinal(
        self, store: SqlAlchemyTraceStore
    ) -> None:
        parent = store.append(CTX, batch("i:1", "exec:parent", draft("step")))
        step = parent.fact_ids[0]
        child = store.append(
            CTX, batch("i:2", "exec:child", draft("child_event"), parents=(step,))
        )
        observed = store.append(
            CTX,
            batch(
                "i:3", "exec:parent", draft("observed"), parents=(child.fact_ids[0],)
            ),
        ).fact_ids[0]
        closure = store.read_causal_closure(READ, [observed])
        assert closure.fact_ids() == (child.fact_ids[0], step, observed)
        assert list(closure.owner_paths) == ["exec:child", "exec:parent"]

    def test_traversal_ignores_the_mode_filter(
        self, store: SqlAlchemyTraceStore
    ) -> None:
        one, two, three = _chain(store)
        closure = store.read_causal_closure(READ, [three], mode_filter="captures_only")
        assert closure.fact_ids() == (one, three)
        assert closure.causal_edges == ()
        assert [a.ref for a in closure.external_anchors] == [two]

    def test_visible_only_drops_anchors_and_makes_no_synthetic_edges(
        self, store: SqlAlchemyTraceStore
    ) -> None:
        _, _, three = _chain(store)
        closure = store.read_causal_closure(
            READ,
            [three],
            mode_filter="captures_only",
            closure_policy="visible_only",
        )
        assert closure.external_anchors == ()
        assert closure.causal_edges == ()

    def test_an_unknown_root_or_policy_raises(
        self, store: SqlAlchemyTraceStore
    ) -> None:
        with pytest.raises(UnknownFactError, match="unknown fact id: sha256:nope"):
            store.read_causal_closure(READ, ["sha256:nope"])
        with pytest.raises(ValueError, match="unknown closure policy: all"):
            store.read_causal_closure(READ, [], closure_policy="all")

    def test_options_are_keyword_only(self, store: SqlAlchemyTraceStore) -> None:
        with pytest.raises(TypeError):
            store.read_causal_closure(READ, [], "payload")  # type: ignore[call-arg]

    def test_empty_roots_give_an_empty_slice(self, store: SqlAlchemyTraceStore) -> None:
        assert store.read_causal_closure(READ, []).facts_by_id == {}


def test_reads_never_write(store: SqlAlchemyTraceStore) -> None:
    _, _, three = _chain(store)
    before = dump(store)
    store.read_owner_prefix(READ, "exec:a", EVERYTHING)
    store.read_causal_closure(READ, [three])
    store.read_log()
    with pytest.raises(UnknownFactError):
        store.read_fact(READ, "sha256:nope")
    assert dump(store) == before


def test_rereading_the_same_state_gives_an_equal_slice(
    store: SqlAlchemyTraceStore,
) -> None:
    _chain(store)
    first = store.read_owner_prefix(READ, "exec:a", EVERYTHING)
    assert store.read_owner_prefix(READ, "exec:a", EVERYTHING) == first


class TestLog:
    def test_positions_are_gap_free_in_commit_order(
        self, store: SqlAlchemyTraceStore
    ) -> None:
        store.append(CTX, batch("i:1", "exec:a", draft(1), draft(2)))
        store.append(CTX, batch("i:2", "exec:b", draft(3, schema="test.other.v1")))
        log = store.read_log()
        assert [e.position for e in log] == [0, 1, 2]
        assert [e.append_intent_id for e in log] == ["i:1", "i:1", "i:2"]
        assert log[2].record.trace_owner_id == "exec:b"
        assert [e.position for e in store.read_log(after=0, limit=1)] == [1]
        other = store.read_log(schema_refs=["test.other.v1"])
        assert [e.position for e in other] == [2]
        assert store.max_position() == 2

    def test_an_empty_store_has_max_position_minus_one(
        self, store: SqlAlchemyTraceStore
    ) -> None:
        assert store.max_position() == -1
        assert store.read_log() == ()

    def test_scan_by_schema_lists_every_path_entry_by_path_then_ordinal(
        self, store: SqlAlchemyTraceStore
    ) -> None:
        store.append(
            CTX,
            AppendBatch(
                "i:1",
                (
                    AppendGroup("owner:b", fact_drafts=(draft(1, schema="s.v1"),)),
                    AppendGroup("owner:a", fact_drafts=(draft(1, schema="s.v1"),)),
                    AppendGroup("owner:a", fact_drafts=(draft(2, schema="t.v1"),)),
                ),
            ),
        )
        scanned = store.scan_records_by_schema("s.v1")
        assert [(e.record.trace_owner_id, e.position) for e in scanned] == [
            ("owner:a", 1),
            ("owner:b", 0),
        ]
