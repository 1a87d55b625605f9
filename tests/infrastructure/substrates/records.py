"""Hand-built declaration records for substrate tests (no store needed)."""

from __future__ import annotations

from collections.abc import Mapping

from goatherd.domain import Record, RecordBody, RecordEnvelope, RecordView


def declaration(
    schema_ref: str, payload: Mapping[str, object], record_id: str = "sha256:d1"
) -> Record:
    return Record(
        RecordEnvelope(record_id, record_id, schema_ref, "declaration", "sha256:w"),
        RecordBody(dict(payload)),
        RecordView("agent:main", 0, "context:x", "intent"),
    )
