"""Fuzz canonical JSON with arbitrary Python values.

The only errors allowed are :class:`CanonicalEncodingError` subclasses, and a
value that is accepted must digest stably: the same digest twice, the digest of
the prefixed bytes, the same bytes after a JSON round trip, and both flavours
agreeing on what they accept.
"""

from __future__ import annotations

import hashlib
import json

import pytest
from hypothesis import given

from goatherd.domain.canonical import (
    CANONICAL_PREFIX,
    canonical_digest,
    canonical_json_ascii_bytes,
    canonical_json_bytes,
    canonical_json_text,
    check_canonical,
    storage_digest,
)
from goatherd.domain.errors import CanonicalEncodingError
from tests.fuzz.strategies import hostile_values, json_values


def _encode_or_refuse(value: object) -> bytes | None:
    try:
        return canonical_json_bytes(value)
    except CanonicalEncodingError:
        return None


@given(hostile_values)
def test_arbitrary_values_are_encoded_or_refused_with_a_canonical_error(
    value: object,
) -> None:
    data = _encode_or_refuse(value)
    if data is None:
        with pytest.raises(CanonicalEncodingError):
            canonical_digest(value)
        with pytest.raises(CanonicalEncodingError):
            canonical_json_ascii_bytes(value)
        return
    digest = canonical_digest(value)
    assert digest == canonical_digest(value)
    assert digest == "sha256:" + hashlib.sha256(CANONICAL_PREFIX + data).hexdigest()
    assert canonical_json_text(value).encode("utf-8") == data
    stored = canonical_json_ascii_bytes(value)
    assert stored.isascii()
    assert json.loads(stored) == json.loads(data)
    assert storage_digest(value) == hashlib.sha256(stored).hexdigest()
    # A JSON round trip of the accepted value encodes to the very same bytes.
    assert canonical_json_bytes(json.loads(data)) == data


@given(json_values)
def test_plain_json_values_are_always_accepted_and_stable(value: object) -> None:
    data = canonical_json_bytes(value)
    check_canonical(value)
    assert canonical_digest(value) == canonical_digest(json.loads(data))
    assert json.loads(canonical_json_ascii_bytes(value)) == json.loads(data)


@pytest.mark.parametrize("depth", [1_000, 5_000, 100_000])
@pytest.mark.parametrize("kind", ["list", "dict", "tuple"])
def test_values_nested_beyond_the_stack_are_refused_not_crashing(
    depth: int, kind: str
) -> None:
    value: object = 1
    for _ in range(depth):
        value = {"a": value} if kind == "dict" else [value]
        if kind == "tuple":
            value = tuple(value)
    for encode in (
        canonical_json_bytes,
        canonical_json_ascii_bytes,
        canonical_digest,
        check_canonical,
    ):
        with pytest.raises(CanonicalEncodingError, match="nests too deeply"):
            encode(value)


def test_a_cycle_is_refused_with_its_path() -> None:
    cycle: list[object] = [1]
    cycle.append({"back": cycle})
    with pytest.raises(CanonicalEncodingError, match="cyclic"):
        canonical_digest(cycle)
