"""Materialization values: request validation, the pinned digest, receipts."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from goatherd.domain import (
    MAX_OWNER_ORDINAL,
    MaterializationOutcome,
    MaterializationReceipt,
    MaterializationRequest,
    MaterializationRequestError,
    OperationContext,
    materialization_request_digest,
)
from tests.conformance.vectors import load_vectors

VECTORS = load_vectors("materialize_vectors_v0.json")


def _request(**changes: object) -> MaterializationRequest:
    fields: dict[str, object] = {
        "append_intent_id": "i",
        "target_trace_owner_id": "o",
        "target_record_ids": ("sha256:a",),
    }
    fields.update(changes)
    return MaterializationRequest(**fields)  # type: ignore[arg-type]


class TestRequest:
    def test_the_defaults_read_everything_and_capture_on_the_target_owner(
        self,
    ) -> None:
        request = _request()
        assert request.target_through_owner_ordinal == MAX_OWNER_ORDINAL == 2**63 - 1
        assert request.capture_owner == "o"
        assert _request(capture_trace_owner_id="c").capture_owner == "c"

    @pytest.mark.parametrize(
        ("changes", "message"),
        [
            ({"append_intent_id": ""}, "append_intent_id is required"),
            ({"target_trace_owner_id": ""}, "target_trace_owner_id is required"),
            (
                {"target_record_ids": ()},
                "materialize requires at least one target record id",
            ),
            ({"capture_trace_owner_id": ""}, "capture_trace_owner_id cannot be empty"),
            ({"target_through_owner_ordinal": -1}, "must be >= 0"),
        ],
    )
    def test_a_malformed_request_is_refused_with_the_reference_message(
        self, changes: dict[str, object], message: str
    ) -> None:
        with pytest.raises(MaterializationRequestError, match=message):
            _request(**changes).validate()

    def test_ordinal_zero_is_a_real_cutoff(self) -> None:
        _request(target_through_owner_ordinal=0).validate()


class TestRequestDigest:
    @pytest.mark.parametrize(
        "vector", VECTORS["request_digests"], ids=lambda v: v["digest"][:8]
    )
    def test_the_digest_matches_the_reference_vectors(self, vector) -> None:
        raw = vector["request"]
        request = MaterializationRequest(
            append_intent_id=raw["append_intent_id"],
            target_trace_owner_id=raw["target_trace_owner_id"],
            target_record_ids=tuple(raw["target_record_ids"]),
            target_through_owner_ordinal=raw["target_through_owner_ordinal"],
            capture_trace_owner_id=raw["capture_trace_owner_id"],
        )
        context = OperationContext(
            actor_ref=raw["actor_ref"],
            operation="materialize",
            presented_authority_refs=tuple(raw["authority_refs"]),
            schema_environment_ref=raw["schema_environment_ref"],
            trust_mode=raw["trust_mode"],
        )
        assert materialization_request_digest(request, context) == vector["digest"]

    def test_an_empty_trust_mode_digests_like_an_unset_one(self) -> None:
        ctx = OperationContext("a", "materialize", trust_mode=None)
        empty = OperationContext("a", "materialize", trust_mode="")
        request = _request()
        assert materialization_request_digest(
            request, ctx
        ) == materialization_request_digest(request, empty)

    def test_the_visibility_is_not_part_of_the_digest(self) -> None:
        a = OperationContext("a", "materialize", visibility_profile="payload")
        b = OperationContext("a", "materialize", visibility_profile="shape_only")
        assert materialization_request_digest(
            _request(), a
        ) == materialization_request_digest(_request(), b)

    def test_every_request_field_changes_the_digest(self) -> None:
        ctx = OperationContext("a", "materialize")
        base = materialization_request_digest(_request(), ctx)
        for changes in (
            {"append_intent_id": "j"},
            {"target_trace_owner_id": "p"},
            {"target_record_ids": ("sha256:b",)},
            {"target_through_owner_ordinal": 3},
            {"capture_trace_owner_id": "o"},
        ):
            assert materialization_request_digest(_request(**changes), ctx) != base


class TestReceipt:
    @pytest.mark.parametrize("name", ["echo_sequence", "kv_sequence"])
    def test_a_vector_receipt_round_trips_through_the_ledger_json(
        self, name: str
    ) -> None:
        raw = VECTORS[name]["receipt"]
        receipt = MaterializationReceipt.from_dict(raw)
        assert receipt.to_dict() == raw
        assert MaterializationReceipt.from_json(receipt.to_json()) == receipt

    def test_the_ledger_json_is_ascii_and_keeps_int_and_float_apart(self) -> None:
        receipt = MaterializationReceipt(
            MaterializationOutcome.SPLIT_STATE,
            "s",
            ("t",),
            failure_reason="r\u00fcck",
            world_side_anchors=({"n": 1, "f": 1.0},),
        )
        text = receipt.to_json()
        assert text.isascii()
        assert "\\u00fc" in text
        again = MaterializationReceipt.from_json(text)
        (anchor,) = again.world_side_anchors
        assert type(anchor["n"]) is int
        assert type(anchor["f"]) is float
        assert again == receipt

    def test_a_stored_receipt_that_is_not_an_object_is_refused(self) -> None:
        with pytest.raises(MaterializationRequestError, match="not a JSON object"):
            MaterializationReceipt.from_json("[1]")
        with pytest.raises(MaterializationRequestError, match="anchors"):
            MaterializationReceipt.from_dict(
                {"outcome": "success", "substrate_ref": "s", "world_side_anchors": [1]}
            )

    @given(
        st.sampled_from(list(MaterializationOutcome)),
        st.lists(st.text(), max_size=3),
        st.text(),
    )
    def test_any_receipt_round_trips(self, outcome, ids, reason) -> None:
        receipt = MaterializationReceipt(
            outcome, "s", tuple(ids), tuple(reversed(ids)), reason
        )
        try:
            text = receipt.to_json()
        except ValueError:
            return  # lone surrogates are not JSON; the encoder refuses them
        assert MaterializationReceipt.from_json(text) == receipt
