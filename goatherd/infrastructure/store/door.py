"""The door's refusals: one error family, and the blob-holder rule (ADR 0088).

Every refusal of ``append`` is a :class:`TraceStoreError`. The field and
shape checks of ``limits.py`` and ``plan.py`` raise the domain's errors
(:class:`BatchShapeError`, :class:`RecordInputError`,
:class:`CanonicalEncodingError`), which other layers raise too;
:func:`refused` turns one met at the door into its
:class:`AppendRefusedError` subclass, which is still the domain error (an
``except BatchShapeError`` keeps catching it) and keeps the message.

A ``checkpoint.created`` record names its snapshot by digest and a
``run_output.sealed`` record names its diff; ``verify`` names such a record
whose holder (``<checkpoint id>#snapshot``, ``<output id>#diff``) does not
hold those bytes. The runtime puts the bytes first (their own transaction),
then appends the record, so the door checks, in the append's transaction,
that the holder holds the digest and the bytes are stored: one primary-key
lookup per named blob, run only for a new append of such a record (an exact
replay of a committed intent returns its receipt, as before). On PostgreSQL
the lookup takes a share lock on both rows, so a concurrent release waits for
the append to commit; a connection asks the catalog whether the blob tables
exist until they do (a statement naming a missing table would abort the
append's transaction).
"""

from __future__ import annotations

import sqlite3
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from goatherd.domain.errors import (
    AppendRefusedError,
    BatchRefusedError,
    BatchShapeError,
    CanonicalEncodingError,
    CanonicalTypeError,
    CanonicalValueError,
    DomainError,
    PayloadRefusedError,
    PayloadTypeRefusedError,
    PayloadValueRefusedError,
    RecordInputError,
    RecordRefusedError,
    UnheldBlobError,
)
from goatherd.domain.events.checkpoint import CheckpointCreated
from goatherd.domain.events.output import OutputSealed
from goatherd.domain.records import AppendBatch
from goatherd.infrastructure.store.driver import Driver

__all__ = ["NamedBlob", "check_held", "named_blobs", "refused"]

SNAPSHOT_HOLDER: Final = "#snapshot"
DIFF_HOLDER: Final = "#diff"
_NAMING: Final = {
    CheckpointCreated.SCHEMA: ("checkpoint_id", "snapshot_digest", SNAPSHOT_HOLDER),
    OutputSealed.SCHEMA: ("output_id", "diff_blob", DIFF_HOLDER),
}
_HELD_SQL: Final = (
    "SELECT 1 FROM blob_holders h JOIN content_blobs c ON c.digest = h.digest "
    "WHERE h.holder = ? AND h.digest = ?"
)
_HELD_SQL_PG: Final = _HELD_SQL + " FOR SHARE"
_TABLES_SQL_PG: Final = (
    "SELECT to_regclass('blob_holders') IS NOT NULL "
    "AND to_regclass('content_blobs') IS NOT NULL"
)
_HAS_TABLES: Final[weakref.WeakKeyDictionary[Any, bool]] = weakref.WeakKeyDictionary()
"""PostgreSQL connections that have seen the blob tables (nothing drops them)."""


def refused(error: DomainError) -> DomainError:
    """Return ``error`` as the :class:`AppendRefusedError` the door raises.

    A store law's own :class:`TraceStoreError` (and any other error) is
    returned as it is. The new error keeps the message; the original is its
    ``__cause__``.
    """
    if isinstance(error, AppendRefusedError):
        return error
    wrapped: DomainError
    if isinstance(error, CanonicalEncodingError):
        kind: type[PayloadRefusedError] = PayloadRefusedError
        if isinstance(error, CanonicalTypeError):
            kind = PayloadTypeRefusedError
        elif isinstance(error, CanonicalValueError):
            kind = PayloadValueRefusedError
        wrapped = kind(error.path, error.reason)
    elif isinstance(error, BatchShapeError):
        wrapped = BatchRefusedError(*error.args)
    elif isinstance(error, RecordInputError):
        wrapped = RecordRefusedError(*error.args)
    else:
        return error
    wrapped.__cause__ = error
    return wrapped


@dataclass(frozen=True, slots=True)
class NamedBlob:
    """A blob a draft names: where the draft is, its schema, holder and digest."""

    where: str
    schema_ref: str
    holder: str
    digest: str


def named_blobs(batch: AppendBatch) -> tuple[NamedBlob, ...]:
    """Return every blob the batch's drafts name (usually none).

    Run after the runtime decoder accepted the batch, so a naming record's
    identifiers are text.
    """
    found: list[NamedBlob] = []
    for index, group in enumerate(batch.groups):
        for position, draft in enumerate(group.fact_drafts):
            naming = _NAMING.get(draft.schema_ref)
            if naming is None:
                continue
            id_key, digest_key, suffix = naming
            digest = draft.payload.get(digest_key)
            if not isinstance(digest, str) or not digest:
                continue  # names no bytes (an empty snapshot still has a digest)
            found.append(
                NamedBlob(
                    f"groups[{index}].fact_drafts[{position}]",
                    draft.schema_ref,
                    str(draft.payload.get(id_key)) + suffix,
                    digest,
                )
            )
    return tuple(found)


def check_held(driver: Driver, blobs: Sequence[NamedBlob]) -> None:
    """Refuse the append unless every named blob is held and stored.

    Runs in the append's write transaction.

    Raises:
        UnheldBlobError: the first blob no holder holds (or whose bytes are
            not stored, or a trace without a blob store).
    """
    if driver.postgres:
        # A statement naming a missing table would abort the transaction:
        # ask the catalog first, once per connection until the tables exist.
        exists = _HAS_TABLES.get(driver.raw, False)
        if not exists:
            ((exists,),) = driver.rows(_TABLES_SQL_PG)
            if exists:
                _HAS_TABLES[driver.raw] = True
        sql = _HELD_SQL_PG
    else:
        exists = True
        sql = _HELD_SQL
    for blob in blobs:
        if not exists or not _held(driver, sql, blob):
            raise UnheldBlobError(blob.where, blob.schema_ref, blob.holder, blob.digest)


def _held(driver: Driver, sql: str, blob: NamedBlob) -> bool:
    try:
        rows: list[Any] = driver.rows(sql, (blob.holder, blob.digest))
    except sqlite3.OperationalError as error:
        # SQLite: a trace no blob store ever opened has no blob tables (the
        # statement fails to compile; the transaction goes on).
        if "no such table" in str(error):
            return False
        raise
    return bool(rows)
