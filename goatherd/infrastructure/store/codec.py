"""Encode and decode the store's JSON columns (the storage flavour, kernel-spec 2.3).

Stored JSON is the ASCII-escaping storage flavour: ``records.body_json`` is
``{"payload": ...}``, ``caused_by_json`` the parent array, the context ref
columns arrays, ``receipt_json`` the serialized receipt. Decoding checks the
reference's decode-time integrity rules and raises ``TraceStoreError`` with its
messages on a corrupt row.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache
from json.encoder import encode_basestring_ascii as _quote
from typing import Any, Final

from goatherd.domain.canonical import canonical_json_ascii_bytes
from goatherd.domain.errors import TraceStoreError
from goatherd.domain.records import (
    AppendReceipt,
    RecordBody,
    RecordEnvelope,
    RetainedContext,
)
from goatherd.infrastructure.store.builders import build_body, build_envelope

__all__ = [
    "REDACTED_PREFIX",
    "decode_body",
    "decode_context",
    "decode_envelope",
    "decode_receipt",
    "decode_record",
    "decode_record_body",
    "encode_receipt",
    "encode_receipt_reference",
    "encode_refs",
    "redacted_body_json",
    "redacted_by",
    "storage_json",
]


REDACTED_PREFIX = '{"redacted_by":"'
"""How every redacted ``body_json`` starts (the form is fixed: ADR 0062)."""


def redacted_body_json(redaction_record_id: str) -> str:
    """Return the stored body of a record erased by ``redaction_record_id``."""
    return REDACTED_PREFIX + redaction_record_id + '"}'


def redacted_by(body_json: str) -> str | None:
    """Return the redaction a stored body names, ``None`` unless redacted.

    Only the exact redaction form counts; anything else is a payload body.
    """
    if not body_json.startswith(REDACTED_PREFIX):
        return None
    record_id = body_json[len(REDACTED_PREFIX) : -2]
    if body_json != redacted_body_json(record_id) or not _is_hex_id(record_id):
        return None
    return record_id


def _is_hex_id(text: str) -> bool:
    digits = text.removeprefix("sha256:")
    return (
        len(digits) == 64
        and text.startswith("sha256:")
        and all(c in "0123456789abcdef" for c in digits)
    )


def storage_json(value: object, *, root: str = "value") -> str:
    """Return the storage-flavour JSON text of ``value``."""
    return canonical_json_ascii_bytes(value, root=root).decode("ascii")


def decode_record(
    record_id: str,
    digest: str,
    schema_ref: str,
    mode: str,
    witness_ref: str,
    caused_by_json: str,
    body_json: str,
) -> tuple[RecordEnvelope, RecordBody]:
    """Decode one ``records`` row into its envelope and body.

    Raises:
        TraceStoreError: a corrupt row (the reference's decode-time checks).
    """
    envelope = decode_envelope(
        record_id, digest, schema_ref, mode, witness_ref, caused_by_json
    )
    return envelope, decode_record_body(body_json)


def decode_record_body(body_json: str) -> RecordBody:
    """Decode a ``records.body_json`` text: its payload, or the redaction form.

    Raises:
        TraceStoreError: the text is neither.
    """
    redaction = redacted_by(body_json)
    if redaction is not None:
        return build_body({}, redaction)
    return build_body(decode_body(body_json), None)


def decode_envelope(
    record_id: str,
    digest: str,
    schema_ref: str,
    mode: str,
    witness_ref: str,
    caused_by_json: str,
) -> RecordEnvelope:
    """Decode the identity columns of a ``records`` row (everything but the body).

    Raises:
        TraceStoreError: a corrupt row (the reference's decode-time checks).
    """
    if record_id != digest:
        raise TraceStoreError("record_id must equal digest")
    if caused_by_json == "[]":  # most records: no parents
        return build_envelope(record_id, digest, schema_ref, mode, witness_ref, ())
    parents = _loads(caused_by_json, "caused_by_json")
    if not isinstance(parents, list) or not all(isinstance(p, str) for p in parents):
        raise TraceStoreError("caused_by_json must decode to a list")
    return build_envelope(
        record_id, digest, schema_ref, mode, witness_ref, tuple(parents)
    )


_ABSENT: Final = object()


def decode_body(body_json: str) -> dict[str, Any]:
    """Decode a ``records.body_json`` text into the record's payload.

    Raises:
        TraceStoreError: the text is not an object holding an object payload.
    """
    body = _loads(body_json, "body_json")
    if not isinstance(body, dict):
        raise TraceStoreError("body_json must decode to an object")
    payload = body.get("payload", _ABSENT)
    if payload is _ABSENT:  # the older key; the default was built per call
        payload = body.get("body", {})
    if not isinstance(payload, dict):
        raise TraceStoreError("record payload must decode to an object")
    return payload


def decode_context(row: Mapping[Any, Any]) -> RetainedContext:
    """Decode one ``contexts`` row.

    Raises:
        TraceStoreError: a ref column that does not decode to a list of strings.
    """
    return RetainedContext(
        context_id=row["context_id"],
        active_binding_refs=_refs(row["active_binding_refs_json"]),
        capability_witness_refs=_refs(row["capability_witness_refs_json"]),
        semantic_environment_refs=_refs(row["semantic_environment_refs_json"]),
        visibility_policy_refs=_refs(row["visibility_policy_refs_json"]),
        substrate_ref=row["substrate_ref"],
        containment=row["containment"],
    )


def encode_receipt(receipt: AppendReceipt) -> str:
    """Return the stored form of a receipt (kernel-spec 5.7).

    Written directly rather than through the canonical encoder: every string
    in a receipt was already checked by the append's canonical encodings (the
    intent and owner ids in the batch digest; the record and context ids are
    hex digests), so only the ASCII quoting and the sorted layout remain. The
    text equals ``storage_json`` of the receipt object (a property test pins it).
    """
    ranges = receipt.owner_ordinal_ranges
    return "".join(
        (
            '{"append_intent_id":',
            _quote(receipt.append_intent_id),
            ',"causal_edges":[',
            ",".join(f"[{_quote(p)},{_quote(c)}]" for p, c in receipt.causal_edges),
            '],"commit_receipts":[',
            ",".join(map(_quote, receipt.commit_receipts)),
            '],"context_receipts":[',
            ",".join(map(_quote, receipt.context_receipts)),
            '],"fact_ids":[',
            ",".join(map(_quote, receipt.fact_ids)),
            '],"owner_ordinal_ranges":{',
            ",".join(
                f"{_quote(owner)}:[{int(ranges[owner][0])},{int(ranges[owner][1])}]"
                for owner in sorted(ranges)
            ),
            "}}",
        )
    )


def encode_receipt_reference(receipt: AppendReceipt) -> str:
    """Return the stored form of a receipt through the canonical encoder."""
    return storage_json(
        {
            "append_intent_id": receipt.append_intent_id,
            "fact_ids": list(receipt.fact_ids),
            "commit_receipts": list(receipt.commit_receipts),
            "owner_ordinal_ranges": {
                owner: [first, last]
                for owner, (first, last) in receipt.owner_ordinal_ranges.items()
            },
            "causal_edges": [list(edge) for edge in receipt.causal_edges],
            "context_receipts": list(receipt.context_receipts),
        },
        root="receipt",
    )


def decode_receipt(text: str) -> AppendReceipt:
    """Decode a stored receipt (an absent ``context_receipts`` decodes as empty).

    Raises:
        TraceStoreError: when the stored text is not a receipt.
    """
    data = _loads(text, "receipt_json")
    if not isinstance(data, dict):
        raise TraceStoreError("receipt_json must decode to an object")
    try:
        return AppendReceipt(
            append_intent_id=str(data["append_intent_id"]),
            fact_ids=tuple(data.get("fact_ids", ())),
            commit_receipts=tuple(data.get("commit_receipts", ())),
            owner_ordinal_ranges={
                str(owner): (int(pair[0]), int(pair[1]))
                for owner, pair in data.get("owner_ordinal_ranges", {}).items()
            },
            causal_edges=tuple(
                (str(edge[0]), str(edge[1])) for edge in data.get("causal_edges", ())
            ),
            context_receipts=tuple(data.get("context_receipts", ())),
        )
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
        raise TraceStoreError(f"receipt_json is not a receipt: {exc}") from exc


def encode_refs(refs: Sequence[str]) -> str:
    """Return the stored form of a context ref array."""
    if not refs:
        return "[]"
    if type(refs) is tuple:
        return _encode_ref_tuple(refs)
    return storage_json(list(refs), root="refs")


@lru_cache(maxsize=1024)
def _encode_ref_tuple(refs: tuple[str, ...]) -> str:
    # Most appends repeat a few ref tuples (an environment, an authority).
    return storage_json(list(refs), root="refs")


def _refs(text: str) -> tuple[str, ...]:
    value = _loads(text, "context refs")
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise TraceStoreError("context ref JSON must decode to a list")
    return tuple(value)


def _loads(text: str, column: str) -> object:
    # The C scanner straight away: ``json.loads`` spends about as long in its
    # Python wrappers (two whitespace matches, the decoder's checks) as the
    # scanner takes for a stored body. Text the scanner does not take whole
    # (whitespace around it, or bad JSON) goes to ``json.loads``, which
    # accepts or refuses it exactly as before.
    if type(text) is str:
        try:
            value, end = _SCAN(text, 0)
        except (StopIteration, ValueError):
            pass
        else:
            if end == len(text):
                return value
    try:
        return json.loads(text)
    except (TypeError, ValueError) as exc:
        raise TraceStoreError(f"{column} is not valid JSON: {exc}") from exc


_SCAN: Callable[[str, int], tuple[object, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]
