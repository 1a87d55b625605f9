"""The substrate registry (fail closed) and the echo substrate."""

from __future__ import annotations

import pytest

from goatherd.application import (
    EchoSubstrate,
    Substrate,
    SubstrateError,
    SubstrateRegistry,
    UnknownSubstrateError,
)
from goatherd.domain import (
    MaterializationOutcome,
    Record,
    RecordBody,
    RecordEnvelope,
    RecordView,
)


def declaration(record_id: str, payload: dict[str, object], label: str) -> Record:
    return Record(
        RecordEnvelope(record_id, record_id, "vector.write.v1", "declaration", "w"),
        RecordBody(payload),
        RecordView("owner", 0, "ctx", label),
    )


class TestRegistry:
    def test_a_registered_substrate_is_found_by_its_ref(self) -> None:
        registry = SubstrateRegistry()
        echo = EchoSubstrate("e.v1", ["s"])
        registry.register(echo)
        assert registry.get("e.v1") is echo
        assert registry.refs() == ("e.v1",)

    def test_an_unknown_ref_fails_closed(self) -> None:
        with pytest.raises(UnknownSubstrateError, match=r"^unknown substrate: nope$"):
            SubstrateRegistry().get("nope")
        assert issubclass(UnknownSubstrateError, SubstrateError)

    def test_registering_the_same_object_twice_is_a_no_op(self) -> None:
        registry = SubstrateRegistry()
        echo = EchoSubstrate("e.v1", ["s"])
        registry.register(echo)
        registry.register(echo)
        assert registry.get("e.v1") is echo

    def test_a_different_object_under_a_taken_ref_is_refused_and_keeps_the_first(
        self,
    ) -> None:
        registry = SubstrateRegistry()
        first = EchoSubstrate("e.v1", ["s"])
        registry.register(first)
        with pytest.raises(SubstrateError, match=r'substrate "e\.v1" is already'):
            registry.register(EchoSubstrate("e.v1", ["s"]))
        assert registry.get("e.v1") is first


class TestEcho:
    def test_it_satisfies_the_substrate_protocol(self) -> None:
        echo = EchoSubstrate("e.v1", ["a", "b"])
        assert isinstance(echo, Substrate)
        assert echo.declaration_schemas == echo.capture_schemas == {"a", "b"}
        assert echo.containment == "contained"
        assert EchoSubstrate("e", [], "buffered").containment == "buffered"

    def test_each_declaration_becomes_a_capture_copy_caused_by_it(self) -> None:
        payload: dict[str, object] = {"path": "x", "n": 1}
        result = EchoSubstrate("e.v1", ["vector.write.v1"]).materialize(
            [declaration("sha256:1", payload, "write"), declaration("sha256:2", {}, "")]
        )
        assert result.outcome is MaterializationOutcome.SUCCESS
        assert result.world_side_anchors == ()
        first, second = result.capture_drafts
        assert first.mode == "capture"
        assert first.schema_ref == "vector.write.v1"
        assert first.kind_label == "write"
        assert first.payload == payload
        assert first.payload is not payload
        assert first.caused_by_fact_ids == ("sha256:1",)
        # An empty view label falls back to the schema ref (the record's kind).
        assert second.kind_label == "vector.write.v1"
