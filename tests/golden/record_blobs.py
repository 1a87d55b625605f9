"""Write the bytes a recorded trace names (``tests/golden/blobs/NAME.json``).

A ``checkpoint.created`` record names its snapshot and a ``run_output.sealed``
record its diff by digest; the store's door refuses such a record unless the
blob store holds those bytes (ADR 0088), so :func:`tests.golden.traces.replay`
puts them first, as the runtime does. ``python -m tests.golden.record_blobs NAME``
runs the scripted session of :mod:`tests.golden.sessions` again, keeps every
byte string the runtime put (also those a restore released later) and writes
those the fixture names, refusing if one of them is not reproduced. Like the
fixtures, a committed file never changes.
"""

from __future__ import annotations

import base64
import hashlib
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from goatherd.infrastructure.blobs.store import SqlBlobStore
from goatherd.infrastructure.store import SQLiteTraceStore
from tests.golden.sessions import _manager, session
from tests.golden.traces import HERE, load, named_digests


class _Keeping(SqlBlobStore):
    """A blob store that remembers every byte string put into it."""

    def __init__(self, store: SQLiteTraceStore, kept: dict[str, bytes]) -> None:
        super().__init__(store)
        self._kept = kept

    def put(self, holder: str, data: bytes) -> str:
        digest = super().put(holder, data)
        self._kept[digest] = bytes(data)
        return digest


def blobs_of(fixture: dict[str, Any]) -> dict[str, bytes]:
    """Return the bytes of every digest ``fixture`` names, from a new session."""
    kept: dict[str, bytes] = {}
    with (
        tempfile.TemporaryDirectory() as tmp,
        SQLiteTraceStore(Path(tmp) / "t.db") as store,
    ):
        store.shared("goatherd.blob_store", lambda: _Keeping(store, kept))
        session(_manager(store))
    wanted = named_digests(fixture)
    missing = sorted(wanted - kept.keys())
    if missing:
        raise SystemExit(f"the session did not put the bytes of {missing[0]}")
    for digest in wanted:
        assert "sha256:" + hashlib.sha256(kept[digest]).hexdigest() == digest
    return {digest: kept[digest] for digest in sorted(wanted)}


def main(name: str) -> None:
    target = HERE / "blobs" / f"{name}.json"
    if target.exists():
        raise SystemExit(f"{target} exists; recorded files never change")
    found = blobs_of(load(HERE / f"{name}.json"))
    text = {d: base64.b64encode(data).decode("ascii") for d, data in found.items()}
    target.write_text(json.dumps({"data_b64": text}, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main(sys.argv[1])
