"""The rows of the side tables as the commit chain's side steps digest them (ADR 0064).

A side table holds rows the trace references but does not contain: the
materialization ledger (``materialization_intents``) and the legacy checkpoint
blob table (``checkpoint_snapshots``). Every write to one is a step of the
commit chain (``side_writes``) carrying :func:`ledger_row_digest` or
:func:`blob_row_digest` of the row it left. This module computes those
digests from values or from stored rows, and lists the steps that a trace
written before schema v3 gets, once, for the side rows it already holds.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any, Final

from goatherd.infrastructure.store.chain import ChainProblem, SideContent, row_digest
from goatherd.infrastructure.store.driver import Driver
from goatherd.infrastructure.store.schema import (
    checkpoint_snapshots,
    materialization_intents,
)

__all__ = [
    "BLOBS",
    "LEDGER",
    "blob_row_digest",
    "ledger_row_digest",
    "stored_row_digests",
    "unchained_steps",
]

LEDGER: Final = materialization_intents.name
BLOBS: Final = checkpoint_snapshots.name


def ledger_row_digest(
    intent: str, request_digest: str, receipt_json: str, completed_at: str
) -> str:
    """Return the row digest of one ``materialization_intents`` row (every column).

    Raises:
        TypeError: a value that is not text (a tampered row).
    """
    return row_digest(
        {
            "materialize_intent_id": intent,
            "request_digest": request_digest,
            "receipt_json": receipt_json,
            "completed_at": completed_at,
        }
    )


def blob_row_digest(
    checkpoint_id: str,
    scope_id: str,
    seq: int,
    state_json: str,
    snapshot: bytes,
    created_at_unixnano: int,
) -> str:
    """Return the row digest of one ``checkpoint_snapshots`` row, as stored.

    ``seq`` is the stored (signed 64-bit) value; the snapshot enters as the
    SHA-256 of its bytes.

    Raises:
        TypeError: a value of the wrong type (a tampered row).
    """
    if not isinstance(snapshot, bytes | bytearray | memoryview):
        raise TypeError(f"snapshot is {type(snapshot).__name__}, not bytes")
    return row_digest(
        {
            "checkpoint_id": checkpoint_id,
            "scope_id": scope_id,
            "seq": seq,
            "state_json": state_json,
            "snapshot": "sha256:" + hashlib.sha256(bytes(snapshot)).hexdigest(),
            "created_at_unixnano": created_at_unixnano,
        }
    )


def stored_row_digests(sql: Driver) -> list[tuple[str, str, str | Exception]]:
    """Return ``(table, key, row digest or the error)`` of every side row.

    Ordered by table name, then key by code point (the same on SQLite and
    PostgreSQL, whatever the collation).
    """
    found: list[tuple[str, str, str | Exception]] = []
    for table, query, digest in _READERS:
        for row in sql.rows(query):
            try:
                found.append((table, _key(row[0]), digest(row)))
            except (TypeError, ValueError) as error:
                found.append((table, repr(row[0]), error))
    return sorted(found, key=lambda item: (item[0], item[1]))


def unchained_steps(sql: Driver, first_seq: int) -> list[SideContent | ChainProblem]:
    """Return one step per side row, numbered from ``first_seq`` (pre-v3 traces).

    What the upgrade to schema v3 writes, and what a read-only opener of an
    older trace links in memory: the steps that vouch for the side rows as
    the upgrade found them.
    """
    steps: list[SideContent | ChainProblem] = []
    for offset, (table, key, digest) in enumerate(stored_row_digests(sql)):
        seq = first_seq + offset
        if isinstance(digest, Exception):
            label = f"{table} {key}"
            steps.append(
                ChainProblem(seq, None, f"a side row is malformed: {digest}", label)
            )
        else:
            steps.append(SideContent(seq, table, key, digest))
    return steps


def _key(value: object) -> str:
    if not isinstance(value, str):
        raise TypeError(f"key is {type(value).__name__}, not text")
    return value


def _ledger(row: Sequence[Any]) -> str:
    return ledger_row_digest(*(_text(value) for value in row))


def _blob(row: Sequence[Any]) -> str:
    checkpoint_id, scope_id, seq, state_json, snapshot, created = row
    if type(seq) is not int or type(created) is not int:
        raise TypeError("seq and created_at_unixnano must be integers")
    return blob_row_digest(
        _text(checkpoint_id), _text(scope_id), seq, _text(state_json), snapshot, created
    )


def _text(value: object) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{type(value).__name__} value where text is stored")
    return value


_READERS: Final = (
    (
        LEDGER,
        "SELECT materialize_intent_id, request_digest, receipt_json, completed_at "
        "FROM materialization_intents",
        _ledger,
    ),
    (
        BLOBS,
        "SELECT checkpoint_id, scope_id, seq, state_json, snapshot, "
        "created_at_unixnano FROM checkpoint_snapshots",
        _blob,
    ),
)
