"""Replay ``kernel_abi_v0.json``: the frozen ABI golden, byte for byte."""

from __future__ import annotations

from typing import Any

import pytest

import goatherd
from goatherd.domain import identity
from tests.conformance.vectors import load_vectors

ABI = load_vectors("kernel_abi_v0.json")
WITNESSES = ("root_witness", "ordinary_witness", "alternate_witness")
RECORDS = (
    "capture_record",
    "declaration_record",
    "ordered_parent_record",
    "reversed_parent_record",
    "alternate_witness_record",
)


def _rebuild_record_id(record_input: dict[str, Any]) -> str:
    return goatherd.domain.record_digest(
        record_input["schema_ref"],
        record_input["mode"],
        record_input["body"],
        record_input["caused_by"],
        record_input["witness"],
    )


def test_kernel_abi_v0_version_strings() -> None:
    assert ABI["abi_version"] == goatherd.domain.ABI_VERSION == "shepherd.kernel.abi.v0"
    assert ABI["canonical_version"] == goatherd.domain.CANONICAL_VERSION
    assert goatherd.domain.CANONICAL_PREFIX == b"shepherd.kernel.canonical.v2\n"


def test_kernel_abi_v0_root_witness_body_and_ids() -> None:
    root = ABI["root_witness"]
    assert goatherd.domain.root_witness_body() == root["body"]
    assert goatherd.domain.root_witness_record_id() == root["record_id"]
    assert goatherd.domain.root_witness_body_digest() == root["body_digest"]
    assert root["record_id"] != root["body_digest"]


@pytest.mark.parametrize("name", WITNESSES)
def test_kernel_abi_v0_witness_body_digest(name: str) -> None:
    witness = ABI[name]
    digest = goatherd.domain.witness_body_digest(witness["schema_ref"], witness["body"])
    assert digest == witness["body_digest"]


@pytest.mark.parametrize("name", WITNESSES)
def test_kernel_abi_v0_witness_record_id(name: str) -> None:
    witness = ABI[name]
    record_input = witness["record_input"]
    assert goatherd.canonical_digest(record_input) == witness["record_id"]
    assert _rebuild_record_id(record_input) == witness["record_id"]
    rebuilt = identity.canonical_record_input(
        record_input["schema_ref"],
        record_input["mode"],
        record_input["body"],
        record_input["caused_by"],
        record_input["witness"],
    )
    assert rebuilt == record_input
    assert witness["record_id"] != witness["body_digest"]


@pytest.mark.parametrize("name", RECORDS)
def test_kernel_abi_v0_record_digest(name: str) -> None:
    vector = ABI[name]
    assert goatherd.canonical_digest(vector["input"]) == vector["digest"]
    assert _rebuild_record_id(vector["input"]) == vector["digest"]


def test_kernel_abi_v0_parent_order_is_identity() -> None:
    ordered = ABI["ordered_parent_record"]
    reversed_ = ABI["reversed_parent_record"]
    assert ordered["input"]["caused_by"] == list(
        reversed(reversed_["input"]["caused_by"])
    )
    assert ordered["digest"] != reversed_["digest"]


def test_kernel_abi_v0_records_cite_the_witness_record_id_not_its_body_digest() -> None:
    ordinary = ABI["ordinary_witness"]
    assert ABI["capture_record"]["input"]["witness"] == ordinary["record_id"]
    assert (
        ordinary["record_input"]["witness"] == goatherd.domain.root_witness_record_id()
    )
