"""The SQLite key-value substrate: a world-side store separate from the trace.

``SQLiteKVSubstrate`` (ref ``kv.sqlite.local.v1``) applies
``shepherd2.kv.put.v1`` declarations ``{key, value}`` to its own SQLite file,
table ``kv(key TEXT PRIMARY KEY, value_json TEXT NOT NULL)``, never the trace
database. A batch is one transaction: a malformed put refuses the whole batch
(``SubstrateError``) before anything is written. Values are stored as
storage-flavour JSON and decoded keeping int and float apart. Replaying the
same puts is deterministic: same captures, same anchors, same world.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from collections.abc import Sequence
from types import TracebackType
from typing import Final, Self

from goatherd.application import SubstrateError
from goatherd.domain import (
    CAPTURE,
    MaterializationOutcome,
    MaterializationResult,
    Record,
    RecordDraft,
    canonical_json_ascii_bytes,
)

__all__ = [
    "KVSubstrate",
    "KV_PUT_APPLIED_SCHEMA_REF",
    "KV_PUT_SCHEMA_REF",
    "KV_SUBSTRATE_REF",
    "SQLiteKVSubstrate",
]

KV_SUBSTRATE_REF: Final = "kv.sqlite.local.v1"
KV_PUT_SCHEMA_REF: Final = "shepherd2.kv.put.v1"
KV_PUT_APPLIED_SCHEMA_REF: Final = "shepherd2.kv.put.applied.v1"
_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS kv (key TEXT PRIMARY KEY, value_json TEXT NOT NULL)"
)
_UPSERT = (
    "INSERT INTO kv (key, value_json) VALUES (?, ?) "
    "ON CONFLICT(key) DO UPDATE SET value_json = excluded.value_json"
)


class SQLiteKVSubstrate:
    """Apply key-value puts to a world-side SQLite database."""

    def __init__(self, path: str | os.PathLike[str] = ":memory:") -> None:
        self._lock = threading.Lock()
        self._connection = sqlite3.connect(
            os.fspath(path), check_same_thread=False, isolation_level=None
        )
        self._connection.execute(_SCHEMA)

    @property
    def substrate_ref(self) -> str:
        return KV_SUBSTRATE_REF

    @property
    def declaration_schemas(self) -> frozenset[str]:
        return frozenset({KV_PUT_SCHEMA_REF})

    @property
    def capture_schemas(self) -> frozenset[str]:
        return frozenset({KV_PUT_APPLIED_SCHEMA_REF})

    @property
    def containment(self) -> str:
        return "contained"

    def materialize(self, records: Sequence[Record]) -> MaterializationResult:
        """Upsert every put in one transaction; refuse the batch if one is malformed.

        Raises:
            SubstrateError: a put lacks a non-empty string ``key`` or a
                ``value``; nothing was written.
        """
        puts = [_parse_put(record) for record in records]
        with self._lock:
            self._connection.execute("BEGIN IMMEDIATE")
            try:
                for key, value_json, _ in puts:
                    self._connection.execute(_UPSERT, (key, value_json))
            except BaseException:
                self._connection.execute("ROLLBACK")
                raise
            self._connection.execute("COMMIT")
        drafts = tuple(
            _applied(record, key, value)
            for record, (key, _, value) in zip(records, puts, strict=True)
        )
        anchors = tuple(
            {"kind": "kv_key", "key": key, "substrate_ref": KV_SUBSTRATE_REF}
            for key, _, _ in puts
        )
        return MaterializationResult(
            MaterializationOutcome.SUCCESS, drafts, "", anchors
        )

    def get(self, key: str) -> object | None:
        """Return the decoded value stored under ``key``, or ``None``."""
        with self._lock:
            row = self._connection.execute(
                "SELECT value_json FROM kv WHERE key = ?", (key,)
            ).fetchone()
        return None if row is None else json.loads(row[0])

    def close(self) -> None:
        """Close the world database (idempotent)."""
        with self._lock:
            self._connection.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _parse_put(record: Record) -> tuple[str, str, object]:
    key = record.payload.get("key")
    if not isinstance(key, str) or not key:
        raise SubstrateError(
            f"kv put {record.record_id}: key must be a non-empty string"
        )
    if "value" not in record.payload:
        raise SubstrateError(f"kv put {record.record_id}: value is required")
    value = record.payload["value"]
    value_json = canonical_json_ascii_bytes(value, root="value").decode("ascii")
    return key, value_json, value


def _applied(record: Record, key: str, value: object) -> RecordDraft:
    return RecordDraft(
        mode=CAPTURE,
        schema_ref=KV_PUT_APPLIED_SCHEMA_REF,
        kind_label="kv_put_applied",
        payload={"key": key, "value": value},
        caused_by_fact_ids=(record.record_id,),
    )


KVSubstrate = SQLiteKVSubstrate
