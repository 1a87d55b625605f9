"""Canonical JSON: properties of the digest and clear errors for bad input."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import goatherd
from goatherd.domain import CanonicalTypeError, CanonicalValueError, GoatherdError

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)
payloads = st.dictionaries(st.text(max_size=8), json_values, max_size=6)
schema_refs = st.text(min_size=1, max_size=20)
parents = st.lists(
    st.text(alphabet="0123456789abcdef", min_size=64, max_size=64).map(
        lambda h: "sha256:" + h
    ),
    min_size=2,
    max_size=4,
    unique=True,
)


def _reordered(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _reordered(value[k]) for k in reversed(list(value))}
    if isinstance(value, list):
        return [_reordered(v) for v in value]
    return value


class TestDigestProperties:
    @given(payloads)
    def test_key_order_never_changes_a_digest(self, payload: dict[str, Any]) -> None:
        assert goatherd.canonical_digest(payload) == goatherd.canonical_digest(
            _reordered(payload)
        )

    @given(payloads)
    def test_a_digest_is_stable_across_a_json_round_trip(
        self, payload: dict[str, Any]
    ) -> None:
        round_tripped = json.loads(json.dumps(payload))
        assert goatherd.canonical_digest(round_tripped) == goatherd.canonical_digest(
            payload
        )

    @given(payloads)
    def test_the_bytes_parse_back_to_the_value(self, payload: dict[str, Any]) -> None:
        assert json.loads(goatherd.canonical_json_bytes(payload)) == payload

    @given(payloads)
    def test_storage_flavour_is_ascii_and_parses_to_the_same_value(
        self, payload: dict[str, Any]
    ) -> None:
        data = goatherd.domain.canonical_json_ascii_bytes(payload)
        assert data.isascii()
        assert json.loads(data) == payload

    @given(payloads, schema_refs, schema_refs)
    def test_changing_the_schema_changes_the_record_id(
        self, payload: dict[str, Any], one: str, other: str
    ) -> None:
        witness = goatherd.domain.root_witness_record_id()
        a = goatherd.domain.record_digest(one, "capture", payload, (), witness)
        b = goatherd.domain.record_digest(other, "capture", payload, (), witness)
        assert (a == b) == (one == other)

    @given(payloads)
    def test_changing_the_mode_changes_the_record_id(
        self, payload: dict[str, Any]
    ) -> None:
        witness = goatherd.domain.root_witness_record_id()
        assert goatherd.domain.record_digest(
            "s", "capture", payload, (), witness
        ) != goatherd.domain.record_digest("s", "declaration", payload, (), witness)

    @given(payloads, payloads)
    def test_changing_the_payload_changes_the_record_id(
        self, one: dict[str, Any], other: dict[str, Any]
    ) -> None:
        witness = goatherd.domain.root_witness_record_id()
        a = goatherd.domain.record_digest("s", "capture", one, (), witness)
        b = goatherd.domain.record_digest("s", "capture", other, (), witness)
        same = goatherd.canonical_json_bytes(one) == goatherd.canonical_json_bytes(
            other
        )
        assert (a == b) == same

    @given(payloads, parents)
    def test_changing_the_parent_order_changes_the_record_id(
        self, payload: dict[str, Any], caused_by: list[str]
    ) -> None:
        witness = goatherd.domain.root_witness_record_id()
        a = goatherd.domain.record_digest("s", "capture", payload, caused_by, witness)
        b = goatherd.domain.record_digest(
            "s", "capture", payload, list(reversed(caused_by)), witness
        )
        assert a != b

    @given(payloads, parents)
    def test_changing_the_witness_changes_the_record_id(
        self, payload: dict[str, Any], witnesses: list[str]
    ) -> None:
        a = goatherd.domain.record_digest("s", "capture", payload, (), witnesses[0])
        b = goatherd.domain.record_digest("s", "capture", payload, (), witnesses[1])
        assert a != b


class Unserializable:
    pass


class TestBadInputNamesThePath:
    @pytest.mark.parametrize(
        ("payload", "path"),
        [
            ({"args": [1, 2, float("nan")]}, "payload.args[2]"),
            ({"x": float("inf")}, "payload.x"),
            ({"x": {"y": -float("inf")}}, "payload.x.y"),
            ({"bad\ud800key": 1}, "payload['bad\\ud800key']"),
            ({"s": ["ok", "lone \udfff"]}, "payload.s[1]"),
        ],
    )
    def test_values_that_are_not_json_raise_a_value_error(
        self, payload: dict[str, Any], path: str
    ) -> None:
        with pytest.raises(CanonicalValueError) as info:
            goatherd.canonical_digest(payload)
        assert info.value.path == path
        assert isinstance(info.value, ValueError)
        assert isinstance(info.value, GoatherdError)
        assert path in str(info.value)

    @pytest.mark.parametrize(
        ("payload", "path", "type_name"),
        [
            ({"args": [1, 2, {3}]}, "payload.args[2]", "set"),
            ({"blob": b"\x00"}, "payload.blob", "bytes"),
            ({"obj": Unserializable()}, "payload.obj", "Unserializable"),
            ({"m": {1: "one"}}, "payload.m[1]", "int"),
            ({"m": {None: "none"}}, "payload.m[None]", "NoneType"),
            ({"m": {(1, 2): "t"}}, "payload.m[(1, 2)]", "tuple"),
        ],
    )
    def test_types_that_are_not_json_raise_a_type_error(
        self, payload: dict[str, Any], path: str, type_name: str
    ) -> None:
        with pytest.raises(CanonicalTypeError) as info:
            goatherd.canonical_json_bytes(payload)
        assert info.value.path == path
        assert type_name in str(info.value)
        assert isinstance(info.value, TypeError)

    def test_a_cycle_is_refused_with_its_path(self) -> None:
        inner: list[Any] = [1]
        inner.append(inner)
        with pytest.raises(CanonicalValueError) as info:
            goatherd.canonical_digest({"a": {"b": inner}})
        assert info.value.path == "payload.a.b[1]"
        assert "cyclic" in str(info.value)

    def test_a_value_shared_twice_is_not_a_cycle(self) -> None:
        shared = {"k": [1, 2]}
        assert goatherd.canonical_json_bytes({"a": shared, "b": shared}) == (
            b'{"a":{"k":[1,2]},"b":{"k":[1,2]}}'
        )

    def test_the_storage_flavour_refuses_the_same_bad_input(self) -> None:
        with pytest.raises(CanonicalValueError):
            goatherd.domain.canonical_json_ascii_bytes({"s": "lone \ud800"})
        with pytest.raises(CanonicalTypeError):
            goatherd.domain.canonical_json_ascii_bytes({1: "x"})
        assert goatherd.domain.canonical_json_ascii_bytes({"e": "\U0001f600"}) == (
            b'{"e":"\\ud83d\\ude00"}'
        )


class TestReferenceBehaviour:
    def test_non_ascii_is_written_raw_in_the_digest_flavour(self) -> None:
        value = {"a": {"snowman": "snowman-\u2603"}, "z": 1}
        assert goatherd.canonical_json_bytes(value) == (
            b'{"a":{"snowman":"snowman-\xe2\x98\x83"},"z":1}'
        )

    def test_tuples_encode_as_arrays(self) -> None:
        assert goatherd.canonical_json_bytes({"t": (1, "a")}) == b'{"t":[1,"a"]}'

    def test_int_and_float_stay_distinct(self) -> None:
        assert goatherd.canonical_digest({"v": 1}) != goatherd.canonical_digest(
            {"v": 1.0}
        )

    def test_any_json_value_encodes_at_top_level(self) -> None:
        assert goatherd.canonical_json_bytes([1, 2]) == b"[1,2]"
