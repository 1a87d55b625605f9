"""A redacted trace moves by export and import in redaction form (ADR 0062).

The export writes an erased record with ``redacted_by`` and no payload; the
import cannot recompute its id, so it accepts it only when a redaction record
of the same file (which comes later: it cites the erased records) names it,
and the copy keeps the export's head. A file that erases a payload without a
redaction record, or whose redaction names a record it holds whole, is refused.
"""

from __future__ import annotations

import hashlib
import io
import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from goatherd.domain.contexts import TRUSTED_APPEND_CONTEXT
from goatherd.infrastructure.audit.verify import verify_trace
from goatherd.infrastructure.portability.jsonl import (
    ImportRejectedError,
    export_trace,
    import_trace,
)
from goatherd.infrastructure.store import (
    SQLiteTraceStore,
    open_trace_store,
    open_trace_store_read_only,
)
from tests.faults.conftest import postgres_url  # noqa: F401 (a fixture)
from tests.infrastructure.store.test_redaction import fill, secret_batch
from tests.security.test_noted_head import head_of

CTX = TRUSTED_APPEND_CONTEXT


def redacted_trace(path: Path, secret: str) -> tuple[str, str]:
    """A trace with one erased record; its id and the redaction record's id."""
    with SQLiteTraceStore(path) as store:
        erased, _ = fill(store, secret)
        store.append(CTX, secret_batch("i:later", "later-value"))
        redaction = store.redact(CTX, "redact:1", [erased], "asked")
        store.append(CTX, secret_batch("i:after", "after-value"))
    return erased, redaction.redaction_record_id


def export_lines(path: Path) -> list[str]:
    out = io.StringIO()
    with open_trace_store_read_only(path) as store:
        export_trace(store, out)
    return out.getvalue().splitlines(keepends=True)


def resign(lines: list[str]) -> list[str]:
    """Recompute the end line's count and SHA-256 after editing lines."""
    body = lines[:-1]
    digest = hashlib.sha256()
    for line in body:
        digest.update(line.encode())
    end = json.loads(lines[-1])
    end.update(lines=len(body), sha256=digest.hexdigest())
    return [*body, json.dumps(end, sort_keys=True, separators=(",", ":")) + "\n"]


def records_of(line: str, obj: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    obj = json.loads(line) if obj is None else obj
    return list(obj["records"]) if obj.get("type") == "intent" else []


def test_an_import_of_a_redacted_trace_keeps_its_head_and_verifies(
    tmp_path: Path,
) -> None:
    secret = f"S-{uuid.uuid4().hex}"
    db = tmp_path / "trace.sqlite"
    erased, redaction = redacted_trace(db, secret)
    lines = export_lines(db)
    text = "".join(lines)
    assert secret not in text
    (record,) = [
        r for line in lines for r in records_of(line) if r["record_id"] == erased
    ]
    assert record["redacted_by"] == redaction
    assert "payload" not in record
    copy_path = tmp_path / "copy.sqlite"
    with SQLiteTraceStore(copy_path) as copy:
        summary = import_trace(lines, copy)
        assert verify_trace(copy).ok
    assert summary.head == head_of(db)
    assert head_of(copy_path) == head_of(db)


def _edited(lines: list[str], edit: str) -> list[str]:
    out = []
    for line in lines:
        obj = json.loads(line)
        for record in records_of(line, obj):
            if edit == "drop-redaction" and record.get("schema_ref", "").endswith(
                "redaction.v1"
            ):
                record["payload"]["erased"] = []
                record["caused_by"] = []
            if edit == "erase-unrecorded" and record.get("payload", {}).get(
                "secret"
            ) == ("later-value"):
                del record["payload"]
                record["redacted_by"] = "sha256:" + "ab" * 32
        out.append(json.dumps(obj, sort_keys=True, separators=(",", ":")) + "\n")
    return out


@pytest.mark.parametrize(
    ("edit", "expect"),
    [
        ("erase-unrecorded", "but no redaction record of the file names it"),
        ("drop-redaction", "its content digests to"),
    ],
)
def test_an_erasure_the_file_does_not_record_is_refused(
    tmp_path: Path, edit: str, expect: str
) -> None:
    db = tmp_path / "trace.sqlite"
    redacted_trace(db, "s")
    lines = export_lines(db)
    edited = resign([lines[0], *_edited(lines[1:-1], edit), lines[-1]])
    with SQLiteTraceStore(tmp_path / "copy.sqlite") as copy:
        with pytest.raises(ImportRejectedError, match=expect):
            import_trace(edited, copy)
        assert copy.max_position() == -1


@pytest.mark.postgres
def test_a_redacted_trace_moves_to_postgresql_with_its_head(
    tmp_path: Path,
    postgres_url: str,  # noqa: F811 (a fixture)
) -> None:
    db = tmp_path / "trace.sqlite"
    redacted_trace(db, f"S-{uuid.uuid4().hex}")
    with open_trace_store(postgres_url) as store:
        assert import_trace(export_lines(db), store).head == head_of(db)
        assert verify_trace(store).ok
