"""Replay ``canonical_edge_vectors_v0.json`` and ``canonical_corpus_v0.json``."""

from __future__ import annotations

import math
from typing import Any

import pytest

import goatherd
from tests.conformance.vectors import load_vectors

EDGE = load_vectors("canonical_edge_vectors_v0.json")
CORPUS = load_vectors("canonical_corpus_v0.json")
EDGE_GROUPS = ("edge_floats", "edge_strings", "mixed")
CORPUS_GROUPS = ("floats", "ints", "strings", "nested")


def _cases(data: dict[str, Any], groups: tuple[str, ...]) -> list[Any]:
    return [
        pytest.param(vector, id=f"{group}-{index}-{vector['label']}")
        for group in groups
        for index, vector in enumerate(data[group])
    ]


def _check(vector: dict[str, Any]) -> None:
    payload = vector["payload"]
    assert (
        goatherd.canonical_json_bytes(payload).decode("utf-8")
        == vector["canonical_bytes"]
    )
    assert goatherd.canonical_digest(payload) == vector["digest"]


@pytest.mark.parametrize("vector", _cases(EDGE, EDGE_GROUPS))
def test_canonical_edge_vectors_v0(vector: dict[str, Any]) -> None:
    _check(vector)


@pytest.mark.parametrize("vector", _cases(CORPUS, CORPUS_GROUPS))
def test_canonical_corpus_v0(vector: dict[str, Any]) -> None:
    _check(vector)


def test_canonical_edge_vectors_v0_are_not_weakened() -> None:
    assert [len(EDGE[g]) for g in EDGE_GROUPS] == [20, 14, 8]
    joined = "".join(v["canonical_bytes"] for g in EDGE_GROUPS for v in EDGE[g])
    for needle in ("<", ">", "&", "0.0", "-0.0", "1e+16", "1e-05", "\\u0007"):
        assert needle in joined, needle


def _floats(value: Any) -> list[float]:
    if isinstance(value, float):
        return [value]
    if isinstance(value, dict):
        return [f for item in value.values() for f in _floats(item)]
    if isinstance(value, list):
        return [f for item in value for f in _floats(item)]
    return []


def test_canonical_corpus_v0_is_not_weakened() -> None:
    assert CORPUS["seed"] == 20261007
    assert [len(CORPUS[g]) for g in CORPUS_GROUPS] == [60, 40, 50, 50]
    floats = [f for g in ("floats", "nested") for v in CORPUS[g] for f in _floats(v)]
    assert any(f != 0.0 and abs(f) < 2.2250738585072014e-308 for f in floats)
    assert any(1e15 < abs(f) < 1e17 for f in floats)
    assert any(1e-5 < abs(f) < 1e-3 for f in floats)
    assert all(math.isfinite(f) for f in floats)
