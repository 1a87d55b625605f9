"""The kernel seed's validators, public: ``ValidateMode``, ``ValidateSchemaRef``,
``ValidateWitnessRef``, ``ValidateWitnessBody``, ``ValidateRootWitnessRecord``.

Each accepts what the ABI accepts and refuses the rest with one line naming
the rule (and the type, for a value of the wrong type). The record identity
(``canonical_record_input``) runs them in the reference's order, so a record
breaking two rules is refused for the first.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

import goatherd.domain
from goatherd.domain import (
    RECORD_MODES,
    ROOT_WITNESS_REF,
    ROOT_WITNESS_SCHEMA_REF,
    WITNESS_SCHEMA_REF,
    RecordInputError,
    canonical_record_input,
    root_witness_body,
    validate_mode,
    validate_root_witness_record,
    validate_schema_ref,
    validate_witness_body,
    validate_witness_ref,
)

WRONG_TYPES = [None, 1, 1.5, b"capture", ["capture"], {"mode": "capture"}]
SHA = "sha256:" + "ab" * 32


def test_the_validators_are_public_under_their_python_names() -> None:
    for name in (
        "validate_mode",
        "validate_schema_ref",
        "validate_witness_ref",
        "validate_witness_body",
        "validate_root_witness_record",
    ):
        assert name in goatherd.domain.__all__
        assert callable(getattr(goatherd.domain, name))


class TestValidateMode:
    @pytest.mark.parametrize("mode", RECORD_MODES)
    def test_the_two_modes_pass(self, mode: str) -> None:
        validate_mode(mode)

    @given(st.text().filter(lambda text: text not in RECORD_MODES))
    def test_any_other_text_is_refused(self, mode: str) -> None:
        with pytest.raises(RecordInputError) as caught:
            validate_mode(mode)
        assert str(caught.value) == "mode must be 'capture' or 'declaration'"

    @pytest.mark.parametrize("mode", WRONG_TYPES)
    def test_a_value_of_another_type_is_refused_naming_its_type(
        self, mode: object
    ) -> None:
        with pytest.raises(RecordInputError) as caught:
            validate_mode(mode)
        assert str(caught.value) == (
            f"mode must be 'capture' or 'declaration', got {type(mode).__name__}"
        )

    def test_the_subject_names_the_field(self) -> None:
        with pytest.raises(RecordInputError, match=r"^fact mode must be"):
            validate_mode("Capture", subject="fact mode")


class TestValidateSchemaRef:
    @given(st.text(min_size=1))
    def test_any_non_empty_text_passes(self, schema_ref: str) -> None:
        validate_schema_ref(schema_ref)

    def test_the_empty_ref_is_refused(self) -> None:
        with pytest.raises(RecordInputError) as caught:
            validate_schema_ref("")
        assert str(caught.value) == "schema_ref is required"

    @pytest.mark.parametrize("schema_ref", WRONG_TYPES)
    def test_a_value_of_another_type_is_refused_naming_its_type(
        self, schema_ref: object
    ) -> None:
        with pytest.raises(RecordInputError) as caught:
            validate_schema_ref(schema_ref)
        assert str(caught.value) == (
            f"schema_ref must be a string, got {type(schema_ref).__name__}"
        )


class TestValidateWitnessRef:
    @pytest.mark.parametrize("witness", [ROOT_WITNESS_REF, SHA, "sha256:"])
    def test_a_digest_or_the_root_sentinel_passes(self, witness: str) -> None:
        validate_witness_ref(witness)

    @pytest.mark.parametrize("witness", ["md5:x", "SHA256:x", " sha256:x", "x"])
    def test_anything_else_is_refused(self, witness: str) -> None:
        with pytest.raises(RecordInputError) as caught:
            validate_witness_ref(witness)
        assert str(caught.value) == (
            "witness must be a sha256 digest or the root sentinel"
        )

    @pytest.mark.parametrize("witness", WRONG_TYPES)
    def test_a_value_of_another_type_is_refused_naming_its_type(
        self, witness: object
    ) -> None:
        with pytest.raises(RecordInputError, match=f"got {type(witness).__name__}$"):
            validate_witness_ref(witness)


class TestValidateWitnessBody:
    def test_the_root_body_is_a_valid_witness_body(self) -> None:
        validate_witness_body(ROOT_WITNESS_SCHEMA_REF, root_witness_body())
        validate_witness_body(WITNESS_SCHEMA_REF, root_witness_body())

    def test_extra_keys_are_allowed(self) -> None:
        validate_witness_body(WITNESS_SCHEMA_REF, {**root_witness_body(), "x": 1})

    def test_missing_fields_are_named_sorted(self) -> None:
        body = root_witness_body()
        del body["substrate_ref"], body["actor_ref"]
        with pytest.raises(RecordInputError) as caught:
            validate_witness_body(WITNESS_SCHEMA_REF, body)
        assert str(caught.value) == (
            "witness body missing required fields: actor_ref, substrate_ref"
        )

    @pytest.mark.parametrize(
        ("field", "value", "message"),
        [
            ("containment", "open", "witness containment is invalid"),
            ("containment", ["full"], "witness containment is invalid"),
            ("substrate_ref", "", "witness substrate_ref is required"),
            ("substrate_ref", None, "witness substrate_ref is required"),
        ],
    )
    def test_containment_and_substrate_are_checked(
        self, field: str, value: object, message: str
    ) -> None:
        with pytest.raises(RecordInputError) as caught:
            validate_witness_body(
                WITNESS_SCHEMA_REF, {**root_witness_body(), field: value}
            )
        assert str(caught.value) == message

    @pytest.mark.parametrize("body", [None, [], "body", 3])
    def test_a_witness_body_that_is_no_object_is_refused(self, body: object) -> None:
        with pytest.raises(RecordInputError) as caught:
            validate_witness_body(WITNESS_SCHEMA_REF, body)  # type: ignore[arg-type]
        assert str(caught.value) == (
            f"witness body must be a JSON object, got {type(body).__name__}"
        )

    def test_bodies_of_other_schemas_are_not_checked(self) -> None:
        validate_witness_body("app.step.v1", {})

    def test_the_schema_ref_is_checked_first(self) -> None:
        with pytest.raises(RecordInputError, match=r"^schema_ref is required$"):
            validate_witness_body("", {})


class TestValidateRootWitnessRecord:
    def test_the_root_witness_record_passes(self) -> None:
        validate_root_witness_record(
            ROOT_WITNESS_SCHEMA_REF, "capture", root_witness_body(), (), ""
        )

    def test_an_ordinary_record_citing_a_witness_passes(self) -> None:
        validate_root_witness_record("app.step.v1", "declaration", {}, (SHA,), SHA)

    @pytest.mark.parametrize(
        ("args", "message"),
        [
            (
                ("app.step.v1", "capture", {}, (), ""),
                "empty witness sentinel is legal only for the root witness record",
            ),
            (
                (ROOT_WITNESS_SCHEMA_REF, "declaration", root_witness_body(), (), ""),
                "root witness record mode must be 'capture'",
            ),
            (
                (ROOT_WITNESS_SCHEMA_REF, "capture", root_witness_body(), (SHA,), ""),
                "root witness record cannot have causal parents",
            ),
            (
                (ROOT_WITNESS_SCHEMA_REF, "capture", {}, (), ""),
                "root witness record body must equal root_witness_body()",
            ),
            (
                (ROOT_WITNESS_SCHEMA_REF, "capture", None, (), ""),
                "root witness record body must equal root_witness_body()",
            ),
            (
                (ROOT_WITNESS_SCHEMA_REF, "capture", root_witness_body(), (), SHA),
                "root witness record must use the empty witness sentinel",
            ),
        ],
    )
    def test_each_broken_rule_is_named(
        self, args: tuple[object, ...], message: str
    ) -> None:
        with pytest.raises(RecordInputError) as caught:
            validate_root_witness_record(*args)  # type: ignore[arg-type]
        assert str(caught.value) == message


class TestTheRecordIdentityRunsThemInOrder:
    """``canonical_record_input`` is the validators in the reference's order."""

    @pytest.mark.parametrize(
        ("args", "first"),
        [
            (("", "sideways", {}, (), "md5:x"), "schema_ref is required"),
            (("s", "sideways", {}, (), "md5:x"), "mode must be"),
            (("s", "capture", {}, (), "md5:x"), "witness must be"),
            (("s", "capture", {}, (), ""), "empty witness sentinel"),
        ],
    )
    def test_the_first_broken_rule_is_the_one_reported(
        self, args: tuple[object, ...], first: str
    ) -> None:
        with pytest.raises(RecordInputError, match=f"^{first}"):
            canonical_record_input(*args)  # type: ignore[arg-type]

    @given(
        schema_ref=st.one_of(st.text(max_size=8), st.none(), st.integers()),
        mode=st.one_of(st.sampled_from(RECORD_MODES), st.text(max_size=8)),
        witness=st.one_of(st.just(""), st.just(SHA), st.text(max_size=8)),
    )
    def test_a_record_is_accepted_exactly_when_every_validator_accepts_it(
        self, schema_ref: object, mode: str, witness: str
    ) -> None:
        body: dict[str, object] = {}
        expected: str | None = None
        for check in (
            lambda: validate_schema_ref(schema_ref),
            lambda: validate_mode(mode),
            lambda: validate_witness_ref(witness),
            lambda: validate_root_witness_record(
                schema_ref,  # type: ignore[arg-type]
                mode,
                body,
                (),
                witness,
            ),
        ):
            try:
                check()
            except RecordInputError as error:
                expected = str(error)
                break
        if expected is None:
            canonical_record_input(schema_ref, mode, body, (), witness)  # type: ignore[arg-type]
            return
        with pytest.raises(RecordInputError) as caught:
            canonical_record_input(schema_ref, mode, body, (), witness)  # type: ignore[arg-type]
        assert str(caught.value) == expected
