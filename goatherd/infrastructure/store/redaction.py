"""Erase payloads by a recorded redaction, in one write transaction (ADR 0062).

A redaction appends one ``goatherd.trace.redaction.v1`` declaration on the
``goatherd:redactions`` path, naming every erased record id (sorted) and the
reason and citing the erased records as its causal parents, and replaces each
erased record's ``body_json`` with the fixed form ``{"redacted_by":"<id>"}``.
Everything else of an erased record (id, digest, schema, mode, witness,
parents, path entries) stays: the head chain covers those, never payloads
(ADR 0038), so it stays valid; ``verify`` accepts a redacted body only when a
committed redaction record names it.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Final

from goatherd.domain.contexts import OperationContext
from goatherd.domain.errors import RedactionRefusedError, UnknownFactError
from goatherd.domain.events.base import is_runtime_schema
from goatherd.domain.identity import ROOT_WITNESS_SCHEMA_REF, WITNESS_SCHEMA_REF
from goatherd.domain.records import (
    DECLARATION,
    FRONTIER_SCHEMA_REF,
    REDACTION_KIND_LABEL,
    REDACTION_OWNER,
    REDACTION_SCHEMA_REF,
    AppendBatch,
    AppendGroup,
    AppendReceipt,
    RecordDraft,
)
from goatherd.infrastructure.store.appending import Member, run_group
from goatherd.infrastructure.store.codec import redacted_body_json, redacted_by
from goatherd.infrastructure.store.driver import placeholders
from goatherd.infrastructure.store.limits import AppendLimits
from goatherd.infrastructure.store.plan import ContextLookup, prepare
from goatherd.infrastructure.store.reader import StoreReader
from goatherd.infrastructure.store.staging import MemberPlan

__all__ = [
    "ErasedBodies",
    "MAX_REDACTED",
    "Redaction",
    "redact_in",
    "redaction_batch",
]

MAX_REDACTED: Final = 10_000
"""The most record ids one redaction may name (split larger erasures)."""

_KERNEL_SCHEMAS: Final = frozenset(
    {
        ROOT_WITNESS_SCHEMA_REF,
        WITNESS_SCHEMA_REF,
        REDACTION_SCHEMA_REF,
        FRONTIER_SCHEMA_REF,
    }
)
_ROWS_SQL = "SELECT record_id, schema_ref, body_json FROM records WHERE record_id IN "
_COMPRESSED_SQL = "SELECT record_id FROM records WHERE record_id IN "
_INTENT_SQL = "SELECT 1 FROM append_intents WHERE append_intent_id = ?"
_ERASE_SQL = "UPDATE records SET body_json = ? WHERE record_id = ?"
_CHUNK: Final = 800
_UI_EXISTS_SQLITE = (
    "SELECT count(*) FROM sqlite_master WHERE type = 'table' "
    "AND name = 'traceui_entries'"
)
_UI_EXISTS_PG = "SELECT to_regclass('traceui_entries') IS NOT NULL"
_UI_ROWS_SQL = "SELECT position, record_json FROM traceui_entries WHERE record_id IN "
_UI_ERASE_SQL = "UPDATE traceui_entries SET record_json = ? WHERE position = ?"


@dataclass(frozen=True, slots=True)
class Redaction:
    """What a committed redaction erased.

    Attributes:
        receipt: the append receipt of the redaction record.
        redaction_record_id: the redaction record's id (what erased bodies name).
        erased: the erased record ids, sorted.
        wal_truncated: SQLite: whether the WAL was checkpointed and truncated
            after the commit; the store waits up to its busy timeout for
            readers holding an old snapshot and for the background
            checkpointer (``False``: one still held it then, and the erased
            bytes may stay in the ``-wal`` file until the next checkpoint);
            always ``True`` on PostgreSQL and for a replay.
        bytes_left: the erased ids whose old body could still be read back
            after the redaction: on SQLite from the database file or its
            ``-wal`` after the checkpoint; on PostgreSQL with ``compact`` from
            the table files or a segment in ``pg_wal`` (or stored compressed,
            so that it cannot be searched for). Empty when every one checked
            is gone.
        steps: what the store did and checked after the commit, one line
            each (PostgreSQL with ``compact``: ``VACUUM (FULL)``,
            ``CHECKPOINT``, ``pg_switch_wal()``, each file read back; a step
            the role may not take says so).
        remains: where erased bytes may still be that the store could not
            clean or could not check, one line each (a WAL segment, a table
            not rewritten, the WAL archive, a replica). Empty on SQLite.
    """

    receipt: AppendReceipt
    redaction_record_id: str
    erased: tuple[str, ...]
    wal_truncated: bool = True
    bytes_left: tuple[str, ...] = ()
    steps: tuple[str, ...] = ()
    remains: tuple[str, ...] = ()

    @property
    def complete(self) -> bool:
        """Whether no erased byte is known or suspected to remain.

        Backups and copies taken before the redaction are outside what any
        store can see (docs/reliability.md).
        """
        return self.wal_truncated and not self.bytes_left and not self.remains


@dataclass(frozen=True, slots=True)
class ErasedBodies:
    """The erased records' stored bodies as they were, for the check after the commit.

    Attributes:
        bodies: record id to stored body.
        compressed: PostgreSQL: the ids whose body the server stored
            compressed (its bytes cannot be searched for on disk).
    """

    bodies: dict[str, str]
    compressed: tuple[str, ...] = ()


def redaction_batch(
    redaction_id: str, record_ids: Collection[str], reason: str
) -> AppendBatch:
    """Return the batch that records a redaction of ``record_ids``.

    Raises:
        RedactionRefusedError: no ids, too many, a non-string id or reason.
    """
    if isinstance(record_ids, str):
        raise RedactionRefusedError("record_ids must be a collection of ids, not a str")
    ids = sorted(set(record_ids))
    if not ids:
        raise RedactionRefusedError("a redaction must name at least one record id")
    if len(ids) > MAX_REDACTED:
        raise RedactionRefusedError(
            f"a redaction names at most {MAX_REDACTED} records, got {len(ids)}; "
            "split it"
        )
    if not all(isinstance(i, str) for i in ids):
        raise RedactionRefusedError("every record id to erase must be a string")
    if not isinstance(reason, str) or not reason.strip():
        raise RedactionRefusedError("a redaction needs a non-empty reason string")
    draft = RecordDraft(
        mode=DECLARATION,
        schema_ref=REDACTION_SCHEMA_REF,
        payload={"erased": ids, "reason": reason},
        kind_label=REDACTION_KIND_LABEL,
        caused_by_fact_ids=tuple(ids),
    )
    return AppendBatch(
        redaction_id, (AppendGroup(REDACTION_OWNER, fact_drafts=(draft,)),)
    )


def redact_in(
    reader: StoreReader,
    operation: OperationContext,
    batch: AppendBatch,
    contexts: ContextLookup,
    limits: AppendLimits,
) -> tuple[Redaction, list[MemberPlan], ErasedBodies]:
    """Record the redaction ``batch`` and erase what it names, in the open transaction.

    A replay of a committed redaction intent returns its stored receipt and
    erases nothing more. The third value holds each erased record's stored
    body as it was, for the check that its bytes left the disk.

    Raises:
        RedactionRefusedError: a record that may not be erased.
        UnknownFactError: an id that names no record.
        AppendIntentConflictError: the intent committed with other content.
    """
    (draft,) = batch.groups[0].fact_drafts
    ids: Sequence[str] = draft.caused_by_fact_ids
    replay = bool(reader.driver.rows(_INTENT_SQL, (batch.append_intent_id,)))
    if not replay:
        _check_erasable(reader, ids)
    member = Member(prepare(operation, batch, contexts, limits, redaction=True))
    plans = run_group(reader, [member])
    if member.error is not None:
        raise member.error
    assert member.outcome is not None
    receipt = member.outcome.receipt
    if not plans:  # a replay: the bodies were erased when it committed
        return (
            Redaction(receipt, receipt.fact_ids[0], tuple(ids)),
            plans,
            ErasedBodies({}),
        )
    redaction_record = plans[0].records[0].record_id
    old = ErasedBodies(_bodies(reader, ids), _compressed(reader, ids))
    body = redacted_body_json(redaction_record)
    reader.driver.run_many(_ERASE_SQL, [(body, record_id) for record_id in ids])
    _erase_ui_copies(reader, ids, redaction_record)
    return Redaction(receipt, redaction_record, tuple(ids)), plans, old


def _bodies(reader: StoreReader, ids: Sequence[str]) -> dict[str, str]:
    bodies: dict[str, str] = {}
    for start in range(0, len(ids), _CHUNK):
        chunk = ids[start : start + _CHUNK]
        marks = ", ".join("?" * len(chunk))
        query = f"SELECT record_id, body_json FROM records WHERE record_id IN ({marks})"  # noqa: S608 - placeholders only
        for record_id, body in reader.driver.rows(query, tuple(chunk)):
            bodies[str(record_id)] = str(body)
    return bodies


def _compressed(reader: StoreReader, ids: Sequence[str]) -> tuple[str, ...]:
    """PostgreSQL: the ids whose stored body the server compressed."""
    if not reader.driver.postgres:
        return ()
    found: list[str] = []
    for start in range(0, len(ids), _CHUNK):
        chunk = list(ids[start : start + _CHUNK])
        sql = (
            _COMPRESSED_SQL
            + placeholders(len(chunk))
            + " AND pg_column_compression(body_json) IS NOT NULL"
        )
        found.extend(str(row[0]) for row in reader.driver.rows(sql, chunk))
    return tuple(sorted(found))


def _erase_ui_copies(reader: StoreReader, ids: Sequence[str], redaction: str) -> None:
    """Erase the payload copies the trace UI index keeps in the same database.

    The index (``traceui_entries``) is a read model of the log that serves
    each record's JSON, payload included; left alone, it would keep the bytes.
    """
    sql = reader.driver
    exists = _UI_EXISTS_PG if sql.postgres else _UI_EXISTS_SQLITE
    if not sql.rows(exists)[0][0]:
        return
    rows = []
    for start in range(0, len(ids), _CHUNK):
        chunk = list(ids[start : start + _CHUNK])
        rows.extend(sql.rows(_UI_ROWS_SQL + placeholders(len(chunk)), chunk))
    updates = []
    for position, text in rows:
        shown = json.loads(text)
        shown["payload"] = {}
        shown["redacted_by"] = redaction
        updates.append(
            (json.dumps(shown, sort_keys=True, separators=(",", ":")), position)
        )
    sql.run_many(_UI_ERASE_SQL, updates)


def _check_erasable(reader: StoreReader, ids: Sequence[str]) -> None:
    found: dict[str, tuple[str, str]] = {}
    for start in range(0, len(ids), _CHUNK):
        chunk = list(ids[start : start + _CHUNK])
        sql = _ROWS_SQL + placeholders(len(chunk))
        if reader.driver.postgres:
            # Two concurrent redactions of one record: the second waits here,
            # then sees the first one's body and refuses.
            sql += " ORDER BY record_id FOR UPDATE"
        for row in reader.driver.rows(sql, chunk):
            found[row[0]] = (row[1], row[2])
    for record_id in ids:
        stored = found.get(record_id)
        if stored is None:
            raise UnknownFactError(f"cannot erase {record_id}: no such record")
        schema, body = stored
        reason = _refusal(schema, body)
        if reason is not None:
            raise RedactionRefusedError(f"cannot erase {record_id}: {reason}")


def _refusal(schema: str, body: str) -> str | None:
    if schema == REDACTION_SCHEMA_REF:
        return "it is a redaction record"
    if schema in (ROOT_WITNESS_SCHEMA_REF, WITNESS_SCHEMA_REF):
        return "it is a witness (witness ids are recomputed from their bodies)"
    if schema in _KERNEL_SCHEMAS:
        return f"it is a {schema} record the store itself reads"
    if is_runtime_schema(schema):
        return f"it is a runtime {schema} record (recovery folds it from its payload)"
    erased_by = redacted_by(body)
    if erased_by is not None:
        return f"it was already erased by redaction {erased_by}"
    return None
