"""The SQLite key-value substrate: a world-side store separate from the trace.

``SQLiteKVSubstrate`` (ref ``kv.sqlite.local.v1``) applies
``shepherd2.kv.put.v1`` declarations ``{key, value}`` to its own SQLite file,
table ``kv(key TEXT PRIMARY KEY, value_json TEXT NOT NULL)``, never the trace
database. A batch is one transaction: a malformed put refuses the whole batch
(``SubstrateError``) before anything is written. Values are stored as
storage-flavour JSON and decoded keeping int and float apart. Replaying the
same puts is deterministic: same captures, same anchors, same world.

The substrate is exactly once (ADR 0074): ``materialize_once`` records the
intent's idempotency key in table ``applied_intents`` of the same world
database, in the same transaction as the puts. A re-dispatch after a crash
finds the key and writes nothing, returning the same captures; so the puts of
an intent are applied once, even if the world changed since.
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
    MaterializationDelivery,
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
_APPLIED_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS applied_intents (idempotency_key TEXT PRIMARY KEY)"
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
        self._connection.execute(_APPLIED_SCHEMA)

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

    def delivery_for(self, records: Sequence[Record]) -> MaterializationDelivery:
        """Every batch is delivered exactly once (see :meth:`materialize_once`)."""
        return MaterializationDelivery.EXACTLY_ONCE

    def materialize(self, records: Sequence[Record]) -> MaterializationResult:
        """Upsert every put in one transaction; refuse the batch if one is malformed.

        Raises:
            SubstrateError: a put lacks a non-empty string ``key`` or a
                ``value``; nothing was written.
        """
        return self._apply(records, None)

    def materialize_once(
        self, records: Sequence[Record], idempotency_key: str
    ) -> MaterializationResult:
        """Apply the puts unless ``idempotency_key`` was applied (one transaction).

        The key is inserted in the transaction of the puts: both commit or
        neither. An applied key writes nothing and returns the same result.

        Raises:
            SubstrateError: a malformed put (nothing written) or an empty key.
        """
        if not idempotency_key:
            raise SubstrateError("kv materialize_once: the idempotency key is empty")
        return self._apply(records, idempotency_key)

    def _apply(
        self, records: Sequence[Record], idempotency_key: str | None
    ) -> MaterializationResult:
        puts = [_parse_put(record) for record in records]
        with self._lock:
            self._connection.execute("BEGIN IMMEDIATE")
            try:
                if idempotency_key is None or self._claim(idempotency_key):
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

    def _claim(self, idempotency_key: str) -> bool:
        """Insert the key in the open transaction; False if it was applied."""
        inserted = self._connection.execute(
            "INSERT INTO applied_intents (idempotency_key) VALUES (?) "
            "ON CONFLICT(idempotency_key) DO NOTHING",
            (idempotency_key,),
        ).rowcount
        return inserted == 1

    def applied(self, idempotency_key: str) -> bool:
        """Return whether ``idempotency_key`` was applied to this world."""
        with self._lock:
            row = self._connection.execute(
                "SELECT 1 FROM applied_intents WHERE idempotency_key = ?",
                (idempotency_key,),
            ).fetchone()
        return row is not None

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
