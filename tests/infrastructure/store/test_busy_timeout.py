"""A SQLite store's busy timeout is a per-store option; an outage is one clear type."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest

import goatherd
from goatherd.domain import StoreUnavailableError
from goatherd.infrastructure.store import SQLiteTraceStore


def _batch(intent: str) -> goatherd.AppendBatch:
    return goatherd.AppendBatch(
        intent,
        (
            goatherd.AppendGroup(
                "owner", fact_drafts=(goatherd.RecordDraft("capture", "t.v1", {}),)
            ),
        ),
    )


def test_a_writer_locked_out_beyond_its_timeout_raises_and_writes_nothing(
    tmp_path: Path,
) -> None:
    path = tmp_path / "trace.sqlite"
    with SQLiteTraceStore(path, busy_timeout_ms=150) as store:
        store.append(goatherd.TRUSTED_APPEND_CONTEXT, _batch("first"))
        holder = sqlite3.connect(path, isolation_level=None)
        try:
            holder.execute("BEGIN EXCLUSIVE")
            started = time.monotonic()
            with pytest.raises(
                StoreUnavailableError, match="database is locked"
            ) as info:
                store.append(goatherd.TRUSTED_APPEND_CONTEXT, _batch("second"))
            waited = time.monotonic() - started
            assert isinstance(
                info.value.__cause__, sqlite3.OperationalError | Exception
            )
            assert not isinstance(info.value, goatherd.TraceStoreError)
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        assert waited < 10  # the short timeout, not the 30 s default
        assert store.read_append_intent("second") is None
        store.append(goatherd.TRUSTED_APPEND_CONTEXT, _batch("second"))
        assert store.max_position() == 1


@pytest.mark.parametrize("value", [-1, 1.5, True])
def test_a_bad_busy_timeout_is_refused(tmp_path: Path, value: object) -> None:
    with pytest.raises(ValueError, match="busy_timeout_ms"):
        SQLiteTraceStore(tmp_path / "t.sqlite", busy_timeout_ms=value)  # type: ignore[arg-type]
    assert not (tmp_path / "t.sqlite").exists()
