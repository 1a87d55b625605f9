"""The execution and relation ids of execution_vectors_v0.json.

``exec:``/``rel:`` + 32 hex of SHA-256 over the raw string ``intent NUL
local_ref`` (UTF-8), NOT canonical JSON; the vectors include a non-ASCII intent.
"""

from __future__ import annotations

from typing import Any

import pytest

from goatherd.domain import (
    execution_id_for,
    relation_id_for,
)
from tests.conformance.vectors import load_vectors

VECTORS = load_vectors("execution_vectors_v0.json")


def test_the_id_lists_are_present_and_include_a_non_ascii_intent() -> None:
    assert len(VECTORS["execution_ids"]) >= 1
    assert len(VECTORS["relation_ids"]) >= 1
    intents = [v["append_intent_id"] for v in VECTORS["execution_ids"]]
    intents += [v["append_intent_id"] for v in VECTORS["relation_ids"]]
    assert any(not intent.isascii() for intent in intents)


@pytest.mark.parametrize(
    "vector", VECTORS["execution_ids"], ids=lambda v: v["append_intent_id"]
)
def test_execution_id_for_reproduces_the_reference(vector: dict[str, Any]) -> None:
    derived = execution_id_for(vector["append_intent_id"], vector["local_ref"])
    assert derived == vector["execution_id"]


@pytest.mark.parametrize(
    "vector", VECTORS["relation_ids"], ids=lambda v: v["append_intent_id"]
)
def test_relation_id_for_reproduces_the_reference(vector: dict[str, Any]) -> None:
    derived = relation_id_for(vector["append_intent_id"], vector["local_ref"])
    assert derived == vector["relation_id"]


def test_the_default_local_refs_are_execution_and_relation() -> None:
    executions = [v for v in VECTORS["execution_ids"] if v["local_ref"] == "execution"]
    relations = [v for v in VECTORS["relation_ids"] if v["local_ref"] == "relation"]
    assert executions
    assert relations
    for vector in executions:
        assert execution_id_for(vector["append_intent_id"]) == vector["execution_id"]
    for vector in relations:
        assert relation_id_for(vector["append_intent_id"]) == vector["relation_id"]
