"""Record and witness canonical inputs follow the ABI's validation rules."""

from __future__ import annotations

import pytest

import goatherd
from goatherd.domain import RecordInputError, identity


class TestRecordInputRules:
    @pytest.mark.parametrize(
        ("args", "message"),
        [
            (("", "capture", {}, (), "sha256:x"), "schema_ref is required"),
            (("s", "sideways", {}, (), "sha256:x"), "mode must be"),
            (("s", "capture", {}, (), "md5:x"), "witness must be a sha256"),
            (("s", "capture", {}, (), ""), "empty witness sentinel is legal only"),
            (
                ("kernel.witness.root.v1", "capture", {}, (), "sha256:x"),
                "root witness record must use the empty witness sentinel",
            ),
            (
                ("kernel.witness.root.v1", "declaration", {}, (), ""),
                "root witness record mode must be 'capture'",
            ),
            (
                ("kernel.witness.root.v1", "capture", {}, ("sha256:p",), ""),
                "root witness record cannot have causal parents",
            ),
            (
                ("kernel.witness.root.v1", "capture", {"a": 1}, (), ""),
                "root witness record body must equal",
            ),
        ],
    )
    def test_a_broken_rule_raises_with_the_reference_message(
        self, args: tuple[object, ...], message: str
    ) -> None:
        with pytest.raises(RecordInputError, match=message):
            identity.canonical_record_input(*args)  # type: ignore[arg-type]


class TestWitnessBodies:
    def test_a_kernel_witness_body_needs_all_eight_fields(self) -> None:
        with pytest.raises(RecordInputError, match="containment, substrate_ref"):
            goatherd.domain.witness_body_digest(
                "kernel.witness.v1",
                {
                    k: []
                    for k in goatherd.domain.WITNESS_BODY_FIELDS
                    if k not in {"containment", "substrate_ref"}
                },
            )

    def test_containment_and_substrate_are_checked(self) -> None:
        body = goatherd.domain.root_witness_body()
        with pytest.raises(RecordInputError, match="containment is invalid"):
            goatherd.domain.witness_body_digest(
                "kernel.witness.v1", {**body, "containment": "x"}
            )
        with pytest.raises(RecordInputError, match="substrate_ref is required"):
            goatherd.domain.witness_body_digest(
                "kernel.witness.v1", {**body, "substrate_ref": ""}
            )

    def test_other_schemas_are_not_checked(self) -> None:
        assert goatherd.domain.witness_body_digest("custom.witness", {}).startswith(
            "sha256:"
        )


class TestDerivedIds:
    def test_execution_and_relation_ids_hash_the_raw_string(self) -> None:
        assert goatherd.domain.execution_id_for("i").startswith("exec:")
        assert len(goatherd.domain.execution_id_for("i")) == 5 + 32
        assert goatherd.domain.relation_id_for("i").startswith("rel:")
        assert goatherd.domain.execution_id_for(
            "i", "a"
        ) != goatherd.domain.execution_id_for("i", "b")


class TestWorkspaceState:
    def test_the_digest_ignores_key_order(self) -> None:
        one = goatherd.WorkspaceState("git", "abc", {"a": 1, "b": 2})
        two = goatherd.WorkspaceState("git", "abc", {"b": 2, "a": 1})
        assert one.digest() == two.digest()

    def test_no_data_digests_as_null(self) -> None:
        state = goatherd.WorkspaceState("git", "abc")
        assert state.digest() == goatherd.canonical_digest(
            {"backend": "git", "revision": "abc", "data": None}
        )

    def test_undigestible_data_is_refused_at_construction(self) -> None:
        with pytest.raises(
            goatherd.domain.CanonicalTypeError, match=r"workspace_state\.data\.b"
        ):
            goatherd.WorkspaceState("git", "abc", {"b": b"raw"})

    def test_the_record_form_round_trips(self) -> None:
        state = goatherd.WorkspaceState("memory", "r1", {"files": {"a": "x"}})
        assert goatherd.WorkspaceState.from_json(state.to_json()) == state
