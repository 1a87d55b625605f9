"""Record and witness identity (kernel-spec section 3 and 2.4).

A record id is the canonical digest of the six-key canonical record input; a
witness body digest is the canonical digest of the three-key witness input.
Execution and relation ids are *not* canonical JSON: they hash the raw string
``intent NUL local_ref`` (the vectors pin this, so nobody "fixes" it).

Everything here is pure and deterministic.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

from goatherd.domain.canonical import canonical_digest, sha256_hex
from goatherd.domain.errors import RecordInputError

__all__ = [
    "CONTAINMENT_VALUES",
    "RECORD_MODES",
    "ROOT_WITNESS_REF",
    "ROOT_WITNESS_SCHEMA_REF",
    "WITNESS_BODY_FIELDS",
    "WITNESS_SCHEMA_REF",
    "canonical_record_input",
    "canonical_witness_input",
    "execution_id_for",
    "record_digest",
    "relation_id_for",
    "root_witness_body",
    "root_witness_body_digest",
    "root_witness_record_id",
    "validate_mode",
    "validate_root_witness_record",
    "validate_schema_ref",
    "validate_witness_body",
    "validate_witness_ref",
    "witness_body_digest",
]

ROOT_WITNESS_SCHEMA_REF: Final = "kernel.witness.root.v1"
WITNESS_SCHEMA_REF: Final = "kernel.witness.v1"
ROOT_WITNESS_REF: Final = ""
RECORD_MODES: Final = ("capture", "declaration")
CONTAINMENT_VALUES: Final = ("full", "contained", "buffered", "uncontained")
WITNESS_BODY_FIELDS: Final = (
    "actor_ref",
    "authority_refs",
    "active_binding_refs",
    "semantic_environment_refs",
    "visibility_policy_refs",
    "provenance_policy_refs",
    "substrate_ref",
    "containment",
)


def root_witness_body() -> dict[str, object]:
    """Return a fresh copy of the fixed root witness body (kernel-spec 3.2)."""
    return {
        "active_binding_refs": [],
        "actor_ref": "kernel:root",
        "authority_refs": [],
        "containment": "full",
        "provenance_policy_refs": [],
        "semantic_environment_refs": [],
        "substrate_ref": "kernel",
        "visibility_policy_refs": [],
    }


def validate_schema_ref(schema_ref: object) -> None:
    """Check that a schema ref is a non-empty string (the seed's ``ValidateSchemaRef``).

    Raises:
        RecordInputError: ``schema_ref is required``, or naming the wrong type.
    """
    if not isinstance(schema_ref, str):
        raise RecordInputError(
            f"schema_ref must be a string, got {type(schema_ref).__name__}"
        )
    if not schema_ref:
        raise RecordInputError("schema_ref is required")


def validate_mode(mode: object, *, subject: str = "mode") -> None:
    """Check that a record mode is ``capture`` or ``declaration`` (``ValidateMode``).

    ``subject`` names the field in the message (the store says ``fact mode``).

    Raises:
        RecordInputError: ``<subject> must be 'capture' or 'declaration'``.
    """
    if not isinstance(mode, str):
        raise RecordInputError(
            f"{subject} must be 'capture' or 'declaration', got {type(mode).__name__}"
        )
    if mode not in RECORD_MODES:
        raise RecordInputError(f"{subject} must be 'capture' or 'declaration'")


def validate_witness_ref(witness: object) -> None:
    """Check a record's witness reference (the seed's ``ValidateWitnessRef``).

    It is a retained witness's record id (``sha256:...``) or the root
    sentinel ``""``, which only the root witness record may use (see
    :func:`validate_root_witness_record`).

    Raises:
        RecordInputError: with the reference's message.
    """
    if not isinstance(witness, str):
        raise RecordInputError(
            "witness must be a sha256 digest or the root sentinel, "
            f"got {type(witness).__name__}"
        )
    if witness != ROOT_WITNESS_REF and not witness.startswith("sha256:"):
        raise RecordInputError("witness must be a sha256 digest or the root sentinel")


def validate_root_witness_record(
    schema_ref: str,
    mode: str,
    body: Mapping[str, object],
    caused_by: Sequence[str],
    witness: str,
) -> None:
    """Check the root witness rules (the seed's ``ValidateRootWitnessRecord``).

    The empty witness sentinel is legal only for the root witness record,
    which must be a parentless capture of exactly :func:`root_witness_body`;
    and the root witness schema must use the sentinel.

    Raises:
        RecordInputError: naming the broken rule (the reference's messages).
    """
    if witness == ROOT_WITNESS_REF:
        if schema_ref != ROOT_WITNESS_SCHEMA_REF:
            raise RecordInputError(
                "empty witness sentinel is legal only for the root witness record"
            )
        if mode != "capture":
            raise RecordInputError("root witness record mode must be 'capture'")
        if caused_by:
            raise RecordInputError("root witness record cannot have causal parents")
        if not isinstance(body, Mapping) or dict(body) != root_witness_body():
            raise RecordInputError(
                "root witness record body must equal root_witness_body()"
            )
    elif schema_ref == ROOT_WITNESS_SCHEMA_REF:
        raise RecordInputError(
            "root witness record must use the empty witness sentinel"
        )


def validate_witness_body(schema_ref: str, body: Mapping[str, object]) -> None:
    """Check a witness body before it is digested (the seed's ``ValidateWitnessBody``).

    Bodies of the two kernel witness schemas need all eight fields, a known
    containment and a non-empty substrate; extra keys are allowed. Bodies of
    other schemas are not checked.

    Raises:
        RecordInputError: with the reference's message.
    """
    validate_schema_ref(schema_ref)
    if schema_ref not in (ROOT_WITNESS_SCHEMA_REF, WITNESS_SCHEMA_REF):
        return
    if not isinstance(body, Mapping):
        raise RecordInputError(
            f"witness body must be a JSON object, got {type(body).__name__}"
        )
    missing = sorted(field for field in WITNESS_BODY_FIELDS if field not in body)
    if missing:
        raise RecordInputError(
            "witness body missing required fields: " + ", ".join(missing)
        )
    if body["containment"] not in CONTAINMENT_VALUES:
        raise RecordInputError("witness containment is invalid")
    if not body["substrate_ref"]:
        raise RecordInputError("witness substrate_ref is required")


def canonical_witness_input(
    schema_ref: str, body: Mapping[str, object]
) -> dict[str, object]:
    """Build ``{"body", "kind": "witness", "schema_ref"}`` after validating the body."""
    validate_witness_body(schema_ref, body)
    return {"body": dict(body), "kind": "witness", "schema_ref": schema_ref}


def witness_body_digest(schema_ref: str, body: Mapping[str, object]) -> str:
    """Return the canonical digest of a witness body (a comparison fixture only).

    Records never cite it: they cite the witness's *record id*.
    """
    return canonical_digest(canonical_witness_input(schema_ref, body), root="witness")


def canonical_record_input(
    schema_ref: str,
    mode: str,
    body: Mapping[str, object],
    caused_by: Sequence[str] = (),
    witness: str = ROOT_WITNESS_REF,
) -> dict[str, object]:
    """Build the six-key canonical record input after the ABI's validation order.

    The validators run in the reference's order: schema ref, mode, witness
    reference, root witness rules.

    Raises:
        RecordInputError: for an empty schema, an unknown mode, a malformed
            witness reference or a broken root-witness rule.
    """
    validate_schema_ref(schema_ref)
    validate_mode(mode)
    validate_witness_ref(witness)
    validate_root_witness_record(schema_ref, mode, body, caused_by, witness)
    return {
        "body": dict(body),
        "caused_by": list(caused_by),
        "kind": "record",
        "mode": mode,
        "schema_ref": schema_ref,
        "witness": witness,
    }


def record_digest(
    schema_ref: str,
    mode: str,
    body: Mapping[str, object],
    caused_by: Sequence[str] = (),
    witness: str = ROOT_WITNESS_REF,
) -> str:
    """Return the record id: the canonical digest of the canonical record input."""
    record_input = canonical_record_input(schema_ref, mode, body, caused_by, witness)
    return canonical_digest(record_input, root="record")


def root_witness_record_id() -> str:
    """Return the retained root witness record id (``sha256:4826dd37...``)."""
    return _ROOT_WITNESS_RECORD_ID


def root_witness_body_digest() -> str:
    """Return the root witness body digest (``sha256:28aa527e...``)."""
    return witness_body_digest(ROOT_WITNESS_SCHEMA_REF, root_witness_body())


def execution_id_for(append_intent_id: str, local_ref: str = "execution") -> str:
    """Derive ``exec:`` + 32 hex of SHA-256 over ``intent NUL local_ref`` (UTF-8)."""
    return "exec:" + sha256_hex(f"{append_intent_id}\0{local_ref}")[:32]


def relation_id_for(append_intent_id: str, local_ref: str = "relation") -> str:
    """Derive ``rel:`` + 32 hex of SHA-256 over ``intent NUL local_ref`` (UTF-8)."""
    return "rel:" + sha256_hex(f"{append_intent_id}\0{local_ref}")[:32]


_ROOT_WITNESS_RECORD_ID: Final = record_digest(
    ROOT_WITNESS_SCHEMA_REF, "capture", root_witness_body(), (), ROOT_WITNESS_REF
)
