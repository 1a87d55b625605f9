"""The vector files are the oracle: they must be present and unchanged."""

from __future__ import annotations

import hashlib

import pytest

from tests.conformance.vectors import PINNED_SHA256, load_vectors, vector_bytes


@pytest.mark.parametrize("name", sorted(PINNED_SHA256))
def test_vector_file_matches_its_pinned_sha256(name: str) -> None:
    assert hashlib.sha256(vector_bytes(name)).hexdigest() == PINNED_SHA256[name]


@pytest.mark.parametrize("name", sorted(PINNED_SHA256))
def test_vector_file_carries_meaningful_provenance(name: str) -> None:
    data = load_vectors(name)
    if "source_commit" in data:
        assert not str(data["source_commit"]).startswith("unknown")
        assert data.get("generator")
