"""The importer of one export's lines: each proven line's rows written at once.

:class:`_Importer` proves the intent, side, materialization, checkpoint and
blob lines in file order on one open connection, writes each line's rows,
and at the end checks what only the whole file shows (redactions, side rows
against their last side line, blob holders and addresses) before returning
the :class:`ImportSummary`. Intent lines are proven by
:mod:`.import_intent`, the framing of every line by :mod:`.export_lines`.
It imports the domain, the audit checks and rules, the blob store and the
store's schema, chain, codec and side modules (the rows go through the
caller's connection).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

from sqlalchemy import Connection, insert, select, update
from sqlalchemy.exc import IntegrityError

from goatherd.domain.errors import DomainError
from goatherd.domain.events.checkpoint import CheckpointCreated
from goatherd.domain.workspace import WorkspaceState
from goatherd.infrastructure.audit.checks import BLOB_CLOCK_SLACK, parse_timestamp
from goatherd.infrastructure.audit.rules import (
    BlobAddresses,
    LedgerRefs,
    blob_problems,
    is_hex_digest,
    ledger_refs,
)
from goatherd.infrastructure.blobs.store import blob_tables
from goatherd.infrastructure.portability.export_lines import (
    ImportRejectedError,
    _decode,
    _parse,
    _prove_end,
    _prove_header,
)
from goatherd.infrastructure.portability.import_intent import IntentProver, Lookup
from goatherd.infrastructure.portability.import_intent import text_field as _text
from goatherd.infrastructure.store.chain import (
    HOLE_TABLE,
    SideContent,
    parse_hole_key,
    side_digest,
)
from goatherd.infrastructure.store.codec import storage_json
from goatherd.infrastructure.store.schema import (
    META_NEXT_COMMIT,
    SIDE_TABLES,
    append_intents,
    checkpoint_snapshots,
    contexts,
    materialization_intents,
    meta,
    owner_ordinals,
    path_entries,
    side_writes,
)
from goatherd.infrastructure.store.side import (
    BLOBS,
    LEDGER,
    blob_row_digest,
    ledger_row_digest,
)

__all__ = ["ImportSummary"]

_INT64_MIN: Final = -(2**63)
_INT64_MAX: Final = 2**63 - 1
_LEDGER_TYPES: Final = ("materialization", "checkpoint")


@dataclass(frozen=True, slots=True)
class ImportSummary:
    """What an import wrote."""

    intents: int
    records: int
    path_entries: int
    checkpoints: int
    materializations: int
    blobs: int = 0
    head: str = ""
    side_writes: int = 0


@dataclass
class _Counts:
    intents: int = 0
    records: int = 0
    entries: int = 0
    checkpoints: int = 0
    materializations: int = 0


@dataclass
class _Importer:
    conn: Connection
    max_line_bytes: int
    accept_headless: bool = False
    digest: Any = field(default_factory=hashlib.sha256)
    counts: _Counts = field(default_factory=_Counts)
    number: int = 0
    seen_end: bool = False
    end: tuple[int, object] = (0, None)
    in_ledger: bool = False
    next_ordinal: dict[str, int] = field(default_factory=dict)
    next_position: int = 0
    logged: bool = False
    """Whether an earlier intent line placed a logged entry."""
    checkpoints: dict[str, tuple[dict[str, Any], str]] = field(default_factory=dict)
    blobs: set[str] = field(default_factory=set)
    ledger_ids: set[str] = field(default_factory=set)
    lookup: Lookup = field(init=False)
    addresses: BlobAddresses = field(default_factory=BlobAddresses)
    imported_blobs: set[str] = field(default_factory=set)
    imported_holders: dict[str, str] = field(default_factory=dict)
    redacted: dict[str, str] = field(default_factory=dict)
    redactions: dict[str, list[str]] = field(default_factory=dict)
    steps: int = 0
    """Commit numbers taken so far (intent and side lines)."""
    side_lines: int = 0
    latest: dict[tuple[str, str], tuple[int, str | None]] = field(default_factory=dict)
    """The last side line per side row: its line number and row digest."""
    side_rows: dict[tuple[str, str], tuple[int, str]] = field(default_factory=dict)
    """Each imported side row: its line number and row digest."""

    def __post_init__(self) -> None:
        self.lookup = Lookup(self.conn)
        for table in blob_tables():
            table.create(self.conn, checkfirst=True)

    def _blob(self, obj: dict[str, Any]) -> None:
        self.in_ledger = True
        digest = _text(obj, "digest", empty=False)
        data = base64.b64decode(_text(obj, "data_b64"), validate=True)
        actual = "sha256:" + hashlib.sha256(data).hexdigest()
        if actual != digest:
            raise ValueError(f"blob {digest}: its bytes digest to {actual}")
        holders = obj["holders"]
        if not isinstance(holders, list) or not holders:
            raise ValueError(f"blob {digest} is held by no holder")
        _once(self.imported_blobs, "blob", digest)
        contents, holder_table = blob_tables()
        self.conn.execute(
            insert(contents), {"digest": digest, "size": len(data), "data": data}
        )
        for holder in holders:
            if not isinstance(holder, str) or not holder:
                raise TypeError("blob holders must be non-empty strings")
            problem = self.addresses.holder_problem(holder, digest)
            if problem:
                raise ValueError(problem)
            if holder in self.imported_holders:
                raise ValueError(f"blob holder {holder!r} appears twice")
            self.imported_holders[holder] = digest
            self.conn.execute(
                insert(holder_table), {"holder": holder, "digest": digest}
            )

    def feed(self, number: int, raw: str | bytes) -> None:
        self.number = number
        if self.seen_end:
            raise ImportRejectedError(number, "content after the end line")
        text, data = _decode(number, raw, self.max_line_bytes)
        obj = _parse(number, text)
        if number == 1:
            _prove_header(number, obj)
        elif obj.get("type") == "end":
            _prove_end(number, obj, self.digest, self.accept_headless)
            self.end = (number, obj.get("head"))
            self.seen_end = True
            return
        else:
            self._prove_line(number, obj)
        self.digest.update(data)

    def _prove_line(self, number: int, obj: dict[str, Any]) -> None:
        kind = obj.get("type")
        try:
            if kind == "intent":
                self._intent(obj)
            elif kind == "side":
                self._side(obj)
            elif kind == "materialization":
                self._materialization(obj)
            elif kind == "checkpoint":
                self._checkpoint(obj)
            elif kind == "blob":
                self._blob(obj)
            else:
                raise ValueError(f"unknown line type {kind!r}")
        except ImportRejectedError:
            raise
        except IntegrityError:
            raise ImportRejectedError(
                number, "the line conflicts with rows of an earlier line"
            ) from None
        except (DomainError, KeyError, TypeError, ValueError, binascii.Error) as exc:
            reason = f"missing field {exc}" if isinstance(exc, KeyError) else str(exc)
            raise ImportRejectedError(number, reason) from None

    def _intent(self, obj: dict[str, Any]) -> None:
        if self.in_ledger:
            raise ValueError("an intent line after the ledger and checkpoint lines")
        prover = IntentProver(
            obj,
            self.lookup,
            self.next_ordinal,
            self.next_position,
            first_logged=not self.logged,
        )
        rows = prover.prove()
        self.logged = self.logged or prover.next_position > prover.first_position
        for table, values in rows.tables:
            if table is append_intents:
                # Commit numbers follow the lines (the export's commit order),
                # so the imported chain ends at the export's head (ADR 0038).
                values = [{**v, "commit_seq": self.steps} for v in values]
            if values:
                self.conn.execute(insert(table), values)
        self.next_position = prover.next_position
        for schema, payload in rows.runtime:
            self.addresses.note(schema, payload)
            if schema == CheckpointCreated.SCHEMA:
                checkpoint_id = str(payload.get("checkpoint_id"))
                self.checkpoints[checkpoint_id] = (payload, rows.committed_at)
        self.redacted.update(rows.redacted)
        self.redactions.update(rows.redactions)
        self.steps += 1
        self.counts.intents += 1
        self.counts.records += rows.record_count
        self.counts.entries += rows.entry_count

    def _side(self, obj: dict[str, Any]) -> None:
        """One write to a side table: the next step of the chain (ADR 0064)."""
        if self.in_ledger:
            raise ValueError("a side line after the ledger and checkpoint lines")
        table = _text(obj, "table", empty=False)
        if table == HOLE_TABLE:
            self._hole(obj)
            return
        if table not in SIDE_TABLES:
            raise ValueError(f"side table {table!r} is not one of {list(SIDE_TABLES)}")
        key = _text(obj, "row_key", empty=False)
        digest = obj["row_digest"]
        if digest is not None and not (
            isinstance(digest, str)
            and digest.startswith("sha256:")
            and is_hex_digest(digest[7:])
        ):
            raise ValueError(f"row_digest {digest!r} is not sha256:<hex> or null")
        content = SideContent(self.steps, table, key, digest)
        self.conn.execute(
            insert(side_writes),
            {
                "commit_seq": self.steps,
                "table_name": table,
                "row_key": key,
                "row_digest": digest,
                "commit_digest": side_digest(content),
            },
        )
        self.latest[table, key] = (self.number, digest)
        self.steps += 1
        self.side_lines += 1

    def _hole(self, obj: dict[str, Any]) -> None:
        """A commit number (and positions) a dead writer abandoned (ADR 0076)."""
        key = _text(obj, "row_key", empty=False)
        span = parse_hole_key(key)
        if obj["row_digest"] is not None:
            raise ValueError("a hole line's row_digest must be null")
        if span is not None:
            if span[0] != self.next_position:
                raise ValueError(
                    f"hole of log positions {key} where {self.next_position} is due"
                )
            self.next_position = span[1] + 1
        content = SideContent(self.steps, HOLE_TABLE, key, None)
        self.conn.execute(
            insert(side_writes),
            {
                "commit_seq": self.steps,
                "table_name": HOLE_TABLE,
                "row_key": key,
                "row_digest": None,
                "commit_digest": side_digest(content),
            },
        )
        self.steps += 1
        self.side_lines += 1

    def _check_side_rows(self) -> None:
        """Every side row as the last side line of its key left it (ADR 0064)."""
        if not self.side_lines:
            return  # an export before schema v3: the rows get steps at the end
        for table, key in sorted(set(self.latest) | set(self.side_rows)):
            step, row = self.latest.get((table, key)), self.side_rows.get((table, key))
            name = f"{table} row {key!r}"
            if step is None:
                assert row is not None
                reason = f"{name} was written by no side line"
            elif row is None:
                if step[1] is None:
                    continue
                reason = f"{name} is missing, the side line {step[0]} wrote it"
            elif step[1] is None:
                reason = f"{name} is present, the side line {step[0]} deleted it"
            elif step[1] != row[1]:
                reason = (
                    f"{name} digests to {row[1]}, the side line {step[0]} wrote "
                    f"{step[1]}"
                )
            else:
                continue
            raise ImportRejectedError(row[0] if row else self.number, reason)

    def _materialization(self, obj: dict[str, Any]) -> None:
        self.in_ledger = True
        intent = _text(obj, "materialize_intent_id", empty=False)
        _once(self.ledger_ids, "materialization", intent)
        receipt = obj["receipt"]
        if not isinstance(receipt, dict):
            raise TypeError("a materialization receipt must be an object")
        parsed = ledger_refs(receipt)
        lookup = Lookup(self.conn)
        for record_id in (*parsed.targets, *parsed.produced):
            if lookup.record(record_id) is None:
                raise ValueError(f"the receipt cites unknown record {record_id}")
        if parsed.produced:
            self._prove_produced(intent, parsed)
        digest, completed = _text(obj, "request_digest"), _text(obj, "completed_at")
        if not is_hex_digest(digest):
            raise ValueError(f"request_digest {digest!r} is not a SHA-256 hex digest")
        if parse_timestamp(completed) is None:
            raise ValueError(f"completed_at {completed!r} is not a timestamp")
        receipt_json = storage_json(receipt, root="receipt")
        self.conn.execute(
            insert(materialization_intents),
            {
                "materialize_intent_id": intent,
                "request_digest": digest,
                "receipt_json": receipt_json,
                "completed_at": completed,
            },
        )
        self.side_rows[LEDGER, intent] = (
            self.number,
            ledger_row_digest(intent, digest, receipt_json, completed),
        )
        self.counts.materializations += 1

    def _prove_produced(self, intent: str, receipt: LedgerRefs) -> None:
        # materialize appends its captures under its own intent id, placed
        # with a context naming the substrate (as verify checks).
        placed = self.conn.execute(
            select(path_entries.c.record_id, contexts.c.substrate_ref)
            .join(
                contexts, contexts.c.context_id == path_entries.c.retained_context_ref
            )
            .where(
                path_entries.c.append_intent_id == intent,
                path_entries.c.position.is_not(None),
            )
            .order_by(path_entries.c.position)
        ).all()
        if [row[0] for row in placed] != list(receipt.produced):
            raise ValueError(
                "the receipt's produced records are not what intent "
                f"{intent!r} appended"
            )
        if any(row[1] != receipt.substrate_ref for row in placed):
            raise ValueError(
                f"substrate {receipt.substrate_ref!r} is not the one its captures "
                "were placed with"
            )

    def _checkpoint(self, obj: dict[str, Any]) -> None:
        self.in_ledger = True
        state = WorkspaceState.from_json(obj["state"])
        snapshot = base64.b64decode(_text(obj, "snapshot_b64"), validate=True)
        seq, created = obj["seq"], obj["created_at_unixnano"]
        if type(seq) is not int or type(created) is not int:
            raise TypeError("checkpoint seq and created_at_unixnano must be integers")
        if not (
            _INT64_MIN <= seq <= _INT64_MAX and _INT64_MIN <= created <= _INT64_MAX
        ):
            raise ValueError("checkpoint seq and created_at_unixnano must fit 64 bits")
        checkpoint_id = _text(obj, "checkpoint_id", empty=False)
        scope_id = _text(obj, "scope_id")
        _once(self.blobs, "checkpoint", checkpoint_id)
        vouched = self.checkpoints.get(checkpoint_id)
        if vouched is not None:
            _prove_blob(checkpoint_id, scope_id, seq, state, snapshot, created, vouched)
        state_json = storage_json(state.to_json(), root="state")
        self.conn.execute(
            insert(checkpoint_snapshots),
            {
                "checkpoint_id": checkpoint_id,
                "scope_id": scope_id,
                "seq": seq,
                "state_json": state_json,
                "snapshot": snapshot,
                "created_at_unixnano": created,
            },
        )
        self.side_rows[BLOBS, checkpoint_id] = (
            self.number,
            blob_row_digest(
                checkpoint_id, scope_id, seq, state_json, snapshot, created
            ),
        )
        self.counts.checkpoints += 1

    def check_head(self, head: str) -> None:
        """Refuse unless the imported chain ends at the head the export names.

        The end line's head is required (:func:`_prove_end`) unless the
        caller accepted a headless export.
        """
        number, noted = self.end
        if noted is None and self.accept_headless:
            return
        if noted != head:
            raise ImportRejectedError(
                number,
                f"the imported commits chain to head {head}, the export names "
                f"{noted!r}: a line was edited or the export is not of this trace",
            )

    def _check_redactions(self) -> None:
        """Every redacted record must be named by the file's redaction record.

        The redaction record comes after the records it erased, so this runs
        once the whole file was read (ADR 0062).
        """
        for record_id, redaction in sorted(self.redacted.items()):
            if record_id not in self.redactions.get(redaction, ()):
                raise ImportRejectedError(
                    self.number,
                    f"record {record_id} is exported redacted by {redaction}, "
                    "but no redaction record of the file names it",
                )
        for redaction, erased in sorted(self.redactions.items()):
            for record_id in erased:
                if self.redacted.get(record_id) != redaction:
                    raise ImportRejectedError(
                        self.number,
                        f"redaction {redaction} names record {record_id}, which "
                        "the file does not hold in its redaction form",
                    )

    def finish(self) -> ImportSummary:
        if self.number == 0:
            raise ImportRejectedError(0, "the file is empty")
        if not self.seen_end:
            raise ImportRejectedError(
                self.number, "the file ends without its end line (truncated?)"
            )
        self._check_redactions()
        self._check_side_rows()
        for holder, digest in sorted(self.addresses.holders().items()):
            if self.imported_holders.get(holder) != digest:
                raise ImportRejectedError(
                    self.number, f"blob holder {holder!r} of {digest} has no blob line"
                )
        missing = sorted(self.addresses.live() - self.imported_blobs)
        if missing:
            raise ImportRejectedError(
                self.number, f"blob {missing[0]} named by the trace has no blob line"
            )
        ordinals = [
            {"trace_owner_id": k, "next_ordinal": v}
            for k, v in self.next_ordinal.items()
        ]
        if ordinals:
            self.conn.execute(insert(owner_ordinals), ordinals)
        self.conn.execute(
            update(meta)
            .where(meta.c.key == META_NEXT_COMMIT)
            .values(value=str(self.next_position))
        )
        c = self.counts
        return ImportSummary(
            c.intents,
            c.records,
            c.entries,
            c.checkpoints,
            c.materializations,
            len(self.imported_blobs),
        )


def _prove_blob(
    checkpoint_id: str,
    scope_id: str,
    seq: int,
    state: WorkspaceState,
    snapshot: bytes,
    created_ns: int,
    vouched: tuple[dict[str, Any], str],
) -> None:
    payload, committed_at = vouched
    problems = blob_problems(
        checkpoint_id, scope_id, seq, state.to_json(), snapshot, payload
    )
    if problems:
        raise ValueError(f"checkpoint {checkpoint_id!r}: {problems[0]}")
    committed = parse_timestamp(committed_at)
    if committed is not None:
        created = datetime.fromtimestamp(created_ns / 1e9, UTC)
        if abs(created - committed) > BLOB_CLOCK_SLACK:
            raise ValueError(
                f"checkpoint {checkpoint_id!r}: created_at_unixnano lies more than "
                "a day from its record's commit"
            )


def _once(seen: set[str], kind: str, identifier: str) -> None:
    if identifier in seen:
        raise ValueError(f"{kind} {identifier!r} appears twice")
    seen.add(identifier)
