"""A record erased by a redaction record that does not name it.

The redaction record exists and is well formed, but the erased record is not
in its list: an import of such a file is refused with a line naming both, and
``verify`` on a store whose row was rewritten that way names the record.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import text

from goatherd.infrastructure.audit.verify import verify_trace
from goatherd.infrastructure.portability.jsonl import ImportRejectedError, import_trace
from goatherd.infrastructure.store import SQLiteTraceStore
from goatherd.infrastructure.store.codec import redacted_body_json
from tests.security.test_redacted_export import (
    export_lines,
    records_of,
    redacted_trace,
    resign,
)


def _kept_id(lines: list[str]) -> str:
    for line in lines:
        for record in records_of(line):
            if record.get("payload", {}).get("secret") == "later-value":
                return str(record["record_id"])
    raise AssertionError("no kept record")


def test_an_import_refuses_an_erasure_its_redaction_does_not_name(
    tmp_path: Path,
) -> None:
    db = tmp_path / "trace.sqlite"
    _erased, redaction = redacted_trace(db, "s")
    lines = export_lines(db)
    kept = _kept_id(lines)
    edited = []
    for line in lines[1:-1]:
        obj = json.loads(line)
        for record in records_of(line, obj):
            if record["record_id"] == kept:
                del record["payload"]
                record["redacted_by"] = redaction  # a real one, naming another
        edited.append(json.dumps(obj, sort_keys=True, separators=(",", ":")) + "\n")
    forged = resign([lines[0], *edited, lines[-1]])
    with SQLiteTraceStore(tmp_path / "copy.sqlite") as copy:
        with pytest.raises(ImportRejectedError) as refused:
            import_trace(forged, copy)
        assert copy.max_position() == -1
    message = str(refused.value)
    assert "\n" not in message
    assert f"record {kept} is exported redacted by {redaction}" in message
    assert "but no redaction record of the file names it" in message


def test_verify_names_a_body_erased_under_a_redaction_that_does_not_name_it(
    tmp_path: Path,
) -> None:
    db = tmp_path / "trace.sqlite"
    _erased, redaction = redacted_trace(db, "s")
    kept = _kept_id(export_lines(db))
    with SQLiteTraceStore(db) as store:
        assert verify_trace(store).ok
        with store.engine.begin() as conn:
            conn.execute(
                text("UPDATE records SET body_json = :b WHERE record_id = :r"),
                {"b": redacted_body_json(redaction), "r": kept},
            )
        report = verify_trace(store)
    assert not report.ok
    named = [p for p in report.problems if kept in str(p)]
    assert named, report.problems
    assert any("no redaction record names" in str(p) for p in named), named
