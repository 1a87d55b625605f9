"""Checkpoint blobs and the completed-materialization ledger.

Neither is a trace table: a checkpoint blob holds a checkpoint's restorable
halves, the ledger the receipts of completed materializations. The trace
references both by digest, and every write to either is a step of the
commit chain, in the same transaction (``side_writes``, ADR 0064): a crash
leaves the row and its step, or neither.
"""

from __future__ import annotations

import json

from sqlalchemy import Connection, delete, insert, select, update
from sqlalchemy.exc import IntegrityError

from goatherd.domain.errors import AppendIntentConflictError
from goatherd.domain.log import CheckpointBlob
from goatherd.domain.workspace import WorkspaceState
from goatherd.infrastructure.store.chain import commit_time
from goatherd.infrastructure.store.codec import storage_json
from goatherd.infrastructure.store.driver import Driver
from goatherd.infrastructure.store.schema import (
    checkpoint_snapshots,
    materialization_intents,
)
from goatherd.infrastructure.store.sealing import write_side_step
from goatherd.infrastructure.store.side import (
    BLOBS,
    LEDGER,
    blob_row_digest,
    ledger_row_digest,
)

__all__ = [
    "DEFAULT_CHECKPOINT_BLOB_LIMIT",
    "delete_blob",
    "load_blobs",
    "read_materialization",
    "record_materialization",
    "replace_materialization",
    "write_blob",
]

DEFAULT_CHECKPOINT_BLOB_LIMIT = 1 << 20
_U64 = 1 << 64
_I64_MAX = (1 << 63) - 1


def write_blob(
    conn: Connection,
    checkpoint_id: str,
    scope_id: str,
    seq: int,
    state: WorkspaceState,
    snapshot: bytes,
    created_at_ns: int,
) -> None:
    """Insert or replace one checkpoint row (``seq`` stored as signed 64-bit).

    The write and its side step commit together (``conn``'s transaction).
    """
    if not 0 <= seq < _U64:
        raise ValueError(f"checkpoint seq {seq} is not an unsigned 64-bit integer")
    stored_seq = seq - _U64 if seq > _I64_MAX else seq
    state_json = storage_json(state.to_json(), root="workspace_state")
    row = {
        "checkpoint_id": checkpoint_id,
        "scope_id": scope_id,
        "seq": stored_seq,
        "state_json": state_json,
        "snapshot": bytes(snapshot),
        "created_at_unixnano": created_at_ns,
    }
    conn.execute(
        delete(checkpoint_snapshots).where(
            checkpoint_snapshots.c.checkpoint_id == checkpoint_id
        )
    )
    conn.execute(insert(checkpoint_snapshots), row)
    digest = blob_row_digest(
        checkpoint_id, scope_id, stored_seq, state_json, snapshot, created_at_ns
    )
    write_side_step(Driver(conn), BLOBS, checkpoint_id, digest)


def delete_blob(conn: Connection, checkpoint_id: str) -> None:
    """Delete one checkpoint row (absent ids are fine, and write nothing).

    A deletion is a side step too (its row digest is ``NULL``).
    """
    deleted = conn.execute(
        delete(checkpoint_snapshots).where(
            checkpoint_snapshots.c.checkpoint_id == checkpoint_id
        )
    ).rowcount
    if deleted:
        write_side_step(Driver(conn), BLOBS, checkpoint_id, None)


def load_blobs(
    conn: Connection,
) -> tuple[tuple[CheckpointBlob, ...], tuple[str, ...]]:
    """Return every checkpoint oldest first, and the ids of rows that do not decode."""
    rows = conn.execute(
        select(checkpoint_snapshots).order_by(
            checkpoint_snapshots.c.created_at_unixnano,
            checkpoint_snapshots.c.seq,
            checkpoint_snapshots.c.checkpoint_id,
        )
    )
    blobs: list[CheckpointBlob] = []
    corrupt: list[str] = []
    for row in rows:
        try:
            state = WorkspaceState.from_json(json.loads(row.state_json))
        except (TypeError, ValueError, AttributeError):
            corrupt.append(row.checkpoint_id)
            continue
        blobs.append(
            CheckpointBlob(
                checkpoint_id=row.checkpoint_id,
                scope_id=row.scope_id,
                seq=row.seq + _U64 if row.seq < 0 else row.seq,
                state=state,
                snapshot=bytes(row.snapshot),
                created_at_ns=row.created_at_unixnano,
            )
        )
    return tuple(blobs), tuple(corrupt)


def read_materialization(conn: Connection, intent: str) -> tuple[str, str] | None:
    """Return ``(request_digest, receipt_json)`` of a completed intent, or ``None``."""
    row = conn.execute(
        select(
            materialization_intents.c.request_digest,
            materialization_intents.c.receipt_json,
        ).where(materialization_intents.c.materialize_intent_id == intent)
    ).first()
    return None if row is None else (row[0], row[1])


def record_materialization(
    conn: Connection, intent: str, request_digest: str, receipt_json: str
) -> None:
    """Insert a ledger row and its side step; the same digest again writes nothing.

    ``completed_at`` is set here (as the column default would read), since
    the row digest covers it.

    Raises:
        AppendIntentConflictError: the intent completed with a different digest.
    """
    stored = read_materialization(conn, intent)
    if stored is None:
        completed_at = commit_time(postgres=conn.dialect.name == "postgresql")
        try:
            with conn.begin_nested():
                conn.execute(
                    insert(materialization_intents),
                    {
                        "materialize_intent_id": intent,
                        "request_digest": request_digest,
                        "receipt_json": receipt_json,
                        "completed_at": completed_at,
                    },
                )
        except IntegrityError:
            stored = read_materialization(conn, intent)
        else:
            digest = ledger_row_digest(
                intent, request_digest, receipt_json, completed_at
            )
            write_side_step(Driver(conn), LEDGER, intent, digest)
            return
    if stored is not None and stored[0] != request_digest:
        raise AppendIntentConflictError(
            f"materialize intent '{intent}' was already committed with different "
            "content"
        )


def replace_materialization(
    conn: Connection,
    intent: str,
    request_digest: str,
    expected_receipt_json: str,
    receipt_json: str | None,
) -> bool:
    """Swap a ledger row's receipt if it still is ``expected_receipt_json``.

    A compare-and-swap for the started marker of an at-most-once
    materialization (ADR 0074): the row is replaced by ``receipt_json``
    (``completed_at`` set anew), or deleted when that is ``None``, only if it
    holds ``request_digest`` and exactly ``expected_receipt_json``. The write
    and its side step commit together. Returns whether the row was swapped.
    """
    match = (
        (materialization_intents.c.materialize_intent_id == intent)
        & (materialization_intents.c.request_digest == request_digest)
        & (materialization_intents.c.receipt_json == expected_receipt_json)
    )
    if receipt_json is None:
        if not conn.execute(delete(materialization_intents).where(match)).rowcount:
            return False
        write_side_step(Driver(conn), LEDGER, intent, None)
        return True
    completed_at = commit_time(postgres=conn.dialect.name == "postgresql")
    swapped = conn.execute(
        update(materialization_intents)
        .where(match)
        .values(receipt_json=receipt_json, completed_at=completed_at)
    ).rowcount
    if not swapped:
        return False
    digest = ledger_row_digest(intent, request_digest, receipt_json, completed_at)
    write_side_step(Driver(conn), LEDGER, intent, digest)
    return True
