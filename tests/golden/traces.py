"""Recorded traces (``tests/golden/*.json``) and how to replay them into a store.

A fixture holds the batches a writer appended, in order, each group's records
with their mode, schema, kind label, payload and causal parents; a parent is
named ``@<name>`` after an earlier record's ``name`` (its id is what the store
gives it). ``legacy_checkpoints`` are rows of the checkpoint table that traces
written before blobs were content-addressed carry. ``expected`` is what every
reader must answer: the scopes, checkpoints and outputs, or the refusal.

The bytes a fixture's checkpoint and sealed-output records name live beside
it, in ``blobs/NAME.json`` (digest -> base64, written by
``python -m tests.golden.record_blobs NAME``): the store's door refuses such a record
unless the blob store holds them (ADR 0088), so :func:`replay` puts them first
under the record's holder, as the runtime does.

Fixtures never change once committed; a new format gets a new file.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sqlalchemy import insert

from goatherd.domain import (
    TRUSTED_APPEND_CONTEXT,
    AppendBatch,
    AppendGroup,
    RecordDraft,
)
from goatherd.infrastructure.blobs.store import SqlBlobStore
from goatherd.infrastructure.store import SqlAlchemyTraceStore
from goatherd.infrastructure.store.schema import checkpoint_snapshots

HERE = Path(__file__).resolve().parent
_NAMING = {
    "goatherd.checkpoint.created.v2": ("checkpoint_id", "snapshot_digest", "#snapshot"),
    "goatherd.run_output.sealed.v1": ("output_id", "diff_blob", "#diff"),
}


def fixtures() -> Iterator[Path]:
    """Yield every recorded trace, by name."""
    yield from sorted(HERE.glob("*.json"))


def load(path: Path) -> dict[str, Any]:
    """Read one fixture, with the bytes its records name (``blobs``)."""
    data: dict[str, Any] = json.loads(path.read_text())
    side = path.parent / "blobs" / path.name
    data["blobs"] = json.loads(side.read_text())["data_b64"] if side.exists() else {}
    return data


def _named(record: dict[str, Any]) -> tuple[str, str] | None:
    """The holder and digest of the blob a fixture record names, if any."""
    naming = _NAMING.get(record["schema"])
    if naming is None:
        return None
    digest = record["payload"].get(naming[1])
    if not isinstance(digest, str) or not digest:
        return None
    return str(record["payload"].get(naming[0])) + naming[2], digest


def named_digests(fixture: dict[str, Any]) -> set[str]:
    """Every blob digest the fixture's records name."""
    return {
        found[1]
        for batch in fixture["batches"]
        for group in batch["groups"]
        for record in group["records"]
        if (found := _named(record)) is not None
    }


def replay(store: SqlAlchemyTraceStore, fixture: dict[str, Any]) -> dict[str, str]:
    """Append the fixture's batches to ``store``; return its record names -> ids."""
    names: dict[str, str] = {}
    blobs = fixture.get("blobs", {})
    for batch in fixture["batches"]:
        groups = []
        pending: list[str] = []
        for group in batch["groups"]:
            drafts = []
            for record in group["records"]:
                named = _named(record)
                if named is not None and named[1] in blobs:
                    store_of = store.shared(
                        "goatherd.blob_store", lambda: SqlBlobStore(store)
                    )
                    store_of.put(named[0], base64.b64decode(blobs[named[1]]))
                parents = tuple(names[p[1:]] for p in record.get("caused_by", ()))
                drafts.append(
                    RecordDraft(
                        record["mode"],
                        record["schema"],
                        record["payload"],
                        record.get("kind", ""),
                        caused_by_fact_ids=parents,
                    )
                )
                pending.append(record.get("name", ""))
            groups.append(AppendGroup(group["owner"], fact_drafts=tuple(drafts)))
        receipt = store.append(
            TRUSTED_APPEND_CONTEXT, AppendBatch(batch["intent"], tuple(groups))
        )
        for name, record_id in zip(pending, receipt.fact_ids, strict=True):
            if name:
                names[name] = record_id
    rows = fixture.get("legacy_checkpoints", [])
    if rows:
        with store.transaction() as conn:
            for row in rows:
                conn.execute(
                    insert(checkpoint_snapshots),
                    {
                        "checkpoint_id": row["checkpoint_id"],
                        "scope_id": row["scope_id"],
                        "seq": row["seq"],
                        "state_json": json.dumps(row["state"]),
                        "snapshot": bytes.fromhex(row["snapshot_hex"]),
                        "created_at_unixnano": row["created_at_unixnano"],
                    },
                )
    return names
