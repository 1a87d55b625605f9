"""Load the conformance vector files with their pinned SHA-256.

The files are the oracle (the Python reference generated them); a changed file
must fail loudly instead of turning failing tests green, so each one's SHA-256
of its LF form is pinned here.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

VECTOR_DIR = Path(__file__).parent / "vectors"

PINNED_SHA256 = {
    "kernel_abi_v0.json": (
        "eed2b48ecd72326490e49c7693ab1d1e1d08c897ff590fc341811979b7d2df88"
    ),
    "canonical_edge_vectors_v0.json": (
        "9d3dc6cd1e58e16c80850a52c8a4699df33c39af92d903cd5dc93dd6d86d7d8d"
    ),
    "canonical_corpus_v0.json": (
        "74a24de3b15318725f469099dccfa4d8e7b7a72e084c98424787b4a0bbc9a69f"
    ),
    "store_vectors_v0.json": (
        "0a6ca4fde531a163bbee7f4fefea6215988f2578f84c95209c094e85e3b54edd"
    ),
    "execution_vectors_v0.json": (
        "02f596e7eaec5215868ec3fc1ec0e911c2395b64d0e5cd27793129eca8666f69"
    ),
    "materialize_vectors_v0.json": (
        "e5dfb3eb282327ccf96f4b32843175e7420128d8cbdf87952dc80a47c7125fa1"
    ),
}


def vector_bytes(name: str) -> bytes:
    """Return the raw bytes of a vector file, normalised to LF line endings."""
    return (VECTOR_DIR / name).read_bytes().replace(b"\r\n", b"\n")


def load_vectors(name: str) -> Any:
    """Return the parsed vector file after checking its pinned hash.

    Numbers keep their JSON kind (``1`` stays int, ``1.0`` stays float).
    """
    data = vector_bytes(name)
    digest = hashlib.sha256(data).hexdigest()
    if digest != PINNED_SHA256[name]:
        raise AssertionError(
            f"{name} changed: sha256 {digest} != pinned {PINNED_SHA256[name]}"
        )
    return json.loads(data.decode("utf-8"))
