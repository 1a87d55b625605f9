"""Identity and canonical JSON: the exact errors a caller sees for bad input.

The witness messages are the reference's (other implementations print the same
text); the canonical errors name the path of the offending value. Both are
promises, so they are asserted verbatim.
"""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from goatherd.domain.canonical import (
    canonical_json_ascii_bytes,
    canonical_json_text,
    storage_digest,
)
from goatherd.domain.errors import (
    CanonicalTypeError,
    CanonicalValueError,
    RecordInputError,
)
from goatherd.domain.identity import (
    ROOT_WITNESS_SCHEMA_REF,
    WITNESS_SCHEMA_REF,
    record_digest,
    root_witness_body,
    validate_witness_body,
    witness_body_digest,
)


class TestWitnessBodyMessages:
    def test_an_empty_schema_ref_is_refused_with_the_reference_message(self) -> None:
        with pytest.raises(RecordInputError) as caught:
            validate_witness_body("", root_witness_body())
        assert str(caught.value) == "schema_ref is required"

    def test_missing_fields_are_listed_sorted(self) -> None:
        body = root_witness_body()
        del body["substrate_ref"], body["authority_refs"]
        with pytest.raises(RecordInputError) as caught:
            validate_witness_body(WITNESS_SCHEMA_REF, body)
        assert str(caught.value) == (
            "witness body missing required fields: authority_refs, substrate_ref"
        )

    def test_an_unknown_containment_is_refused(self) -> None:
        body = root_witness_body() | {"containment": "partial"}
        with pytest.raises(RecordInputError) as caught:
            validate_witness_body(ROOT_WITNESS_SCHEMA_REF, body)
        assert str(caught.value) == "witness containment is invalid"

    def test_an_empty_substrate_is_refused(self) -> None:
        body = root_witness_body() | {"substrate_ref": ""}
        with pytest.raises(RecordInputError) as caught:
            validate_witness_body(WITNESS_SCHEMA_REF, body)
        assert str(caught.value) == "witness substrate_ref is required"

    def test_a_bad_value_in_a_witness_body_is_named_under_witness(self) -> None:
        body = root_witness_body() | {"extra": float("nan")}
        with pytest.raises(CanonicalValueError) as caught:
            witness_body_digest(WITNESS_SCHEMA_REF, body)
        assert caught.value.path == "witness.body.extra"


class TestCanonicalErrorsNameThePath:
    def test_a_lone_surrogate_in_text_output_is_refused_with_its_code_point(
        self,
    ) -> None:
        with pytest.raises(CanonicalValueError) as caught:
            canonical_json_text({"note": "caf\u00e9 \ud800"}, root="args")
        assert caught.value.path == "args.note"
        assert caught.value.reason == (
            "lone surrogate U+D800 at index 5 is not valid text"
        )

    def test_non_ascii_text_without_surrogates_is_kept_verbatim(self) -> None:
        assert canonical_json_text({"b": "\u00e9", "a": 1}) == '{"a":1,"b":"\u00e9"}'

    def test_a_storage_digest_names_its_root_value(self) -> None:
        with pytest.raises(CanonicalValueError) as caught:
            storage_digest({"x": float("inf")})
        assert caught.value.path == "value.x"
        assert storage_digest({"x": 1}) == hashlib.sha256(b'{"x":1}').hexdigest()

    def test_a_storage_digest_passes_a_chosen_root_on(self) -> None:
        with pytest.raises(CanonicalValueError) as caught:
            storage_digest([1, "\udfff"], root="content")
        assert str(caught.value) == (
            "content[1]: lone surrogate U+DFFF at index 0 is not valid text"
        )

    def test_a_dict_subclass_with_a_non_string_key_is_refused(self) -> None:
        class Labels(dict[object, object]):
            pass

        # The JSON encoder would quietly turn the key 1 into "1".
        with pytest.raises(CanonicalTypeError) as caught:
            canonical_json_ascii_bytes({"labels": Labels({1: "a"})}, root="payload")
        assert str(caught.value) == (
            "payload.labels[1]: object key of type int (keys must be strings)"
        )


ROOT_BODY = root_witness_body()
WITNESS = "sha256:" + "ab" * 32


class TestRecordInputMessages:
    @pytest.mark.parametrize(
        ("args", "message"),
        [
            (("", "capture", {}, (), WITNESS), "schema_ref is required"),
            (
                ("s", "guess", {}, (), WITNESS),
                "mode must be 'capture' or 'declaration'",
            ),
            (
                ("s", "capture", {}, (), "md5:00"),
                "witness must be a sha256 digest or the root sentinel",
            ),
            (
                ("s", "capture", {}, (), ""),
                "empty witness sentinel is legal only for the root witness record",
            ),
            (
                (ROOT_WITNESS_SCHEMA_REF, "declaration", ROOT_BODY, (), ""),
                "root witness record mode must be 'capture'",
            ),
            (
                (ROOT_WITNESS_SCHEMA_REF, "capture", ROOT_BODY, (WITNESS,), ""),
                "root witness record cannot have causal parents",
            ),
            (
                (ROOT_WITNESS_SCHEMA_REF, "capture", {"other": 1}, (), ""),
                "root witness record body must equal root_witness_body()",
            ),
            (
                (ROOT_WITNESS_SCHEMA_REF, "capture", ROOT_BODY, (), WITNESS),
                "root witness record must use the empty witness sentinel",
            ),
        ],
    )
    def test_each_abi_rule_is_refused_with_the_reference_message(
        self, args: tuple[Any, ...], message: str
    ) -> None:
        with pytest.raises(RecordInputError) as caught:
            record_digest(*args)
        assert str(caught.value) == message

    def test_a_bad_value_in_a_record_body_is_named_under_record(self) -> None:
        with pytest.raises(CanonicalValueError) as caught:
            record_digest("s", "capture", {"x": [float("nan")]}, (), WITNESS)
        assert caught.value.path == "record.body.x[0]"
