"""SQLite's joined ``read_log`` returns what the general statement path returns."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import select

from goatherd.domain import (
    TRUSTED_APPEND_CONTEXT,
    AppendBatch,
    AppendGroup,
    RecordDraft,
    TraceStoreError,
)
from goatherd.infrastructure.store import SQLiteTraceStore
from goatherd.infrastructure.store.codec import decode_body, decode_envelope
from goatherd.infrastructure.store.queries import _LOG_COLUMNS
from goatherd.infrastructure.store.schema import path_entries, records


def _fill(store: SQLiteTraceStore) -> None:
    for n in range(6):
        drafts = (
            RecordDraft("capture", f"s.{n % 2}", {"n": n, "text": "é\U0001f600"}),
            RecordDraft("capture", "s.0", {"n": n}, append_local_id="a"),
            RecordDraft("capture", "s.1", {"m": n}, caused_by_local_refs=("a",)),
        )
        group = AppendGroup(f"agent:{n % 3}", fact_drafts=drafts)
        store.append(TRUSTED_APPEND_CONTEXT, AppendBatch(f"i{n}", (group,)))


def _general(
    store: SQLiteTraceStore, after: int, limit: int, schemas: list[str] | None
) -> object:
    stmt = (
        select(*_LOG_COLUMNS)
        .where(path_entries.c.position > after)
        .order_by(path_entries.c.position)
        .limit(limit)
    )
    if schemas is not None:
        stmt = stmt.join(
            records, records.c.record_id == path_entries.c.record_id
        ).where(records.c.schema_ref.in_(schemas))
    return store._log_entries(stmt)


@pytest.mark.parametrize(
    ("after", "limit", "schemas"),
    [(-1, 1000, None), (4, 5, None), (-1, 1000, ["s.1"]), (2, 3, ["s.0", "s.1"])],
)
def test_the_joined_read_equals_the_statement_read(
    tmp_path: Path, after: int, limit: int, schemas: list[str] | None
) -> None:
    with SQLiteTraceStore(tmp_path / "t.sqlite") as store:
        _fill(store)
        general = _general(store, after, limit, schemas)
    # A fresh store (nothing cached) and a warm one read the same entries.
    with SQLiteTraceStore(tmp_path / "t.sqlite") as store:
        cold = store.read_log(after, limit, schema_refs=schemas)
        warm = store.read_log(after, limit, schema_refs=schemas)
    assert cold == general
    assert warm == general
    assert cold


def test_stored_json_decodes_and_refuses_as_json_loads_does() -> None:
    ident = "sha256:" + "0" * 64
    padded = decode_envelope(ident, ident, "s", "capture", "", ' ["p"] ')
    assert padded.caused_by_record_ids == ("p",)
    assert decode_body('{"payload": {"a": 1}}\n') == {"a": 1}
    with pytest.raises(TraceStoreError, match="body_json is not valid JSON"):
        decode_body('{"payload": {}} trailing')
    with pytest.raises(TraceStoreError, match="caused_by_json is not valid JSON"):
        decode_envelope(ident, ident, "s", "capture", "", "[")
